"""Run the real ``lmms-eval`` console pipeline in a subprocess and find what it wrote.

lmms-eval 0.7.3 exits 0 even when the evaluation crashed, so success is judged by the output
files: a run is good only if a fresh ``*_results.json`` appeared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LmmsRun:
    """The outcome of one lmms-eval invocation."""

    returncode: int
    stdout: str
    stderr: str
    results_file: Path | None
    sample_files: dict[str, Path]
    seconds: float

    @property
    def ok(self) -> bool:
        return self.results_file is not None

    def results(self) -> dict:
        if self.results_file is None:
            raise RuntimeError(f"lmms-eval wrote no results file.\n--- stderr (tail) ---\n{self.stderr[-4000:]}")
        return json.loads(self.results_file.read_text(encoding="utf-8"))

    def metric(self, task: str, name: str) -> float | None:
        return self.results()["results"][task][f"{name},none"]


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
    """``lmms-eval --model M --model_args A --tasks T --output_path O --log_samples``."""
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
    samples: dict[str, Path] = {}
    if results_file is not None:
        stamp = results_file.name[: -len("_results.json")]
        for p in results_file.parent.glob(f"{stamp}_samples_*.jsonl"):
            samples[p.name[len(f"{stamp}_samples_") : -len(".jsonl")]] = p
    return LmmsRun(proc.returncode, proc.stdout, proc.stderr, results_file, samples, seconds)
