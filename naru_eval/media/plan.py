"""The sampling plan: which frames (segment centres), how many for an fps budget, at what size.

Plain arithmetic, no decoding: adapters and preflights use it to predict what the sampler
(:mod:`naru_eval.media.sampler`) will give.
"""

from __future__ import annotations

#: Default pixel budget per frame while decoding (448 x 448): bounds memory on 4-hour videos.
DEFAULT_MAX_PIXELS = 448 * 448


def uniform_indices(total_frames: int, n: int) -> list[int]:
    """Segment centres: ``floor((i + 0.5) * T / N)`` for i in 0..N-1.

    The video's T frames are cut into N equal segments and the middle frame of each is taken,
    so the first and last frames (often black or titles) are avoided and the spacing is even.
    """
    if total_frames <= 0 or n <= 0:
        return []
    return [min(total_frames - 1, int((i + 0.5) * total_frames / n)) for i in range(n)]


def frames_for_fps(
    duration_s: float, fps: float, max_frames: int | None = None, total_frames: int | None = None
) -> int:
    """How many frames fps-based sampling takes: ``max(1, floor(duration * fps))``, capped by
    ``max_frames`` and by ``total_frames`` (the frames that exist: a header claiming 10 hours for
    two frames must not ask for 18,000)."""
    n = max(1, int(duration_s * fps))
    if max_frames:
        n = min(n, max_frames)
    return min(n, max(1, total_frames)) if total_frames is not None else n


def target_size(width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    """Largest even size with the input's aspect ratio and at most ``max_pixels`` pixels."""
    if not max_pixels or width * height <= max_pixels:
        return width, height
    scale = (max_pixels / (width * height)) ** 0.5
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)
