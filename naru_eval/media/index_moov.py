"""The frame index of an MP4/MOV from its sample tables (:mod:`naru_eval.media.mp4_index`), trusted
where the packets agree: the first and last GOPs are demuxed and compared with the tables sample
for sample, the first frame decoded, and the last GOP decoded to see which frame it really ends on.

That last decode is the index's largest cost on a file's first touch (a GOP of pictures), and it
can wait (:class:`TailCheck`): the sampler decodes its frames with the index the tables give, then
decodes the last GOP while its conversion threads finish, and samples again in the rare case the
GOP ends before the last frame the tables show (:func:`naru_eval.media.index.provisional_index`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from naru_eval.media.video import PictureSkipper, seek_start

if TYPE_CHECKING:
    import numpy as np


class FromMoov(NamedTuple):
    shown: np.ndarray  # pts of the frames shown (hidden ones of an edit list left out), decode order
    key_pts: np.ndarray
    key_pos: np.ndarray
    head: list[int] | None  # the first frame decoding gives out, where the start is clean
    tail: TailCheck  # which frame the last GOP ends on


def packets_from_moov(p: Path, container: Any, stream: Any) -> FromMoov | None:
    """The packets' timestamps from the moov box: no pass over the file. Decodes the first frame
    while checking the first GOP; the last GOP's decode waits (:class:`TailCheck`).

    Trusted only where the container agrees: the sample count is FFmpeg's, every sample lies inside
    the file (else it is cut: the demux pass and the truncation check decide), and the first and
    last GOPs' packets, demuxed, match the tables sample for sample (timestamp, keyframe, hidden,
    offset, size). A table that disagrees in between is caught by the sampler, which then rebuilds
    the index by demuxing (``sample_frames``).
    """
    from fractions import Fraction

    import numpy as np

    from naru_eval.media import mp4_index

    # FFmpeg's own sample count bounds what the tables may claim (it read the same stsz)
    table = mp4_index.sample_table(p, track_id=int(stream.id), samples=int(stream.frames or 0) or None)
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
    if len(keys) == 0 or bool(discard.all()):
        return None
    gop1 = slice(0, int(keys[1]) if len(keys) > 1 else len(pts))
    shown_gop1 = pts[gop1][~discard[gop1]]
    clean = bool(key[0]) and (len(shown_gop1) == 0 or int(shown_gop1.min()) >= int(pts[0]))

    def rows(a: int, b: int) -> list[list[int]]:
        return np.stack([pts[a:b], key[a:b], discard[a:b], pos[a:b], size[a:b]], axis=1).astype(np.int64).tolist()

    head_end = int(keys[1]) + 1 if len(keys) > 1 else len(pts)
    # A clean start shows its keyframe first: the decoder is drained after it (no picture decoded to push it out).
    head_rows, first = demuxed_rows(container, stream, None, head_end, decode=1 if clean else 0, drain_first=True)
    if head_rows != rows(0, head_end):
        return None
    last_key = int(keys[-1])
    # The seek may land a GOP early: the rows are compared from wherever it landed.
    tail, _ = demuxed_rows(container, stream, int(pts[last_key]), None)
    at = np.flatnonzero(pos == tail[0][3]) if tail else np.zeros(0, np.int64)
    if len(at) != 1 or int(at[0]) > last_key or tail != rows(int(at[0]), len(pts)):
        return None
    check = TailCheck(int(pts[~discard].max()), int(pts[last_key]))
    return FromMoov(pts[~discard], pts[keys], pos[keys], first or None, check)


def demuxed_rows(
    container: Any,
    stream: Any,
    seek_pts: int | None,
    limit: int | None,
    decode: int | None = 0,
    keep: int | None = None,
    drain_first: bool = False,
) -> tuple[list[list[int]], list[int]]:
    """[pts, keyframe, discard, pos, size] of the packets from the start (or a keyframe seek), up to
    ``limit``; and the timestamps of the first ``decode`` frames they decode to (None: all). With
    ``keep``, the non-reference pictures but that one may be left undecoded (``PictureSkipper``);
    ``drain_first``: the decoder is drained after the first packet (what it gives out then is all
    that is decoded)."""
    import av

    if seek_pts is None:
        seek_start(container, stream)
    else:
        container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
    rows: list[list[int]] = []
    decoded: list[int] = []
    try:
        with PictureSkipper(stream.codec_context, None if keep is None else keep.__eq__) as skip:
            for packet in container.demux(stream):
                if decode is None or len(decoded) < decode:
                    skip(packet)
                    try:
                        frames = packet.decode()
                        if drain_first:
                            frames += stream.codec_context.decode(None)
                            decode = len(decoded) + len(frames)
                        decoded += [f.pts for f in frames if f.pts is not None]
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


class TailCheck:
    """Which frame the last GOP really ends on (the largest timestamp decoding it gives out),
    decoded when :meth:`last` is asked, on the stream's own decoder. Only whether the last picture
    shown comes out decides it, so the other non-reference pictures are left undecoded
    (``PictureSkipper``), unless it then does not come out: then every picture is decoded, as the
    check always was."""

    def __init__(self, last_shown: int, seek_pts: int) -> None:
        self.last_shown, self.seek_pts = last_shown, seek_pts

    def last(self, container: Any, stream: Any) -> int | None:
        """The largest timestamp decoding the last GOP gives out (moves the demuxer)."""
        _, decoded = demuxed_rows(container, stream, self.seek_pts, None, decode=None, keep=self.last_shown)
        if self.last_shown not in decoded:
            _, decoded = demuxed_rows(container, stream, self.seek_pts, None, decode=None)
        return max(decoded) if decoded else None
