"""Before any request is spent: will the longest question fit the model's context, and do the
files fit the Files API? Estimates come from naru_eval.providers.gemini.tokens
(:func:`preflight`); ``countTokens`` on the longest video corrects them (:func:`calibrate`).
A configuration that would overflow is refused with the numbers and what would fit."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from loguru import logger
from pydantic import BaseModel

from naru_eval.providers.gemini import request as request_
from naru_eval.providers.gemini.families import context_window, family
from naru_eval.providers.gemini.tokens import (
    FRAME_OVERHEAD_TOKENS,
    FRAME_TOKENS,
    TokenEstimate,
    estimate_request,
    max_fps_that_fits,
    text_tokens,
)
from naru_eval.providers.gemini.video import PrepSpec

if TYPE_CHECKING:
    from google.genai import types


class ConfigurationRefused(ValueError):
    """A configuration refused by the preflight, before any request is spent."""


class ContextOverflow(ConfigurationRefused):
    """The configuration would overflow the model's context: refused before any request."""


class Calibration(BaseModel):
    """What ``countTokens`` said of the longest video, and the configuration's tokens from it."""

    video: str
    counted_text: int
    counted_video: int
    counted_frames: int | None  # Gemini 2.x at a non-default resolution: the frames counted alone
    resolution_counted: str
    frame_scale: float
    calibrated: int
    estimated: int
    ratio: float


class PreflightReport(BaseModel):
    """The estimate of a pass's input tokens, before any request."""

    videos: int
    hours: float
    longest_video: str
    longest_s: float
    longest_estimate: int
    estimated_input_tokens: int
    input_limit: int
    limit_known: bool


class Asked(NamedTuple):
    """What the preflight needs of one pending question."""

    key: tuple[str, str]  # (task, question id)
    video: str | None  # None: a blind (text-only) question
    prompt: str
    duration_s: float | None  # the question's (annotation or preflight probe); None: probe the file


@dataclass
class Planned:
    """The preflight's estimates: per question, per video, and the longest request."""

    estimates: dict[tuple[str, str], int] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    report: PreflightReport | None = None
    #: the longest request (video, prompt, estimate); None when every question is text only
    longest: tuple[str, str, TokenEstimate] | None = None


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

    def calibration(self, video: str, est: TokenEstimate, text: int, whole: int, frames: int) -> Calibration:
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
        return Calibration(
            video=video,
            counted_text=text,
            counted_video=whole,
            counted_frames=frames if not in_count else None,
            resolution_counted=self.media_resolution if in_count else "default",
            frame_scale=round(scale, 4),
            calibrated=calibrated,
            estimated=est.total,
            ratio=round(calibrated / max(1, est.total), 4),
        )


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


def _duration(asked: Asked) -> float:
    if asked.duration_s is not None and asked.duration_s > 0:
        return float(asked.duration_s)
    from naru_eval.media.video import probe_video

    assert asked.video is not None
    return probe_video(asked.video, check_end=False).duration_s


def preflight(
    questions: Sequence[Asked], plan: TokenPlan, spec: PrepSpec, max_file_gb: float, storage_limit_gb: float
) -> Planned:
    """Estimate every question's input tokens; refuse (:class:`ContextOverflow`,
    :class:`ConfigurationRefused`) a configuration whose longest request overflows the context or
    whose files do not fit the Files API."""
    out = Planned()
    worst: tuple[int, str, str, TokenEstimate] | None = None
    for q in questions:
        if q.video is None:  # text only (blind tasks): no upload, no video tokens
            out.estimates[q.key] = text_tokens(q.prompt)
            continue
        if q.video not in out.durations:
            out.durations[q.video] = _duration(q)
        est = plan.estimate(out.durations[q.video], q.prompt)
        out.estimates[q.key] = est.total
        if worst is None or est.total > worst[0]:
            worst = (est.total, q.video, q.prompt, est)
    if worst is None:
        return out  # text only: nothing to upload or calibrate
    total, video, prompt, est = worst
    out.longest = (video, prompt, est)
    out.report = PreflightReport(
        videos=len(out.durations),
        hours=round(sum(out.durations.values()) / 3600, 3),
        longest_video=video,
        longest_s=est.duration_s,
        longest_estimate=total,
        estimated_input_tokens=sum(out.estimates.values()),
        input_limit=plan.input_limit,
        limit_known=plan.limit_known,
    )
    if not plan.limit_known:
        logger.warning(
            f"naru_gemini: {plan.model} is not in the context-window table; assuming {plan.input_limit:,} "
            "tokens (set max_input_tokens= to be exact)"
        )
    if total > plan.input_limit:
        raise ContextOverflow(plan.overflow_message(video, est, total, "an estimated"))
    check_sizes(list(out.durations), spec, max_file_gb, storage_limit_gb)
    logger.info(
        f"naru_gemini: preflight: {len(questions)} question(s) over {len(out.durations)} video(s); longest "
        f"{Path(video).name} ({est.duration_s / 3600:.2f} h) ~{total:,} input tokens of {plan.input_limit:,}"
    )
    return out


def calibrate(
    plan: TokenPlan,
    config: request_.RequestConfig,
    longest: tuple[str, str, TokenEstimate],
    uploaded: tuple[str, str],
    count: Callable[[list[types.Part]], int],
    record: Callable[[Calibration], None],
) -> None:
    """countTokens on the longest video (``uploaded``: its uri and mime type): ``record`` what was
    counted, then refuse (:class:`ContextOverflow`) if the counted configuration overflows.

    countTokens takes no generationConfig, so it counts at the default media resolution unless
    the video part carries its own ``mediaResolution`` (Gemini 3 only). The text and the video
    are counted apart; for Gemini 2.x at a non-default resolution the frames are counted alone
    (``contentLayers=[FRAMES]``) and only they are rescaled (:meth:`TokenPlan.calibration`).
    ``count`` raises :class:`naru_eval.api.retry.RetryError` when countTokens fails for good.
    """
    video, prompt, est = longest
    uri, mime = uploaded
    in_count = plan.counted_in_resolution()
    gemini3 = family(plan.model) == "gemini-3"
    text = count([request_.text_part(prompt)])
    whole = count([request_.video_part(config, uri, mime, per_part_resolution=gemini3)])
    frames = whole
    if not in_count and plan.audio:
        frames = count([request_.video_part(config, uri, mime, ["FRAMES"])])
    if whole <= 0:
        return
    info = plan.calibration(video, est, text, whole, frames)
    record(info)
    how = "" if in_count else f" (frames counted at the default resolution, x{info.frame_scale:.3f})"
    logger.info(
        f"naru_gemini: countTokens on {Path(video).name}: video {whole:,}{how}, text {text:,}; this "
        f"configuration: {info.calibrated:,} vs {est.total:,} estimated (x{info.ratio}), of {plan.input_limit:,}"
    )
    if info.calibrated > plan.input_limit:
        raise ContextOverflow(plan.overflow_message(video, est, info.calibrated, "(counted by countTokens)"))
