"""Token estimates of a Gemini request on NARU: one table of constants, one set of formulas.

Used by the ``naru_gemini`` preflight (refuse a configuration overflowing the context before any
request is spent; providers/gemini/preflight.py) and by ``naru-eval estimate-cost`` (the run
estimate, providers/gemini/estimate.py).

How Gemini counts a video sent through the Files API (sources in :data:`TOKEN_SOURCES`):

* frames are sampled at ``videoMetadata.fps`` (1 fps when unset) over the file's timeline:
  ``frames = max(1, floor(duration_s * fps))``; each frame costs a fixed number of tokens that
  depends on the model family and ``mediaResolution`` (:data:`FRAME_TOKENS`), plus a small
  per-frame timestamp overhead (:data:`FRAME_OVERHEAD_TOKENS`);
* the audio track, when the file has one, costs :data:`AUDIO_TOKENS_PER_S` per second of the
  whole duration, whatever the fps or media resolution;
* the question's text costs about one token per Japanese character and one per ~4 ASCII
  characters (:func:`text_tokens`, an over-estimate on purpose).

These are estimates; the adapter calibrates them once per run with ``countTokens`` and records
the true counts (``usageMetadata``) with every answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from naru_eval.providers.gemini.families import family, normalise_resolution

#: tokens per sampled video frame, by model family and media resolution ("default": not sent)
FRAME_TOKENS: dict[str, dict[str, int]] = {
    # Gemini 2.x: 258 tokens per frame, 66 at MEDIA_RESOLUTION_LOW; medium and high are the
    # default for video (the SDK's enum doc: "LOW (64 tokens), MEDIUM (256), HIGH (zoomed
    # reframing with 256)").
    "gemini-2": {"default": 258, "low": 66, "medium": 258, "high": 258},
    # Gemini 3: video frames are capped at 70 tokens at low and medium (and, observed, by
    # default), 280 at high.
    "gemini-3": {"default": 70, "low": 70, "medium": 70, "high": 280},
}
#: audio tokens per second of the whole duration (any model, any resolution)
AUDIO_TOKENS_PER_S = 32
#: timestamp/metadata tokens per sampled frame (conservative; see TOKEN_SOURCES)
FRAME_OVERHEAD_TOKENS = 10
#: a typical NARU MCQ prompt (Japanese question, four options, instruction), in characters
TYPICAL_PROMPT_CHARS = 300

TOKEN_SOURCES: dict[str, str] = {
    "gemini-2 frames": "ai.google.dev video understanding docs, 'Technical details about videos': "
    "258 tokens per frame, 66 with media resolution low",
    "audio": "ai.google.dev video understanding docs: 32 tokens per second of audio",
    "overhead": "same page: ~300 tokens per second of video at default resolution (1 fps), i.e. "
    "258 + 32 + ~10 of metadata; 10 per frame is the assumption here",
    "gemini-3 frames": "ai.google.dev Gemini 3 developer guide and media-resolution docs: video "
    "70 tokens per frame at low/medium, 280 at high; the default (unset) observed at ~70 "
    "(discuss.ai.google.dev 'Media Resolution - Gemini API'). TO BE CHECKED: countTokens calibrates.",
}


def text_tokens(text: str) -> int:
    """An over-estimate of a prompt's tokens: 1 per non-ASCII character, 1 per 4 ASCII ones."""
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    return non_ascii + math.ceil((len(text) - non_ascii) / 4)


def frames_sampled(duration_s: float, fps: float) -> int:
    """Frames Gemini samples from ``duration_s`` at ``fps`` (as naru_eval.media.plan.frames_for_fps)."""
    return max(1, int(duration_s * fps))


@dataclass(frozen=True)
class TokenEstimate:
    """The prompt tokens of one request: its video and its text."""

    duration_s: float
    fps: float
    frames: int
    frame_tokens: int  # per frame
    video_tokens: int  # frames x (frame tokens + overhead)
    audio_tokens: int
    text_tokens: int

    @property
    def media_tokens(self) -> int:
        return self.video_tokens + self.audio_tokens

    @property
    def total(self) -> int:
        return self.video_tokens + self.audio_tokens + self.text_tokens


def estimate_request(
    duration_s: float,
    *,
    model: str,
    fps: float,
    media_resolution: str = "default",
    audio: bool = True,
    prompt: str | None = None,
    prompt_chars: int | None = None,
) -> TokenEstimate:
    """Estimated prompt tokens of one question on a video of ``duration_s`` seconds."""
    res = normalise_resolution(media_resolution)
    per = FRAME_TOKENS[family(model)][res]
    frames = frames_sampled(duration_s, fps)
    if prompt is not None:
        ttok = text_tokens(prompt)
    else:
        ttok = int(prompt_chars if prompt_chars is not None else TYPICAL_PROMPT_CHARS)
    return TokenEstimate(
        duration_s=float(duration_s),
        fps=float(fps),
        frames=frames,
        frame_tokens=per,
        video_tokens=frames * (per + FRAME_OVERHEAD_TOKENS),
        audio_tokens=int(math.ceil(duration_s * AUDIO_TOKENS_PER_S)) if audio else 0,
        text_tokens=ttok,
    )


def max_fps_that_fits(
    duration_s: float, limit: int, *, model: str, media_resolution: str, audio: bool, text: int
) -> float:
    """The highest fps at which a ``duration_s`` video still fits ``limit`` tokens (0 if none)."""
    per = FRAME_TOKENS[family(model)][normalise_resolution(media_resolution)] + FRAME_OVERHEAD_TOKENS
    room = limit - text - (math.ceil(duration_s * AUDIO_TOKENS_PER_S) if audio else 0)
    if room < per:
        return 0.0
    return (room // per) / duration_s
