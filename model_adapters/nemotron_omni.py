"""Nemotron-3-Nano-Omni-30B-A3B-Reasoning through transformers 5.24's native ``nemotron_h_omni``:
``NemotronH_Omni_Reasoning_V3`` (a NemotronH Mamba-2/attention/MoE language model with a RADIO
vision tower) + ``NemotronH_Omni_Reasoning_V3Processor``.

The video path is the shared base's: the sampler's frames go to the processor with their
``video_metadata``. Its video processor resizes each frame to one aspect-preserving tile of about
``video_target_num_patches`` (1024) 16-px patches (672x384 for 16:9), so this adapter has the
sampler deliver the frames at exactly that tile, computed by the processor itself and resized
from the native frames with its kernel (antialiased bicubic), and the processor leaves them as
they are (docs/video.md; ``max_pixels=`` set to anything but its default keeps the older path: frames
of at most that many pixels, resized again by the processor);
two consecutive frames make one tubelet of 256 tokens, labelled "Frame i sampled at t seconds
and frame i+1 ...". The model's "Efficient Video Sampling" prunes the video tokens least
different from the same position in the previous tubelet, at the rate the checkpoint's config
sets (``video_pruning_rate``; 0 turns it off); ``video_pruning_rate=`` overrides it.

It is a reasoning model: the chat template opens ``<think>`` and the model reasons before it
answers, so

- the generation budget covers the reasoning: ``max_new_tokens`` defaults to 20,480 (the model
  card's thinking-mode ``max_tokens``) instead of the task's answer budget; ``max_new_tokens=``
  overrides it, ``enable_thinking=false`` turns reasoning off (and the task's budget applies);
- the response is written as ``<think>reasoning</think>answer``, split on the ``</think>``
  token itself (it is a special token, which plain decoding would drop), with the task's stop
  strings applied to the answer only; a reasoning cut off by the budget stays an open
  ``<think>reasoning``, which the extractor scores invalid ("unfinished_reasoning"), never a
  letter read from inside the reasoning.

The NVFP4 checkpoint is ModelOpt-quantized; transformers 5.24 cannot load a pre-quantized NVFP4
checkpoint (its NVFP4 quantizer only quantizes full-precision weights while loading, on a
Blackwell GPU), so this adapter refuses it by name of the problem and points at the vLLM path
(``naru_openai_compat``, docs/adapters.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from naru_eval.adapters.args import ANSWERS, Flag, HFArgs
from naru_eval.adapters.base import NaruRequest
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.positions import NO_ROPE
from naru_eval.core.budgets import FrameBudget, Sampling

if TYPE_CHECKING:
    from naru_eval.media.frame_cache import SamplingParams

#: max_new_tokens with reasoning on: the model card's thinking-mode max_tokens (a 16,384-token
#: reasoning budget plus room for the answer)
REASONING_MAX_NEW_TOKENS = 20_480
#: the video processor's tile: video_target_num_patches=1024 patches of 16 px
NATIVE_FRAME_PIXELS = 512 * 512
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class NemotronArgs(HFArgs):
    """Args of Nemotron-Omni: reasoning, video-token pruning and its native frame size."""

    enable_thinking: Flag = Field(
        True, description="reason in `<think>` before the answer (the model's default)", json_schema_extra=ANSWERS
    )
    video_pruning_rate: float | None = Field(
        None,
        description="Efficient Video Sampling: the fraction of video tokens pruned, in [0, 1) (else the config's)",
        json_schema_extra=ANSWERS,
    )
    max_pixels: int | None = Field(
        NATIVE_FRAME_PIXELS,
        ge=1,
        description="pixels per frame (default 512x512, the video processor's tile)",
        json_schema_extra=ANSWERS,
    )

    @field_validator("video_pruning_rate")
    @classmethod
    def _rate(cls, v: float | None) -> float | None:
        if v is not None and not 0 <= v < 1:
            raise ValueError("must be in [0, 1)")
        return v


class NemotronOmni(HFVideoModel):
    """Nemotron-3-Nano-Omni-30B-A3B-Reasoning (``nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16``)."""

    family = Family(
        id="naru_nemotron_omni",
        args=NemotronArgs,
        default=Official(Sampling(frames=128), rows=("Nemotron-3-Nano-Omni-30B-A3B-Reasoning",)),
        # the leaderboard ran the NVFP4 checkpoint (through a server: transformers cannot load it) at 2048 frames
        by_checkpoint={
            "Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4": Official(
                Sampling(frames=2048), rows=("Nemotron-3-Nano-Omni-30B-A3B-Reasoning (NVFP4)",)
            )
        },
        budget=FrameBudget(
            frames=128,
            checkpoint="nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16",
            context_tokens=262_144,
            tokens_per_frame=128,
            source=(
                "model card: 256K-token context; transformers 5.24 NemotronH_Omni_Reasoning_V3VideoProcessor "
                "resizes each frame to one tile of ~video_target_num_patches=1024 16-px patches (512x512 px), "
                "packs 2 frames into a tubelet and pixel-shuffles 2x2: 1024 / 4 = 256 tokens per tubelet, 128 per "
                "frame. 128 frames = 16,384 tokens; 2048 frames = 262,144 tokens, the whole context, so 2048 "
                "only fits with Efficient Video Sampling pruning (video_pruning_rate > 0)."
            ),
        ),
        checkpoints={"nemotron_h_omni": "NemotronH_Omni_Reasoning_V3"},
        #: NemotronH's attention layers have no rotary embedding: positions only order the cache
        positions=NO_ROPE,
    )
    args: NemotronArgs

    def __init__(self, **model_args: Any) -> None:
        super().__init__(**model_args)
        self.thinking = self.args.enable_thinking
        self.template_kwargs = {"enable_thinking": self.thinking}
        self.reasoning_max_new_tokens = REASONING_MAX_NEW_TOKENS if self.thinking else None
        self.video_pruning_rate = self.args.video_pruning_rate

    def family_description(self) -> dict[str, Any]:
        return {"video_pruning_rate": self.video_pruning_rate, "reasoning_budget": self.reasoning_max_new_tokens}

    # -- the frames at the processor's tile ----------------------------------------------------
    def frame_params(self, video: str) -> SamplingParams:
        if self.sampling.max_pixels != NATIVE_FRAME_PIXELS:  # the user's own pixel cap
            return super().frame_params(video)
        from naru_eval.media.frame_cache import sampling_params
        from naru_eval.media.video import probe_video

        info = probe_video(video, check_end=False)
        s = self.sampling
        tile = self.tile(info.height, info.width)
        if self.tile(*tile) != tile:
            # the processor would pick another tile for a frame of this tile's shape and resize
            # again: hand it the native frames, which it resizes once, as its reference does
            return sampling_params(num_frames=s.frames, fps=s.fps, max_frames=s.max_frames, max_pixels=None)
        return sampling_params(num_frames=s.frames, fps=s.fps, max_frames=s.max_frames, size=tile, resize="float")

    def tile(self, height: int, width: int) -> tuple[int, int]:
        """(height, width) of the tile the video processor resizes a ``height`` x ``width`` frame
        to: its own choice (``_compute_target_patches``, x its patch size)."""
        vp = self.ensure_processor().video_processor
        target = getattr(vp, "_compute_target_patches", None)
        if target is None:
            raise RuntimeError(
                f"{self.model_id}: this transformers' Nemotron-Omni video processor has no "
                "_compute_target_patches; its frame tile cannot be read (transformers 5.24 has it)"
            )
        pw, ph = target(int(height), int(width))
        return int(ph) * int(vp.patch_size), int(pw) * int(vp.patch_size)

    # -- loading ------------------------------------------------------------------------------
    def model_class(self) -> Any:
        import transformers

        config = transformers.AutoConfig.from_pretrained(self.pretrained, **self._pretrained_kwargs())
        quant = getattr(config, "quantization_config", None) or {}
        quant = quant if isinstance(quant, dict) else quant.to_dict()
        method = str(quant.get("quant_method", "")).lower()
        algo = str(quant.get("quant_algo", "")).lower()
        if method == "modelopt" or "fp4" in method or "fp4" in algo:
            raise ValueError(
                f"{self.model_id}: {self.pretrained} is a pre-quantized {quant.get('quant_algo') or method} "
                f"checkpoint ({method}); transformers {transformers.__version__} cannot load pre-quantized NVFP4 "
                "weights (its nvfp4 quantizer only quantizes full-precision weights, on Blackwell GPUs). Serve it "
                "with vLLM and use --model naru_openai_compat (docs/adapters.md), num_frames=2048 for the "
                "official row; or load the BF16 checkpoint here."
            )
        return super().model_class()

    def load_kwargs(self) -> dict[str, Any]:
        # a config override: from_pretrained sets it on the loaded config
        return {} if self.video_pruning_rate is None else {"video_pruning_rate": self.video_pruning_rate}

    # -- the answer after the reasoning ------------------------------------------------------
    def decode(self, request: NaruRequest, new_ids: list[int]) -> str:
        """``<think>reasoning</think>answer`` (stops cut the answer only), or an open
        ``<think>reasoning`` when the budget ran out before the reasoning closed."""
        if not self.thinking:
            return super().decode(request, new_ids)
        tok = self.processor.tokenizer
        close_id, open_id = (_token_id(tok, t) for t in (THINK_CLOSE, THINK_OPEN))

        def text(ids: list[int]) -> str:
            return tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

        if close_id is not None:  # split on the token: decoding may drop special tokens
            ids = [i for i in new_ids if i != open_id] if open_id is not None else list(new_ids)
            if close_id in ids:
                cut = ids.index(close_id)
                reasoning, answer = text(ids[:cut]), text(ids[cut + 1 :])
            else:
                reasoning, answer = text(ids), None
        else:  # not a single token, so not special: it survives decoding
            full = text(list(new_ids)).replace(THINK_OPEN, "")
            reasoning, sep, rest = full.partition(THINK_CLOSE)
            answer = rest if sep else None
        reasoning = reasoning.replace(THINK_CLOSE, "").strip()
        if answer is None:
            return f"{THINK_OPEN}\n{reasoning}"
        answer = self.cut_at_stops(answer.strip(), request.gen_kwargs.get("until"))
        return f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}\n\n{answer}"


def _token_id(tokenizer: Any, token: str) -> int | None:
    """The id of ``token`` when the vocabulary has it as one token."""
    tid = tokenizer.convert_tokens_to_ids(token)
    if tid is None or (tokenizer.unk_token_id is not None and tid == tokenizer.unk_token_id):
        return None
    return int(tid)
