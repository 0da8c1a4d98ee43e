"""Videos with a soundtrack whose events are known to the sample: beeps and colour changes at
given times, an audio stream that starts late, a silent variant, made with PyAV at test time.

The truth is written by construction: a beep at ``t`` seconds is a tone whose first sample is the
one at ``t`` on the file's presentation timeline (the video's first frame is at
``video_start_s``, the audio's first sample at ``audio_start_s``), and the screen changes colour
at the same times. A reader that honours the streams' timestamps finds each beep at ``t`` minus the
video's start (the frames' time origin); one that starts the audio at 0 finds it ``audio_start_s``
early.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from naru_eval.core.synthetic import COLOURS

#: the tone of a beep (Hz) and its length (s): far from silence, short enough to locate
BEEP_HZ = 1000.0
BEEP_S = 0.1
BEEP_AMPLITUDE = 0.5


@dataclass(frozen=True)
class Soundtrack:
    """What a fixture holds. Times are seconds on the file's presentation timeline."""

    seconds: float = 12.0
    beeps: tuple[float, ...] = (1.5, 5.5, 9.5)
    #: the frame at or after each time shows the next colour of ``COLOURS`` (the first is red)
    colour_changes: tuple[float, ...] = (4.0, 8.0)
    fps: int = 10
    size: tuple[int, int] = (64, 48)
    video_start_s: float = 0.0
    audio_start_s: float = 0.0
    #: the audio as stored: AAC at 48 kHz stereo, as broadcast and web video carry it
    audio_rate: int = 48000
    audio_layout: str = "stereo"
    audio_codec: str = "aac"
    #: None: no audio stream at all (a silent file)
    audio: bool = True
    #: how long the audio stream runs (None: to the end of the video)
    audio_seconds: float | None = None
    #: container format (mp4, matroska, mpegts)
    fmt: str | None = None
    extra_audio_streams: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    def colour_at(self, t: float) -> str:
        names = list(COLOURS)
        return names[sum(1 for c in self.colour_changes if t >= c) % len(names)]


def tone(t: np.ndarray, beeps: Sequence[float]) -> np.ndarray:
    """The soundtrack's samples at presentation times ``t``: a tone during each beep, else 0."""
    out = np.zeros(t.shape, np.float64)
    for b in beeps:
        on = (t >= b) & (t < b + BEEP_S)
        out[on] = BEEP_AMPLITUDE * np.sin(2 * np.pi * BEEP_HZ * (t[on] - b))
    return out


def write(path: Path, spec: Soundtrack = Soundtrack()) -> Path:
    """Encode ``spec`` (H.264 video, AAC audio unless ``audio`` is false)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = spec.size
    with av.open(str(path), "w", format=spec.fmt) as c:
        v = c.add_stream("libx264", rate=spec.fps)
        v.width, v.height, v.pix_fmt = width, height, "yuv420p"
        v.options = {"g": str(spec.fps), "preset": "ultrafast", "crf": "30"}
        vtb = Fraction(1, spec.fps * 100)
        v.codec_context.time_base = vtb
        v.time_base = vtb
        streams = []
        if spec.audio:
            for _ in range(1 + spec.extra_audio_streams):
                a = c.add_stream(spec.audio_codec, rate=spec.audio_rate)
                a.layout = spec.audio_layout
                a.time_base = Fraction(1, spec.audio_rate)
                streams.append(a)
        n_video = int(round((spec.seconds - spec.video_start_s) * spec.fps))
        vstart = int(round(spec.video_start_s / vtb))
        frames = []
        for i in range(n_video):
            t = spec.video_start_s + i / spec.fps
            img = np.empty((height, width, 3), np.uint8)
            img[:] = COLOURS[spec.colour_at(t)]
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts, frame.time_base = vstart + i * 100, vtb
            frames.append(frame)
        audio_frames: list[list[av.AudioFrame]] = [[] for _ in streams]
        if streams:
            end = spec.seconds if spec.audio_seconds is None else spec.audio_start_s + spec.audio_seconds
            n = int(round((end - spec.audio_start_s) * spec.audio_rate))
            first = int(round(spec.audio_start_s * spec.audio_rate))
            chunk = 1024
            channels = 2 if spec.audio_layout == "stereo" else 1
            for k in range(len(streams)):
                for at in range(0, n, chunk):
                    idx = np.arange(at, min(n, at + chunk))
                    t = (first + idx) / spec.audio_rate
                    wave = tone(t, spec.beeps if k == 0 else ()).astype(np.float32)
                    planes = np.repeat(wave[None, :], channels, axis=0)
                    frame = av.AudioFrame.from_ndarray(
                        np.ascontiguousarray(planes), format="fltp", layout=spec.audio_layout
                    )
                    frame.sample_rate = spec.audio_rate
                    frame.pts, frame.time_base = first + at, Fraction(1, spec.audio_rate)
                    audio_frames[k].append(frame)
        for frame in frames:
            for packet in v.encode(frame):
                c.mux(packet)
        for packet in v.encode():
            c.mux(packet)
        for s, fl in zip(streams, audio_frames, strict=True):
            for frame in fl:
                for packet in s.encode(frame):
                    c.mux(packet)
            for packet in s.encode():
                c.mux(packet)
    return path


def silent(path: Path, spec: Soundtrack = Soundtrack()) -> Path:
    """The same video without an audio stream."""
    from dataclasses import replace

    return write(path, replace(spec, audio=False))


def onsets(samples: np.ndarray, rate: int, threshold: float = 0.1, gap_s: float = 0.5) -> list[float]:
    """Where each beep starts in ``samples`` (seconds from the first sample): the first sample above
    ``threshold`` after at least ``gap_s`` of quiet."""
    loud = np.flatnonzero(np.abs(samples) > threshold)
    out: list[float] = []
    last = -np.inf
    for i in loud:
        if i - last > gap_s * rate:
            out.append(i / rate)
        last = i
    return out


def remux(src: Path, dst: Path, shift_s: dict[str, float] | None = None, damage: int | None = None) -> Path:
    """``src``'s packets, copied by PyAV (FFmpeg's muxers, ``Lavf``) into ``dst``'s container:
    ``shift_s`` moves the streams of a kind (``"video"``, ``"audio"``) later by that many seconds;
    ``damage`` zeroes the payload of that audio packet (counted from 0), which the AAC decoder
    then refuses. Returns ``dst``."""
    import av

    shift_s = shift_s or {}
    with av.open(str(src)) as i, av.open(str(dst), "w") as o:
        out = {s.index: o.add_stream_from_template(s) for s in i.streams if s.type in ("video", "audio")}
        n = 0
        for p in i.demux():
            source = p.stream
            if p.dts is None or source.index not in out:
                continue
            if source.type == "audio":
                if n == damage:
                    q = av.Packet(bytes(p.size))
                    q.pts, q.dts, q.duration, q.time_base, q.is_keyframe = p.pts, p.dts, p.duration, p.time_base, True
                    p = q
                n += 1
            move = round(shift_s.get(source.type, 0.0) / p.time_base)
            p.pts, p.dts = p.pts + move if p.pts is not None else None, p.dts + move
            p.stream = out[source.index]
            o.mux(p)
    return dst


def audio_packet_at(path: Path, t: float) -> int:
    """The number (from 0) of the audio packet playing at ``t`` seconds of the file's clock."""
    import av

    with av.open(str(path)) as c:
        for n, p in enumerate(q for q in c.demux(c.streams.audio[0]) if q.dts is not None):
            if p.pts is not None and float((p.pts + (p.duration or 0)) * p.time_base) > t:
                return n
    raise ValueError(f"{path}: no audio packet at {t} s")
