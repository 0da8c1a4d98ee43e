"""``naru_gemini``: Gemini through the ``google-genai`` SDK, the video sent natively (Files API).

    export GOOGLE_API_KEY=...        # or GEMINI_API_KEY; never in model_args
    lmms-eval --model naru_gemini \\
        --model_args model=gemini-3-flash-preview,fps=0.25,media_resolution=low \\
        --tasks naru_mcq --output_path results --log_samples

What one run does (docs/gemini.md has the protocol and the arithmetic):

1. **Preflight**, before any request: each question's prompt tokens are estimated from its
   video's duration, ``fps``, ``media_resolution`` and ``audio`` (naru_eval.providers.gemini.cost); a
   configuration whose longest request would overflow the model's context is refused with the
   numbers and what would fit.
2. **Uploads**: every distinct video of the pending questions goes to an upload pool
   (``upload_concurrency`` at a time, the longest first), once per run; the upload registry
   (naru_eval.store.uploads) reuses live uploads from earlier runs after checking
   ``files.get``. Each upload is polled until ACTIVE, for at most ``active_timeout`` seconds.
   Optional local pre-processing (``downsample=true``, ``strip_audio=true``;
   naru_eval.providers.gemini.video) shrinks what is sent.
3. **Calibration**: ``countTokens`` (free) on the longest video's text and video part apart
   corrects the estimate (the API returns totals only; see :meth:`Gemini._calibrate`); a
   configuration that would still overflow is refused before any ``generateContent``.
4. **Questions**: ``generateContent`` with the video part first (``fileData`` plus
   ``videoMetadata``: ``fps``, and ``contentLayers=[FRAMES]`` for ``audio=false``), the question
   after it (a blind question: the text alone), ``mediaResolution`` / ``thinkingConfig`` /
   ``temperature`` / ``seed`` in ``generationConfig``. At most ``max_concurrency`` in flight,
   adaptively (AIMD: halved on a 429, grown by one per window of successes). Bounded retries
   with full-jitter backoff on 429/5xx/timeouts: every call goes through naru_eval.api.caller
   (retries by naru_eval.api.retry, the limit by naru_eval.api.limiter; the SDK's retries are off).
   A request that still fails, a blocked prompt (``promptFeedback.blockReason``), a SAFETY (or
   other non-answer) finish and an empty answer raise :class:`RequestFailed`: stored as a
   failure, scored invalid, listed, retried on the next run.
   With ``context_cache=true`` (the default) each video's part sits in one explicit context
   cache (naru_eval.providers.gemini.caching), created before the video's first question,
   referenced by each (``cached_content``), deleted after its last; with ``batch=true`` the
   questions go as one resumable batch job instead (naru_eval.providers.gemini.batch).
5. **Usage**: input (per modality), output, thinking and cached tokens and the dollar cost of
   each request are stored with its answer (the store's ``usage`` column); the run's sums are
   logged and written to ``gemini_usage_<timestamp>.json`` (``usage_dir``, else
   ``$NARU_CACHE_DIR``, else next to the response store).

This module is the lmms-eval class and its typed arguments (:class:`GeminiArgs`); the work is in
naru_eval.providers.gemini: ``client`` (the SDK client), ``request`` (parts, generationConfig, the
reply's answer and usage), ``uploads``, ``preflight`` and ``cost``.

Thinking settings are checked against the model's family when the adapter starts
(naru_eval.providers.gemini.cost.check_thinking): a pairing the API would answer 400 on every request is
refused, naming what the model takes.

The API key is read from ``GOOGLE_API_KEY`` (then ``GEMINI_API_KEY``) only; a key in
``model_args`` is refused (lmms-eval writes model_args into results.json). The key never
reaches a log, the store, the usage file or the upload registry (which keeps a truncated hash).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from loguru import logger
from pydantic import Field, field_validator, model_validator

from model_adapters.args import AdapterArgs, ArgParser, is_none
from model_adapters.base import Answer, NaruModel, NaruRequest, RequestFailed
from naru_eval.api.caller import ApiCaller
from naru_eval.api.limiter import AdaptiveLimiter, limiter_for
from naru_eval.api.retry import RetryError, RetryPolicy
from naru_eval.core.budgets import resolve_sampling
from naru_eval.providers.gemini import request as request_
from naru_eval.providers.gemini.batch import BatchPolicy, BatchRunner
from naru_eval.providers.gemini.caching import CachePolicy, VideoCaches
from naru_eval.providers.gemini.client import DEFAULT_BASE_URL, KEY_ENV, api_key_from_env, genai_errors, make_client
from naru_eval.providers.gemini.cost import (
    THINKING_LEVELS,
    TokenEstimate,
    UsageTotals,
    cache_min_tokens,
    cache_storage_cost,
    check_thinking,
    family,
    load_prices,
    normalise_resolution,
    text_tokens,
    usage_from_store,
)
from naru_eval.providers.gemini.preflight import ConfigurationRefused, ContextOverflow, TokenPlan, check_sizes
from naru_eval.providers.gemini.uploads import Uploaded, Uploader, UploadFailed, UploadPolicy
from naru_eval.providers.gemini.video import PrepSpec
from naru_eval.settings import settings
from naru_eval.store.gemini_jobs import GeminiJobs
from naru_eval.store.uploads import UploadRegistry, account_id, default_registry_path

__all__ = ["ConfigurationRefused", "ContextOverflow", "Gemini", "GeminiArgs", "UploadFailed"]

DEFAULT_MODEL = "gemini-3-flash-preview"

_LMMS_EVAL_EXTRAS = ("device", "max_batch_size")
_NOT_SECRET = frozenset({"max_output_tokens", "max_input_tokens"})
_NOT_FOR_GEMINI = ("num_frames", "max_frames", "max_pixels")


_ARGS = ArgParser("naru_gemini")
#: the base's arguments (response store, batch size) passed through; the frame budget is fps= only
_BASE_ARGS = ("response_store", "store", "batch_size")


def check_base_url(url: str) -> str:
    """An http(s) URL without credentials or a query (lmms-eval writes model_args into results.json)."""
    parts = urlsplit(str(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL, got {url!r}")
    if parts.username or parts.password or parts.query:
        raise ValueError(
            "base_url must not carry credentials or a query (lmms-eval writes model_args "
            "into results.json); the key comes from GOOGLE_API_KEY / GEMINI_API_KEY"
        )
    return str(url)


class GeminiArgs(AdapterArgs):
    """``naru_gemini``'s ``--model_args`` (docs/gemini.md has the protocol behind each)."""

    model: str = Field(DEFAULT_MODEL, description="Gemini model id, e.g. gemini-3-flash-preview")
    fps: float | None = Field(None, description="videoMetadata.fps, in (0, 24]; unset: the leaderboard's sampling")
    media_resolution: str = Field("default", description="low, medium, high or default (mediaResolution)")
    audio: bool = Field(True, description="send the audio track (false: contentLayers=[FRAMES])")
    strip_audio: bool = Field(False, description="audio=false by stripping the track locally instead")
    thinking_budget: int | None = Field(None, ge=-1, description="Gemini 2.5 thinkingBudget (-1: dynamic)")
    thinking_level: str | None = Field(None, description="Gemini 3 thinkingLevel (minimal, low, medium, high)")
    temperature: float | Literal["auto"] | None = Field(
        "auto", description="auto: the API's default for Gemini 3, 0 for earlier models"
    )
    seed: int | None = Field(None, description="generationConfig.seed")
    max_output_tokens: int | None = Field(None, ge=1, description="generationConfig.maxOutputTokens")
    base_url: str | None = Field(None, description="another endpoint (else $GOOGLE_GEMINI_BASE_URL, else Google's)")
    api_version: str = Field("v1beta", description="the API version in the URL")
    max_concurrency: int = Field(8, ge=1, description="the ceiling of questions in flight (AIMD below it)")
    initial_concurrency: int | None = Field(None, ge=1, description="questions in flight at the start")
    upload_concurrency: int = Field(4, ge=1, description="uploads at a time")
    max_retries: int = Field(5, ge=0, description="retries after the first try (429, 5xx, timeouts)")
    retry_base_delay: float = Field(2.0, ge=0, description="full-jitter backoff base, seconds")
    retry_max_delay: float = Field(60.0, ge=0, description="backoff ceiling, seconds")
    timeout: float = Field(600.0, ge=0, description="seconds per HTTP request")
    active_timeout: float = Field(1800.0, ge=0, description="seconds an upload may take to become ACTIVE")
    poll_interval: float = Field(5.0, ge=0, description="seconds between files.get polls")
    upload_registry: str | None = Field(None, description="the upload registry's SQLite file")
    reuse_uploads: bool = Field(True, description="reuse live uploads of earlier runs")
    reuse_margin_s: float = Field(6 * 3600.0, ge=0, description="an upload expiring sooner is not reused")
    downsample: bool = Field(False, description="re-encode before upload (fps x downsample_factor, downsample_height)")
    downsample_factor: float = Field(4.0, description="re-encode at fps x this (>= 1)")
    downsample_height: int | None = Field(360, ge=2, description="re-encoded height in pixels (none: keep)")
    video_cache: str | None = Field(None, description="where re-encoded videos are kept")
    calibrate: bool = Field(True, description="countTokens on the longest video before the questions")
    max_input_tokens: int | None = Field(None, ge=1, description="the context limit, for a model not in the table")
    max_file_gb: float = Field(2.0, ge=0, description="the Files API's per-file limit")
    storage_limit_gb: float = Field(20.0, ge=0, description="the Files API's per-project limit")
    usage_dir: str | None = Field(None, description="where gemini_usage_<timestamp>.json goes")
    prices: str | None = Field(None, description="a prices JSON file instead of the packaged one")
    context_cache: bool = Field(True, description="one explicit context cache per video (false: implicit caching only)")
    cache_ttl_max: float = Field(6 * 3600.0, ge=60, description="the longest TTL a video's cache gets, seconds")
    batch: bool = Field(False, description="ask the questions as a Gemini batch job (the batch price; resumable)")
    batch_poll_interval: float = Field(30.0, ge=0, description="first wait between batches.get polls, seconds")
    batch_poll_max: float = Field(600.0, ge=0, description="the longest wait between polls (x1.5 backoff)")
    batch_timeout: float = Field(86400.0, ge=0, description="seconds to wait for a batch job before its questions fail")

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: Any) -> Any:
        if v is None or not str(v).strip():
            raise ValueError("model=<Gemini model id> is required, e.g. gemini-3-flash-preview")
        return str(v).strip()

    @field_validator("fps")
    @classmethod
    def _fps(cls, v: float | None) -> float | None:
        if v is not None and not 0 < v <= 24:
            raise ValueError(f"fps must be in (0, 24] (videoMetadata.fps), got {v}")
        return v

    @field_validator("media_resolution", mode="before")
    @classmethod
    def _resolution(cls, v: Any) -> str:
        return normalise_resolution(v)

    @field_validator("thinking_level")
    @classmethod
    def _level(cls, v: str | None) -> str | None:
        if v is None:
            return None
        level = v.strip().lower()
        if level not in THINKING_LEVELS:
            raise ValueError(f"thinking_level must be one of {THINKING_LEVELS}, got {v!r}")
        return level

    @field_validator("temperature", mode="before")
    @classmethod
    def _auto(cls, v: Any) -> Any:
        return "auto" if isinstance(v, str) and v.strip().lower() == "auto" else v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return None if v is None else check_base_url(v)

    @field_validator("downsample_factor")
    @classmethod
    def _factor(cls, v: float) -> float:
        if v < 1:
            raise ValueError(f"downsample_factor must be >= 1 (re-encode at >= the sampling fps), got {v}")
        return v

    @model_validator(mode="after")
    def _thinking(self) -> GeminiArgs:
        if self.thinking_level is not None and self.thinking_budget is not None:
            raise ValueError("give thinking_budget (Gemini 2.5) or thinking_level (Gemini 3), not both")
        return self


# --------------------------------------------------------------------------------- run state


@dataclass
class _RunState:
    """What one ``generate_until`` accumulates for its usage summary."""

    started: float = field(default_factory=time.time)
    pending: int = 0
    remaining: int = 0
    run_keys: list[str] = field(default_factory=list)
    totals: UsageTotals = field(default_factory=UsageTotals)
    failures: dict[str, str] = field(default_factory=dict)
    preflight: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] | None = None
    estimates: dict[tuple[str, str], int] = field(default_factory=dict)  # (task, question id)
    durations: dict[str, float] = field(default_factory=dict)  # video -> seconds
    written: Path | None = None


class Gemini(NaruModel):
    model_id = "naru_gemini"
    Args: ClassVar[type[GeminiArgs]] = GeminiArgs
    needs_frames = False  # Gemini samples the uploaded file itself
    default_num_frames = None
    max_concurrency = 8

    def __init__(self, **kwargs: Any) -> None:
        self._refuse_secrets(kwargs)
        for extra in _LMMS_EVAL_EXTRAS:
            kwargs.pop(extra, None)
        wrong = [n for n in _NOT_FOR_GEMINI if not is_none(kwargs.get(n))]
        if wrong:
            raise ValueError(
                f"naru_gemini: {wrong} do not apply: Gemini samples the uploaded video itself at fps= "
                "(videoMetadata.fps); use fps= and media_resolution="
            )
        for n in _NOT_FOR_GEMINI:
            kwargs.pop(n, None)
        args, base = GeminiArgs.parse(self.model_id, kwargs, passthrough=_BASE_ARGS)
        #: the typed model args, as given (``fps`` None: the default sampling below)
        self.args = args
        # unset: the official leaderboard's sampling, from the one table of defaults
        _, fps_value = resolve_sampling(self.model_id, None, args.fps)
        if fps_value is None:
            raise ValueError(f"{self.model_id}: its default sampling must be a rate (fps), not a frame count")
        super().__init__(fps=fps_value, **base)
        self.model = args.model
        self.media_resolution = args.media_resolution
        self.audio = args.audio
        #: audio=false: by default the API drops the audio (videoMetadata.contentLayers=[FRAMES]);
        #: strip_audio=true strips the track locally instead, should the API refuse content layers
        self.strip_audio = args.strip_audio
        self.thinking_budget = args.thinking_budget
        self.thinking_level = args.thinking_level
        warning = check_thinking(self.model, self.thinking_budget, self.thinking_level)
        if warning:
            logger.warning(warning)
        if args.temperature == "auto":
            # Google advises leaving Gemini 3 at its default temperature (1.0): lower values can
            # loop or degrade reasoning. Earlier models: 0, as the task asks.
            self.temperature: float | None = None if family(self.model) == "gemini-3" else 0.0
        else:
            self.temperature = args.temperature
        self.seed = args.seed
        self.max_output_tokens = args.max_output_tokens
        self.api_version = args.api_version
        env_url = os.environ.get("GOOGLE_GEMINI_BASE_URL")
        resolved = args.base_url or (check_base_url(env_url) if env_url else None)
        self.base_url = args.base_url
        self.endpoint = resolved or DEFAULT_BASE_URL
        self.max_concurrency = args.max_concurrency
        self.initial_concurrency = args.initial_concurrency
        self.upload_concurrency = args.upload_concurrency
        self.retry_policy = RetryPolicy(
            max_attempts=args.max_retries + 1, base_delay=args.retry_base_delay, max_delay=args.retry_max_delay
        )
        self.max_retries = args.max_retries
        self.timeout = args.timeout
        self.active_timeout = args.active_timeout
        self.poll_interval = args.poll_interval
        self.registry_path = Path(args.upload_registry) if args.upload_registry else None
        self.reuse_uploads = args.reuse_uploads
        self.reuse_margin_s = args.reuse_margin_s
        self.downsample = args.downsample
        self.prep_spec = PrepSpec(
            # re-encoding anyway (downsample) drops the track too: fewer bytes to send
            audio=self.audio or not (self.strip_audio or self.downsample),
            fps=fps_value * args.downsample_factor if self.downsample else None,
            max_height=args.downsample_height if self.downsample else None,
        )
        self.video_cache = Path(args.video_cache) if args.video_cache else None
        self.calibrate = args.calibrate
        self.max_input_tokens = args.max_input_tokens
        #: the Files API's limits: 2 GB per file, 20 GB per project (files live 48 h)
        self.max_file_gb = args.max_file_gb
        self.storage_limit_gb = args.storage_limit_gb
        self.usage_dir = Path(args.usage_dir) if args.usage_dir else None
        self.prices = load_prices(args.prices)
        self.price = self.prices.for_model(self.model)
        #: waits: between retries (backoff), and between files.get polls; tests replace them
        self.sleep: Callable[[float], None] = time.sleep
        self.poll_sleep: Callable[[float], None] = time.sleep
        self.clock: Callable[[], float] = time.monotonic
        #: the endpoint+model's adaptive limit on generateContent (halved on a 429, grown on successes)
        self.limiter: AdaptiveLimiter = limiter_for(
            f"{self.endpoint.rstrip('/')}/{self.api_version}",
            self.model,
            self.max_concurrency,
            self.initial_concurrency,
        )
        #: the one API path (naru_eval.api.caller): uploads, polls and countTokens retry unthrottled,
        #: questions through the limiter
        self.caller = ApiCaller(
            self.model_id, self.retry_policy, catch=genai_errors, warn=logger.warning, sleep=lambda s: self.sleep(s)
        )
        self.question_caller = ApiCaller(
            self.model_id,
            self.retry_policy,
            catch=genai_errors,
            limiter=self.limiter,
            warn=logger.warning,
            sleep=lambda s: self.sleep(s),
        )
        self._client: Any = None
        self._account: str | None = None
        self._client_lock = threading.Lock()
        self._registry: UploadRegistry | None = None
        self._stats_lock = threading.Lock()
        #: the Files API side (providers/gemini/uploads.py); client, registry and waits looked up at use
        self.uploads = Uploader(
            UploadPolicy(
                self.prep_spec,
                reuse=self.reuse_uploads,
                reuse_margin_s=self.reuse_margin_s,
                active_timeout=self.active_timeout,
                poll_interval=self.poll_interval,
            ),
            client=lambda: self.client,
            account=lambda: self.account,
            registry=lambda: self.registry,
            call=self._call,
            cache_dir=self._cache_dir,
            clock=lambda: self.clock(),
            poll_sleep=lambda s: self.poll_sleep(s),
        )
        self._jobs: GeminiJobs | None = None
        self.context_cache = args.context_cache and not args.batch
        refused = None
        if family(self.model) == "gemini-2" and self.media_resolution != "default":
            # Gemini 2.x takes the resolution in generationConfig only, which a cache cannot carry
            refused = "Gemini 2.x at a non-default media_resolution"
        #: explicit context caches, one per video (providers/gemini/caching.py)
        self.caches = VideoCaches(
            CachePolicy(
                enabled=self.context_cache,
                min_tokens=cache_min_tokens(self.price),
                ttl_max_s=args.cache_ttl_max,
                concurrency=self.max_concurrency,
                refused=refused,
            ),
            model=self.model,
            client=lambda: self.client,
            account=lambda: self.account,
            jobs=lambda: self.jobs,
            call=self._call,
            price=self.price,
            call_once=lambda fn, what: self._call(fn, what, policy=RetryPolicy(max_attempts=1)),
        )
        self.batch = args.batch
        #: batch mode (providers/gemini/batch.py): the questions go as one resumable batch job
        self.batcher = BatchRunner(
            BatchPolicy(args.batch_poll_interval, args.batch_poll_max, args.batch_timeout),
            model=self.model,
            client=lambda: self.client,
            account=lambda: self.account,
            jobs=lambda: self.jobs,
            call=self._call,
            clock=lambda: self.clock(),
            sleep=lambda s: self.poll_sleep(s),
        )
        self._run: _RunState | None = None
        atexit.register(self._write_usage_if_pending)
        atexit.register(self.caches.close, at_exit=True)

    # -- configuration ------------------------------------------------------------------------
    @staticmethod
    def _refuse_secrets(args: Mapping[str, Any]) -> None:
        _ARGS.refuse_secrets(args, KEY_ENV, _NOT_SECRET)

    def describe(self) -> dict[str, Any]:
        """Everything that changes the answers (not the URL, concurrency, retries or key)."""
        # content layers only where sent: the run key of every other configuration is unchanged
        layers = {"content_layers": self.content_layers} if self.content_layers else {}
        return {
            **super().describe(),
            **layers,
            "gemini_model": self.model,
            "api_version": self.api_version,
            "media_resolution": self.media_resolution,
            "audio": self.audio,
            "thinking_budget": self.thinking_budget,
            "thinking_level": self.thinking_level,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_output_tokens": self.max_output_tokens,
            "preprocess": self.prep_spec.describe() if self.prep_spec != PrepSpec() else None,
        }

    # -- the client -----------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The ``genai.Client``, built on first use; the SDK's own retries are off."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    key = api_key_from_env()
                    if not key:
                        raise RuntimeError(
                            "naru_gemini: no API key: set GOOGLE_API_KEY (or GEMINI_API_KEY) in the environment"
                        )
                    self._account = account_id(key, self.endpoint)
                    self._client = make_client(
                        key, api_version=self.api_version, timeout=self.timeout, base_url=self.base_url
                    )
        return self._client

    @property
    def account(self) -> str:
        _ = self.client
        assert self._account is not None
        return self._account

    @property
    def registry(self) -> UploadRegistry:
        if self._registry is None:
            with self._client_lock:
                if self._registry is None:
                    path = self.registry_path or default_registry_path(self._store_path)
                    self._registry = UploadRegistry(path)
        return self._registry

    @property
    def jobs(self) -> GeminiJobs:
        """Context caches and batch jobs, in the upload registry's file (naru_eval.store.gemini_jobs)."""
        if self._jobs is None:
            registry = self.registry
            with self._client_lock:
                if self._jobs is None:
                    self._jobs = GeminiJobs(registry.path)
        return self._jobs

    def _call(self, fn: Callable[[], Any], what: str, policy: RetryPolicy | None = None) -> Any:
        return self.caller.call(fn, what, policy=policy).value

    # -- the request ----------------------------------------------------------------------------
    @property
    def content_layers(self) -> list[str] | None:
        """``videoMetadata.contentLayers``: ``["FRAMES"]`` for audio=false (the API drops the audio),
        unless the track is stripped locally; None (the API's default: frames and audio) otherwise."""
        return None if self.audio or self.strip_audio else ["FRAMES"]

    def settings(self) -> request_.Settings:
        """What each request carries besides its parts (providers/gemini/request.py builds them)."""
        layers = self.content_layers
        return request_.Settings(
            fps=float(self.fps or 0.0),
            media_resolution=self.media_resolution,
            content_layers=tuple(layers) if layers else None,
            thinking_budget=self.thinking_budget,
            thinking_level=self.thinking_level,
            temperature=self.temperature,
            seed=self.seed,
            max_output_tokens=self.max_output_tokens,
        )

    # -- preflight --------------------------------------------------------------------------------
    def _duration(self, request: NaruRequest) -> float:
        dur = request.doc.get("duration_s")
        if dur not in (None, "") and float(dur) > 0:
            return float(dur)
        from naru_eval.media.video import probe_video

        return probe_video(request.video, check_end=False).duration_s  # type: ignore[arg-type]

    @property
    def plan(self) -> TokenPlan:
        return TokenPlan(self.model, float(self.fps or 0.0), self.media_resolution, self.audio, self.max_input_tokens)

    def estimate(
        self, duration_s: float, prompt: str, media_resolution: str | None = None, audio: bool | None = None
    ) -> TokenEstimate:
        return self.plan.estimate(duration_s, prompt, media_resolution, audio)

    @property
    def input_limit(self) -> int:
        return self.plan.input_limit

    def _preflight(self, requests: Sequence[NaruRequest]) -> tuple[str, NaruRequest, TokenEstimate] | None:
        durations: dict[str, float] = {}
        worst: tuple[int, str, NaruRequest, TokenEstimate] | None = None
        assert self._run is not None
        for r in requests:
            if r.video is None:  # text only (blind tasks): no upload, no video tokens
                self._run.estimates[r.task, r.question_id] = text_tokens(r.prompt)
                continue
            if r.video not in durations:
                durations[r.video] = self._duration(r)
            est = self.estimate(durations[r.video], r.prompt)
            assert self._run is not None
            self._run.estimates[r.task, r.question_id] = est.total
            if worst is None or est.total > worst[0]:
                worst = (est.total, r.video, r, est)
        self._run.durations = durations
        if worst is None:
            return None  # text only: nothing to upload or calibrate
        total, video, request, est = worst
        known = self.plan.limit_known
        assert self._run is not None
        self._run.preflight = {
            "videos": len(durations),
            "hours": round(sum(durations.values()) / 3600, 3),
            "longest_video": video,
            "longest_s": est.duration_s,
            "longest_estimate": total,
            "estimated_input_tokens": sum(self._run.estimates.values()),
            "input_limit": self.input_limit,
            "limit_known": known,
        }
        if not known:
            logger.warning(
                f"naru_gemini: {self.model} is not in the context-window table; assuming {self.input_limit:,} "
                "tokens (set max_input_tokens= to be exact)"
            )
        if total > self.input_limit:
            raise ContextOverflow(self.plan.overflow_message(video, est, total, "an estimated"))
        check_sizes(list(durations), self.prep_spec, self.max_file_gb, self.storage_limit_gb)
        logger.info(
            f"naru_gemini: preflight: {len(requests)} question(s) over {len(durations)} video(s); longest "
            f"{Path(video).name} ({est.duration_s / 3600:.2f} h) ~{total:,} input tokens of {self.input_limit:,}"
        )
        return video, request, est

    def _count(self, parts: list[Any]) -> int:
        """``countTokens`` of ``parts``: its ``totalTokens``, all the Gemini API reports (the SDK's
        ``CountTokensResponse`` has no per-modality details)."""
        contents = request_.text_contents(parts)
        counted = self._call(
            lambda: self.client.models.count_tokens(model=self.model, contents=contents), "countTokens"
        )
        return int(getattr(counted, "total_tokens", 0) or 0)

    def _calibrate(self, video: str, req: NaruRequest, est: TokenEstimate) -> None:
        """countTokens on the longest video: refuse if the counted configuration overflows.

        countTokens takes no generationConfig, so it counts at the default media resolution unless
        the video part carries its own ``mediaResolution`` (Gemini 3 only). The text and the video
        are counted apart; for Gemini 2.x at a non-default resolution the frames are counted alone
        (``contentLayers=[FRAMES]``) and only they are rescaled (TokenPlan.calibration).
        """
        try:
            uploaded = self.uploads.result(video)
        except Exception as e:  # noqa: BLE001 - its questions fail on their own
            logger.warning(f"naru_gemini: calibration skipped: the upload of {Path(video).name} failed ({e})")
            return
        plan, settings = self.plan, self.settings()
        in_count = plan.counted_in_resolution()
        gemini3 = family(self.model) == "gemini-3"
        try:
            text = self._count([request_.text_part(req.prompt)])
            whole = self._count(
                [request_.video_part(settings, uploaded.uri, uploaded.mime_type, per_part_resolution=gemini3)]
            )
            frames = whole
            if not in_count and self.audio:
                frames = self._count([request_.video_part(settings, uploaded.uri, uploaded.mime_type, ["FRAMES"])])
        except RetryError as e:
            logger.warning(f"naru_gemini: calibration skipped: countTokens failed ({e})")
            return
        if whole <= 0:
            return
        info = plan.calibration(video, est, text, whole, frames)
        calibrated = info["calibrated"]
        assert self._run is not None
        self._run.calibration = info
        how = "" if in_count else f" (frames counted at the default resolution, x{info['frame_scale']:.3f})"
        logger.info(
            f"naru_gemini: countTokens on {Path(video).name}: video {whole:,}{how}, text {text:,}; this "
            f"configuration: {calibrated:,} vs {est.total:,} estimated (x{info['ratio']}), of {self.input_limit:,}"
        )
        if calibrated > self.input_limit:
            raise ContextOverflow(plan.overflow_message(video, est, calibrated, "(counted by countTokens)"))

    # -- uploads --------------------------------------------------------------------------------
    def _cache_dir(self) -> Path:
        if self.video_cache is not None:
            return self.video_cache
        return self.registry.path.parent / "gemini_videos"

    @property
    def upload_stats(self) -> dict[str, int]:
        return self.uploads.stats

    def uploaded(self, video: str) -> Uploaded:
        """The upload of ``video`` (providers/gemini/uploads.py): started by :meth:`prepare`, or now."""
        return self.uploads.uploaded(video)

    # -- the run --------------------------------------------------------------------------------
    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Preflight, then start every upload, then calibrate: all before the first question."""
        self._write_usage_if_pending()
        self._run = _RunState(pending=len(requests), remaining=len(requests))
        if not requests:
            return
        self._run.run_keys = sorted({self.request_key(r)[0] for r in requests})
        _ = self.client  # no key: one clear error now
        _ = self.registry
        plan = self._preflight(requests)
        if plan is not None:  # None: text only, nothing to upload, calibrate or cache
            longest, longest_request, longest_est = plan
            order = [longest] + [v for v in dict.fromkeys(r.video for r in requests) if v and v != longest]
            pool = self.uploads.start(order, self.upload_concurrency)
            if self.calibrate:
                try:
                    self._calibrate(longest, longest_request, longest_est)
                except ContextOverflow:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
        self._plan_caches(requests)
        if self.batch:
            self.batcher.run(
                [(self.request_key(r), r) for r in requests],
                build=self._batch_request,
                answer=self._batch_answer,
                fail=RequestFailed,
            )

    def _plan_caches(self, requests: Sequence[NaruRequest]) -> None:
        """Each video's pending questions, run key and estimated media tokens, for its cache."""
        assert self._run is not None
        plan: dict[str, tuple[int, str, int, int]] = {}
        for r in requests:
            if r.video is None:
                continue
            n, rk, media, audio = plan.get(r.video, (0, "", 0, 0))
            if not n:
                est = self.estimate(self._run.durations[r.video], "")
                rk, media, audio = self.request_key(r)[0], est.media_tokens, est.audio_tokens
            plan[r.video] = (n + 1, rk, media, audio)
        self.caches.plan(plan)

    def respond(self, request: NaruRequest) -> Answer:
        try:
            return self._respond(request)
        except RequestFailed as e:
            if self._run is not None:
                with self._stats_lock:
                    self._run.failures[request.question_id] = str(e)
                    self._run.totals.add(e.usage, ok=False)
            raise
        finally:
            self._one_done()

    def _respond(self, request: NaruRequest) -> Answer:
        if self.batch:
            try:
                answer = self.batcher.result(self.request_key(request))
            except KeyError as e:
                raise RequestFailed(f"gemini: {e.args[0]}", {"stage": "batch"}) from e
            if self._run is not None:
                with self._stats_lock:
                    self._run.totals.add(answer.usage, ok=True)
            return answer
        started = time.monotonic()
        try:
            answer = self._ask(request)
        finally:
            if request.video is not None:
                self.caches.done(request.video, time.monotonic() - started)
        if self._run is not None:
            with self._stats_lock:
                self._run.totals.add(answer.usage, ok=True)
        return answer

    def _uploaded_for(self, request: NaruRequest) -> Uploaded | None:
        """The question's upload (None for a blind question); RequestFailed if it failed."""
        if request.video is None:  # a blind question is asked as text alone
            return None
        try:
            return self.uploaded(request.video)
        except Exception as e:  # noqa: BLE001 - any upload problem fails this video's questions, not the run
            name = Path(request.video).name
            raise RequestFailed(f"gemini: upload of {name} failed: {e}", {"stage": "upload"}) from e

    def _video_part(self, settings: request_.Settings, uploaded: Uploaded) -> Any:
        """The video part as the questions (or their cache) carry it."""
        gemini3 = family(self.model) == "gemini-3"
        return request_.video_part(settings, uploaded.uri, uploaded.mime_type, per_part_resolution=gemini3)

    def _ask(self, request: NaruRequest) -> Answer:
        uploaded = self._uploaded_for(request)
        settings = self.settings()
        cache = None
        if uploaded is not None and request.video is not None and self.caches.active:
            cache = self.caches.name_for(request.video, lambda: self._video_part(settings, uploaded))
        video = (uploaded.uri, uploaded.mime_type) if uploaded and cache is None else None
        contents = request_.contents(settings, video, request.prompt)
        config = request_.generation_config(settings, cached_content=cache)

        def generate() -> Any:
            return self.client.models.generate_content(model=self.model, contents=contents, config=config)

        try:
            called = self.question_caller.call(generate, f"question {request.question_id}")
        except RetryError as e:
            if cache is not None and request.video is not None and e.status in (400, 403, 404):
                # the cache is gone (expired early, deleted elsewhere): ask with the video itself
                logger.warning(f"naru_gemini: {cache} refused ({e}); asking {request.question_id} without it")
                self.caches.gone(request.video)
                return self._ask(request)
            raise RequestFailed(
                f"gemini: {e}", {"attempts": e.attempts, "status": e.status, "error": type(e.last_error).__name__}
            ) from e
        response, attempts = called.value, called.attempts
        estimated = self._run.estimates.get((request.task, request.question_id)) if self._run is not None else None
        answer = self.answer_from(response, attempts, price=self.price, estimated=estimated)
        if cache is not None:
            answer = Answer(answer.text, {**(answer.usage or {}), "context_cache": cache})
        return answer

    # -- batch mode -------------------------------------------------------------------------------
    def _batch_request(self, request: NaruRequest) -> tuple[list[Any], Any]:
        """(contents, config) of one question in a batch job; RequestFailed if its upload failed."""
        uploaded = self._uploaded_for(request)
        settings = self.settings()
        video = (uploaded.uri, uploaded.mime_type) if uploaded else None
        return request_.contents(settings, video, request.prompt), request_.generation_config(settings)

    def _batch_answer(self, request: NaruRequest, response: Any, job: str) -> Answer:
        """The answer in one batch result, priced at the batch price; RequestFailed otherwise."""
        estimated = self._run.estimates.get((request.task, request.question_id)) if self._run is not None else None
        try:
            text, usage = request_.answer_text(response, 1, self.price, estimated, batch=True)
        except request_.NoAnswer as e:
            raise RequestFailed(f"{e} (batch job {job})", {**e.usage, "batch_job": job}) from e
        usage["batch_job"] = job
        return Answer(text, usage)

    @staticmethod
    def answer_from(
        response: Any, attempts: int = 1, price: Mapping[str, float] | None = None, estimated: int | None = None
    ) -> Answer:
        """The answer in a response (providers/gemini/request.py), or RequestFailed: blocked prompt,
        no candidate, a non-answer finish (SAFETY, RECITATION, ...), or no text."""
        try:
            text, usage = request_.answer_text(response, attempts, price, estimated)
        except request_.NoAnswer as e:
            raise RequestFailed(str(e), e.usage) from e
        return Answer(text, usage)

    # -- the usage summary ---------------------------------------------------------------------------
    def _one_done(self) -> None:
        run = self._run
        if run is None:
            return
        with self._stats_lock:
            run.remaining -= 1
            last = run.remaining == 0
        if last:
            if self.batch:
                self.batcher.mark_consumed()
            self.write_usage_summary()

    def _usage_path(self) -> Path:
        if self.usage_dir is not None:
            base = self.usage_dir
        elif settings().cache_dir:
            base = Path(str(settings().cache_dir))
        else:
            base = self.store.path.parent if self.store is not None else default_registry_path().parent
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        return base / f"gemini_usage_{stamp}.json"

    def usage_summary(self) -> dict[str, Any]:
        run = self._run or _RunState()
        store_totals: dict[str, Any] = {}
        if self.store is not None and run.run_keys:
            try:
                sums = usage_from_store(self.store.path)
                store_totals = {rk: sums[rk].as_dict() for rk in run.run_keys if rk in sums}
            except Exception as e:  # noqa: BLE001 - the summary must not break a run
                store_totals = {"error": str(e)}
        return {
            "model": self.model,
            "adapter": self.model_id,
            "config": self.describe(),
            "run_keys": run.run_keys,
            "store": str(self.store.path) if self.store is not None else None,
            "started": datetime.fromtimestamp(run.started).isoformat(timespec="seconds"),
            "finished": datetime.now().isoformat(timespec="seconds"),
            "requests_sent": run.pending - run.remaining,
            "answers_reused_from_store": self.reused,
            "this_run": run.totals.as_dict(),
            "store_totals_by_run_key": store_totals,
            "failures": run.failures,
            "uploads": dict(self.upload_stats),
            "upload_registry": str(self.registry.path) if self._registry is not None else None,
            "preflight": run.preflight,
            "calibration": run.calibration,
            "adaptive_concurrency": self.limiter.stats(),
            "prices": {"as_of": self.prices.as_of, "source": self.prices.source, "model": self.price},
            "context_caches": self.caches.stats.as_dict(),
            "context_cache_storage_by_run_key": self._cache_storage(run.run_keys),
            "cost_usd_with_caches": self._cost_with_caches(run.totals),
            "batch": self.batcher.stats.as_dict() if self.batch else None,
        }

    def _cache_storage(self, run_keys: Sequence[str]) -> dict[str, Any]:
        """Per run key, every cache the record holds (earlier runs too): count, token-hours and
        storage cost (null where the model has no storage price)."""
        if self._jobs is None or not run_keys:
            return {}
        out: dict[str, Any] = {}
        try:
            for rec in self.jobs.caches(self.account):
                if rec.run_key not in run_keys:
                    continue
                row = out.setdefault(rec.run_key, {"caches": 0, "token_hours": 0.0, "storage_cost_usd": 0.0})
                hours = rec.stored_hours()
                cost = cache_storage_cost(self.price, rec.tokens, hours)
                row["caches"] += 1
                row["token_hours"] = round(row["token_hours"] + rec.tokens * hours, 6)
                row["storage_cost_usd"] = (
                    None
                    if cost is None or row["storage_cost_usd"] is None
                    else round(row["storage_cost_usd"] + cost, 6)
                )
        except Exception as e:  # noqa: BLE001 - the summary must not break a run
            return {"error": str(e)}
        return out

    def _cost_with_caches(self, t: UsageTotals) -> float | None:
        """This run's answers plus its caches' creation and storage (None where one is unknown)."""
        c = self.caches.stats
        if t.cost_unknown or c.creation_cost_usd is None or c.storage_cost_usd is None:
            return None
        return round(t.cost_usd + c.creation_cost_usd + c.storage_cost_usd, 6)

    def write_usage_summary(self) -> Path | None:
        run = self._run
        if run is None or run.written is not None or run.pending == 0:
            return None
        summary = self.usage_summary()
        path = self._usage_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
        except OSError as e:
            logger.warning(f"naru_gemini: could not write the usage summary to {path}: {e}")
            return None
        run.written = path
        t = run.totals
        cost = f"${t.cost_usd:,.4f}" if t.cost_unknown == 0 else f"${t.cost_usd:,.4f} (+{t.cost_unknown} unpriced)"
        logger.info(
            f"naru_gemini: {t.requests} request(s) ({t.ok} answered, {t.failed} failed): "
            f"{t.input_tokens:,} input tokens {t.by_modality}, {t.output_tokens:,} output, "
            f"{t.thinking_tokens:,} thinking, {t.cached_tokens:,} cached (the API's count; "
            f"{self.caches.stats.created} explicit cache(s)); cost {cost} at prices as of "
            f"{self.prices.as_of} (to be checked); uploads: {self.upload_stats['uploaded']} new "
            f"({self.upload_stats['bytes_sent']:,} bytes), {self.upload_stats['reused']} reused. Usage: {path}"
        )
        return path

    def refresh_usage_summary(self) -> None:
        """Rewrite the written summary with the store's totals as they are now (the last answer
        is stored just after the summary was first written)."""
        run = self._run
        if run is None or run.written is None:
            return
        try:
            run.written.write_text(json.dumps(self.usage_summary(), indent=2, default=str), encoding="utf-8")
        except OSError as e:
            logger.warning(f"naru_gemini: could not refresh the usage summary {run.written}: {e}")

    def _write_usage_if_pending(self) -> None:
        """At exit and before the next pass: write the summary of an unfinished pass (a crash, a
        stop), or refresh a written one with the store's final totals."""
        run = self._run
        if run is None or not run.pending:
            return
        if run.written is not None:
            self.refresh_usage_summary()
        elif run.remaining < run.pending:
            self.write_usage_summary()
