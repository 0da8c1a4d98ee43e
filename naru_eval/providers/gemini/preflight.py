"""Before any request is spent: will the longest question fit the model's context, and do the
files fit the Files API? Estimates come from naru_eval.providers.gemini.cost; ``countTokens``
on the longest video corrects them (:func:`calibration`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from naru_eval.providers.gemini.cost import (
    FRAME_OVERHEAD_TOKENS,
    FRAME_TOKENS,
    TokenEstimate,
    context_window,
    estimate_request,
    family,
    max_fps_that_fits,
)
from naru_eval.providers.gemini.video import PrepSpec


class ConfigurationRefused(ValueError):
    """A configuration refused by the preflight, before any request is spent."""


class ContextOverflow(ConfigurationRefused):
    """The configuration would overflow the model's context: refused before any request."""


@dataclass(frozen=True)
class TokenPlan:
    """The settings that decide a request's input tokens."""

    model: str
    fps: float
    media_resolution: str
    audio: bool
    max_input_tokens: int | None = None

    def estimate(
        self, duration_s: float, prompt: str, media_resolution: str | None = None, audio: bool | None = None
    ) -> TokenEstimate:
        return estimate_request(
            duration_s,
            model=self.model,
            fps=self.fps,
            media_resolution=media_resolution or self.media_resolution,
            audio=self.audio if audio is None else audio,
            prompt=prompt,
        )

    @property
    def input_limit(self) -> int:
        return self.max_input_tokens or context_window(self.model)[0]

    @property
    def limit_known(self) -> bool:
        return bool(context_window(self.model)[1]) or self.max_input_tokens is not None

    def overflow_message(self, video: str, est: TokenEstimate, total: int, how: str) -> str:
        """Why the configuration is refused, with the estimates of what would fit."""
        limit = self.input_limit
        low = self.estimate(est.duration_s, "", media_resolution="low").total + est.text_tokens
        mute = self.estimate(est.duration_s, "", audio=False).total + est.text_tokens
        best_fps = max_fps_that_fits(
            est.duration_s,
            limit,
            model=self.model,
            media_resolution=self.media_resolution,
            audio=self.audio,
            text=est.text_tokens,
        )
        per = est.frame_tokens
        audio = f"{est.audio_tokens:,} audio tokens (32/s)" if self.audio else "no audio"
        return (
            f"naru_gemini: refusing this configuration before any request: the longest video {video} "
            f"({est.duration_s / 3600:.2f} h) needs {how} {total:,} input tokens per question, over {self.model}'s "
            f"{limit:,}-token context: {est.frames:,} frames at fps={self.fps:g} x ({per} tokens at "
            f"media_resolution={self.media_resolution} + {FRAME_OVERHEAD_TOKENS} overhead) = {est.video_tokens:,}, "
            f"+ {audio}, + {est.text_tokens:,} text. Estimates that would fit or not: media_resolution=low -> "
            f"{low:,}; audio=false -> {mute:,}; fps <= {best_fps:.3f} at this resolution and audio. "
            "No request was spent."
        )

    def counted_in_resolution(self) -> bool:
        """Whether countTokens counts at this configuration's resolution: the default one, or
        Gemini 3 (which takes ``mediaResolution`` per part)."""
        return self.media_resolution == "default" or family(self.model) == "gemini-3"

    def calibration(self, video: str, est: TokenEstimate, text: int, whole: int, frames: int) -> dict[str, Any]:
        """The counted configuration's tokens from countTokens' totals: the text, the whole video
        part and (Gemini 2.x at another resolution) its frames alone, which are rescaled from the
        default resolution; audio costs the same at every resolution."""
        in_count = self.counted_in_resolution()
        audio = whole - frames
        scale = 1.0
        if not in_count:
            fam = FRAME_TOKENS[family(self.model)]
            scale = (fam[self.media_resolution] + FRAME_OVERHEAD_TOKENS) / (fam["default"] + FRAME_OVERHEAD_TOKENS)
        calibrated = int(round(frames * scale)) + audio + text
        return {
            "video": video,
            "counted_text": text,
            "counted_video": whole,
            "counted_frames": frames if not in_count else None,
            "resolution_counted": self.media_resolution if in_count else "default",
            "frame_scale": round(scale, 4),
            "calibrated": calibrated,
            "estimated": est.total,
            "ratio": round(calibrated / max(1, est.total), 4),
        }


def check_sizes(videos: Sequence[str], spec: PrepSpec, max_file_gb: float, storage_limit_gb: float) -> None:
    """Files sent as they are must fit the Files API: 2 GB a file, 20 GB a project."""
    if spec.fps is not None or spec.max_height is not None:
        return  # re-encoded sizes are known only after encoding (a few MB an hour at 360p, 1 fps)
    gb = 1024**3
    sizes = {v: os.path.getsize(v) for v in videos}
    too_big = sorted((s, v) for v, s in sizes.items() if s > max_file_gb * gb)
    hint = (
        "set downsample=true (re-encodes at fps x downsample_factor and downsample_height pixels high, "
        "a few MB per hour), or raise max_file_gb= / storage_limit_gb= if Google's limits changed. "
        "No request was spent."
    )
    if too_big:
        size, video = too_big[-1]
        raise ConfigurationRefused(
            f"naru_gemini: refusing before any request: {len(too_big)} video(s) exceed the Files API's "
            f"{max_file_gb:g} GB per-file limit (largest: {video}, {size / gb:.2f} GB); {hint}"
        )
    total = sum(sizes.values())
    if total > storage_limit_gb * gb:
        raise ConfigurationRefused(
            f"naru_gemini: refusing before any request: the {len(sizes)} video(s) total {total / gb:.1f} GB, "
            f"over the Files API's {storage_limit_gb:g} GB per project (uploads are kept 48 h for reuse); "
            f"{hint}"
        )
