"""Real-world-like encodings whose frames show their own index, made with PyAV at test time.

Each builder returns the file's path. Frame ``i`` of the source shows ``i`` (``index_image``);
a player shows the frames in presentation order, so the truth for a file is a full sequential
decode (:func:`decoded_stamps`), against which the sampler is compared.
"""

from __future__ import annotations

import struct
from fractions import Fraction
from pathlib import Path

import numpy as np

from naru_eval.core.synthetic import index_image, read_frame_index

SIZE = (64, 48)  # small: the whole corpus builds in seconds


def encode(
    path: Path,
    pts: list[int],
    time_base: Fraction,
    codec: str = "libx264",
    options: dict[str, str] | None = None,
    container_options: dict[str, str] | None = None,
    size: tuple[int, int] = SIZE,
    sar: Fraction | None = None,
    rotate_content: int = 0,
    fmt: str | None = None,
) -> Path:
    """Encode ``len(pts)`` stamped frames at the given presentation timestamps.

    ``rotate_content`` (multiples of 90, counter-clockwise) rotates each picture before encoding, as
    a phone's sensor records it when held upright; the file's display matrix then undoes it.
    """
    import av

    width, height = size
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format=fmt, options=container_options or {}) as c:
        rate = Fraction(len(pts), 1) / (time_base * max(1, pts[-1] - pts[0])) if len(pts) > 1 else Fraction(10)
        s = c.add_stream(codec, rate=Fraction(max(1, round(rate * 1000)), 1000))
        coded_w, coded_h = (height, width) if rotate_content % 180 else (width, height)
        s.width, s.height, s.pix_fmt = coded_w, coded_h, "yuv420p"
        s.codec_context.time_base = time_base
        s.time_base = time_base
        if sar is not None:
            s.codec_context.sample_aspect_ratio = sar
        s.options = options or {}
        for i, p in enumerate(pts):
            img = index_image(i, width, height)
            if rotate_content:
                img = np.ascontiguousarray(np.rot90(img, rotate_content // 90))
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts, frame.time_base = p, time_base
            for packet in s.encode(frame):
                c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    return path


def cfr(n: int, fps: int = 25) -> tuple[list[int], Fraction]:
    return list(range(n)), Fraction(1, fps)


def vfr_segments(seconds: float = 2.0) -> tuple[list[int], Fraction]:
    """24, then 30, then 60 fps (a time base of 1/600 s holds all three)."""
    pts, t = [], 0
    for fps in (24, 30, 60, 24):
        step = 600 // fps
        for _ in range(int(seconds * fps)):
            pts.append(t)
            t += step
    return pts, Fraction(1, 600)


def vfr_jittered(n: int = 240, seed: int = 0) -> tuple[list[int], Fraction]:
    """A phone's timestamps: nominal 30 fps, each frame 25-42 ms after the last (1/90000 s units)."""
    rng = np.random.default_rng(seed)
    gaps = rng.integers(2250, 3780, size=n)
    gaps[n // 3 : n // 3 + 10] = 9000  # a stall: 10 frames at 10 fps
    return [0, *np.cumsum(gaps[:-1]).tolist()], Fraction(1, 90000)


def x264(gop: int, bframes: int = 2, open_gop: bool = False) -> dict[str, str]:
    params = f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}" + (":open-gop=1" if open_gop else "")
    return {"x264-params": params, "preset": "veryfast", "crf": "18"}


def x265(gop: int, bframes: int = 3) -> dict[str, str]:
    # x265's default is an open GOP: CRA keyframes with leading (RASL) pictures.
    return {
        "x265-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:open-gop=1:log-level=error",
        "preset": "ultrafast",
        "crf": "18",
    }


def mpeg2(gop: int) -> dict[str, str]:
    return {"g": str(gop), "bf": "2", "qscale": "3"}


def stream_copy_cut(src: Path, dst: Path, first: int, count: int) -> Path:
    """Copy the packets of frames ``first..first+count-1`` without re-encoding, as ``-ss -c copy`` does.

    The cut starts at the keyframe before ``first``; the frames before ``first`` get negative
    timestamps, which the MP4 muxer turns into an edit list that a player skips.
    """
    import av

    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        ist = inp.streams.video[0]
        ost = out.add_stream_from_template(ist)
        packets = [p for p in inp.demux(ist) if p.size]
        tb = ist.time_base
        step = int(round(1 / (float(tb) * float(ist.average_rate))))
        cut_pts = (ist.start_time or 0) + first * step
        end_pts = cut_pts + count * step
        keys = [p.pts for p in packets if p.is_keyframe and p.pts <= cut_pts]
        start_key = max(keys)
        started = False
        for p in packets:
            if p.is_keyframe and p.pts == start_key:
                started = True
            if not started or p.pts >= end_pts:
                continue
            p.pts -= cut_pts
            p.dts -= cut_pts
            p.stream = ost
            out.mux(p)
    return dst


def set_display_rotation(path: Path, degrees: int) -> Path:
    """Write a display matrix rotating by ``degrees`` counter-clockwise into the MP4's video ``tkhd``.

    Same values as FFmpeg's ``av_display_rotation_set``; the file is patched in place.
    """
    data = bytearray(path.read_bytes())
    at = data.find(b"tkhd")
    assert at > 0, "no tkhd box"
    version = data[at + 4]
    matrix_at = at + 4 + (4 + 8 * 3 + 8 if version == 1 else 4 + 4 * 5 + 8) + 8
    r = -np.deg2rad(degrees)
    c, s = round(np.cos(r) * 65536), round(np.sin(r) * 65536)
    # FFmpeg reads the tkhd matrix transposed relative to its own display matrix.
    struct.pack_into(">9i", data, matrix_at, c, s, 0, -s, c, 0, 0, 0, 1 << 30)
    path.write_bytes(bytes(data))
    return path


def recording_from_midstream(src: Path, dst: Path, packet_size: int = 188) -> Path:
    """The transport stream from a third of the way in, as a broadcast recorder starts mid-GOP.

    The cut falls on the first non-keyframe packet past a third of the file, at a TS packet
    boundary (188 bytes; 192 for M2TS), so the file is valid but begins with pictures whose
    references are missing.
    """
    import av

    data = src.read_bytes()
    with av.open(str(src)) as c:
        pos = next(
            p.pos for p in c.demux(c.streams.video[0]) if p.size and not p.is_keyframe and p.pos > len(data) // 3
        )
    dst.write_bytes(data[pos // packet_size * packet_size :])
    return dst


def cut_mid_frame(src: Path, dst: Path, fraction: float, packet_size: int = 188) -> Path:
    """The transport stream cut inside the first multi-packet non-key picture past ``fraction`` of
    the file, at a TS packet boundary: a recording stopped mid-frame, so its last picture is partial."""
    import av

    data = src.read_bytes()
    with av.open(str(src)) as c:
        pos, size = next(
            (p.pos, p.size)
            for p in c.demux(c.streams.video[0])
            if p.size > 2 * packet_size and not p.is_keyframe and p.pos > len(data) * fraction
        )
    dst.write_bytes(data[: (pos + size // 2) // packet_size * packet_size])
    return dst


def truncate(src: Path, dst: Path, fraction: float) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * fraction)])
    return dst


def sparse(path: Path, frames: int = 2, gap_s: int = 36_000) -> Path:
    """``frames`` frames ``gap_s`` seconds apart: a tiny file whose header claims hours (10 h by default)."""
    return encode(path, [i * gap_s for i in range(frames)], Fraction(1, 1), options=x264(1, 0))


def decoded(path: Path) -> list[np.ndarray]:
    """Every frame a plain sequential decode gives (PyAV's defaults), RGB, in presentation order.

    A stream cut mid-frame may end in a decoding error: the frames given out before it count.
    """
    import av

    out = []
    with av.open(str(path)) as c:
        try:
            for f in c.decode(c.streams.video[0]):
                out.append(f.to_ndarray(format="rgb24"))
        except av.error.FFmpegError:
            pass
    return out


def decoded_stamps(path: Path) -> list[int]:
    """Every frame a plain sequential decode gives, in presentation order, as the stamps they show."""
    return [read_frame_index(f) for f in decoded(path)]
