"""Qwen's input rule for a video sampled by rate: qwen-vl-utils' frame count and frame size.

Shared by the Qwen families over transformers (``naru_eval.adapters.hf.qwen``) and the
OpenAI-compatible path (a served Qwen model in video mode,
``naru_eval.providers.openai_compat``), so both give the model the frames and tokens of the
reference pipeline.

**Sampling by rate** (``fps=``; Qwen3-VL's default, 0.25 fps, the official leaderboard's
setting) follows qwen-vl-utils, the Qwen models' reference input pipeline, exactly for the
frame count and the frame size (:func:`qwen_video_plan`): ``smart_nframes`` gives the count
(``duration x fps`` clamped to ``[FPS_MIN_FRAMES, min(FPS_MAX_FRAMES, total frames)]`` and
floored to a multiple of ``FRAME_FACTOR``), and the video's total pixel budget, split over
those frames, gives the per-frame pixel limit that ``smart_resize`` turns into the frame size.
A 4-hour video at 0.25 fps asks for 3,600 frames and gets 768. The frames themselves are still
decoded by the one sampler (evenly spaced segment centres, through the frame cache) and resized
to exactly that size from the native frames, with qwen-vl-utils' own call (torchvision's
antialiased bicubic: ``naru_eval.media.pixels.reference_resize``, the sampler's ``size=``).
"""

from __future__ import annotations

from typing import NamedTuple, TypedDict


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
