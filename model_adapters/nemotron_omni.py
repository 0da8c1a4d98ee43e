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

from naru_eval.adapters.args import ANSWERS, Flag
from naru_eval.adapters.audio import AudioMixin, AudioOffArgs
from naru_eval.adapters.base import NaruRequest, RequestFailed
from naru_eval.adapters.chat import TextPart
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.hf.base import ChatMediaPart, HFVideoModel, VideoMetadata
from naru_eval.adapters.hf.positions import NO_ROPE
from naru_eval.core.budgets import FrameBudget, Sampling
from naru_eval.media.audio_plan import NEMOTRON_OMNI

if TYPE_CHECKING:
    from naru_eval.media.sampler import SampledFrames

#: what the frame labels count in: the processor writes frame ``i``'s time as
#: ``frames_indices[i] x int(1000 / fps)`` ms, so the metadata is given on a millisecond clock
#: (fps 1000, each frame's index its time in ms) and the labels are the frames' true times
LABEL_CLOCK_HZ = 1000

if TYPE_CHECKING:
    from naru_eval.media.frame_cache import SamplingParams

#: max_new_tokens with reasoning on: the model card's thinking-mode max_tokens (a 16,384-token
#: reasoning budget plus room for the answer)
REASONING_MAX_NEW_TOKENS = 20_480
#: the video processor's tile: video_target_num_patches=1024 patches of 16 px
NATIVE_FRAME_PIXELS = 512 * 512
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class NemotronArgs(AudioOffArgs):
    """Args of Nemotron-Omni: reasoning, video-token pruning, its native frame size and the
    soundtrack (off: the official row ran frames only)."""

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


class NemotronOmni(AudioMixin, HFVideoModel):
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
        inputs=("frames", "audio"),
    )
    args: NemotronArgs
    encoder = NEMOTRON_OMNI

    def __init__(self, **model_args: Any) -> None:
        #: video -> its audio items (seconds on the frames' axis), as the chat and the processor take them
        self._clips: dict[str, list[tuple[float, float]]] = {}
        super().__init__(**model_args)
        self.thinking = self.args.enable_thinking
        self.template_kwargs = {"enable_thinking": self.thinking}
        self.reasoning_max_new_tokens = REASONING_MAX_NEW_TOKENS if self.thinking else None
        self.video_pruning_rate = self.args.video_pruning_rate

    def family_description(self) -> dict[str, Any]:
        return {
            "video_pruning_rate": self.video_pruning_rate,
            "reasoning_budget": self.reasoning_max_new_tokens,
            "frame_labels": "true-time",
            **self.audio_description(),
        }

    # -- frames and soundtrack ------------------------------------------------------------------
    def video_metadata(self, sampled: SampledFrames) -> VideoMetadata:
        """The frames' times on a millisecond clock: the processor labels frame ``i`` "sampled at
        ``frames_indices[i] x int(1000 / fps) / 1000`` seconds", which at the video's own rate
        runs early (``int(1000 / 29.97)`` = 33 ms a frame: 158 s early at the end of 4 hours); at
        1000 "fps" with each index the frame's time in ms, the label is its true time."""
        meta = super().video_metadata(sampled)
        stamps = [round(float(t) * LABEL_CLOCK_HZ) for t in sampled.timestamps]
        meta["fps"] = float(LABEL_CLOCK_HZ)
        meta["frames_indices"] = stamps
        meta["total_num_frames"] = max(
            stamps[-1] + 1 if stamps else 1, round(float(sampled.info.duration_s) * LABEL_CLOCK_HZ)
        )
        return meta

    def sampled(self, request: NaruRequest) -> SampledFrames | None:
        """The frames (audio only too: their times centre the audio windows); None without a video."""
        plan = self.plan_of(request)
        if request.video is None or (plan.frames is None and plan.audio is None):
            return None
        return self.frames(request)

    def chat_media(self, request: NaruRequest) -> list[ChatMediaPart | TextPart]:
        """The video, then (with audio) one audio part per clip, each after a label with its times
        on the frames' clock ("Audio from 26.00 to 30.00 seconds:"), as the processor labels each
        frame pair with its times."""
        parts: list[ChatMediaPart | TextPart] = [{"type": "video"}] if self.gives_frames else []
        if self.gives_audio and request.video is not None:
            for start, end in self.clips_of(self.frames(request)):
                parts.append({"type": "text", "text": f"Audio from {start:.2f} to {end:.2f} seconds:\n"})
                parts.append({"type": "audio"})
        return parts

    def clips_of(self, sampled: SampledFrames) -> list[tuple[float, float]]:
        video = sampled.info.path
        if video not in self._clips:
            self._clips[video] = self.clip_bounds(sampled)
        return self._clips[video]

    def frame_tokens_of(self, sampled: SampledFrames) -> int:
        out = self.processor.video_processor(
            videos=[self.video_input(sampled)], temporal_patch_size=self.processor.video_temporal_patch_dim
        )
        pix = out["pixel_values_videos"]
        h, w = pix.shape[-2:]
        vp = self.processor.video_processor
        per = (h // vp.patch_size) * (w // vp.patch_size) // round(1 / vp.downsample_ratio) ** 2
        return int(pix.shape[1]) * per

    def clip_bounds(self, sampled: SampledFrames) -> list[tuple[float, float]]:
        """The audio items of the video's plan: its windows, each cut into clips of at most the
        encoder's longest (``max_clip_s``: 1,200 s, the longest training clip)."""
        plan = self.audio_plan(sampled, self.frame_tokens_of(sampled) if self.gives_frames else 0)
        longest = self.encoder.max_clip_s or float("inf")
        out = []
        for start, end in plan.windows:
            at = start
            while at < end:
                out.append((at, min(end, at + longest)))
                at = min(end, at + longest)
        return out

    def run_processor(self, text: str, sampled: SampledFrames, processor: Any = None) -> Any:
        proc = processor or self.processor
        kw: dict[str, Any] = {"return_tensors": "pt"}
        if self.gives_frames:
            kw |= {"videos": [self.video_input(sampled)], "video_metadata": [self.video_metadata(sampled)]}
            kw |= self.processor_kwargs()
        if self.gives_audio:
            audio, plan = self.soundtrack(sampled, 0)
            clips = _cut(audio, self.clips_of(sampled))
            placeholders = text.count(proc.audio_token)
            if placeholders != len(clips):
                raise RequestFailed(
                    f"audio: the chat template placed {placeholders} audio placeholders for {len(clips)} clips "
                    "(a template that drops audio parts would feed the model no sound)"
                )
            kw["audio"] = clips
            self._audio_records[sampled.info.path] = self.audio_usage(audio, plan)
        return proc(text=[text], **kw)

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


def _cut(audio: Any, bounds: list[tuple[float, float]]) -> list[Any]:
    """The samples of each ``(start, end)`` clip, each inside one of ``audio``'s windows."""
    out = []
    for start, end in bounds:
        w = next(k for k, (a, b) in enumerate(audio.windows) if a <= start < b)
        at = audio.offsets[w] + round((start - audio.windows[w][0]) * audio.rate)
        out.append(audio.samples[at : at + round((end - start) * audio.rate)])
    return out


def _token_id(tokenizer: Any, token: str) -> int | None:
    """The id of ``token`` when the vocabulary has it as one token."""
    tid = tokenizer.convert_tokens_to_ids(token)
    if tid is None or (tokenizer.unk_token_id is not None and tid == tokenizer.unk_token_id):
        return None
    return int(tid)
