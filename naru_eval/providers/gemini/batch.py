"""Batch mode: the pending questions go as one Gemini batch job, at the batch price, resumably.

With ``batch=true`` the adapter's ``prepare`` hands every pending question to
:meth:`GeminiBatchRunner.run`, which

1. looks up the run key's open jobs in :class:`naru_eval.store.gemini_jobs.GeminiJobs`: a job a
   killed run submitted is picked up, never submitted again;
2. submits the questions no open job carries as one job of inlined requests
   (``client.batches.create(model, src=[InlinedRequest(contents, config, metadata={"key": …})])``,
   ``POST /v1beta/models/{model}:batchGenerateContent``), recording its name at once;
3. polls ``batches.get`` with backoff (``poll_interval`` × 1.5 up to ``poll_max``) until the job
   ends or ``timeout`` passes;
4. reads ``dest.inlined_responses``: each result goes through the adapter's ``answer`` (the same
   reading of a ``GenerateContentResponse`` as a direct question, priced at the batch price) or
   becomes a failure: a per-request ``error``, a non-answer, a missing result, or a job that ended
   FAILED, CANCELLED or EXPIRED. A job still running at the timeout fails its questions for this
   run only: the job stays open, and the next run resumes it.

The adapter then answers each question from :meth:`result`, so the answers reach the response
store through the one generate loop, failures as failures. A job is marked consumed once none of
its questions is pending any more (its results are stored).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from loguru import logger
from pydantic import BaseModel, Field

from naru_eval.providers.gemini.client import Call
from naru_eval.providers.gemini.request import enum_value
from naru_eval.redaction import redact
from naru_eval.store.gemini_jobs import GeminiBatchRecord, GeminiJobs

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

#: job states after which a job changes no more (the SDK maps ``BATCH_STATE_*`` to these)
TERMINAL = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"})
SUCCEEDED = "JOB_STATE_SUCCEEDED"

Key = tuple[str, str]  # (run key, question key)
R = TypeVar("R")
A = TypeVar("A")


@dataclass(frozen=True)
class BatchPolicy:
    """How batch jobs are polled (from the adapter's typed args)."""

    poll_interval: float = 30.0
    poll_max: float = 600.0
    timeout: float = 86400.0


class BatchStats(BaseModel):
    """The run's batch jobs (the usage summary's ``batch``): submitted, resumed, polls, states."""

    submitted: list[str] = Field(default_factory=list)
    resumed: list[str] = Field(default_factory=list)
    polls: int = 0
    states: dict[str, str] = Field(default_factory=dict)


class GeminiBatchRunner(Generic[R, A]):
    """Submits or resumes the run's batch jobs and holds their results until the loop asks;
    ``R`` is the caller's request type (the adapter's ``NaruRequest``), ``A`` its answer's."""

    def __init__(
        self,
        policy: BatchPolicy,
        *,
        model: str,
        client: Callable[[], genai.Client],
        account: Callable[[], str],
        jobs: Callable[[], GeminiJobs],
        call: Call,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.policy = policy
        self.model = model
        self._client, self._account, self._jobs, self._call = client, account, jobs, call
        self.clock, self.sleep = clock, sleep
        self._results: dict[Key, A | BaseException] = {}
        self._finished: list[GeminiBatchRecord] = []
        self.stats = BatchStats()

    def run(
        self,
        keyed: Sequence[tuple[Key, R]],
        *,
        build: Callable[[R], tuple[list[types.Content], types.GenerateContentConfig]],
        answer: Callable[[R, types.GenerateContentResponse, str], A],
        fail: Callable[[str, Mapping[str, object]], Exception],
    ) -> None:
        """Answer every ``(key, request)``: ``build(request)`` gives its (contents, config),
        ``answer(request, response, job)`` reads a result (or raises), ``fail(reason, usage)``
        makes the failure a question ends with (its reason redacted: the API's messages may echo the key)."""
        from google.genai import types

        make_failure = fail

        def redacted_failure(reason: str, usage: Mapping[str, object]) -> Exception:
            return make_failure(redact(reason), usage)

        fail = redacted_failure

        self._results, self._finished = {}, []
        by_run: dict[str, dict[str, R]] = {}
        for (rk, qk), request in keyed:
            by_run.setdefault(rk, {})[qk] = request
        waiting: list[tuple[GeminiBatchRecord, dict[str, R], str]] = []
        for rk, requests in by_run.items():
            covered: set[str] = set()
            for rec in self._jobs().open_batches(rk, self._account()):
                if not any(q in requests for q in rec.question_keys):
                    self._jobs().batch_state(rec.name, rec.state, consumed=True)  # its results are stored
                    continue
                logger.info(f"naru_gemini: resuming batch job {rec.name} ({len(rec.question_keys)} question(s))")
                self.stats.resumed.append(rec.name)
                covered.update(rec.question_keys)
                waiting.append((rec, requests, rk))
            inlined, keys = [], []
            for qk, request in requests.items():
                if qk in covered:
                    continue
                try:
                    contents, config = build(request)
                except Exception as e:  # noqa: BLE001 - e.g. its upload failed: that question fails
                    self._results[rk, qk] = e
                    continue
                inlined.append(types.InlinedRequest(contents=contents, config=config, metadata={"key": qk}))
                keys.append(qk)
            if not inlined:
                continue
            cfg = types.CreateBatchJobConfig(display_name=f"naru-{rk[:16]}")
            try:
                job = self._submit(inlined, cfg)
            except Exception as e:  # noqa: BLE001 - the questions fail (and are asked next run), not the run
                for qk in keys:
                    self._results[rk, qk] = fail(f"gemini: batch job not submitted: {e}", {"stage": "batch"})
                continue
            now = time.time()
            rec = GeminiBatchRecord(str(job.name), self._account(), rk, self.model, tuple(keys), _state(job), now, now)
            self._jobs().put_batch(rec)  # recorded before any wait: a kill from here on resumes it
            self.stats.submitted.append(rec.name)
            logger.info(f"naru_gemini: submitted batch job {rec.name} with {len(keys)} question(s)")
            waiting.append((rec, requests, rk))
        for rec, requests, rk in waiting:
            self._collect(rec, requests, rk, answer, fail)

    def _submit(self, inlined: list[types.InlinedRequest], cfg: types.CreateBatchJobConfig) -> types.BatchJob:
        return self._call(
            lambda: self._client().batches.create(model=self.model, src=inlined, config=cfg), "batch create"
        )

    def _wait(self, rec: GeminiBatchRecord) -> tuple[types.BatchJob, str]:
        p = self.policy
        start, delay = self.clock(), p.poll_interval
        while True:
            job = self._call(lambda: self._client().batches.get(name=rec.name), f"batch get {rec.name}")
            self.stats.polls += 1
            state = _state(job)
            self.stats.states[rec.name] = state
            self._jobs().batch_state(rec.name, state)
            left = p.timeout - (self.clock() - start)
            if state in TERMINAL or left <= 0:
                return job, state
            self.sleep(min(delay, left))
            delay = min(p.poll_max, max(delay, 1.0) * 1.5)

    def _collect(
        self,
        rec: GeminiBatchRecord,
        requests: Mapping[str, R],
        rk: str,
        answer: Callable[[R, types.GenerateContentResponse, str], A],
        fail: Callable[[str, Mapping[str, object]], Exception],
    ) -> None:
        mine = [q for q in rec.question_keys if q in requests]
        usage = {"batch_job": rec.name, "stage": "batch"}
        try:
            job, state = self._wait(rec)
        except Exception as e:  # noqa: BLE001 - e.g. the job is gone (404): its questions fail
            for q in mine:
                self._results[rk, q] = fail(f"gemini: batch job {rec.name}: {e}", usage)
            self._finished.append(rec)
            return
        if state not in TERMINAL:
            for q in mine:
                self._results[rk, q] = fail(
                    f"gemini: batch job {rec.name} still {state} after {self.policy.timeout:g}s; a rerun resumes it",
                    usage,
                )
            return  # left open: the next run picks it up
        self._finished.append(rec)
        if state != SUCCEEDED:
            error = getattr(job, "error", None)
            why = f": {getattr(error, 'message', error)}" if error else ""
            for q in mine:
                self._results[rk, q] = fail(f"gemini: batch job {rec.name} ended {state}{why}", usage)
            return
        dest = getattr(job, "dest", None)
        items = list(getattr(dest, "inlined_responses", None) or [])
        by_key: dict[str, types.InlinedResponse] = {}  # per question key
        for i, item in enumerate(items):
            key = (getattr(item, "metadata", None) or {}).get("key")
            if key is None and i < len(rec.question_keys):
                key = rec.question_keys[i]  # results come in request order
            by_key[str(key)] = item
        for q in mine:
            item = by_key.get(q)
            if item is None:
                self._results[rk, q] = fail(f"gemini: batch job {rec.name} returned no result for {q}", usage)
                continue
            error, response = item.error, item.response
            if error is not None or response is None:
                code = getattr(error, "code", None) if error is not None else None
                msg = getattr(error, "message", None) if error is not None else "no response"
                self._results[rk, q] = fail(
                    f"gemini: batch job {rec.name}: request failed ({code}: {msg})", {**usage, "status": code}
                )
                continue
            try:
                self._results[rk, q] = answer(requests[q], response, rec.name)
            except Exception as e:  # noqa: BLE001 - the adapter's RequestFailed: kept as that question's failure
                self._results[rk, q] = e

    def result(self, key: Key) -> A:
        """The answer of one question, or raise its failure."""
        out = self._results.get(key)
        if out is None:
            raise KeyError(f"no batch result for question {key[1]}")
        if isinstance(out, BaseException):
            raise out
        return out

    def mark_consumed(self) -> None:
        """The finished jobs' results are in the response store: never resume them again."""
        for rec in self._finished:
            self._jobs().batch_state(rec.name, self.stats.states.get(rec.name, rec.state), consumed=True)
        self._finished = []


def _state(job: types.BatchJob) -> str:
    return enum_value(getattr(job, "state", None)) or "JOB_STATE_UNSPECIFIED"
