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
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np

#: A moov box larger than this is not read (a 4-hour 60 fps file's tables are ~15 MB).
MAX_MOOV_BYTES = 256 * 2**20
#: The most boxes one parse walks (top level, the moov and the path to the sample tables): a real
#: file has a few dozen; a hostile moov of millions of empty boxes is refused (the demux pass reads
#: it) instead of costing a Python loop per box.
MAX_BOXES = 10_000

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


class _Budget:
    """Boxes left to walk in one parse (``MAX_BOXES``)."""

    def __init__(self) -> None:
        self.left = MAX_BOXES

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ValueError(f"more than {MAX_BOXES} boxes")


def _boxes(buf: bytes, start: int, end: int, budget: _Budget) -> Iterator[tuple[bytes, int, int]]:
    """(type, payload start, box end) of the boxes in ``buf[start:end]``, one at a time."""
    at = start
    while at + 8 <= end:
        budget.take()
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
        yield kind, at + head, at + size
        at += size


def _children(buf: bytes, start: int, end: int, budget: _Budget) -> dict[bytes, list[tuple[int, int]]]:
    """Payload ranges of the boxes directly in ``buf[start:end]``, by type (one walk)."""
    out: dict[bytes, list[tuple[int, int]]] = {}
    for kind, a, b in _boxes(buf, start, end, budget):
        out.setdefault(kind, []).append((a, b))
    return out


def _one(found: dict[bytes, list[tuple[int, int]]], kind: bytes) -> tuple[int, int] | None:
    ranges = found.get(kind, [])
    return ranges[0] if len(ranges) == 1 else None


def read_moov(f: BinaryIO, file_size: int, budget: _Budget | None = None) -> bytes | None:
    """The moov box's payload, walking the top-level boxes by their sizes; None for a fragmented file."""
    budget = budget or _Budget()
    at = 0
    while at + 8 <= file_size:
        budget.take()
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


def _full_box(buf: bytes, box: tuple[int, int], need: int = 0) -> tuple[int, int]:
    """(version, payload start after version and flags) of a full box whose payload spans
    ``box``; the box must hold the version and flags and ``need`` more bytes."""
    a, b = box
    if b - a < 4 + need:
        raise ValueError("box too short for its header")
    return buf[a], a + 4


def _table(buf: bytes, box: tuple[int, int], at: int, count: int, fmt: str) -> np.ndarray:
    """``count`` big-endian records of ``fmt`` (a numpy dtype spec of one or more fields) at
    ``at``, all inside ``box`` (a table claiming more entries than its box holds is refused)."""
    dt = np.dtype(fmt)
    if count < 0 or at + count * dt.itemsize > box[1]:
        raise ValueError("table overruns its box")
    return np.frombuffer(buf, dt, count, at)


def _counted(buf: bytes, box: tuple[int, int], fmt: str) -> np.ndarray:
    """A full box's table: a 32-bit entry count, then the entries."""
    _v, p = _full_box(buf, box, 4)
    return _table(buf, box, p + 4, struct.unpack_from(">I", buf, p)[0], fmt)


def video_track(
    moov: bytes, file_size: int, track_id: int | None = None, samples: int | None = None
) -> SampleTable | None:
    """The video track's sample tables (``track_id``: the one with that ``tkhd`` track ID, which
    FFmpeg gives as the stream's id; else the first), or None where they are not all simple to read.

    ``file_size`` and ``samples`` (the sample count FFmpeg read, where known) bound the sample
    count before any table is expanded: a damaged header must not make the tables allocate more
    than the file could describe.
    """
    budget = _Budget()
    top = _children(moov, 0, len(moov), budget)
    if b"mvex" in top:
        return None  # fragmented
    movie_scale = None
    mvhd = _one(top, b"mvhd")
    if mvhd:
        v, p = _full_box(moov, mvhd, 20 if _v1(moov, mvhd) else 12)
        movie_scale = struct.unpack_from(">I", moov, p + (16 if v == 1 else 8))[0]
    for trak in top.get(b"trak", []):
        kids = _children(moov, *trak, budget)
        mdia = _one(kids, b"mdia")
        if mdia is None:
            continue
        media = _children(moov, *mdia, budget)
        hdlr = _one(media, b"hdlr")
        if hdlr is None or hdlr[1] - hdlr[0] < 12 or moov[hdlr[0] + 8 : hdlr[0] + 12] != b"vide":
            continue
        if track_id is not None and _track_id(moov, kids) != track_id:
            continue
        return _track(moov, kids, media, movie_scale, file_size, samples, budget)
    return None


def _v1(buf: bytes, box: tuple[int, int]) -> bool:
    """A full box of version 1 (64-bit times)."""
    return box[1] > box[0] and buf[box[0]] == 1


def _track_id(buf: bytes, kids: dict[bytes, list[tuple[int, int]]]) -> int | None:
    tkhd = _one(kids, b"tkhd")
    if tkhd is None:
        return None
    v, p = _full_box(buf, tkhd, 20 if _v1(buf, tkhd) else 12)
    return int(struct.unpack_from(">I", buf, p + (16 if v == 1 else 8))[0])


def _track(
    buf: bytes,
    kids: dict[bytes, list[tuple[int, int]]],
    media: dict[bytes, list[tuple[int, int]]],
    movie_scale: int | None,
    file_size: int,
    samples: int | None,
    budget: _Budget,
) -> SampleTable | None:
    mdhd = _one(media, b"mdhd")
    minf = _one(media, b"minf")
    if mdhd is None or minf is None:
        return None
    stbl = _one(_children(buf, *minf, budget), b"stbl")
    if stbl is None:
        return None
    v, p = _full_box(buf, mdhd, 20 if _v1(buf, mdhd) else 12)
    timescale = struct.unpack_from(">I", buf, p + (16 if v == 1 else 8))[0]
    boxes = {kind: ranges[0] for kind, ranges in _children(buf, *stbl, budget).items() if len(ranges) == 1}
    if b"stz2" in boxes or not all(k in boxes for k in (b"stts", b"stsz", b"stsc")) or timescale <= 0:
        return None
    # stsz: sizes. The count is bounded before anything is allocated: by FFmpeg's count, and by the
    # file (every sample holds at least one byte, a fixed-size sample its size).
    _v, p = _full_box(buf, boxes[b"stsz"], 8)
    fixed, n = struct.unpack_from(">II", buf, p)
    if (samples is not None and n != samples) or n * max(1, fixed) > file_size:
        return None
    size = np.full(n, fixed, np.int64) if fixed else _table(buf, boxes[b"stsz"], p + 8, n, ">u4").astype(np.int64)
    # stts: decode times
    stts = _counted(buf, boxes[b"stts"], ">u4,>u4")
    if int(stts["f0"].astype(np.int64).sum()) != n:
        return None
    deltas = np.repeat(stts["f1"].astype(np.int64), stts["f0"].astype(np.int64))
    dts = np.concatenate([[0], np.cumsum(deltas[:-1])]).astype(np.int64) if n else np.zeros(0, np.int64)
    # ctts: composition offsets (signed in practice, whatever the version says)
    cts = np.zeros(n, np.int64)
    if b"ctts" in boxes:
        ctts = _counted(buf, boxes[b"ctts"], ">u4,>i4")
        if int(ctts["f0"].astype(np.int64).sum()) != n:
            return None
        cts = np.repeat(ctts["f1"].astype(np.int64), ctts["f0"].astype(np.int64))
    # stss: sync samples (1-based); none means every sample is one
    keyframe = np.ones(n, bool)
    if b"stss" in boxes:
        sync = _counted(buf, boxes[b"stss"], ">u4").astype(np.int64) - 1
        if len(sync) and (sync.min() < 0 or sync.max() >= n):
            return None
        keyframe = np.zeros(n, bool)
        keyframe[sync] = True
    offset = _offsets(buf, boxes, size)
    if offset is None:
        return None
    edit, empty = None, 0
    edts = _one(kids, b"edts")
    elst = _one(_children(buf, *edts, budget), b"elst") if edts is not None else None
    if elst is not None:
        parsed = _edit(buf, elst, timescale, movie_scale)
        if parsed is None:
            return None
        edit, empty = parsed
    return SampleTable(timescale, dts, cts, keyframe, offset, size, edit, empty)


def _offsets(buf: bytes, boxes: dict[bytes, tuple[int, int]], size: np.ndarray) -> np.ndarray | None:
    """Each sample's byte offset: chunk offsets (stco/co64) and samples per chunk (stsc)."""
    if b"stco" in boxes:
        chunk_off = _counted(buf, boxes[b"stco"], ">u4").astype(np.int64)
    elif b"co64" in boxes:
        chunk_off = _counted(buf, boxes[b"co64"], ">u8")
        if len(chunk_off) and int(chunk_off.max()) >= 2**62:
            return None
        chunk_off = chunk_off.astype(np.int64)
    else:
        return None
    stsc = _counted(buf, boxes[b"stsc"], ">u4,>u4,>u4")
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


def _edit(
    buf: bytes, box: tuple[int, int], timescale: int, movie_scale: int | None
) -> tuple[tuple[int, int], int] | None:
    """(media_time, duration in track units; -1 = to the end), leading empty edits; None: not one plain edit."""
    v = buf[box[0]] if box[1] > box[0] else 0
    entries = _counted(buf, box, ">u8,>i8,>i2,>i2" if v == 1 else ">u4,>i4,>i2,>i2")
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


#: Everything a malformed box can raise while it is read: the caller falls back to the demux pass.
MALFORMED = (ValueError, struct.error, IndexError, OverflowError, KeyError, TypeError, MemoryError)


def sample_table(path: str | Path, track_id: int | None = None, samples: int | None = None) -> SampleTable | None:
    """The video track's sample tables of the MP4/MOV at ``path`` (see :func:`video_track`); None
    where they are not readable here, for whatever reason (the demux pass then reads the file)."""
    p = Path(path)
    size = p.stat().st_size
    budget = _Budget()
    with open(p, "rb") as f:
        try:
            moov = read_moov(f, size, budget)
        except (OSError, *MALFORMED):
            return None
    if moov is None:
        return None
    try:
        return video_track(moov, size, track_id, samples)
    except MALFORMED:
        return None
