"""The audio plan: how much of a video's soundtrack a model is given, next to the frame plan.

Plain arithmetic, no decoding. A family's audio front end is an :class:`AudioEncoder`: how many
tokens a clip of ``n`` samples at 16 kHz becomes (the functions below are the processors' own
formulas, checked against the processors in the tests) and the block its windows are whole
multiples of. :func:`plan_audio` then chooses, for one video, from its duration, the sampled
frames' timestamps and the tokens the context has left after the frames and the prompt:

- the **full track** (one window, 0 to the duration) when it fits;
- else **windows centred on the sampled frames**, all of one length, the longest (in whole
  blocks) whose tokens fit, windows that overlap merged;
- else (not even one block per frame fits) the plan is **refused**, :class:`AudioPlanError`, with
  the numbers.

Nothing is cut silently: the plan says what it feeds (:meth:`AudioPlan.record`: seconds, tokens,
coverage of the video, window length), and the adapters put that in every payload and the run key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypedDict

from naru_eval.media.audio import HOP_S, SAMPLE_RATE, normalise_windows, snap

#: mel frames per second of every front end here (hop 160 at 16 kHz)
MEL_PER_S = round(1 / HOP_S)


def qwen2_5_omni_tokens(samples: int) -> int:
    """Qwen2.5-Omni (Whisper features, 128 mel): ``n // 160`` mel frames, then the encoder's two
    stride-2 stages (``_get_feat_extract_output_lengths`` of processing_qwen2_5_omni.py): 25/s."""
    frames = samples // 160
    if frames <= 0:
        return 0
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


def qwen3_omni_tokens(samples: int, n_window: int = 50) -> int:
    """Qwen3-Omni (Whisper features, 128 mel): 13 tokens per full 100-frame (1-s) chunk plus the
    remainder's (``_get_feat_extract_output_lengths`` of processing_qwen3_omni_moe.py)."""
    frames = samples // 160
    chunk = n_window * 2
    leave = frames % chunk
    feat = (leave - 1) // 2 + 1
    return ((feat - 1) // 2 + 1 - 1) // 2 + 1 + (frames // chunk) * 13


def parakeet_tokens(samples: int, subsampling: int = 8) -> int:
    """Nemotron-Omni's Parakeet encoder: ``1 + n // 160`` mel frames (centred STFT), then
    ``log2(subsampling)`` stride-2 convolutions of kernel 3 (``_estimate_audio_num_embeddings``
    of processing_nemotron_h_omni.py): 12.5/s."""
    length = 1 + samples // 160
    for _ in range(int(math.log2(subsampling))):
        length = (length + 2 - 3) // 2 + 1
    return max(1, length)


def minicpm_o_tokens(samples: int) -> int:
    """MiniCPM-o-2.6 in omni mode: one ``<unit>`` per second, 25 audio tokens and its two
    delimiters each (from the hub processor's formula; that code cannot run here): 27/s."""
    return math.ceil(samples / SAMPLE_RATE) * 27


@dataclass(frozen=True)
class AudioEncoder:
    """A family's audio front end, as far as planning needs it.

    ``tokens(n)``: the tokens a clip of ``n`` samples at 16 kHz becomes; ``block_s``: the length a
    window is a whole multiple of (the encoder's chunk, so a window's tokens are exact and
    ``tokens_per_second`` holds for it); ``max_clip_s``: the longest clip one audio item may be
    (None: any; a longer window is given as several items)."""

    name: str
    tokens: Callable[[int], int]
    tokens_per_second: float
    block_s: float
    max_clip_s: float | None = None

    def clip_tokens(self, seconds: float) -> int:
        """Tokens of a clip of ``seconds`` (split into ``max_clip_s`` items where it is set)."""
        samples = round(snap(seconds) * SAMPLE_RATE)
        if self.max_clip_s is None:
            return self.tokens(samples)
        most = round(self.max_clip_s * SAMPLE_RATE)
        full, rest = divmod(samples, most)
        return full * self.tokens(most) + (self.tokens(rest) if rest else 0)


#: the omni families' front ends (the adapters name theirs)
QWEN2_5_OMNI = AudioEncoder("Qwen2.5-Omni (Whisper, 2-s blocks)", qwen2_5_omni_tokens, 25.0, block_s=2.0)
QWEN3_OMNI = AudioEncoder("Qwen3-Omni (Whisper, 1-s chunks)", qwen3_omni_tokens, 13.0, block_s=2.0)
#: training clips are at most 1,200 s and the encoder attends over a whole clip: longer audio is
#: given in clips of at most that length
NEMOTRON_OMNI = AudioEncoder("Nemotron-Omni (Parakeet, 8x)", parakeet_tokens, 12.5, block_s=1.0, max_clip_s=1200.0)
MINICPM_O = AudioEncoder("MiniCPM-o-2.6 (omni units)", minicpm_o_tokens, 27.0, block_s=1.0)


class AudioRecord(TypedDict):
    """What a plan feeds, as the payloads and the run key carry it."""

    mode: str  # "full" or "windows"
    seconds: float  # seconds of audio given (windows merged)
    tokens: int  # audio tokens they become
    coverage: float  # seconds / the video's duration
    window_s: float | None  # each frame's window (None: the full track)
    windows: int  # how many windows after merging


class AudioPlan(NamedTuple):
    """The soundtrack one video gets: ``windows`` (seconds on the frames' time axis)."""

    windows: tuple[tuple[float, float], ...]
    full: bool
    tokens: int
    duration_s: float
    window_s: float | None
    budget_tokens: int

    @property
    def seconds(self) -> float:
        return round(sum(e - s for s, e in self.windows), 6)

    @property
    def coverage(self) -> float:
        return self.seconds / self.duration_s if self.duration_s > 0 else 0.0

    def record(self) -> AudioRecord:
        return {
            "mode": "full" if self.full else "windows",
            "seconds": self.seconds,
            "tokens": self.tokens,
            "coverage": round(self.coverage, 6),
            "window_s": self.window_s,
            "windows": len(self.windows),
        }


class AudioPlanError(ValueError):
    """No soundtrack fits beside the frames: the message gives the numbers."""


def window_tokens(encoder: AudioEncoder, windows: Sequence[tuple[float, float]]) -> int:
    """Audio tokens of ``windows`` (each its own clip)."""
    return sum(encoder.clip_tokens(e - s) for s, e in windows)


def frame_windows(
    times: Sequence[float], window_s: float, duration_s: float, block_s: float
) -> tuple[tuple[float, float], ...]:
    """A ``window_s`` window around each time, starting on the ``block_s`` grid nearest to centring
    it, kept within [0, duration) and merged where windows overlap."""
    end = snap(duration_s)
    out = []
    for t in times:
        start = round((float(t) - window_s / 2) / block_s) * block_s
        start = min(max(0.0, start), max(0.0, end - window_s))
        out.append((start, min(end, start + window_s)))
    return normalise_windows(out)


def plan_audio(
    encoder: AudioEncoder,
    duration_s: float,
    frame_times: Sequence[float],
    budget_tokens: int,
    video: str = "the video",
    window_s: float | None = None,
) -> AudioPlan:
    """The soundtrack a video gets within ``budget_tokens`` (the context less the frames' tokens and
    the prompt's reserve). ``window_s``: a fixed window per frame instead of the choice above (it
    must fit too). ``frame_times``: the sampled frames' timestamps (empty: audio alone, the full
    track or refused)."""
    end = snap(duration_s)
    if end <= 0:
        raise AudioPlanError(f"{video}: no duration to take audio from")
    full = ((0.0, end),)
    full_tokens = window_tokens(encoder, full)
    if window_s is None and full_tokens <= budget_tokens:
        return AudioPlan(full, True, full_tokens, duration_s, None, budget_tokens)
    why = (
        f"{video}: {duration_s / 60:.1f} min of audio is {full_tokens:,} tokens for {encoder.name} "
        f"({encoder.tokens_per_second:g}/s); the context leaves {budget_tokens:,} beside the frames and the prompt"
    )
    if not frame_times:
        raise AudioPlanError(f"{why}, and without frames there is nothing to centre windows on: shorten nothing "
                             "silently; use a model with a longer context or give frames")  # fmt: skip
    block = encoder.block_s
    if window_s is not None:
        length = snap(window_s)
        wins = frame_windows(frame_times, length, duration_s, block)
        tokens = window_tokens(encoder, wins)
        if tokens > budget_tokens:
            raise AudioPlanError(
                f"{why}; audio_window_s={window_s:g} around {len(frame_times)} frames is {tokens:,} tokens: "
                "lower audio_window_s or num_frames"
            )
        return AudioPlan(wins, False, tokens, duration_s, length, budget_tokens)
    lo, hi = 0, max(1, math.ceil(end / block))  # in blocks: lo fits (0 s), hi may not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if window_tokens(encoder, frame_windows(frame_times, mid * block, duration_s, block)) <= budget_tokens:
            lo = mid
        else:
            hi = mid
    if lo == 0:
        one = window_tokens(encoder, frame_windows(frame_times, block, duration_s, block))
        raise AudioPlanError(
            f"{why}; even one {block:g}-s window per frame is {one:,} tokens for {len(frame_times)} frames: "
            "lower num_frames, or run with audio=false"
        )
    length = snap(lo * block)
    wins = frame_windows(frame_times, length, duration_s, block)
    return AudioPlan(wins, False, window_tokens(encoder, wins), duration_s, length, budget_tokens)


def derangement(durations: dict[str, float]) -> dict[str, str]:
    """The control of an audio ablation: each video gets another video's soundtrack, never its own.

    Deterministic from the set of videos and their durations alone: sorted by (duration, id),
    neighbours swap (1<->2, 3<->4, ...; an odd last three rotate), so each video hears one of
    about its own length (its windows mostly land inside the other track) and the mapping is
    the same in every run over the same videos. One video cannot be deranged: an error."""
    order = sorted(durations, key=lambda v: (float(durations[v]), v))
    if len(order) < 2:
        raise ValueError(f"another video's audio needs at least two videos; the run has {len(order)}")
    out: dict[str, str] = {}
    pairs = len(order) // 2 * 2
    if len(order) % 2:
        pairs -= 2  # the last three rotate
    for i in range(0, pairs, 2):
        a, b = order[i], order[i + 1]
        out[a], out[b] = b, a
    if len(order) % 2:
        a, b, c = order[-3:]
        out[a], out[b], out[c] = b, c, a
    return out


def derangement_key(mapping: dict[str, str]) -> str:
    """A short fingerprint of a derangement (the run key and the variant name carry it)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(sorted(mapping.items())).encode()).hexdigest()[:12]
