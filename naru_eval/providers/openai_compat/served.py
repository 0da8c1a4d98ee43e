"""The served model's family, read from its name: whether it is a Qwen video family, its patch
size, and the prompt tokens its processor spends on frames (the server-recipe checks and the
``auto`` video mode of the OpenAI-compatible adapter read these)."""

from __future__ import annotations

import re

#: served names of the Qwen video families (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen2.5/3-Omni, Qwen3.5)
_QWEN_VIDEO = re.compile(r"qwen[\d.]*[-_]?(?:vl|omni)|qwen3[._-]?5", re.IGNORECASE)


def is_qwen_video_family(model: str) -> bool:
    """Whether a served model name is a Qwen video family, whose processor gives one video
    temporal positions and timestamps that separate images do not get."""
    return bool(_QWEN_VIDEO.search(str(model).rsplit("/", 1)[-1]))


def qwen_patch_size(model: str) -> int | None:
    """qwen-vl-utils' ``image_patch_size`` of a Qwen video family by its served name (16 for
    Qwen3-VL / Qwen3.5, 14 for Qwen2-VL / Qwen2.5-VL / Omni), None for any other model."""
    if not is_qwen_video_family(model):
        return None
    return 16 if re.search(r"qwen3", str(model), re.IGNORECASE) else 14


def media_tokens(model: str, mode: str, frames: int, height: int, width: int) -> int | None:
    """The prompt tokens ``frames`` frames of ``height`` x ``width`` px cost a Qwen family, by its
    processor's rule (qwen-vl-utils ``smart_resize`` and limits; factor = patch x the 2x2 merge):
    as one video, frame pairs share a temporal patch's tokens (Qwen3-VL / Qwen3.5 add a ``<t
    seconds>`` timestamp and vision start/end per patch, counted as 8); as images, every frame
    pays its own. None for another family or a server-sampled video (unknown here)."""
    patch = qwen_patch_size(model)
    if patch is None or mode not in ("video", "frames"):
        return None
    from qwen_vl_utils import vision_process as vp

    f = patch * vp.SPATIAL_MERGE_SIZE
    lo, hi = (
        (vp.VIDEO_MIN_TOKEN_NUM, vp.VIDEO_MAX_TOKEN_NUM)
        if mode == "video"
        else (vp.IMAGE_MIN_TOKEN_NUM, vp.IMAGE_MAX_TOKEN_NUM)
    )
    rh, rw = vp.smart_resize(int(height), int(width), factor=f, min_pixels=lo * f * f, max_pixels=hi * f * f)
    grid = (rh // f) * (rw // f)
    if mode == "video":
        return -(-int(frames) // 2) * (grid + (8 if patch == 16 else 0)) + 2
    return int(frames) * (grid + 2)
