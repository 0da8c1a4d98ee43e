"""Decode ahead: the frames of the next videos are decoded by CPU worker processes while the
model answers the current one.

A :class:`FramePrefetcher` gets the videos in the order the model will ask for them (the
request order after grouping by video) and a ``plan`` giving each video's sampling parameters
(those of :meth:`FrameCache.get`). On entering it registers every video but the first (which
the model needs at once, while the workers are still starting) with the one
:class:`~naru_eval.media.frame_cache.FrameCache` and submits them in that order to a pool of
worker processes, as long as the decoded frames held (done or in flight, not yet taken by the
model) stay within ``budget_bytes``; one is always in flight. Each time the model takes a video
(``FrameCache.get``) or a decode finishes, the next ones are submitted, so the next video is
already decoding when the model asks for the current one. The workers run the same
``sample_frames``, so the frames are exactly those decoded inline. A video the model asks for
before its turn was submitted is decoded inline instead (its prefetch is cancelled), and a
worker error is not reported here: ``get`` then decodes inline and raises the sampler's own
error for that video.
"""

from __future__ import annotations

import functools
import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from typing import Any, NamedTuple

from naru_eval.media.frame_cache import FrameCache, SamplingParams, cache_key
from naru_eval.media.sampler import SampledFrames, sample_frames


def _decode(path: str, params: SamplingParams, index_dir: str | None) -> tuple[SampledFrames, float]:
    """In a worker process: the sampler's frames and the seconds they took."""
    start = time.perf_counter()
    try:
        sampled = sample_frames(path, **params, index_dir=index_dir)
    except Exception as e:  # VideoError does not unpickle (two-argument init): send its text
        raise RuntimeError(f"{type(e).__name__}: {e}") from None
    return sampled, time.perf_counter() - start


class _Job(NamedTuple):
    video: str
    params: SamplingParams
    key: str
    future: Future[SampledFrames]  # what FrameCache.get waits on


class FramePrefetcher:
    """Decodes ``videos`` ahead, in order, in ``workers`` processes, within ``budget_bytes``."""

    def __init__(
        self,
        cache: FrameCache,
        videos: Sequence[str],
        plan: Callable[[str], SamplingParams],
        workers: int,
        budget_bytes: int,
    ) -> None:
        if workers < 1:
            raise ValueError("a prefetcher needs at least one worker (workers=0 decodes inline)")
        self.cache, self.plan, self.budget_bytes = cache, plan, int(budget_bytes)
        self.videos = list(dict.fromkeys(videos))  # each video once, first-use order kept
        self.workers = int(workers)
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.RLock()
        self._jobs: list[_Job] = []
        self._next = 0
        self._held: dict[str, int] = {}  # key -> bytes (the largest seen while in flight)
        self._largest = 0
        self._closed = False
        #: seconds the workers spent decoding, decodes submitted, most bytes held at once
        self.decode_s = 0.0
        self.submitted = 0
        self.peak_bytes = 0

    def __enter__(self) -> FramePrefetcher:
        # spawn: the parent holds torch and model threads that fork must not copy
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
        # the first video is decoded inline: the model needs it at once, while the workers start
        for video in self.videos[1:]:
            try:
                params = self.plan(video)
                key = cache_key(video, params)
            except Exception:  # e.g. an unreadable video: the model's own get() reports it
                continue
            if self.cache.has(key):
                continue
            job = _Job(video, params, key, Future())
            self._jobs.append(job)
            self.cache.expect(key, job.future, self._taken)
        self._pump()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _over_budget(self) -> bool:
        # until the first decode is done its size is unknown: one at a time
        return self._largest == 0 or sum(self._held.values()) + self._largest > self.budget_bytes

    def _pump(self) -> None:
        """Submit the next videos in order while the budget allows (one always in flight)."""
        with self._lock:
            while not self._closed and self._next < len(self._jobs) and not (self._held and self._over_budget()):
                job = self._jobs[self._next]
                self._next += 1
                if not job.future.set_running_or_notify_cancel():
                    continue  # the model asked for it first and decoded it inline
                self._held[job.key] = self._largest
                self.submitted += 1
                disk = str(self.cache.disk_dir) if self.cache.disk_dir else None
                assert self._pool is not None
                try:
                    inner = self._pool.submit(_decode, job.video, job.params, disk)
                except Exception as e:  # a broken pool: the rest decode inline
                    self._held.pop(job.key, None)
                    job.future.set_exception(e)
                    continue
                inner.add_done_callback(functools.partial(self._done, job))
            self.peak_bytes = max(self.peak_bytes, sum(self._held.values()))

    def _done(self, job: _Job, f: Future[tuple[SampledFrames, float]]) -> None:
        with self._lock:
            if not f.cancelled() and f.exception() is None:
                sampled, seconds = f.result()
                self.decode_s += seconds
                self.cache.stats.ahead_decode_s += seconds
                self._largest = max(self._largest, int(sampled.frames.nbytes))
                if job.key in self._held:
                    self._held[job.key] = int(sampled.frames.nbytes)
            self.peak_bytes = max(self.peak_bytes, sum(self._held.values()))
        if f.cancelled():
            job.future.set_exception(CancelledError())
        elif (e := f.exception()) is not None:
            job.future.set_exception(e)
        else:
            job.future.set_result(f.result()[0])
        self._pump()

    def _taken(self, key: str) -> None:
        with self._lock:
            self._held.pop(key, None)
        self._pump()

    def close(self) -> None:
        """Stop submitting, cancel what has not started, and unregister what was not taken."""
        with self._lock:
            self._closed = True
        for job in self._jobs:
            self.cache.forget(job.key)
            job.future.cancel()  # not yet submitted: nobody waits on it
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
