"""Qwen video families: Qwen2.5-VL, Qwen3-VL and Qwen3.5, over :class:`HFVideoModel`.

All three take the sampled frames as one uint8 array with a ``video_metadata`` entry:

- Qwen2.5-VL turns ``sampled_fps`` (= N / duration) into ``second_per_grid_ts``, the spacing of
  its temporal (MRoPE) position ids;
- Qwen3-VL and Qwen3.5 write a ``<t seconds>`` timestamp before each temporal patch, from the
  real frame numbers and fps. Their video processor samples frames itself by default
  (``do_sample_frames=True``, 2 fps); the base passes ``do_sample_frames=False``, so it keeps
  exactly the frames given.

**Sampling by rate** (``fps=``; Qwen3-VL's default, 0.25 fps, the official leaderboard's
setting) follows qwen-vl-utils, the Qwen models' reference input pipeline, exactly for the
frame count and the frame size (:func:`qwen_video_plan`): ``smart_nframes`` gives the count
(``duration x fps`` clamped to ``[FPS_MIN_FRAMES, min(FPS_MAX_FRAMES, total frames)]`` and
floored to a multiple of ``FRAME_FACTOR``), and the video's total pixel budget, split over
those frames, gives the per-frame pixel limit that ``smart_resize`` turns into the frame size.
A 4-hour video at 0.25 fps asks for 3,600 frames and gets 768. The frames themselves are still
decoded by the one sampler (evenly spaced segment centres, through the frame cache), then
resized to exactly that size, and the processor is told not to resize again.
A fixed frame count (``num_frames=``) keeps the sampler's <=448x448 px frames and the
processor's own per-frame cap, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypedDict

from pydantic import Field

from model_adapters.args import Flag, HFArgs
from model_adapters.base import NaruRequest, RequestFailed
from model_adapters.hf_base import HFDescription, HFVideoModel, ProcessorKwargs
from model_adapters.positions import QWEN_REFERENCE, generation_position_ids, geometry_of

if TYPE_CHECKING:
    from naru_eval.media.frame_cache import SamplingParams


class QwenVideoPlan(NamedTuple):
    """What qwen-vl-utils would feed a Qwen model for one video sampled by rate."""

    nframes: int
    height: int  # per-frame size after smart_resize (multiples of patch_size x merge size)
    width: int
    max_pixels: int  # the per-frame pixel limit the total budget gives
    min_pixels: int


class _SmartNframesEle(TypedDict, total=False):
    """The video entry ``qwen_vl_utils.smart_nframes`` reads its sampling from."""

    fps: float
    max_frames: int
    min_frames: int


def qwen_video_plan(
    total_frames: int,
    video_fps: float,
    height: int,
    width: int,
    fps: float,
    patch_size: int,
    max_frames: int | None = None,
    min_frames: int | None = None,
    max_pixels: int | None = None,
    total_pixels: int | None = None,
) -> QwenVideoPlan:
    """Frame count and frame size for ``fps`` sampling, as ``qwen_vl_utils.fetch_video`` computes
    them (qwen-vl-utils 0.0.14, ``vision_process.py``).

    The count is ``smart_nframes`` itself. The per-frame limit is the five lines of
    ``fetch_video`` that split the video's total pixel budget (``total_pixels``, default
    ``MODEL_SEQ_LEN x factor^2 x 0.9``) over the frames, two frames per temporal patch:
    ``max(min(VIDEO_MAX_TOKEN_NUM x factor^2, total_pixels / nframes x FRAME_FACTOR),
    1.05 x VIDEO_MIN_TOKEN_NUM x factor^2)``, at most a given ``max_pixels``; ``fetch_video``
    also decodes the video, so those lines are restated here, the rest is qwen-vl-utils' own.
    ``smart_resize`` then gives the size. ``factor`` = ``patch_size`` x ``SPATIAL_MERGE_SIZE``
    (28 for Qwen2.5-VL, 32 for Qwen3-VL / Qwen3.5).
    """
    from qwen_vl_utils import vision_process as vp

    ele: _SmartNframesEle = {"fps": float(fps)}
    if max_frames:
        ele["max_frames"] = int(max_frames)
    if min_frames:
        ele["min_frames"] = int(min_frames)
    nframes = int(vp.smart_nframes(ele, total_frames=int(total_frames), video_fps=float(video_fps)))
    factor = int(patch_size) * vp.SPATIAL_MERGE_SIZE
    min_px = vp.VIDEO_MIN_TOKEN_NUM * factor * factor
    frame_max = vp.VIDEO_MAX_TOKEN_NUM * factor * factor
    total = total_pixels if total_pixels is not None else vp.MODEL_SEQ_LEN * factor * factor * 0.9
    limit = max(min(frame_max, total / nframes * vp.FRAME_FACTOR), int(min_px * 1.05))
    if max_pixels is not None:
        limit = min(max_pixels, limit)
    h, w = vp.smart_resize(int(height), int(width), factor=factor, min_pixels=min_px, max_pixels=limit)
    return QwenVideoPlan(nframes, int(h), int(w), int(limit), int(min_px))


def resize_frames(frames: Any, height: int, width: int, chunk: int = 32) -> Any:
    """uint8 N x H x W x 3 frames resized to ``height`` x ``width`` with the kernel qwen-vl-utils
    uses (bicubic, antialiased), a chunk at a time to bound memory."""
    import numpy as np
    import torch

    n = len(frames)
    if n and frames.shape[1:3] == (height, width):
        return frames
    out = np.empty((n, height, width, 3), dtype=np.uint8)
    for i in range(0, n, chunk):
        x = torch.from_numpy(np.ascontiguousarray(frames[i : i + chunk])).permute(0, 3, 1, 2).float()
        y = torch.nn.functional.interpolate(
            x, size=(height, width), mode="bicubic", align_corners=False, antialias=True
        )
        out[i : i + chunk] = y.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
    return out


class QwenArgs(HFArgs):
    """Args of the Qwen families: the base's and qwen-vl-utils' frame floor."""

    min_frames: int | None = Field(
        None, ge=1, description="the floor of a rate-sampled frame count (else qwen-vl-utils' FPS_MIN_FRAMES, 4)"
    )


class Qwen3_5Args(QwenArgs):
    """Args of Qwen3.5: the Qwen ones and its thinking switch."""

    enable_thinking: Flag = Field(
        False, description="let Qwen3.5 reason in `<think>` before answering (off: a letter within the task's budget)"
    )


class _QwenVideo(HFVideoModel):
    """The Qwen families' shared rate sampling (qwen-vl-utils' rule, see the module docstring)."""

    #: qwen-vl-utils' ``image_patch_size`` for this family
    patch_size: ClassVar[int] = 14
    positions_layout: ClassVar[str] = QWEN_REFERENCE
    #: a timestamp before each temporal patch splits the video into one-patch blocks (Qwen3-VL, Qwen3.5)
    split_video_frames: ClassVar[bool] = True
    Args: ClassVar[type[HFArgs]] = QwenArgs
    args: QwenArgs

    def __init__(self, **model_args: Any) -> None:
        super().__init__(**model_args)
        self.min_frames = self.args.min_frames
        self._plans: dict[str, QwenVideoPlan] = {}

    def hf_description(self) -> HFDescription:
        desc = super().hf_description()
        if self.fps is not None:
            from qwen_vl_utils import vision_process as vp  # MODEL_SEQ_LEN may come from the environment

            desc["qwen_vl_utils_sizing"] = {
                "patch_size": self.patch_size,
                "min_frames": self.min_frames,
                "model_seq_len": vp.MODEL_SEQ_LEN,
            }
        return desc

    def video_plan(self, video: str) -> QwenVideoPlan:
        """The qwen-vl-utils plan of ``video`` at this adapter's fps (probed once per video)."""
        from naru_eval.media.video import probe_video

        if video not in self._plans:
            info = probe_video(video, check_end=False)
            try:
                self._plans[video] = qwen_video_plan(
                    info.frame_count,
                    info.fps,
                    info.height,
                    info.width,
                    fps=float(self.fps or 0.0),
                    patch_size=self.patch_size,
                    max_frames=self.max_frames,
                    min_frames=self.min_frames,
                    max_pixels=self.max_pixels,
                )
            except ValueError as e:  # e.g. fewer frames than FRAME_FACTOR
                raise RequestFailed(f"video {video}: qwen-vl-utils sampling at fps={self.fps:g}: {e}") from None
        return self._plans[video]

    def frame_params(self, video: str) -> SamplingParams:
        if self.fps is None:
            return super().frame_params(video)
        from naru_eval.media.frame_cache import sampling_params

        # decode at the per-frame limit (never below the target size); frames() resizes exactly
        plan = self.video_plan(video)
        return sampling_params(num_frames=plan.nframes, max_pixels=plan.max_pixels)

    def frames(self, request: NaruRequest) -> Any:
        s = super().frames(request)
        if self.fps is None or request.video is None:
            return s
        plan = self.video_plan(request.video)
        return s._replace(frames=resize_frames(s.frames, plan.height, plan.width))

    def position_ids(self, input_ids: Any, inputs: Any) -> Any | None:
        """Qwen's reference M-RoPE positions (``model_adapters.positions``), the same in the
        shared-prefix and the per-question path, whatever the installed transformers computes."""
        if inputs.get("video_grid_thw") is None and inputs.get("image_grid_thw") is None:
            return None  # text only: one position per token, as the model's own
        return generation_position_ids(
            input_ids,
            geometry_of(self.model.config, self.split_video_frames),
            inputs.get("image_grid_thw"),
            inputs.get("video_grid_thw"),
            inputs.get("second_per_grid_ts"),
        )

    def processor_kwargs(self) -> ProcessorKwargs:
        kw = super().processor_kwargs()
        if self.fps is not None:
            kw["do_resize"] = False  # the frames already have qwen-vl-utils' size
        return kw


class Qwen2_5_VL(_QwenVideo):
    model_id = "naru_qwen2_5_vl"
    family = "qwen2_5_vl"
    patch_size = 14
    split_video_frames = False  # one block; the time axis counts seconds (tokens_per_second)
    model_classes = {"qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration"}


class Qwen3_VL(_QwenVideo):
    model_id = "naru_qwen3_vl"
    family = "qwen3_vl"
    patch_size = 16
    model_classes = {
        "qwen3_vl": "Qwen3VLForConditionalGeneration",
        "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration",
    }


class Qwen3_5(_QwenVideo):
    """Qwen3.5 (native in transformers 5.24: ``Qwen3_5ForConditionalGeneration``, Gated DeltaNet
    + attention hybrid with the Qwen3-VL vision tower and ``Qwen3VLProcessor``).

    Qwen3.5 thinks before answering unless its chat template gets ``enable_thinking=False``; a
    multiple-choice answer within the task's token budget needs it off, so that is the default
    (``enable_thinking=true`` turns it on; lmms-eval strips ``<think>`` blocks before scoring).
    """

    model_id = "naru_qwen3_5"
    family = "qwen3_5"
    patch_size = 16
    model_classes = {
        "qwen3_5": "Qwen3_5ForConditionalGeneration",
        "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration",
    }

    Args = Qwen3_5Args
    args: Qwen3_5Args

    def __init__(self, **model_args: Any) -> None:
        super().__init__(**model_args)
        self.template_kwargs = {"enable_thinking": self.args.enable_thinking}
