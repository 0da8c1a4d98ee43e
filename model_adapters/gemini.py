"""``naru_gemini``: Gemini through the ``google-genai`` SDK, the video sent natively (Files API).

    export GOOGLE_API_KEY=...        # or GEMINI_API_KEY; never in model_args
    lmms-eval --model naru_gemini \\
        --model_args model=gemini-3-flash-preview,fps=0.25,media_resolution=low \\
        --tasks naru_mcq --output_path results --log_samples

What one run does (docs/gemini.md has the protocol and the arithmetic), all before the first
question but the last two steps, each in naru_eval.providers.gemini:

1. **Preflight** (``preflight``, ``tokens``): a configuration whose longest request would
   overflow the context, or whose files exceed the Files API's limits, is refused with the
   numbers and what would fit.
2. **Uploads** (``uploads``, naru_eval.store.uploads): each distinct video once per run, the
   longest first, live uploads of earlier runs reused; optional local pre-processing (``video``).
3. **Calibration** (``preflight.calibrate``): ``countTokens`` on the longest video corrects the
   estimate; a configuration that would still overflow is refused.
4. **Questions** (``request``): ``generateContent``, the video part first, the question after it
   (a blind question: the text alone), at most ``max_concurrency`` in flight (AIMD), every call
   through naru_eval.api.caller. A failure, a blocked prompt, a non-answer finish or an empty
   answer raises :class:`RequestFailed`: stored as a failure, scored invalid, retried on the next
   run. One explicit context cache per video (``caching``), or one batch job (``batch``).
5. **Usage** (``usage``, ``pricing``): tokens and cost stored with each answer; the run's
   :class:`~naru_eval.providers.gemini.usage.UsageSummary` written to ``gemini_usage_<timestamp>.json``.

This module is the lmms-eval class; its typed arguments are :class:`GeminiArgs`
(``naru_eval.providers.gemini.args``, kept whole on ``self.args``) and the work is in
naru_eval.providers.gemini: ``client`` (the SDK client), ``request`` (parts, generationConfig,
the reply's answer and usage), ``uploads``, ``preflight`` (estimates and calibration),
``caching``, ``batch``, ``families``, ``tokens``, ``pricing`` and ``usage`` (the run's summary).

Thinking settings are checked against the model's family at start (``families.check_thinking``):
a pairing the API would answer 400 on every request is refused, naming what the model takes.

What the model is given (its input plan, recorded in every payload): the native video at
``fps``, with its audio track (input mode ``video+audio``) unless ``audio=false`` (``video``).

The API key is read from ``GOOGLE_API_KEY`` (then ``GEMINI_API_KEY``) only; a key in
``model_args`` is refused (lmms-eval writes model_args into results.json). The key never
reaches a log, the store, the usage file or the upload registry (which keeps a truncated hash).
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.request import Answer, NaruRequest, RequestFailed
from naru_eval.api.caller import ApiCaller
from naru_eval.api.lazy import Lazy
from naru_eval.api.limiter import AdaptiveLimiter, limiter_for
from naru_eval.api.retry import RetryError, RetryPolicy
from naru_eval.core.budgets import Sampling
from naru_eval.core.inputs import AudioInput, FramesInput, InputPlan
from naru_eval.core.json_types import JSONObject
from naru_eval.providers.gemini import request as request_
from naru_eval.providers.gemini.args import DEFAULT_MODEL, GeminiArgs, check_base_url
from naru_eval.providers.gemini.batch import BatchPolicy, GeminiBatchRunner
from naru_eval.providers.gemini.caching import CachePolicy, VideoCaches
from naru_eval.providers.gemini.client import DEFAULT_BASE_URL, T, api_key_from_env, genai_errors, make_client
from naru_eval.providers.gemini.families import check_thinking, family
from naru_eval.providers.gemini.preflight import (
    Asked,
    ConfigurationRefused,
    ContextOverflow,
    TokenPlan,
    calibrate,
    preflight,
)
from naru_eval.providers.gemini.pricing import cache_min_tokens, load_prices
from naru_eval.providers.gemini.tokens import TokenEstimate
from naru_eval.providers.gemini.uploads import Uploaded, Uploader, UploadFailed, UploadPolicy
from naru_eval.providers.gemini.usage import (
    PriceSource,
    RunState,
    UsageReporter,
    UsageSummary,
    UsageTotals,
    cache_storage_by_run_key,
    cost_with_caches,
    usage_from_store,
    usage_path,
)
from naru_eval.providers.gemini.video import PrepSpec
from naru_eval.settings import settings
from naru_eval.store.gemini_jobs import GeminiJobs
from naru_eval.store.uploads import UploadRegistry, account_id, default_registry_path

if TYPE_CHECKING:
    from google.genai import Client, types

__all__ = ["DEFAULT_MODEL", "ConfigurationRefused", "ContextOverflow", "Gemini", "GeminiArgs", "UploadFailed"]


class Gemini(NaruModel):
    """Gemini through the google-genai SDK, the video sent natively."""

    family = Family(
        id="naru_gemini",
        args=GeminiArgs,
        default=Official(Sampling(fps=0.25), rows=("Gemini-3-Flash", "Gemini-3-Pro", "Gemini-2.5-Flash")),
        inputs=("frames", "audio"),
    )
    max_concurrency = 8
    args: GeminiArgs

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        args = self.args
        fps = self.sampling.fps
        if fps is None:
            raise ValueError(f"{self.model_id}: its default sampling must be a rate (fps), not a frame count")
        warning = check_thinking(args.model, args.thinking_budget, args.thinking_level)
        if warning:
            logger.warning(warning)
        #: what is derived from the args: the temperature sent, the endpoint, the local preparation
        self.temperature = args.temperature_sent()
        env_url = os.environ.get("GOOGLE_GEMINI_BASE_URL")
        self.endpoint = args.base_url or (check_base_url(env_url) if env_url else None) or DEFAULT_BASE_URL
        self.prep_spec = args.prep_spec(fps)
        self.prices = load_prices(args.prices)
        self.price = self.prices.for_model(args.model)
        #: waits: between retries (backoff), and between files.get polls; tests replace them
        self.sleep: Callable[[float], None] = time.sleep
        self.poll_sleep: Callable[[float], None] = time.sleep
        self.clock: Callable[[], float] = time.monotonic
        #: the endpoint+model's adaptive limit on generateContent (halved on a 429, grown on successes)
        self.max_concurrency = args.max_concurrency
        self.limiter: AdaptiveLimiter = limiter_for(
            f"{self.endpoint.rstrip('/')}/{args.api_version}",
            args.model,
            args.max_concurrency,
            args.initial_concurrency,
        )
        #: the one API path (naru_eval.api.caller): uploads, polls and countTokens retry unthrottled,
        #: questions through the limiter
        policy = args.retry_policy()
        self.caller = ApiCaller(self.model_id, policy, catch=genai_errors, warn=logger.warning, sleep=self._sleep)
        self.question_caller = ApiCaller(
            self.model_id, policy, catch=genai_errors, limiter=self.limiter, warn=logger.warning, sleep=self._sleep
        )
        self._account: str | None = None
        self._client: Lazy[Client] = Lazy(self._make_client)
        self._registry: Lazy[UploadRegistry] = Lazy(self._open_registry)
        self._jobs: Lazy[GeminiJobs] = Lazy(lambda: GeminiJobs(self.registry.path))
        self.uploads = self._uploader()
        self.caches = self._video_caches()
        self.batcher = self._batcher()
        #: the run's usage summary (providers/gemini/usage.py), written after a pass's last question
        self.usage_log = UsageReporter(self._usage_summary, self._usage_path, on_last=self._last_done)
        atexit.register(self.usage_log.write_if_pending)
        atexit.register(self.caches.close, at_exit=True)

    # -- configuration ------------------------------------------------------------------------
    interleave_refusal = "Gemini samples the uploaded file itself, so there are no frame times to put lines between"

    def input_plan(self) -> InputPlan:
        """The native video: its frames sampled by Gemini at ``fps`` (nothing decoded here) and,
        unless ``audio=false``, its audio track."""
        if not self.args.video:
            from naru_eval.settings import UserError

            raise UserError(f"{self.model_id}: video=false is not available (the video is uploaded whole)")
        frames = FramesInput(self.sampling, delivery="video", decoded=False)
        return InputPlan(frames=frames, audio=AudioInput() if self.args.audio else None)

    def _sleep(self, seconds: float) -> None:
        self.sleep(seconds)  # looked up at each wait: tests replace ``self.sleep``

    def _uploader(self) -> Uploader:
        """The Files API side (providers/gemini/uploads.py); client, registry and waits looked up at use."""
        a = self.args
        return Uploader(
            UploadPolicy(
                self.prep_spec,
                reuse=a.reuse_uploads,
                reuse_margin_s=a.reuse_margin_s,
                active_timeout=a.active_timeout,
                poll_interval=a.poll_interval,
            ),
            client=lambda: self.client,
            account=lambda: self.account,
            registry=lambda: self.registry,
            call=self._call,
            cache_dir=self._cache_dir,
            clock=lambda: self.clock(),
            poll_sleep=lambda s: self.poll_sleep(s),
        )

    def _video_caches(self) -> VideoCaches:
        """Explicit context caches, one per video (providers/gemini/caching.py)."""
        a = self.args
        refused = None
        if family(a.model) == "gemini-2" and a.media_resolution != "default":
            # Gemini 2.x takes the resolution in generationConfig only, which a cache cannot carry
            refused = "Gemini 2.x at a non-default media_resolution"
        return VideoCaches(
            CachePolicy(
                enabled=a.context_cache and not a.batch,
                min_tokens=cache_min_tokens(self.price),
                ttl_max_s=a.cache_ttl_max,
                concurrency=a.max_concurrency,
                refused=refused,
            ),
            model=a.model,
            client=lambda: self.client,
            account=lambda: self.account,
            jobs=lambda: self.jobs,
            call=self._call,
            price=self.price,
            call_once=lambda fn, what: self._call(fn, what, policy=RetryPolicy(max_attempts=1)),
        )

    def _batcher(self) -> GeminiBatchRunner[NaruRequest, Answer]:
        """Batch mode (providers/gemini/batch.py): the questions go as one resumable batch job."""
        a = self.args
        return GeminiBatchRunner[NaruRequest, Answer](
            BatchPolicy(a.batch_poll_interval, a.batch_poll_max, a.batch_timeout),
            model=a.model,
            client=lambda: self.client,
            account=lambda: self.account,
            jobs=lambda: self.jobs,
            call=self._call,
            clock=lambda: self.clock(),
            sleep=lambda s: self.poll_sleep(s),
        )

    def describe(self) -> JSONObject:
        """Everything that changes the answers (not the URL, concurrency, retries or key)."""
        a = self.args
        # content layers only where sent: the run key of every other configuration is unchanged
        layers: JSONObject = {"content_layers": [*self.content_layers]} if self.content_layers else {}
        return {
            **super().describe(),
            **layers,
            "gemini_model": a.model,
            "api_version": a.api_version,
            "media_resolution": a.media_resolution,
            "audio": a.audio,
            "thinking_budget": a.thinking_budget,
            "thinking_level": a.thinking_level,
            "temperature": self.temperature,
            "seed": a.seed,
            "max_output_tokens": a.max_output_tokens,
            "preprocess": self.prep_spec.describe() if self.prep_spec != PrepSpec() else None,
        }

    # -- the client -----------------------------------------------------------------------------
    @property
    def client(self) -> Client:
        """The ``Client``, built on first use; the SDK's own retries are off."""
        return self._client.get()

    def _make_client(self) -> Client:
        key = api_key_from_env()
        if not key:
            raise RuntimeError(
                f"{self.model_id}: no API key: set GOOGLE_API_KEY (or GEMINI_API_KEY) in the environment"
            )
        self._account = account_id(key, self.endpoint)
        a = self.args
        return make_client(key, api_version=a.api_version, timeout=a.timeout, base_url=a.base_url)

    @property
    def account(self) -> str:
        _ = self.client
        assert self._account is not None
        return self._account

    @property
    def registry(self) -> UploadRegistry:
        return self._registry.get()

    def _open_registry(self) -> UploadRegistry:
        given = self.args.upload_registry
        return UploadRegistry(Path(given) if given else default_registry_path(self._store_path))

    @property
    def jobs(self) -> GeminiJobs:
        """Context caches and batch jobs, in the upload registry's file (naru_eval.store.gemini_jobs)."""
        return self._jobs.get()

    def _call(self, fn: Callable[[], T], what: str, policy: RetryPolicy | None = None) -> T:
        return self.caller.call(fn, what, policy=policy).value

    # -- the request ----------------------------------------------------------------------------
    @property
    def content_layers(self) -> list[str] | None:
        """``videoMetadata.contentLayers``: ``["FRAMES"]`` for audio=false (the API drops the audio),
        unless the track is stripped locally; None (the API's default: frames and audio) otherwise."""
        return None if self.args.audio or self.args.strip_audio else ["FRAMES"]

    def request_config(self) -> request_.RequestConfig:
        """What each request carries besides its parts (providers/gemini/request.py builds them)."""
        a, layers = self.args, self.content_layers
        return request_.RequestConfig(
            fps=float(self.fps or 0.0),
            media_resolution=a.media_resolution,
            content_layers=tuple(layers) if layers else None,
            thinking_budget=a.thinking_budget,
            thinking_level=a.thinking_level,
            temperature=self.temperature,
            seed=a.seed,
            max_output_tokens=a.max_output_tokens,
        )

    # -- preflight (providers/gemini/preflight.py) ---------------------------------------------------
    @property
    def plan(self) -> TokenPlan:
        a = self.args
        return TokenPlan(a.model, float(self.fps or 0.0), a.media_resolution, a.audio, a.max_input_tokens)

    def estimate(
        self, duration_s: float, prompt: str, media_resolution: str | None = None, audio: bool | None = None
    ) -> TokenEstimate:
        return self.plan.estimate(duration_s, prompt, media_resolution, audio)

    @property
    def input_limit(self) -> int:
        return self.plan.input_limit

    def _count(self, parts: list[types.Part]) -> int:
        """``countTokens`` of ``parts``: its ``totalTokens``, all the Gemini API reports (the SDK's
        ``CountTokensResponse`` has no per-modality details)."""
        contents = request_.text_contents(parts)
        counted = self._call(
            lambda: self.client.models.count_tokens(model=self.args.model, contents=contents), "countTokens"
        )
        return int(getattr(counted, "total_tokens", 0) or 0)

    def _calibrate(self, run: RunState, longest: tuple[str, str, TokenEstimate]) -> None:
        """countTokens on the longest video (preflight.calibrate): refuse if it overflows."""
        video = longest[0]
        try:
            uploaded = self.uploads.result(video)
        except Exception as e:  # noqa: BLE001 - its questions fail on their own
            logger.warning(f"naru_gemini: calibration skipped: the upload of {Path(video).name} failed ({e})")
            return
        try:
            config, where = self.request_config(), (uploaded.uri, uploaded.mime_type)
            calibrate(self.plan, config, longest, where, self._count, lambda info: setattr(run, "calibration", info))
        except RetryError as e:
            logger.warning(f"naru_gemini: calibration skipped: countTokens failed ({e})")

    # -- uploads --------------------------------------------------------------------------------
    def _cache_dir(self) -> Path:
        if self.args.video_cache:
            return Path(self.args.video_cache)
        return self.registry.path.parent / "gemini_videos"

    @property
    def upload_stats(self) -> dict[str, int]:
        return self.uploads.stats

    def uploaded(self, video: str) -> Uploaded:
        """The upload of ``video`` (providers/gemini/uploads.py): started by :meth:`prepare`, or now."""
        return self.uploads.uploaded(video)

    # -- the run --------------------------------------------------------------------------------
    @property
    def _run(self) -> RunState | None:
        """The current pass's state (its estimates, preflight, calibration, usage)."""
        return self.usage_log.run

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Preflight, then start every upload, then calibrate: all before the first question."""
        run = self.usage_log.start(len(requests))
        if not requests:
            return
        run.run_keys = sorted({self.request_key(r)[0] for r in requests})
        _ = self.client  # no key: one clear error now
        _ = self.registry
        a = self.args
        asked = [Asked((r.task, r.question_id), r.video, self.transcript_prompt(r), r.duration_s) for r in requests]
        planned = preflight(asked, self.plan, self.prep_spec, a.max_file_gb, a.storage_limit_gb)
        run.estimates, run.durations, run.preflight = planned.estimates, planned.durations, planned.report
        if planned.longest is not None:  # None: text only, nothing to upload, calibrate or cache
            longest = planned.longest[0]
            order = [longest] + [v for v in dict.fromkeys(r.video for r in requests) if v and v != longest]
            pool = self.uploads.start(order, a.upload_concurrency)
            if a.calibrate:
                try:
                    self._calibrate(run, planned.longest)
                except ContextOverflow:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
        self._plan_caches(run, requests)
        if a.batch:
            self.batcher.run(
                [(self.request_key(r), r) for r in requests],
                build=self._batch_request,
                answer=self._batch_answer,
                fail=RequestFailed,
            )

    def _plan_caches(self, run: RunState, requests: Sequence[NaruRequest]) -> None:
        """Each video's pending questions, run key and estimated media tokens, for its cache."""
        plan: dict[str, tuple[int, str, int, int]] = {}
        for r in requests:
            if r.video is None:
                continue
            n, rk, media, audio = plan.get(r.video, (0, "", 0, 0))
            if not n:
                est = self.estimate(run.durations[r.video], "")
                rk, media, audio = self.request_key(r)[0], est.media_tokens, est.audio_tokens
            plan[r.video] = (n + 1, rk, media, audio)
        self.caches.plan(plan)

    def respond(self, request: NaruRequest) -> Answer:
        run = self._run
        try:
            answer = self._respond(request)
        except RequestFailed as e:
            if run is not None:
                run.failed(request.question_id, str(e), e.usage)
            raise
        else:
            if run is not None:
                run.answered(answer.usage)
            return answer
        finally:
            self.usage_log.one_done()

    def _respond(self, request: NaruRequest) -> Answer:
        if self.args.batch:
            try:
                return self.batcher.result(self.request_key(request))
            except KeyError as e:
                raise RequestFailed(f"gemini: {e.args[0]}", {"stage": "batch"}) from e
        started = time.monotonic()
        try:
            return self._ask(request)
        finally:
            if request.video is not None:
                self.caches.done(request.video, time.monotonic() - started)

    def _uploaded_for(self, request: NaruRequest) -> Uploaded | None:
        """The question's upload (None for a blind question); RequestFailed if it failed."""
        if request.video is None:  # a blind question is asked as text alone
            return None
        try:
            return self.uploaded(request.video)
        except Exception as e:  # noqa: BLE001 - any upload problem fails this video's questions, not the run
            name = Path(request.video).name
            raise RequestFailed(f"gemini: upload of {name} failed: {e}", {"stage": "upload"}) from e

    def _video_part(self, config: request_.RequestConfig, uploaded: Uploaded) -> types.Part:
        """The video part as the questions (or their cache) carry it."""
        gemini3 = family(self.args.model) == "gemini-3"
        return request_.video_part(config, uploaded.uri, uploaded.mime_type, per_part_resolution=gemini3)

    def _estimated(self, request: NaruRequest) -> int | None:
        run = self._run
        return run.estimates.get((request.task, request.question_id)) if run is not None else None

    def _ask(self, request: NaruRequest) -> Answer:
        uploaded = self._uploaded_for(request)
        config = self.request_config()
        cache = None
        if uploaded is not None and request.video is not None and self.caches.active:
            cache = self.caches.name_for(request.video, lambda: self._video_part(config, uploaded))
        video = (uploaded.uri, uploaded.mime_type) if uploaded and cache is None else None
        contents = request_.contents(config, video, self.transcript_prompt(request))
        generation = request_.generation_config(config, cached_content=cache)

        def generate() -> types.GenerateContentResponse:
            return self.client.models.generate_content(model=self.args.model, contents=contents, config=generation)

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
        answer = self.answer_from(called.value, called.attempts, price=self.price, estimated=self._estimated(request))
        if cache is not None:
            answer = Answer(answer.text, {**(answer.usage or {}), "context_cache": cache})
        return answer

    # -- batch mode -------------------------------------------------------------------------------
    def _batch_request(self, request: NaruRequest) -> tuple[list[types.Content], types.GenerateContentConfig]:
        """(contents, config) of one question in a batch job; RequestFailed if its upload failed."""
        uploaded = self._uploaded_for(request)
        config = self.request_config()
        video = (uploaded.uri, uploaded.mime_type) if uploaded else None
        return request_.contents(config, video, self.transcript_prompt(request)), request_.generation_config(config)

    def transcript_prompt(self, request: NaruRequest) -> str:
        """The question, after the video's block transcript (``transcript=``): a text part after
        the (cached) video, the same bytes for every question of the video. Its tokens are
        estimated (``providers.gemini.tokens.text_tokens``, an over-estimate) and fitted into
        the model's input limit beside the video's estimated tokens."""
        if self.transcripts is None or request.video is None:
            return request.prompt
        from naru_eval.media.video import probe_video
        from naru_eval.providers.gemini.tokens import text_tokens

        duration = request.duration_s or probe_video(request.video, check_end=False).duration_s
        est = self.estimate(duration, "")
        budget = self.input_limit - est.video_tokens - est.audio_tokens - self.args.transcript_reserve_tokens
        view = self.render_transcript(request, None, text_tokens, lambda n: 0, budget)
        return f"{view.block}\n{request.prompt}" if view is not None and view.block else request.prompt

    def _batch_answer(self, request: NaruRequest, response: types.GenerateContentResponse, job: str) -> Answer:
        """The answer in one batch result, priced at the batch price; RequestFailed otherwise."""
        try:
            text, usage = request_.answer_text(response, 1, self.price, self._estimated(request), batch=True)
        except request_.NoAnswer as e:
            raise RequestFailed(f"{e} (batch job {job})", {**e.usage, "batch_job": job}) from e
        usage["batch_job"] = job
        return Answer(text, usage)

    @staticmethod
    def answer_from(
        response: types.GenerateContentResponse,
        attempts: int = 1,
        price: Mapping[str, float] | None = None,
        estimated: int | None = None,
    ) -> Answer:
        """The answer in a response (providers/gemini/request.py), or RequestFailed: blocked prompt,
        no candidate, a non-answer finish (SAFETY, RECITATION, ...), or no text."""
        try:
            text, usage = request_.answer_text(response, attempts, price, estimated)
        except request_.NoAnswer as e:
            raise RequestFailed(str(e), e.usage) from e
        return Answer(text, usage)

    # -- the usage summary (providers/gemini/usage.py) --------------------------------------------------
    def _last_done(self) -> None:
        if self.args.batch:
            self.batcher.mark_consumed()

    def _usage_path(self) -> Path:
        usage_dir = Path(self.args.usage_dir) if self.args.usage_dir else None
        store_dir = self.store.path.parent if self.store is not None else default_registry_path().parent
        return usage_path(usage_dir, settings().cache_dir, store_dir)

    def _usage_summary(self, run: RunState) -> UsageSummary:
        """The pass's :class:`UsageSummary` from this adapter's parts and the store's totals."""
        store_totals: dict[str, UsageTotals] = {}
        store_error = storage_error = None
        if self.store is not None and run.run_keys:
            try:
                store_totals = usage_from_store(self.store.path, run.run_keys)
            except Exception as e:  # noqa: BLE001 - the summary must not break a run
                store_error = str(e)
        storage = {}
        if self._jobs.built and run.run_keys:
            try:
                storage = cache_storage_by_run_key(self.jobs.caches(self.account), run.run_keys, self.price)
            except Exception as e:  # noqa: BLE001 - the summary must not break a run
                storage_error = str(e)
        return UsageSummary(
            model=self.args.model,
            adapter=self.model_id,
            config=self.describe(),
            run_keys=run.run_keys,
            store=str(self.store.path) if self.store is not None else None,
            started=datetime.fromtimestamp(run.started).isoformat(timespec="seconds"),
            finished=datetime.now().isoformat(timespec="seconds"),
            requests_sent=run.pending - run.remaining,
            answers_reused_from_store=self.reused,
            this_run=run.totals,
            store_totals_by_run_key=store_totals,
            store_totals_error=store_error,
            failures=run.failures,
            uploads=dict(self.upload_stats),
            upload_registry=str(self.registry.path) if self._registry.built else None,
            preflight=run.preflight,
            calibration=run.calibration,
            adaptive_concurrency=self.limiter.stats(),
            prices=PriceSource(as_of=self.prices.as_of, source=self.prices.source, model=self.price),
            context_caches=self.caches.stats,
            context_cache_storage_by_run_key=storage,
            context_cache_storage_error=storage_error,
            cost_usd_with_caches=cost_with_caches(run.totals, self.caches.stats),
            batch=self.batcher.stats if self.args.batch else None,
        )

    def write_usage_summary(self) -> Path | None:
        """Write the pass's summary now (it is written after the last question anyway)."""
        return self.usage_log.write()

    def refresh_usage_summary(self) -> None:
        """Rewrite the written summary with the store's totals as they are now."""
        self.usage_log.refresh()
