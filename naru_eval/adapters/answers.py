"""The parts of :meth:`naru_eval.adapters.base.NaruModel.generate_until`: which requests are asked
(:class:`RequestPlan`), the one place answers and failures are written (:class:`AnswerLog`), and
the failures held back while the configuration-error breaker is undecided (:class:`HeldFailures`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from naru_eval.adapters.request import Answer, RequestFailed, Usage, failed
from naru_eval.api.retry import ConfigErrorBreaker
from naru_eval.core.json_types import JSONMapping
from naru_eval.store.responses import ResponseStore

Key = tuple[str, str]  # (run key, question key)


@dataclass
class RequestPlan:
    """Which requests of a ``generate_until`` call are asked: an ok answer already stored is
    reused, and identical requests (the same key, e.g. ``naru_mcq`` and ``naru_mcq_500`` asking
    the same question) are asked once and share the answer."""

    size: int
    pending: list[int] = field(default_factory=list)
    #: index -> the later indices asking the very same request
    shared: dict[int, list[int]] = field(default_factory=dict)
    #: index -> the stored answer reused
    reused_answers: dict[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, keys: Sequence[Key], stored: Callable[[Key], str | None]) -> RequestPlan:
        plan = cls(len(keys))
        first_of: dict[Key, int] = {}
        for i, key in enumerate(keys):
            if key in first_of:
                plan.shared[first_of[key]].append(i)
                continue
            first_of[key] = i
            plan.shared[i] = []
            hit = stored(key)
            if hit is not None:
                plan.reused_answers[i] = hit
            else:
                plan.pending.append(i)
        return plan

    @property
    def reused(self) -> int:
        return len(self.reused_answers)

    @property
    def n_shared(self) -> int:
        return sum(len(v) for v in self.shared.values())

    def fan_out(self, replies: Mapping[int, str]) -> list[str | None]:
        """Every request's reply: reused, asked, or its twin's."""
        out: list[str | None] = [None] * self.size
        for i, text in {**self.reused_answers, **replies}.items():
            out[i] = text
        for i, copies in self.shared.items():
            for j in copies:
                out[j] = out[i]
        return out


class AnswerLog:
    """The one place a ``generate_until`` call writes what it got: each answer (or failure) goes
    to the response store, one commit each, the moment it arrives, then into the replies."""

    def __init__(self, store: ResponseStore | None) -> None:
        self.store = store
        self.replies: dict[int, str] = {}
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return str(self.store.path) if self.store else ""

    def stored(self, key: Key) -> str | None:
        """A stored ok answer of ``key`` (a stored failure is asked again)."""
        hit = self.store.get(*key) if self.store else None
        return hit.response if hit is not None and hit.status == "ok" else None

    def register_runs(self, run_keys: set[str], describe: JSONMapping) -> None:
        if self.store:
            for rk in run_keys:
                self.store.register_run(rk, {**describe, "store_path": str(self.store.path)})

    def check_writable(self) -> None:
        """Raise once a store write has failed: an answer asked now could not be kept (paid twice)."""
        if self.store:
            self.store.check_writable()

    def answered(self, i: int, key: Key, ans: str | Answer) -> None:
        text, usage = (ans.text, ans.usage) if isinstance(ans, Answer) else (ans, None)
        self._write(i, key, "ok", text, usage, text)

    def failed(self, i: int, key: Key, e: RequestFailed) -> None:
        self._write(i, key, "failed", str(e), e.usage, failed(str(e)))

    def _write(
        self, i: int, key: Key, status: Literal["ok", "failed"], text: str, usage: Usage | None, reply: str
    ) -> None:
        if self.store:
            if status == "ok":
                self.store.put_ok(*key, text, usage)
            else:
                self.store.put_failed(*key, text, usage)
        with self._lock:
            self.replies[i] = reply


class HeldFailures:
    """Failures held back while the configuration-error breaker is undecided
    (naru_eval.api.retry.ConfigErrorBreaker): a run the breaker stops stores none of them; once
    it disarms they are recorded as ordinary failures."""

    def __init__(self, breaker: ConfigErrorBreaker, record: Callable[[int, RequestFailed], None]) -> None:
        self.breaker = breaker
        self.record = record
        self._held: list[tuple[int, RequestFailed]] = []
        self._lock = threading.Lock()

    def failed(self, i: int, e: RequestFailed) -> None:
        """A failed request: held while the breaker is undecided, else recorded; raises
        ConfigurationError when the breaker trips (or has tripped)."""
        if self.breaker.failed(e):
            with self._lock:
                if self.breaker.undecided:
                    self._held.append((i, e))
                    return
        self.record(i, e)
        self.flush()

    def flush(self) -> None:
        """Record the held failures once the breaker has disarmed."""
        with self._lock:
            if self.breaker.undecided or self.breaker.tripped:
                return
            todo, self._held[:] = list(self._held), []
        for i, e in todo:
            self.record(i, e)

    def release(self) -> None:
        """At the end: whatever is still held is an ordinary failure."""
        with self._lock:
            todo, self._held[:] = list(self._held), []
        for i, e in todo:
            self.record(i, e)
