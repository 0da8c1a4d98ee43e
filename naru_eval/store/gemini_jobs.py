"""Gemini's server-side state that outlives a process: context caches and batch jobs.

Both cost money while they exist or hold answers not yet stored, so both are recorded the
moment they are created (SQLite, WAL, one commit per change), in the upload registry's file
(``gemini_uploads.sqlite``: per account, next to the response store):

* ``context_caches``: one row per explicit cache (``cachedContents/…``) with its video, run key,
  token count, creation and expiry times, and when it was deleted. A crash leaves the row
  undeleted; the next run deletes such caches if they are still alive (best effort), and a
  cache nobody deletes expires at its TTL anyway.
* ``batch_jobs``: one row per batch job (``batches/…``), keyed by run key and account, with the
  question keys it carries, so a rerun after a kill picks the job up instead of submitting the
  questions again. ``consumed`` is set once the job's results are in the response store.

Only typed queries live here; nothing else writes SQL against these tables.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from naru_eval.store.db import open_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS context_caches (
    name TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    run_key TEXT NOT NULL,
    video TEXT NOT NULL,
    model TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    deleted REAL
);
CREATE TABLE IF NOT EXISTS batch_jobs (
    name TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    run_key TEXT NOT NULL,
    model TEXT NOT NULL,
    question_keys TEXT NOT NULL,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    consumed REAL
);
CREATE INDEX IF NOT EXISTS batch_jobs_run ON batch_jobs (run_key, account);
"""


@dataclass(frozen=True)
class CacheRecord:
    name: str  # cachedContents/<id>
    account: str
    run_key: str
    video: str
    model: str
    tokens: int
    created: float  # epoch seconds
    expires: float
    deleted: float | None = None

    def stored_hours(self, now: float | None = None) -> float:
        """Hours of storage billed: creation to deletion, else to expiry (or now, if sooner)."""
        end = self.deleted if self.deleted is not None else min(self.expires, time.time() if now is None else now)
        return max(0.0, end - self.created) / 3600


@dataclass(frozen=True)
class BatchRecord:
    name: str  # batches/<id>
    account: str
    run_key: str
    model: str
    question_keys: tuple[str, ...]
    state: str
    created: float
    updated: float
    consumed: float | None = None


class GeminiJobs:
    """The ``context_caches`` and ``batch_jobs`` tables; thread-safe, one commit per change."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = open_db(self.path, SCHEMA, "Gemini job registry", "NARU_GEMINI_UPLOAD_REGISTRY")

    # -- context caches ---------------------------------------------------------------------------
    def put_cache(self, record: CacheRecord) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO context_caches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.name,
                    record.account,
                    record.run_key,
                    record.video,
                    record.model,
                    record.tokens,
                    record.created,
                    record.expires,
                    record.deleted,
                ),
            )
            self._conn.commit()

    def cache_deleted(self, name: str, when: float | None = None) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE context_caches SET deleted=? WHERE name=? AND deleted IS NULL",
                (time.time() if when is None else when, name),
            )
            self._conn.commit()

    def caches(self, account: str | None = None, *, live_only: bool = False) -> list[CacheRecord]:
        """The recorded caches (of ``account``); ``live_only``: not deleted and not yet expired."""
        sql = "SELECT name, account, run_key, video, model, tokens, created, expires, deleted FROM context_caches"
        where: list[str] = []
        params: list[object] = []
        if account is not None:
            where.append("account=?")
            params.append(account)
        if live_only:
            where.append("deleted IS NULL AND expires > ?")
            params.append(time.time())
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY created", params).fetchall()
        return [CacheRecord(*r) for r in rows]

    # -- batch jobs -------------------------------------------------------------------------------
    def put_batch(self, record: BatchRecord) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO batch_jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.name,
                    record.account,
                    record.run_key,
                    record.model,
                    json.dumps(list(record.question_keys)),
                    record.state,
                    record.created,
                    record.updated,
                    record.consumed,
                ),
            )
            self._conn.commit()

    def batch_state(self, name: str, state: str, *, consumed: bool = False) -> None:
        now = time.time()
        with self._lock:
            self._conn.execute(
                "UPDATE batch_jobs SET state=?, updated=?, consumed=CASE WHEN ? THEN ? ELSE consumed END WHERE name=?",
                (state, now, int(consumed), now, name),
            )
            self._conn.commit()

    def open_batches(self, run_key: str, account: str) -> list[BatchRecord]:
        """The run key's jobs whose results are not yet in the response store, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT name, account, run_key, model, question_keys, state, created, updated, consumed "
                "FROM batch_jobs WHERE run_key=? AND account=? AND consumed IS NULL ORDER BY created",
                (run_key, account),
            ).fetchall()
        return [BatchRecord(r[0], r[1], r[2], r[3], tuple(json.loads(r[4])), r[5], r[6], r[7], r[8]) for r in rows]

    def batches(self) -> list[BatchRecord]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT name, account, run_key, model, question_keys, state, created, updated, consumed "
                "FROM batch_jobs ORDER BY created"
            ).fetchall()
        return [BatchRecord(r[0], r[1], r[2], r[3], tuple(json.loads(r[4])), r[5], r[6], r[7], r[8]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
