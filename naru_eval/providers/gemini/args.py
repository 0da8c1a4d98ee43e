"""The Gemini adapter's typed ``--model_args`` (:class:`GeminiArgs`; docs/gemini.md has the
protocol behind each): one pydantic model over the base's store args, ``extra="forbid"``, its
retry args from :class:`naru_eval.api.retry.RetryArgs`, parsed by the one parser
(``naru_eval.adapters.args.parse_model_args``). The adapter (model_adapters/gemini.py) keeps it
whole on ``self.args``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from naru_eval.adapters.args import ANSWERS, IN_SAMPLING, Flag, RunArgs, SelectionFields, TranscriptFields
from naru_eval.api.retry import RetryArgs
from naru_eval.api.urls import check_endpoint
from naru_eval.core.budgets import Sampling
from naru_eval.providers.gemini.client import KEY_ENV
from naru_eval.providers.gemini.families import THINKING_LEVELS, family, normalise_resolution
from naru_eval.providers.gemini.video import PrepSpec

DEFAULT_MODEL = "gemini-3-flash-preview"

#: why the frame-count args do not apply to Gemini (named when one is given)
_SAMPLES_ITSELF = "Gemini samples the uploaded video itself at fps= (videoMetadata.fps); use fps= and media_resolution="


def check_base_url(url: str) -> str:
    """An http(s) URL without credentials or a query (lmms-eval writes model_args into results.json)."""
    return check_endpoint(url, key_env=KEY_ENV, query=False)


class GeminiArgs(RetryArgs, SelectionFields, TranscriptFields, RunArgs):
    """The Gemini adapter's ``--model_args`` (docs/gemini.md has the protocol behind each)."""

    select_refusal: ClassVar[str | None] = (
        "Gemini is given the video file and samples it at its own rate (fps=), so it cannot be given frames "
        "chosen for the question with their times; run select= with an open-weight adapter (docs/selection.md)"
    )

    key_env: ClassVar[tuple[str, ...]] = KEY_ENV
    not_taken: ClassVar[Mapping[str, str]] = {n: _SAMPLES_ITSELF for n in ("num_frames", "max_frames", "max_pixels")}

    model: str = Field(DEFAULT_MODEL, description="Gemini model id, e.g. gemini-3-flash-preview")
    fps: float | None = Field(
        None,
        description="videoMetadata.fps, in (0, 24]; unset: the leaderboard's sampling",
        json_schema_extra=IN_SAMPLING,
    )
    media_resolution: str = Field(
        "default", description="low, medium, high or default (mediaResolution)", json_schema_extra=ANSWERS
    )
    audio: Flag = Field(
        True, description="send the audio track (false: contentLayers=[FRAMES])", json_schema_extra=ANSWERS
    )
    strip_audio: Flag = Field(
        False, description="audio=false by stripping the track locally instead", json_schema_extra=ANSWERS
    )
    thinking_budget: int | None = Field(
        None, ge=-1, description="Gemini 2.5 thinkingBudget (-1: dynamic)", json_schema_extra=ANSWERS
    )
    thinking_level: str | None = Field(
        None, description="Gemini 3 thinkingLevel (minimal, low, medium, high)", json_schema_extra=ANSWERS
    )
    temperature: float | Literal["auto"] | None = Field(
        "auto", description="auto: the API's default for Gemini 3, 0 for earlier models", json_schema_extra=ANSWERS
    )
    seed: int | None = Field(None, description="generationConfig.seed", json_schema_extra=ANSWERS)
    max_output_tokens: int | None = Field(
        None, ge=1, description="generationConfig.maxOutputTokens", json_schema_extra=ANSWERS
    )
    base_url: str | None = Field(None, description="another endpoint (else $GOOGLE_GEMINI_BASE_URL, else Google's)")
    api_version: str = Field("v1beta", description="the API version in the URL")
    max_concurrency: int = Field(8, ge=1, description="the ceiling of questions in flight (AIMD below it)")
    initial_concurrency: int | None = Field(None, ge=1, description="questions in flight at the start")
    upload_concurrency: int = Field(4, ge=1, description="uploads at a time")
    timeout: float = Field(600.0, ge=0, description="seconds per HTTP request")
    active_timeout: float = Field(1800.0, ge=0, description="seconds an upload may take to become ACTIVE")
    poll_interval: float = Field(5.0, ge=0, description="seconds between files.get polls")
    upload_registry: str | None = Field(None, description="the upload registry's SQLite file")
    reuse_uploads: Flag = Field(True, description="reuse live uploads of earlier runs")
    reuse_margin_s: float = Field(6 * 3600.0, ge=0, description="an upload expiring sooner is not reused")
    downsample: Flag = Field(
        False,
        description="re-encode before upload (fps x downsample_factor, downsample_height)",
        json_schema_extra=ANSWERS,
    )
    downsample_factor: float = Field(4.0, description="re-encode at fps x this (>= 1)", json_schema_extra=ANSWERS)
    downsample_height: int | None = Field(
        360, ge=2, description="re-encoded height in pixels (none: keep)", json_schema_extra=ANSWERS
    )
    video_cache: str | None = Field(None, description="where re-encoded videos are kept")
    calibrate: Flag = Field(True, description="countTokens on the longest video before the questions")
    max_input_tokens: int | None = Field(None, ge=1, description="the context limit, for a model not in the table")
    max_file_gb: float = Field(2.0, ge=0, description="the Files API's per-file limit")
    storage_limit_gb: float = Field(20.0, ge=0, description="the Files API's per-project limit")
    usage_dir: str | None = Field(None, description="where gemini_usage_<timestamp>.json goes")
    prices: str | None = Field(None, description="a prices JSON file instead of the packaged one")
    context_cache: Flag = Field(True, description="one explicit context cache per video (false: implicit caching only)")
    cache_ttl_max: float = Field(6 * 3600.0, ge=60, description="the longest TTL a video's cache gets, seconds")
    batch: Flag = Field(False, description="ask the questions as a Gemini batch job (the batch price; resumable)")
    batch_poll_interval: float = Field(30.0, ge=0, description="first wait between batches.get polls, seconds")
    batch_poll_max: float = Field(600.0, ge=0, description="the longest wait between polls (x1.5 backoff)")
    batch_timeout: float = Field(86400.0, ge=0, description="seconds to wait for a batch job before its questions fail")

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: object) -> str:
        if v is None or not str(v).strip():
            raise ValueError("required: a Gemini model id, e.g. gemini-3-flash-preview")
        return str(v).strip()

    @field_validator("fps")
    @classmethod
    def _fps(cls, v: float | None) -> float | None:
        if v is not None and not 0 < v <= 24:
            raise ValueError("must be in (0, 24] (videoMetadata.fps)")
        return v

    @field_validator("media_resolution", mode="before")
    @classmethod
    def _resolution(cls, v: object) -> str:
        return normalise_resolution(v)

    @field_validator("thinking_level")
    @classmethod
    def _level(cls, v: str | None) -> str | None:
        if v is None:
            return None
        level = v.strip().lower()
        if level not in THINKING_LEVELS:
            raise ValueError(f"must be one of {THINKING_LEVELS}")
        return level

    @field_validator("temperature", mode="before")
    @classmethod
    def _auto(cls, v: object) -> object:
        return "auto" if isinstance(v, str) and v.strip().lower() == "auto" else v

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, v: float | str | None) -> float | str | None:
        if isinstance(v, float) and not (math.isfinite(v) and v >= 0):
            raise ValueError("must be a finite number >= 0 (or auto)")
        return v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return None if v is None else check_base_url(v)

    @field_validator("downsample_factor")
    @classmethod
    def _factor(cls, v: float) -> float:
        if v < 1:
            raise ValueError("must be >= 1 (re-encode at >= the sampling fps)")
        return v

    @property
    def sampling(self) -> Sampling:
        return Sampling(fps=self.fps)

    @property
    def checkpoint(self) -> str | None:
        return self.model

    def temperature_sent(self) -> float | None:
        """``auto``: Google advises leaving Gemini 3 at its default temperature (1.0; lower values
        can loop or degrade reasoning), so none is sent; earlier models: 0, as the task asks."""
        if self.temperature == "auto":
            return None if family(self.model) == "gemini-3" else 0.0
        return self.temperature

    def prep_spec(self, fps: float) -> PrepSpec:
        """The local preparation of each video before upload at sampling rate ``fps``: audio=false
        strips the track locally only with strip_audio=true (else the API drops it,
        contentLayers=[FRAMES]); re-encoding anyway (downsample) drops it too: fewer bytes."""
        return PrepSpec(
            audio=self.audio or not (self.strip_audio or self.downsample),
            fps=fps * self.downsample_factor if self.downsample else None,
            max_height=self.downsample_height if self.downsample else None,
        )

    @model_validator(mode="after")
    def _thinking(self) -> GeminiArgs:
        if self.thinking_level is not None and self.thinking_budget is not None:
            raise ValueError("give thinking_budget (Gemini 2.5) or thinking_level (Gemini 3), not both")
        return self
