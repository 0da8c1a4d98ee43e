"""Video access through PyAV: probing (the data preflight) and exact frame sampling.

One definition throughout: frame ``k`` is the k-th frame in presentation order of the decoded
stream, as a player shows it (frames an edit list hides are not frames). Frame numbers are never
derived from timestamps and an average rate: a per-file frame index, built from the packets,
gives each frame's presentation timestamp, and a sampled frame is the one whose timestamp is
exactly that, or an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from naru_eval.settings import settings

if TYPE_CHECKING:
    import numpy as np


class VideoError(RuntimeError):
    """A video that is missing, unreadable or undecodable; the message names the file."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class VideoInfo(NamedTuple):
    """What the container says about a video (frame_count may be estimated: see ``exact``).

    ``width`` x ``height`` is the displayed size: sample aspect ratio and rotation applied.
    """

    path: str
    duration_s: float
    fps: float
    frame_count: int
    width: int
    height: int
    frame_count_exact: bool


def file_identity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Resolved path, size and mtime: what the frame cache and the frame index are keyed by."""
    p = Path(path).resolve()
    st = p.stat()
    return {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


# --------------------------------------------------------------------------- container facts


def _check_file(p: Path) -> None:
    if not p.exists():
        raise VideoError(p, "file does not exist")
    if p.stat().st_size == 0:
        raise VideoError(p, "file is empty")


def _video_stream(p: Path, container: Any) -> Any:
    if not container.streams.video:
        raise VideoError(p, "no video stream")
    return container.streams.video[0]


def _claimed_duration(container: Any, stream: Any) -> float:
    """Seconds of video the container claims: the stream's own duration, else the file's."""
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    tag = (stream.metadata or {}).get("DURATION")  # Matroska writes the track's duration as a tag
    if tag:
        try:
            h, m, sec = tag.split(":")
            return int(h) * 3600 + int(m) * 60 + float(sec)
        except ValueError:
            pass
    if container.duration is not None:
        start = float(stream.start_time * stream.time_base) if stream.start_time is not None else 0.0
        return max(0.0, container.duration / 1_000_000 - (start - (container.start_time or 0) / 1_000_000))
    return 0.0


def _rate(stream: Any) -> float:
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    return float(rate) if rate else 0.0


def _displayed_size(frame: Any, sar: Any) -> tuple[int, int, int]:
    """(width, height, quarter turns counter-clockwise) as a player shows ``frame``."""
    width, height = frame.width, frame.height
    if sar and sar.numerator > 0 and sar.denominator > 0 and sar != 1:
        width = max(2, int(round(width * sar.numerator / sar.denominator)))
    turns = int(round((frame.rotation or 0) / 90)) % 4
    return (height, width, turns) if turns % 2 else (width, height, turns)


def _by_bytes(container: Any) -> bool:
    """Containers without an index (MPEG-TS/M2TS, program streams): seek by byte offset."""
    name = container.format.name or ""
    return any(n in ("mpegts", "mpeg", "mpegvideo") for n in name.split(","))


#: Allowed shortfall between the container's claimed duration and the last decodable frame.
TRUNCATION_SLACK_S = 2.0


def _check_truncation(p: Path, claimed_s: float, end_s: float, frames: int | None, frame_s: float) -> None:
    """The one truncation check and message, for the preflight and the sampler alike."""
    if claimed_s > 0 and end_s < claimed_s - TRUNCATION_SLACK_S - frame_s:
        count = f" (frame {frames - 1})" if frames else ""
        raise VideoError(
            p,
            f"truncated: the container claims {claimed_s:.1f} s of video, "
            f"but the last decodable frame is at {max(0.0, end_s):.1f} s{count}",
        )


def _tail_end_pts(container: Any, stream: Any, seek_pts: int | None, seek_pos: int | None) -> int | None:
    """The largest timestamp of a frame that decodes, seeking to ``seek_pts``/``seek_pos`` first."""
    import av

    if seek_pos is not None:
        container.seek(seek_pos, unsupported_byte_offset=True)
    elif seek_pts is not None:
        container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
    last = None
    try:
        for frame in container.decode(stream):
            if frame.pts is not None and (last is None or frame.pts > last):
                last = frame.pts
    except av.error.FFmpegError:
        pass  # a truncated stream ends in an error: what decoded before it counts
    return last


def probe_video(path: str | os.PathLike[str], check_end: bool = True) -> VideoInfo:
    """Open ``path`` and read its metadata; decode its first frame and its tail, to prove it is readable.

    The tail check is the sampler's: the last frame that decodes against the container's claimed
    duration (``_check_truncation``), so a file the preflight passes, the sampler accepts.
    """
    import av  # lazy: only tools that touch videos pay for it

    p = Path(path)
    _check_file(p)
    try:
        with av.open(str(p)) as container:
            stream = _video_stream(p, container)
            fps = _rate(stream)
            duration = _claimed_duration(container, stream)
            frames = int(stream.frames or 0)
            exact = frames > 0
            if not exact:
                frames = int(round(duration * fps))
            first = next(container.decode(stream), None)
            if first is None:
                raise VideoError(p, "no decodable frame")
            width, height, _turns = _displayed_size(first, stream.codec_context.sample_aspect_ratio)
            if check_end and duration > 0:
                tb = float(stream.time_base)
                start = first.pts if first.pts is not None else (stream.start_time or 0)
                from_s = max(0.0, duration - 1.0 - TRUNCATION_SLACK_S)
                if _by_bytes(container):
                    size = p.stat().st_size
                    pos = int(size * from_s / duration) if duration else 0
                    last = _tail_end_pts(container, stream, None, max(0, pos - 2 * 1024 * 1024))
                else:
                    last = _tail_end_pts(container, stream, start + int(from_s / tb), None)
                end_s = (last - start) * tb if last is not None else 0.0
                _check_truncation(p, duration, end_s, None, 1.0 / max(fps, 1e-9))
    except VideoError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"cannot be opened or decoded ({type(e).__name__}: {e})") from None
    if fps <= 0 or duration <= 0:
        raise VideoError(p, f"container reports no usable duration/fps (duration={duration}, fps={fps})")
    return VideoInfo(str(p), duration, fps, frames, width, height, exact)


# --------------------------------------------------------------------------- the frame index

INDEX_FORMAT = 2


class FrameIndex(NamedTuple):
    """Every decodable frame of a file's video stream, built once from its packets.

    ``pts[k]`` is frame k's presentation timestamp (sorted: presentation order, hidden frames of an
    edit list left out). Keyframes are listed in decode order with their timestamp and byte offset
    (-1 when the container gives none). ``claimed_s`` is the container's claimed duration.
    ``source`` says where the packets' timestamps came from: ``moov`` (an MP4's sample tables),
    ``demux`` (a pass over every packet) or ``decode`` (packets without timestamps).
    """

    pts: np.ndarray  # int64
    key_pts: np.ndarray  # int64
    key_pos: np.ndarray  # int64
    time_base: float
    claimed_s: float
    source: str = "demux"


_INDEXES: OrderedDict[str, FrameIndex] = OrderedDict()
_INDEX_LOCK = threading.Lock()
_INDEXES_MAX = 64


def _index_key(path: str | os.PathLike[str]) -> str:
    ident = {**file_identity(path), "index_format": INDEX_FORMAT}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def _index_disk_path(key: str, cache_dir: str | os.PathLike[str] | None) -> Path | None:
    """Beside the frame cache (``cache_dir``, else ``NARU_FRAME_CACHE``), under ``index/``."""
    root = cache_dir or settings().frame_cache
    return Path(root) / "index" / key[:2] / f"{key}.npz" if root else None


def _load_index(key: str, cache_dir: str | os.PathLike[str] | None) -> FrameIndex | None:
    import numpy as np

    with _INDEX_LOCK:
        if key in _INDEXES:
            _INDEXES.move_to_end(key)
            return _INDEXES[key]
    path = _index_disk_path(key, cache_dir)
    if path is None or not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            index = FrameIndex(
                z["pts"], z["key_pts"], z["key_pos"], float(z["time_base"]), float(z["claimed_s"]), str(z["source"])
            )
    except Exception:  # a damaged entry is a miss, never an error
        return None
    _remember_index(key, index, None, save=False)
    return index


def _remember_index(key: str, index: FrameIndex, cache_dir: str | os.PathLike[str] | None, save: bool = True) -> None:
    import numpy as np

    with _INDEX_LOCK:
        _INDEXES[key] = index
        while len(_INDEXES) > _INDEXES_MAX:
            _INDEXES.popitem(last=False)
    path = _index_disk_path(key, cache_dir) if save else None
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}.npz")
        np.savez(tmp, pts=index.pts, key_pts=index.key_pts, key_pos=index.key_pos,
                 time_base=np.array(index.time_base), claimed_s=np.array(index.claimed_s),
                 source=np.array(index.source))  # fmt: skip
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache directory costs a rebuild next time, nothing else


def _is_mp4(container: Any) -> bool:
    return "mov" in (container.format.name or "").split(",")


def _build_index(p: Path, container: Any, stream: Any, tables: bool = True) -> FrameIndex:
    """The packets' timestamps (from an MP4's sample tables where they agree with the packets, else
    one demux pass, no decoding), then the head and tail decoded to see which frames really decode."""
    if tables and _is_mp4(container):
        from_moov = _packets_from_moov(p, container, stream)
        if from_moov is not None:
            m = from_moov
            return _decodable(p, container, stream, m.shown, m.key_pts, m.key_pos, "moov", m.head, m.tail_last)
        _seek_start(container, stream)  # the checks moved the demuxer: the pass starts at the first packet
    return _build_index_by_demux(p, container, stream)


class _FromMoov(NamedTuple):
    shown: np.ndarray  # pts of the frames shown (hidden ones of an edit list left out), decode order
    key_pts: np.ndarray
    key_pos: np.ndarray
    head: list[int] | None  # the first frame decoding gives out, where the start is clean
    tail_last: int | None  # the largest timestamp decoding the last GOP gives out


def _packets_from_moov(p: Path, container: Any, stream: Any) -> _FromMoov | None:
    """The packets' timestamps from the moov box: no pass over the file. Decodes the first frame and
    the last GOP while checking them (one seek each), for ``_decodable``.

    Trusted only where the container agrees: the sample count is FFmpeg's, every sample lies inside
    the file (else it is cut: the demux pass and the truncation check decide), and the first and
    last GOPs' packets, demuxed, match the tables sample for sample (timestamp, keyframe, hidden,
    offset, size). A table that disagrees in between is caught by the sampler, which then rebuilds
    the index by demuxing (``sample_frames``).
    """
    from fractions import Fraction

    import numpy as np

    from naru_eval.media import mp4_index

    table = mp4_index.sample_table(p)
    if table is None or len(table.dts) == 0:
        return None
    if (stream.frames and stream.frames != len(table.dts)) or Fraction(1, table.timescale) != stream.time_base:
        return None
    if int((table.offset + table.size).max()) > p.stat().st_size:
        return None
    pts, discard = mp4_index.packet_times(table)
    keep = table.size > 0  # the demux pass skips empty packets
    pts, discard, key, pos, size = pts[keep], discard[keep], table.keyframe[keep], table.offset[keep], table.size[keep]
    keys = np.flatnonzero(key)
    if len(keys) == 0:
        return None
    gop1 = slice(0, int(keys[1]) if len(keys) > 1 else len(pts))
    shown_gop1 = pts[gop1][~discard[gop1]]
    clean = bool(key[0]) and (len(shown_gop1) == 0 or int(shown_gop1.min()) >= int(pts[0]))

    def rows(a: int, b: int) -> list[list[int]]:
        return np.stack([pts[a:b], key[a:b], discard[a:b], pos[a:b], size[a:b]], axis=1).astype(np.int64).tolist()

    head_end = int(keys[1]) + 1 if len(keys) > 1 else len(pts)
    head_rows, first = _demuxed_rows(container, stream, None, head_end, decode=1 if clean else 0)
    if head_rows != rows(0, head_end):
        return None
    last_key = int(keys[-1])
    # The seek may land a GOP early: the rows are compared from wherever it landed.
    tail, decoded = _demuxed_rows(container, stream, int(pts[last_key]), None, decode=None)
    at = np.flatnonzero(pos == tail[0][3]) if tail else np.zeros(0, np.int64)
    if len(at) != 1 or int(at[0]) > last_key or tail != rows(int(at[0]), len(pts)):
        return None
    return _FromMoov(pts[~discard], pts[keys], pos[keys], first or None, max(decoded) if decoded else None)


def _demuxed_rows(
    container: Any, stream: Any, seek_pts: int | None, limit: int | None, decode: int | None = 0
) -> tuple[list[list[int]], list[int]]:
    """[pts, keyframe, discard, pos, size] of the packets from the start (or a keyframe seek), up to
    ``limit``; and the timestamps of the first ``decode`` frames they decode to (None: all)."""
    import av

    if seek_pts is None:
        _seek_start(container, stream)
    else:
        container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
    rows: list[list[int]] = []
    decoded: list[int] = []
    try:
        for packet in container.demux(stream):
            if decode is None or len(decoded) < decode:
                try:
                    decoded += [f.pts for f in packet.decode() if f.pts is not None]
                except av.error.FFmpegError:
                    decode = len(decoded)  # a damaged picture: what decoded before it counts
            if not packet.size:
                continue
            if packet.pts is None:
                return [], []
            rows.append([packet.pts, int(packet.is_keyframe), int(packet.is_discard), packet.pos, packet.size])
            if limit is not None and len(rows) >= limit:
                break
    except av.error.FFmpegError:
        return [], []
    return rows, decoded[:decode] if decode is not None else decoded


def _build_index_by_demux(p: Path, container: Any, stream: Any) -> FrameIndex:
    """Demux every packet (no decoding), then decode the head and tail."""
    import av
    import numpy as np

    pts: list[int] = []
    key_pts: list[int] = []
    key_pos: list[int] = []
    missing_pts = False
    first_key: bool | None = None  # the first packet is a keyframe
    head_min: int | None = None  # the least timestamp shown before the second keyframe (decode order)
    try:
        for packet in container.demux(stream):
            if not packet.size:
                continue
            if packet.pts is None:
                missing_pts = True
                break
            if first_key is None:
                first_key = bool(packet.is_keyframe)
            if packet.is_keyframe:
                key_pts.append(packet.pts)
                key_pos.append(packet.pos if packet.pos is not None else -1)
            if not packet.is_discard:
                pts.append(packet.pts)
                if len(key_pts) < 2 and (head_min is None or packet.pts < head_min):
                    head_min = packet.pts
    except av.error.FFmpegError:
        pass  # a truncated file: what demuxed is what there is; the tail decode below says more
    if missing_pts:
        return _index_by_decoding(p, container, stream)
    key_pts_a = np.array(key_pts, np.int64)
    clean = bool(first_key) and head_min is not None and head_min >= key_pts_a[0]
    head = _head_pts(container, stream, -(1 << 62)) if clean else None  # stops at the first frame given out
    return _decodable(
        p, container, stream, np.array(pts, np.int64), key_pts_a, np.array(key_pos, np.int64), "demux", head
    )


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting: numpy 2's hash-based unique took 57 ms for 57,600 timestamps, this 1 ms."""
    import numpy as np

    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if len(a) else a


def _decodable(
    p: Path,
    container: Any,
    stream: Any,
    pts: np.ndarray,
    key_pts_a: np.ndarray,
    key_pos_a: np.ndarray,
    source: str,
    clean_head: list[int] | None = None,
    tail_last: int | None = None,
) -> FrameIndex:
    """The index from the packets' timestamps: the frames that decoding from the start gives out
    first (the head) and the last frames that really decode (the tail) decide where it starts and ends.

    ``clean_head``: where the first packet is a keyframe and nothing before the second keyframe
    (decode order) is shown before it (no picture of the first GOP lacks a reference), the first
    frame decoding gives out. ``tail_last``: the largest timestamp decoding the last GOP gave out.
    """
    import numpy as np

    if not len(key_pts_a):
        raise VideoError(p, "no keyframe in the video stream")
    sorted_pts = _sorted_unique(pts)
    # The head: a recording that starts mid-stream begins with frames that need pictures it does
    # not have; the decoder drops them (or shows them grey). Frame 0 is what decoding from the
    # start gives out first, so the head is decoded up to the second keyframe to see which it gives.
    # A clean start needs only its first frame decoded: it must be the keyframe's, and all follow.
    head: list[int] = []
    bound: int | None = None
    if clean_head and clean_head[0] == int(key_pts_a[0]) == int(sorted_pts[0]):
        head, bound = clean_head[:1], clean_head[0]  # the keyframe's, first: all that follow decode
    if not head:
        bound = int(key_pts_a[1]) if len(key_pts_a) > 1 else None
        head = _head_pts(container, stream, bound)
    if not head:
        raise VideoError(p, "no decodable frame")
    in_head = np.isin(sorted_pts, np.array(head, np.int64))
    sorted_pts = sorted_pts[(sorted_pts >= head[0]) & (in_head | (bound is not None and sorted_pts >= bound))]
    # The last frames whose packets are present may not decode (a cut file): decode the last GOPs.
    last = tail_last
    for back in (1, 2, 3) if last is None else ():
        j = max(0, len(key_pts_a) - back)
        pos = int(key_pos_a[j]) if _by_bytes(container) and key_pos_a[j] >= 0 else None
        last = _tail_end_pts(container, stream, int(key_pts_a[j]), pos)
        if last is not None or j == 0:
            break
    if last is None:
        raise VideoError(p, "no decodable frame")
    sorted_pts = sorted_pts[sorted_pts <= last]
    return FrameIndex(
        sorted_pts, key_pts_a, key_pos_a, float(stream.time_base), _claimed_duration(container, stream), source
    )


def _seek_start(container: Any, stream: Any) -> None:
    """To the very first packet, keyframe or not (decoding from there is what a player does)."""
    if _by_bytes(container):
        container.seek(0, unsupported_byte_offset=True)
    else:
        container.seek(-(1 << 62), stream=stream, backward=True, any_frame=True)


def _head_pts(container: Any, stream: Any, bound: int | None) -> list[int]:
    """Timestamps decoding from the start gives out, until one at or past ``bound`` (None: all)."""
    import av

    _seek_start(container, stream)
    out: list[int] = []
    try:
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            out.append(frame.pts)
            if bound is not None and frame.pts >= bound:
                break
    except av.error.FFmpegError:
        pass
    return out


def _index_by_decoding(p: Path, container: Any, stream: Any) -> FrameIndex:
    """Packets without timestamps: the decoder's timestamps, one sequential pass, seeking only to 0."""
    import av
    import numpy as np

    container.seek(0, unsupported_byte_offset=_by_bytes(container))
    pts: list[int] = []
    try:
        for frame in container.decode(stream):
            if frame.pts is None:
                raise VideoError(p, "frames carry no timestamps: frame numbers cannot be verified")
            pts.append(frame.pts)
    except av.error.FFmpegError:
        pass
    if not pts:
        raise VideoError(p, "no decodable frame")
    arr = _sorted_unique(np.array(pts, np.int64))
    first = np.array([arr[0]], np.int64)
    return FrameIndex(
        arr, first, np.array([0], np.int64), float(stream.time_base), _claimed_duration(container, stream), "decode"
    )


def frame_index(
    path: str | os.PathLike[str],
    container: Any = None,
    cache_dir: str | os.PathLike[str] | None = None,
    tables: bool = True,
) -> FrameIndex:
    """The file's frame index: from memory, from disk beside the frame cache, or built (an MP4's
    sample tables, else one demux pass). ``tables=False`` rebuilds it by demuxing, whatever is kept."""
    import av

    p = Path(path)
    key = _index_key(p)
    known = _load_index(key, cache_dir) if tables else None
    if known is not None:
        return known
    index: FrameIndex
    if container is None:
        with av.open(str(p)) as c:
            index = _build_index(p, c, _video_stream(p, c), tables)
    else:
        index = _build_index(p, container, _video_stream(p, container), tables)
    _remember_index(key, index, cache_dir)
    return index


# --------------------------------------------------------------------------- frame sampling

#: Default pixel budget per frame while decoding (448 x 448): bounds memory on 4-hour videos.
DEFAULT_MAX_PIXELS = 448 * 448

#: Frame threads only while this many cores are idle (cores minus the 1-minute load average,
#: which counts the sampling process itself). Measured (docs/performance.md): once the cores are
#: taken, frame threads keep several packets in flight that every seek flushes, and slice
#: threads win by up to 35 % (1.5x at 200x120 with a load of 1.9 on 2 cores); with one core
#: idle of 2 (the sampler alone, load ~1) they still lost at 1080p N=8 (0.50 s vs 0.36 s), so a
#: 2-core machine always decodes with slice threads and frame threads need two idle cores.
IDLE_CORES_FOR_FRAME_THREADS = 2.0


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


#: The most frames one call may take (448 x 448 RGB: 2048 frames = 1.2 GiB): the largest budget a
#: published row uses (Nemotron NVFP4, "2048 Frames", core/budgets.py). A request past it is an
#: error, not a silent cap: a 4-hour video at 1 fps (14,400 frames) is a configuration mistake.
MAX_FRAMES = 2048

#: validate-data: a container claiming more than this many seconds per frame on average (e.g.
#: 2 frames over 10 hours) is out of all proportion to its frame count: a broken or forged header.
MAX_SECONDS_PER_FRAME = 60.0


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


def duration_problem(info: VideoInfo) -> str | None:
    """Why the claimed duration cannot be believed, given the frame count the container states (MP4)
    or, without one (Matroska), the frame rate FFmpeg measured from the first frames; else None."""
    if info.frame_count_exact and info.frame_count > 0:
        per_frame = info.duration_s / info.frame_count
        frames = f"for {info.frame_count} frame(s) (one frame per {per_frame:.0f} s on average"
    elif not info.frame_count_exact and info.fps > 0:
        per_frame = 1.0 / info.fps
        frames = f"at {info.fps:.3g} frames per second (one frame per {per_frame:.0f} s"
    else:
        return None
    if per_frame <= MAX_SECONDS_PER_FRAME:
        return None
    return (
        f"the container claims {info.duration_s / 3600:.2f} h of video {frames}, more than "
        f"{MAX_SECONDS_PER_FRAME:.0f} s): the header is out of proportion to the frames; re-encode or remux the file"
    )


def target_size(width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    """Largest even size with the input's aspect ratio and at most ``max_pixels`` pixels."""
    if not max_pixels or width * height <= max_pixels:
        return width, height
    scale = (max_pixels / (width * height)) ** 0.5
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)


def count_frames(path: str | os.PathLike[str]) -> int:
    """Exact number of frames, as the sampler numbers them (from the frame index)."""
    return len(frame_index(path).pts)


def sample_frames(
    path: str | os.PathLike[str],
    num_frames: int | None = None,
    fps: float | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    approximate: bool = False,
    info: VideoInfo | None = None,
    index_dir: str | os.PathLike[str] | None = None,
) -> SampledFrames:
    """Sample frames from ``path``: ``num_frames`` uniform, or ``fps`` (capped by ``max_frames``).

    Frame numbers are positions in the frame index (presentation order). Exact mode seeks to the
    keyframe before each target (by byte offset where the container has no index), checks that
    decoding starts at or before it, else goes back one keyframe (open-GOP leading pictures need
    the previous GOP), and takes the frame whose timestamp is the target's; it keeps decoding
    instead of seeking when that keyframe is not past the last frame decoded. Frames are turned
    as a player shows them (rotation, sample aspect ratio) and resized to ``max_pixels`` of the
    displayed size as they are taken, into one preallocated array. Approximate mode takes the
    keyframe at or before each target (decoding only it) and reports the error. ``info`` is
    accepted for compatibility; the file itself is always the authority. The frame index is kept
    in memory and, with ``index_dir`` (or ``NARU_FRAME_CACHE``), on disk.
    """
    if (num_frames is None) == (fps is None):
        raise ValueError("give exactly one of num_frames or fps")
    asked = min(num_frames, max_frames) if num_frames is not None and max_frames else num_frames
    if asked is not None and asked > MAX_FRAMES:
        raise ValueError(f"num_frames={asked}: the sampler takes at most {MAX_FRAMES} frames per video")
    p = Path(path)
    _check_file(p)
    try:
        return _sample(p, asked, fps, max_frames, max_pixels, approximate, index_dir, tables=True)
    except _TablesContradicted:
        # The sample tables' index disagrees with the packets in the middle (its head and tail were
        # checked when it was built): rebuild it by demuxing, and sample again.
        return _sample(p, asked, fps, max_frames, max_pixels, approximate, index_dir, tables=False)


class _TablesContradicted(Exception):
    """A frame the index built from an MP4's sample tables names did not decode."""


def _sample(
    p: Path,
    asked: int | None,
    fps: float | None,
    max_frames: int | None,
    max_pixels: int | None,
    approximate: bool,
    index_dir: str | os.PathLike[str] | None,
    tables: bool,
) -> SampledFrames:
    """``sample_frames`` once its arguments are checked; ``tables=False``: the index by demuxing."""
    import av
    import numpy as np

    index: FrameIndex | None = None
    try:
        with av.open(str(p)) as container:
            stream = _video_stream(p, container)
            # Containers without an index (MPEG-TS) are often cut mid-frame: the last picture is then
            # concealed, and frame threads conceal it differently from a sequential decode.
            _choose_threads(stream, approximate or _by_bytes(container))
            index = frame_index(p, container, index_dir, tables)
            total = len(index.pts)
            tb = index.time_base
            first_pts = int(index.pts[0])
            end_s = (int(index.pts[-1]) - first_pts) * tb
            frame_s = end_s / max(1, total - 1) if total > 1 else 0.0
            _check_truncation(p, index.claimed_s, end_s, total, frame_s)
            duration = max(index.claimed_s, end_s + frame_s)
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
            targets = uniform_indices(total, n)
            run = _Decoder(p, container, stream, index, max_pixels, len(targets))
            if approximate:
                picked = [run.keyframe_before(k) for k in targets]
            else:
                picked = [run.exact(k) for k in targets]
            frames = run.frames()
            width, height = run.out_size
    except VideoError as e:
        if tables and index is not None and index.source == "moov" and e.reason.startswith("could not decode frame"):
            raise _TablesContradicted() from e
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"decoding failed ({type(e).__name__}: {e})") from None
    assert index is not None  # set before anything that could decode
    indices = np.array(picked, dtype=np.int64)
    ts = (index.pts[indices] - first_pts) * tb if len(indices) else np.zeros(0)
    want = (index.pts[np.array(targets, np.int64)] - first_pts) * tb if targets else np.zeros(0)
    rate = (total - 1) / end_s if end_s > 0 else _rate(stream)
    out_info = VideoInfo(str(p), duration, rate, total, width, height, True)
    return SampledFrames(
        frames=frames,
        indices=indices,
        timestamps=np.asarray(ts, dtype=np.float64),
        info=out_info,
        exact=not approximate,
        timestamp_error_s=np.abs(np.asarray(ts, np.float64) - want),
    )


def _machine_busy() -> bool:
    """Fewer than ``IDLE_CORES_FOR_FRAME_THREADS`` idle cores (1-minute load average): frame threads lose there."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        return cores - os.getloadavg()[0] < IDLE_CORES_FOR_FRAME_THREADS
    except OSError:
        return False


def _choose_threads(stream: Any, slice_only: bool) -> None:
    """Slice threads on a busy machine and where ``slice_only``, frame threads otherwise."""
    # Approximate mode decodes keyframes alone: frame threads would hold them back.
    stream.thread_type = "SLICE" if slice_only or _machine_busy() else "AUTO"


class _Decoder:
    """One open file, one decoder run at a time, frames written into one preallocated array."""

    def __init__(self, p: Path, container: Any, stream: Any, index: FrameIndex, max_pixels: int | None, n: int) -> None:
        self.p, self.container, self.stream, self.index = p, container, stream, index
        self.max_pixels, self.n = max_pixels, n
        self.by_bytes = _by_bytes(container)
        self.sar = stream.codec_context.sample_aspect_ratio
        self.decoder: Any = None
        self.last_pts: int | None = None  # the last frame the current run gave out
        self.run_key = -1  # the keyframe (position in key_pts) the current run started from
        self.out: np.ndarray | None = None
        self.out_size = (0, 0)
        self.kept = 0
        self.turns = 0
        self.coded_size = (0, 0)
        self._last_k = -1

    # -- output
    def _keep(self, frame: Any) -> None:
        import numpy as np

        if self.out is None:
            w, h, self.turns = _displayed_size(frame, self.sar)
            self.out_size = target_size(w, h, self.max_pixels)
            ow, oh = self.out_size
            self.coded_size = (oh, ow) if self.turns % 2 else (ow, oh)
            self.out = np.empty((self.n, oh, ow, 3), np.uint8)
        cw, ch = self.coded_size
        rgb = frame.reformat(width=cw, height=ch, format="rgb24").to_ndarray()
        self.out[self.kept] = np.rot90(rgb, self.turns) if self.turns else rgb
        self.kept += 1

    def frames(self) -> np.ndarray:
        import numpy as np

        return self.out if self.out is not None else np.zeros((0, 0, 0, 3), np.uint8)

    def _repeat_last(self) -> None:
        assert self.out is not None
        self.out[self.kept] = self.out[self.kept - 1]
        self.kept += 1

    # -- seeking
    def _key_for(self, k: int) -> int:
        """The last keyframe (in decode order) whose timestamp is at or before frame k's; -1: none."""
        import numpy as np

        return int(np.searchsorted(self.index.key_pts, self.index.pts[k], side="right")) - 1

    def _seek(self, j: int) -> None:
        """To keyframe j, or to the start of the file for j < 0 (frames before the first keyframe)."""
        pos = int(self.index.key_pos[j]) if j >= 0 else -1
        if j < 0:
            _seek_start(self.container, self.stream)
        elif self.by_bytes and pos >= 0:
            self.container.seek(pos, unsupported_byte_offset=True)
        else:
            self.container.seek(int(self.index.key_pts[j]), stream=self.stream, backward=True, any_frame=False)
        self.decoder = self.container.decode(self.stream)
        self.last_pts = None
        self.run_key = j

    def exact(self, k: int) -> int:
        """Decode frame k; return k. Raises unless the frame given out has frame k's timestamp."""
        import av

        if self.kept and self._last_k == k:
            self._repeat_last()  # N > T repeats a frame: no decode
            return k
        want = int(self.index.pts[k])
        j = self._key_for(k)
        continuing = (
            self.decoder is not None
            and self.last_pts is not None
            and self.last_pts < want
            and (j < 0 or int(self.index.key_pts[j]) <= self.last_pts)
        )
        if not continuing:
            self._seek(j)
        for _attempt in range(4):
            started_at: int | None = self.last_pts
            try:
                for frame in self.decoder:
                    if frame.pts is None:
                        raise VideoError(self.p, "a decoded frame carries no timestamp: cannot verify frame numbers")
                    if started_at is None:
                        started_at = frame.pts
                    self.last_pts = frame.pts
                    if frame.pts == want:
                        self._keep(frame)
                        self._last_k = k
                        return k
                    if frame.pts > want:
                        break
            except av.error.FFmpegError:
                pass
            # Decoding began after the target (an open-GOP leading picture, a seek that landed late)
            # or passed it without giving it out: start one keyframe earlier.
            if self.run_key < 0:
                break
            j = min(j, self.run_key) - 1
            self._seek(j)
        raise VideoError(self.p, f"could not decode frame {k} of {len(self.index.pts)} (timestamp {want})")

    def keyframe_before(self, k: int) -> int:
        """Approximate mode: the keyframe at or before frame k, decoded alone; returns its frame number."""
        import numpy as np

        j = self._key_for(k)
        for jj in range(j, -1, -1):
            frame = self._lone_keyframe(jj)
            if frame is not None and frame.pts is not None:
                pos = int(np.searchsorted(self.index.pts, frame.pts))
                if pos < len(self.index.pts) and int(self.index.pts[pos]) == frame.pts and pos <= k:
                    self._keep(frame)
                    return pos
        # No keyframe decodes alone before k (e.g. only leading pictures): decode k exactly.
        self.decoder = None
        return self.exact(k)

    def _lone_keyframe(self, j: int) -> Any:
        """Keyframe j decoded alone: its packet, then a drain (a reordering decoder waits otherwise)."""
        import av

        pos = int(self.index.key_pos[j])
        if self.by_bytes and pos >= 0:
            self.container.seek(pos, unsupported_byte_offset=True)
        else:
            self.container.seek(int(self.index.key_pts[j]), stream=self.stream, backward=True, any_frame=False)
        self.decoder = None
        ctx = self.stream.codec_context
        try:
            for packet in self.container.demux(self.stream):
                if packet.size == 0:
                    continue
                if not packet.is_keyframe:
                    return None
                got = list(ctx.decode(packet)) + list(ctx.decode(None))
                return got[0] if got else None
        except av.error.FFmpegError:
            return None
        finally:
            ctx.flush_buffers()  # leaves draining mode: the decoder takes packets again
        return None
