"""The Qwen video families' shared input builder (Qwen2.5-VL, Qwen3-VL and Qwen3.5 are each a
module of ``model_adapters/`` whose builder is a :class:`QwenInputs`).

All three take the sampled frames as one uint8 array with a ``video_metadata`` entry:

- Qwen2.5-VL turns ``sampled_fps`` (= N / duration) into ``second_per_grid_ts``, the spacing of
  its temporal (MRoPE) position ids;
- Qwen3-VL and Qwen3.5 write a ``<t seconds>`` timestamp before each temporal patch, from the
  real frame numbers and fps. Their video processor samples frames itself by default
  (``do_sample_frames=True``, 2 fps); the base passes ``do_sample_frames=False``, so it keeps
  exactly the frames given.

Sampling by rate (``fps=``) follows qwen-vl-utils for the frame count and size
(:mod:`naru_eval.adapters.qwen_sampling`): the frames are decoded by the one sampler at the
plan's per-frame limit, resized to exactly the plan's size, and the processor is told not to
resize again. A fixed frame count (``num_frames=``) keeps the sampler's <=448x448 px frames and
the processor's own per-frame cap.

The position ids are Qwen's reference M-RoPE (:mod:`naru_eval.adapters.hf.positions`), the same
in the shared-prefix and the per-question path, whatever the installed transformers computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from naru_eval.adapters.args import ANSWERS, HFArgs
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.hf.builder import InputBuilder, ProcessorKwargs
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.hf.positions import generation_position_ids, geometry_of
from naru_eval.adapters.qwen_sampling import QwenVideoPlan, qwen_video_plan
from naru_eval.adapters.request import RequestFailed
from naru_eval.core.budgets import Sampling
from naru_eval.core.json_types import JSONObject

if TYPE_CHECKING:
    import torch

    from naru_eval.media.frame_cache import SamplingParams
    from naru_eval.media.sampler import SampledFrames


class QwenArgs(HFArgs):
    """Args of the Qwen families: the base's and qwen-vl-utils' frame floor."""

    min_frames: int | None = Field(
        None,
        ge=1,
        description="the floor of a rate-sampled frame count (else qwen-vl-utils' FPS_MIN_FRAMES, 4)",
        json_schema_extra=ANSWERS,
    )

    @property
    def sampling(self) -> Sampling:
        return replace(super().sampling, min_frames=self.min_frames)


#: the builder's own output: each temporal patch's time (seconds from its video part's first
#: patch), for frames chosen for the question (not evenly spaced): never given to the model
PATCH_T = "naru_patch_t"


class QwenInputs(InputBuilder):
    """The Qwen families' shared rate sampling and positions (the module docstring); a family
    sets its ``patch_size``."""

    #: qwen-vl-utils' ``image_patch_size`` for this family
    patch_size: ClassVar[int] = 14
    #: a timestamp before each temporal patch splits the video into one-patch blocks (Qwen3-VL, Qwen3.5)
    split_video_frames: ClassVar[bool] = True
    #: the transcript goes between the video's temporal patches: the video is given as one chunk
    #: per stretch between cues, each with its own frames' numbers (so Qwen3-VL's ``<t seconds>``
    #: are the frames-only run's) and Qwen2.5-VL's spacing per temporal patch
    interleaves_transcript = True
    adapter_keys: ClassVar[tuple[str, ...]] = (PATCH_T,)

    def __init__(self, adapter: NaruModel, checkpoint: Checkpoint) -> None:
        super().__init__(adapter, checkpoint)
        self._plans: dict[str, QwenVideoPlan] = {}

    def processor_inputs(self, text: str, sampled: SampledFrames, processor: Any = None) -> Any:
        """The base's call; with frames chosen for the question, a one-block family (Qwen2.5-VL,
        whose processor gives one spacing per video) also gets each temporal patch's true time
        (:data:`PATCH_T`), from which :meth:`position_ids` puts it on the time axis."""
        out = super().processor_inputs(text, sampled, processor)
        if self.split_video_frames or self.adapter.selector is None:
            return out
        import torch

        g = self.interleave_group()
        parts = self.chunks(sampled) or [range(len(sampled.frames))]
        seconds: list[float] = []
        for r in parts:
            ts = [float(sampled.timestamps[i]) for i in r]
            ts += ts[-1:] * (-len(ts) % g)  # the processor pads the last patch with its last frame
            first = ts[0::g]
            seconds += [t - first[0] for t in first]
        out[PATCH_T] = torch.tensor(seconds, dtype=torch.float64)
        return out

    def description(self) -> JSONObject:
        s = self.adapter.sampling
        if s.fps is None:
            return {}
        from qwen_vl_utils import vision_process as vp  # MODEL_SEQ_LEN may come from the environment

        sizing: JSONObject = {  # the run key's record of qwen-vl-utils' sizing, for a rate-sampled run
            "patch_size": self.patch_size,
            "min_frames": s.min_frames,
            "model_seq_len": vp.MODEL_SEQ_LEN,
        }
        return {"qwen_vl_utils_sizing": sizing}

    def video_plan(self, video: str) -> QwenVideoPlan:
        """The qwen-vl-utils plan of ``video`` at this run's fps (probed once per video)."""
        from naru_eval.media.video import probe_video

        if video not in self._plans:
            s = self.adapter.sampling
            info = probe_video(video, check_end=False)
            try:
                self._plans[video] = qwen_video_plan(
                    info.frame_count,
                    info.fps,
                    info.height,
                    info.width,
                    fps=float(s.fps or 0.0),
                    patch_size=self.patch_size,
                    max_frames=s.max_frames,
                    min_frames=s.min_frames,
                    max_pixels=s.max_pixels,
                )
            except ValueError as e:  # e.g. fewer frames than FRAME_FACTOR
                raise RequestFailed(f"video {video}: qwen-vl-utils sampling at fps={s.fps:g}: {e}") from None
        return self._plans[video]

    def frame_params(self, video: str) -> SamplingParams:
        """By rate: qwen-vl-utils' frame count and size, resized by its own arithmetic from the
        native frames (``media.pixels.reference_resize``); a frame count: the declared cap."""
        if self.adapter.sampling.fps is None:
            return super().frame_params(video)
        from naru_eval.media.frame_cache import sampling_params

        plan = self.video_plan(video)
        return sampling_params(num_frames=plan.nframes, size=(plan.height, plan.width), resize="float")

    def position_ids(self, input_ids: torch.Tensor, inputs: Mapping[str, Any]) -> torch.Tensor | None:
        """Qwen's reference M-RoPE positions (``naru_eval.adapters.hf.positions``), the same in the
        shared-prefix and the per-question path, whatever the installed transformers computes."""
        if inputs.get("video_grid_thw") is None and inputs.get("image_grid_thw") is None:
            return None  # text only: one position per token, as the model's own
        grids, own = inputs.get("video_grid_thw"), inputs.get(PATCH_T)
        patch_seconds = None
        if own is not None and grids is not None:  # per video part: its patches' times
            counts = [int(t) for t, _, _ in grids.tolist()]
            flat = [float(x) for x in own.tolist()]
            cuts = [sum(counts[:k]) for k in range(len(counts) + 1)]
            patch_seconds = [flat[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
        return generation_position_ids(
            input_ids,
            geometry_of(self.model.config, self.split_video_frames),
            inputs.get("image_grid_thw"),
            grids,
            inputs.get("second_per_grid_ts"),
            patch_seconds,
        )

    def interleave_group(self) -> int:
        """A temporal patch (2 frames) is one video token: text goes between patches."""
        return int(getattr(self.processor.video_processor, "temporal_patch_size", 2))

    def frame_tokens(self, sampled: SampledFrames, n: int) -> int:
        """Qwen's merged patches: (h/28) x (w/28) per temporal patch of 2 frames at the frames' size."""
        import math

        h, w = (int(x) for x in sampled.frames.shape[1:3])
        merge = int(getattr(self.model.config.vision_config, "spatial_merge_size", 2))
        factor = self.patch_size * merge
        per = max(1, round(h / factor)) * max(1, round(w / factor))
        return per * math.ceil(int(n) / self.interleave_group())

    def family_processor_kwargs(self) -> ProcessorKwargs:
        return {"do_resize": False} if self.adapter.sampling.fps is not None else {}  # qwen-vl-utils' size
