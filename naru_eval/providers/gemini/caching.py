"""Explicit context caching: one ``cachedContents/…`` per video, paid for once, asked ~10 times.

NARU asks about 9.6 questions per video and the video is nearly all of every request. With
``context_cache=true`` (the default) the adapter puts each video's part (``fileData`` with its
``videoMetadata``: fps, content layers; for Gemini 3 the part's own ``mediaResolution``) in an
explicit cache just before the video's first question, sends each question as its text alone
with ``GenerateContentConfig(cached_content=name)``, and deletes the cache after the video's last
question (and at exit, best effort). The cached tokens are billed at the cached-input price
plus storage per hour (``cache_storage_per_hour``); a crash leaves at most the TTL of storage.

A video is not cached (its questions send the video, as without caching) when:

* its estimated media tokens are below the model's ``cache_min_tokens`` (the API refuses
  smaller caches with a 400);
* it has a single pending question: creating the cache costs its tokens once, so one question
  would pay more, never less;
* it is Gemini 2.x at a non-default media resolution: that model takes the resolution only in a
  request's ``generationConfig``, which ``cachedContents.create`` cannot carry, so the cache would
  hold the video at the default resolution (other tokens, other answers);
* the create call fails (logged; the questions fall back).

The TTL covers the video's questions: ``cache_ttl`` of :mod:`naru_eval.providers.gemini.pricing`
(questions in rounds of the concurrency, at twice the observed latency, plus a margin, bounded).
A question whose cache is gone after all (a 4xx naming it) is asked again without the cache.
Every cache is recorded in :class:`naru_eval.store.gemini_jobs.GeminiJobs` when created and when
deleted, so storage time survives a crash in the accounting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger
from pydantic import BaseModel, Field, field_serializer

from naru_eval.providers.gemini.client import Call
from naru_eval.providers.gemini.pricing import cache_storage_cost, cache_ttl, request_cost
from naru_eval.store.gemini_jobs import CacheRecord, GeminiJobs

if TYPE_CHECKING:
    from google import genai
    from google.genai import types


@dataclass(frozen=True)
class CachePolicy:
    """When and for how long videos are cached (from the adapter's typed args)."""

    enabled: bool = True
    min_tokens: int | None = None  # the model's minimum (prices.json cache_min_tokens)
    ttl_min_s: float = 300.0
    ttl_max_s: float = 6 * 3600.0
    latency_s: float = 60.0  # the first guess of a question's latency, before any is observed
    concurrency: int = 8
    #: why caching is off for this configuration as a whole (None: it is on where it pays)
    refused: str | None = None


@dataclass
class _VideoCache:
    pending: int
    run_key: str
    media_tokens: int
    audio_tokens: int
    name: str | None = None
    skipped: str | None = None
    created: float = 0.0
    expires: float = 0.0
    tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ContextCacheStats(BaseModel):
    """What the explicit caches of a run did and cost (the usage summary's ``context_caches``)."""

    created: int = 0
    deleted: int = 0
    delete_failed: int = 0
    create_failed: int = 0
    fallbacks: int = 0  # questions asked without their cache after all (cache gone)
    skipped: dict[str, int] = Field(default_factory=dict)  # reason -> videos
    tokens: int = 0
    storage_token_hours: float = 0.0
    storage_cost_usd: float | None = 0.0
    creation_cost_usd: float | None = 0.0

    @field_serializer("storage_token_hours", "storage_cost_usd", "creation_cost_usd")
    def _round(self, v: float | None) -> float | None:
        return None if v is None else round(v, 6)


class VideoCaches:
    """The run's caches, one per video, created on first use and deleted after the last question."""

    def __init__(
        self,
        policy: CachePolicy,
        *,
        model: str,
        client: Callable[[], genai.Client],
        account: Callable[[], str],
        jobs: Callable[[], GeminiJobs],
        call: Call,
        price: Mapping[str, float] | None,
        clock: Callable[[], float] = time.time,
        call_once: Call | None = None,
    ) -> None:
        self.policy = policy
        self.model = model
        self._client, self._account, self._jobs, self._call = client, account, jobs, call
        #: one attempt, no backoff: what the exit handler deletes with (it must not hold up the exit)
        self._call_once = call_once or call
        self.price = price
        self.clock = clock
        self._videos: dict[str, _VideoCache] = {}
        self._lock = threading.Lock()
        self._latencies: list[float] = []
        self.stats = ContextCacheStats()

    # -- the plan ------------------------------------------------------------------------------
    def plan(self, videos: Mapping[str, tuple[int, str, int, int]]) -> None:
        """``video -> (pending questions, run key, estimated media tokens, of which audio)``; a
        previous pass's caches still held (questions never asked) are deleted first."""
        self.close()
        with self._lock:
            self._videos = {}
            for video, (n, rk, media, audio) in videos.items():
                vc = _VideoCache(pending=n, run_key=rk, media_tokens=media, audio_tokens=audio)
                vc.skipped = self._skip_reason(vc)
                if vc.skipped:
                    self.stats.skipped[vc.skipped] = self.stats.skipped.get(vc.skipped, 0) + 1
                self._videos[video] = vc

    def _skip_reason(self, vc: _VideoCache) -> str | None:
        p = self.policy
        if not p.enabled:
            return "off"
        if p.refused:
            return p.refused
        if p.min_tokens is not None and vc.media_tokens < p.min_tokens:
            return "below the minimum cacheable size"
        if vc.pending < 2:
            return "a single question"
        return None

    def ttl(self, n_questions: int) -> float:
        latency = max(self._latencies) if self._latencies else self.policy.latency_s
        p = self.policy
        return cache_ttl(n_questions, latency, p.concurrency, p.ttl_min_s, p.ttl_max_s)

    # -- use -----------------------------------------------------------------------------------
    def name_for(self, video: str, part: Callable[[], types.Part]) -> str | None:
        """The cache of ``video`` (created now if this is its first question), or None: the
        question then sends the video itself. ``part()`` builds the video part to cache."""
        vc = self._videos.get(video)
        if vc is None or vc.skipped:
            return None
        with vc.lock:
            if vc.name is None and vc.skipped is None:
                self._create(video, vc, part())
            return vc.name

    def _create(self, video: str, vc: _VideoCache, video_part: types.Part) -> None:
        from google.genai import types

        ttl = int(self.ttl(vc.pending))
        config = types.CreateCachedContentConfig(
            contents=[types.Content(role="user", parts=[video_part])],
            ttl=f"{ttl}s",
            display_name=f"naru-{Path(video).stem[:40]}",
        )
        try:
            made = self._call(
                lambda: self._client().caches.create(model=self.model, config=config), f"cache {Path(video).name}"
            )
        except Exception as e:  # noqa: BLE001 - caching is an optimisation: the questions fall back
            logger.warning(f"naru_gemini: no context cache for {Path(video).name} ({e}); its questions send the video")
            vc.skipped = "create failed"
            with self._lock:
                self.stats.create_failed += 1
            return
        now = self.clock()
        usage = getattr(made, "usage_metadata", None)
        tokens = int(getattr(usage, "total_token_count", 0) or 0) or vc.media_tokens
        vc.name, vc.created, vc.expires, vc.tokens = str(made.name), now, now + ttl, tokens
        self._jobs().put_cache(
            CacheRecord(vc.name, self._account(), vc.run_key, video, self.model, tokens, now, now + ttl)
        )
        audio = round(vc.audio_tokens * tokens / vc.media_tokens) if vc.media_tokens else 0
        creation = request_cost(self.price, prompt_tokens=tokens, audio_tokens=audio)
        with self._lock:
            self.stats.created += 1
            self.stats.tokens += tokens
            self.stats.creation_cost_usd = _add(self.stats.creation_cost_usd, creation)
        logger.info(f"naru_gemini: cached {Path(video).name}: {vc.name}, {tokens:,} tokens, ttl {ttl}s")

    def gone(self, video: str) -> None:
        """The cache of ``video`` was refused (expired early, deleted elsewhere): stop using it,
        and delete it in case it is still there."""
        vc = self._videos.get(video)
        if vc is None:
            return
        with vc.lock:
            vc.skipped = "gone"
        with self._lock:
            self.stats.fallbacks += 1
        self._delete(video, vc)

    def done(self, video: str, latency_s: float | None = None) -> None:
        """One question of ``video`` is over (answered or failed): after the last, delete its cache."""
        vc = self._videos.get(video)
        if vc is None:
            return
        if latency_s is not None:
            with self._lock:
                self._latencies.append(latency_s)
        with vc.lock:
            vc.pending -= 1
            last = vc.pending <= 0
        if last:
            self._delete(video, vc)

    def close(self, at_exit: bool = False) -> None:
        """Delete every cache still held (``at_exit``: one attempt each, best effort)."""
        for video, vc in list(self._videos.items()):
            self._delete(video, vc, once=at_exit)

    def _delete(self, video: str, vc: _VideoCache, once: bool = False) -> None:
        with vc.lock:
            name, vc.name = vc.name, None
            if name is not None and vc.skipped is None:
                vc.skipped = "deleted"
        if name is None:
            return
        try:
            call = self._call_once if once else self._call
            call(lambda: self._client().caches.delete(name=name), f"delete cache {Path(video).name}")
        except Exception as e:  # noqa: BLE001 - it expires at its TTL anyway
            logger.warning(f"naru_gemini: could not delete the context cache {name} ({e}); it expires at its TTL")
            with self._lock:
                self.stats.delete_failed += 1
            self._account_storage(name, vc, vc.expires)
            return
        with self._lock:
            self.stats.deleted += 1
        self._account_storage(name, vc, self.clock())

    def _account_storage(self, name: str, vc: _VideoCache, end: float) -> None:
        end = min(end, vc.expires)
        self._jobs().cache_deleted(name, end)
        hours = max(0.0, end - vc.created) / 3600
        cost = cache_storage_cost(self.price, vc.tokens, hours)
        with self._lock:
            self.stats.storage_token_hours += vc.tokens * hours
            self.stats.storage_cost_usd = _add(self.stats.storage_cost_usd, cost)

    @property
    def active(self) -> bool:
        return self.policy.enabled and self.policy.refused is None


def _add(total: float | None, x: float | None) -> float | None:
    """A sum that turns unknown (None) once one term is."""
    return None if total is None or x is None else total + x
