"""``naru-eval store merge``: join response stores (one per rank, one per array task) into one.

On a shared (network) filesystem each writer keeps a SQLite file of its own: one per SLURM array
task (``scripts/frame_sweep.sh --store-per-budget``) or one per ``accelerate launch`` rank
(``NARU_RESPONSE_STORE=.../responses.{rank}.sqlite``); docs/cluster.md. Merging them loses
nothing and never picks between two answers:

* a (run key, question) row found in one store only is copied;
* an ok answer beats a failure (a failure is asked again anyway);
* two ok answers that agree are one row; two ok answers that *differ* are a conflict: the merge
  refuses, lists every conflict with the stores that hold each answer, and writes nothing;
* two failures: the later one is kept;
* the runs table (run key -> what it hashes, and the store that registered it) is the union; a
  key already there keeps its description.

The target's own rows take part like any source's (merging into an existing store adds to it).
Every file goes through the store's own opener (:mod:`naru_eval.store.db`): the sources and an
existing target are opened read-only, must be response stores (another application's file, even
with our table names, is refused) and pass SQLite's integrity check; every row is checked
(:func:`naru_eval.store.responses.row_problems`: text where a number belongs, an unknown status)
and every bad row of every source is named at once. Nothing is written until all of it holds: an
existing target is written in one transaction, so an interrupted merge leaves it as it was, and a
new target is built beside its place and renamed into it, so a refused merge never leaves one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from naru_eval.store.db import SIDE_FILES, StoreError, check, open_db, open_readonly, store_error
from naru_eval.store.responses import SCHEMA, VARIABLE, WHAT, row_problems

#: a responses row as the merge carries it: status, response, error, usage, attempts, updated
Row = tuple[str, str | None, str | None, str | None, int, float]
Key = tuple[str, str]  # (run key, question key)


class MergeConflict(StoreError):
    """Two stores hold different ok answers for one request."""


@dataclass
class MergeReport:
    """What :func:`merge_stores` did: rows read per store, rows the target gained or improved."""

    target: Path
    read: dict[str, int] = field(default_factory=dict)  # store -> rows it holds
    added: int = 0  # rows the target did not have
    upgraded: int = 0  # a stored failure replaced by an ok answer (or a later failure)
    same: int = 0  # rows the target already had as they are
    total: int = 0  # rows in the target afterwards
    runs_added: int = 0

    def summary(self) -> str:
        sources = ", ".join(f"{p} ({n} rows)" for p, n in self.read.items())
        return (
            f"merged {sources} into {self.target}: {self.added} row(s) added, {self.upgraded} improved, "
            f"{self.same} already there; {self.total} row(s), {self.runs_added} new run key(s)"
        )


def _read(path: Path, problems: list[str]) -> tuple[dict[Key, Row], dict[str, tuple[str, float]]]:
    """A store's rows and runs, through the store's opener; each bad row goes into ``problems``."""
    conn = open_readonly(path, WHAT, SCHEMA)
    try:
        rows = conn.execute(
            "SELECT run_key, question_id, status, response, error, usage, attempts, updated FROM responses"
        ).fetchall()
        run_rows = conn.execute("SELECT run_key, description, created FROM runs").fetchall()
    finally:
        conn.close()
    out: dict[Key, Row] = {}
    for n, r in enumerate(rows, 1):
        bad = row_problems(r)
        if bad:
            problems.append(f"{path}: row {n} (run key {r[0]!r}, question {r[1]!r}): {'; '.join(bad)}")
            continue
        out[(r[0], r[1])] = (r[2], r[3], r[4], r[5], int(r[6]), float(r[7]))
    runs: dict[str, tuple[str, float]] = {}
    for k, d, c in run_rows:
        if not isinstance(k, str) or not isinstance(d, str) or isinstance(c, bool) or not isinstance(c, (int, float)):
            problems.append(f"{path}: the runs row of {k!r}: not (text, text, time): ({k!r}, {d!r}, {c!r})")
            continue
        runs[k] = (d, float(c))
    return out, runs


def _better(old: Row, new: Row) -> bool:
    """Whether ``new`` replaces ``old`` (never called for two ok rows)."""
    if old[0] != new[0]:
        return new[0] == "ok"
    return new[5] > old[5]  # two failures: the later one


def merge_stores(sources: Sequence[str | os.PathLike[str]], target: str | os.PathLike[str]) -> MergeReport:
    """Merge ``sources`` into ``target`` (created when missing) by the rules above; raise
    :class:`MergeConflict` (nothing written) when two ok answers of one request differ."""
    tgt = Path(target)
    report = MergeReport(tgt)
    paths: list[Path] = []
    for s in map(Path, sources):
        if s.resolve() == tgt.resolve() or s.resolve() in {p.resolve() for p in paths}:
            continue
        paths.append(s)
    problems = [p for p in (check(s, WHAT) for s in paths) if p]
    if problems:
        raise StoreError(paths[0], "corrupt", "cannot merge: " + "; ".join(problems) + ". Nothing was written.")
    bad_rows: list[str] = []
    if tgt.exists():
        problem = check(tgt, WHAT)
        if problem:
            raise StoreError(tgt, "corrupt", f"cannot merge into it: {problem}. Nothing was written.")
        base_rows, base_runs = _read(tgt, bad_rows)
    else:
        base_rows, base_runs = {}, {}
    read = [(src, *_read(src, bad_rows)) for src in paths]
    if bad_rows:
        shown = "\n  - ".join(bad_rows[:50]) + (f"\n  ... ({len(bad_rows) - 50} more)" if len(bad_rows) > 50 else "")
        where = sorted({b.split(": row ")[0].split(": the runs row")[0] for b in bad_rows})
        raise StoreError(
            Path(where[0]),
            "bad-rows",
            f"cannot merge: {len(bad_rows)} row(s) of {', '.join(where)} are not rows a response store writes; "
            f"nothing was written{'' if tgt.exists() else f' and {tgt} was not created'}:\n  - {shown}",
        )
    merged: dict[Key, Row] = dict(base_rows)
    holder: dict[Key, str] = {k: str(tgt) for k in base_rows}
    runs = dict(base_runs)
    conflicts: list[str] = []
    for src, rows, src_runs in read:
        report.read[str(src)] = len(rows)
        for rk, desc in src_runs.items():
            runs.setdefault(rk, desc)  # a key is the hash of what it describes; the first description is kept
        for key, row in rows.items():
            old = merged.get(key)
            if old is None:
                merged[key], holder[key] = row, str(src)
            elif old[0] == "ok" and row[0] == "ok":
                if old[1] != row[1]:
                    conflicts.append(
                        f"{key[1].split(':')[0]} (run key {key[0]}): {holder[key]} answered {_short(old[1])}, "
                        f"{src} answered {_short(row[1])}"
                    )
            elif _better(old, row):
                merged[key], holder[key] = row, str(src)
    if conflicts:
        shown = "\n  - ".join(conflicts[:50]) + (f"\n  ... ({len(conflicts) - 50} more)" if len(conflicts) > 50 else "")
        raise MergeConflict(
            tgt,
            "conflict",
            f"cannot merge: {len(conflicts)} request(s) hold different ok answers in different stores (the merge "
            f"never picks one); nothing was written:\n  - {shown}\nKeep the answers you trust: merge the stores "
            "without the other one, or delete the rows you do not want from it (sqlite3) first.",
        )
    changed = {k: r for k, r in merged.items() if base_rows.get(k) != r}
    report.same = len(merged) - len(changed)
    report.added = sum(1 for k in changed if k not in base_rows)
    report.upgraded = len(changed) - report.added
    new_runs = {k: v for k, v in runs.items() if k not in base_runs}
    report.runs_added = len(new_runs)
    # a new target is built under a temporary name and renamed into place: never left half-made
    fresh = not tgt.exists()
    path = tgt.with_name(f".{tgt.name}.merging-{os.getpid()}") if fresh else tgt
    try:
        conn = open_db(path, SCHEMA, WHAT, VARIABLE)
        try:  # one transaction: all of it or nothing (a failed write is rolled back by the guarded connection)
            conn.executemany(
                """INSERT INTO responses (run_key, question_id, status, response, error, usage, attempts, updated)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (run_key, question_id) DO UPDATE SET
                     status=excluded.status, response=excluded.response, error=excluded.error,
                     usage=excluded.usage, attempts=excluded.attempts, updated=excluded.updated""",
                [(k[0], k[1], *r) for k, r in changed.items()],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO runs (run_key, description, created) VALUES (?, ?, ?)",
                [(k, d, c) for k, (d, c) in new_runs.items()],
            )
            conn.commit()
            report.total = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            if fresh:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        if fresh:
            os.replace(path, tgt)
    except StoreError as e:  # named after the target (a new one's temporary name means nothing to the user)
        cause = e.__cause__ if isinstance(e.__cause__, BaseException) else e
        err = store_error(tgt, cause, "merging into it", WHAT, VARIABLE, write=True)
        raise err from None
    finally:
        if fresh:  # what is left of the temporary file (all of it when the write failed)
            for leftover in (path, *(path.with_name(path.name + side) for side in SIDE_FILES)):
                leftover.unlink(missing_ok=True)
    return report


def _short(text: str | None, limit: int = 60) -> str:
    t = repr(text)
    return t if len(t) <= limit else t[: limit - 3] + "..."
