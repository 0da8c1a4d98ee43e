"""``sample_frames``: the one frame sampler every adapter gets its frames from (through the frame cache).

It checks the request against its limit, takes the file's frame index (:mod:`naru_eval.media.index`),
plans the frames (:mod:`naru_eval.media.plan`) and decodes exactly those
(:mod:`naru_eval.media.decode`); a sampled frame is the one whose timestamp is the index's, or an error.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from naru_eval.media.decode import Decoder, choose_threads
from naru_eval.media.index import FrameIndex, index_duration, provisional_index
from naru_eval.media.pixels import RESIZES
from naru_eval.media.plan import DEFAULT_MAX_PIXELS, frames_for_fps, uniform_indices
from naru_eval.media.video import (
    VideoError,
    VideoInfo,
    check_file,
    frame_rate,
    real_video_streams,
    seeks_by_bytes,
    video_stream,
)

if TYPE_CHECKING:
    import numpy as np

#: The most frames one call may take (448 x 448 RGB: 2048 frames = 1.2 GiB): the largest budget a
#: published row uses (Nemotron NVFP4, "2048 Frames", core/budgets.py). A request past it is an
#: error, not a silent cap: a 4-hour video at 1 fps (14,400 frames) is a configuration mistake.
MAX_FRAMES = 2048


class SampledFrames(NamedTuple):
    """Frames picked from one video: each the frame its number names (or the sampler raises)."""

    frames: np.ndarray  # uint8, N x H x W x 3
    indices: np.ndarray  # int64 frame numbers
    timestamps: np.ndarray  # float64 seconds
    info: VideoInfo


def frames_key(sampled: SampledFrames) -> str:
    """What identifies a sample of a video in memory: its path and its frame numbers (the frames
    chosen for one question are not another's)."""
    digest = hashlib.sha256(sampled.indices.astype("<i8").tobytes()).hexdigest()[:16]
    return f"{sampled.info.path}#{digest}"


def sample_frames(
    path: str | os.PathLike[str],
    num_frames: int | None = None,
    fps: float | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    size: tuple[int, int] | None = None,
    resize: str | None = None,
    index_dir: str | os.PathLike[str] | None = None,
    indices: Sequence[int] | None = None,
) -> SampledFrames:
    """Sample frames from ``path``: ``num_frames`` uniform, or ``fps`` (capped by ``max_frames``), or
    exactly the frame numbers ``indices`` (increasing; the frames a selector chose, ``select=``).

    Frame numbers are positions in the frame index (presentation order) of the video stream a
    player shows. The sampler seeks to the keyframe before each target (by byte offset where the
    container has no index), checks that decoding starts at or before it, else goes back one
    keyframe (open-GOP leading pictures need the previous GOP), and takes the frame whose
    timestamp is the target's; it keeps decoding instead of seeking when that keyframe is not past
    the last frame decoded. Frames are converted to RGB with their own colour matrix and range,
    turned as a player shows them (rotation, sample aspect ratio) and resized as they are taken,
    into one preallocated array: to ``max_pixels`` of the displayed size (swscale bicubic, in the
    same pass as the conversion), or, with ``size`` = (height, width), to exactly that size from
    the native-size frame by torchvision's antialiased bicubic, in the arithmetic ``resize`` names
    (``"float"``, the default: qwen-vl-utils' step; ``"uint8"``: transformers' video processors';
    :mod:`naru_eval.media.pixels`). The frame index is kept in memory and, with ``index_dir`` (or
    ``NARU_FRAME_CACHE``), on disk.
    """
    chosen = tuple(int(i) for i in indices) if indices is not None else None
    if sum(x is not None for x in (num_frames, fps, chosen)) != 1:
        raise ValueError("give exactly one of num_frames, fps or indices")
    if chosen is not None and (not chosen or list(chosen) != sorted(set(chosen)) or chosen[0] < 0):
        raise ValueError(f"indices={list(chosen)[:8]}...: give distinct, increasing frame numbers")
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise ValueError(f"size={size!r}: give (height, width), both at least 1")
    if resize is not None and (size is None or resize not in RESIZES):
        raise ValueError(f"resize={resize!r}: one of {', '.join(RESIZES)}, and only with size")
    asked = min(num_frames, max_frames) if num_frames is not None and max_frames else num_frames
    if chosen is not None:
        asked = len(chosen)
    if asked is not None and asked > MAX_FRAMES:
        raise ValueError(f"num_frames={asked}: the sampler takes at most {MAX_FRAMES} frames per video")
    p = Path(path)
    check_file(p)
    exact_size = (int(size[0]), int(size[1])) if size is not None else None
    out = _Output(max_pixels, exact_size, resize or "float")
    try:
        return _sample(p, asked, fps, max_frames, out, index_dir, tables=True, chosen=chosen)
    except _TablesContradicted:
        # The sample tables' index disagrees with the packets in the middle (its head and tail were
        # checked when it was built): rebuild it by demuxing, and sample again.
        return _sample(p, asked, fps, max_frames, out, index_dir, tables=False, chosen=chosen)


class _Output(NamedTuple):
    """The size frames are kept at: ``max_pixels`` of the displayed size, or exactly ``size``."""

    max_pixels: int | None
    size: tuple[int, int] | None
    resize: str


class _TablesContradicted(Exception):
    """A frame the index built from an MP4's sample tables names did not decode."""


def _sample(
    p: Path,
    asked: int | None,
    fps: float | None,
    max_frames: int | None,
    out: _Output,
    index_dir: str | os.PathLike[str] | None,
    tables: bool,
    chosen: tuple[int, ...] | None = None,
) -> SampledFrames:
    """``sample_frames`` once its arguments are checked; ``tables=False``: the index by demuxing.

    A file's first touch samples with the index at once and decodes an MP4's last GOP after the
    frames, while they are converted (:func:`~naru_eval.media.index.provisional_index`); where that
    GOP ends before the last frame the tables show (or the sampling failed), the index it gives is
    sampled with instead.
    """
    import av

    index: FrameIndex | None = None
    try:
        with av.open(str(p)) as container:
            stream = video_stream(p, container)
            # Containers without an index (MPEG-TS) are often cut mid-frame: the last picture is then
            # concealed, and frame threads conceal it differently from a sequential decode.
            choose_threads(stream, seeks_by_bytes(container))
            provisional = provisional_index(p, container, index_dir, tables)
            index = provisional.now
            drawn: SampledFrames | None = None
            try:
                drawn = _draw(p, container, stream, index, asked, fps, max_frames, out, chosen, provisional.settle)
            except VideoError:
                if provisional.settle() is index:
                    raise
            if provisional.settle() is not index:
                index = provisional.settle()
                drawn = _draw(p, container, stream, index, asked, fps, max_frames, out, chosen)
    except VideoError as e:
        if tables and index is not None and index.source == "moov" and e.reason.startswith("could not decode frame"):
            raise _TablesContradicted() from e
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"decoding failed ({type(e).__name__}: {e})") from None
    assert drawn is not None  # sampled, or an error was raised
    return drawn


def _draw(
    p: Path,
    container: Any,
    stream: Any,
    index: FrameIndex,
    asked: int | None,
    fps: float | None,
    max_frames: int | None,
    out: _Output,
    chosen: tuple[int, ...] | None,
    meanwhile: Callable[[], object] = lambda: None,
) -> SampledFrames:
    """Plan the frames over ``index`` and decode exactly those; ``meanwhile`` runs once they are
    decoded, while the conversion threads finish (the decoder free for it)."""
    import numpy as np

    total = len(index.pts)
    tb = index.time_base
    first_pts = int(index.pts[0])
    end_s = (int(index.pts[-1]) - first_pts) * tb
    duration = index_duration(p, index)
    if asked is not None:
        n = asked
    else:
        assert fps is not None  # exactly one of num_frames / fps (checked above)
        n = frames_for_fps(duration, float(fps), max_frames, total)
        if n > MAX_FRAMES:
            raise VideoError(
                p,
                f"fps={fps} over {duration:.0f} s asks for {n} frames, more than the sampler's "
                f"maximum of {MAX_FRAMES} per video: lower fps or set max_frames",
            )
    if chosen is not None and chosen[-1] >= total:
        raise VideoError(p, f"frame {chosen[-1]} was asked for; the video has {total} frames")
    targets = list(chosen) if chosen is not None else uniform_indices(total, n)
    run = Decoder(p, container, stream, index, out.max_pixels, targets, out.size, out.resize)
    try:
        picked = [run.exact(k) for k in targets]
        run.stop()
        meanwhile()
        frames = run.frames()
    finally:
        run.close()
    width, height = run.out_size
    streams = len(real_video_streams(container))
    rate = (total - 1) / end_s if end_s > 0 else frame_rate(stream)
    indices = np.array(picked, dtype=np.int64)
    ts = (index.pts[indices] - first_pts) * tb if len(indices) else np.zeros(0)
    info = VideoInfo(str(p), duration, rate, total, width, height, True, index.stream, streams, run.colour)
    return SampledFrames(frames=frames, indices=indices, timestamps=np.asarray(ts, dtype=np.float64), info=info)
