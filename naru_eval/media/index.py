"""The frame index: every decodable frame's timestamp, built once per file and kept.

One definition throughout: frame ``k`` is the k-th frame in presentation order of the decoded
stream, as a player shows it (frames an edit list hides are not frames). Frame numbers are never
derived from timestamps and an average rate: the index, built from the packets (an MP4's sample
tables, :mod:`naru_eval.media.mp4_index`, else one demux pass), gives each frame's presentation
timestamp. It is kept in memory and on disk beside the frame cache.

A file that ends inside its last picture (a recording stopped mid-frame) leaves that picture to
the decoder's concealment, which depends on where decoding began: a sampler seeking to the last
keyframe and a player decoding from the start show different pixels. Such a picture is left out
of the index (with one warning) unless decoding it from its keyframe and from the keyframe
before gives the same picture.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from naru_eval.media.index_moov import packets_from_moov
from naru_eval.media.video import (
    VideoError,
    check_truncation,
    claimed_duration,
    file_identity,
    seek_start,
    seeks_by_bytes,
    tail_end_pts,
    video_stream,
)
from naru_eval.settings import settings

if TYPE_CHECKING:
    import numpy as np
    from av.video.stream import VideoStream

log = logging.getLogger(__name__)

#: part of every index's key: a change to what an index holds makes older disk entries misses
#: (3: the stream a player shows, a picture the file ends inside left out; 4: also one the decoder
#: flags as concealed, or that comes out otherwise unthreaded)
INDEX_FORMAT = 4


class FrameIndex(NamedTuple):
    """Every decodable frame of a file's video stream, built once from its packets.

    ``pts[k]`` is frame k's presentation timestamp (sorted: presentation order, hidden frames of an
    edit list left out). Keyframes are listed in decode order with their timestamp and byte offset
    (-1 when the container gives none). ``claimed_s`` is the container's claimed duration.
    ``source`` says where the packets' timestamps came from: ``moov`` (an MP4's sample tables),
    ``demux`` (a pass over every packet) or ``decode`` (packets without timestamps). ``stream``
    is the container's index of the video stream; ``cut_pts`` the timestamp of a picture the file
    ends inside, left out (-1: none).
    """

    pts: np.ndarray  # int64
    key_pts: np.ndarray  # int64
    key_pos: np.ndarray  # int64
    time_base: float
    claimed_s: float
    source: str = "demux"
    stream: int = 0
    cut_pts: int = -1


_INDEXES: OrderedDict[str, FrameIndex] = OrderedDict()
_INDEX_LOCK = threading.Lock()
_INDEXES_MAX = 64


def _identity(path: str | os.PathLike[str]) -> dict[str, object]:
    return {**file_identity(path), "index_format": INDEX_FORMAT}


def _index_key(ident: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def _index_disk_path(key: str, cache_dir: str | os.PathLike[str] | None) -> Path | None:
    """Beside the frame cache (``cache_dir``, else ``NARU_FRAME_CACHE``), under ``index/``."""
    root = cache_dir or settings().frame_cache
    return Path(root) / "index" / key[:2] / f"{key}.npz" if root else None


def _sound(index: FrameIndex) -> bool:
    """What an index claims is self-consistent: frames sorted and unique, keyframes listed with an
    offset each, a positive time base (an entry that is not is a miss)."""
    import numpy as np

    pts, key_pts, key_pos = index.pts, index.key_pts, index.key_pos
    return (
        pts.ndim == key_pts.ndim == key_pos.ndim == 1
        and len(pts) > 0
        and len(key_pts) == len(key_pos) > 0
        and all(a.dtype == np.int64 for a in (pts, key_pts, key_pos))
        and bool(np.all(np.diff(pts) > 0))
        and np.isfinite(index.time_base)
        and index.time_base > 0
        and np.isfinite(index.claimed_s)
        and index.source in ("moov", "demux", "decode")
    )


def _load_index(key: str, ident: dict[str, object], cache_dir: str | os.PathLike[str] | None) -> FrameIndex | None:
    """The kept index, checked against the file it claims to be of; None (a miss) otherwise."""
    import numpy as np

    with _INDEX_LOCK:
        if key in _INDEXES:
            _INDEXES.move_to_end(key)
            return _INDEXES[key]
    path = _index_disk_path(key, cache_dir)
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if json.loads(str(z["identity"])) != json.loads(json.dumps(ident)):
                return None  # another file's index (or another format) under this name
            index = FrameIndex(
                z["pts"],
                z["key_pts"],
                z["key_pos"],
                float(z["time_base"]),
                float(z["claimed_s"]),
                str(z["source"]),
                int(z["stream"]),
                int(z["cut_pts"]),
            )
    except Exception:  # a damaged entry is a miss, never an error
        return None
    if not _sound(index):
        return None
    _remember_index(key, ident, index, None, save=False)
    return index


#: cache directories found unwritable: warned about once, then skipped
_UNWRITABLE: set[str] = set()


def unwritable(directory: Path, err: OSError) -> None:
    """One warning per frame-cache directory that cannot be written; the run goes on without it."""
    with _INDEX_LOCK:
        if str(directory) in _UNWRITABLE:
            return
        _UNWRITABLE.add(str(directory))
    log.warning(
        "frame cache %s: cannot write there (%s); going on without keeping frames or frame indexes "
        "(they are decoded again next time)",
        directory,
        err,
    )


def _remember_index(
    key: str,
    ident: dict[str, object],
    index: FrameIndex,
    cache_dir: str | os.PathLike[str] | None,
    save: bool = True,
) -> None:
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
                 source=np.array(index.source), stream=np.array(index.stream), cut_pts=np.array(index.cut_pts),
                 identity=np.array(json.dumps(ident)))  # fmt: skip
        os.replace(tmp, path)
    except OSError as e:  # a read-only cache directory costs a rebuild next time, nothing else
        unwritable(path.parent.parent.parent, e)


def _is_mp4(container: Any) -> bool:
    return "mov" in (container.format.name or "").split(",")


class Provisional(NamedTuple):
    """An index to sample with at once (``now``), and ``settle()``: the index to keep (``container``
    still open; it may decode), the same one unless the last GOP of an MP4, decoded then
    (``index_moov.TailCheck``), ends before the last frame its tables show."""

    now: FrameIndex
    settle: Callable[[], FrameIndex]


def _build_index(p: Path, container: Any, stream: Any, tables: bool = True) -> Provisional:
    """The packets' timestamps (from an MP4's sample tables where they agree with the packets, else
    one demux pass, no decoding), then the head and tail decoded to see which frames really decode."""
    if tables and _is_mp4(container):
        m = packets_from_moov(p, container, stream)
        if m is not None:
            index = _decodable(p, container, stream, m.shown, m.key_pts, m.key_pos, "moov", m.head, m.tail.last_shown)

            def settle() -> FrameIndex:
                last = m.tail.last(container, stream)
                if last == m.tail.last_shown:
                    return index
                return _decodable(p, container, stream, m.shown, m.key_pts, m.key_pos, "moov", m.head, last)

            return Provisional(index, settle)
        seek_start(container, stream)  # the checks moved the demuxer: the pass starts at the first packet
    index = _build_index_by_demux(p, container, stream)
    return Provisional(index, lambda: index)


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
    last_corrupt = False  # the last packet is flagged corrupt (cut short)
    try:
        for packet in container.demux(stream):
            if not packet.size:
                continue
            if packet.pts is None:
                missing_pts = True
                break
            last_corrupt = bool(packet.is_corrupt)
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
    index = _decodable(
        p, container, stream, np.array(pts, np.int64), key_pts_a, np.array(key_pos, np.int64), "demux", head
    )
    # The last packet in decode order may be cut short where the container cannot say (a transport
    # stream ends where the recording stopped) or says so (a corrupt flag).
    if pts and (seeks_by_bytes(container) or last_corrupt):
        return _without_cut_picture(p, container, stream, index, pts[-1])
    return index


def _picture(container: Any, stream: Any, index: FrameIndex, j: int, target: int) -> Any:
    """Frame ``target`` (a timestamp) decoded from keyframe ``j`` (-1: the file's start), as raw
    samples; None where it does not come out, or comes out flagged as concealed (corrupt)."""
    import av

    pos = int(index.key_pos[j]) if j >= 0 else -1
    if j < 0:
        seek_start(container, stream)
    elif seeks_by_bytes(container) and pos >= 0:
        container.seek(pos, unsupported_byte_offset=True)
    else:
        container.seek(int(index.key_pts[j]), stream=stream, backward=True, any_frame=False)
    try:
        for frame in container.decode(stream):
            if frame.pts == target:
                if frame.is_corrupt:
                    return None
                try:
                    return frame.to_ndarray()
                except ValueError:  # a pixel format numpy has no layout for
                    return frame.to_ndarray(format="rgb24")
    except av.error.FFmpegError:
        pass
    return None


def _unthreaded_picture(p: Path, stream_index: int, index: FrameIndex, j: int, target: int) -> Any:
    """:func:`_picture` with one decoding thread (threads are set before a decoder opens, hence a
    second opening of the file)."""
    import av

    with av.open(str(p)) as container:
        stream = cast("VideoStream", container.streams[stream_index])
        stream.thread_count = 1
        return _picture(container, stream, index, j, target)


def _without_cut_picture(p: Path, container: Any, stream: Any, index: FrameIndex, last: int) -> FrameIndex:
    """``index`` without the last packet's picture (``last``, decode order) where it is concealed:
    the decoder flags it corrupt, or its pixels depend on where decoding began or on the decoder's
    threads. Decoded from the keyframe a seek would start at, from the one before (the pictures a
    player's decoder holds by then) and unthreaded from the first, it must come out the same and
    unflagged.

    Threads matter (issue 33 finding 13): with slice threads H.264 conceals nothing (the missing
    part keeps what the frame buffer held), unthreaded it conceals; cut points whose picture came
    out the same from either keyframe, slice-threaded, still differed unthreaded (docs/video.md)."""
    import numpy as np

    at = int(np.searchsorted(index.pts, last))
    if at >= len(index.pts) or int(index.pts[at]) != last or len(index.pts) < 2:
        return index  # it did not decode at all (not in the index already), or it is all there is
    j = int(np.searchsorted(index.key_pts, last, side="right")) - 1
    if j < 0:
        return index  # before the first keyframe: only ever decoded from the file's start
    seeked = _picture(container, stream, index, j, last)
    same = seeked is not None
    for other in (
        lambda: _picture(container, stream, index, j - 1, last),
        lambda: _unthreaded_picture(p, int(stream.index), index, j, last),
    ):
        if same:
            picture = other()
            same = picture is not None and picture.shape == seeked.shape and np.array_equal(seeked, picture)
    if same:
        return index
    tb = float(stream.time_base)
    log.warning(
        "%s: the file ends inside its last picture (at %.2f s): it is left out, as the decoder conceals "
        "what is missing and the pixels depend on where decoding starts and on the decoder's threads "
        "(a recording cut mid-frame)",
        p,
        (last - int(index.pts[0])) * tb,
    )
    return index._replace(pts=np.delete(index.pts, at), cut_pts=last)


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting: numpy 2's hash-based unique took 57 ms for 57,600 timestamps, this 1 ms;
    a stable sort (radix or timsort: timestamps come nearly sorted) 0.06 ms of the 0.9 ms of numpy's default."""
    import numpy as np

    a = np.sort(a, kind="stable")
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
        pos = int(key_pos_a[j]) if seeks_by_bytes(container) and key_pos_a[j] >= 0 else None
        last = tail_end_pts(container, stream, int(key_pts_a[j]), pos)
        if last is not None or j == 0:
            break
    if last is None:
        raise VideoError(p, "no decodable frame")
    sorted_pts = sorted_pts[sorted_pts <= last]
    return FrameIndex(
        sorted_pts,
        key_pts_a,
        key_pos_a,
        float(stream.time_base),
        claimed_duration(container, stream),
        source,
        int(stream.index),
    )


def _head_pts(container: Any, stream: Any, bound: int | None) -> list[int]:
    """Timestamps decoding from the start gives out, until one at or past ``bound`` (None: all)."""
    import av

    seek_start(container, stream)
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

    container.seek(0, unsupported_byte_offset=seeks_by_bytes(container))
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
        arr,
        first,
        np.array([0], np.int64),
        float(stream.time_base),
        claimed_duration(container, stream),
        "decode",
        int(stream.index),
    )


def _known(p: Path, cache_dir: str | os.PathLike[str] | None) -> FrameIndex | None:
    ident = _identity(p)
    return _load_index(_index_key(ident), ident, cache_dir)


def provisional_index(
    path: str | os.PathLike[str], container: Any, cache_dir: str | os.PathLike[str] | None = None, tables: bool = True
) -> Provisional:
    """:func:`frame_index` for a sampler that decodes before an MP4's last GOP is checked: the index
    now and ``settle()`` (after sampling, ``container`` still open), which checks it and keeps the
    index it gives (in memory and on disk)."""
    p = Path(path)
    known = _known(p, cache_dir) if tables else None
    if known is not None:
        return Provisional(known, lambda: known)
    ident = _identity(p)
    built = _build_index(p, container, video_stream(p, container), tables)
    settled: list[FrameIndex] = []

    def settle() -> FrameIndex:
        if not settled:
            settled.append(built.settle())
            _remember_index(_index_key(ident), ident, settled[0], cache_dir)
        return settled[0]

    return Provisional(built.now, settle)


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
    known = _known(p, cache_dir) if tables else None
    if known is not None:
        return known
    if container is None:
        with av.open(str(p)) as c:
            return provisional_index(p, c, cache_dir, tables).settle()
    return provisional_index(p, container, cache_dir, tables).settle()


def index_duration(p: Path, index: FrameIndex) -> float:
    """The video's duration as the frame sampler reports it (``VideoInfo.duration_s``): the
    container's claim once the last indexed frame shows the file is not truncated
    (:func:`~naru_eval.media.video.check_truncation`), else the frames' own span."""
    total = len(index.pts)
    end_s = (int(index.pts[-1]) - int(index.pts[0])) * index.time_base
    frame_s = end_s / max(1, total - 1) if total > 1 else 0.0
    check_truncation(p, index.claimed_s, end_s, total, frame_s)
    return index.claimed_s if index.claimed_s > 0 else end_s + frame_s
