"""Real-world-like encodings whose frames show their own index, made with PyAV at test time.

Each builder returns the file's path. Frame ``i`` of the source shows ``i`` (``index_image``);
a player shows the frames in presentation order, so the truth for a file is a full sequential
decode (:func:`decoded_stamps`), against which the sampler is compared.
"""

from __future__ import annotations

import struct
import subprocess
from collections.abc import Callable
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
    colour: tuple[int, int] | None = None,
    pix_fmt: str = "yuv420p",
    image: Callable[[int, int, int], np.ndarray] = index_image,
) -> Path:
    """Encode ``len(pts)`` stamped frames at the given presentation timestamps.

    ``rotate_content`` (multiples of 90, counter-clockwise) rotates each picture before encoding, as
    a phone's sensor records it when held upright; the file's display matrix then undoes it.
    ``colour`` = (AVColorSpace, AVColorRange) tags the stream and its frames (the YUV samples are
    the same whatever the tag: what differs is how a decoder must read them); ``image(i, w, h)``
    draws frame ``i`` (the index stamp by default).
    """
    import av

    width, height = size
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format=fmt, options=container_options or {}) as c:
        rate = Fraction(len(pts), 1) / (time_base * max(1, pts[-1] - pts[0])) if len(pts) > 1 else Fraction(10)
        s = c.add_stream(codec, rate=Fraction(max(1, round(rate * 1000)), 1000))
        coded_w, coded_h = (height, width) if rotate_content % 180 else (width, height)
        s.width, s.height, s.pix_fmt = coded_w, coded_h, pix_fmt
        s.codec_context.time_base = time_base
        s.time_base = time_base
        if sar is not None:
            s.codec_context.sample_aspect_ratio = sar
        if colour is not None:
            s.codec_context.colorspace, s.codec_context.color_range = colour
        s.options = options or {}
        for i, p in enumerate(pts):
            img = image(i, width, height)
            if rotate_content:
                img = np.ascontiguousarray(np.rot90(img, rotate_content // 90))
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            if pix_fmt != "yuv420p" or colour is not None:
                frame = frame.reformat(format=pix_fmt)
            if colour is not None:
                frame.colorspace, frame.color_range = colour
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


# --------------------------------------------------------------------------- colour


def colour_image(i: int, width: int, height: int) -> np.ndarray:
    """Saturated colour: three gradients, a band of noise and blocks of random colours (seeded by
    ``i``), so every matrix coefficient and the chroma edges show in the pixels."""
    rng = np.random.default_rng(1000 + i)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([x * 255 // max(1, width - 1), y * 255 // max(1, height - 1), (x + y + 8 * i) % 256], -1)
    img = img.astype(np.uint8)
    side = max(4, width // 16)
    for _ in range(24):
        x0, y0 = rng.integers(0, width - side), rng.integers(0, height - side)
        img[y0 : y0 + side, x0 : x0 + side] = rng.integers(0, 256, 3)
    img[: height // 8] = rng.integers(0, 256, (height // 8, width, 3))
    return img


#: AVColorSpace / AVColorRange values (libavutil/pixfmt.h)
BT709, UNSPECIFIED, FCC, BT470BG, SMPTE170M, SMPTE240M, BT2020_NCL = 1, 2, 4, 5, 6, 7, 9
LIMITED, FULL = 1, 2


def x265_fast(gop: int) -> dict[str, str]:
    return {"x265-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:log-level=error", "preset": "ultrafast"}


def ffmpeg_rgb(path: Path, size: tuple[int, int] | None = None, stream: int | None = None) -> np.ndarray:
    """Every frame as the ffmpeg CLI converts it to RGB24 (its ``scale`` filter, default flags),
    at native size or scaled to ``size`` = (width, height): the reference the sampler is held to.
    ``stream``: that container stream (else the first video stream)."""
    import av

    with av.open(str(path)) as c:
        chosen = next(s for s in c.streams.video if stream is None or s.index == stream)
        ctx = chosen.codec_context
        width, height = size or (ctx.width, ctx.height)
        index = chosen.index
    vf = ["-vf", f"scale={width}:{height}"] if size else []
    cmd = ["ffmpeg", "-v", "error", "-nostdin", "-i", str(path), "-map", f"0:{index}", *vf, "-fps_mode", "passthrough"]
    cmd += ["-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return np.frombuffer(out, np.uint8).reshape(-1, height, width, 3)


# --------------------------------------------------------------------------- several video streams


def cover_art_first_mkv(path: Path, film_frames: int = 50, size: tuple[int, int] = (320, 240)) -> Path:
    """A Matroska file as anime and drama releases carry cover art: a one-frame JPEG track first
    (larger than the film, not the default), then the film (the default track, stamped frames)."""
    import av

    width, height = size
    with av.open(str(path), "w") as c:
        cover = c.add_stream("mjpeg", rate=1)
        cover.width, cover.height, cover.pix_fmt = 640, 640, "yuvj420p"
        film = c.add_stream("libx264", rate=25)
        film.width, film.height, film.pix_fmt = width, height, "yuv420p"
        film.options = x264(10)
        film.disposition = av.stream.Disposition.default.value
        art = av.VideoFrame.from_ndarray(np.full((640, 640, 3), (200, 40, 90), np.uint8), format="rgb24")
        art = art.reformat(format="yuvj420p")
        art.pts = 0
        for packet in [*cover.encode(art), *cover.encode()]:
            c.mux(packet)
        for i in range(film_frames):
            frame = av.VideoFrame.from_ndarray(index_image(i, width, height), format="rgb24")
            frame.pts = i
            for packet in film.encode(frame):
                c.mux(packet)
        for packet in film.encode():
            c.mux(packet)
    return path


def cover_art_first_mp4(film: Path, dst: Path, cover_png: Path) -> Path:
    """The MP4 with iTunes-style cover art (a ``covr`` picture, an attached picture to FFmpeg)
    whose ``udta`` comes before the film's ``trak``: the demuxer then lists the picture first."""
    subprocess.run(
        ["ffmpeg", "-v", "error", "-nostdin", "-y", "-i", str(cover_png), "-i", str(film), "-map", "0", "-map", "1",
         "-c", "copy", "-disposition:v:0", "attached_pic", str(dst)],
        check=True,
    )  # fmt: skip
    data = bytearray(dst.read_bytes())
    at = data.find(b"moov") - 4
    end = at + struct.unpack_from(">I", data, at)[0]
    kids, pos = [], at + 8
    while pos < end:
        size, kind = struct.unpack_from(">I4s", data, pos)
        kids.append((kind, bytes(data[pos : pos + size])))
        pos += size
    order = sorted(kids, key=lambda k: {b"mvhd": 0, b"udta": 1}.get(k[0], 2))  # stable: traks keep their order
    data[at + 8 : end] = b"".join(box for _, box in order)  # same size: the chunk offsets still hold
    dst.write_bytes(bytes(data))
    return dst


def two_angles_mkv(path: Path, frames: int = 30) -> Path:
    """Two real video streams (a film and a smaller second angle, the film the default)."""
    import av

    with av.open(str(path), "w") as c:
        streams = []
        for width, height in ((320, 240), (160, 120)):
            s = c.add_stream("libx264", rate=25)
            s.width, s.height, s.pix_fmt, s.options = width, height, "yuv420p", x264(10)
            streams.append(s)
        streams[0].disposition = av.stream.Disposition.default.value
        for i in range(frames):
            for s in streams:
                frame = av.VideoFrame.from_ndarray(index_image(i, s.width, s.height), format="rgb24")
                frame.pts = i
                for packet in s.encode(frame):
                    c.mux(packet)
        for s in streams:
            for packet in s.encode():
                c.mux(packet)
    return path


# --------------------------------------------------------------------------- cut transport streams


def decoded_by_pts(path: Path, threads: str = "default") -> dict[int, np.ndarray]:
    """Every frame a plain sequential decode gives, by presentation timestamp, converted to RGB as
    the sampler converts (its colour matrix and range; the ffmpeg CLI's conversion, which
    tests/media/test_pixels.py holds it to). ``threads``: ``default`` (PyAV's: slice threads, as
    many as cores) or ``none`` (one thread)."""
    import av

    from naru_eval.media.pixels import RGBConverter

    rgb = RGBConverter()
    out: dict[int, np.ndarray] = {}
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        if threads == "none":
            stream.thread_count = 1
        try:
            for f in c.decode(stream):
                out[f.pts] = rgb(f, f.width, f.height)
        except av.error.FFmpegError:
            pass
    return out


# --------------------------------------------------------------------------- damaged MP4 boxes

#: boxes whose payload is boxes (the path to the sample tables, and udta)
MP4_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"udta"}
#: a box: (type, payload bytes) or (type, [children])
Box = tuple[bytes, "bytes | list[Box]"]


def parse_boxes(data: bytes, containers: set[bytes] = MP4_CONTAINERS) -> list[Box]:
    """The box tree of ``data`` (32-bit sizes only, as PyAV writes small files)."""
    out: list[Box] = []
    at = 0
    while at + 8 <= len(data):
        size, kind = struct.unpack_from(">I4s", data, at)
        body = data[at + 8 : at + size]
        out.append((kind, parse_boxes(body, containers) if kind in containers else body))
        at += size
    return out


def write_boxes(boxes: list[Box]) -> bytes:
    parts = []
    for kind, body in boxes:
        payload = write_boxes(body) if isinstance(body, list) else body
        parts.append(struct.pack(">I4s", 8 + len(payload), kind) + payload)
    return b"".join(parts)


def with_moov(src: Path, dst: Path, edit: Callable[[list[Box]], list[Box]]) -> Path:
    """``src`` (its moov after its mdat, as PyAV writes it) with its moov's children rewritten by
    ``edit``: the chunk offsets still hold, as nothing before the moov moves."""
    data = src.read_bytes()
    top = parse_boxes(data, containers=set())
    at = 0
    for kind, body in top:
        if kind == b"moov":
            break
        at += 8 + len(body)
    else:
        raise AssertionError("no moov box")
    assert at + 8 + len(body) == len(data), "the moov must be the last box"
    moov = parse_boxes(body)
    dst.write_bytes(data[:at] + write_boxes([(b"moov", edit(moov))]))
    return dst


def find_box(boxes: list[Box], path: list[bytes]) -> list[Box]:
    """The child list holding the box at ``path`` (e.g. [b"trak", b"mdia", b"minf", b"stbl"])."""
    for kind, body in boxes:
        if kind == path[0] and isinstance(body, list):
            return body if len(path) == 1 else find_box(body, path[1:])
    raise KeyError(path)
