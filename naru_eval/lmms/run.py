"""Run the real ``lmms-eval`` console pipeline in a subprocess and find what it wrote.

lmms-eval 0.7.3 exits 0 even when the evaluation crashed, and on a full output disk it logs
``OSError(28)`` at INFO level, exits 0 and leaves a complete ``*_results.json`` beside a sample
log cut mid-line. So success is judged by the output files, all of them (:func:`run_problems`):
a run is complete only when a fresh results file appeared, every task's sample log parses and
holds one line per question, and the metrics recompute from it. The runner
(:func:`run_lmms_eval`), ``naru-eval verify-run`` (scripts/frame_sweep.sh) and the demo use
this one check. A run that fails it is rerun: the response store keeps every answer, so the
rerun asks nothing again.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class LmmsRun:
    """The outcome of one lmms-eval invocation. ``problems``: why it is not complete (empty: it is)."""

    returncode: int
    stdout: str
    stderr: str
    results_file: Path | None
    sample_files: dict[str, Path]
    seconds: float
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.results_file is not None and not self.problems

    def failure(self) -> str:
        """Why the run failed, for a message: the problems and the tail of lmms-eval's stderr."""
        lines = [f"  - {p}" for p in self.problems] or ["  - lmms-eval wrote no results file"]
        return "\n".join(["the lmms-eval run is not complete:", *lines, "--- stderr (tail) ---", self.stderr[-3000:]])

    def results(self) -> dict:
        if self.results_file is None:
            raise RuntimeError(f"lmms-eval wrote no results file.\n--- stderr (tail) ---\n{self.stderr[-4000:]}")
        return json.loads(self.results_file.read_text(encoding="utf-8"))

    def metric(self, task: str, name: str) -> float | None:
        return self.results()["results"][task][f"{name},none"]


def sample_files_of(results_file: Path) -> dict[str, Path]:
    """task -> ``<stamp>_samples_<task>.jsonl`` beside ``<stamp>_results.json``."""
    stamp = results_file.name[: -len("_results.json")]
    return {
        p.name[len(f"{stamp}_samples_") : -len(".jsonl")]: p
        for p in sorted(results_file.parent.glob(f"{stamp}_samples_*.jsonl"))
    }


def _log_lines(path: Path) -> tuple[int, list[str]]:
    """(lines, problems): every line must decode, parse as JSON and end with a newline."""
    try:
        data = path.read_bytes()
    except OSError as e:
        return 0, [f"{path}: unreadable ({e.strerror or e})"]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    problems: list[str] = []
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            problems.append(f"{path}:{lineno}: empty line")
            continue
        try:
            json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError) as e:
            cut = " (cut short: was the disk full?)" if lineno == len(lines) else ""
            problems.append(f"{path}:{lineno}: not a JSON line{cut}: {e}")
            if len(problems) >= 3:
                problems.append(f"{path}: (further lines not checked)")
                break
    if data and not data.endswith(b"\n") and not problems:
        problems.append(f"{path}:{len(lines)}: the last line has no newline (cut short: was the disk full?)")
    return len(lines), problems


def _no_constant(token: str) -> Any:
    raise ValueError(f"non-finite number {token} (not JSON)")


def _same(reported: Any, recomputed: float | None) -> bool:
    """Whether lmms-eval's reported value is the recomputed one (N/A and None both mean none)."""
    if isinstance(reported, (int, float)) and not isinstance(reported, bool) and math.isfinite(reported):
        return recomputed is not None and math.isclose(reported, recomputed, rel_tol=1e-9, abs_tol=1e-9)
    return recomputed is None


def _recomputed(log: Path) -> dict[str, float | None] | None:
    """Every metric recomputed from a NARU sample log (MCQ, else open-ended); None for a log of
    another kind (the circular variant: lmms-eval's numbers are all there is)."""
    from naru_eval.core.scoring import metrics_from_samples_log
    from naru_eval.judge.score import metrics_from_open_log

    readers: tuple[Callable[[Path], dict[str, float | None]], ...] = (metrics_from_samples_log, metrics_from_open_log)
    for reader in readers:
        try:
            return reader(log)
        except (ValueError, KeyError, TypeError):
            continue
    return None


def run_problems(results_file: str | os.PathLike[str]) -> list[str]:
    """Why the run that wrote ``results_file`` is not complete (empty: complete).

    Complete means: the results file parses, and every task evaluated (``n-samples``; a group or
    tag asked for expands to its tasks there) has a sample log that parses line by line, holds
    one line per question evaluated, and from which every reported metric recomputes."""
    rf = Path(results_file)
    try:
        results = json.loads(rf.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return [f"{rf}: unreadable results file ({e})"]
    if not isinstance(results, dict):
        return [f"{rf}: not an lmms-eval results file"]
    reported_all: Mapping[str, Any] = results.get("results") or {}
    n_samples: Mapping[str, Any] = results.get("n-samples") or {}
    problems: list[str] = []
    if not n_samples:
        problems.append(f"{rf}: no task was evaluated (no n-samples)")
    logs = sample_files_of(rf)
    for task in sorted(n_samples):
        counts = n_samples[task] or {}
        expected = counts.get("effective")
        if not isinstance(expected, int) or expected <= 0:
            problems.append(f"{rf}: {task}: no question was evaluated (n-samples {counts})")
            continue
        log = logs.get(task)
        if log is None:
            problems.append(f"{rf}: {task}: no sample log (run lmms-eval with --log_samples)")
            continue
        n, line_problems = _log_lines(log)
        problems += line_problems
        if n != expected:
            problems.append(f"{log}: {n} line(s), expected one per question: {expected}")
        if line_problems or n != expected:
            continue
        recomputed = _recomputed(log)
        reported = reported_all.get(task) or {}
        if recomputed is not None:
            differ = [
                m for m, v in recomputed.items() if f"{m},none" in reported and not _same(reported[f"{m},none"], v)
            ]
            if differ:
                problems.append(f"{log}: {', '.join(differ)} do not recompute from the sample log")
    return problems


def newest_results(directory: str | os.PathLike[str], since: float | None = None) -> Path | None:
    """The newest ``*_results.json`` below ``directory`` (modified at or after ``since``)."""
    found = [p for p in Path(directory).rglob("*_results.json") if since is None or p.stat().st_mtime >= since]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def verify_run(path: str | os.PathLike[str], since: float | None = None) -> list[str]:
    """``naru-eval verify-run PATH``: :func:`run_problems` of a results file, or of the newest one
    below a folder (written at or after ``since``)."""
    p = Path(path)
    rf = p if p.is_file() else newest_results(p, since) if p.is_dir() else None
    if rf is None:
        return [f"{p}: no results file{'' if since is None else ' written by this run'}"]
    return run_problems(rf)


def lmms_eval_command() -> list[str]:
    """The lmms-eval entry of this interpreter's environment."""
    exe = Path(sys.executable).with_name("lmms-eval")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "lmms_eval"]


def run_lmms_eval(
    model: str,
    model_args: str,
    tasks: Sequence[str],
    output_path: str | Path,
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    timeout: float | None = None,
) -> LmmsRun:
    """``lmms-eval --model M --model_args A --tasks T --output_path O --log_samples``; the run is
    checked with :func:`run_problems` (``LmmsRun.ok``)."""
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    before = {p: p.stat().st_mtime for p in out.rglob("*_results.json")}
    cmd = [
        *lmms_eval_command(),
        "--model", model,
        "--model_args", model_args,
        "--tasks", ",".join(tasks),
        "--output_path", str(out),
        "--log_samples",
        "--batch_size", "1",
        *extra_args,
    ]  # fmt: skip
    full_env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", **(env or {})}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - t0
    fresh = [p for p in out.rglob("*_results.json") if before.get(p) != p.stat().st_mtime]
    results_file = max(fresh, key=lambda p: p.stat().st_mtime) if fresh else None
    samples = sample_files_of(results_file) if results_file is not None else {}
    problems = run_problems(results_file) if results_file is not None else [f"{out}: no fresh results file"]
    return LmmsRun(proc.returncode, proc.stdout, proc.stderr, results_file, samples, seconds, problems)
