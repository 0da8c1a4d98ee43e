"""The ffmpeg CLI's reading of a soundtrack, the reference the audio sampler is checked against,
and the real files it is checked on (``../shared/realav/audio``, MANIFEST.tsv naming each source).

The reference decodes the same stream with the same downmix (``pan``: the mean of the channels)
and FFmpeg's swr resampler to 16 kHz, on the file's own clock (``-copyts``, ``first_pts=0``: its
sample ``i`` is at ``i / 16000`` s of the file), filling a gap in the timestamps longer than 20 ms
with silence (swr's hard compensation) and ignoring smaller disagreements, as a player does. The
frames' clock starts at the first frame of the video stream, as ffprobe decodes it.

:func:`cases` are the corpus files beside a video, and their stream-copy remuxes (Matroska,
MPEG-TS, streams shifted by ``-itsoffset``), made into a folder at test time.
"""

from __future__ import annotations

import csv
import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.helpers.shared_files import REALAV

AUDIO = REALAV / "audio"
RATE = 16_000
#: swr's timestamp compensation, hard only: a disagreement between the timestamps and the samples
#: longer than 20 ms (a gap) filled with silence, an overlap dropped, smaller ones left alone
COMP = "min_comp=0.02:min_hard_comp=0.02"


def missing() -> str | None:
    """Why the real files cannot be checked here, or None."""
    if not AUDIO.is_dir():
        return f"{AUDIO} is absent (the real-file corpus lies beside the clone)"
    if shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None:
        return "the ffmpeg CLI is absent (the reference)"
    return None


def corpus() -> list[str]:
    """The corpus's audio files (MANIFEST.tsv's ``audio/`` rows that are media, not references)."""
    if not AUDIO.is_dir():
        return []
    with (REALAV / "MANIFEST.tsv").open(encoding="utf-8") as f:
        rows = [r["file"] for r in csv.DictReader(f, delimiter="\t")]
    return sorted(Path(r).name for r in rows if r.startswith("audio/") and r.count("/") == 1)


def _run(cmd: list[str]) -> bytes:
    done = subprocess.run(cmd, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.decode(errors='replace')[-2000:]}")
    return done.stdout


def ffmpeg(*args: str) -> None:
    _run(["ffmpeg", "-v", "error", "-y", *args])


@functools.cache
def has_video(path: Path) -> bool:
    out = _run(
        ["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "stream=index", "-of", "csv=p=0", str(path)]
    )
    return bool(out.strip())


def duration(path: Path) -> float:
    out = _run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)])
    return float(out.strip() or 0)


def first_frame_s(path: Path, stream: int) -> float:
    """The presentation time of the first frame of container stream ``stream`` (the smallest of
    the first decoded frames: B-frames come out in presentation order)."""
    out = _run([
        "ffprobe", "-v", "error", "-select_streams", str(stream), "-read_intervals", "%+#16",
        "-show_entries", "frame=pts_time,best_effort_timestamp_time", "-of", "csv=p=0", str(path),
    ])  # fmt: skip
    times = [float(t) for line in out.decode().split() for t in line.split(",") if t and t != "N/A"]
    return min(times)


def ffmpeg_samples(path: Path, stream: int, channels: int) -> np.ndarray:
    """Container stream ``stream`` of ``path`` as the ffmpeg CLI decodes it: downmixed to the mean
    of its channels and resampled by swr, every decoded sample in a row (the CLI writes samples,
    not times)."""
    mean = "+".join(f"{1.0 / channels!r}*c{i}" for i in range(channels))
    raw = _run([
        "ffmpeg", "-v", "error", "-i", str(path), "-map", f"0:{stream}", "-af", f"pan=mono|c0={mean},aresample={RATE}:{COMP}",
        "-f", "f32le", "-ac", "1", "-ar", str(RATE), "-",
    ])  # fmt: skip
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def first_sample_s(path: Path, stream: int) -> float:
    """Where container stream ``stream``'s first decoded sample lies on the file's clock."""
    out = _run([
        "ffprobe", "-v", "error", "-select_streams", str(stream), "-read_intervals", "%+#16",
        "-show_entries", "frame=pts_time", "-of", "csv=p=0", str(path),
    ])  # fmt: skip
    return float(out.split()[0].strip(b","))


@dataclass(frozen=True)
class Match:
    """How ours matches the reference: the lag (samples; positive: ours is late) and the
    signal-to-noise ratio at that lag (dB)."""

    lag: int
    snr_db: float


def compare(ours: np.ndarray, ref: np.ndarray, max_lag: int = 48) -> Match:
    """The lag within ``max_lag`` samples that best aligns ``ours`` with ``ref`` (one axis; ``ref``
    cut or padded to ours), and the SNR there over all of ``ours``. Both silent: lag 0, SNR inf."""
    n = len(ours)
    x = ours.astype(np.float64)
    r = np.pad(ref[:n].astype(np.float64), (max_lag, max_lag + max(0, n - len(ref))))
    best = max(
        range(-max_lag, max_lag + 1), key=lambda k: (float(np.dot(x, r[max_lag - k : max_lag - k + n])), -abs(k))
    )
    shifted = r[max_lag - best : max_lag - best + n]
    noise, signal = float(np.sum((x - shifted) ** 2)), float(np.sum(shifted**2))
    return Match(best, 10 * np.log10(signal / noise) if noise > 0 else float("inf"))


def reference(path: Path, stream: int, channels: int, origin_s: float, n: int) -> np.ndarray:
    """The reference's samples of the ``n`` from ``origin_s`` on the file's clock (the frames'
    axis): zeros where the stream does not reach."""
    ref = ffmpeg_samples(path, stream, channels)
    at = round((first_sample_s(path, stream) - origin_s) * RATE)
    out = np.zeros(n, np.float32)
    lo, hi = max(0, at), min(n, at + len(ref))
    if lo < hi:
        out[lo:hi] = ref[lo - at : hi - at]
    return out


def with_video(audio: Path, out: Path) -> Path:
    """``audio`` (a file without video) beside a small H.264 picture, its audio stream copied."""
    seconds = f"{duration(audio) + 0.5:.3f}"
    ffmpeg(
        "-f", "lavfi", "-i", f"color=c=gray:s=64x48:r=10:d={seconds}", "-i", str(audio),
        "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "copy", str(out),
    )  # fmt: skip
    return out


def remux(src: Path, out: Path, shift_all: float = 0.0, shift_audio: float = 0.0, shift_video: float = 0.0) -> Path:
    """``src`` stream-copied into ``out``'s container; ``-itsoffset`` moves all streams, or only
    the audio or only the video, later by that many seconds."""
    if shift_audio or shift_video:
        late, early = ("a", "v") if shift_audio else ("v", "a")
        ffmpeg(
            "-i", str(src), "-itsoffset", str(shift_audio or shift_video), "-i", str(src),
            "-map", f"1:{late}:0", "-map", f"0:{early}:0", "-c", "copy", str(out),
        )  # fmt: skip
    else:
        shift = ["-itsoffset", str(shift_all)] if shift_all else []
        ffmpeg(*shift, "-i", str(src), "-map", "0:v", "-map", "0:a", "-c", "copy", str(out))
    return out
