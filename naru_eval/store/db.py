"""The one SQLite opener of the stores (responses, judge cache, upload registry) and their directory.

A store that cannot be used raises :class:`StoreError`, whose message names the file, what is
wrong with it (corrupt, a directory, read-only, disk full, locked) and what to do, instead of
SQLite's bare "database disk image is malformed" or "unable to open database file". Every
statement of a store runs on a :class:`GuardedConnection`, so a store met corrupt or full in the
middle of a run says so too; a failed write raises :class:`StoreWriteError`. Nothing here ever
deletes, truncates or rewrites a store: a corrupt one is moved aside only by
``naru-eval store move-aside PATH`` (:func:`move_aside`).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from naru_eval.settings import settings

#: the SQLite files of a store in WAL mode, besides the main file
SIDE_FILES = ("-wal", "-shm")


def cache_dir() -> Path:
    """Where the stores live by default: ``$NARU_CACHE_DIR``, else ``~/.cache/naru-eval``."""
    return Path(settings().cache_dir or os.path.join(os.path.expanduser("~"), ".cache", "naru-eval"))


class StoreError(sqlite3.DatabaseError):
    """A store that cannot be opened, read or written. ``kind``: corrupt, not-a-file, read-only,
    full, locked, missing or io. A ``sqlite3.DatabaseError``, so existing handlers still catch it."""

    def __init__(self, path: Path, kind: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.kind = kind


class StoreWriteError(StoreError):
    """A write to a store failed: what the caller was about to keep is not kept. The response
    store stops the run on it (nothing more is asked: each answer would be lost and paid again)."""


class DamagedRow(StoreError):
    """One row of a sound store (SQLite's integrity check passes) whose JSON is damaged (cut
    short, say): the message names the store, the row and what happens to it."""

    def __init__(self, path: Path, what: str, row: str, error: Exception) -> None:
        super().__init__(
            path,
            "damaged-row",
            f"the {what} {path}: the row of {row} is damaged ({error}); it is not used. A lookup asks again and "
            "the new answer replaces the row; every other row is kept.",
        )
        self.row = row


def row_json(text: str | bytes | None, path: Path, what: str, row: str) -> Any:
    """A stored JSON value (None for NULL); :class:`DamagedRow` when it does not parse."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError) as e:  # json.JSONDecodeError, a UnicodeDecodeError of a blob
        raise DamagedRow(path, what, row, e) from None


def _writable(path: Path) -> bool:
    target = path if path.exists() else path.parent
    return os.access(target, os.W_OK) and (not path.exists() or os.access(path.parent, os.W_OK))


def _free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(path.parent if path.parent.exists() else path).free
    except OSError:
        return None


def classify(
    path: Path, error: BaseException, doing: str, what: str = "store", variable: str | None = None
) -> tuple[str, str]:
    """(kind, message) of a failure of ``what`` at ``path`` while ``doing``: what is wrong, what to do."""
    text = str(error)
    low = text.lower()
    elsewhere = f", or point {variable} at another file" if variable else ""
    free = _free_bytes(path)
    if path.is_dir():
        return "not-a-file", (
            f"the {what} {path} is a directory, not a SQLite file ({doing}: {text}). Remove or rename that "
            f"directory{elsewhere}."
        )
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return "corrupt", (
            f"the {what} {path} is corrupt ({doing}: {text}); it was left untouched. Try "
            f"`sqlite3 {path} .recover > recovered.sql` to save what it holds, then move it aside with "
            f"`naru-eval store move-aside {path}` (a new, empty store is made on the next run; what the old one "
            f"held is asked again){elsewhere}."
        )
    if "full" in low or (free is not None and free < 1 << 20 and ("i/o" in low or "disk" in low)):
        return "full", (
            f"the disk holding the {what} {path} is full ({doing}: {text}; "
            f"{'unknown' if free is None else free} bytes free). Free some space and rerun: everything the "
            f"store already holds is kept and not asked again{elsewhere}."
        )
    if "readonly" in low or "read-only" in low or not _writable(path):
        return "read-only", (
            f"the {what} {path} cannot be written: the file, its folder or its file system is read-only "
            f"({doing}: {text}). Make the file and its folder writable (SQLite also writes {path.name}-wal and "
            f"{path.name}-shm beside it){elsewhere}."
        )
    if "locked" in low or "busy" in low:
        return "locked", (
            f"the {what} {path} is locked by another process ({doing}: {text}). Wait for it to finish; on a "
            f"network file system give each job its own store{elsewhere}."
        )
    if not path.exists() and "unable to open" in low:
        return (
            "missing",
            f"the {what} {path} does not exist, and its folder cannot hold it ({doing}: {text}){elsewhere}.",
        )
    return "io", f"the {what} {path} failed ({doing}: {text}). Check the disk and the file{elsewhere}."


def store_error(
    path: Path, error: BaseException, doing: str, what: str = "store", variable: str | None = None, write: bool = False
) -> StoreError:
    """The typed error for ``error`` met on the store at ``path``."""
    kind, message = classify(path, error, doing, what, variable)
    return (StoreWriteError if write else StoreError)(path, kind, message)


_READS = ("SELECT", "PRAGMA", "WITH", "EXPLAIN")


class GuardedCursor(sqlite3.Cursor):
    """A cursor whose SQLite errors become :class:`StoreError` naming the store."""

    def _fail(self, e: sqlite3.Error, doing: str, write: bool = False) -> StoreError:
        conn = self.connection
        assert isinstance(conn, GuardedConnection)
        return conn.fail(e, doing, write)

    def execute(self, sql: str, parameters: Any = (), /) -> GuardedCursor:
        try:
            super().execute(sql, parameters)
        except sqlite3.Error as e:
            raise self._fail(e, "writing" if _is_write(sql) else "reading", _is_write(sql)) from e
        return self

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> GuardedCursor:
        try:
            super().executemany(sql, seq_of_parameters)
        except sqlite3.Error as e:
            raise self._fail(e, "writing", True) from e
        return self

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.Error as e:
            raise self._fail(e, "reading") from e

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.Error as e:
            raise self._fail(e, "reading") from e

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        try:
            return super().fetchmany(size if size is not None else self.arraysize)
        except sqlite3.Error as e:
            raise self._fail(e, "reading") from e


def _is_write(sql: str) -> bool:
    return not sql.lstrip().upper().startswith(_READS)


class GuardedConnection(sqlite3.Connection):
    """A store's connection: its SQLite errors name the store, what is wrong and what to do."""

    store_path: Path = Path()
    what: str = "store"
    variable: str | None = None

    def fail(self, e: sqlite3.Error, doing: str, write: bool = False) -> StoreError:
        if write:
            try:  # leave the file as it was before the failed write
                super().rollback()
            except sqlite3.Error:
                pass
        return store_error(self.store_path, e, doing, self.what, self.variable, write)

    def cursor(self, factory: Any = None) -> Any:  # noqa: D102 - every statement goes through a GuardedCursor
        return super().cursor(factory or GuardedCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        return self.cursor().executemany(sql, parameters)

    def executescript(self, script: str, /) -> Any:
        try:
            return super().executescript(script)
        except sqlite3.Error as e:
            raise self.fail(e, "writing", True) from e

    def commit(self) -> None:
        try:
            super().commit()
        except sqlite3.Error as e:
            raise self.fail(e, "writing", True) from e


def _connect(path: Path, target: str, what: str, variable: str | None, **kwargs: Any) -> GuardedConnection:
    conn = sqlite3.connect(target, factory=GuardedConnection, **kwargs)
    assert isinstance(conn, GuardedConnection)
    conn.store_path, conn.what, conn.variable = path, what, variable
    return conn


def open_db(path: Path, schema: str, what: str = "store", variable: str | None = None) -> GuardedConnection:
    """A SQLite connection shared by threads (callers hold a lock), in WAL mode so readers in
    other processes never block a writer and a committed row survives ``kill -9``.

    ``what`` (e.g. "response store") and ``variable`` (the setting that moves it) go into the
    :class:`StoreError` raised when the file is corrupt, a directory, read-only, full or locked."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise store_error(path, e, "creating its folder", what, variable) from None
    if path.is_dir():
        raise store_error(path, IsADirectoryError(f"{path} is a directory"), "opening", what, variable)
    try:
        conn = _connect(path, str(path), what, variable, check_same_thread=False, timeout=60)
    except sqlite3.Error as e:
        raise store_error(path, e, "opening", what, variable) from None
    try:
        foreign = foreign_problem(conn, schema)  # read only: nothing is written to a file that is not ours
        if foreign:
            elsewhere = f" Point {variable} at another file." if variable else ""
            raise StoreError(path, "foreign", f"the {what} {path} {foreign}; it was left untouched.{elsewhere}")
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(schema)
        conn.commit()
    except StoreError as e:
        conn.close()
        raise e.with_traceback(None) from None
    return conn


#: SQLite's application id of every naru-eval store (``PRAGMA application_id``, "NARU" in ASCII):
#: a file with another id, or with tables that are no store's, is another application's
APPLICATION_ID = 0x4E415255
#: the tables of the stores made before they carried the application id (responses, judge
#: cache, Gemini upload and job registries): a file holding only these is a naru-eval store
LEGACY_TABLES = frozenset(
    {"responses", "runs", "calls", "facts", "batches", "hashes", "uploads", "context_caches", "batch_jobs"}
)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table!r})").fetchall()}


def foreign_problem(conn: sqlite3.Connection, schema: str) -> str | None:
    """Why the SQLite file of ``conn`` is not one of our stores (read only), or None: another
    application id, a table no store has, or one of this store's tables with other columns."""
    app = int(conn.execute("PRAGMA application_id").fetchone()[0])
    tables = {
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
    }
    if app not in (0, APPLICATION_ID):
        return f"is another application's SQLite file (application id {app:#x}, tables: {', '.join(sorted(tables))})"
    mem = sqlite3.connect(":memory:")
    try:
        mem.executescript(schema)
        ours = {r[0] for r in mem.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
        expected = {t: _columns(mem, t) for t in ours}
    finally:
        mem.close()
    unknown = sorted(tables - ours - (LEGACY_TABLES if app == 0 else set()))
    if unknown and app == 0:
        return f"is another application's SQLite file (tables: {', '.join(sorted(tables))})"
    for t in sorted(tables & ours):
        missing = sorted(expected[t] - _columns(conn, t))
        if missing:
            return f"has a table {t!r} without the columns {', '.join(missing)}: not a naru-eval store"
    return None


def open_readonly(path: Path, what: str = "store", schema: str | None = None) -> GuardedConnection:
    """A read-only connection to an existing store (reports, summaries, merge sources): never
    creates or locks it. With ``schema``, a file that is not that store (another application's id,
    tables or columns: :func:`foreign_problem`, the check :func:`open_db` makes) is refused."""
    path = Path(path)
    if not path.is_file():
        kind = "a directory, not a SQLite file" if path.is_dir() else "no such file"
        raise StoreError(path, "not-a-file" if path.is_dir() else "missing", f"the {what} {path}: {kind}")
    try:
        conn = _connect(path, f"{path.resolve().as_uri()}?mode=ro", what, None, uri=True, timeout=10)
    except sqlite3.Error as e:
        raise store_error(path, e, "opening", what) from None
    if schema is not None:
        try:
            foreign = foreign_problem(conn, schema)
        except StoreError:
            conn.close()
            raise
        if foreign:
            conn.close()
            raise StoreError(path, "foreign", f"the {what} {path} {foreign}; it was left untouched.")
    return conn


def check(path: Path, what: str = "store") -> str | None:
    """Why the store at ``path`` is unusable (its integrity check), or None when it is sound."""
    try:
        conn = open_readonly(path, what)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except StoreError as e:
        return str(e)
    bad = [r[0] for r in rows if r[0] != "ok"]
    return f"the {what} {path} is corrupt: {'; '.join(bad[:5])}" if bad else None


def move_aside(path: Path, force: bool = False) -> Path:
    """``naru-eval store move-aside PATH``: rename a corrupt store (and its -wal/-shm files) to
    ``PATH.corrupt-<UTC time>``, so the next run starts a new one. A sound store is refused
    unless ``force``: it holds answers that would be asked (and paid for) again."""
    path = Path(path)
    if not path.exists():
        raise StoreError(path, "missing", f"{path}: no such file; nothing was moved")
    if not path.is_dir() and not force:
        problem = check(path)
        if problem is None:
            raise StoreError(
                path,
                "sound",
                f"{path} passes SQLite's integrity check; nothing was moved (it holds answers that would be asked "
                "again). Use --force to move it aside anyway.",
            )
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    path.rename(target)
    for side in SIDE_FILES:
        extra = path.with_name(path.name + side)
        if extra.exists():
            extra.rename(target.with_name(target.name + side))
    return target
