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
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import CAP, PROCESSOR, Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.builder import ChatPart, InputBuilder, VideoMetadata
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.hf.positions import NO_ROPE
from naru_eval.adapters.hf.reasoning import think_split
from naru_eval.adapters.request import NaruRequest, RequestFailed
from naru_eval.core.budgets import FrameBudget, Sampling
from naru_eval.core.json_types import JSONObject
from naru_eval.media.audio_plan import NEMOTRON_OMNI
from naru_eval.media.sampler import frames_key

if TYPE_CHECKING:
    from naru_eval.media.sampler import SampledFrames
    from naru_eval.media.video import VideoInfo

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


class NemotronInputs(InputBuilder):
    """Frames at its tile, labelled with their true times; audio clips with their times; the
    answer after the reasoning."""

    args: NemotronArgs

    def __init__(self, adapter: NaruModel, checkpoint: Checkpoint) -> None:
        super().__init__(adapter, checkpoint)
        assert isinstance(adapter, AudioMixin), f"{type(adapter).__name__}: Nemotron-Omni's adapter hears audio"
        self.omni: AudioMixin = adapter
        #: a video's frames (``frames_key``) -> its audio items (seconds on the frames' axis), as the
        #: chat and the processor take them
        self._clips: dict[str, list[tuple[float, float]]] = {}
        self.thinking = self.args.enable_thinking
        self.template_kwargs = {"enable_thinking": self.thinking}
        self.reasoning_max_new_tokens = REASONING_MAX_NEW_TOKENS if self.thinking else None

    def description(self) -> JSONObject:
        return {
            "video_pruning_rate": self.args.video_pruning_rate,
            "reasoning_budget": self.reasoning_max_new_tokens,
            "frame_labels": "true-time",
            **self.omni.audio_description(),
        }

    def load_kwargs(self) -> dict[str, Any]:
        # a config override: from_pretrained sets it on the loaded config
        rate = self.args.video_pruning_rate
        return {} if rate is None else {"video_pruning_rate": rate}

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

    def media(self, request: NaruRequest) -> list[ChatPart]:
        """The video, then (with audio) one audio part per clip, each after a label with its times
        on the frames' clock ("Audio from 26.00 to 30.00 seconds:"), as the processor labels each
        frame pair with its times."""
        omni = self.omni
        parts: list[ChatPart] = [{"type": "video"}] if omni.gives_frames else []
        if omni.gives_audio and request.video is not None:
            for start, end in self.clips_of(self.adapter.frames(request)):
                parts.append({"type": "text", "text": f"Audio from {start:.2f} to {end:.2f} seconds:\n"})
                parts.append({"type": "audio"})
        return parts

    def clips_of(self, sampled: SampledFrames) -> list[tuple[float, float]]:
        key = frames_key(sampled)  # the clips follow the frames (chosen per question with select=)
        if key not in self._clips:
            self._clips[key] = self.clip_bounds(sampled)
        return self._clips[key]

    def frame_tokens(self, sampled: SampledFrames, n: int) -> int:
        if int(n) == 0:
            return 0
        out = self.processor.video_processor(
            videos=[self.video_input(sampled)[: int(n)]], temporal_patch_size=self.processor.video_temporal_patch_dim
        )
        pix = out["pixel_values_videos"]
        h, w = pix.shape[-2:]
        vp = self.processor.video_processor
        per = (h // vp.patch_size) * (w // vp.patch_size) // round(1 / vp.downsample_ratio) ** 2
        return int(pix.shape[1]) * per

    def clip_bounds(self, sampled: SampledFrames) -> list[tuple[float, float]]:
        """The audio items of the video's plan: its windows, each cut into clips of at most the
        encoder's longest (``max_clip_s``: 1,200 s, the longest training clip)."""
        omni = self.omni
        plan = omni.audio_plan(sampled, omni.frame_tokens_of(sampled) if omni.gives_frames else 0)
        longest = omni.encoder.max_clip_s or float("inf")
        out = []
        for start, end in plan.windows:
            at = start
            while at < end:
                out.append((at, min(end, at + longest)))
                at = min(end, at + longest)
        return out

    def processor_inputs(self, text: str, sampled: SampledFrames, processor: Any = None) -> Any:
        proc = processor or self.processor
        omni = self.omni
        kw: dict[str, Any] = {"return_tensors": "pt"}
        if omni.gives_frames:
            kw |= {"videos": [self.video_input(sampled)], "video_metadata": [self.video_metadata(sampled)]}
            kw |= self.processor_kwargs()
        if omni.gives_audio:
            audio, plan = omni.soundtrack(sampled, 0)
            clips = _cut(audio, self.clips_of(sampled))
            placeholders = text.count(proc.audio_token)
            if placeholders != len(clips):
                raise RequestFailed(
                    f"audio: the chat template placed {placeholders} audio placeholders for {len(clips)} clips "
                    "(a template that drops audio parts would feed the model no sound)"
                )
            kw["audio"] = clips
            omni._audio_records[sampled.info.path] = omni.audio_usage(audio, plan)
        return proc(text=[text], **kw)

    # -- the frames at the processor's tile ----------------------------------------------------
    def frame_params(self, video: str) -> SamplingParams:
        """At the processor's tile, unless ``max_pixels=`` sets the user's own pixel cap."""
        return self.sized(video, PROCESSOR if self.adapter.sampling.max_pixels == NATIVE_FRAME_PIXELS else CAP)

    def processor_size(self, info: VideoInfo) -> tuple[int, int] | None:
        """The tile the processor resizes the native frame to, resized from it with its kernel
        (antialiased bicubic); None (the native frames, which it resizes once, as its reference
        does) where the processor would pick another tile for a frame of this tile's shape."""
        tile = self.tile(info.height, info.width)
        return tile if self.tile(*tile) == tile else None

    def tile(self, height: int, width: int) -> tuple[int, int]:
        """(height, width) of the tile the video processor resizes a ``height`` x ``width`` frame
        to: its own choice (``_compute_target_patches``, x its patch size)."""
        vp = self.checkpoint.ensure_processor().video_processor
        target = getattr(vp, "_compute_target_patches", None)
        if target is None:
            raise RuntimeError(
                f"{self.adapter.model_id}: this transformers' Nemotron-Omni video processor has no "
                "_compute_target_patches; its frame tile cannot be read (transformers 5.24 has it)"
            )
        pw, ph = target(int(height), int(width))
        return int(ph) * int(vp.patch_size), int(pw) * int(vp.patch_size)

    # -- the answer after the reasoning ------------------------------------------------------
    def decode(self, request: NaruRequest, new_ids: list[int]) -> str:
        """``<think>reasoning</think>answer`` (stops cut the answer only), or an open
        ``<think>reasoning`` when the budget ran out before the reasoning closed."""
        if not self.thinking:
            return super().decode(request, new_ids)
        return think_split(self.processor.tokenizer, new_ids, request.gen_kwargs.get("until"))


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
        frames=PROCESSOR,  # its tile; max_pixels= set to anything but the tile's pixels: at most that many
        times="labelled-seconds",
    )
    Inputs = NemotronInputs
    encoder = NEMOTRON_OMNI


def _cut(audio: Any, bounds: list[tuple[float, float]]) -> list[Any]:
    """The samples of each ``(start, end)`` clip, each inside one of ``audio``'s windows."""
    out = []
    for start, end in bounds:
        w = next(k for k, (a, b) in enumerate(audio.windows) if a <= start < b)
        at = audio.offsets[w] + round((start - audio.windows[w][0]) * audio.rate)
        out.append(audio.samples[at : at + round((end - start) * audio.rate)])
    return out
