"""Synthetic speech, music and videos with a soundtrack, for the transcript and ASR tests.

:func:`vowel_speech` is a small formant synthesiser: a glottal pulse train (120 Hz, with the
pitch moving as a voice's does) through three formant filters that change every 220-ms
syllable, each syllable faded in and out. Silero VAD scores it as speech, and scores a sustained
chord (:func:`music`) and silence as not speech, which is what the VAD tests need; Whisper's
text for it is junk, which no test reads. :func:`write_av` muxes frames and a soundtrack whose
speech sits at given times. Subtitle-stream fixtures are muxed by ffmpeg (the imageio-ffmpeg
binary, :func:`ffmpeg`): PyAV cannot encode SubRip or mov_text.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

SR = 16_000
_VOWELS = [(730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480), (570, 840, 2410)]


def vowel_speech(seconds: float, seed: int = 0, sr: int = SR) -> np.ndarray:
    """``seconds`` of speech-like sound (float32, peak 0.3)."""
    rng = np.random.RandomState(seed)
    n = int(seconds * sr)
    t = np.arange(n) / sr
    f0 = 120 + 20 * np.sin(2 * np.pi * 0.7 * t) + 10 * np.sin(2 * np.pi * 3.1 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    src = sum(np.sin(k * phase) / k for k in range(1, 40))
    seg = int(0.22 * sr)
    out = np.zeros(n)
    for a in range(0, n, seg):
        x = src[a : a + seg]
        freqs = np.fft.rfftfreq(len(x), 1 / sr)
        shape = sum(np.exp(-(((freqs - f) / (60 + f * 0.05)) ** 2)) for f in _VOWELS[rng.randint(len(_VOWELS))])
        out[a : a + seg] = np.fft.irfft(np.fft.rfft(x) * shape, len(x))
    out *= 0.5 * (1 - np.cos(2 * np.pi * (t % 0.22) / 0.22))
    return (0.3 * out / max(1e-9, np.abs(out).max())).astype(np.float32)


def music(seconds: float, sr: int = SR) -> np.ndarray:
    """A sustained A-major chord with a slow tremolo (float32): sound, but not speech."""
    t = np.arange(int(seconds * sr)) / sr
    chord = sum(np.sin(2 * np.pi * f * t) for f in (220.0, 277.18, 329.63, 440.0))
    return (0.1 * chord * (0.8 + 0.2 * np.sin(2 * np.pi * 0.5 * t))).astype(np.float32)


def soundtrack(
    seconds: float, speech: Sequence[tuple[float, float]], music_at: Sequence[tuple[float, float]] = ()
) -> np.ndarray:
    """``seconds`` of silence with speech at each ``(start, end)`` and music at each of ``music_at``."""
    out = np.zeros(int(seconds * SR), np.float32)
    for i, (a, b) in enumerate(speech):
        out[int(a * SR) : int(a * SR) + int((b - a) * SR)] += vowel_speech(b - a, seed=i)
    for a, b in music_at:
        out[int(a * SR) : int(a * SR) + int((b - a) * SR)] += music(b - a)
    return out


def write_av(
    path: Path,
    seconds: float,
    audio: np.ndarray | None,
    fps: int = 2,
    size: tuple[int, int] = (64, 48),
    audio_start_s: float = 0.0,
) -> Path:
    """An MP4 (or MKV, by the suffix) of ``seconds`` of grey frames at ``fps`` and, unless None,
    ``audio`` (16-kHz mono) as AAC starting ``audio_start_s`` after the first frame."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = size
    with av.open(str(path), "w") as c:
        v = c.add_stream("libx264", rate=fps)
        v.width, v.height, v.pix_fmt = w, h, "yuv420p"
        a = None
        if audio is not None:
            a = c.add_stream("aac", rate=SR)
            a.layout = "mono"
        for i in range(int(seconds * fps)):
            frame = av.VideoFrame.from_ndarray(np.full((h, w, 3), (i * 7) % 255, np.uint8), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            for p in v.encode(frame):
                c.mux(p)
        for p in v.encode():
            c.mux(p)
        if a is not None and audio is not None:
            step = 1024
            offset = int(round(audio_start_s * SR))
            for i in range(0, len(audio), step):
                chunk = audio[i : i + step]
                frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="flt", layout="mono")
                frame.sample_rate, frame.pts, frame.time_base = SR, offset + i, Fraction(1, SR)
                for p in a.encode(frame):
                    c.mux(p)
            for p in a.encode():
                c.mux(p)
    return path


def ffmpeg(*args: str) -> None:
    """Run the imageio-ffmpeg binary (quiet; an error raises with its message)."""
    import imageio_ffmpeg

    run = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-y", *args], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"ffmpeg {' '.join(args)}: {run.stderr.strip()}")


def mux_subtitles(video: Path, subtitles: Path, out: Path, codec: str, language: str = "jpn") -> Path:
    """``video`` with ``subtitles`` muxed in as a ``codec`` stream (``srt``/``ass`` in .mkv,
    ``mov_text`` in .mp4), the video stream copied."""
    ffmpeg(
        "-i", str(video), "-i", str(subtitles), "-map", "0", "-map", "1", "-c", "copy", "-c:s", codec,
        "-metadata:s:s:0", f"language={language}", str(out),
    )  # fmt: skip
    return out
