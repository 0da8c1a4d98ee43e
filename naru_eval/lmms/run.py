"""Run the real ``lmms-eval`` console pipeline in a subprocess and find what it wrote.

lmms-eval 0.7.3 exits 0 even when the evaluation crashed, and on a full output disk it logs
``OSError(28)`` at INFO level, exits 0 and leaves a complete ``*_results.json`` beside a sample
log cut mid-line. So success is judged by the output files, all of them: a run is complete only
when a fresh results file appeared, every task's sample log parses and holds one line per
question, and the metrics recompute from it (:func:`run_problems`, the one check of
:mod:`naru_eval.core.runfiles`, which ``naru-eval sweep-status`` and the leaderboard use too).
The runner (:func:`run_lmms_eval`), ``naru-eval verify-run`` and the demo use it here. A run
that fails it is rerun: the response store keeps every answer, so the rerun asks nothing again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from naru_eval.core import runfiles
from naru_eval.core.json_types import JSONObject, as_object, member, number
from naru_eval.core.runfiles import ResultsFile
from naru_eval.judge.score import metrics_from_open_log


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

    def results_file_read(self) -> ResultsFile:
        """The results file lmms-eval wrote, read (a RuntimeError with its stderr when there is none)."""
        if self.results_file is None:
            raise RuntimeError(f"lmms-eval wrote no results file.\n--- stderr (tail) ---\n{self.stderr[-4000:]}")
        return ResultsFile.read(self.results_file)

    def results(self) -> JSONObject:
        """The results file as lmms-eval wrote it (:class:`naru_eval.core.runfiles.ResultsFile`)."""
        return self.results_file_read().data

    def reported(self, task: str) -> dict[str, float | None]:
        """The metrics lmms-eval reported for ``task`` (:meth:`ResultsFile.reported`)."""
        return self.results_file_read().reported(task)

    def metric(self, task: str, name: str) -> float | None:
        value = as_object(member(self.results(), "results", task))[f"{name},none"]
        return None if value is None else number(value)


def run_problems(results_file: ResultsFile | str | os.PathLike[str]) -> list[str]:
    """Why the run that wrote ``results_file`` is not complete (empty: complete): the one check,
    :func:`naru_eval.core.runfiles.run_problems`, with the judge's tally for naru_open logs."""
    return runfiles.run_problems(results_file, open_metrics=metrics_from_open_log)


def verify_run(path: str | os.PathLike[str], since: float | None = None) -> list[str]:
    """``naru-eval verify-run PATH``: :func:`run_problems` of a results file, or of the newest one
    below a folder (written at or after ``since``)."""
    return runfiles.verify_run(path, metrics_from_open_log, since)


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
    launcher: Sequence[str] | None = None,
) -> LmmsRun:
    """``lmms-eval --model M --model_args A --tasks T --output_path O --log_samples``; the run is
    checked with :func:`run_problems` (``LmmsRun.ok``). ``launcher``: how lmms-eval is started
    (default: this environment's ``lmms-eval``), e.g. ``accelerate launch --multi_gpu
    --num_processes 2 -m lmms_eval``."""
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    before = {p: p.stat().st_mtime for p in out.rglob("*_results.json")}
    cmd = [
        *(launcher or lmms_eval_command()),
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
    done = LmmsRun(proc.returncode, proc.stdout, proc.stderr, results_file, {}, seconds)
    if results_file is None:
        done.problems = [f"{out}: no fresh results file"]
        return done
    try:
        results = ResultsFile.read(results_file)
    except ValueError as e:
        done.problems = [str(e)]
        return done
    done.sample_files = results.sample_logs()
    done.problems = run_problems(results)
    return done
