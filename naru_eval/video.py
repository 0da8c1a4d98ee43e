"""Video access through PyAV. For now: probing, used by the data preflight.

``probe_video`` opens the container, reads duration, fps and frame count from it, and decodes
the first frame, so a file that exists but cannot be decoded is caught before inference.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class VideoError(RuntimeError):
    """A video that is missing, unreadable or undecodable; the message names the file."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class VideoInfo(NamedTuple):
    """What the container says about a video (frame_count may be estimated: see ``exact``)."""

    path: str
    duration_s: float
    fps: float
    frame_count: int
    width: int
    height: int
    frame_count_exact: bool


def probe_video(path: str | os.PathLike[str]) -> VideoInfo:
    """Open ``path`` and read its metadata; decode one frame to prove it is readable."""
    import av  # lazy: only tools that touch videos pay for it

    p = Path(path)
    if not p.exists():
        raise VideoError(p, "file does not exist")
    if p.stat().st_size == 0:
        raise VideoError(p, "file is empty")
    try:
        with av.open(str(p)) as container:
            if not container.streams.video:
                raise VideoError(p, "no video stream")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            fps = float(rate) if rate else 0.0
            if stream.duration is not None and stream.time_base is not None:
                duration = float(stream.duration * stream.time_base)
            elif container.duration is not None:
                duration = container.duration / 1_000_000
            else:
                duration = 0.0
            frames = int(stream.frames or 0)
            exact = frames > 0
            if not exact:
                frames = int(round(duration * fps))
            first = next(container.decode(stream), None)
            if first is None:
                raise VideoError(p, "no decodable frame")
            width, height = first.width, first.height
    except VideoError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"cannot be opened or decoded ({type(e).__name__}: {e})") from None
    if fps <= 0 or duration <= 0:
        raise VideoError(p, f"container reports no usable duration/fps (duration={duration}, fps={fps})")
    return VideoInfo(str(p), duration, fps, frames, width, height, exact)
