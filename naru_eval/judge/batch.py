"""The judge's verification calls as OpenAI Batch API jobs: half the price, resumable.

    judge = Judge(JudgeConfig.from_env(batch=True))
    judge.judge_many(pairs)            # naru-eval judge score RUN --batch

How it runs (:meth:`naru_eval.judge.pipeline.Judge.judge_many` in batch mode):

1. **Collect.** Every response is verified as usual, but with the client in batch mode
   (:class:`~naru_eval.judge.client.BatchMode`): a verification that is not in the cache is not
   sent; its key and its request body, exactly what ``chat.completions.parse`` sends (the same
   strict JSON schema), are collected.
2. **Submit, or resume.** The collected requests (at most :data:`MAX_REQUESTS` per job) become
   one JSONL file (``custom_id`` = the cache key, ``url`` = ``/v1/chat/completions``), uploaded
   with ``files.create(purpose="batch")``; ``batches.create(endpoint="/v1/chat/completions",
   completion_window="24h")`` submits it. The file id and then the batch id are written to the
   judge store (:class:`~naru_eval.store.judge_cache.JudgeBatchRecord`) under a hash of the model,
   the base URL and the set of request keys, each the moment it is known. A rerun after a kill
   computes the same set, finds the record and waits for that job: nothing is submitted twice.
3. **Poll** ``batches.retrieve`` with a bounded backoff (``batch_poll_base`` doubling up to
   ``batch_poll_max``) until the job ends (``completed``, ``failed``, ``expired``, ``cancelled``),
   or ``batch_wait`` seconds pass (:class:`BatchNotReady`; a rerun picks the job up).
4. **Fill the cache.** Each line of the output file with status 200 is stored exactly like a
   live reply (:meth:`~naru_eval.judge.client.JudgeClient.record_of`), marked ``batch`` (priced at
   the batch price); the cache then replays it through the normal parsing and schema
   validation, so an unusable output is retried with the corrective note (the next round of
   collection, at most ``parse_attempts`` rounds) and ends *unscored*, as live. A line that
   failed (a non-200 status, an ``error``, a line that is not JSON, a request the job never
   answered) is not cached, like a live transport failure: that response is *unscored* with
   the reason (never 0), and the next run submits it again.
5. **Judge** once more with nothing left to collect: every output replays from the cache.
   Re-scoring afterwards makes no call at all.

The decompositions (facts, once per question) stay live; only ``verify`` calls are batched.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, TypeVar

from naru_eval.api.retry import RetryError
from naru_eval.judge.client import JudgeClient, PendingRequest
from naru_eval.redaction import redact
from naru_eval.store.judge_cache import CallRecord, JudgeBatchRecord, JudgeStore

log = logging.getLogger("naru_eval.judge")

ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
#: the Batch API's limits per job: requests, and input file size (200 MB; kept below it)
MAX_REQUESTS = 50_000
MAX_BYTES = 190_000_000
#: the statuses after which a job changes no more
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})

if TYPE_CHECKING:
    from openai.types import Batch

T = TypeVar("T")


class BatchNotReady(RuntimeError):
    """A job did not end within ``batch_wait`` seconds; it is recorded, and a rerun resumes it."""

    def __init__(self, batch_id: str, status: str) -> None:
        super().__init__(
            f"judge Batch API job {batch_id} is still {status}; it is recorded in the judge store, "
            "rerun the same command to pick it up (nothing is submitted again)"
        )
        self.batch_id = batch_id
        self.status = status


def set_key(model: str, base_url: str, keys: list[str]) -> str:
    """The identity of a job: the model, the endpoint and the sorted set of request keys."""
    desc = {"model": model, "base_url": base_url, "endpoint": ENDPOINT, "keys": sorted(set(keys))}
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()


def jsonl(requests: Mapping[str, PendingRequest]) -> bytes:
    """The job's input file: one chat.completions request per line, ``custom_id`` its cache key."""
    lines = [
        json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body}, ensure_ascii=False)
        for key, (_, body) in sorted(requests.items())
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


class JudgeBatchRunner:
    """Submits (or resumes) the jobs of one client's collected requests and fills its cache."""

    def __init__(self, client: JudgeClient, store: JudgeStore, *, sleep: Callable[[float], None] | None = None):
        self.client = client
        self.store = store
        self.config = client.config
        self.sleep = sleep or client.sleep
        #: batch ids this runner submitted / resumed (for the report)
        self.submitted: list[str] = []
        self.resumed: list[str] = []

    # -- one round --------------------------------------------------------------------------
    def run(self, requests: Mapping[str, PendingRequest]) -> None:
        """Answer ``requests`` (key -> (purpose, body)) through jobs within the API's limits
        (MAX_REQUESTS lines, MAX_BYTES of input each)."""
        chunk: dict[str, PendingRequest] = {}
        size = 0
        for key in sorted(requests):
            line = len(jsonl({key: requests[key]}))
            if chunk and (len(chunk) >= MAX_REQUESTS or size + line > MAX_BYTES):
                self._run_job(chunk)
                chunk, size = {}, 0
            chunk[key] = requests[key]
            size += line
        if chunk:
            self._run_job(chunk)

    def _run_job(self, requests: Mapping[str, PendingRequest]) -> None:
        mode = self.client.batch
        assert mode is not None, "batch mode is not on"
        skey = set_key(self.config.model, self.config.base_url, list(requests))
        try:
            rec = self._submit_or_resume(skey, requests)
            assert rec.batch_id is not None
            batch = self._wait(rec.batch_id)
            self._collect(batch, requests)
        except RetryError as e:  # the Batch API itself failed for good: these responses are unscored
            reason = redact(f"Batch API request failed: {e}")
            log.warning("naru judge: %s (%d request(s) unscored)", reason, len(requests))
            with mode._lock:
                mode.failures.update(dict.fromkeys(requests, reason))
            return
        self.store.put_batch(rec.advanced(state="consumed"))

    def _submit_or_resume(self, skey: str, requests: Mapping[str, PendingRequest]) -> JudgeBatchRecord:
        rec = self.store.get_batch(skey)
        if rec is not None and rec.state == "submitted" and rec.batch_id:
            log.info("naru judge: resuming Batch API job %s (%d requests)", rec.batch_id, rec.n_requests)
            self.resumed.append(rec.batch_id)
            return rec
        if rec is None or rec.state == "consumed" or not rec.input_file_id:
            now = time.time()
            data = jsonl(requests)
            uploaded = self._api(
                lambda: self.client.client.files.create(
                    file=("naru_judge_batch.jsonl", data, "application/jsonl"), purpose="batch"
                ),
                "upload the batch input file",
            )
            rec = JudgeBatchRecord(
                skey, self.config.model, self.config.base_url, len(requests), uploaded.id, None, "uploaded", now, now
            )
            self.store.put_batch(rec)
        file_id = rec.input_file_id
        assert file_id is not None
        created = self._api(
            lambda: self.client.client.batches.create(
                input_file_id=file_id,
                endpoint=ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata={"naru_set_key": skey[:64], "purpose": "naru-eval judge"},
            ),
            "create the batch",
        )
        rec = rec.advanced(batch_id=created.id, state="submitted")
        self.store.put_batch(rec)
        self.submitted.append(created.id)
        log.info("naru judge: submitted Batch API job %s (%d requests)", created.id, len(requests))
        return rec

    def _wait(self, batch_id: str) -> Batch:
        """Poll until the job ends, waiting base, 2·base, ... up to max seconds between polls."""
        started = time.monotonic()
        n = 0
        while True:
            batch = self._api(lambda: self.client.client.batches.retrieve(batch_id), f"poll batch {batch_id}")
            if batch.status in TERMINAL:
                return batch
            delay = min(self.config.batch_poll_max, self.config.batch_poll_base * 2**n)
            n += 1
            if self.config.batch_wait is not None and time.monotonic() - started + delay > self.config.batch_wait:
                raise BatchNotReady(batch_id, batch.status)
            self.sleep(delay)

    def _collect(self, batch: Batch, requests: Mapping[str, PendingRequest]) -> None:
        """Cache every answered line; record why each other request has no answer."""
        mode = self.client.batch
        assert mode is not None
        answered: set[str] = set()
        failures: dict[str, str] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            text = self._download(file_id)
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                key, outcome = self._line(batch.id, file_id, n, line, requests)
                if key is None:
                    continue
                if isinstance(outcome, str):
                    failures[key] = outcome
                    continue
                purpose = requests[key][0]
                self.store.put_call(key, purpose, self.config.model, outcome)
                answered.add(key)
        errors = (batch.errors.data if batch.errors is not None else None) or []
        detail = redact("; ".join(str(e.message) for e in errors[:3]))
        missing = f"batch {batch.id} ended {batch.status} without an answer to this request" + (
            f" ({detail})" if detail else ""
        )
        with mode._lock:
            mode.fresh.update(answered)
            for key in requests:
                if key not in answered:
                    mode.failures[key] = failures.get(key, missing)
        if len(answered) < len(requests):
            log.warning(
                "naru judge: Batch API job %s (%s): %d of %d request(s) unanswered; they stay unscored",
                batch.id,
                batch.status,
                len(requests) - len(answered),
                len(requests),
            )

    def _line(
        self, batch_id: str, file_id: str, n: int, line: str, requests: Mapping[str, PendingRequest]
    ) -> tuple[str | None, CallRecord | str]:
        """(key, the cache record) of an answered line, (key, why) of a failed one, (None, why)
        of a line that names no request of the job."""
        where = f"batch {batch_id}, {file_id} line {n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            log.warning("naru judge: %s is not JSON; ignored", where)
            return None, "not JSON"
        key = rec.get("custom_id") if isinstance(rec, dict) else None
        if not isinstance(key, str) or key not in requests:
            log.warning("naru judge: %s names no request of the job (custom_id %r); ignored", where, key)
            return None, "unknown custom_id"
        response = rec.get("response") if isinstance(rec.get("response"), dict) else {}
        status = response.get("status_code")
        body = response.get("body")
        if rec.get("error") or status != 200 or not isinstance(body, dict):
            err = rec.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
            message = err.get("message") if isinstance(err, dict) else str(err)
            return key, redact(f"{where}: HTTP {status}: {message or 'no answer'}")  # a server may echo the key
        record = self.client.record_of(body)
        record["usage"] = {**record["usage"], "batch": True}
        return key, record

    def _download(self, file_id: str) -> str:
        """The text of a job's output or error file."""
        return self._api(lambda: self.client.client.files.content(file_id), f"download {file_id}").text

    def _api(self, fn: Callable[[], T], what: str) -> T:
        """One Batch API request through the client's retry policy (transport failures retried)."""
        return self.client.caller.call(fn, what).value
