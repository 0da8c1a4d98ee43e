"""Reading lmms-eval runs: the one run discovery and the one typed :class:`RunLog`.

Every reader of runs (``naru-eval leaderboard``, ``compare``, ``diagnose`` and the frame sweep)
finds them here. The files themselves (the results file, its configuration, the sample logs of
every NARU kind, and whether a run is complete and recomputes) are read by
:mod:`naru_eval.core.runfiles`, which the lmms-eval runner shares; its logs go through the one
strict payload reader of :mod:`naru_eval.core.scoring` (``sample_records``): a truncated, empty or
foreign log is a :class:`~naru_eval.core.scoring.SampleLogError` naming the file and the line,
never a guess. This module hands it the judge's tally for naru_open logs.

A *run* is one sample log ``<stamp>_samples_<task>.jsonl`` with the ``<stamp>_results.json``
lmms-eval wrote beside it (the run's configuration and the numbers it reported).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from naru_eval.core import runfiles
from naru_eval.core.runfiles import SAMPLES_RE, ResultsFile, RunConfig, SampleLog, parse_model_args
from naru_eval.core.scoring import SampleLogError
from naru_eval.report.models import SweepManifest, load_model
from naru_eval.store.responses import is_secret, redact

if TYPE_CHECKING:
    from naru_eval.judge.score import JudgedSample

MANIFEST_NAME = "manifest.json"


def open_metrics(path: Path) -> dict[str, float | None]:
    """A naru_open log's metrics: the judge's tally (``core`` never imports the judge)."""
    from naru_eval.judge.score import metrics_from_open_log

    return metrics_from_open_log(path)


def read_log(path: str | os.PathLike[str], task: str | None = None) -> SampleLog:
    """Any NARU sample log, strictly (:func:`naru_eval.core.runfiles.read_log`), with the judge's
    tally for a naru_open log."""
    return runfiles.read_log(path, task, open_metrics)


def open_samples(log: SampleLog) -> list[JudgedSample]:
    """A naru_open log's judged samples (the judge's type, so here rather than in core)."""
    from naru_eval.judge.score import JudgedSample

    if log.kind != "open":
        raise SampleLogError(f"{log.path}: a {log.kind} log, not a naru_open sample log")
    return [JudgedSample.from_dict(r) for r in log.records]


def run_problems(results: ResultsFile, tasks: Sequence[str] | None = None, full: bool = False) -> list[str]:
    """Why the run is not complete or does not recompute (:func:`naru_eval.core.runfiles.run_problems`,
    the one check the lmms-eval runner and ``naru-eval verify-run`` use too); empty: it is fine."""
    return runfiles.run_problems(results, tasks, open_metrics=open_metrics, full=full)


# --------------------------------------------------------------------------- a run's configuration


def redact_args_string(text: str | None) -> str:
    """``k=v,…`` with secret-looking entries (api_key, token, …) dropped."""
    return ",".join(f"{k}={v}" for k, v in redact(parse_model_args(text)).items())


def same_model_args(logged: str | None, ours: str | None) -> bool:
    """Whether lmms-eval's logged ``model_args`` are ``ours``; secrets are compared by key only
    (lmms-eval writes ``[REDACTED]`` for them)."""
    a, b = parse_model_args(logged), parse_model_args(ours)
    if set(a) != set(b):
        return False
    return all(a[k] == b[k] or is_secret(k) or "[REDACTED]" in (a[k], b[k]) for k in a)


# --------------------------------------------------------------------------- manifests


def find_manifest(results_file: Path, root: Path) -> Path | None:
    """The nearest ``manifest.json`` from the results file's folder up to ``root``."""
    d = results_file.resolve().parent
    root = root.resolve()
    while True:
        m = d / MANIFEST_NAME
        if m.is_file():
            return m
        if d == root or d.parent == d or root not in d.parents:
            return None
        d = d.parent


def read_manifest(path: Path) -> SweepManifest:
    """A ``manifest.json``, validated (a bad one is an error naming it)."""
    return load_model(SweepManifest, path)


# --------------------------------------------------------------------------- discovery


@dataclass
class RunLog:
    """One run: a sample log, the results file beside it (when there is one) and the argument it
    was found under. :meth:`read` reads the log (strictly) once."""

    samples_path: Path
    task: str
    stamp: str
    root: Path  # the path given (a directory, or the file's folder)
    results: ResultsFile | None = None
    _log: SampleLog | None = field(default=None, repr=False)

    @property
    def config(self) -> RunConfig:
        return self.results.config if self.results is not None else RunConfig()

    @property
    def reported(self) -> dict[str, float | None] | None:
        return self.results.reported(self.task) if self.results is not None else None

    def read(self) -> SampleLog:
        if self._log is None:
            self._log = read_log(self.samples_path, self.task)
        return self._log

    @property
    def data_fingerprint(self) -> str | None:
        return self.read().one("data_fingerprint")

    @property
    def input_mode(self) -> str | None:
        """What the model was given (naru_eval.core.runfiles.SampleLog.input_mode)."""
        return self.read().input_mode

    @property
    def sampling(self) -> str:
        """The resolved sampling the payloads record (naru_eval.core.runfiles.SampleLog.sampling)."""
        return self.read().sampling(self.config)

    @property
    def variant(self) -> str:
        """The answer-changing arguments that differ from the adapter's defaults ("" when none)."""
        return self.read().variant

    @property
    def positions(self) -> str | None:
        """The position layout of the model's input (naru_eval.core.provenance), when recorded."""
        return self.read().one("positions")

    @property
    def world_size(self) -> int | None:
        """The processes the run was sharded over, as its payloads record it (None: not recorded)."""
        value = self.read().one("world_size")
        return int(value) if value is not None else None

    @property
    def adapter(self) -> str | None:
        """The adapter id the payloads record (naru_eval.core.provenance), else lmms-eval's ``--model``."""
        return self.read().one("adapter") or self.config.adapter


@dataclass
class Discovery:
    """What :func:`discover` found: the runs (one per sample log) and every results file with the
    root it was found under (a results file whose task has no log is a run that cannot be read)."""

    runs: list[RunLog]
    results: dict[Path, tuple[ResultsFile | None, Path, str | None]]  # file -> (parsed, root, why unreadable)


def discover(paths: Sequence[str | Path]) -> Discovery:
    """Every NARU run under ``paths`` (directories searched recursively, results files, sample
    logs), each log once, sorted by (results file, task). A path that does not exist is a
    FileNotFoundError."""
    logs: dict[Path, tuple[Path, Path]] = {}  # resolved samples file -> (file, root)
    results: dict[Path, Path] = {}  # resolved results file -> root
    for arg in map(Path, paths):
        if not arg.exists():
            raise FileNotFoundError(f"{arg}: no such file or directory")
        if arg.is_dir():
            root = arg
            found_logs, found_results = sorted(arg.rglob("*_samples_*.jsonl")), sorted(arg.rglob("*_results.json"))
        elif arg.name.endswith("_results.json"):
            root = arg.parent
            found_logs = sorted(arg.parent.glob(arg.name[: -len("_results.json")] + "_samples_*.jsonl"))
            found_results = [arg]
        else:
            root, found_logs, found_results = arg.parent, [arg], []
        for f in found_logs:
            logs.setdefault(f.resolve(), (f, root.resolve()))
        for f in found_results:
            results.setdefault(f.resolve(), root.resolve())
    parsed: dict[Path, tuple[ResultsFile | None, Path, str | None]] = {}

    def results_of(rf: Path, root: Path) -> ResultsFile | None:
        if rf not in parsed:
            try:
                parsed[rf] = (ResultsFile.read(rf), root, None)
            except ValueError as e:
                parsed[rf] = (None, root, str(e))
        return parsed[rf][0]

    for rf, root in sorted(results.items()):
        results_of(rf, root)
    runs = []
    for f, (given, root) in sorted(logs.items()):
        m = SAMPLES_RE.match(f.name)
        if not m:
            continue
        rf = f.parent / f"{m['stamp']}_results.json"
        res = results_of(rf, root) if rf.is_file() else None
        runs.append(RunLog(samples_path=given, task=m["task"], stamp=m["stamp"], root=root, results=res))
    runs.sort(key=lambda r: (str(r.results.path.resolve()) if r.results else str(r.samples_path.resolve()), r.task))
    return Discovery(runs=runs, results=parsed)


def latest(runs: Sequence[RunLog]) -> tuple[list[RunLog], list[str]]:
    """(the latest run of each (folder, task), the older logs it supersedes): a task run again
    into the same output folder counts once."""
    best: dict[tuple[Path, str], RunLog] = {}
    superseded: list[str] = []
    for r in sorted(runs, key=lambda r: str(r.samples_path.resolve())):
        key = (r.samples_path.resolve().parent, r.task)
        prev = best.get(key)
        if prev is None or r.stamp > prev.stamp:
            if prev is not None:
                superseded.append(str(prev.samples_path))
            best[key] = r
        else:
            superseded.append(str(r.samples_path))
    return list(best.values()), superseded
