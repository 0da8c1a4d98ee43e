"""The one SQLite opener of the stores (responses, judge cache, upload registry) and their directory."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from naru_eval.settings import settings


def cache_dir() -> Path:
    """Where the stores live by default: ``$NARU_CACHE_DIR``, else ``~/.cache/naru-eval``."""
    return Path(settings().cache_dir or os.path.join(os.path.expanduser("~"), ".cache", "naru-eval"))


def open_db(path: Path, schema: str) -> sqlite3.Connection:
    """A SQLite connection shared by threads (callers hold a lock), in WAL mode so readers in
    other processes never block a writer and a committed row survives ``kill -9``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=60)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(schema)
    conn.commit()
    return conn


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to an existing store (reports, summaries): never creates or locks it."""
    return sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True, timeout=10)
