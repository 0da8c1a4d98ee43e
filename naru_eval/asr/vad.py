"""Voice-activity detection and the windows Whisper is given.

Silero VAD (the ``silero-vad`` pip package ships its model, nothing is downloaded) scores each
32-ms frame (512 samples at 16 kHz) as speech or not; music and silence score low, so they never
reach Whisper and never become text. Its own ``get_speech_timestamps`` scores one frame per call
(about 40x real time on one CPU thread: hours for NARU's 146.8 h), so :func:`speech_probs` cuts
the track into rows of at least a minute, scored as one batch, each row with its own recurrent
state warmed up on the two seconds before it. :func:`speech_segments`
then applies Silero's own rule to the scores (start at ``threshold``, end after
``min_silence_s`` below ``threshold - 0.15``, drop segments shorter than ``min_speech_s``, pad
by ``speech_pad_s``). :func:`windows` merges segments into windows of at most ``window_s``
(WhisperX's rule: a window spans from its first segment's start to its last one's end), and
:func:`clip` gives a window's samples with everything outside its speech segments silenced.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from naru_eval.media.audio import SAMPLE_RATE

if TYPE_CHECKING:
    import numpy as np

    from naru_eval.media.asr_cache import AsrSettings

#: Silero VAD's frame at 16 kHz
FRAME = 512


@dataclass(frozen=True)
class Window:
    """One piece of audio Whisper transcribes at once: its span (seconds on the frames' clock) and
    the speech segments inside it (the rest is silenced)."""

    start: float
    end: float
    speech: tuple[tuple[float, float], ...]

    def as_json(self) -> list[Any]:
        return [round(self.start, 3), round(self.end, 3), [[round(a, 3), round(b, 3)] for a, b in self.speech]]


_model: Any = None


def silero_model() -> Any:
    """The packaged Silero VAD model (TorchScript), loaded once per process."""
    global _model
    if _model is None:
        import warnings

        import silero_vad

        with warnings.catch_warnings():
            # torch.jit.load's and importlib.resources.path's deprecation notices, not ours to fix
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            _model = silero_vad.load_silero_vad()
    return _model


def speech_probs(audio: np.ndarray, rows: int = 256, min_row_s: float = 60.0, warm_s: float = 2.0) -> np.ndarray:
    """Silero's speech probability of each 512-sample frame of ``audio`` (16 kHz), scored as a
    batch of at most ``rows`` rows of at least ``min_row_s`` each. Every row but the first also
    scores the ``warm_s`` before it (scores dropped), so its recurrent state has heard the audio
    before its first frame, as a sequential pass would have.

    Each step's batch (one frame of every row) is gathered from ``audio`` itself, so scoring holds
    no copy of the track: memory is the track and one float per frame (a 4-hour track: 922 MB and
    1.8 MB)."""
    import numpy as np
    import torch

    n_frames = math.ceil(len(audio) / FRAME)
    if n_frames == 0:
        return np.zeros(0, np.float32)
    min_row = max(1, int(min_row_s * SAMPLE_RATE / FRAME))
    rows = max(1, min(rows, n_frames // min_row))
    per_row = math.ceil(n_frames / rows)
    warm = int(warm_s * SAMPLE_RATE / FRAME) if rows > 1 else 0
    width = warm + per_row
    whole = len(audio) // FRAME
    frames = np.asarray(audio, np.float32)[: whole * FRAME].reshape(whole, FRAME)  # a view, no copy
    last = np.zeros(FRAME, np.float32)  # the partial frame at the end, zero-padded
    last[: len(audio) - whole * FRAME] = audio[whole * FRAME :]
    first = np.arange(rows) * per_row - warm  # the frame each row's step 0 scores (before 0: silence)
    model = silero_model()
    model.reset_states()  # the first call then sizes the state to the batch
    out = np.empty((rows, width), np.float32)
    with torch.inference_mode():
        for j in range(width):
            f = first + j
            inside = (f >= 0) & (f < whole)
            step = np.zeros((rows, FRAME), np.float32)  # fresh: the model may keep a view of its input
            step[inside] = frames[f[inside]]
            step[f == whole] = last
            out[:, j] = model(torch.from_numpy(step), SAMPLE_RATE).reshape(-1).numpy()
    return out[:, warm:].reshape(-1)[:n_frames]


def speech_segments(probs: np.ndarray, total_s: float, s: AsrSettings) -> list[tuple[float, float]]:
    """Speech segments (seconds) from the frame probabilities, by Silero's rule (module docstring)."""
    frame_s = FRAME / SAMPLE_RATE
    neg = max(s.vad_threshold - 0.15, 0.01)
    segs: list[tuple[float, float]] = []
    start: float | None = None
    temp_end: float | None = None
    for i, p in enumerate(probs.tolist()):
        t = i * frame_s
        if p >= s.vad_threshold:
            temp_end = None
            if start is None:
                start = t
            continue
        if start is not None and p < neg:
            if temp_end is None:
                temp_end = t
            if t + frame_s - temp_end >= s.min_silence_s:
                segs.append((start, temp_end))
                start, temp_end = None, None
    if start is not None:
        segs.append((start, total_s))
    segs = [(a, b) for a, b in segs if b - a >= s.min_speech_s]
    padded: list[tuple[float, float]] = []
    for a, b in segs:
        a, b = max(0.0, a - s.speech_pad_s), min(total_s, b + s.speech_pad_s)
        if padded and a <= padded[-1][1]:
            padded[-1] = (padded[-1][0], max(b, padded[-1][1]))
        else:
            padded.append((a, b))
    return padded


def windows(segments: Sequence[tuple[float, float]], window_s: float) -> list[Window]:
    """Segments merged into windows of at most ``window_s``; a longer segment is cut into pieces."""
    pieces: list[tuple[float, float]] = []
    for a, b in segments:
        while b - a > window_s:
            pieces.append((a, a + window_s))
            a += window_s
        pieces.append((a, b))
    out: list[Window] = []
    current: list[tuple[float, float]] = []
    for a, b in pieces:
        if current and b - current[0][0] > window_s:
            out.append(Window(current[0][0], current[-1][1], tuple(current)))
            current = []
        current.append((a, b))
    if current:
        out.append(Window(current[0][0], current[-1][1], tuple(current)))
    return out


def fixed_windows(total_s: float, window_s: float) -> list[Window]:
    """``vad=none``: the whole track in consecutive windows of ``window_s``."""
    out: list[Window] = []
    t = 0.0
    while t < total_s:
        end = min(total_s, t + window_s)
        out.append(Window(t, end, ((t, end),)))
        t = end
    return out


def clip(audio: np.ndarray, w: Window) -> np.ndarray:
    """The window's samples, silenced outside its speech segments."""
    import numpy as np

    a0 = int(round(w.start * SAMPLE_RATE))
    a1 = int(round(w.end * SAMPLE_RATE))
    out = np.zeros(max(0, a1 - a0), np.float32)
    for a, b in w.speech:
        i0, i1 = int(round(a * SAMPLE_RATE)), int(round(b * SAMPLE_RATE))
        out[i0 - a0 : i1 - a0] = audio[i0:i1]
    return out


def plan_windows(audio: np.ndarray, s: AsrSettings) -> list[Window]:
    """The windows of a track under ``s`` (VAD, or fixed windows with ``vad=none``)."""
    total_s = len(audio) / SAMPLE_RATE
    if s.vad == "none":
        return fixed_windows(total_s, s.window_s)
    return windows(speech_segments(speech_probs(audio), total_s, s), s.window_s)
