"""The persistent registry of Gemini Files API uploads, and the content-hash cache behind it.

A video uploaded to the Files API lives for 48 hours, and only for the project of the key that
uploaded it. The registry (SQLite, WAL, one commit per change) remembers, for each
(file content sha256, account), the remote file's name, URI and expiry, so a rerun, or another
configuration of the same model, reuses live uploads instead of sending the videos again:
1,481 questions cost 155 uploads, and a rerun within the retention window costs none.

* The content hash is SHA-256 of the bytes actually sent (after any local pre-processing),
  streamed in 1 MiB blocks and cached by (path, size, mtime_ns), so a 4 h video is hashed once.
* The account is :func:`account_id`: a truncated SHA-256 of the API key with the endpoint, so
  uploads made with another key (another project) or against another server are never offered.
  **The key itself is never stored**, nor logged.
* An entry is a claim, not a proof: the adapter checks ``files.get`` (state ACTIVE, expiry
  ahead) before it reuses one, and forgets the entry when the file is gone.

Default path: next to the response store (``gemini_uploads.sqlite``), else
``$NARU_CACHE_DIR/gemini_uploads.sqlite``; the adapter's ``upload_registry=`` model arg or
``$NARU_GEMINI_UPLOAD_REGISTRY`` overrides it.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from naru_eval.settings import settings
from naru_eval.store.db import open_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS hashes (
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (path, size, mtime_ns)
);
CREATE TABLE IF NOT EXISTS uploads (
    sha256 TEXT NOT NULL,
    account TEXT NOT NULL,
    name TEXT NOT NULL,
    uri TEXT NOT NULL,
    mime_type TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    state TEXT NOT NULL,
    expires REAL,
    uploaded REAL NOT NULL,
    source_path TEXT,
    PRIMARY KEY (sha256, account)
);
"""

HASH_BLOCK = 1 << 20


def account_id(api_key: str, endpoint: str) -> str:
    """A stable, non-reversible id of (key, endpoint): 16 hex digits of SHA-256. Never the key."""
    return hashlib.sha256(f"{api_key}\n{endpoint.rstrip('/')}".encode()).hexdigest()[:16]


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class UploadRecord:
    sha256: str
    account: str
    name: str  # files/<id>
    uri: str
    mime_type: str
    size_bytes: int
    state: str
    expires: float | None  # epoch seconds
    uploaded: float
    source_path: str | None = None

    def live(self, margin_s: float, now: float | None = None) -> bool:
        """Whether the file should still exist ``margin_s`` from now."""
        if self.expires is None:
            return True
        return self.expires > (time.time() if now is None else now) + margin_s


def default_registry_path(response_store: str | os.PathLike[str] | None = None) -> Path:
    """Next to the response store when one is named, else under ``$NARU_CACHE_DIR``."""
    explicit = settings().gemini_upload_registry
    if explicit:
        return Path(explicit)
    store = response_store or settings().response_store
    if store:
        return Path(store).parent / "gemini_uploads.sqlite"
    from naru_eval.store.responses import default_store_path

    return default_store_path().parent / "gemini_uploads.sqlite"


class UploadRegistry:
    """SQLite-backed, thread-safe; one commit per change."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = open_db(self.path, SCHEMA, "Gemini upload registry", "NARU_GEMINI_UPLOAD_REGISTRY")

    # -- content hashes ---------------------------------------------------------------------------
    def sha256(self, path: str | os.PathLike[str]) -> str:
        """The file's SHA-256, from the cache when (path, size, mtime) are unchanged."""
        p = Path(path).resolve()
        st = p.stat()
        key = (str(p), st.st_size, st.st_mtime_ns)
        with self._lock:
            row = self._conn.execute("SELECT sha256 FROM hashes WHERE path=? AND size=? AND mtime_ns=?", key).fetchone()
        if row:
            return row[0]
        digest = sha256_file(p)
        with self._lock:
            self._conn.execute("DELETE FROM hashes WHERE path=?", (str(p),))
            self._conn.execute("INSERT OR REPLACE INTO hashes VALUES (?, ?, ?, ?)", (*key, digest))
            self._conn.commit()
        return digest

    # -- uploads ------------------------------------------------------------------------------------
    def get(self, sha256: str, account: str) -> UploadRecord | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT sha256, account, name, uri, mime_type, size_bytes, state, expires, uploaded, source_path "
                "FROM uploads WHERE sha256=? AND account=?",
                (sha256, account),
            ).fetchone()
        return UploadRecord(*row) if row else None

    def put(self, record: UploadRecord) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO uploads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.sha256,
                    record.account,
                    record.name,
                    record.uri,
                    record.mime_type,
                    record.size_bytes,
                    record.state,
                    record.expires,
                    record.uploaded,
                    record.source_path,
                ),
            )
            self._conn.commit()

    def forget(self, sha256: str, account: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM uploads WHERE sha256=? AND account=?", (sha256, account))
            self._conn.commit()

    def all(self) -> list[UploadRecord]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT sha256, account, name, uri, mime_type, size_bytes, state, expires, uploaded, source_path "
                "FROM uploads ORDER BY uploaded"
            ).fetchall()
        return [UploadRecord(*r) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
