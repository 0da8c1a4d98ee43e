"""``naru-eval diagnose``: what a set of NARU runs says beyond the headline accuracy.

Reads lmms-eval output directories (every ``*_samples_<task>.jsonl`` below them, with the
``*_results.json`` of the same timestamp) and reports, from the sample logs alone:

* for every run: the answer-letter distribution against the gold one, the invalid-answer rate
  and its kinds, and accuracy by video-duration bucket (each with its clustered bootstrap CI);
* blind-vs-video gaps (``naru_mcq[_500]_blind`` against ``naru_mcq[_500]`` of the same model,
  over the questions both answered), overall and per category;
* circular-vs-plain gaps (``naru_mcq_500_circular`` against rotation 0 of itself and against
  the plain run of the same model);
* questions that the blind runs of several models answer correctly (shortcut candidates).

**Runs and models.** A run is one sample log. Logs in the same directory belong to the same
model: that is how lmms-eval lays out ``--output_path`` (one ``<model_name>/`` folder per model,
or the folder itself when the model has no name, e.g. ``naru_replay``). Run the video, blind
and circular tasks of one model into one ``--output_path`` and they are paired. When a task was
run several times in one directory, the latest log is used and the others are listed under
``superseded``.

**Confidence intervals** are 95 % percentile intervals of a bootstrap that resamples videos
(about ten questions share one, so their errors are correlated), paired where two runs are
compared: both runs keep the same resampled questions. Seeded: the same logs and ``--seed``
give the same intervals, and each interval's seed depends on its name only, so adding a run
does not move the others.

Every number is in percent (or percentage points for gaps). See docs/diagnostics.md.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from naru_eval.core.data import CATEGORIES, CULTURAL, LETTERS, NARRATIVE
from naru_eval.core.extract import INVALID_KINDS
from naru_eval.core.numbers import fmt_ci, fmt_num
from naru_eval.core.scoring import MACRO_METRICS, METRICS, ScoredSample, close, compute_metrics, macro_levels
from naru_eval.core.variants import CIRCULAR_METRICS, circular_correct, circular_metrics
from naru_eval.report.models import DiagnosticsReport, dump_json, validate_doc

#: Default duration-bucket edges in minutes: 30-60, 60-120, 120-240 (NARU's videos).
DEFAULT_EDGES_MIN: tuple[float, ...] = (30.0, 60.0, 120.0, 240.0)
DEFAULT_BOOTSTRAP = 2000
UNKNOWN = "unknown"
INVALID = "invalid"
_SAMPLES_RE = re.compile(r"^(?P<stamp>.+?)_samples_(?P<task>.+)\.jsonl$")
_PAYLOAD_KEYS = ("overall", "accuracy_all")


# --------------------------------------------------------------------------- reading runs


@dataclass
class RunLog:
    """One sample log and what it was read into."""

    label: str  # "<group>:<task>"
    group: str  # the model: the directory holding the log
    task: str
    kind: str  # "plain", "blind" or "circular"
    samples_path: Path
    results_path: Path | None
    stamp: str
    records: list[dict[str, Any]]  # the per-doc record of each logged line (payload without score)
    reported: dict[str, float | None] | None = None  # the task's metrics in results.json
    model: str | None = None
    model_args: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def read_records(path: str | Path) -> list[dict[str, Any]] | None:
    """The per-doc records of a NARU sample log; None when it is not one."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            payload = next((rec[k] for k in _PAYLOAD_KEYS if isinstance(rec.get(k), dict)), None)
            if payload is None:
                payload = next(
                    (v for v in rec.values() if isinstance(v, dict) and "question_id" in v and "correct" in v), None
                )
            if payload is None:
                return None
            r = {k: v for k, v in payload.items() if k != "score"}
            r.setdefault("duration_s", None)
            out.append(r)
    return out


def kind_of(records: Sequence[Mapping[str, Any]], task: str) -> str:
    if any("rotation" in r for r in records):
        return "circular"
    if any(r.get("blind") for r in records) or task.endswith("_blind"):
        return "blind"
    return "plain"


def _reported(results: Mapping[str, Any] | None, task: str, kind: str) -> dict[str, float | None] | None:
    if not results or task not in results.get("results", {}):
        return None
    row = results["results"][task]
    names = CIRCULAR_METRICS if kind == "circular" else METRICS
    out: dict[str, float | None] = {}
    for m in names:
        v = row.get(f"{m},none")
        out[m] = float(v) if isinstance(v, (int, float)) else None
    return out


def discover_runs(paths: Sequence[str | Path]) -> tuple[list[RunLog], list[dict[str, str]], list[str]]:
    """Every NARU sample log under ``paths`` (directories, sample logs or results files).

    Returns ``(runs, skipped, superseded)``: ``skipped`` lists logs that are not NARU logs,
    ``superseded`` older logs of a task run again in the same directory.
    """
    found: dict[Path, tuple[Path, Path]] = {}  # samples file -> (argument, file)
    for arg in map(Path, paths):
        if arg.is_dir():
            files = sorted(arg.rglob("*_samples_*.jsonl"))
        elif arg.name.endswith("_results.json"):
            files = sorted(arg.parent.glob(arg.name[: -len("_results.json")] + "_samples_*.jsonl"))
        elif arg.is_file():
            files = [arg]
        else:
            raise FileNotFoundError(f"{arg}: no such file or directory")
        for f in files:
            found.setdefault(f.resolve(), (arg, f))
    latest: dict[tuple[Path, str], tuple[str, Path, Path]] = {}
    superseded: list[str] = []
    for _res, (arg, f) in sorted(found.items()):
        m = _SAMPLES_RE.match(f.name)
        if not m:
            continue
        key = (f.parent.resolve(), m["task"])
        prev = latest.get(key)
        if prev is None or m["stamp"] > prev[0]:
            if prev is not None:
                superseded.append(str(prev[2]))
            latest[key] = (m["stamp"], arg, f)
        else:
            superseded.append(str(f))
    labels = _group_labels({k[0]: v[1] for k, v in latest.items()})
    runs: list[RunLog] = []
    skipped: list[dict[str, str]] = []
    results_cache: dict[Path, Any] = {}
    for (folder, task), (stamp, _arg, f) in sorted(latest.items(), key=lambda kv: (labels[kv[0][0]], kv[0][1])):
        records = read_records(f)
        if not records:
            skipped.append({"samples": str(f), "why": "not a NARU sample log (no question payloads)"})
            continue
        kind = kind_of(records, task)
        res_path = f.parent / f"{stamp}_results.json"
        results = None
        if res_path.exists():
            if res_path not in results_cache:
                results_cache[res_path] = json.loads(res_path.read_text(encoding="utf-8"))
            results = results_cache[res_path]
        config = (results or {}).get("config", {})
        group = labels[folder]
        runs.append(
            RunLog(
                label=f"{group}:{task}",
                group=group,
                task=task,
                kind=kind,
                samples_path=f,
                results_path=res_path if results is not None else None,
                stamp=stamp,
                records=records,
                reported=_reported(results, task, kind),
                model=config.get("model"),
                model_args=config.get("model_args"),
            )
        )
    return runs, skipped, superseded


def _group_labels(folders: Mapping[Path, Path]) -> dict[Path, str]:
    """A short, unique label per log directory: the argument's name plus the path below it."""
    labels: dict[Path, str] = {}
    for folder, arg in folders.items():
        base = arg if arg.is_dir() else arg.parent
        try:
            rel = folder.relative_to(base.resolve())
        except ValueError:
            rel = Path(".")
        name = base.resolve().name or str(base)
        labels[folder] = name if str(rel) == "." else f"{name}/{rel.as_posix()}"
    counts = Counter(labels.values())
    for folder, label in labels.items():
        if counts[label] > 1:
            labels[folder] = str(folder)
    return labels


def fill_durations(runs: Sequence[RunLog], data_dir: str | Path, probe: bool = True) -> int:
    """Fill records without ``duration_s`` from a NARU data directory; return how many.

    Uses the annotations' ``duration_s``; with ``probe``, videos without one are opened
    (container metadata only) for theirs.
    """
    from naru_eval.core.data import load_local

    ds = load_local(data_dir, strict=False)
    by_q = {q.question_id: q for q in ds.questions}
    need = {
        str(r.get("base_question_id") or r["question_id"]) for run in runs for r in run.records if not r["duration_s"]
    }
    durations: dict[str, float] = {}
    by_video: dict[str, float | None] = {}
    for qid in need:
        q = by_q.get(qid)
        if q is None:
            continue
        if q.duration_s:
            durations[qid] = q.duration_s
            continue
        if not probe:
            continue
        if q.video_id not in by_video:
            by_video[q.video_id] = None
            path = ds.video_file(q)
            if path is not None:
                from naru_eval.media.video import VideoError, probe_video

                try:
                    by_video[q.video_id] = probe_video(path).duration_s
                except VideoError:
                    pass
        if by_video[q.video_id]:
            durations[qid] = by_video[q.video_id]  # type: ignore[assignment]
    filled = 0
    for run in runs:
        for r in run.records:
            if not r["duration_s"]:
                d = durations.get(str(r.get("base_question_id") or r["question_id"]))
                if d:
                    r["duration_s"] = d
                    filled += 1
    return filled


# --------------------------------------------------------------------------- statistics


def seed_for(seed: int, name: str) -> int:
    """A per-interval seed: depends on the base seed and the interval's name only."""
    return (int(seed) * 1_000_003 + zlib.crc32(name.encode())) % 2**32


def cluster_bootstrap(
    a: Sequence[float],
    clusters: Sequence[Any],
    b: Sequence[float] | None = None,
    iters: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> dict[str, Any]:
    """``100 * (mean(a) - mean(b))`` (or ``100 * mean(a)``) with a 95 % cluster-bootstrap CI.

    ``a`` and ``b`` are per-question 0/1 outcomes, paired (same questions, same order);
    ``clusters`` the questions' videos. Videos are resampled with replacement; each replicate's
    statistic is the ratio of the resampled sums. ``ci95`` is None with fewer than two videos.
    """
    import numpy as np

    n = len(a)
    if n == 0:
        return {"value": None, "ci95": None, "n": 0, "n_clusters": 0}
    ids = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    idx = np.fromiter((ids[c] for c in clusters), dtype=np.int64, count=n)
    v = len(ids)
    diff = np.asarray(a, dtype=float) - (np.asarray(b, dtype=float) if b is not None else 0.0)
    sd = np.bincount(idx, weights=diff, minlength=v)
    sn = np.bincount(idx, minlength=v).astype(float)
    value = 100.0 * float(sd.sum() / sn.sum())
    ci = None
    if v >= 2 and iters > 0:
        # the one bootstrap of naru_eval.report.stats (whole videos drawn with replacement, the
        # same draws for the same seed), so ``naru-eval compare`` reproduces this interval
        from naru_eval.report.stats import cluster_weights, percentile_interval, ratio

        w = cluster_weights(np.random.default_rng(seed), v, iters)
        ci = percentile_interval(100.0 * ratio(w @ sd, w @ sn))
    return {"value": value, "ci95": ci, "n": n, "n_clusters": v}


def _pct(k: float, n: float) -> float | None:
    return 100.0 * k / n if n else None


def _diff(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def _or_minus_inf(v: float | None) -> float:
    return v if v is not None else -math.inf


def letter_distribution(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Predicted letters (valid answers) against gold letters.

    ``pred_pct`` is the share of *valid* answers choosing each letter, ``gold_pct`` the share of
    questions whose gold is that letter; ``excess_pp`` their difference (positive: picked more
    often than it is right); ``tv_distance_pp`` half the sum of absolute differences (0: the
    model's letters are distributed like the gold ones; 100: disjoint).
    """
    n = len(records)
    pred = Counter(r["pred"] for r in records if r.get("valid") and r.get("pred") in tuple(LETTERS))
    gold = Counter(r["gold"] for r in records)
    n_valid = sum(pred.values())
    pred_pct = {x: _pct(pred[x], n_valid) for x in LETTERS}
    gold_pct = {x: _pct(gold[x], n) for x in LETTERS}
    excess = {x: _diff(pred_pct[x], gold_pct[x]) for x in LETTERS}
    tv = 0.5 * sum(abs(e) for e in excess.values() if e is not None) if n_valid else None
    top = max(LETTERS, key=lambda x: _or_minus_inf(excess[x])) if n_valid else None
    return {
        "n": n,
        "n_valid": n_valid,
        "pred": {**{x: pred[x] for x in LETTERS}, INVALID: n - n_valid},
        "gold": {x: gold[x] for x in LETTERS},
        "pred_pct": pred_pct,
        "gold_pct": gold_pct,
        "excess_pp": excess,
        "tv_distance_pp": tv,
        "most_over_picked": top,
    }


def invalid_breakdown(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Invalid-answer rate and the count of each kind (percent of all answers in ``kinds_pct``)."""
    n = len(records)
    kinds: Counter[str] = Counter()
    for r in records:
        if not r.get("valid"):
            method = str(r.get("method") or "")
            kinds[method.split(":", 1)[1] if method.startswith("invalid:") else "no_letter"] += 1
    n_invalid = sum(kinds.values())
    order = list(INVALID_KINDS) + sorted(k for k in kinds if k not in INVALID_KINDS)
    return {
        "n": n,
        "n_invalid": n_invalid,
        "rate": _pct(n_invalid, n),
        "kinds": {k: kinds[k] for k in order},
        "kinds_pct": {k: _pct(kinds[k], n) for k in order},
    }


def bucket_labels(edges_min: Sequence[float]) -> list[str]:
    return [f"{lo:g}-{hi:g} min" for lo, hi in zip(edges_min, edges_min[1:], strict=False)]


def duration_bucket(duration_s: float | None, edges_min: Sequence[float]) -> str:
    """The bucket of a video length: ``[e_i, e_i+1)`` minutes, the last one closed.

    Below the first edge: ``"<e0 min"``; above the last: ``">eN min"``; no duration: ``"unknown"``.
    """
    if duration_s is None or not isinstance(duration_s, (int, float)) or duration_s <= 0:
        return UNKNOWN
    m = duration_s / 60.0
    if m < edges_min[0]:
        return f"<{edges_min[0]:g} min"
    if m > edges_min[-1]:
        return f">{edges_min[-1]:g} min"
    labels = bucket_labels(edges_min)
    for i in range(len(labels)):
        if m < edges_min[i + 1]:
            return labels[i]
    return labels[-1]  # m == last edge


@dataclass(frozen=True)
class Unit:
    """One question's outcome: the unit every accuracy, gap and interval is computed over."""

    question_id: str
    video_id: str
    category: str
    gold: str
    duration_s: float | None
    correct: bool


def units_of(run: RunLog) -> dict[str, Unit]:
    """question_id -> outcome. Circular runs: the base question, right only in all rotations."""
    if run.kind != "circular":
        return {
            str(r["question_id"]): Unit(
                str(r["question_id"]), str(r["video_id"]), r["category"], r["gold"], r["duration_s"], bool(r["correct"])
            )
            for r in run.records
        }
    verdicts = circular_correct(run.records)
    first: dict[str, Mapping[str, Any]] = {}
    for r in sorted(run.records, key=lambda r: int(r["rotation"])):
        first.setdefault(str(r["base_question_id"]), r)
    return {
        q: Unit(
            q,
            str(first[q]["video_id"]),
            first[q]["category"],
            first[q].get("base_gold") or first[q]["gold"],
            first[q]["duration_s"],
            ok,
        )
        for q, ok in verdicts.items()
    }


def rotation0_units(run: RunLog) -> dict[str, Unit]:
    """A circular run's plain accuracy: rotation 0 (the original order) of each question."""
    return {
        str(r["base_question_id"]): Unit(
            str(r["base_question_id"]),
            str(r["video_id"]),
            r["category"],
            r["gold"],
            r["duration_s"],
            bool(r["correct"]),
        )
        for r in run.records
        if int(r["rotation"]) == 0
    }


def duration_accuracy(
    units: Iterable[Unit], edges_min: Sequence[float], iters: int, seed: int, name: str
) -> list[dict[str, Any]]:
    """Accuracy per duration bucket with n, videos and a clustered-bootstrap CI."""
    by: dict[str, list[Unit]] = {}
    for u in units:
        by.setdefault(duration_bucket(u.duration_s, edges_min), []).append(u)
    order = [f"<{edges_min[0]:g} min", *bucket_labels(edges_min), f">{edges_min[-1]:g} min", UNKNOWN]
    out = []
    for label in order:
        us = by.get(label, [])
        if not us and label not in bucket_labels(edges_min):
            continue
        st = cluster_bootstrap(
            [u.correct for u in us], [u.video_id for u in us], iters=iters, seed=seed_for(seed, f"{name}|{label}")
        )
        out.append(
            {
                "bucket": label,
                "n": len(us),
                "n_videos": len({u.video_id for u in us}),
                "accuracy": st["value"],
                "ci95": st["ci95"],
            }
        )
    return out


def recompute_metrics(run: RunLog) -> dict[str, float | None]:
    """The task's metrics from the log alone (the numbers results.json should hold)."""
    if run.kind == "circular":
        return circular_metrics(run.records)
    fields = [f for f in ScoredSample.__dataclass_fields__]
    return compute_metrics([ScoredSample(**{k: r[k] for k in fields if k in r}) for r in run.records])


# --------------------------------------------------------------------------- comparisons


SCOPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("overall", CATEGORIES),
    ("narrative", NARRATIVE),
    ("cultural", CULTURAL),
    ("accuracy", CATEGORIES),
    *((c, (c,)) for c in CATEGORIES),
)


def macro_cluster_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    categories: Sequence[str],
    clusters: Sequence[Any],
    metric: str,
    iters: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> dict[str, Any]:
    """``macro(a) - macro(b)`` for the authors' ``metric`` (overall/narrative/cultural: means of
    category accuracies, :func:`naru_eval.core.scoring.macro_levels`), paired, with a 95 % CI from
    resampling videos and recomputing both macro means on each replicate."""
    import numpy as np

    from naru_eval.report.stats import cluster_weights, macro_draws, percentile_interval, ratio

    n = len(a)
    if n == 0:
        return {"value": None, "ci95": None, "n": 0, "n_clusters": 0}
    ids = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    idx = np.fromiter((ids[c] for c in clusters), dtype=np.int64, count=n)
    cat = np.fromiter((CATEGORIES.index(c) for c in categories), dtype=np.int64, count=n)
    v, k = len(ids), len(CATEGORIES)

    def sums(x: Sequence[float]) -> np.ndarray:  # (V, 9) per-video, per-category sums
        out = np.zeros((v, k))
        np.add.at(out, (idx, cat), np.asarray(x, dtype=float))
        return out

    sa, sb = sums(a), sums(b)
    sn = sums([1.0] * n)

    def macro(w: np.ndarray) -> np.ndarray:  # (R, V) cluster weights -> (R,) macro(a) - macro(b)
        den = w @ sn
        return macro_draws(100.0 * ratio(w @ sa, den))[metric] - macro_draws(100.0 * ratio(w @ sb, den))[metric]

    value = float(macro(np.ones((1, v)))[0])
    ci = None
    if v >= 2 and iters > 0:
        # the resampling of naru_eval.report.stats (whole videos, with replacement), seeded
        ci = percentile_interval(macro(cluster_weights(np.random.default_rng(seed), v, iters)))
    return {"value": value, "ci95": ci, "n": n, "n_clusters": v}


def _macro_pct(units: Sequence[Unit], metric: str) -> float | None:
    by: dict[str, list[bool]] = {}
    for u in units:
        by.setdefault(u.category, []).append(u.correct)
    return macro_levels({c: 100.0 * sum(x) / len(x) for c, x in by.items()})[metric]


def paired_gap(
    a: Mapping[str, Unit], b: Mapping[str, Unit], iters: int, seed: int, name: str, scopes: bool = False
) -> dict[str, Any]:
    """``acc(a) - acc(b)`` over the questions both have, with a paired cluster-bootstrap CI.

    The top level is the gap in accuracy over all those questions (micro). ``by_scope``: the
    authors' overall/narrative/cultural (means of category accuracies, recomputed on every
    resample), ``accuracy`` (micro, as the top level) and each category."""
    common = sorted(a.keys() & b.keys())

    def one(qids: list[str], tag: str, macro: str | None = None) -> dict[str, Any]:
        if macro:
            st = macro_cluster_bootstrap(
                [a[q].correct for q in qids],
                [b[q].correct for q in qids],
                [a[q].category for q in qids],
                [a[q].video_id for q in qids],
                macro,
                iters=iters,
                seed=seed_for(seed, f"{name}|{tag}"),
            )
            acc_a, acc_b = _macro_pct([a[q] for q in qids], macro), _macro_pct([b[q] for q in qids], macro)
        else:
            st = cluster_bootstrap(
                [a[q].correct for q in qids],
                [a[q].video_id for q in qids],
                b=[b[q].correct for q in qids],
                iters=iters,
                seed=seed_for(seed, f"{name}|{tag}"),
            )
            acc_a = _pct(sum(a[q].correct for q in qids), len(qids))
            acc_b = _pct(sum(b[q].correct for q in qids), len(qids))
        return {
            "n": len(qids),
            "n_videos": st["n_clusters"],
            "a_accuracy": acc_a,
            "b_accuracy": acc_b,
            "gap": st["value"],
            "ci95": st["ci95"],
        }

    out = one(common, "overall")
    if scopes:
        out["by_scope"] = {
            scope: one([q for q in common if a[q].category in cats], scope, scope if scope in MACRO_METRICS else None)
            for scope, cats in SCOPES
            if any(a[q].category in cats for q in common)
        }
    return out


def _best_partner(target: RunLog, candidates: Sequence[RunLog], preferred: Sequence[str]) -> RunLog | None:
    """The run to compare with: a preferred task name first, else the largest question overlap."""
    ids = set(units_of(target))
    scored = []
    for c in candidates:
        overlap = len(ids & set(units_of(c)))
        if overlap:
            rank = preferred.index(c.task) if c.task in preferred else len(preferred)
            scored.append((rank, -overlap, c.task, c))
    return min(scored, key=lambda t: t[:3])[3] if scored else None


def blind_vs_video(runs: Sequence[RunLog], iters: int, seed: int) -> list[dict[str, Any]]:
    """Video minus blind accuracy per model, on the questions both runs answered."""
    out = []
    for b in runs:
        if b.kind != "blind":
            continue
        plain = [r for r in runs if r.group == b.group and r.kind == "plain"]
        base = b.task[: -len("_blind")] if b.task.endswith("_blind") else b.task
        v = _best_partner(b, plain, [base, "naru_mcq_500", "naru_mcq"])
        if v is None:
            continue
        name = f"blind|{v.label}|{b.label}"
        gap = paired_gap(units_of(v), units_of(b), iters, seed, name, scopes=True)
        _rename(gap, "video_accuracy", "blind_accuracy")
        out.append({"group": b.group, "video_run": v.label, "blind_run": b.label, **gap})
    return out


def circular_vs_plain(runs: Sequence[RunLog], iters: int, seed: int) -> list[dict[str, Any]]:
    """Circular minus plain accuracy: against rotation 0 of the same run, and the plain run."""
    out = []
    for c in runs:
        if c.kind != "circular":
            continue
        circ = units_of(c)
        gap = paired_gap(circ, rotation0_units(c), iters, seed, f"circ|{c.label}|r0")
        _rename(gap, "circular_accuracy", "plain_accuracy")
        out.append({"group": c.group, "circular_run": c.label, "plain_run": f"{c.label} (rotation 0)", **gap})
        plain = [r for r in runs if r.group == c.group and r.kind == "plain"]
        base = c.task[: -len("_circular")] if c.task.endswith("_circular") else "naru_mcq_500"
        p = _best_partner(c, plain, [base, "naru_mcq_500", "naru_mcq"])
        if p is not None:
            gap = paired_gap(circ, units_of(p), iters, seed, f"circ|{c.label}|{p.label}")
            _rename(gap, "circular_accuracy", "plain_accuracy")
            out.append({"group": c.group, "circular_run": c.label, "plain_run": p.label, **gap})
    return out


def _rename(d: dict[str, Any], a_name: str, b_name: str) -> None:
    for x in [d, *d.get("by_scope", {}).values()]:
        x[a_name] = x.pop("a_accuracy")
        x[b_name] = x.pop("b_accuracy")


def _binom_tail(n: int, k: int, p: float = 0.25) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1))


def default_leak_min(n_models: int) -> int:
    """All blind runs when there are one or two, else a strict majority."""
    return n_models if n_models <= 2 else n_models // 2 + 1


def shortcut_candidates(runs: Sequence[RunLog], min_correct: int | None = None) -> dict[str, Any] | None:
    """Questions answered correctly by the blind runs of at least ``min_correct`` models.

    One verdict per model (log directory) and question: a model with both blind tasks counts
    once (its larger run decides). ``expected_by_chance`` is how many questions would reach the
    threshold if every model guessed uniformly (p = 1/4), for scale.
    """
    blind = [r for r in runs if r.kind == "blind"]
    if not blind:
        return None
    verdicts: dict[str, dict[str, Unit]] = {}
    for r in sorted(blind, key=lambda r: -len(r.records)):
        mine = verdicts.setdefault(r.group, {})
        for q, u in units_of(r).items():
            mine.setdefault(q, u)
    models = sorted(verdicts)
    k = default_leak_min(len(models)) if min_correct is None else int(min_correct)
    questions = sorted({q for v in verdicts.values() for q in v})
    listed: list[dict[str, Any]] = []
    expected = 0.0
    for q in questions:
        have = [m for m in models if q in verdicts[m]]
        right = [m for m in have if verdicts[m][q].correct]
        expected += _binom_tail(len(have), k)
        if len(right) >= k:
            u = verdicts[right[0]][q]
            listed.append(
                {
                    "question_id": q,
                    "video_id": u.video_id,
                    "category": u.category,
                    "gold": u.gold,
                    "n_correct": len(right),
                    "n_models": len(have),
                    "models": right,
                }
            )
    listed.sort(key=lambda x: (-x["n_correct"], x["question_id"]))
    return {
        "min_correct": k,
        "n_models": len(models),
        "models": models,
        "n_questions": len(questions),
        "n_candidates": len(listed),
        "expected_by_chance": expected,
        "by_category": dict(sorted(Counter(x["category"] for x in listed).items())),
        "questions": listed,
    }


# --------------------------------------------------------------------------- the report


def analyse_run(run: RunLog, edges_min: Sequence[float], iters: int, seed: int) -> dict[str, Any]:
    metrics = recompute_metrics(run)
    recomputes = None
    if run.reported is not None:
        recomputes = all(close(run.reported.get(m), metrics.get(m), 1e-6) for m in metrics)
    units = units_of(run)
    return {
        "label": run.label,
        "group": run.group,
        "task": run.task,
        "kind": run.kind,
        "samples": str(run.samples_path),
        "results": str(run.results_path) if run.results_path else None,
        "model": run.model,
        "model_args": run.model_args,
        "n_docs": len(run.records),
        "n_questions": len(units),
        "n_videos": len({u.video_id for u in units.values()}),
        "metrics": metrics,
        "reported": run.reported,
        "recomputes": recomputes,
        "letters": letter_distribution(run.records),
        "invalid": invalid_breakdown(run.records),
        "duration": {
            "measure": "circular" if run.kind == "circular" else "accuracy",
            "n_unknown": sum(u.duration_s is None for u in units.values()),
            "buckets": duration_accuracy(units.values(), edges_min, iters, seed, f"dur|{run.label}"),
        },
    }


def diagnose(
    paths: Sequence[str | Path],
    edges_min: Sequence[float] = DEFAULT_EDGES_MIN,
    iters: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    leak_min: int | None = None,
    data_dir: str | Path | None = None,
) -> dict[str, Any]:
    """The whole report (a JSON-serialisable dict) for the runs under ``paths``."""
    edges = [float(e) for e in edges_min]
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise ValueError(f"duration edges must be at least two increasing numbers, got {edges_min!r}")
    runs, skipped, superseded = discover_runs(paths)
    filled = fill_durations(runs, data_dir) if data_dir else 0
    report = {
        "naru_eval_diagnose": 1,
        "settings": {
            "paths": [str(p) for p in paths],
            "duration_edges_min": edges,
            "bootstrap_iters": iters,
            "seed": seed,
            "ci": "95% percentile bootstrap, videos resampled (paired for gaps)",
            "data_dir": str(data_dir) if data_dir else None,
            "durations_filled": filled,
        },
        "runs": [analyse_run(r, edges, iters, seed) for r in runs],
        "blind_vs_video": blind_vs_video(runs, iters, seed),
        "circular_vs_plain": circular_vs_plain(runs, iters, seed),
        "shortcut_candidates": shortcut_candidates(runs, leak_min),
        "skipped": skipped,
        "superseded": superseded,
    }
    # built as the typed report (a field that does not fit is a bug here, caught at once), and
    # handed on as its JSON form, which the text summary, the plots and ``--json`` read
    return DiagnosticsReport.model_validate(report).model_dump(mode="json", exclude_unset=True)


# --------------------------------------------------------------------------- text and plots


def _ci(ci: Sequence[float] | None) -> str:
    return f" {fmt_ci(ci)}" if ci else ""


def summary_text(report: Mapping[str, Any]) -> str:
    """A short human-readable summary (Markdown) of a report."""
    lines = ["# NARU diagnostics", ""]
    if not report["runs"]:
        lines.append("No NARU sample logs found.")
    for r in report["runs"]:
        m, lt, inv = r["metrics"], r["letters"], r["invalid"]
        head = "circular" if r["kind"] == "circular" else "overall"
        lines.append(f"## {r['label']} ({r['kind']}, {r['n_questions']} questions, {r['n_videos']} videos)")
        extra = (
            ""
            if r["recomputes"] is None
            else ("; matches results.json" if r["recomputes"] else "; DIFFERS from results.json")
        )
        if r["kind"] == "circular":
            lines.append(
                f"- circular {fmt_num(m['circular'])}, accuracy_r0 {fmt_num(m['accuracy_r0'])}, "
                f"accuracy_all {fmt_num(m['accuracy_all'])}{extra}"
            )
        else:
            lines.append(
                f"- {head} {fmt_num(m['overall'])}, narrative {fmt_num(m['narrative'])}, cultural {fmt_num(m['cultural'])}{extra}"
            )
        lines.append(
            "- letters picked / gold (%): "
            + ", ".join(f"{x} {fmt_num(lt['pred_pct'][x], 0)}/{fmt_num(lt['gold_pct'][x], 0)}" for x in LETTERS)
            + f"; TV distance {fmt_num(lt['tv_distance_pp'])} pp"
        )
        kinds = ", ".join(f"{k} {n}" for k, n in inv["kinds"].items() if n)
        lines.append(f"- invalid {fmt_num(inv['rate'])} %" + (f" ({kinds})" if kinds else ""))
        buckets = "; ".join(
            f"{b['bucket']}: {fmt_num(b['accuracy'])}{_ci(b['ci95'])} (n={b['n']})" for b in r["duration"]["buckets"]
        )
        lines.append(f"- {r['duration']['measure']} by duration: {buckets}")
        lines.append("")
    if report["blind_vs_video"]:
        lines.append("## Blind vs video (video minus blind, pp, 95% CI)")
        for g in report["blind_vs_video"]:
            lines.append(
                f"- {g['video_run']} vs {g['blind_run']}: {fmt_num(g['video_accuracy'])} vs {fmt_num(g['blind_accuracy'])}, "
                f"gap {fmt_num(g['gap'])}{_ci(g['ci95'])} (n={g['n']})"
            )
        lines.append("")
    if report["circular_vs_plain"]:
        lines.append("## Circular vs plain (circular minus plain, pp, 95% CI)")
        for g in report["circular_vs_plain"]:
            lines.append(
                f"- {g['circular_run']} vs {g['plain_run']}: {fmt_num(g['circular_accuracy'])} vs "
                f"{fmt_num(g['plain_accuracy'])}, gap {fmt_num(g['gap'])}{_ci(g['ci95'])} (n={g['n']})"
            )
        lines.append("")
    sc = report["shortcut_candidates"]
    if sc:
        lines.append(
            f"## Shortcut candidates: {sc['n_candidates']} question(s) right in >= {sc['min_correct']} of "
            f"{sc['n_models']} blind run(s) (expected by chance: {sc['expected_by_chance']:.1f})"
        )
        for q in sc["questions"][:20]:
            lines.append(f"- {q['question_id']} ({q['category']}, {q['video_id']}): {q['n_correct']}/{q['n_models']}")
        if sc["n_candidates"] > 20:
            lines.append(f"- ... {sc['n_candidates'] - 20} more in the JSON")
        lines.append("")
    if report.get("plots"):
        lines.append("Plots: " + ", ".join(report["plots"]))
    return "\n".join(lines).rstrip() + "\n"


def write_plots(report: Mapping[str, Any], out_dir: str | Path, stem: str) -> list[str]:
    """PNG plots of a report under ``out_dir`` (``<stem>_letters.png`` …); returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = report["runs"]
    paths: list[str] = []
    if not runs:
        return paths

    def save(fig: Any, name: str) -> None:
        p = out_dir / f"{stem}_{name}.png"
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(str(p))

    # letters: picked (share of valid answers) against gold, per run
    ncols = min(3, len(runs))
    nrows = math.ceil(len(runs) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False)
    x = np.arange(len(LETTERS))
    for ax, r in zip(axes.flat, runs, strict=False):
        lt = r["letters"]
        ax.bar(x - 0.2, [lt["pred_pct"][k] or 0 for k in LETTERS], 0.4, label="picked (% of valid)")
        ax.bar(x + 0.2, [lt["gold_pct"][k] or 0 for k in LETTERS], 0.4, label="gold (%)", alpha=0.7)
        ax.set_xticks(x, list(LETTERS))
        ax.set_title(f"{r['label']}\ninvalid {fmt_num(r['invalid']['rate'])} %", fontsize=8)
        ax.set_ylim(0, 100)
    for ax in list(axes.flat)[len(runs) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    save(fig, "letters")

    # invalid kinds: stacked, percent of all answers
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(runs) + 1.5))
    left = np.zeros(len(runs))
    kinds = list(INVALID_KINDS)
    for k in kinds:
        shares = np.array([r["invalid"]["kinds_pct"].get(k) or 0.0 for r in runs])
        ax.barh(range(len(runs)), shares, left=left, label=k)
        left += shares
    ax.set_yticks(range(len(runs)), [r["label"] for r in runs], fontsize=7)
    ax.set_xlim(0, max(1.0, float(left.max()) * 1.15))
    ax.set_xlabel("invalid answers (% of all answers)")
    ax.legend(fontsize=7, ncol=4)
    save(fig, "invalid")

    # accuracy by duration bucket, with CIs
    labels = list(dict.fromkeys(b["bucket"] for r in runs for b in r["duration"]["buckets"]))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(labels) * max(1, len(runs)) / 2), 4))
    width = 0.8 / len(runs)
    for i, r in enumerate(runs):
        by = {b["bucket"]: b for b in r["duration"]["buckets"]}
        vals: list[float] = []
        errs: list[list[float]] = [[], []]
        for lab in labels:
            b = by.get(lab)
            v = b["accuracy"] if b and b["accuracy"] is not None else np.nan
            vals.append(v)
            ci = b["ci95"] if b and b["ci95"] else None
            errs[0].append(v - ci[0] if ci else 0)
            errs[1].append(ci[1] - v if ci else 0)
        ax.bar(np.arange(len(labels)) + i * width, vals, width, yerr=errs, capsize=2, label=r["label"])
    ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels, fontsize=8)
    ax.set_xlim(-0.3, len(labels) - 0.1)
    ax.set_ylabel("accuracy (%; circular runs: circular)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=6)
    save(fig, "duration")

    # gaps with CIs
    gaps = [(f"{g['video_run']} - blind", g) for g in report["blind_vs_video"]]
    gaps += [(f"{g['circular_run']} - {g['plain_run']}", g) for g in report["circular_vs_plain"]]
    if gaps:
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(gaps) + 1.5))
        for i, (_name, g) in enumerate(gaps):
            v = g["gap"] if g["gap"] is not None else np.nan
            ci = g["ci95"]
            err = [[v - ci[0]], [ci[1] - v]] if ci else None
            ax.errorbar([v], [i], xerr=err, fmt="o", capsize=3)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(range(len(gaps)), [n for n, _ in gaps], fontsize=7)
        ax.set_xlabel("gap (percentage points, 95% CI)")
        save(fig, "gaps")
    return paths


def write_report(report: dict[str, Any], output: str | Path, plots: bool = True) -> Path:
    """Write the JSON (and, with ``plots``, the PNGs next to it); return the JSON path."""
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    if plots:
        report["plots"] = write_plots(report, out.parent, out.stem)
    out.write_text(dump_json(validate_doc(DiagnosticsReport, report, out)), encoding="utf-8")
    return out
