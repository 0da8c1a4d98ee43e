"""The cells of an experiment run here, one after another (``naru-eval experiment run``).

Each cell is one lmms-eval run into ``OUT/<cell>/``. Resumable: a cell whose run is complete is
skipped; an unfinished one runs again and the response store (``NARU_RESPONSE_STORE``, default
``OUT/responses.sqlite``; ``--store-per-budget``: one per cell) serves every answer it holds.
lmms-eval 0.7.3 exits 0 even when the evaluation crashed (and on a full disk, leaving a complete
results file beside a cut sample log), so each run is judged by its files (the check of
``naru-eval verify-run``); anything less is a loud failure (exit 1). Every start, skip and end
is logged to ``OUT/sweep.log``; a signal (scancel, a time limit, preemption, Ctrl-C) stops the
cell's lmms-eval and marks it ``cancelled`` (exit 128 + the signal), any other end while it runs
``failed``. Nothing written holds a secret: the one redaction is applied to the manifest, the
log, the printed commands and lmms-eval's output on its way to ``lmms_eval.log``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING

from naru_eval.redaction import redact
from naru_eval.report.experiment import BUDGET_FIELD, CELL_FIELD, Cell, Experiment
from naru_eval.report.runs import MANIFEST_NAME, read_manifest
from naru_eval.report.sweep import (
    CellConfig,
    Status,
    finished_manifest,
    redact_argv,
    run_status,
    running_manifest,
)
from naru_eval.report.sweep import write_manifest as write
from naru_eval.settings import Settings, settings

if TYPE_CHECKING:
    from naru_eval.providers.gemini.usage import UsageTotals

#: words printed unquoted (the rest single-quoted), as the shell scripts printed them
_SAFE = re.compile(r"[A-Za-z0-9_./:=,@%+{}-]+")
PROG = "naru-eval experiment"


def quote(words: list[str]) -> str:
    """Shell words, single-quoted only where needed."""
    return " ".join(w if _SAFE.fullmatch(w) else "'" + w.replace("'", "'\\''") + "'" for w in words)


class CellFailed(Exception):
    """A cell that did not end in a complete run (the message says why and where to look)."""


class Stopped(BaseException):
    """A signal asked the driver to stop (raised by its handler in the main thread)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class RunOptions:
    out: Path
    launcher: list[str]
    extra: list[str]
    label: str | None = None
    store_per_cell: bool = False
    quiet: bool = False
    dry_run: bool = False
    leaderboard: bool = False
    compare: bool = True


@dataclass
class _Current:
    """The cell whose lmms-eval runs now."""

    dir: Path
    cfg: CellConfig
    cell: Cell
    started: float
    store: str
    keys: set[str] = field(default_factory=set)
    child: subprocess.Popen[bytes] | None = None


class Runner:
    """Runs the cells of one experiment, in order."""

    def __init__(self, exp: Experiment, opts: RunOptions) -> None:
        self.exp, self.opts, self.out = exp, opts, opts.out
        self.current: _Current | None = None
        own = settings().response_store
        self.notice = ""
        per_cell = own is not None and (BUDGET_FIELD in own or CELL_FIELD in own)
        if opts.store_per_cell and not per_cell:
            self.store = str(self.out / CELL_FIELD / "responses.sqlite")
            if own:
                self.notice = (
                    f"NARU_RESPONSE_STORE={own} is ignored: --store-per-budget keeps one store per cell "
                    f"({self.store}); name one per cell with {{F}} or {{cell}} to choose where"
                )
        else:
            self.store = own or str(self.out / "responses.sqlite")
        self.frame_cache = settings().frame_cache or str(self.out / "frames")
        self.repo = Path(settings().eval_repo or Path(__file__).resolve().parents[2])

    # -- output ----------------------------------------------------------------------------
    def log(self, text: str) -> None:
        """A line of OUT/sweep.log (UTC time first) and of stderr, secrets redacted."""
        text = redact(text)
        if not self.opts.dry_run:
            self.out.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            with open(self.out / "sweep.log", "a", encoding="utf-8") as f:
                f.write(f"{stamp} {text}\n")
        print(f"{PROG}: {text}", file=sys.stderr, flush=True)

    def store_of(self, cell: Cell) -> str:
        return self.store.replace(BUDGET_FIELD, str(cell.budget)).replace(CELL_FIELD, cell.name)

    # -- the whole run ---------------------------------------------------------------------
    def run(self, cells: list[Cell], whole: bool) -> int:
        """0: every cell complete (and compared); 1: a failure; 128+N: stopped by signal N."""
        if BUDGET_FIELD in self.store and not any(c.budget for c in cells):
            print(
                f"{PROG}: error: NARU_RESPONSE_STORE holds {BUDGET_FIELD} but the grid has no budgets", file=sys.stderr
            )
            return 2
        if not self.opts.dry_run and not (settings().data_dir or settings().hf_dataset):
            print(
                f"{PROG}: error: set NARU_DATA_DIR (or NARU_HF_DATASET) to the NARU data; see docs/data.md",
                file=sys.stderr,
            )
            return 2
        if self.notice:
            self.log(f"notice: {self.notice}")
        previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}

        def stop(signum: int, _frame: FrameType | None) -> None:
            raise Stopped(signum)

        for s in previous:
            signal.signal(s, stop)
        try:
            for cell in cells:
                self.cell(cell)
        except Stopped as stopped:
            return self.cancelled(stopped.signum)
        except CellFailed as e:
            print(f"{PROG}: {redact(str(e))}", file=sys.stderr)
            return 1
        except BaseException:
            self.finish("failed", message="the driver stopped with an error while this cell ran")
            raise
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
        if self.opts.dry_run:
            return 0
        self.log(f"finished: {', '.join(c.tag for c in cells)} in {self.out}")
        code = 0
        if whole and self.opts.compare and self.exp.pairs():
            code = compare_cells(self.out, self.exp)
        if whole and self.opts.leaderboard:
            code = max(code, self.leaderboard([self.out / c.name for c in cells]))
        return code

    def cancelled(self, signum: int) -> int:
        cur = self.current
        name = signal.Signals(signum).name
        if cur is not None:
            self.stop_child(cur)
            self.finish("cancelled", message=f"stopped by {name} (scancel, a time limit, preemption or Ctrl-C) "
                        "while lmms-eval ran; the same command resumes it from the response store")  # fmt: skip
            self.log(f"{cur.cell.tag} CANCELLED by {name}")
        return 128 + signum

    @staticmethod
    def stop_child(cur: _Current) -> None:
        """lmms-eval and everything it started (its own session): SIGTERM, then SIGKILL."""
        proc = cur.child
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def finish(self, status: Status, seconds: float | None = None, message: str | None = None) -> None:
        """The current cell's manifest at its end, with the usage of the run keys it used."""
        cur, self.current = self.current, None
        if cur is None:
            return
        from naru_eval.store.db import StoreError
        from naru_eval.store.responses import keys_since, rank_files

        for p in rank_files(cur.store):
            if p.is_file():
                try:
                    cur.keys |= keys_since(p, cur.started)
                except StoreError:
                    pass
        totals = store_usage(cur.store, cur.keys)
        usage = json.loads(totals.model_dump_json()) if totals else None
        try:
            update = finished_manifest(cur.dir, cur.cfg, status, seconds, message, usage, sorted(cur.keys))
            write(cur.dir, update.model_dump(mode="json", exclude_unset=True))
        except (OSError, ValueError) as e:
            print(f"{PROG}: cannot update {cur.dir / MANIFEST_NAME}: {e}", file=sys.stderr)

    # -- one cell --------------------------------------------------------------------------
    def cell(self, cell: Cell) -> None:
        exp, d = self.exp, self.out / cell.name
        args = exp.args_of(cell)
        cfg = CellConfig(exp.model, args, list(exp.tasks), cell.budget)
        store = self.store_of(cell)
        shown_sampling = f" [{cell.sampling}]" if cell.sampling else ""
        code, msg, _ = run_status(d, exp.model, args, exp.tasks)
        if code == 0:
            self.log(f"{cell.tag} skip: complete ({msg})")
            mpath = d / MANIFEST_NAME
            if not self.opts.dry_run and mpath.exists() and read_manifest(mpath).status != "done":
                # a run killed between lmms-eval's end and the manifest's update: record it as done
                self.current = _Current(d, cfg, cell, time.time(), store, self.previous_keys(d, store))
                self.finish("done", message="complete results found on a later run")
            return
        if code == 4:
            raise CellFailed(f"{cell.tag}: {msg}")
        cmd = [*exp_command(exp, args, d), *self.opts.extra]
        shown = [
            *redact_argv(self.opts.launcher),
            *exp_command(exp, redact_argv([args])[0], d),
            *redact_argv(self.opts.extra),
        ]
        env_shown = [f"NARU_RESPONSE_STORE={store}", f"NARU_FRAME_CACHE={self.frame_cache}"]
        if self.opts.dry_run:
            print(f"# {cell.tag}{shown_sampling} ({redact(msg)})")
            print(redact(f"{quote(env_shown)} {quote(shown)}"))
            return
        d.mkdir(parents=True, exist_ok=True)
        lock = open(d / ".lock", "w")  # noqa: SIM115 - held while the cell runs
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise CellFailed(f"{cell.tag}: {d} is locked by another run of this experiment") from None
            self.launch(cell, cfg, d, store, [*self.opts.launcher, *cmd], shown, shown_sampling)
        finally:
            lock.close()

    def previous_keys(self, d: Path, store: str) -> set[str]:
        """The run keys the cell's earlier invocations used: its manifest's, and, when it was
        killed (still "running"), every key used since that start (cells run one at a time)."""
        from naru_eval.store.db import StoreError
        from naru_eval.store.responses import keys_since, rank_files

        path = d / MANIFEST_NAME
        prev = read_manifest(path) if path.exists() else None
        keys = set(prev.run_keys or []) if prev else set()
        if prev is not None and prev.status == "running" and prev.started_unix:
            for p in rank_files(store):
                if p.is_file():
                    try:
                        keys |= keys_since(p, prev.started_unix)
                    except StoreError:
                        pass
        return keys

    def launch(
        self, cell: Cell, cfg: CellConfig, d: Path, store: str, cmd: list[str], shown: list[str], sampling: str
    ) -> None:
        path = d / MANIFEST_NAME
        prev = read_manifest(path) if path.exists() else None
        keys = self.previous_keys(d, store)
        started = time.time()
        env = {Settings.variable("response_store"): store, Settings.variable("frame_cache"): self.frame_cache}
        recorded = {k: v for k, v in (*self.data_env(), *env.items()) if v}
        manifest = running_manifest(
            self.exp, cell, cfg.model_args, self.opts.label, self.opts.launcher, self.opts.extra, recorded,
            self.repo, prev, started,
        )  # fmt: skip
        write(d, manifest.model_dump(mode="json", exclude_unset=True))
        self.current = cur = _Current(d, cfg, cell, started, store, keys)
        self.log(f"{cell.tag} invoke{sampling}: {quote(shown)}")
        log_path = d / "lmms_eval.log"
        with open(log_path, "a", encoding="utf-8") as log:
            cur.child = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True
            )
            self.relay(cur.child.stdout, log)
            rc = cur.child.wait()
        code, msg, _ = run_status(d, cfg.adapter, cfg.model_args, cfg.tasks, since=started)
        seconds = round(time.time() - started)
        if rc != 0 or code != 0:
            message = f"lmms-eval exited {rc}; {msg}"
            self.finish("failed", seconds, message)
            self.log(f"{cell.tag} FAILED: {message}")
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            raise CellFailed(
                f"{cell.tag} FAILED: no complete results file in {d} ({message}).\nlmms-eval 0.7.3 exits 0 even "
                f"when the evaluation crashed; the last lines of {log_path}:\n" + "\n".join(f"  | {x}" for x in tail)
            )
        self.finish("done", seconds)
        self.log(f"{cell.tag}{sampling} done in {seconds}s: {msg}")

    def relay(self, stream: IO[bytes] | None, log: IO[str]) -> None:
        """lmms-eval's output, redacted, to its log (and the terminal unless --quiet), line by line."""
        if stream is None:
            return
        for raw in stream:
            line = redact(raw.decode("utf-8", errors="replace"))
            log.write(line)
            log.flush()
            if not self.opts.quiet:
                sys.stdout.write(line)
                sys.stdout.flush()

    @staticmethod
    def data_env() -> list[tuple[str, str | None]]:
        """The data variables a manifest records (when set), read through settings."""
        s = settings()
        return [(Settings.variable("data_dir"), s.data_dir), (Settings.variable("hf_dataset"), s.hf_dataset)]

    def leaderboard(self, dirs: list[Path]) -> int:
        """OUT/leaderboard.json over the cells (each its own entry; the manifests name them)."""
        from naru_eval.report.leaderboard import build_leaderboard
        from naru_eval.report.render import write_outputs

        lb = build_leaderboard([str(p) for p in dirs])
        write_outputs(lb, self.out / "leaderboard.json", plots=False)
        for err in lb.errors:
            print(f"{PROG}: leaderboard: {err}", file=sys.stderr)
        print(f"{PROG}: leaderboard {self.out / 'leaderboard.json'}", file=sys.stderr)
        return 1 if lb.errors else 0


def store_usage(store: str | Path, run_keys: Iterable[str]) -> UsageTotals | None:
    """The response store's summed usage (tokens, cost) of ``run_keys``: over every rank's file of a
    per-rank store (``{rank}`` anywhere in the path), each answer once however many files hold it
    (a merged store beside its sources). None when there is nothing. Here, not in report/,
    because report never imports providers."""
    from naru_eval.providers.gemini.usage import UsageTotals
    from naru_eval.store.db import StoreError
    from naru_eval.store.responses import UsageRow, rank_files, usage_by_run

    keys = sorted(set(run_keys))
    if not keys:
        return None
    best: dict[tuple[str, str], UsageRow] = {}
    for p in rank_files(store):
        if not p.is_file():
            continue
        try:
            found = usage_by_run(p, keys)
        except StoreError:
            continue
        for rk, rows in found.items():
            for row in rows:
                old = best.get((rk, row.question_id))
                if old is None or (old.status != "ok" and row.status == "ok"):
                    best[(rk, row.question_id)] = row
    if not best:
        return None
    totals = UsageTotals()
    for row in best.values():
        totals.add(row.usage, row.status == "ok")
    return totals


def exp_command(exp: Experiment, model_args: str, d: Path) -> list[str]:
    """lmms-eval's arguments for one cell (after the launcher, before the extra ones)."""
    return [
        "--model", exp.model, "--model_args", model_args, "--tasks", ",".join(exp.tasks), "--output_path", str(d),
        "--log_samples", "--batch_size", "1",
    ]  # fmt: skip


def compare_cells(root: Path, exp: Experiment) -> int:
    """Every pair the grid declares, per task: ``OUT/compare/<task>_<A>_vs_<B>.json``, B against
    A, paired per question and per category (naru-eval compare); the tables printed."""
    from naru_eval.report.compare import compare_runs

    pairs = exp.pairs()
    if not pairs:
        return 0
    (root / "compare").mkdir(parents=True, exist_ok=True)
    code = 0
    for a, b, across in pairs:
        for task in exp.tasks:
            target = root / "compare" / f"{task}_{a.name}_vs_{b.name}.json"
            try:
                done = compare_runs(root / a.name, root / b.name, task=task, across_inputs=across)
            except (FileNotFoundError, ValueError) as e:
                print(f"{PROG}: compare {a.name} {b.name}: {e}", file=sys.stderr)
                code = 1
                continue
            target.write_text(json.dumps(done.report.model_dump(), indent=2) + "\n", encoding="utf-8")
            print("\n\n".join(done.texts) + "\n")
            print(f"{PROG}: wrote {target}", file=sys.stderr)
    return code
