"""The sample tables of an MP4/MOV video track, read from the ``moov`` box alone.

The frame index of an MP4 needs every frame's presentation time and the keyframes: the container
stores both in its sample tables (``stts`` decode times, ``ctts`` composition offsets, ``stss``
sync samples, ``elst`` the edit list; ``stsz``/``stsc``/``stco``/``co64`` give each sample's byte
range). Reading them costs a read of the moov box instead of a demux pass over the whole file.
PyAV does not expose them (FFmpeg's index entries carry decode times only), and PyPI's ``pymp4``
(construct-based, a Python object per table entry) would be a new dependency for five box types,
so this is a small parser: it understands the boxes above
and returns None for anything else (fragmented files, ``stz2``, several edits), where the caller
falls back to the demux pass.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np

#: A moov box larger than this is not read (a 4-hour 60 fps file's tables are ~15 MB).
MAX_MOOV_BYTES = 256 * 2**20

_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts"}


class SampleTable(NamedTuple):
    """One video track's samples in decode order, in the track's time units (``timescale``)."""

    timescale: int
    dts: np.ndarray  # int64, decode times from stts (first sample at 0)
    cts: np.ndarray  # int64, composition offsets from ctts (0 without one)
    keyframe: np.ndarray  # bool, from stss (all True without one)
    offset: np.ndarray  # int64, byte offset of each sample in the file
    size: np.ndarray  # int64, bytes of each sample
    #: The edit that selects what is shown, as (media_time, duration in track units; -1 = to the
    #: end), after leading empty edits; None without an edit list.
    edit: tuple[int, int] | None
    #: Leading empty edits (a presentation delay), in track units.
    empty: int


def _boxes(buf: bytes, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """(type, payload start, box end) of the boxes in ``buf[start:end]``."""
    out = []
    at = start
    while at + 8 <= end:
        size, kind = struct.unpack_from(">I4s", buf, at)
        head = 8
        if size == 1:
            if at + 16 > end:
                raise ValueError("box header cut off")
            size = struct.unpack_from(">Q", buf, at + 8)[0]
            head = 16
        elif size == 0:
            size = end - at
        if size < head or at + size > end:
            raise ValueError(f"box {kind!r} overruns its parent")
        out.append((kind, at + head, at + size))
        at += size
    return out


def _find(buf: bytes, start: int, end: int, path: list[bytes]) -> list[tuple[int, int]]:
    """Payload ranges of the boxes at ``path`` (e.g. [b"trak"]) under ``buf[start:end]``."""
    found = []
    for kind, a, b in _boxes(buf, start, end):
        if kind == path[0]:
            found += [(a, b)] if len(path) == 1 else _find(buf, a, b, path[1:])
    return found


def _one(buf: bytes, start: int, end: int, path: list[bytes]) -> tuple[int, int] | None:
    found = _find(buf, start, end, path)
    return found[0] if len(found) == 1 else None


def read_moov(f: BinaryIO, file_size: int) -> bytes | None:
    """The moov box's payload, walking the top-level boxes by their sizes; None for a fragmented file."""
    at = 0
    while at + 8 <= file_size:
        f.seek(at)
        head = f.read(16)
        if len(head) < 8:
            return None
        size, kind = struct.unpack_from(">I4s", head)
        hlen = 8
        if size == 1:
            if len(head) < 16:
                return None
            size, hlen = struct.unpack_from(">Q", head, 8)[0], 16
        elif size == 0:
            size = file_size - at
        if size < hlen:
            return None
        if kind == b"moof":
            return None  # fragmented: the samples are described outside the moov
        if kind == b"moov":
            if size > MAX_MOOV_BYTES or at + size > file_size:
                return None
            f.seek(at + hlen)
            data = f.read(size - hlen)
            return data if len(data) == size - hlen else None
        at += size
    return None


def _full_box(buf: bytes, a: int) -> tuple[int, int]:
    """(version, payload start after version and flags)."""
    return buf[a], a + 4


def _table(buf: bytes, at: int, count: int, fmt: str) -> np.ndarray:
    """``count`` big-endian records of ``fmt`` (a numpy dtype spec of one or more fields)."""
    dt = np.dtype(fmt)
    if at + count * dt.itemsize > len(buf):
        raise ValueError("table overruns its box")
    return np.frombuffer(buf, dt, count, at)


def video_track(moov: bytes, file_size: int) -> SampleTable | None:
    """The first video track's sample tables, or None where they are not all simple to read.

    ``file_size`` bounds the sample count (every sample holds a byte): a damaged header must not
    make the tables allocate more than the file could describe.
    """
    if _find(moov, 0, len(moov), [b"mvex"]):
        return None  # fragmented
    movie_scale = None
    mvhd = _one(moov, 0, len(moov), [b"mvhd"])
    if mvhd:
        v, p = _full_box(moov, mvhd[0])
        movie_scale = struct.unpack_from(">I", moov, p + (16 if v == 1 else 8))[0]
    for trak in _find(moov, 0, len(moov), [b"trak"]):
        hdlr = _one(moov, *trak, [b"mdia", b"hdlr"])
        if hdlr is None or moov[hdlr[0] + 8 : hdlr[0] + 12] != b"vide":
            continue
        try:
            return _track(moov, trak, movie_scale, file_size)
        except (ValueError, struct.error):
            return None
    return None


def _track(buf: bytes, trak: tuple[int, int], movie_scale: int | None, file_size: int) -> SampleTable | None:
    mdhd = _one(buf, *trak, [b"mdia", b"mdhd"])
    stbl = _one(buf, *trak, [b"mdia", b"minf", b"stbl"])
    if mdhd is None or stbl is None:
        return None
    v, p = _full_box(buf, mdhd[0])
    timescale = struct.unpack_from(">I", buf, p + (16 if v == 1 else 8))[0]
    boxes = {kind: (a, b) for kind, a, b in _boxes(buf, *stbl)}
    if b"stz2" in boxes or not all(k in boxes for k in (b"stts", b"stsz", b"stsc")) or timescale <= 0:
        return None
    # stsz: sizes
    _v, p = _full_box(buf, boxes[b"stsz"][0])
    fixed, n = struct.unpack_from(">II", buf, p)
    if n > file_size:
        return None
    size = np.full(n, fixed, np.int64) if fixed else _table(buf, p + 8, n, ">u4").astype(np.int64)
    # stts: decode times
    _v, p = _full_box(buf, boxes[b"stts"][0])
    stts = _table(buf, p + 4, struct.unpack_from(">I", buf, p)[0], ">u4,>u4")
    if int(stts["f0"].sum()) != n:
        return None
    deltas = np.repeat(stts["f1"].astype(np.int64), stts["f0"].astype(np.int64))
    if len(deltas) != n:
        return None
    dts = np.concatenate([[0], np.cumsum(deltas[:-1])]).astype(np.int64) if n else np.zeros(0, np.int64)
    # ctts: composition offsets (signed in practice, whatever the version says)
    cts = np.zeros(n, np.int64)
    if b"ctts" in boxes:
        _v, p = _full_box(buf, boxes[b"ctts"][0])
        ctts = _table(buf, p + 4, struct.unpack_from(">I", buf, p)[0], ">u4,>i4")
        if int(ctts["f0"].sum()) != n:
            return None
        cts = np.repeat(ctts["f1"].astype(np.int64), ctts["f0"].astype(np.int64))
        if len(cts) != n:
            return None
    # stss: sync samples (1-based); none means every sample is one
    keyframe = np.ones(n, bool)
    if b"stss" in boxes:
        _v, p = _full_box(buf, boxes[b"stss"][0])
        sync = _table(buf, p + 4, struct.unpack_from(">I", buf, p)[0], ">u4").astype(np.int64) - 1
        if len(sync) and (sync.min() < 0 or sync.max() >= n):
            return None
        keyframe = np.zeros(n, bool)
        keyframe[sync] = True
    offset = _offsets(buf, boxes, size)
    if offset is None:
        return None
    edit, empty = None, 0
    elst = _one(buf, *trak, [b"edts", b"elst"])
    if elst is not None:
        parsed = _edit(buf, elst[0], timescale, movie_scale)
        if parsed is None:
            return None
        edit, empty = parsed
    return SampleTable(timescale, dts, cts, keyframe, offset, size, edit, empty)


def _offsets(buf: bytes, boxes: dict[bytes, tuple[int, int]], size: np.ndarray) -> np.ndarray | None:
    """Each sample's byte offset: chunk offsets (stco/co64) and samples per chunk (stsc)."""
    if b"stco" in boxes:
        _v, p = _full_box(buf, boxes[b"stco"][0])
        chunk_off = _table(buf, p + 4, struct.unpack_from(">I", buf, p)[0], ">u4").astype(np.int64)
    elif b"co64" in boxes:
        _v, p = _full_box(buf, boxes[b"co64"][0])
        chunk_off = _table(buf, p + 4, struct.unpack_from(">I", buf, p)[0], ">u8").astype(np.int64)
    else:
        return None
    _v, p = _full_box(buf, boxes[b"stsc"][0])
    stsc = _table(buf, p + 4, struct.unpack_from(">I", buf, p)[0], ">u4,>u4,>u4")
    first = stsc["f0"].astype(np.int64) - 1
    n_chunks = len(chunk_off)
    if len(first) == 0 or first[0] != 0 or np.any(np.diff(first) <= 0) or first[-1] >= n_chunks:
        return None
    runs = np.diff(np.append(first, n_chunks))
    per_chunk = np.repeat(stsc["f1"].astype(np.int64), runs)
    if per_chunk.sum() != len(size):
        return None
    chunk_of = np.repeat(np.arange(n_chunks), per_chunk)
    before = np.cumsum(size) - size  # bytes of the samples before each one
    chunk_first = np.cumsum(per_chunk) - per_chunk  # each chunk's first sample
    has = per_chunk > 0
    base = np.zeros(n_chunks, np.int64)
    base[has] = before[chunk_first[has]]
    return chunk_off[chunk_of] + before - base[chunk_of]


def _edit(buf: bytes, a: int, timescale: int, movie_scale: int | None) -> tuple[tuple[int, int], int] | None:
    """(media_time, duration in track units; -1 = to the end), leading empty edits; None: not one plain edit."""
    v, p = _full_box(buf, a)
    count = struct.unpack_from(">I", buf, p)[0]
    rec = ">u8,>i8,>i2,>i2" if v == 1 else ">u4,>i4,>i2,>i2"
    entries = _table(buf, p + 4, count, rec)
    empty_movie = 0
    edits: list[tuple[int, int]] = []
    for dur, media_time, rate, _frac in entries.tolist():
        if media_time == -1:
            if edits:
                return None  # an empty edit after the content: a gap in the middle
            empty_movie += dur
            continue
        if rate != 1:
            return None  # dwell or speed edits
        edits.append((dur, media_time))
    if len(edits) != 1 or not movie_scale:
        return None
    dur, media_time = edits[0]
    ms: int = movie_scale

    def rescale(x: int) -> int:  # av_rescale: to the nearest unit
        return (x * timescale + ms // 2) // ms

    return (media_time, -1 if dur == 0 else rescale(dur)), rescale(empty_movie)


def packet_times(table: SampleTable) -> tuple[np.ndarray, np.ndarray]:
    """(pts, discard) per sample, as FFmpeg's demuxer gives them: the composition time moved so the
    edit's first shown instant is 0 (plus leading empty edits), and the samples outside the edit
    flagged discard (a stream-copy cut keeps the GOP before its first shown frame, hidden)."""
    raw = table.dts + table.cts
    if table.edit is None:
        return raw, np.zeros(len(raw), bool)
    media_time, duration = table.edit
    discard = raw < media_time
    if duration >= 0:
        discard |= raw >= media_time + duration
    return raw - media_time + table.empty, discard


def sample_table(path: str | Path) -> SampleTable | None:
    """The first video track's sample tables of the MP4/MOV at ``path``; None where not readable here."""
    p = Path(path)
    size = p.stat().st_size
    with open(p, "rb") as f:
        try:
            moov = read_moov(f, size)
        except (OSError, struct.error):
            return None
    if moov is None:
        return None
    try:
        return video_track(moov, size)
    except (ValueError, struct.error):
        return None
