"""``naru-eval leaderboard``: the published NARU leaderboard, with the user's runs beside it.

The authors' published figures (13 multiple-choice configurations, 8 open-ended ones; shipped in
``naru_eval/data_files/official_results.json``) are always in the table, marked as published
figures, aggregated as the authors do (:func:`published_rows`). Every ``*_results.json`` under
the given directories is read together with its sample logs (``<stamp>_samples_<task>.jsonl``).
Each (model, task, sampling, judge, data) becomes one entry:
every metric **recomputed from the sample log** (and checked against what lmms-eval reported),
question counts, 95% bootstrap intervals clustered by video, the run configuration (secrets
dropped), and provenance/cost from the frame-sweep manifest when there is one. Entries with the
same key are never merged silently: identical numbers are deduplicated with a note, different
numbers are a conflict (listed; the command exits 1). Each entry names the data it was
computed on (the annotations' fingerprint every sample records); runs on different data are
never merged or compared: they go into separate tables.

Outputs (``-o results/leaderboard.json``): the JSON (schema in ``docs/leaderboard.md``), a
Markdown table (``.md``) and a self-contained HTML page (``.html``: inline CSS, figures as
base64 PNG, nothing fetched), plus the figures as PNG files in ``<stem>_plots/``.

This module also holds the helpers ``scripts/frame_sweep.sh`` calls (``python -m
naru_eval.report.leaderboard sweep-status|sweep-manifest``): whether a budget's run directory holds a
finished run, and its ``manifest.json``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
import os
import sqlite3
import subprocess
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from naru_eval.core.data import CATEGORIES
from naru_eval.core.numbers import fmt_ci, fmt_num
from naru_eval.core.scoring import MACRO_METRICS, METRICS, close, compute_metrics, macro_levels, samples_from_log
from naru_eval.report.models import (
    ComparisonRow,
    Conflict,
    Duplicate,
    LeaderboardDocument,
    ManifestData,
    Number,
    SweepManifest,
    Table,
    dump_json,
    load_model,
    validate_doc,
)
from naru_eval.settings import settings
from naru_eval.store.responses import is_secret, redact, usage_by_run
from naru_eval.store.responses import runs as store_runs

if TYPE_CHECKING:
    from naru_eval.report.plots import Plot  # matplotlib only when plots are drawn

SCHEMA_VERSION = 2
#: the ``data`` of the published rows: the authors' official release of the benchmark
OFFICIAL_DATA = "official"
OFFICIAL_DATA_NOTE = (
    "Published rows are the NARU authors' own figures on the official data (Hugging Face "
    "infinimind/naru_benchmark), not runs of ours. Every run names the data it was computed on "
    "(a fingerprint of the annotations); runs on different data are never merged or compared "
    "with each other, and are listed in separate tables. A run is comparable with the published "
    "rows only when it was computed on the official data."
)
OPEN_METRIC_COLUMNS: tuple[str, ...] = (*MACRO_METRICS, *CATEGORIES, "recall")
MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
#: model_args keys naming the model (the first present wins), as lmms-eval's output folder does
MODEL_NAME_ARGS = ("pretrained", "model", "model_version", "model_name", "model_id")
VERSION_PACKAGES = ("naru-eval", "lmms-eval", "torch", "transformers")
DEFAULT_REPS = 2000
DEFAULT_SEED = 0


# --------------------------------------------------------------------------- small parsers


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


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Command-line words with any secret ``k=v`` piece masked (``api_key=***``)."""
    out = []
    for word in argv:
        parts = []
        for piece in word.split(","):
            k, sep, _v = piece.partition("=")
            parts.append(f"{k}=***" if sep and is_secret(k.lstrip("-")) else piece)
        out.append(",".join(parts))
    return out


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


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _log_mismatch(
    reported: Mapping[str, Any], recomputed: Mapping[str, Any], where: str, warnings: list[str]
) -> list[str]:
    """The metrics lmms-eval reported that the sample log does not reproduce (a warning names
    them); the leaderboard always shows the log's numbers."""
    mismatch = [m for m in recomputed if m in reported and not close(reported[m], recomputed[m], 1e-6)]
    if mismatch:
        warnings.append(
            f"{where}: {', '.join(mismatch)} reported by lmms-eval differ from the sample log; "
            "the leaderboard uses the sample log"
        )
    return mismatch


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


# --------------------------------------------------------------------------- run directories


def find_results_files(paths: Sequence[str | Path]) -> list[tuple[Path, Path]]:
    """(results file, the root it was found under), recursively, each file once, sorted."""
    seen: dict[Path, Path] = {}
    for p in paths:
        root = Path(p)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such file or directory")
        files = [root] if root.is_file() else sorted(root.rglob("*_results.json"))
        for f in files:
            seen.setdefault(f.resolve(), root.resolve() if root.is_dir() else f.resolve().parent)
    return sorted(seen.items())


def sample_logs(results_file: Path) -> dict[str, Path]:
    """task -> ``<stamp>_samples_<task>.jsonl`` next to a ``<stamp>_results.json``."""
    stamp = results_file.name[: -len("_results.json")]
    out = {}
    for p in sorted(results_file.parent.glob(f"{stamp}_samples_*.jsonl")):
        out[p.name[len(f"{stamp}_samples_") : -len(".jsonl")]] = p
    return out


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


def read_manifest(path: Path) -> dict[str, Any]:
    """A ``manifest.json``, validated (:class:`SweepManifest`; a bad one is an error naming it),
    as the dict of the fields it holds."""
    return load_model(SweepManifest, path).model_dump(mode="json", exclude_unset=True)


def _count_lines(path: Path) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def run_completeness(results: Mapping[str, Any], results_file: Path, tasks: Sequence[str]) -> list[str]:
    """Why the run is not complete for ``tasks`` (empty list: complete)."""
    problems = []
    logs = sample_logs(results_file)
    for task in tasks:
        if task not in results.get("results", {}):
            problems.append(f"task {task} missing from results")
            continue
        ns = results.get("n-samples", {}).get(task, {})
        orig, eff = ns.get("original"), ns.get("effective")
        if not orig or eff != orig:
            problems.append(f"{task}: n-samples effective={eff} of original={orig}")
        if task not in logs:
            problems.append(f"{task}: no sample log")
        elif eff and _count_lines(logs[task]) != eff:
            problems.append(f"{task}: sample log has {_count_lines(logs[task])} lines, expected {eff}")
    return problems


# --------------------------------------------------------------------------- entries


@dataclass
class Leaderboard:
    """The built leaderboard: the typed document, and ``data``, the JSON it is written as."""

    document: LeaderboardDocument
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.data = self.document.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _label_for(results_file: Path, labels: Mapping[str, str]) -> str | None:
    best = None
    for prefix, name in labels.items():
        pre = Path(prefix).resolve()
        if results_file == pre or pre in results_file.parents:
            if best is None or len(str(pre)) > len(best[0]):
                best = (str(pre), name)
    return best[1] if best else None


def model_label(config: Mapping[str, Any], args: Mapping[str, str], manifest: Mapping[str, Any] | None) -> str:
    if manifest and manifest.get("label"):
        return str(manifest["label"])
    for k in MODEL_NAME_ARGS:
        if args.get(k):
            return args[k]
    return str(config.get("model") or "unknown")


def _judge(
    results: Mapping[str, Any], task: str, args: Mapping[str, str], manifest: Mapping[str, Any] | None
) -> str | None:
    cfg = results.get("configs", {}).get(task, {}) or {}
    meta = cfg.get("metadata", {}) or {}
    for v in (
        meta.get("judge"),
        meta.get("judge_model"),
        cfg.get("judge"),
        args.get("judge"),
        (manifest or {}).get("judge"),
    ):
        if v:
            return str(v)
    return None


def _cost(results: Mapping[str, Any], manifest: Mapping[str, Any] | None) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for k in ("usage", "cost"):
        if manifest and manifest.get(k):
            out[k] = manifest[k]
    if results.get("usage"):
        out["lmms_eval_usage"] = results["usage"]
    return out or None


def _reported(results: Mapping[str, Any], task: str) -> dict[str, float | None]:
    res = results.get("results", {}).get(task, {})
    out = {}
    for k, v in res.items():
        if k.endswith(",none") and "_stderr" not in k and isinstance(v, (int, float, type(None))):
            out[k[: -len(",none")]] = _num(v)
    return out


def entry_id(model: str, task: str, budget: str, judge: str | None, data: str | None = None) -> str:
    return f"{model} | {task} | {budget} | judge={judge or '-'} | data={data or 'unknown'}"


def _log_fingerprint(samples: Sequence[Any] | None) -> tuple[str | None, list[str]]:
    """The data fingerprint the samples record (None when none does), and all distinct ones."""
    fps = sorted({s.data_fingerprint for s in samples or () if getattr(s, "data_fingerprint", None)})
    return (fps[0] if len(fps) == 1 else None), fps


def build_entries(
    paths: Sequence[str | Path],
    labels: Mapping[str, str] | None = None,
    reps: int = DEFAULT_REPS,
    seed: int = DEFAULT_SEED,
    include_incomplete: bool = False,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One entry per (results file, task); warnings about what was skipped or did not match."""
    from naru_eval.judge.score import compute_open_metrics
    from naru_eval.report.stats import bootstrap_ci, bootstrap_open_ci, counts

    entries: list[dict[str, Any]] = []
    warnings: list[str] = []
    files = find_results_files(paths)
    if not files:
        warnings.append(f"no *_results.json under {', '.join(map(str, paths))}")
    for rf, root in files:
        try:
            results = json.loads(rf.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            warnings.append(f"{_rel(rf)}: unreadable results file ({e}); skipped")
            continue
        config = results.get("config", {}) or {}
        args = parse_model_args(config.get("model_args"))
        mpath = find_manifest(rf, root)
        manifest = read_manifest(mpath) if mpath else None
        label = _label_for(rf, labels or {}) or model_label(config, args, manifest)
        frames, fps = budget_of(args)
        logs = sample_logs(rf)
        for task in sorted(results.get("results", {})):
            if task not in logs:
                if task in results.get("group_subtasks", {}):
                    continue  # a group row: its tasks have their own entries
                warnings.append(f"{_rel(rf)}: task {task} has no sample log (run with --log_samples); skipped")
                continue
            incomplete = run_completeness(results, rf, [task])
            if incomplete and not include_incomplete:
                warnings.append(f"{_rel(rf)}: {task} is incomplete ({'; '.join(incomplete)}); skipped")
                continue
            reported = _reported(results, task)
            judge = _judge(results, task, args, manifest)
            budget = sampling_label(frames, fps, config.get("model"))
            try:
                samples = samples_from_log(logs[task])
            except (ValueError, KeyError, TypeError):
                samples = None
            open_samples = _open_samples(logs[task]) if samples is None else None
            data, all_fps = _log_fingerprint(samples if samples is not None else open_samples)
            if len(all_fps) > 1:
                warnings.append(
                    f"{_rel(rf)}: {task}: the samples record several data fingerprints ({', '.join(all_fps)})"
                )
            if data is None and manifest:
                data = (manifest.get("data") or {}).get("fingerprint")
            entry: dict[str, Any] = {
                "id": entry_id(label, task, budget, judge, data),
                "model": label,
                "from": None,
                "published": False,
                "task": task,
                "frames": frames,
                "fps": fps,
                "budget": budget,
                "sampling": budget,
                "judge": judge,
                "data": data,
            }
            if samples is not None:
                metrics = compute_metrics(samples)
                ci = bootstrap_ci(samples, reps=reps, seed=seed)
                mismatch = _log_mismatch(reported, {m: metrics[m] for m in METRICS}, f"{_rel(rf)}: {task}", warnings)
                entry.update(
                    metrics={m: metrics[m] for m in METRICS},
                    ci95={m: (list(c) if (c := ci[m]) else None) for m in METRICS},
                    n=counts(samples),
                    metrics_source="sample_log",
                    reported_matches_log=not mismatch,
                )
            elif open_samples is not None:
                open_metrics = compute_open_metrics(open_samples)
                open_ci = bootstrap_open_ci(open_samples, reps=reps, seed=seed)
                mismatch = _log_mismatch(reported, open_metrics, f"{_rel(rf)}: {task}", warnings)
                entry.update(
                    metrics=open_metrics,
                    ci95={m: (list(v) if v else None) for m, v in open_ci.items()},
                    n={"overall": _count_lines(logs[task])},
                    metrics_source="sample_log_open",
                    reported_matches_log=not mismatch,
                )
            else:  # e.g. the circular variant: lmms-eval's numbers, no recomputation
                entry.update(
                    metrics=reported,
                    ci95=None,
                    n={"overall": _count_lines(logs[task])},
                    metrics_source="results_json",
                    reported_matches_log=None,
                )
            ns = results.get("n-samples", {}).get(task, {})
            entry["complete"] = not incomplete
            entry["run"] = {
                "results_file": _rel(rf),
                "samples_file": _rel(logs[task]),
                "adapter": config.get("model"),
                "model_args": redact(args),
                "num_frames": frames,
                "fps": fps,
                "task_version": results.get("versions", {}).get(task),
                "task_hash": results.get("task_hashes", {}).get(task),
                "lmms_eval_version": results.get("lmms_eval_version"),
                "date": results.get("date"),
                "n_samples": {"original": ns.get("original"), "effective": ns.get("effective")},
            }
            entry["manifest"] = (
                {
                    "path": _rel(mpath),
                    "label": manifest.get("label"),
                    "versions": manifest.get("versions"),
                    "git_revision": manifest.get("git_revision"),
                    "data_fingerprint": (manifest.get("data") or {}).get("fingerprint"),
                    "launcher": manifest.get("launcher"),
                    "status": manifest.get("status"),
                }
                if manifest and mpath
                else None
            )
            entry["cost"] = _cost(results, manifest)
            entries.append(entry)
    return entries, warnings


def _open_samples(log: Path) -> list[Any] | None:
    """The JudgedSamples of a naru_open sample log; None when it is not one."""
    from naru_eval.judge.score import samples_from_open_log

    try:
        return samples_from_open_log(log)
    except (ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------- published rows


def published_rows(official: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The authors' published leaderboard as entries, aggregated as they do it.

    Multiple choice (``naru_mcq``, all 1,481 questions): category accuracy = correct / category
    total x 100 (rows published as accuracies are taken as they are), narrative/cultural = the
    means of their categories, overall = (narrative + cultural) / 2; ``accuracy`` (micro) from
    the counts where there are counts. Open-ended (``naru_open``, the 500-question subset):
    per-category recall as published, overall = the mean of the nine categories."""
    from naru_eval.report import paper

    off = dict(official) if official is not None else paper.official_results()
    totals = [*off["category_totals"]["narrative"], *off["category_totals"]["cultural"]]
    n_cat = dict(zip(CATEGORIES, totals, strict=True))
    rows: list[dict[str, Any]] = []
    org: dict[str, str | None] = {}
    for name, r in off["mcq_rq1"]["rows"].items():
        vals = [*r["narrative"], *r["cultural"]]
        if r.get("percent"):
            cat = {c: float(v) for c, v in zip(CATEGORIES, vals, strict=True)}
            accuracy, counts = None, None
        else:
            cat = {c: 100.0 * k / n_cat[c] for c, k in zip(CATEGORIES, vals, strict=True)}
            accuracy, counts = 100.0 * sum(vals) / sum(totals), dict(zip(CATEGORIES, vals, strict=True))
        org[name] = r.get("from")
        rows.append(
            _published(
                name, r, "naru_mcq", {**macro_levels(cat), **cat, "accuracy": accuracy, "invalid_rate": None},
                {"overall": sum(totals), **n_cat}, counts, "published accuracies" if r.get("percent") else "correct counts",
            )
        )  # fmt: skip
    for name, r in off["open_rq3"]["rows"].items():
        cat = {c: float(v) for c, v in zip(CATEGORIES, [*r["narrative"], *r["cultural"]], strict=True)}
        row = {**r, "from": r.get("from", org.get(name))}
        metrics = {**macro_levels(cat, overall="categories"), **cat, "recall": None}
        rows.append(
            _published(name, row, "naru_open", metrics, {"overall": 500}, None, "published recalls (2 decimals)")
        )
    return rows


def _published(
    name: str,
    r: Mapping[str, Any],
    task: str,
    metrics: dict[str, float | None],
    n: dict[str, int],
    counts: dict[str, int] | None,
    figures: str,
) -> dict[str, Any]:
    return {
        "id": f"published | {name} | {task}",
        "model": name,
        "from": r.get("from"),
        "checkpoint": r.get("checkpoint"),
        "published": True,
        "task": task,
        "frames": None,
        "fps": None,
        "budget": r.get("sampling"),
        "sampling": r.get("sampling"),
        "judge": None,
        "data": OFFICIAL_DATA,
        "metrics": metrics,
        "ci95": None,
        "n": n,
        "counts": counts,
        "figures": figures,
        "metrics_source": "published",
    }


def _same_numbers(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a.get("n") != b.get("n"):
        return False
    ma, mb = a.get("metrics", {}), b.get("metrics", {})
    return set(ma) == set(mb) and all(close(_num(ma[k]), _num(mb[k]), 1e-9) for k in ma)


def resolve_duplicates(
    entries: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Duplicate], list[Conflict]]:
    """(entries kept, duplicates deduplicated, conflicts). Conflicting entries are all kept, flagged."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        groups[e["id"]].append(e)
    kept: list[dict[str, Any]] = []
    duplicates: list[Duplicate] = []
    conflicts: list[Conflict] = []
    for key, group in groups.items():
        if len(group) == 1:
            kept.append(group[0])
            continue
        if all(_same_numbers(group[0], g) for g in group[1:]):
            kept.append(group[0])
            group[0]["duplicates"] = [g["run"]["results_file"] for g in group[1:]]
            duplicates.append(
                Duplicate(
                    id=key,
                    kept=group[0]["run"]["results_file"],
                    dropped=[g["run"]["results_file"] for g in group[1:]],
                    note="identical numbers (every metric and n): deduplicated",
                )
            )
            continue
        diffs: dict[str, list[Number]] = {}
        for m in sorted({k for g in group for k in g.get("metrics", {})}):
            vals = [g.get("metrics", {}).get(m) for g in group]
            if any(not close(_num(v), _num(vals[0]), 1e-9) for v in vals):
                diffs[m] = vals
        ns = [g.get("n", {}).get("overall") for g in group]
        if len(set(ns)) > 1:
            diffs["n"] = ns
        for g in group:
            g["conflict"] = True
            kept.append(g)
        conflicts.append(Conflict(id=key, files=[g["run"]["results_file"] for g in group], differences=diffs))
    return kept, duplicates, conflicts


# --------------------------------------------------------------------------- paper comparison


def paper_comparison(
    entries: Sequence[Mapping[str, Any]], names: Mapping[str, str], ref: Mapping[str, Any]
) -> list[ComparisonRow]:
    """Our entries beside the paper's rows (table II for naru_mcq; Fig. 3 end points for
    naru_mcq_500 at 8/128 frames; table III recall for open-ended tasks), with the difference."""
    rows: list[ComparisonRow] = []

    def add(
        e: Mapping[str, Any], paper_model: str, source: str, metric: str, ours_key: str, paper: float, approx: bool
    ) -> None:
        ours = _num(e.get("metrics", {}).get(ours_key))
        ci = (e.get("ci95") or {}).get(ours_key)
        rows.append(
            ComparisonRow.model_validate(
                {
                    "model": e["model"],
                    "paper_model": paper_model,
                    "source": source,
                    "task": e["task"],
                    "budget": e["budget"],
                    "metric": metric,
                    "ours": ours,
                    "ours_ci95": ci,
                    "paper": paper,
                    "diff": None if ours is None else ours - paper,
                    "paper_in_ci": None if not ci else bool(ci[0] <= paper <= ci[1]),
                    "approximate": approx,
                }
            )
        )

    for e in entries:
        paper_model = names.get(e["model"])
        if not paper_model:
            continue
        if e["task"] == "naru_mcq":
            for metric, value in ref["table_ii"]["rows"].get(paper_model, {}).items():
                add(e, paper_model, "table_ii", metric, metric, value, False)
        if e["task"] == "naru_mcq_500" and e.get("frames") is not None:
            value = ref["frame_sweep"]["overall"].get(paper_model, {}).get(str(e["frames"]))
            if value is not None:
                add(e, paper_model, "frame_sweep", "overall", "overall", float(value), True)
        recall = ref["table_iii"]["rows"].get(paper_model)
        if e["task"].startswith("naru_open") and recall is not None:
            # table III prints the mean of the nine category recalls: our ``overall`` (not ``recall``)
            add(e, paper_model, "table_iii", "overall", "overall", recall, False)
    return rows


def paper_points(names: Mapping[str, str], ref: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Our model name -> the paper's approximate sweep end points, for the Fig. 3 overlay."""
    return {
        ours: dict(ref["frame_sweep"]["overall"][p]) for ours, p in names.items() if p in ref["frame_sweep"]["overall"]
    }


# --------------------------------------------------------------------------- the leaderboard


def _sort_key(e: Mapping[str, Any]) -> tuple[float, str]:
    ov = _num(e.get("metrics", {}).get("overall"))
    return (-(ov if ov is not None else -math.inf), str(e["model"]))


def leaderboard_tables(entries: Sequence[Mapping[str, Any]], published: Sequence[Mapping[str, Any]]) -> list[Table]:
    """The tables of the page: one per (task, data). The published rows of a task join each of
    its tables (they are on the official data; the page says so); runs on different data never
    share a table. Rows sorted by overall, highest first."""
    tasks = sorted({e["task"] for e in [*entries, *published]}, key=lambda t: (t != "naru_mcq", t != "naru_open", t))
    out = []
    for task in tasks:
        pub = sorted((p for p in published if p["task"] == task), key=_sort_key)
        runs = [e for e in entries if e["task"] == task]
        datas: list[str | None] = [*sorted({str(e.get("data") or "unknown") for e in runs})] or [None]
        for data in datas:
            group = [e for e in runs if data is None or str(e.get("data") or "unknown") == data]
            rows = sorted([*pub, *group], key=_sort_key)
            out.append(Table(task=task, data=data, rows=[r["id"] for r in rows], kind=_kind(task, rows)))
    return out


def _kind(task: str, rows: Sequence[Mapping[str, Any]]) -> Literal["mcq", "open", "generic"]:
    src = {r.get("metrics_source") for r in rows}
    if task.startswith("naru_open") and src <= {"published", "sample_log_open", "results_json"}:
        return "open"
    if src <= {"published", "sample_log"}:
        return "mcq"
    return "generic"


def build_leaderboard(
    paths: Sequence[str | Path],
    paper_names: Mapping[str, str] | None = None,
    reference: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    reps: int = DEFAULT_REPS,
    seed: int = DEFAULT_SEED,
    include_incomplete: bool = False,
    published: bool = True,
) -> Leaderboard:
    """The leaderboard of the runs below ``paths`` (none: the published rows only), beside the
    authors' published rows (unless ``published=False``)."""
    from naru_eval.report import paper

    ref = dict(reference) if reference is not None else paper.load_reference()
    names = dict(paper_names or {})
    errors: list[str] = []
    known = paper.paper_models(ref)
    for ours, theirs in names.items():
        if theirs not in known:
            errors.append(
                f"--paper-name {ours}={theirs}: the paper has no model {theirs!r} (known: {', '.join(known)})"
            )
    raw, warnings = build_entries(paths, labels, reps, seed, include_incomplete) if paths else ([], [])
    entries, duplicates, conflicts = resolve_duplicates(raw)
    entries.sort(
        key=lambda e: (
            e["task"],
            str(e.get("data") or ""),
            e["frames"] if e["frames"] is not None else -1,
            e.get("fps") or 0,
            *_sort_key(e),
        )
    )
    for d in duplicates:
        warnings.append(f"duplicate entry {d.id}: identical numbers in {d.kept} and {', '.join(d.dropped)}; kept one")
    for c in conflicts:
        diffs = "; ".join(f"{k}: {v}" for k, v in c.differences.items())
        errors.append(f"conflicting entries for {c.id} (same key, different numbers): {', '.join(c.files)} ({diffs})")
    datas = sorted({str(e.get("data") or "unknown") for e in entries})
    if len(datas) > 1:
        warnings.append(
            f"the runs were computed on different data ({', '.join(datas)}): they are in separate tables "
            "and never compared with each other"
        )
    unmatched = sorted(set(names) - {e["model"] for e in entries})
    if unmatched:
        warnings.append(f"--paper-name given for model(s) with no entry: {', '.join(unmatched)}")
    pub = published_rows() if published else []
    checks = paper.consistency_checks(ref)
    document = LeaderboardDocument.model_validate(
        {
            "schema_version": SCHEMA_VERSION,
            "generated_by": f"naru-eval {_version('naru-eval')}",
            "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "sources": [_rel(Path(p)) for p in paths],
            "bootstrap": {
                "method": "percentile bootstrap, videos resampled with replacement; overall/narrative/cultural "
                "recomputed as means of category means on each resample",
                "cluster": "video_id",
                "reps": reps,
                "seed": seed,
                "level": 0.95,
            },
            "aggregation": {
                "mcq": "category accuracy; narrative = mean of N.1-N.4, cultural = mean of C.1-C.5, "
                "overall = (narrative + cultural) / 2; accuracy = over all questions (micro)",
                "open": "category mean recall; narrative/cultural = means of their categories, overall = mean of "
                "the nine categories; recall = over all scored responses (micro)",
            },
            "data_note": OFFICIAL_DATA_NOTE,
            "metrics": list(METRICS),
            "published": {
                "paper": dict(paper.PAPER),
                "note": "published figures of the NARU authors, not runs of ours",
                "rows": pub,
            },
            "entries": entries,
            "tables": leaderboard_tables(entries, pub),
            "duplicates": duplicates,
            "conflicts": conflicts,
            "paper": {
                **paper.PAPER,
                "names": names,
                "comparison": paper_comparison(entries, names, ref),
                "consistency": [c.as_dict() for c in checks],
                "consistent": all(c.ok is not False for c in checks),
            },
            "warnings": warnings,
            "errors": errors,
        }
    )
    return Leaderboard(document, warnings, errors)


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- rendering


def _comparison_digits(r: Mapping[str, Any]) -> int:
    """Decimals of a paper-comparison row: 2 for table III recalls (0-1), 1 for percentages."""
    return 2 if r["source"] == "table_iii" else 1


def _paper_line(data: Mapping[str, Any]) -> str:
    p = data["published"]["paper"]
    return f"{p['title']} (arXiv {p['arxiv']})"


def _table_spec(table: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], int]:
    """(metric columns, decimals) of one table."""
    if table["kind"] == "mcq":
        return [*MACRO_METRICS, *CATEGORIES, "accuracy", "invalid_rate"], 1
    if table["kind"] == "open":
        return list(OPEN_METRIC_COLUMNS), 2
    return sorted({k for e in rows for k in e["metrics"]}), 3


def _table_title(table: Mapping[str, Any]) -> str:
    data = table["data"]
    if data is None:
        return f"{table['task']}: published figures"
    return f"{table['task']}: runs on data {data}"


def _rows_of(data: Mapping[str, Any], table: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    by_id = {e["id"]: e for e in [*data["published"]["rows"], *data["entries"]]}
    return [by_id[i] for i in table["rows"]]


def _who(e: Mapping[str, Any]) -> str:
    return "published" if e.get("published") else "run"


def markdown(data: Mapping[str, Any]) -> str:
    """The leaderboard as Markdown: one table per (task, data), the paper comparison and check."""
    lines = [
        "# NARU leaderboard",
        "",
        f"Paper: {_paper_line(data)}.",
        "",
        f"schema_version {data['schema_version']}; generated {data['generated_at']} by {data['generated_by']}. "
        "Multiple choice in %, open-ended as recall (0-1). overall/narrative/cultural follow the authors' "
        "aggregation (means of category means); `accuracy`/`recall` are over all questions. Rows marked "
        "*published* are the authors' figures, not runs of ours; runs are recomputed from their lmms-eval "
        "sample logs, brackets: 95% bootstrap CI clustered by video "
        f"({data['bootstrap']['reps']} reps, seed {data['bootstrap']['seed']}).",
        "",
        f"**Data.** {data['data_note']}",
        "",
    ]
    if data["errors"]:
        lines += ["**Errors:**", "", *[f"- {e}" for e in data["errors"]], ""]
    if data["warnings"]:
        lines += ["Warnings:", "", *[f"- {w}" for w in data["warnings"]], ""]
    for table in data["tables"]:
        rows = _rows_of(data, table)
        cols, digits = _table_spec(table, rows)
        lines += [f"## {_table_title(table)}", ""]
        lines.append("| model | | from | sampling | data | " + " | ".join(cols) + " | n |")
        lines.append("|---|---|---|---|---|" + "---:|" * len(cols) + "---:|")
        for e in rows:
            m, ci = e["metrics"], e.get("ci95") or {}
            flag = " (CONFLICT)" if e.get("conflict") else ""
            cells = [f"{fmt_num(m.get(c), digits)} {fmt_ci(ci.get(c), digits)}".strip() for c in cols]
            lines.append(
                f"| {e['model']}{flag} | {_who(e)} | {e.get('from') or '-'} | {e.get('sampling') or '-'} | "
                f"{e.get('data') or 'unknown'} | " + " | ".join(cells) + f" | {e['n'].get('overall')} |"
            )
        lines.append("")
    comp = data["paper"]["comparison"]
    lines += ["## Runs beside the paper's tables", ""]
    if comp:
        lines += [
            "| our model | paper model | source | task | sampling | metric | ours [95% CI] | paper | diff | paper in CI |",
            "|---|---|---|---|---|---|---|---:|---:|---|",
        ]
        for r in comp:
            src = r["source"] + (" (approx.)" if r["approximate"] else "")
            inci = "-" if r["paper_in_ci"] is None else ("yes" if r["paper_in_ci"] else "no")
            d = _comparison_digits(r)
            diff = fmt_num(r["diff"], d, signed=True)
            lines.append(
                f"| {r['model']} | {r['paper_model']} | {src} | {r['task']} | {r['budget']} | {r['metric']} | "
                f"{fmt_num(r['ours'], d)} {fmt_ci(r['ours_ci95'], d)} | {r['paper']:g} | {diff} | {inci} |"
            )
    else:
        lines.append("No run is mapped to a paper model (pass `--paper-name MODEL=PAPER_MODEL`).")
    lines += ["", "## Paper consistency check", ""]
    from naru_eval.report.paper import ConsistencyCheck, format_checks

    lines.append(format_checks([ConsistencyCheck(**c) for c in data["paper"]["consistency"]]))
    lines += ["", f"Paper: {_paper_line(data)}", ""]
    return "\n".join(lines)


def _versions(man: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in (man.get("versions") or {}).items() if v)


def render_html(data: Mapping[str, Any], plots: Sequence[Any] = (), skipped: Sequence[str] = ()) -> str:
    """A self-contained page (inline CSS, figures as data: URIs, no external reference), from
    ``templates/leaderboard.html.j2`` with autoescape: every value from a run is escaped."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("naru_eval.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.ChainableUndefined,
    )
    tables = []
    for table in data["tables"]:
        rows = _rows_of(data, table)
        cols, digits = _table_spec(table, rows)
        tables.append({"title": _table_title(table), "cols": cols, "digits": digits, "rows": rows})
    figures = [{"title": p.title, "caption": p.caption, "b64": base64.b64encode(p.png).decode("ascii")} for p in plots]
    return env.get_template("leaderboard.html.j2").render(
        d=data,
        tables=tables,
        plots=figures,
        skipped=list(skipped),
        paper_line=_paper_line(data),
        fmt_num=fmt_num,
        fmt_ci=fmt_ci,
        comparison_digits=_comparison_digits,
        versions=_versions,
        dumps=json.dumps,
    )


def write_outputs(lb: Leaderboard, json_path: str | Path, plots: bool = True) -> dict[str, Path]:
    """Write ``.json``, ``.md``, ``.html`` (same stem) and ``<stem>_plots/*.png``."""
    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    figs: list[Plot] = []
    skipped: list[str] = []
    if plots:
        from naru_eval.report.paper import load_reference
        from naru_eval.report.plots import make_plots

        if lb.data["entries"]:
            figs, skipped = make_plots(lb.data["entries"], paper_points(lb.data["paper"]["names"], load_reference()))
    paths = {"json": json_path, "md": json_path.with_suffix(".md"), "html": json_path.with_suffix(".html")}
    json_path.write_text(dump_json(lb.document), encoding="utf-8")
    paths["md"].write_text(markdown(lb.data), encoding="utf-8")
    paths["html"].write_text(render_html(lb.data, figs, skipped), encoding="utf-8")
    pdir = json_path.with_name(json_path.stem + "_plots")
    if pdir.is_dir():  # figures of an earlier build that this one may not draw again
        for old in [
            *pdir.glob("fig3_frame_sweep_*.png"),
            *pdir.glob("fig4_level_change_*.png"),
            pdir / "category_heatmap.png",
        ]:
            old.unlink(missing_ok=True)
    if figs:
        pdir.mkdir(exist_ok=True)
        for p in figs:
            (pdir / f"{p.name}.png").write_bytes(p.png)
            paths[p.name] = pdir / f"{p.name}.png"
    return paths


# --------------------------------------------------------------------------- sweep helpers


def run_status(
    directory: str | Path, model: str, model_args: str, tasks: Sequence[str], since: float | None = None
) -> tuple[int, str, Path | None]:
    """Whether ``directory`` holds a finished run of this configuration.

    Returns (0, msg, results file) when complete; (3, msg, None) when there is no finished run
    (nothing yet, or a crashed/partial one); (4, msg, file) when it holds results of a different
    model or model_args (refuse to mix). ``since``: ignore results files older than this time.
    """
    d = Path(directory)
    if not d.is_dir():
        return 3, f"{d}: not started", None
    other: Path | None = None
    reasons = []
    for rf in sorted(d.rglob("*_results.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        if since is not None and rf.stat().st_mtime < since:
            continue
        try:
            res = json.loads(rf.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            reasons.append(f"{rf}: unreadable")
            continue
        cfg = res.get("config", {}) or {}
        if cfg.get("model") != model or not same_model_args(cfg.get("model_args"), model_args):
            other = other or rf
            continue
        problems = run_completeness(res, rf, tasks)
        if not problems:
            return 0, f"{rf}: complete", rf
        reasons.append(f"{rf}: {'; '.join(problems)}")
    if other is not None:
        return 4, f"{other} holds results of a different model/model_args; use another output directory", other
    return 3, "; ".join(reasons) or f"{d}: no results file", None


def git_revision(path: str | Path) -> str | None:
    """``<sha>`` (``-dirty`` when the work tree has changes) of the checkout holding ``path``."""
    try:
        sha = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def usage_from_store(store_path: str | Path, adapter: str, num_frames: int | None) -> dict[str, Any] | None:
    """Summed numeric ``usage`` fields (tokens, cost) the response store holds for this adapter
    and budget, over every run key it registered; None when there is nothing."""
    p = Path(store_path)
    if not p.is_file():
        return None
    try:
        keys = [k for k, d in store_runs(p).items() if d.get("model") == adapter and d.get("num_frames") == num_frames]
        if not keys:
            return None
        rows = [(r.usage, r.status) for rs in usage_by_run(p, keys).values() for r in rs]
    except (sqlite3.Error, json.JSONDecodeError):
        return None
    total: dict[str, float] = defaultdict(float)
    answered = failed = 0
    for usage, status in rows:
        answered += status == "ok"
        failed += status == "failed"
        for k, v in (usage or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                total[k] += v
    return {
        "answers": answered,
        "failed": failed,
        **{k: (int(v) if float(v).is_integer() else v) for k, v in total.items()},
    }


def _data_info() -> ManifestData:
    try:
        from naru_eval.core.data import load_dataset_from_env

        ds = load_dataset_from_env(strict=False)
        return ManifestData(fingerprint=ds.fingerprint, source=ds.source, questions=len(ds.questions))
    except Exception as e:  # noqa: BLE001 - recorded, never fatal: lmms-eval's preflight reports data problems
        return ManifestData(fingerprint=None, error=f"{type(e).__name__}: {e}")


def write_manifest(directory: str | Path, updates: Mapping[str, Any]) -> Path:
    """Merge ``updates`` into ``directory/manifest.json`` (atomic replace); return its path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / MANIFEST_NAME
    current = read_manifest(path) if path.exists() else {}
    current.update(updates)
    manifest = validate_doc(SweepManifest, current, path)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(dump_json(manifest), encoding="utf-8")
    os.replace(tmp, path)
    return path


def _sweep_env() -> tuple[str, str, list[str], int]:
    model = os.environ["SWEEP_MODEL"]
    args = os.environ.get("SWEEP_MODEL_ARGS", "")
    tasks = [t for t in os.environ["SWEEP_TASKS"].split(",") if t]
    return model, args, tasks, int(os.environ["SWEEP_BUDGET"])


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def sweep_status(run_dir: str | Path, since: float | None = None) -> tuple[int, str]:
    """``naru-eval sweep-status DIR``: (0 finished | 3 to run | 4 holds a different configuration, message).

    The configuration comes from the environment (SWEEP_MODEL, SWEEP_MODEL_ARGS, SWEEP_TASKS,
    SWEEP_BUDGET), not from arguments: the model args may hold an API key, and a process's
    arguments are visible to every user of the machine (``ps``); scripts/frame_sweep.sh exports
    them to its own children only."""
    model, margs, tasks, _ = _sweep_env()
    code, msg, _ = run_status(run_dir, model, margs, tasks, since)
    return code, msg


def sweep_manifest(
    run_dir: str | Path,
    status: str,
    seconds: float | None = None,
    message: str | None = None,
    if_not_done: bool = False,
) -> None:
    """``naru-eval sweep-manifest DIR --status S``: write or update DIR/manifest.json (for
    scripts/frame_sweep.sh). The configuration comes from the environment as for
    :func:`sweep_status` (also SWEEP_LAUNCHER, SWEEP_LABEL, SWEEP_EXTRA, SWEEP_REPO); secrets are
    dropped before anything is written."""
    model, margs, tasks, budget = _sweep_env()
    mpath = Path(run_dir) / MANIFEST_NAME
    if if_not_done and (not mpath.exists() or read_manifest(mpath).get("status") == "done"):
        return
    updates: dict[str, Any] = {"status": status, "updated_at": _now()}
    if status == "running":
        prev = read_manifest(mpath) if mpath.exists() else {}
        updates.update(
            {
                "manifest_version": MANIFEST_VERSION,
                "tool": "scripts/frame_sweep.sh",
                "label": os.environ.get("SWEEP_LABEL") or model_label({"model": model}, parse_model_args(margs), None),
                "model": model,
                "model_args": redact(parse_model_args(margs)),
                "model_args_string": redact_args_string(margs),
                "budget": {"num_frames": budget},
                "sampling": sampling_label(budget, None),
                "tasks": tasks,
                "launcher": " ".join(redact_argv(os.environ.get("SWEEP_LAUNCHER", "").split())),
                "lmms_eval_extra_args": redact_argv(json.loads(os.environ.get("SWEEP_EXTRA") or "[]")),
                "versions": {k: _version(k) for k in VERSION_PACKAGES},
                "python": sys.version.split()[0],
                "git_revision": git_revision(os.environ.get("SWEEP_REPO") or Path(__file__).resolve().parent),
                "data": _data_info().model_dump(mode="json", exclude_unset=True),
                "env": {
                    k: os.environ.get(k)
                    for k in ("NARU_DATA_DIR", "NARU_HF_DATASET", "NARU_RESPONSE_STORE", "NARU_FRAME_CACHE")
                    if os.environ.get(k)
                },
                "invocations": int(prev.get("invocations", 0)) + 1,
                "started_at": _now(),
                "results_file": None,
                "usage": prev.get("usage"),
            }
        )
    else:
        code, msg, rf = run_status(run_dir, model, margs, tasks)
        updates["finished_at"] = _now()
        if rf is not None and code == 0:
            updates["results_file"] = str(rf.relative_to(Path(run_dir)))
        if seconds is not None:
            updates["seconds"] = seconds
        if message:
            updates["message"] = message
        store = settings().response_store
        usage = usage_from_store(store, model, budget) if store else None
        if usage:
            updates["usage"] = usage
    write_manifest(run_dir, updates)
