"""Adaptive (AIMD) concurrency for API calls, one limit per endpoint and model.

A server says "too many" with a 429. Every client of one endpoint and model in a process (the
Gemini adapter, ``naru_openai_compat``, the judge, the MCQ fallback) shares one
:class:`AdaptiveLimiter` through :func:`limiter_for`, so what one of them learns about the
server's rate limit holds for all of them. The caller (:mod:`naru_eval.api.caller`) takes a slot
per attempt and reports each attempt's outcome.
"""

from __future__ import annotations

import threading


class AdaptiveLimiter:
    """An AIMD limit on requests in flight: halve on a 429, +1 per ``limit`` successes.

    ``cap`` is the ceiling (the client's ``max_concurrency``). A burst of 429s from requests
    that all started before the last cut counts once: each slot remembers the epoch it was
    taken in, and only a 429 from the current epoch halves the limit again.
    """

    def __init__(self, cap: int, initial: int | None = None) -> None:
        self.cap = max(1, int(cap))
        self.limit = float(min(self.cap, max(1, int(initial or cap))))
        self.in_flight = 0
        self.max_in_flight = 0
        self.epoch = 0
        self.cuts = 0
        self.history: list[tuple[str, float]] = []
        self._cond = threading.Condition()

    def acquire(self) -> int:
        """Wait for a free slot; returns the epoch the slot was taken in (for :meth:`throttled`)."""
        with self._cond:
            while self.in_flight >= int(self.limit):
                self._cond.wait()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.epoch

    def release(self) -> None:
        with self._cond:
            self.in_flight -= 1
            self._cond.notify_all()

    def throttled(self, epoch: int) -> None:
        """A 429 on a slot taken in ``epoch``: halve the limit, once per epoch."""
        with self._cond:
            if epoch != self.epoch:
                return
            self.limit = max(1.0, float(int(self.limit) // 2 or 1))
            self.epoch += 1
            self.cuts += 1
            self.history.append(("429", self.limit))

    def succeeded(self) -> None:
        """One success: the limit grows by ``1/limit`` (one slot per window of successes)."""
        with self._cond:
            if self.limit < self.cap:
                before = int(self.limit)
                self.limit = min(float(self.cap), self.limit + 1.0 / max(1.0, self.limit))
                if int(self.limit) > before:
                    self.history.append(("grow", self.limit))
                    self._cond.notify_all()

    def resize(self, cap: int, initial: int | None = None) -> None:
        """A new client of the same endpoint and model: its cap is the ceiling from now on."""
        with self._cond:
            self.cap = max(1, int(cap))
            start = min(self.cap, max(1, int(initial or cap)))
            self.limit = min(self.limit, float(self.cap)) if self.cuts else float(start)
            self._cond.notify_all()

    def stats(self) -> dict[str, float | int]:
        with self._cond:
            return {"cap": self.cap, "final": self.limit, "cuts": self.cuts, "max_in_flight": self.max_in_flight}


_LIMITERS: dict[tuple[str, str], AdaptiveLimiter] = {}
_LOCK = threading.Lock()


def limiter_for(endpoint: str, model: str, cap: int, initial: int | None = None) -> AdaptiveLimiter:
    """The process's one limiter for ``endpoint`` + ``model``; made on first use.

    A later client with another ``cap`` resizes it (the newest configuration is the ceiling);
    a limit already cut by 429s stays cut.
    """
    key = (str(endpoint).rstrip("/"), str(model))
    with _LOCK:
        lim = _LIMITERS.get(key)
        if lim is None:
            lim = _LIMITERS[key] = AdaptiveLimiter(cap, initial)
            return lim
    lim.resize(cap, initial)
    return lim


def clear_limiters() -> None:
    """Forget every limiter (tests: each starts from a fresh server)."""
    with _LOCK:
        _LIMITERS.clear()
