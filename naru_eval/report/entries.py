"""Leaderboard entries, typed from start to finish: one :class:`~naru_eval.report.models.Entry`
per (model, task, sampling, judge, data), built from a run (:mod:`naru_eval.report.runs`), every
metric recomputed from its sample log; duplicates and conflicts; and the tables of the page.

Only runs whose numbers recompute from a NARU sample log are ranked. A run whose log is not a
NARU log, or whose ``results.json`` reports numbers its log does not give, is listed apart as
unverified, with the reason (:class:`~naru_eval.report.models.Unverified`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import JsonValue

from naru_eval.core.json_types import as_str, member
from naru_eval.core.runfiles import (
    OWN_INPUT_MODE,
    ResultsFile,
    SampleLog,
    mismatched,
    sampling_budget,
    task_problems,
)
from naru_eval.core.scoring import METRICS, ForeignLogError, SampleLogError, close
from naru_eval.report.models import (
    Conflict,
    DataStatus,
    Duplicate,
    Entry,
    ManifestRef,
    NSamples,
    Number,
    RunInfo,
    SweepManifest,
    Table,
    Unverified,
)
from naru_eval.report.published import data_status
from naru_eval.report.runs import Discovery, RunLog, find_manifest, open_samples, read_manifest
from naru_eval.store.responses import redact

DEFAULT_REPS = 2000
DEFAULT_SEED = 0


def rel(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (the page names no machine)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def entry_id(
    model: str,
    task: str,
    sampling: str,
    judge: str | None,
    data: str | None = None,
    input_mode: str | None = None,
    variant: str = "",
) -> str:
    """The entry's key, from what makes runs different: the model, the task, the sampling, the
    judge, the data, the input mode (when the payloads record one: the same model given a video
    or separate images is two configurations) and the variant (the answer-changing arguments that
    differ from the adapter's defaults, e.g. Gemini's ``audio=false``). Runs that differ in any
    part are different entries, never merged."""
    key = f"{model} | {task} | {sampling} | judge={judge or '-'} | data={data or 'unknown'}"
    return key + (f" | input={input_mode}" if input_mode else "") + (f" | variant={variant}" if variant else "")


def display_label(label: str, variant: str) -> str:
    """The model's name as the tables show it: the label, then the variant when there is one
    (``gemini-3-flash (audio=false)``), so two runs that differ in it read differently."""
    return f"{label} ({variant})" if variant else label


def _label_for(results_file: Path, labels: Mapping[str, str]) -> str | None:
    best = None
    for prefix, name in labels.items():
        pre = Path(prefix).resolve()
        if results_file.resolve() == pre or pre in results_file.resolve().parents:
            if best is None or len(str(pre)) > len(best[0]):
                best = (str(pre), name)
    return best[1] if best else None


def _judge(results: ResultsFile, task: str) -> str | None:
    """The judge the task's config names, else the ``judge=`` model arg."""
    return results.task_judge(task) or results.config.args.get("judge") or None


def _cost(results: ResultsFile, manifest: SweepManifest | None) -> dict[str, JsonValue] | None:
    out: dict[str, JsonValue] = {}
    if manifest is not None and manifest.usage:
        out["usage"] = manifest.usage
    if results.data.get("usage"):
        out["lmms_eval_usage"] = results.data["usage"]
    return out or None


def _category_counts(log: SampleLog) -> dict[str, int] | None:
    """Questions per category of a full-set log (one line per question); None for the circular
    variant (four lines per question)."""
    if log.kind == "circular":
        return None
    return dict(Counter(str(r["category"]) for r in log.records))


@dataclass
class Built:
    """What :func:`build_entries` found: entries, runs listed apart, warnings and errors."""

    entries: list[Entry] = field(default_factory=list)
    unverified: list[Unverified] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def build_entries(
    found: Discovery,
    labels: Mapping[str, str] | None = None,
    reps: int = DEFAULT_REPS,
    seed: int = DEFAULT_SEED,
    include_incomplete: bool = False,
) -> Built:
    """One entry per run (results file and task) whose log is a NARU log; the others listed apart."""
    out = Built()
    for rf, (res, _root, why) in sorted(found.results.items()):
        if res is None:
            out.warnings.append(f"{rel(rf)}: {why}; skipped")
            continue
        logs = res.sample_logs()
        for task in res.tasks:
            if task not in logs and not res.is_group(task):
                out.warnings.append(f"{rel(rf)}: task {task} has no sample log (run with --log_samples); skipped")
    for run in found.runs:
        beside = run.samples_path.resolve().parent / f"{run.stamp}_results.json"
        if beside in found.results and found.results[beside][0] is None:
            continue  # an unreadable results file: named above
        if run.results is None:
            out.warnings.append(f"{rel(run.samples_path)}: no results.json beside the sample log; skipped")
            continue
        entry = _entry(run, labels or {}, reps, seed, include_incomplete, out)
        if entry is not None:
            out.entries.append(entry)
    return out


def _entry(
    run: RunLog, labels: Mapping[str, str], reps: int, seed: int, include_incomplete: bool, out: Built
) -> Entry | None:
    from naru_eval.report.stats import bootstrap_ci, bootstrap_open_ci, counts

    res = run.results
    assert res is not None
    where = f"{rel(res.path)}: {run.task}"
    mpath = find_manifest(res.path, run.root)
    manifest = read_manifest(mpath) if mpath else None
    config = res.config
    name = _label_for(res.path, labels) or config.label(manifest)
    label = name

    def unverified(reason: str) -> None:
        out.unverified.append(
            Unverified(
                model=label,
                task=run.task,
                results_file=rel(res.path),
                samples_file=rel(run.samples_path),
                reason=reason,
            )
        )

    try:
        log = run.read()
    except ForeignLogError as e:
        unverified(f"not a NARU sample log ({e}): its numbers cannot be recomputed")
        out.warnings.append(f"{where}: not a NARU sample log; not ranked")
        return None
    except SampleLogError as e:  # truncated or empty: named (file and line), and the command fails
        unverified(str(e))
        out.errors.append(str(e))
        return None
    incomplete = task_problems(res, run.task, full=True)
    if incomplete and not include_incomplete:
        out.warnings.append(f"{rel(res.path)}: {run.task} is incomplete ({'; '.join(incomplete)}); skipped")
        return None
    fingerprints = log.values("data_fingerprint")
    if len(fingerprints) > 1:
        out.warnings.append(f"{where}: the samples record several data fingerprints ({', '.join(fingerprints)})")
    data = log.one("data_fingerprint")
    if data is None and manifest is not None and manifest.data is not None:
        data = manifest.data.fingerprint
    sampling = log.sampling(config)
    if log.own_sampler:
        out.warnings.append(
            f"{where}: no naru-eval provenance in the payloads: the model sampled its frames itself "
            f"(input {OWN_INPUT_MODE}); never merged or compared with naru-eval's exact sampler"
        )
    frames, fps = sampling_budget(sampling)
    variant = log.variant
    label = display_label(name, variant)
    judge = _judge(res, run.task)
    metrics: dict[str, Number]
    ci95: dict[str, list[float] | None] | None
    source: Literal["sample_log", "sample_log_open", "sample_log_circular"]
    if log.kind == "open":
        judged = open_samples(log)
        metrics = dict(log.metrics())
        if metrics.get("overall") is None:  # no score (a judge that could not be reached): never ranked
            unverified(f"no 'overall' score (unscored_rate {metrics.get('unscored_rate')}); see docs/judge.md")
            out.errors.append(f"{where}: no 'overall' score: not ranked")
            return None
        ci95 = {m: (list(v) if v else None) for m, v in bootstrap_open_ci(judged, reps=reps, seed=seed).items()}
        n = {"overall": len(log.records)}
        source = "sample_log_open"
    elif log.kind == "circular":
        metrics, ci95, n, source = dict(log.metrics()), None, {"overall": len(log.records)}, "sample_log_circular"
    else:
        samples = log.samples
        recomputed = log.metrics()
        metrics = {m: recomputed[m] for m in METRICS}
        ci = bootstrap_ci(samples, reps=reps, seed=seed)
        ci95 = {m: (list(c) if (c := ci[m]) else None) for m in METRICS}
        n = counts(samples)
        source = "sample_log"
    mismatch = mismatched(res.reported(run.task), {m: _num(v) for m, v in metrics.items()})
    if mismatch:
        out.warnings.append(
            f"{where}: {', '.join(mismatch)} reported by lmms-eval differ from the sample log; "
            "the entry shows the log's numbers and is not ranked"
        )
        unverified(f"results.json reports {', '.join(mismatch)} that the sample log does not recompute")
    orig, eff = res.n_samples(run.task)
    status: DataStatus = data_status(data, _category_counts(log))
    input_mode = log.input_mode
    return Entry(
        id=entry_id(name, run.task, sampling, judge, data, input_mode, variant),
        model=label,
        from_=None,
        published=False,
        task=run.task,
        frames=frames,
        fps=fps,
        budget=sampling,
        sampling=sampling,
        judge=judge,
        data=data,
        data_status=status,
        input_mode=input_mode,
        selection=log.selection,
        variant=variant,
        metrics=metrics,
        ci95=ci95,
        n=n,
        metrics_source=source,
        reported_matches_log=not mismatch,
        complete=not incomplete,
        run=RunInfo(
            results_file=rel(res.path),
            samples_file=rel(run.samples_path),
            adapter=config.adapter,
            model_args=redact(config.args),
            num_frames=frames,
            fps=fps,
            task_version=member(res.data, "versions", run.task),
            task_hash=as_str(member(res.data, "task_hashes", run.task)),
            lmms_eval_version=as_str(res.data.get("lmms_eval_version")),
            date=res.data.get("date"),
            n_samples=NSamples(original=orig, effective=eff),
        ),
        manifest=ManifestRef(
            path=rel(mpath),
            label=manifest.label,
            versions=manifest.versions,
            git_revision=manifest.git_revision,
            data_fingerprint=manifest.data.fingerprint if manifest.data else None,
            launcher=manifest.launcher,
            status=manifest.status,
        )
        if manifest is not None and mpath is not None
        else None,
        cost=_cost(res, manifest),
    )


# --------------------------------------------------------------------------- duplicates and conflicts


def _num(v: Number) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _same_numbers(a: Entry, b: Entry) -> bool:
    if a.n != b.n:
        return False
    return set(a.metrics) == set(b.metrics) and all(
        close(_num(a.metrics[k]), _num(b.metrics[k]), 1e-9) for k in a.metrics
    )


def _file(e: Entry) -> str:
    return e.run.results_file if e.run is not None else e.id


def resolve_duplicates(entries: Sequence[Entry]) -> tuple[list[Entry], list[Duplicate], list[Conflict]]:
    """(entries kept, duplicates deduplicated, conflicts). Conflicting entries are all kept, flagged."""
    groups: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        groups[e.id].append(e)
    kept: list[Entry] = []
    duplicates: list[Duplicate] = []
    conflicts: list[Conflict] = []
    for key, group in groups.items():
        if len(group) == 1:
            kept.append(group[0])
            continue
        if all(_same_numbers(group[0], g) for g in group[1:]):
            kept.append(group[0])
            group[0].duplicates = [_file(g) for g in group[1:]]
            duplicates.append(
                Duplicate(
                    id=key,
                    kept=_file(group[0]),
                    dropped=[_file(g) for g in group[1:]],
                    note="identical numbers (every metric and n): deduplicated",
                )
            )
            continue
        diffs: dict[str, list[Number]] = {}
        for m in sorted({k for g in group for k in g.metrics}):
            vals = [g.metrics.get(m) for g in group]
            if any(not close(_num(v), _num(vals[0]), 1e-9) for v in vals):
                diffs[m] = vals
        ns: list[Number] = [g.n.get("overall") for g in group]
        if len(set(ns)) > 1:
            diffs["n"] = ns
        for g in group:
            g.conflict = True
            kept.append(g)
        conflicts.append(Conflict(id=key, files=[_file(g) for g in group], differences=diffs))
    return kept, duplicates, conflicts


# --------------------------------------------------------------------------- the tables


def sort_key(e: Entry) -> tuple[float, str]:
    ov = _num(e.metrics.get("overall"))
    return (-(ov if ov is not None else -math.inf), e.model)


def _kind(task: str, rows: Sequence[Entry]) -> Literal["mcq", "open", "generic"]:
    src = {r.metrics_source for r in rows}
    if task.startswith("naru_open") and src <= {"published", "sample_log_open"}:
        return "open"
    if src <= {"published", "sample_log"}:
        return "mcq"
    return "generic"


def leaderboard_tables(entries: Sequence[Entry], published: Sequence[Entry], ranked: set[str]) -> list[Table]:
    """The tables of the page, per task. Runs on the official data (or on data whose counts match
    Table I) sit in one table with the published rows; when there is none, the published rows have
    a table of their own, shown as the reference; every other run is in a table of its own data,
    never interleaved with the published rows. Only ``ranked`` entries are in a table. Rows sorted
    by overall, highest first."""
    tasks = sorted({e.task for e in [*entries, *published]}, key=lambda t: (t != "naru_mcq", t != "naru_open", t))
    out = []
    for task in tasks:
        pub = sorted((p for p in published if p.task == task), key=sort_key)
        runs = [e for e in entries if e.task == task and e.id in ranked]
        by_data: dict[str, list[Entry]] = defaultdict(list)
        for e in runs:
            by_data[e.data or "unknown"].append(e)

        def status(group: Sequence[Entry]) -> DataStatus:
            found = {e.data_status or "other" for e in group}
            if found <= {"official", "counts-match"}:
                return "official" if found == {"official"} else "counts-match"
            return "synthetic" if found == {"synthetic"} else "other"

        beside = [d for d in sorted(by_data) if status(by_data[d]) in ("official", "counts-match")]
        apart = [d for d in sorted(by_data) if d not in beside]
        if pub and not beside:
            out.append(Table(task=task, data=None, rows=[r.id for r in pub], kind=_kind(task, pub)))
        for d in beside:
            rows = sorted([*pub, *by_data[d]], key=sort_key)
            out.append(
                Table(task=task, data=d, status=status(by_data[d]), rows=[r.id for r in rows], kind=_kind(task, rows))
            )
        for d in apart:
            rows = sorted(by_data[d], key=sort_key)
            out.append(Table(task=task, data=d, status=status(rows), rows=[r.id for r in rows], kind=_kind(task, rows)))
    return out
