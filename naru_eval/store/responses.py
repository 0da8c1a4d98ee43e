"""The write-through response store: every answer is persisted the moment it arrives.

lmms-eval's ``--use_cache`` writes only after a whole ``generate_until`` returns (a crash loses
everything) and caches failure strings as answers. This store is SQLite in WAL mode, one row per
(run key, question id), committed per answer, so a rerun after a crash or ``kill -9`` at any
point skips what is done and loses nothing. Failed requests are stored as failures: reported,
never served as answers, and retried on the next run.

The run key hashes everything that changes an answer (model id, its arguments without
secrets, generation settings, sampling) but not the task; the question key adds the prompt and
the media (see ``NaruModel.request_key``), so one question asked by two tasks is one row.
Secrets never reach the store: secret-named arguments are dropped, and every failure's text is
redacted (:mod:`naru_eval.redaction`).
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from naru_eval.core.json_types import JSONMapping, JSONObject
from naru_eval.core.sharding import rank_from_env
from naru_eval.redaction import redact as redact_text
from naru_eval.redaction import redact_data
from naru_eval.store.db import DamagedRow, StoreWriteError, cache_dir, open_db, open_readonly, row_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    run_key TEXT NOT NULL,
    question_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    response TEXT,
    error TEXT,
    usage TEXT,
    attempts INTEGER NOT NULL DEFAULT 1,
    updated REAL NOT NULL,
    PRIMARY KEY (run_key, question_id)
);
CREATE TABLE IF NOT EXISTS runs (run_key TEXT PRIMARY KEY, description TEXT NOT NULL, created REAL NOT NULL);
"""

V = TypeVar("V")
#: what an answer used and was given (tokens, cost, frames, audio, transcript): an adapter's own
#: record (a TypedDict or JSON), JSON-encodable; the store writes it as it is
Usage = Mapping[str, object]

log = logging.getLogger("naru_eval.store")

#: how the store's errors name it, and the setting that moves it
WHAT, VARIABLE = "response store", "NARU_RESPONSE_STORE"

_SECRET_NAMES = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "authorization", "bearer"})
_SECRET_SUFFIXES = ("_key", "-key", "_token", "-token", "_secret", "_password", "apikey")


def is_secret(name: str) -> bool:
    """api_key, hf_token, client_secret, … are secrets; max_new_tokens or keyframe_interval are not."""
    low = name.lower()
    return low in _SECRET_NAMES or low.endswith(_SECRET_SUFFIXES)


def redact(mapping: Mapping[str, V]) -> dict[str, V]:
    """A copy without secret-looking entries (api_key, token, …)."""
    return {k: v for k, v in mapping.items() if not is_secret(k)}


def run_key(description: JSONMapping) -> str:
    """A stable hash of what determines the answers; secrets are dropped first."""
    clean = redact(description)
    return hashlib.sha256(json.dumps(clean, sort_keys=True, default=str).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class StoredResponse:
    status: str  # "ok" or "failed"
    response: str | None
    error: str | None
    usage: JSONObject | None
    attempts: int


@dataclass(frozen=True)
class UsageRow:
    """One stored answer's status and ``usage`` (tokens, cost), as :func:`usage_by_run` reads it."""

    status: str  # "ok" or "failed"
    usage: JSONObject | None
    question_id: str = field(default="", compare=False)  # which answer (a sum over several stores counts it once)


#: the columns of a responses row, in the order :func:`row_problems` checks them
ROW_COLUMNS = ("run_key", "question_id", "status", "response", "error", "usage", "attempts", "updated")


def row_problems(values: Sequence[object]) -> list[str]:
    """Why a responses row (the :data:`ROW_COLUMNS` in order) is not one this store writes: SQLite
    keeps any value in any column, so a row made by hand or by another program may hold text where
    a number belongs. Empty: the row is sound."""
    rk, qid, status, response, error, usage, attempts, updated = values
    out = []
    for name, v in (("run_key", rk), ("question_id", qid)):
        if not isinstance(v, str) or not v:
            out.append(f"{name} is {v!r}, not a non-empty text")
    if status not in ("ok", "failed"):
        out.append(f"status is {status!r}, not 'ok' or 'failed'")
    for name, v in (("response", response), ("error", error)):
        if v is not None and not isinstance(v, str):
            out.append(f"{name} is {v!r}, not a text or NULL")
    if status == "ok" and not isinstance(response, str):
        out.append("an ok row without a response")
    if usage is not None:
        try:
            parsed = json.loads(usage) if isinstance(usage, str) else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            out.append(f"usage is {_shown(usage)}, not a JSON object or NULL")
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
        out.append(f"attempts is {_shown(attempts)}, not a whole number")
    if isinstance(updated, bool) or not isinstance(updated, (int, float)) or not math.isfinite(updated):
        out.append(f"updated is {_shown(updated)}, not a time (seconds)")
    return out


def _shown(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def runs(path: str | os.PathLike[str]) -> dict[str, JSONObject]:
    """run key -> the description it hashes (secrets already dropped), read-only."""
    conn = open_readonly(Path(path), WHAT)
    try:
        rows = conn.execute("SELECT run_key, description FROM runs").fetchall()
    finally:
        conn.close()
    return {key: row_json(desc, Path(path), WHAT, f"run {key}") for key, desc in rows}


def usage_by_run(path: str | os.PathLike[str], run_keys: Iterable[str] | None = None) -> dict[str, list[UsageRow]]:
    """run key -> the status and usage of each of its stored answers (all run keys, or
    ``run_keys``), read-only: a run's tokens and cost survive crashes and reruns."""
    keys = None if run_keys is None else list(run_keys)
    if keys is not None and not keys:
        return {}
    sql = "SELECT run_key, status, usage, question_id FROM responses"
    params: tuple[str, ...] = ()
    if keys is not None:
        sql += f" WHERE run_key IN ({','.join('?' * len(keys))})"
        params = tuple(keys)
    conn = open_readonly(Path(path), WHAT)
    try:
        rows = conn.execute(sql + " ORDER BY run_key, question_id", params).fetchall()
    finally:
        conn.close()
    out: dict[str, list[UsageRow]] = {}
    for rk, status, usage, qid in rows:
        value = row_json(usage, Path(path), WHAT, f"question {qid.split(':')[0]} (run {rk})") if usage else None
        out.setdefault(rk, []).append(UsageRow(status, value, qid))
    return out


def keys_since(path: str | os.PathLike[str], since: float) -> set[str]:
    """The run keys registered, or holding an answer written, at or after ``since`` (Unix time),
    read-only: what one invocation of a run used (an experiment's manifest sums their usage)."""
    conn = open_readonly(Path(path), WHAT)
    try:
        made = conn.execute("SELECT run_key FROM runs WHERE created >= ?", (since,)).fetchall()
        answered = conn.execute("SELECT DISTINCT run_key FROM responses WHERE updated >= ?", (since,)).fetchall()
    finally:
        conn.close()
    return {k for (k,) in made} | {k for (k,) in answered}


def default_store_path() -> Path:
    return cache_dir() / "responses.sqlite"


#: the placeholder of a per-rank store path (``NARU_RESPONSE_STORE=/scratch/responses.{rank}.sqlite``):
#: each process of an ``accelerate launch`` keeps a file of its own (``naru-eval store merge`` joins them)
RANK_FIELD = "{rank}"


def store_path_for_rank(path: str | os.PathLike[str]) -> Path:
    """``path`` with :data:`RANK_FIELD` replaced by this process's rank (``RANK``, 0 without a launcher)."""
    return Path(str(path).replace(RANK_FIELD, str(rank_from_env())))


def rank_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files a store path names: itself; with :data:`RANK_FIELD` (in the file's name or in a
    folder's) every rank's existing file, by rank. A rank is digits, the same at each place, so a
    merged store beside them (``responses.all.sqlite``) is not one of them."""
    text = str(path)
    if RANK_FIELD not in text:
        return [Path(text)]
    parts = text.split(RANK_FIELD)
    rx = re.compile(
        re.escape(parts[0]) + r"(\d+)" + "".join(re.escape(p) + r"\1" for p in parts[1:-1]) + re.escape(parts[-1])
    )
    found = [(int(m[1]), Path(f)) for f in glob.glob("*".join(glob.escape(p) for p in parts)) if (m := rx.fullmatch(f))]
    return [p for _, p in sorted(found)]


class ResponseStore:
    """SQLite-backed, thread-safe, one commit per answer.

    A store that cannot be opened, read or written raises a
    :class:`~naru_eval.store.db.StoreError` naming it, what is wrong and what to do. After a
    failed write, :meth:`check_writable` raises too: an answer asked now could not be kept and
    would be paid again on the rerun, so the adapter asks nothing more (naru_eval/adapters/base.py)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = store_path_for_rank(path) if path else default_store_path()
        self._lock = threading.Lock()
        self._conn = open_db(self.path, SCHEMA, WHAT, VARIABLE)
        self.write_error: StoreWriteError | None = None
        self.stored = 0  # answers and failures written by this process

    def check_writable(self) -> None:
        """Raise StoreWriteError once a write has failed: no new question may be asked."""
        e = self.write_error
        if e is not None:
            raise StoreWriteError(
                e.path,
                e.kind,
                f"stopped asking new questions: {e} An answer received now could not be kept, and would be "
                f"asked (and paid for) again on the rerun. This process stored {self.stored} answer(s) before the "
                "failure; the rerun reuses every stored answer.",
            )

    def register_run(self, key: str, description: JSONMapping) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO runs VALUES (?, ?, ?)",
                (key, redact_text(json.dumps(redact(description), sort_keys=True, default=str)), time.time()),
            )
            self._conn.commit()

    def get(self, key: str, question_id: str) -> StoredResponse | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT status, response, error, usage, attempts FROM responses WHERE run_key=? AND question_id=?",
                (key, question_id),
            ).fetchone()
        if row is None:
            return None
        try:
            usage = row_json(row[3], self.path, WHAT, f"question {question_id.split(':')[0]} (run {key})")
        except DamagedRow as e:  # asked again; the new answer replaces the row
            log.warning("%s", e)
            return None
        return StoredResponse(row[0], row[1], row[2], usage or None, row[4])

    def answered(self, key: str) -> dict[str, str]:
        """question_id -> response, for the successful answers of a run."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT question_id, response FROM responses WHERE run_key=? AND status='ok'", (key,)
            ).fetchall()
        return dict(rows)

    def failures(self, key: str) -> dict[str, str]:
        """question_id -> error, for requests that failed and will be retried."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT question_id, error FROM responses WHERE run_key=? AND status='failed'", (key,)
            ).fetchall()
        return dict(rows)

    def _put(
        self, key: str, qid: str, status: str, response: str | None, error: str | None, usage: Usage | None
    ) -> None:
        try:
            self._write(key, qid, status, response, error, usage)
        except StoreWriteError as e:
            self.write_error = self.write_error or e
            raise StoreWriteError(
                e.path,
                e.kind,
                f"{e} The {'answer' if status == 'ok' else 'failure'} of {qid.split(':')[0]} was received but not "
                "stored, so no further question is asked in this run.",
            ) from None
        self.stored += 1

    def _write(
        self, key: str, qid: str, status: str, response: str | None, error: str | None, usage: Usage | None
    ) -> None:
        with self._lock:
            self._conn.execute(
                """INSERT INTO responses (run_key, question_id, status, response, error, usage, attempts, updated)
                   VALUES (?, ?, ?, ?, ?, ?, 1, ?)
                   ON CONFLICT (run_key, question_id) DO UPDATE SET
                     status=excluded.status, response=excluded.response, error=excluded.error,
                     usage=excluded.usage, attempts=responses.attempts + 1, updated=excluded.updated""",
                (key, qid, status, response, error, json.dumps(usage) if usage else None, time.time()),
            )
            self._conn.commit()

    def put_ok(self, key: str, question_id: str, response: str, usage: Usage | None = None) -> None:
        """An answer, with its usage (an adapter's record, JSON-encodable: written as it is)."""
        self._put(key, question_id, "ok", response, None, dict(usage) if usage else None)

    def put_failed(self, key: str, question_id: str, error: str, usage: Usage | None = None) -> None:
        """A failure, its text and usage redacted (naru_eval.redaction): an API's error may echo the key."""
        self._put(key, question_id, "failed", None, redact_text(error), redact_data(dict(usage)) if usage else None)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
