"""Reading lmms-eval runs: the one run discovery and the one typed :class:`RunLog`.

Every reader of runs (``naru-eval leaderboard``, ``compare``, ``diagnose`` and the frame sweep)
finds them here and reads them through the one strict payload reader of
:mod:`naru_eval.core.scoring` (``sample_records``): a truncated, empty or foreign log is a
:class:`~naru_eval.core.scoring.SampleLogError` naming the file and the line, never a guess.

A *run* is one sample log ``<stamp>_samples_<task>.jsonl`` with the ``<stamp>_results.json``
lmms-eval wrote beside it (the run's configuration and the numbers it reported). The
configuration helpers (``--model_args`` parsing, redaction, the sampling label, the model label)
are here too: they read a run's configuration, whoever asks.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from naru_eval.core.scoring import (
    METRICS,
    REQUIRED_FIELDS,
    SampleLogError,
    ScoredSample,
    compute_metrics,
    sample_records,
)
from naru_eval.core.variants import CIRCULAR_METRICS, circular_metrics
from naru_eval.report.models import SweepManifest, load_model
from naru_eval.store.responses import is_secret, redact

if TYPE_CHECKING:
    from naru_eval.judge.score import JudgedSample

MANIFEST_NAME = "manifest.json"
#: model_args keys naming the model (the first present wins), as lmms-eval's output folder does
MODEL_NAME_ARGS = ("pretrained", "model", "model_version", "model_name", "model_id")
#: what a sample log holds: the MCQ task (video or blind), its circular variant, or naru_open
LogKind = Literal["plain", "blind", "circular", "open"]
_SAMPLES_RE = re.compile(r"^(?P<stamp>.+?)_samples_(?P<task>.+)\.jsonl$")
#: the fields every circular payload carries (naru_eval.core.variants.circular_record)
_CIRCULAR_REQUIRED = ("question_id", "base_question_id", "rotation", "video_id", "category", "gold", "correct")


# --------------------------------------------------------------------------- a run's configuration


def parse_model_args(text: str | None) -> dict[str, str]:
    """lmms-eval's ``k=v,k2=v2`` string as a dict (values kept as strings)."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        k, sep, v = part.partition("=")
        out[k.strip()] = v.strip() if sep else ""
    return out


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


def budget_of(model_args: Mapping[str, str]) -> tuple[int | None, float | None]:
    """(num_frames, fps) parsed from model_args; fps wins, as in the adapters."""
    fps = model_args.get("fps")
    if fps not in (None, "", "none", "None"):
        return None, float(fps)
    nf = model_args.get("num_frames")
    if nf not in (None, "", "none", "None"):
        return int(nf), None
    return None, None


def sampling_label(frames: int | None, fps: float | None, adapter: str | None = None) -> str:
    """How a run sampled its video, as the official table prints it ("128 Frames", "0.25 FPS"):
    explicit ``num_frames=``/``fps=`` of the model_args win; else the adapter's default
    (``naru_eval.core.budgets.default_sampling``); "default" when neither is known."""
    from naru_eval.core.budgets import Sampling, default_sampling

    if fps is not None or frames is not None:
        return Sampling(frames=None if fps is not None else frames, fps=fps).label
    default = default_sampling(adapter) if adapter else None
    return default.label if default is not None else "default"


@dataclass(frozen=True)
class RunConfig:
    """lmms-eval's ``config`` of a run: the adapter id (``--model``) and its ``--model_args``."""

    adapter: str | None = None
    model_args: str | None = None

    @property
    def args(self) -> dict[str, str]:
        return parse_model_args(self.model_args)

    @property
    def budget(self) -> tuple[int | None, float | None]:
        return budget_of(self.args)

    @property
    def sampling(self) -> str:
        return sampling_label(*self.budget, self.adapter)

    def label(self, manifest: SweepManifest | None = None) -> str:
        """The model's name: the sweep's label, else a model-naming arg, else the adapter id."""
        if manifest is not None and manifest.label:
            return manifest.label
        args = self.args
        for k in MODEL_NAME_ARGS:
            if args.get(k):
                return args[k]
        return self.adapter or "unknown"


# --------------------------------------------------------------------------- results files


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if math.isnan(v) else float(v)


@dataclass
class ResultsFile:
    """One lmms-eval ``*_results.json``: ``data`` is the JSON as lmms-eval wrote it (a true
    boundary); the accessors are what the reports read from it."""

    path: Path
    data: dict[str, Any]

    @classmethod
    def read(cls, path: Path) -> ResultsFile:
        """The file, parsed; unreadable or not a JSON object is a ValueError naming it."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: unreadable results file ({e})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: not an lmms-eval results file (a JSON {type(data).__name__})")
        return cls(path, data)

    @property
    def stamp(self) -> str:
        return self.path.name[: -len("_results.json")]

    @property
    def config(self) -> RunConfig:
        cfg = self.data.get("config") or {}
        return RunConfig(adapter=cfg.get("model"), model_args=cfg.get("model_args"))

    @property
    def tasks(self) -> list[str]:
        return sorted(self.data.get("results") or {})

    def is_group(self, task: str) -> bool:
        return task in (self.data.get("group_subtasks") or {})

    def reported(self, task: str) -> dict[str, float | None]:
        """The metrics lmms-eval reported for ``task`` (``<metric>,none``; no standard errors)."""
        row = (self.data.get("results") or {}).get(task) or {}
        return {
            k[: -len(",none")]: _num(v)
            for k, v in row.items()
            if k.endswith(",none") and "_stderr" not in k and (v is None or _num(v) is not None)
        }

    def n_samples(self, task: str) -> tuple[int | None, int | None]:
        ns = (self.data.get("n-samples") or {}).get(task) or {}
        return ns.get("original"), ns.get("effective")

    def task_config(self, task: str) -> dict[str, Any]:
        return (self.data.get("configs") or {}).get(task) or {}

    def sample_logs(self) -> dict[str, Path]:
        """task -> ``<stamp>_samples_<task>.jsonl`` next to this file."""
        prefix = f"{self.stamp}_samples_"
        return {p.name[len(prefix) : -len(".jsonl")]: p for p in sorted(self.path.parent.glob(f"{prefix}*.jsonl"))}


def count_lines(path: Path) -> int:
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(1 for line in f if line.strip())


def run_completeness(results: ResultsFile, tasks: Sequence[str]) -> list[str]:
    """Why the run is not complete for ``tasks`` (empty list: complete)."""
    problems = []
    logs = results.sample_logs()
    for task in tasks:
        if task not in (results.data.get("results") or {}):
            problems.append(f"task {task} missing from results")
            continue
        orig, eff = results.n_samples(task)
        if not orig or eff != orig:
            problems.append(f"{task}: n-samples effective={eff} of original={orig}")
        if task not in logs:
            problems.append(f"{task}: no sample log")
        elif eff and count_lines(logs[task]) != eff:
            problems.append(f"{task}: sample log has {count_lines(logs[task])} lines, expected {eff}")
    return problems


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


# --------------------------------------------------------------------------- sample logs


@dataclass
class SampleLog:
    """A sample log, read strictly: its kind and the per-question payloads (the ``overall``
    payload, ``accuracy_all`` for the circular variant; the JSON records lmms-eval logged)."""

    path: Path
    kind: LogKind
    records: list[dict[str, Any]]

    @property
    def samples(self) -> list[ScoredSample]:
        """The MCQ outcomes (plain and blind logs)."""
        if self.kind not in ("plain", "blind"):
            raise SampleLogError(f"{self.path}: a {self.kind} log, not a NARU MCQ sample log")
        fields = set(ScoredSample.__dataclass_fields__)
        return [ScoredSample(**{k: r[k] for k in fields if k in r}) for r in self.records]

    @property
    def open_samples(self) -> list[JudgedSample]:
        from naru_eval.judge.score import JudgedSample

        if self.kind != "open":
            raise SampleLogError(f"{self.path}: a {self.kind} log, not a naru_open sample log")
        return [JudgedSample.from_dict(r) for r in self.records]

    def metrics(self) -> dict[str, float | None]:
        """Every metric of the task, recomputed from the log alone."""
        if self.kind == "circular":
            return circular_metrics(self.records)
        if self.kind == "open":
            from naru_eval.judge.score import compute_open_metrics

            return compute_open_metrics(self.open_samples)
        return compute_metrics(self.samples)

    @property
    def metric_names(self) -> tuple[str, ...]:
        return CIRCULAR_METRICS if self.kind == "circular" else METRICS

    def values(self, name: str) -> list[str]:
        """The distinct non-empty values of a payload field (``data_fingerprint``, ``input_mode``, …)."""
        return sorted({str(r[name]) for r in self.records if r.get(name)})

    def one(self, name: str) -> str | None:
        """The payload field's value when every question that records it agrees; else None."""
        vals = self.values(name)
        return vals[0] if len(vals) == 1 else None


def _payload_key(path: Path) -> str:
    """``accuracy_all`` for a circular log (its payloads carry ``rotation``), else ``overall``."""
    try:
        with open(path, encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
        rec = json.loads(first) if first else None
    except (OSError, UnicodeDecodeError, ValueError):
        return "overall"  # the reader names the problem
    if isinstance(rec, dict) and "overall" not in rec and isinstance(rec.get("accuracy_all"), dict):
        return "accuracy_all" if "rotation" in rec["accuracy_all"] else "overall"
    return "overall"


def read_log(path: str | Path, task: str | None = None) -> SampleLog:
    """Any NARU sample log (MCQ, blind, circular, naru_open), strictly: a SampleLogError names the
    file and line of the first problem (truncated line, no payload, a field missing)."""
    p = Path(path)
    key = _payload_key(p)
    if key == "accuracy_all":
        records = [dict(r) for _, r in sample_records(p, _CIRCULAR_REQUIRED, "NARU circular", key)]
        return SampleLog(p, "circular", records)
    pairs = list(sample_records(p, ("question_id", "video_id", "category"), "NARU", key))
    if "reference" in pairs[0][1]:
        records = [dict(r) for _, r in sample_records(p, ("reference",), "naru_open")]
        return SampleLog(p, "open", records)
    records = [dict(r) for _, r in sample_records(p, REQUIRED_FIELDS, "NARU MCQ")]
    blind = any(r.get("blind") for r in records) or (task or "").endswith("_blind")
    return SampleLog(p, "blind" if blind else "plain", records)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The per-question records of a NARU sample log (each payload without its ``score``)."""
    return [{k: v for k, v in r.items() if k != "score"} for r in read_log(path).records]


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
        return self.read().one("input_mode")

    @property
    def positions(self) -> str | None:
        """The position layout of the model's input (naru_eval.core.provenance), when recorded."""
        return self.read().one("positions")

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
        m = _SAMPLES_RE.match(f.name)
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
