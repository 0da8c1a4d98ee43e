"""The files of an lmms-eval run, read once for everyone: the results file (:class:`ResultsFile`,
its :class:`RunConfig`), the sample logs (:func:`read_log`, every NARU log kind) and the one
check of a run (:func:`run_problems`: complete, and the metrics recompute).

lmms-eval 0.7.3 exits 0 even when the evaluation crashed, and on a full output disk it logs
``OSError(28)`` at INFO level, exits 0 and leaves a complete ``*_results.json`` beside a sample log
cut mid-line. So a run is judged by its files: it is complete only when every task evaluated has
a sample log that parses line by line and holds one line per question, and every metric it
reports recomputes from that log. The runner (``naru_eval.lmms.run``), ``naru-eval verify-run``,
the frame sweep (``naru-eval sweep-status``), the demo and the leaderboard all use this module;
it sits in ``core`` because ``lmms`` and ``report`` both need it and neither may import the other.

A naru_open log's metrics are the judge's tally (``naru_eval.judge.score.metrics_from_open_log``),
and ``core`` never imports the judge: the layers above hand it in (``open_metrics``), as they hand
the MCQ fallback to ``core.scoring.score_response``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from naru_eval.core.data import loads_strict
from naru_eval.core.json_types import JSONObject, as_object, member
from naru_eval.core.numbers import fmt_num
from naru_eval.core.provenance import FIELDS as PROVENANCE_FIELDS
from naru_eval.core.scoring import (
    REQUIRED_FIELDS,
    ForeignLogError,
    SampleLogError,
    ScoredSample,
    close,
    compute_metrics,
    sample_records,
)
from naru_eval.core.variants import CircularSample, circular_metrics

#: a naru_open sample log's metrics, recomputed (the judge's ``metrics_from_open_log``)
OpenMetrics = Callable[[Path], dict[str, float | None]]
#: model_args keys naming the model (the first present wins), as lmms-eval's output folder does
MODEL_NAME_ARGS = ("pretrained", "model", "model_version", "model_name", "model_id")
#: what a sample log holds: the MCQ task (video or blind), its circular variant, or naru_open
LogKind = Literal["plain", "blind", "circular", "open"]
SAMPLES_RE = re.compile(r"^(?P<stamp>.+?)_samples_(?P<task>.+)\.jsonl$")
#: the fields every circular payload carries (naru_eval.core.variants.circular_record)
_CIRCULAR_REQUIRED = tuple(f.name for f in dataclasses.fields(CircularSample) if f.default is dataclasses.MISSING)


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


#: the sampling of a run whose payloads record no naru-eval provenance (one of lmms-eval's own
#: models): its frames came from the model's own sampler, not naru-eval's
OWN_SAMPLING = "model's own sampler"
#: the input mode of such a run (derived; no adapter of ours records it)
OWN_INPUT_MODE = "model-sampled"
_LABEL_RE = re.compile(r"^(?P<n>\d+) Frames\b|^(?P<fps>\d+(?:\.\d+)?(?:e[+-]?\d+)?) FPS\b")


def legacy_sampling(model_args: Mapping[str, str]) -> str:
    """The sampling of a log whose payloads record none: an explicit ``num_frames=`` / ``fps=`` of
    its ``model_args`` (what the adapter was told; ``fps`` wins, as in the adapters), labelled as
    read from there, e.g. "32 Frames (model_args)"; else "not recorded" (an adapter's default may
    have changed since the run, so none is guessed)."""
    fps, frames = model_args.get("fps"), model_args.get("num_frames")
    if fps not in (None, "", "none", "None"):
        return f"{float(fps):g} FPS (model_args)"
    if frames not in (None, "", "none", "None"):
        return f"{int(frames)} Frames (model_args)"
    return "not recorded"


def sampling_budget(label: str | None) -> tuple[int | None, float | None]:
    """(frames, fps) of a sampling label ("128 Frames", "0.25 FPS", as
    ``naru_eval.core.budgets.Sampling.label`` writes it); (None, None) for any other label."""
    m = _LABEL_RE.match(label or "")
    if m is None:
        return None, None
    return (int(m["n"]), None) if m["n"] else (None, float(m["fps"]))


class Labelled(Protocol):
    """What names a run besides its config: a sweep's manifest (``report.models.SweepManifest``)."""

    @property
    def label(self) -> str | None: ...


@dataclass(frozen=True)
class RunConfig:
    """lmms-eval's ``config`` of a run: the adapter id (``--model``) and its ``--model_args``."""

    adapter: str | None = None
    model_args: str | None = None

    @property
    def args(self) -> dict[str, str]:
        return parse_model_args(self.model_args)

    def label(self, manifest: Labelled | None = None) -> str:
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
    boundary); the accessors are what the readers take from it. lmms-eval writes a bare ``NaN``
    for a clustered standard error with too few clusters, so NaN is read (as no value), not refused."""

    path: Path
    data: JSONObject

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ResultsFile:
        """The file, parsed; unreadable or not a JSON object is a ValueError naming it."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{p}: unreadable results file ({e})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{p}: not an lmms-eval results file (a JSON {type(data).__name__})")
        return cls(p, data)

    @property
    def stamp(self) -> str:
        return self.path.name[: -len("_results.json")]

    @property
    def config(self) -> RunConfig:
        adapter, model_args = member(self.data, "config", "model"), member(self.data, "config", "model_args")
        return RunConfig(
            adapter=adapter if isinstance(adapter, str) else None,
            model_args=model_args if isinstance(model_args, str) else None,
        )

    @property
    def tasks(self) -> list[str]:
        return sorted(as_object(self.data.get("results")))

    @property
    def evaluated(self) -> list[str]:
        """The tasks evaluated (``n-samples``: a group or tag asked for is expanded to its tasks there)."""
        return sorted(as_object(self.data.get("n-samples")))

    def is_group(self, task: str) -> bool:
        return task in as_object(self.data.get("group_subtasks"))

    def subtasks(self, task: str) -> list[str]:
        """A group's tasks (``group_subtasks``); a task is its own."""
        tasks = member(self.data, "group_subtasks", task)
        return [str(t) for t in tasks] if isinstance(tasks, list) and tasks else [task]

    def reported(self, task: str) -> dict[str, float | None]:
        """The metrics lmms-eval reported for ``task`` (``<metric>,none``; no standard errors); a
        NaN is no value (None), so it matches only a metric the log cannot give either."""
        row = as_object(member(self.data, "results", task))
        return {
            k[: -len(",none")]: _num(v)
            for k, v in row.items()
            if k.endswith(",none")
            and "_stderr" not in k
            and (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)))
        }

    def n_samples(self, task: str) -> tuple[int | None, int | None]:
        original, effective = (
            member(self.data, "n-samples", task, "original"),
            member(self.data, "n-samples", task, "effective"),
        )
        return (
            original if isinstance(original, int) else None,
            effective if isinstance(effective, int) else None,
        )

    def task_judge(self, task: str) -> str | None:
        """The judge ``task``'s config names (``metadata.judge``, ``metadata.judge_model`` or
        ``judge``), if any."""
        cfg = member(self.data, "configs", task)
        judge = member(cfg, "metadata", "judge") or member(cfg, "metadata", "judge_model") or member(cfg, "judge")
        return str(judge) if judge else None

    def sample_logs(self) -> dict[str, Path]:
        """task -> ``<stamp>_samples_<task>.jsonl`` next to this file."""
        prefix = f"{self.stamp}_samples_"
        return {p.name[len(prefix) : -len(".jsonl")]: p for p in sorted(self.path.parent.glob(f"{prefix}*.jsonl"))}


# --------------------------------------------------------------------------- sample logs


@dataclass
class SampleLog:
    """A sample log, read strictly: its kind and the per-question payloads (the ``overall``
    payload, ``accuracy_all`` for the circular variant; the JSON records lmms-eval logged).
    ``open_metrics``: how a naru_open log recomputes (the judge's tally, handed in)."""

    path: Path
    kind: LogKind
    records: list[JSONObject]
    open_metrics: OpenMetrics | None = None

    @property
    def samples(self) -> list[ScoredSample]:
        """The MCQ outcomes (plain and blind logs)."""
        if self.kind not in ("plain", "blind"):
            raise SampleLogError(f"{self.path}: a {self.kind} log, not a NARU MCQ sample log")
        return [ScoredSample.from_record(r) for r in self.records]

    def metrics(self) -> dict[str, float | None]:
        """Every metric of the task, recomputed from the log alone."""
        if self.kind == "circular":
            return circular_metrics(self.records)
        if self.kind == "open":
            if self.open_metrics is None:
                raise TypeError(f"{self.path}: a naru_open log recomputes with the judge's tally: pass open_metrics")
            return self.open_metrics(self.path)
        return compute_metrics(self.samples)

    def values(self, name: str) -> list[str]:
        """The distinct non-empty values of a payload field (``data_fingerprint``, ``input_mode``, …)."""
        return sorted({str(r[name]) for r in self.records if r.get(name)})

    def one(self, name: str) -> str | None:
        """The payload field's value when every question that records it agrees; else None."""
        vals = self.values(name)
        return vals[0] if len(vals) == 1 else None

    # -- what the model was given (naru_eval.core.provenance), as the leaderboard and compare read it

    @property
    def records_provenance(self) -> bool:
        """Whether the payloads carry every provenance field (logs written since ``sampling`` and
        ``variant`` exist); older logs lack them."""
        return bool(self.records) and all(k in self.records[0] for k in PROVENANCE_FIELDS)

    @property
    def own_sampler(self) -> bool:
        """The payloads carry the provenance fields but no adapter: the model was not one of
        naru-eval's (one of lmms-eval's own), so its frames came from its own sampler."""
        return self.records_provenance and not self.values("adapter")

    @property
    def input_mode(self) -> str | None:
        """The input mode the payloads record (:data:`OWN_INPUT_MODE` for a model's own sampler);
        None when they record none (a log written before the mode was recorded)."""
        mode = ", ".join(self.values("input_mode"))  # several, joined, if the payloads disagree
        return mode or (OWN_INPUT_MODE if self.own_sampler else None)

    @property
    def selection(self) -> str | None:
        """How the frames were chosen (``select=``: the payloads' ``selection``); None for
        uniform sampling, the official protocol (and for logs that predate the field)."""
        return ", ".join(self.values("selection")) or None

    @property
    def variant(self) -> str:
        """The answer-changing arguments that differ from the adapter's defaults (``k=v,...``; ""
        when none, or when the log predates the field)."""
        return ", ".join(self.values("variant"))

    def sampling(self, config: RunConfig) -> str:
        """The resolved sampling the payloads record ("128 Frames", "0.25 FPS"; several, joined,
        if they disagree); :data:`OWN_SAMPLING` for a model's own sampler. A log whose payloads
        record none (written before the field existed, or by an adapter that recorded none)
        falls back once to its ``model_args``, labelled as such (:func:`legacy_sampling`)."""
        recorded = self.values("sampling")
        if recorded:
            return ", ".join(recorded)
        if self.own_sampler:
            return OWN_SAMPLING
        return legacy_sampling(config.args)


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


def read_log(
    path: str | os.PathLike[str], task: str | None = None, open_metrics: OpenMetrics | None = None
) -> SampleLog:
    """A NARU sample log of any kind (MCQ, blind, circular, naru_open), strictly: a SampleLogError names the
    file and line of the first problem (truncated line, no payload, a field missing)."""
    p = Path(path)
    key = _payload_key(p)
    if key == "accuracy_all":
        records = [dict(r) for _, r in sample_records(p, _CIRCULAR_REQUIRED, "NARU circular", key)]
        return SampleLog(p, "circular", records, open_metrics)
    pairs = list(sample_records(p, ("question_id", "video_id", "category"), "NARU", key))
    if "reference" in pairs[0][1]:
        records = [dict(r) for _, r in sample_records(p, ("reference",), "naru_open")]
        return SampleLog(p, "open", records, open_metrics)
    records = [dict(r) for _, r in sample_records(p, REQUIRED_FIELDS, "NARU MCQ")]
    blind = any(r.get("blind") for r in records) or (task or "").endswith("_blind")
    return SampleLog(p, "blind" if blind else "plain", records, open_metrics)


def read_records(path: str | os.PathLike[str]) -> list[JSONObject]:
    """The per-question records of a NARU sample log (each payload without its ``score``)."""
    return [{k: v for k, v in r.items() if k != "score"} for r in read_log(path).records]


# --------------------------------------------------------------------------- is the run complete


def log_lines(path: Path) -> tuple[int, list[str]]:
    """(lines, problems) of any task's sample log: every line must decode, parse as JSON and end
    with a newline (a full disk cuts the last one). Up to three bad lines are named."""
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
            loads_strict(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            cut = " (cut short: was the disk full?)" if lineno == len(lines) else ""
            problems.append(f"{path}:{lineno}: not a JSON line{cut}: {e}")
            if len(problems) >= 3:
                problems.append(f"{path}: (further lines not checked)")
                break
    if data and not data.endswith(b"\n") and not problems:
        problems.append(f"{path}:{len(lines)}: the last line has no newline (cut short: was the disk full?)")
    return len(lines), problems


def task_problems(results: ResultsFile, task: str, full: bool = False) -> list[str]:
    """Why ``task``'s sample log is not all there (empty: it is): the task was evaluated, its log
    exists, parses line by line and holds one line per question evaluated. ``full``: every
    question of the task too (a ``--limit`` run is not a full run: the sweep, the leaderboard)."""
    rf = results.path
    counts = member(results.data, "n-samples", task)
    if counts is None:
        return [f"{rf}: {task}: not in the results file's n-samples (lmms-eval did not evaluate it)"]
    orig, expected = results.n_samples(task)
    if not isinstance(expected, int) or expected <= 0:
        return [f"{rf}: {task}: no question was evaluated (n-samples {counts})"]
    problems = []
    if full and expected != orig:
        problems.append(f"{rf}: {task}: {expected} of the task's {orig} questions evaluated (n-samples; --limit?)")
    log = results.sample_logs().get(task)
    if log is None:
        return [*problems, f"{rf}: {task}: no sample log (run lmms-eval with --log_samples)"]
    n, line_problems = log_lines(log)
    problems += line_problems
    if n != expected:
        problems.append(f"{log}: {n} line(s), expected one per question: {expected}")
    return problems


#: how far a reported metric may be from the recomputed one (lmms-eval sums in another order)
TOLERANCE = 1e-6


def mismatched(reported: Mapping[str, float | None], recomputed: Mapping[str, float | None]) -> list[str]:
    """The metrics lmms-eval reported (:meth:`ResultsFile.reported`) that the sample log does not
    give: the one comparison of the runner, the sweep, the leaderboard and ``diagnose``. A metric
    not reported is not compared; N/A (None) matches only None."""
    return [m for m, v in recomputed.items() if m in reported and not close(reported[m], v, TOLERANCE)]


def recompute_problems(results: ResultsFile, task: str, open_metrics: OpenMetrics) -> list[str]:
    """The metrics lmms-eval reported for ``task`` that its sample log does not give (a log of
    another benchmark is not checked: lmms-eval's numbers are all there is)."""
    log = results.sample_logs()[task]
    try:
        recomputed = read_log(log, task, open_metrics).metrics()
    except ForeignLogError:
        return []
    except SampleLogError as e:
        return [str(e)]
    differ = mismatched(results.reported(task), recomputed)
    if differ:
        return [f"{log}: {', '.join(differ)} do not recompute from the sample log"]
    if "overall" in recomputed and recomputed["overall"] is None:  # e.g. a judge that could not be reached
        rate = recomputed.get("unscored_rate")
        why = f" ({fmt_num(rate, 0, scale=100, suffix='%')} of the responses unscored)" if rate is not None else ""
        return [f"{log}: no 'overall' score{why}: the run has nothing to rank; see docs/judge.md and rerun"]
    return []


def run_problems(
    results_file: ResultsFile | str | os.PathLike[str],
    tasks: Sequence[str] | None = None,
    *,
    open_metrics: OpenMetrics,
    full: bool = False,
) -> list[str]:
    """Why the run that wrote ``results_file`` is not complete (empty: complete).

    Complete means: the results file parses, and every task (``tasks``, a group expanded to its
    tasks; by default every task evaluated, ``n-samples``) has a sample log that parses line by
    line, holds one line per question evaluated (``full``: every question of the task), and from
    which every reported metric recomputes."""
    if isinstance(results_file, ResultsFile):
        results = results_file
    else:
        try:
            results = ResultsFile.read(results_file)
        except ValueError as e:
            return [str(e)]
    if tasks is None:
        wanted = results.evaluated
        if not wanted:
            return [f"{results.path}: no task was evaluated (no n-samples)"]
    else:
        wanted = [t for task in tasks for t in results.subtasks(task)]
    problems: list[str] = []
    for task in wanted:
        missing = task_problems(results, task, full)
        problems += missing or recompute_problems(results, task, open_metrics)
    return problems


def newest_results(directory: str | os.PathLike[str], since: float | None = None) -> Path | None:
    """The newest ``*_results.json`` below ``directory`` (modified at or after ``since``)."""
    found = [p for p in Path(directory).rglob("*_results.json") if since is None or p.stat().st_mtime >= since]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _results_at(path: str | os.PathLike[str], since: float | None = None) -> Path | None:
    p = Path(path)
    return p if p.is_file() else newest_results(p, since) if p.is_dir() else None


def run_world_size(path: str | os.PathLike[str], since: float | None = None) -> int | None:
    """The number of processes the run at ``path`` (a results file, or the newest one below a
    folder) was sharded over, as every sample payload records it (``world_size``: lmms-eval's
    ``WORLD_SIZE`` when it was answered); None when the logs do not say (older runs) or disagree."""
    rf = _results_at(path, since)
    if rf is None:
        return None
    try:
        logs = ResultsFile.read(rf).sample_logs()
        values = {v for log in logs.values() for v in read_log(log).values("world_size")}
    except (ValueError, OSError):
        return None
    return int(values.pop()) if len(values) == 1 else None


def verify_run(path: str | os.PathLike[str], open_metrics: OpenMetrics, since: float | None = None) -> list[str]:
    """``naru-eval verify-run PATH``: :func:`run_problems` of a results file, or of the newest one
    below a folder (written at or after ``since``)."""
    rf = _results_at(path, since)
    if rf is None:
        return [f"{path}: no results file{'' if since is None else ' written by this run'}"]
    return run_problems(rf, open_metrics=open_metrics)
