"""Video access through PyAV. For now: probing, used by the data preflight.

``probe_video`` opens the container, reads duration, fps and frame count from it, and decodes
the first frame, so a file that exists but cannot be decoded is caught before inference.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np


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


def probe_video(path: str | os.PathLike[str], check_end: bool = True) -> VideoInfo:
    """Open ``path`` and read its metadata; decode its first and last second to prove it is readable."""
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
            if check_end and duration > 0:
                # Decode the last second too: a truncated file fails here, before any inference.
                start = stream.start_time or 0
                container.seek(start + int(max(0.0, duration - 1.0) / float(stream.time_base)), stream=stream)
                last_t = 0.0
                try:
                    for frame in container.decode(stream):
                        last_t = max(last_t, float((frame.pts - start) * stream.time_base))
                except av.error.FFmpegError:
                    pass
                if last_t < duration - 2.0 - 1.0 / max(fps, 1e-9):
                    raise VideoError(p, f"truncated: frames stop at {last_t:.1f} s of {duration:.1f} s")
    except VideoError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"cannot be opened or decoded ({type(e).__name__}: {e})") from None
    if fps <= 0 or duration <= 0:
        raise VideoError(p, f"container reports no usable duration/fps (duration={duration}, fps={fps})")
    return VideoInfo(str(p), duration, fps, frames, width, height, exact)


# --------------------------------------------------------------------------- frame sampling

#: Default pixel budget per frame while decoding (448 x 448): bounds memory on 4-hour videos.
DEFAULT_MAX_PIXELS = 448 * 448


class SampledFrames(NamedTuple):
    """Frames picked from one video. ``timestamp_error_s`` is 0 for exact sampling."""

    frames: np.ndarray  # uint8, N x H x W x 3
    indices: np.ndarray  # int64 frame numbers
    timestamps: np.ndarray  # float64 seconds
    info: VideoInfo
    exact: bool
    timestamp_error_s: np.ndarray  # |picked - target| per frame, seconds


def uniform_indices(total_frames: int, n: int) -> list[int]:
    """Segment centres: ``floor((i + 0.5) * T / N)`` for i in 0..N-1.

    The video's T frames are cut into N equal segments and the middle frame of each is taken,
    so the first and last frames (often black or titles) are avoided and the spacing is even.
    """
    if total_frames <= 0 or n <= 0:
        return []
    return [min(total_frames - 1, int((i + 0.5) * total_frames / n)) for i in range(n)]


def frames_for_fps(duration_s: float, fps: float, max_frames: int | None = None) -> int:
    """How many frames fps-based sampling takes: ``max(1, floor(duration * fps))``, capped."""
    n = max(1, int(duration_s * fps))
    return min(n, max_frames) if max_frames else n


def target_size(width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    """Largest even size with the input's aspect ratio and at most ``max_pixels`` pixels."""
    if not max_pixels or width * height <= max_pixels:
        return width, height
    scale = (max_pixels / (width * height)) ** 0.5
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)


def count_frames(path: str | os.PathLike[str]) -> int:
    """Exact frame count by demuxing (no decoding), for containers that do not store it."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return sum(1 for packet in container.demux(stream) if packet.size > 0)


def sample_frames(
    path: str | os.PathLike[str],
    num_frames: int | None = None,
    fps: float | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    approximate: bool = False,
    info: VideoInfo | None = None,
) -> SampledFrames:
    """Sample frames from ``path``: ``num_frames`` uniform, or ``fps`` (capped by ``max_frames``).

    Exact mode seeks to the keyframe before each target and decodes forward to it, and keeps
    decoding instead of seeking when that keyframe is not past the last frame decoded, so the
    cost approaches N x half a GOP of decoded frames whatever the video's length, and never
    exceeds one pass over the video. Frames are resized to ``max_pixels`` as they are taken,
    into one preallocated array; the whole video is never held in memory. Approximate mode
    takes the keyframe at or before each target (decoding only it) and reports the error.
    """
    import numpy as np

    if (num_frames is None) == (fps is None):
        raise ValueError("give exactly one of num_frames or fps")
    info = info or probe_video(path, check_end=False)  # the end is checked by _verified_count
    claimed = info.frame_count if info.frame_count_exact else count_frames(path)
    total = _verified_count(path, claimed, info)
    n = num_frames if num_frames is not None else frames_for_fps(info.duration_s, float(fps), max_frames)
    if num_frames is not None and max_frames:
        n = min(n, max_frames)
    for _attempt in range(2):
        targets = uniform_indices(total, n)
        try:
            picked = _decode_targets(path, targets, total, info, max_pixels, approximate)
        except _ShortVideo as short:
            # Containers often over-report a little: resample on the real count. Far fewer
            # frames than claimed is a truncated file, which must not pass silently.
            if short.frames_seen < 0.95 * total:
                raise VideoError(
                    path, f"truncated: the container claims {total} frames, only {short.frames_seen} decode"
                ) from None
            total = short.frames_seen
            continue
        except VideoError:
            raise
        except Exception as e:
            raise VideoError(path, f"decoding failed ({type(e).__name__}: {e})") from None
        frames, indices, times = picked
        want = np.array([t / info.fps for t in targets], dtype=np.float64)
        ts = np.array(times, dtype=np.float64)
        return SampledFrames(
            frames=frames if len(frames) else np.zeros((0, 0, 0, 3), np.uint8),
            indices=np.array(indices, dtype=np.int64),
            timestamps=ts,
            info=info._replace(frame_count=total, frame_count_exact=True),
            exact=not approximate,
            timestamp_error_s=np.abs(ts - want) if len(ts) else ts,
        )
    raise VideoError(path, f"frame count changed while decoding (container says {info.frame_count})")


def _verified_count(path: str | os.PathLike[str], claimed: int, info: VideoInfo) -> int:
    """The real frame count: read the last second the container claims and see where frames end.

    Containers often over- or under-report; a uniform sample computed on a wrong count picks
    the wrong frames. The tail is demuxed first (packets only, a few ms); when packets fall
    short of the claim, or carry no timestamps, the tail is decoded (about one GOP) to find where
    frames really end. Far fewer frames than claimed is a truncated file, reported as an error.
    A tail whose packets are present but do not decode is still caught later: decoding a target
    there fails and ``sample_frames`` resamples on what decodes.
    """
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            tb = float(stream.time_base)
            start = stream.start_time or 0
            from_t = max(0.0, (claimed - 1) / info.fps - 1.0)
            end = _demuxed_end(container, stream, start, tb, 1.0 / info.fps, from_t)
            if end is None or end < 0.95 * claimed:
                end = _decodable_end(container, stream, start, tb, 1.0 / info.fps, from_t)
    except av.error.FFmpegError as e:
        raise VideoError(path, f"cannot be opened or decoded ({type(e).__name__}: {e})") from None
    if end < 0.95 * claimed:
        raise VideoError(path, f"truncated: the container claims {claimed} frames, only {max(end, 0)} decode")
    return end


def _demuxed_end(container: Any, stream: Any, start: int, tb: float, period: float, from_t: float) -> int | None:
    """Frames whose packets are present from ``from_t`` on (no decoding); None if packets lack timestamps."""
    import av

    last = -1
    container.seek(start + int(from_t / tb), stream=stream, backward=True, any_frame=False)
    try:
        for packet in container.demux(stream):
            if packet.size == 0 or getattr(packet, "is_corrupt", False) or getattr(packet, "is_discard", False):
                continue
            if packet.pts is None:
                return None
            last = max(last, int(round((packet.pts - start) * tb / period)))
    except av.error.FFmpegError:
        pass
    return last + 1


def _decodable_end(container: Any, stream: Any, start: int, tb: float, period: float, from_t: float) -> int:
    """Frames that really decode: scan forward from ``from_t`` until the stream ends or breaks."""
    import av

    last = -1
    container.seek(start + int(from_t / tb), stream=stream, backward=True, any_frame=False)
    try:
        for frame in container.decode(stream):
            if frame.pts is not None:
                last = max(last, int(round((frame.pts - start) * tb / period)))
    except av.error.FFmpegError:
        pass
    return last + 1


class _ShortVideo(Exception):
    def __init__(self, frames_seen: int) -> None:
        self.frames_seen = frames_seen


class _KeyframeIndex:
    """Where a keyframe seek on ``path`` lands, found by demuxing one packet (no decoding).

    A second handle on the file, opened on first use: seeking the decoding one would flush its
    decoder. ``landing(ts)`` is the pts of the keyframe at or before ``ts``, or None when the
    container cannot say (no timestamps, an error).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self.container: Any = None
        self.stream: Any = None
        self.failed = False

    def __enter__(self) -> _KeyframeIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.container is not None:
            self.container.close()

    def landing(self, ts: int) -> int | None:
        import av

        if self.failed:
            return None
        try:
            if self.container is None:
                self.container = av.open(self.path)
                self.stream = self.container.streams.video[0]
            self.container.seek(ts, stream=self.stream, backward=True, any_frame=False)
            for packet in self.container.demux(self.stream):
                if packet.size and packet.pts is not None:
                    return int(packet.pts)
                if packet.size:
                    break
        except av.error.FFmpegError:
            pass
        self.failed = True  # no answer once: the learned GOP decides from now on
        return None


def _lone_keyframe(container: Any, stream: Any, ts: int) -> Any:
    """The keyframe a seek to ``ts`` lands on, decoded alone (approximate mode), or None.

    Its packet is sent, then the decoder is drained: a decoder that reorders B-frames would
    otherwise wait for the following packets (and decode them) before giving the keyframe out.
    None when that packet gives no frame on its own: the caller then decodes as usual.
    """
    import av

    container.seek(ts, stream=stream, backward=True, any_frame=False)
    ctx = stream.codec_context
    try:
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            if not packet.is_keyframe:
                return None
            got = list(ctx.decode(packet)) + list(ctx.decode(None))
            return got[0] if got and got[0].key_frame else None
    except av.error.FFmpegError:
        return None
    finally:
        ctx.flush_buffers()  # leaves draining mode: the decoder takes packets again
    return None


def _decode_targets(
    path: str | os.PathLike[str],
    targets: list[int],
    total: int,
    info: VideoInfo,
    max_pixels: int | None,
    approximate: bool,
) -> tuple[np.ndarray, list[int], list[float]]:
    import av
    import numpy as np

    width, height = target_size(info.width, info.height, max_pixels)
    frames = np.empty((len(targets), height, width, 3), np.uint8)  # filled in place: never a second copy
    indices: list[int] = []
    times: list[float] = []
    with av.open(str(path)) as container, _KeyframeIndex(path) as keyframes:
        stream = container.streams.video[0]
        # Frame threads must be fed several packets before the first frame comes out: after each
        # seek they decode frames past the target. Approximate mode wants one frame per seek.
        stream.thread_type = "SLICE" if approximate else "AUTO"
        tb = float(stream.time_base)
        start = stream.start_time or 0
        period = 1.0 / info.fps
        # Seek or keep decoding? Seeking pays off exactly when the keyframe a seek would land on
        # lies after the last frame decoded; otherwise it decodes again what was just decoded.
        # ``keyframes`` (a second, demux-only handle) says where a seek lands, for a fraction of
        # a millisecond. Only if packets carry no timestamps does a learned GOP decide: ``gop_s``,
        # the longest gap between two keyframes decoded in one run, or between the keyframe a
        # seek landed on and its target (never measured across a seek: that would learn the
        # targets' spacing, and then decode the whole video).
        gop_s = 1.0
        run_key_t: float | None = None
        decoder = None
        current_t = -1.0

        def frame_time(frame: Any) -> float:
            return (frame.pts - start) * tb if frame.pts is not None else float(frame.time or 0.0)

        for target in targets:
            target_t = target * period
            if indices and target == indices[-1] and not approximate:
                frames[len(indices)] = frames[len(indices) - 1]  # N > T repeats a frame: no decode
                indices.append(target)
                times.append(times[-1])
                continue
            if decoder is None or approximate or target_t < current_t:
                need_seek = True
            else:
                landing = keyframes.landing(start + int(target_t / tb))
                if landing is not None:
                    need_seek = (landing - start) * tb > current_t + period / 2
                else:
                    need_seek = target_t - current_t > gop_s
            if approximate:
                key = _lone_keyframe(container, stream, start + int(target_t / tb))
                if key is not None:
                    t = frame_time(key)
                    frames[len(indices)] = key.reformat(width=width, height=height, format="rgb24").to_ndarray()
                    indices.append(int(round(t / period)))
                    times.append(t)
                    continue
            if need_seek:
                container.seek(start + int(target_t / tb), stream=stream, backward=True, any_frame=False)
                decoder = container.decode(stream)
                run_key_t = None
            found = None
            try:
                for frame in decoder:
                    t = frame_time(frame)
                    idx = int(round(t / period))
                    if frame.key_frame:
                        if run_key_t is not None and t > run_key_t:
                            gop_s = max(gop_s, t - run_key_t)
                        elif run_key_t is None and target_t > t:
                            gop_s = max(gop_s, target_t - t + period)  # landed here: next keyframe is past the target
                        run_key_t = t
                    current_t = t
                    if approximate or idx >= target:
                        found = (frame, idx, t)
                        break
            except av.error.FFmpegError:
                found = None  # a truncated or damaged stream: find where it really ends
            if found is None:
                end = _decodable_end(container, stream, start, tb, period, times[-1] if times else 0.0)
                if 0 < end < total:
                    raise _ShortVideo(end)
                raise VideoError(path, f"could not decode frame {target} of {total}")
            frame, idx, t = found
            frames[len(indices)] = frame.reformat(width=width, height=height, format="rgb24").to_ndarray()
            indices.append(idx)
            times.append(t)
    return frames, indices, times
