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

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from naru_eval.core.data import LETTERS
from naru_eval.core.extract import INVALID_KINDS
from naru_eval.core.json_types import JSON, JSONMapping, JSONObject, integer
from naru_eval.core.runfiles import mismatched, read_records
from naru_eval.core.scoring import METRICS, ForeignLogError
from naru_eval.core.variants import CIRCULAR_METRICS, circular_correct
from naru_eval.report.gaps import DEFAULT_BOOTSTRAP, PairedGap, Unit, cluster_bootstrap, paired_gap, pct, seed_for
from naru_eval.report.models import (
    DiagnoseSettings,
    DiagnosticsReport,
    DurationBucket,
    DurationSection,
    Gap,
    InvalidBreakdown,
    LetterDistribution,
    RunDiagnosis,
    ScopeGap,
    ShortcutCandidates,
    ShortcutQuestion,
)
from naru_eval.report.runs import RunLog, discover, latest

__all__ = ["read_records"]  # the one reader of sample logs, re-exported for the variant tests

#: Default duration-bucket edges in minutes: 30-60, 60-120, 120-240 (NARU's videos).
DEFAULT_EDGES_MIN: tuple[float, ...] = (30.0, 60.0, 120.0, 240.0)
UNKNOWN = "unknown"
INVALID = "invalid"


# --------------------------------------------------------------------------- reading runs


@dataclass
class Diagnosed:
    """One MCQ run as diagnose reads it: the run (:class:`naru_eval.report.runs.RunLog`), the model
    group it belongs to (the directory holding its log), and its per-question records."""

    run: RunLog
    group: str
    kind: str  # "plain", "blind" or "circular"
    records: list[JSONObject] = field(repr=False)

    @property
    def label(self) -> str:
        return f"{self.group}:{self.task}"

    @property
    def task(self) -> str:
        return self.run.task

    @property
    def reported(self) -> dict[str, float | None] | None:
        """The task's metrics in results.json (None when there is no results file)."""
        rep = self.run.reported
        if rep is None or self.run.results is None or self.task not in self.run.results.tasks:
            return None
        names = CIRCULAR_METRICS if self.kind == "circular" else METRICS
        return {m: rep.get(m) for m in names}


def discover_runs(paths: Sequence[str | Path]) -> tuple[list[Diagnosed], list[dict[str, str]], list[str]]:
    """Every NARU MCQ sample log under ``paths`` (directories, sample logs or results files), the
    latest of each (folder, task) (:func:`naru_eval.report.runs.latest`).

    Returns ``(runs, skipped, superseded)``: ``skipped`` lists logs that are not NARU MCQ logs,
    ``superseded`` older logs of a task run again in the same directory. A truncated or empty
    log is an error (:class:`~naru_eval.core.scoring.SampleLogError`, naming the file and line).
    """
    found = discover(paths)
    kept, superseded = latest(found.runs)
    labels = _group_labels({r.samples_path.resolve().parent: r.root for r in kept})
    runs: list[Diagnosed] = []
    skipped: list[dict[str, str]] = []
    for run in sorted(kept, key=lambda r: (labels[r.samples_path.resolve().parent], r.task)):
        try:
            log = run.read()
        except ForeignLogError:
            skipped.append({"samples": str(run.samples_path), "why": "not a NARU sample log (no question payloads)"})
            continue
        if log.kind == "open":
            skipped.append({"samples": str(run.samples_path), "why": "a naru_open log (diagnose reads MCQ logs)"})
            continue
        records = [{k: v for k, v in r.items() if k != "score"} for r in log.records]
        runs.append(Diagnosed(run, labels[run.samples_path.resolve().parent], log.kind, records))
    return runs, skipped, superseded


def _group_labels(folders: Mapping[Path, Path]) -> dict[Path, str]:
    """A short, unique label per log directory: the argument's name plus the path below it."""
    labels: dict[Path, str] = {}
    for folder, base in folders.items():
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


def fill_durations(runs: Sequence[Diagnosed], data_dir: str | Path, probe: bool = True) -> int:
    """Fill records without ``duration_s`` from a NARU data directory; return how many.

    Uses the annotations' ``duration_s``; with ``probe``, videos without one are opened
    (container metadata only) for theirs.
    """
    from naru_eval.core.data import load_local

    ds = load_local(data_dir, strict=False)
    by_q = {q.question_id: q for q in ds.questions}
    need = {
        str(r.get("base_question_id") or r["question_id"])
        for run in runs
        for r in run.records
        if not r.get("duration_s")
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
            if not r.get("duration_s"):
                d = durations.get(str(r.get("base_question_id") or r["question_id"]))
                if d:
                    r["duration_s"] = d
                    filled += 1
    return filled


# --------------------------------------------------------------------------- statistics


def _diff(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def _or_minus_inf(v: float | None) -> float:
    return v if v is not None else -math.inf


def letter_distribution(records: Sequence[JSONMapping]) -> LetterDistribution:
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
    pred_pct = {x: pct(pred[x], n_valid) for x in LETTERS}
    gold_pct = {x: pct(gold[x], n) for x in LETTERS}
    excess = {x: _diff(pred_pct[x], gold_pct[x]) for x in LETTERS}
    tv = 0.5 * sum(abs(e) for e in excess.values() if e is not None) if n_valid else None
    top = max(LETTERS, key=lambda x: _or_minus_inf(excess[x])) if n_valid else None
    return LetterDistribution(
        n=n,
        n_valid=n_valid,
        pred={**{x: pred[x] for x in LETTERS}, INVALID: n - n_valid},
        gold={x: gold[x] for x in LETTERS},
        pred_pct=pred_pct,
        gold_pct=gold_pct,
        excess_pp=excess,
        tv_distance_pp=tv,
        most_over_picked=top,
    )


def invalid_breakdown(records: Sequence[JSONMapping]) -> InvalidBreakdown:
    """Invalid-answer rate and the count of each kind (percent of all answers in ``kinds_pct``)."""
    n = len(records)
    kinds: Counter[str] = Counter()
    for r in records:
        if not r.get("valid"):
            method = str(r.get("method") or "")
            kinds[method.split(":", 1)[1] if method.startswith("invalid:") else "no_letter"] += 1
    n_invalid = sum(kinds.values())
    order = list(INVALID_KINDS) + sorted(k for k in kinds if k not in INVALID_KINDS)
    return InvalidBreakdown(
        n=n,
        n_invalid=n_invalid,
        rate=pct(n_invalid, n),
        kinds={k: kinds[k] for k in order},
        kinds_pct={k: pct(kinds[k], n) for k in order},
    )


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


def _unit(qid: str, r: JSONMapping, correct: bool, gold: JSON = None) -> Unit:
    """The outcome of question ``qid`` from its record ``r`` (``gold``: the record's unless given)."""
    duration = r.get("duration_s")
    return Unit(
        qid,
        str(r["video_id"]),
        str(r["category"]),
        str(gold or r["gold"]),
        duration if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None,
        correct,
    )


def units_of(run: Diagnosed) -> dict[str, Unit]:
    """question_id -> outcome. Circular runs: the base question, right only in all rotations."""
    if run.kind != "circular":
        return {str(r["question_id"]): _unit(str(r["question_id"]), r, bool(r["correct"])) for r in run.records}
    verdicts = circular_correct(run.records)
    first: dict[str, JSONMapping] = {}
    for r in sorted(run.records, key=lambda r: integer(r["rotation"])):
        first.setdefault(str(r["base_question_id"]), r)
    return {q: _unit(q, first[q], ok, first[q].get("base_gold")) for q, ok in verdicts.items()}


def rotation0_units(run: Diagnosed) -> dict[str, Unit]:
    """A circular run's plain accuracy: rotation 0 (the original order) of each question."""
    return {
        str(r["base_question_id"]): _unit(str(r["base_question_id"]), r, bool(r["correct"]))
        for r in run.records
        if integer(r["rotation"]) == 0
    }


def duration_accuracy(
    units: Iterable[Unit], edges_min: Sequence[float], iters: int, seed: int, name: str
) -> list[DurationBucket]:
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
            DurationBucket(
                bucket=label, n=len(us), n_videos=len({u.video_id for u in us}), accuracy=st["value"], ci95=st["ci95"]
            )
        )
    return out


def recompute_metrics(run: Diagnosed) -> dict[str, float | None]:
    """The task's metrics from the log alone (the numbers results.json should hold)."""
    return run.run.read().metrics()


# --------------------------------------------------------------------------- comparisons


def _best_partner(target: Diagnosed, candidates: Sequence[Diagnosed], preferred: Sequence[str]) -> Diagnosed | None:
    """The run to compare with: a preferred task name first, else the largest question overlap."""
    ids = set(units_of(target))
    scored = []
    for c in candidates:
        overlap = len(ids & set(units_of(c)))
        if overlap:
            rank = preferred.index(c.task) if c.task in preferred else len(preferred)
            scored.append((rank, -overlap, c.task, c))
    return min(scored, key=lambda t: t[:3])[3] if scored else None


def blind_vs_video(runs: Sequence[Diagnosed], iters: int, seed: int) -> list[Gap]:
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
        g = paired_gap(units_of(v), units_of(b), iters, seed, name, scopes=True)
        gap = Gap(
            group=b.group,
            video_run=v.label,
            blind_run=b.label,
            n=g.n,
            n_videos=g.n_videos,
            gap=g.gap,
            ci95=g.ci95,
            video_accuracy=g.a_accuracy,
            blind_accuracy=g.b_accuracy,
        )
        if g.by_scope is not None:
            gap.by_scope = {
                scope: ScopeGap(
                    n=s.n,
                    n_videos=s.n_videos,
                    gap=s.gap,
                    ci95=s.ci95,
                    video_accuracy=s.a_accuracy,
                    blind_accuracy=s.b_accuracy,
                )
                for scope, s in g.by_scope.items()
            }
        out.append(gap)
    return out


def circular_vs_plain(runs: Sequence[Diagnosed], iters: int, seed: int) -> list[Gap]:
    """Circular minus plain accuracy: against rotation 0 of the same run, and the plain run."""
    out = []
    for c in runs:
        if c.kind != "circular":
            continue
        circ = units_of(c)
        g = paired_gap(circ, rotation0_units(c), iters, seed, f"circ|{c.label}|r0")
        out.append(_circular_gap(c, f"{c.label} (rotation 0)", g))
        plain = [r for r in runs if r.group == c.group and r.kind == "plain"]
        base = c.task[: -len("_circular")] if c.task.endswith("_circular") else "naru_mcq_500"
        p = _best_partner(c, plain, [base, "naru_mcq_500", "naru_mcq"])
        if p is not None:
            g = paired_gap(circ, units_of(p), iters, seed, f"circ|{c.label}|{p.label}")
            out.append(_circular_gap(c, p.label, g))
    return out


def _circular_gap(c: Diagnosed, plain_run: str, g: PairedGap) -> Gap:
    return Gap(
        group=c.group,
        circular_run=c.label,
        plain_run=plain_run,
        n=g.n,
        n_videos=g.n_videos,
        gap=g.gap,
        ci95=g.ci95,
        circular_accuracy=g.a_accuracy,
        plain_accuracy=g.b_accuracy,
    )


def _binom_tail(n: int, k: int, p: float = 0.25) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1))


def default_leak_min(n_models: int) -> int:
    """All blind runs when there are one or two, else a strict majority."""
    return n_models if n_models <= 2 else n_models // 2 + 1


def shortcut_candidates(runs: Sequence[Diagnosed], min_correct: int | None = None) -> ShortcutCandidates | None:
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
    listed: list[ShortcutQuestion] = []
    expected = 0.0
    for q in questions:
        have = [m for m in models if q in verdicts[m]]
        right = [m for m in have if verdicts[m][q].correct]
        expected += _binom_tail(len(have), k)
        if len(right) >= k:
            u = verdicts[right[0]][q]
            listed.append(
                ShortcutQuestion(
                    question_id=q,
                    video_id=u.video_id,
                    category=u.category,
                    gold=u.gold,
                    n_correct=len(right),
                    n_models=len(have),
                    models=right,
                )
            )
    listed.sort(key=lambda x: (-x.n_correct, x.question_id))
    return ShortcutCandidates(
        min_correct=k,
        n_models=len(models),
        models=models,
        n_questions=len(questions),
        n_candidates=len(listed),
        expected_by_chance=expected,
        by_category=dict(sorted(Counter(x.category for x in listed).items())),
        questions=listed,
    )


# --------------------------------------------------------------------------- the report


def analyse_run(run: Diagnosed, edges_min: Sequence[float], iters: int, seed: int) -> RunDiagnosis:
    metrics = recompute_metrics(run)
    recomputes = None
    if run.reported is not None:
        recomputes = not mismatched(run.reported, metrics)
    units = units_of(run)
    return RunDiagnosis(
        label=run.label,
        group=run.group,
        task=run.task,
        kind=run.kind,
        samples=str(run.run.samples_path),
        results=str(run.run.results.path) if run.run.results else None,
        adapter=run.run.adapter,
        model_args=run.run.config.model_args,
        n_docs=len(run.records),
        n_questions=len(units),
        n_videos=len({u.video_id for u in units.values()}),
        metrics=dict(metrics),
        reported=dict(run.reported) if run.reported is not None else None,
        recomputes=recomputes,
        letters=letter_distribution(run.records),
        invalid=invalid_breakdown(run.records),
        duration=DurationSection(
            measure="circular" if run.kind == "circular" else "accuracy",
            n_unknown=sum(u.duration_s is None for u in units.values()),
            buckets=duration_accuracy(units.values(), edges_min, iters, seed, f"dur|{run.label}"),
        ),
    )


def diagnose(
    paths: Sequence[str | Path],
    edges_min: Sequence[float] = DEFAULT_EDGES_MIN,
    iters: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    leak_min: int | None = None,
    data_dir: str | Path | None = None,
) -> DiagnosticsReport:
    """The whole report for the runs under ``paths`` (its JSON: ``dump_json``, the fields set)."""
    edges = [float(e) for e in edges_min]
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise ValueError(f"duration edges must be at least two increasing numbers, got {edges_min!r}")
    runs, skipped, superseded = discover_runs(paths)
    filled = fill_durations(runs, data_dir) if data_dir else 0
    return DiagnosticsReport(
        naru_eval_diagnose=1,
        settings=DiagnoseSettings(
            paths=[str(p) for p in paths],
            duration_edges_min=edges,
            bootstrap_iters=iters,
            seed=seed,
            ci="95% percentile bootstrap, videos resampled (paired for gaps)",
            data_dir=str(data_dir) if data_dir else None,
            durations_filled=filled,
        ),
        runs=[analyse_run(r, edges, iters, seed) for r in runs],
        blind_vs_video=blind_vs_video(runs, iters, seed),
        circular_vs_plain=circular_vs_plain(runs, iters, seed),
        shortcut_candidates=shortcut_candidates(runs, leak_min),
        skipped=skipped,
        superseded=superseded,
    )
