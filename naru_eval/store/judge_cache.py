"""The judge's persistent store (SQLite, WAL, thread-safe): cached calls and frozen facts.

``calls``: every judge output, keyed by a hash of everything that changes it (model, base URL,
sampling settings, messages, output schema, prompt version, attempt / sample index). A cached
output is replayed instead of asked again, so re-scoring a finished run makes no call.
Transport failures (HTTP errors, timeouts) are never cached; model outputs are, even the
unparseable ones, so a re-run replays the same attempts and reaches the same verdict.

``facts``: the atomic facts of each reference answer, keyed by (question id, reference hash,
judge model, prompt version). The first decomposition stored wins (``INSERT OR IGNORE`` then
read back), and every model is scored against it: one denominator per question.

``batches``: the OpenAI Batch API jobs of the judge (docs/judge.md), keyed by a hash of the
set of requests they carry, so that a rerun after a kill finds the job it submitted and waits
for it instead of submitting (and paying for) the same requests again. ``uploaded``: the input
file is uploaded, no job yet; ``submitted``: the job exists; ``consumed``: its results are in
``calls`` (a later run with the same set of requests submits anew: they failed last time).
A call answered by a batch carries ``"batch": true`` in its usage (it is priced at the batch
price).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TypedDict

from naru_eval.settings import settings
from naru_eval.store.db import DamagedRow, cache_dir, open_db, row_json

#: how the cache's errors name it
WHAT = "judge cache"
log = logging.getLogger("naru_eval.store")


def default_cache_path() -> Path:
    """``$NARU_JUDGE_CACHE``, else ``judge.sqlite`` in the stores' directory."""
    explicit = settings().judge_cache
    return Path(explicit) if explicit else cache_dir() / "judge.sqlite"


SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    purpose TEXT NOT NULL,
    model TEXT NOT NULL,
    content TEXT,
    refusal TEXT,
    finish_reason TEXT,
    usage TEXT,
    system_fingerprint TEXT,
    response_model TEXT,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS facts (
    question_id TEXT NOT NULL,
    ref_hash TEXT NOT NULL,
    judge_model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    facts TEXT NOT NULL,
    question TEXT,
    reference TEXT,
    category TEXT,
    call_key TEXT,
    created REAL NOT NULL,
    PRIMARY KEY (question_id, ref_hash, judge_model, prompt_version)
);
CREATE TABLE IF NOT EXISTS batches (
    set_key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    base_url TEXT NOT NULL,
    n_requests INTEGER NOT NULL,
    input_file_id TEXT,
    batch_id TEXT,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
"""

BatchState = Literal["uploaded", "submitted", "consumed"]


@dataclass(frozen=True)
class JudgeBatchRecord:
    """One Batch API job of the judge, as the store keeps it."""

    set_key: str  # hash of the model, base URL and the sorted request keys it carries
    model: str
    base_url: str
    n_requests: int
    input_file_id: str | None
    batch_id: str | None
    state: BatchState
    created: float
    updated: float

    def advanced(self, state: BatchState, batch_id: str | None = None) -> JudgeBatchRecord:
        """The record in ``state`` (with the job's ``batch_id`` once created) and a fresh ``updated`` time."""
        return replace(self, updated=time.time(), state=state, batch_id=batch_id or self.batch_id)


#: a judge call's tokens as the cache keeps them (JSON: ``naru_eval.api.openai_client.TokenUsage``,
#: the openai ``usage`` flattened by ``usage_of``; ``batch``: answered by a Batch API job)
StoredUsage = Mapping[str, object]


class CallRecord(TypedDict):
    """What is kept of one judge output (a row of ``calls``, without its key)."""

    content: str | None
    refusal: str | None
    finish_reason: str | None
    usage: StoredUsage
    system_fingerprint: str | None
    response_model: str | None


class StoredCall(CallRecord):
    """A cached call as :meth:`JudgeStore.get_call` reads it back: the record, its purpose and model."""

    purpose: str
    model: str


class StoredFacts(TypedDict):
    """One row of ``facts`` as :meth:`JudgeStore.iter_facts` reads it."""

    question_id: str
    ref_hash: str
    judge_model: str
    prompt_version: str
    facts: list[str]
    question: str | None
    reference: str | None
    category: str | None
    created: float


class JudgeStore:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self._lock = threading.Lock()
        self._conn = open_db(self.path, SCHEMA, WHAT, "NARU_JUDGE_CACHE")

    # -- calls ----------------------------------------------------------------------------------
    def get_call(self, key: str) -> StoredCall | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT content, refusal, finish_reason, usage, system_fingerprint, response_model, purpose, model "
                "FROM calls WHERE key=?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        try:
            usage: StoredUsage = row_json(row[3], self.path, WHAT, f"judge call {key[:16]}") or {}
        except DamagedRow as e:  # asked again; the new output replaces the row
            log.warning("%s", e)
            return None
        return {
            "content": row[0],
            "refusal": row[1],
            "finish_reason": row[2],
            "usage": usage,
            "system_fingerprint": row[4],
            "response_model": row[5],
            "purpose": row[6],
            "model": row[7],
        }

    def put_call(self, key: str, purpose: str, model: str, record: CallRecord) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    purpose,
                    model,
                    record.get("content"),
                    record.get("refusal"),
                    record.get("finish_reason"),
                    json.dumps(record.get("usage") or {}),
                    record.get("system_fingerprint"),
                    record.get("response_model"),
                    time.time(),
                ),
            )
            self._conn.commit()

    def count_calls(self, purpose: str | None = None) -> int:
        with self._lock:
            if purpose is None:
                return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            return self._conn.execute("SELECT COUNT(*) FROM calls WHERE purpose=?", (purpose,)).fetchone()[0]

    # -- batches --------------------------------------------------------------------------------
    def get_batch(self, set_key: str) -> JudgeBatchRecord | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT set_key, model, base_url, n_requests, input_file_id, batch_id, state, created, updated "
                "FROM batches WHERE set_key=?",
                (set_key,),
            ).fetchone()
        return JudgeBatchRecord(*row) if row else None

    def put_batch(self, record: JudgeBatchRecord) -> None:
        """Insert or replace ``record`` (committed at once: it must survive a kill)."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.set_key,
                    record.model,
                    record.base_url,
                    record.n_requests,
                    record.input_file_id,
                    record.batch_id,
                    record.state,
                    record.created,
                    record.updated,
                ),
            )
            self._conn.commit()

    def batches(self) -> list[JudgeBatchRecord]:
        """Every batch job recorded, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT set_key, model, base_url, n_requests, input_file_id, batch_id, state, created, updated "
                "FROM batches ORDER BY created"
            ).fetchall()
        return [JudgeBatchRecord(*r) for r in rows]

    # -- facts ----------------------------------------------------------------------------------
    def get_facts(self, question_id: str, ref_hash: str, judge_model: str, prompt_version: str) -> list[str] | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT facts FROM facts WHERE question_id=? AND ref_hash=? AND judge_model=? AND prompt_version=?",
                (question_id, ref_hash, judge_model, prompt_version),
            ).fetchone()
        if row is None:
            return None
        try:
            return row_json(row[0], self.path, WHAT, f"the facts of {question_id} ({judge_model})")
        except DamagedRow as e:  # decomposed again; the new facts replace the row
            log.warning("%s", e)
            return None

    def freeze_facts(
        self,
        question_id: str,
        ref_hash: str,
        judge_model: str,
        prompt_version: str,
        facts: list[str],
        *,
        question: str | None = None,
        reference: str | None = None,
        category: str | None = None,
        call_key: str | None = None,
    ) -> list[str]:
        """Store ``facts`` unless facts are already frozen for this key; return the frozen ones."""
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO facts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    question_id,
                    ref_hash,
                    judge_model,
                    prompt_version,
                    json.dumps(facts, ensure_ascii=False),
                    question,
                    reference,
                    category,
                    call_key,
                    time.time(),
                ),
            )
            self._conn.commit()
            row = self._conn.execute(
                "SELECT facts FROM facts WHERE question_id=? AND ref_hash=? AND judge_model=? AND prompt_version=?",
                (question_id, ref_hash, judge_model, prompt_version),
            ).fetchone()
            try:
                return row_json(row[0], self.path, WHAT, f"the facts of {question_id} ({judge_model})")
            except DamagedRow:  # the frozen row is damaged: these facts replace it
                self._conn.execute(
                    "UPDATE facts SET facts=? WHERE question_id=? AND ref_hash=? AND judge_model=? AND prompt_version=?",
                    (json.dumps(facts, ensure_ascii=False), question_id, ref_hash, judge_model, prompt_version),
                )
                self._conn.commit()
                return list(facts)

    def iter_facts(self, judge_model: str | None = None, prompt_version: str | None = None) -> Iterator[StoredFacts]:
        sql = "SELECT question_id, ref_hash, judge_model, prompt_version, facts, question, reference, category, created FROM facts"
        where, args = [], []
        if judge_model is not None:
            where.append("judge_model=?")
            args.append(judge_model)
        if prompt_version is not None:
            where.append("prompt_version=?")
            args.append(prompt_version)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY question_id"
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        for r in rows:
            yield {
                "question_id": r[0],
                "ref_hash": r[1],
                "judge_model": r[2],
                "prompt_version": r[3],
                "facts": row_json(r[4], self.path, WHAT, f"the facts of {r[0]} ({r[2]})"),
                "question": r[5],
                "reference": r[6],
                "category": r[7],
                "created": r[8],
            }

    def close(self) -> None:
        with self._lock:
            self._conn.close()
