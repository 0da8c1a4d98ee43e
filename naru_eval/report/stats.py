"""Uncertainty for NARU accuracies: bootstrap intervals clustered by video and paired run comparisons.

About ten questions share a video, and a model that misreads a video tends to miss all of its
questions, so questions are not independent. Every interval and test here therefore resamples
or permutes whole **videos** (clusters), never single questions:

* :func:`bootstrap_ci`: percentile bootstrap over videos (resample videos with replacement, seeded)
  of every metric, recomputed the way the task reports it: per-item metrics (``accuracy``, a
  category, ``invalid_rate``) as score sum / questions in scope, and the authors' macro metrics
  (``overall``, ``narrative``, ``cultural``) as the same mean of category means
  (:func:`naru_eval.core.metrics.macro_levels`) on each resample; :func:`bootstrap_open_ci` is the
  same bootstrap for ``naru_open`` (recall 0-1; ``overall`` = mean of the nine category recalls);
* :func:`compare`: two runs paired by ``question_id``: the difference of each metric (B - A, in
  percentage points), a paired bootstrap CI over videos, and a paired sign-flip permutation test
  (under "A and B are exchangeable", swapping A and B within a video leaves the distribution
  unchanged; whole videos are swapped together), seeded, exact when few videos differ.

Everything is computed from :class:`~naru_eval.core.scoring.ScoredSample` records, i.e. from the
lmms-eval sample logs (:func:`naru_eval.core.scoring.samples_from_log`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from naru_eval.core.data import CATEGORIES
from naru_eval.core.metrics import MetricTable, macro_levels
from naru_eval.core.numbers import NA, fmt_ci, fmt_num
from naru_eval.core.scoring import MCQ, METRICS, ScoredSample, compute_metrics

DEFAULT_BOOTSTRAP_REPS = 2000
DEFAULT_PERMUTATION_REPS = 10000
DEFAULT_SEED = 0
#: up to this many differing videos, the sign-flip test enumerates all 2^k flips (exact p-value)
EXACT_PERMUTATION_MAX_CLUSTERS = 14


@dataclass(frozen=True)
class ScoreTable:
    """Per-question scores (0/100) and scope masks for every metric, with each question's cluster."""

    question_ids: tuple[str, ...]
    cluster_of: np.ndarray  # (Q,) int index into cluster_names
    cluster_names: tuple[str, ...]
    scores: np.ndarray  # (Q, M) float: 100 when the metric's event happened, else 0
    mask: np.ndarray  # (Q, M) bool: question counts towards the metric
    metrics: tuple[str, ...]

    def cluster_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """(score sums, question counts) per cluster and metric, both (V, M)."""
        v = len(self.cluster_names)
        s = np.zeros((v, len(self.metrics)))
        n = np.zeros((v, len(self.metrics)))
        np.add.at(s, self.cluster_of, self.scores * self.mask)
        np.add.at(n, self.cluster_of, self.mask.astype(float))
        return s, n


def value_table(
    items: Sequence[Any],
    metrics: Sequence[str],
    table: MetricTable[Any],
    cluster: str = "video_id",
) -> ScoreTable:
    """Per-item values of ``metrics`` (the ``table``'s per-question values, None where the item
    does not count towards the metric), with each item's cluster (its ``cluster`` attribute)."""
    columns = [table[m] for m in metrics]
    names: dict[str, int] = {}
    cluster_of = np.empty(len(items), dtype=int)
    scores = np.zeros((len(items), len(metrics)))
    mask = np.zeros((len(items), len(metrics)), dtype=bool)
    for i, s in enumerate(items):
        key = str(getattr(s, cluster))
        cluster_of[i] = names.setdefault(key, len(names))
        for j, metric in enumerate(columns):
            v = metric.of(s)
            if v is not None:
                mask[i, j] = True
                scores[i, j] = float(v)
    return ScoreTable(
        question_ids=tuple(s.question_id for s in items),
        cluster_of=cluster_of,
        cluster_names=tuple(names),
        scores=scores,
        mask=mask,
        metrics=tuple(metrics),
    )


def score_table(
    samples: Sequence[ScoredSample], metrics: Sequence[str] = METRICS, cluster: str = "video_id"
) -> ScoreTable:
    """Scores of ``samples``; ``cluster`` is ``video_id`` (default) or ``question_id`` (no clustering)."""
    return value_table(samples, metrics, MCQ, cluster)


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` elementwise, NaN where ``den`` is 0 (a scope with no item in a resample)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def cluster_weights(rng: np.random.Generator, n_clusters: int, reps: int) -> np.ndarray:
    """(reps, V): how often each cluster is drawn when V clusters are drawn with replacement."""
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=reps).astype(float)


def percentile_interval(draws: np.ndarray, level: float = 0.95) -> list[float] | None:
    """The percentile interval of one statistic's bootstrap draws (NaN draws, replicates in which
    it had no item, left out); None when no draw is left. The one rule for every interval."""
    ci = _percentile_interval(np.asarray(draws, dtype=float).reshape(-1, 1), level)[0]
    return None if ci is None else [ci[0], ci[1]]


def _percentile_interval(draws: np.ndarray, level: float) -> list[tuple[float, float] | None]:
    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)
    out: list[tuple[float, float] | None] = []
    for col in draws.T:
        col = col[~np.isnan(col)]
        if col.size == 0:
            out.append(None)
        else:
            out.append((float(np.percentile(col, lo_q)), float(np.percentile(col, hi_q))))
    return out


def bootstrap_ci(
    samples: Sequence[ScoredSample],
    reps: int = DEFAULT_BOOTSTRAP_REPS,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
    cluster: str = "video_id",
    metrics: Sequence[str] = METRICS,
) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap interval of every multiple-choice metric, resampling whole clusters
    (videos): :func:`bootstrap_values` over the table :data:`~naru_eval.core.scoring.MCQ` (0/100
    scores, the authors' table II macro: ``overall`` = mean of the two levels)."""
    return bootstrap_values(samples, MCQ, metrics, reps, seed, level, cluster)


def bootstrap_open_ci(
    samples: Sequence[Any],
    reps: int = DEFAULT_BOOTSTRAP_REPS,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
    cluster: str = "video_id",
    metrics: Sequence[str] | None = None,
) -> dict[str, tuple[float, float] | None]:
    """The same bootstrap for ``naru_open`` (:class:`~naru_eval.judge.score.JudgedSample`s), over
    the table :data:`~naru_eval.judge.score.OPEN`: per-response values as the task aggregates them
    (recall 0-1, unscored responses left out), and the table III macro (``overall`` = mean of the
    nine category mean recalls, ``narrative``/``cultural`` = means of their categories) recomputed
    on each resample. ``metrics`` defaults to every per-response mean of the task."""
    from naru_eval.judge.score import OPEN

    return bootstrap_values(samples, OPEN, metrics or OPEN.per_item, reps, seed, level, cluster)


def bootstrap_values(
    items: Sequence[Any],
    table: MetricTable[Any],
    metrics: Sequence[str] | None = None,
    reps: int = DEFAULT_BOOTSTRAP_REPS,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
    cluster: str = "video_id",
) -> dict[str, tuple[float, float] | None]:
    """The one bootstrap: percentile interval of each of ``table``'s ``metrics`` (default: every
    per-item one, ``MetricTable.per_item``), resampling whole clusters (videos).

    Each replicate draws as many videos as there are, with replacement, and recomputes each
    per-item metric as (sum of values) / (items in scope) over the drawn videos' items, and each
    macro metric (``MetricTable.macro``) as :func:`macro_levels` of that replicate's category
    means (``overall`` as the table forms it). Replicates in which a metric has no item (a
    category absent from every drawn video) are ignored for that metric. ``None`` when the metric
    has no item at all.
    """
    metrics = tuple(metrics or table.per_item)
    if not items:
        return {m: None for m in metrics}
    values = value_table(items, metrics, table, cluster)
    s, n = values.cluster_sums()
    w = cluster_weights(np.random.default_rng(seed), len(values.cluster_names), reps)
    draws = ratio(w @ s, w @ n)
    cols = [j for j, m in enumerate(metrics) if m in table.macro]
    if cols:
        cs, cn = value_table(items, CATEGORIES, table, cluster).cluster_sums()
        macros = macro_draws(ratio(w @ cs, w @ cn), table.overall, table.macro)
        for j in cols:
            draws[:, j] = macros[metrics[j]]
    return dict(zip(metrics, _percentile_interval(draws, level), strict=True))


def _category_ratios(samples: Sequence[ScoredSample], cluster: str, w: np.ndarray) -> np.ndarray:
    """(reps, 9): each replicate's category accuracies (NaN where a category has no question)."""
    t = score_table(samples, CATEGORIES, cluster)
    cs, cn = t.cluster_sums()
    return ratio(w @ cs, w @ cn)


def macro_draws(
    cat_draws: np.ndarray, overall: str = "levels", macro: Sequence[str] = MCQ.macro
) -> dict[str, np.ndarray]:
    """The ``macro`` metrics (``overall``/``narrative``/``cultural``) of each replicate from its
    category means ((reps, 9) in CATEGORIES order), by the one definition :func:`macro_levels`
    (``overall``: ``"levels"`` for multiple choice, ``"categories"`` for open-ended)."""
    out = {m: np.full(cat_draws.shape[0], np.nan) for m in macro}
    for r, row in enumerate(cat_draws):
        for m, v in macro_levels(dict(zip(CATEGORIES, row.tolist(), strict=True)), overall).items():
            if m in out:
                out[m][r] = np.nan if v is None else v
    return out


def point_estimates(samples: Sequence[ScoredSample], metrics: Sequence[str] = METRICS) -> dict[str, float | None]:
    """The metrics as the task reports them (:func:`naru_eval.core.scoring.compute_metrics`)."""
    values = compute_metrics(samples)
    return {m: values[m] for m in metrics}


def macro_weights(samples: Sequence[ScoredSample], metric: str) -> dict[str, float]:
    """Category -> weight of its accuracy in the macro ``metric``: with the category counts fixed
    (a paired comparison), the macro mean is linear in the categories' accuracies, and these are
    its coefficients (read off :func:`macro_levels` itself, one unit category at a time)."""
    present = sorted({s.category for s in samples}, key=CATEGORIES.index)
    out = {}
    for c in present:
        v = macro_levels({k: (1.0 if k == c else 0.0) for k in present})[metric]
        out[c] = float(v or 0.0)
    return out


def counts(samples: Sequence[ScoredSample], metrics: Sequence[str] = METRICS) -> dict[str, int]:
    """Questions in scope per metric, plus ``videos``."""
    out = {m: sum(MCQ[m].of(s) is not None for s in samples) for m in metrics}
    out["videos"] = len({s.video_id for s in samples})
    return out


# --------------------------------------------------------------------------- paired comparison


class ComparisonRowDoc(BaseModel):
    """One metric of ``naru-eval compare``'s JSON: B - A with its interval and p-value."""

    metric: str
    n: int
    videos: int
    a: float | None
    b: float | None
    diff: float | None
    ci95: list[float] | None
    p: float | None
    p_exact: bool
    p_holm: float | None
    a_only: int
    b_only: int
    reading: str


class BootstrapSpec(BaseModel):
    reps: int
    seed: int
    level: float
    cluster: str = "video_id"


class PermutationSpec(BaseModel):
    reps: int
    seed: int
    cluster: str = "video_id"


class ComparisonDoc(BaseModel):
    """One task of ``naru-eval compare``'s JSON (:meth:`Comparison.as_doc`)."""

    input_modes: dict[str, str | None] = Field(description="the input mode of each run: `{a, b}`")
    across_inputs: bool = Field(description="the runs differ in input mode: an input ablation (`--across-inputs`)")
    paired_questions: int
    videos: int
    only_in_a: list[str]
    only_in_b: list[str]
    bootstrap: BootstrapSpec
    permutation: PermutationSpec
    rows: list[ComparisonRowDoc]
    notes: list[str]


class CompareReport(BaseModel):
    """``naru-eval compare --json`` / ``-o``: the two runs and each task's comparison."""

    a: str
    b: str
    tasks: dict[str, ComparisonDoc] = Field(default_factory=dict)


@dataclass
class MetricComparison:
    metric: str
    n: int  # paired questions in scope
    videos: int  # videos with at least one such question
    a: float | None
    b: float | None
    diff: float | None  # B - A, percentage points
    ci: tuple[float, float] | None
    p: float | None
    p_exact: bool
    a_only: int  # questions where only A has the event (e.g. A right, B wrong)
    b_only: int
    p_holm: float | None = None  # Holm-adjusted over the nine categories (category rows only)
    reading: str = ""

    def as_row(self) -> ComparisonRowDoc:
        return ComparisonRowDoc(
            metric=self.metric,
            n=self.n,
            videos=self.videos,
            a=self.a,
            b=self.b,
            diff=self.diff,
            ci95=list(self.ci) if self.ci else None,
            p=self.p,
            p_exact=self.p_exact,
            p_holm=self.p_holm,
            a_only=self.a_only,
            b_only=self.b_only,
            reading=self.reading,
        )


@dataclass
class Comparison:
    rows: list[MetricComparison]
    paired: int
    only_a: list[str]
    only_b: list[str]
    videos: int
    reps: int
    permutation_reps: int
    seed: int
    level: float
    notes: list[str] = field(default_factory=list)
    input_modes: tuple[str | None, str | None] = (None, None)

    @property
    def across_inputs(self) -> bool:
        """The two runs gave the model different inputs (an input ablation, asked for explicitly)."""
        a, b = self.input_modes
        return a is not None and b is not None and a != b

    def row(self, metric: str) -> MetricComparison:
        return next(r for r in self.rows if r.metric == metric)

    def as_doc(self) -> ComparisonDoc:
        return ComparisonDoc(
            input_modes={"a": self.input_modes[0], "b": self.input_modes[1]},
            across_inputs=self.across_inputs,
            paired_questions=self.paired,
            videos=self.videos,
            only_in_a=self.only_a,
            only_in_b=self.only_b,
            bootstrap=BootstrapSpec(reps=self.reps, seed=self.seed, level=self.level),
            permutation=PermutationSpec(reps=self.permutation_reps, seed=self.seed),
            rows=[r.as_row() for r in self.rows],
            notes=self.notes,
        )


def _sign_flip_p(d: np.ndarray, reps: int, rng: np.random.Generator) -> tuple[float, bool]:
    """Two-sided p-value of sum(d) under random sign flips of the cluster totals ``d``."""
    d = d[d != 0]
    observed = abs(d.sum())
    k = d.size
    if k == 0:
        return 1.0, True  # every flip gives 0: nothing differs
    tol = 1e-9 * max(1.0, observed)
    if k <= EXACT_PERMUTATION_MAX_CLUSTERS:
        bits = (np.arange(2**k)[:, None] >> np.arange(k)) & 1
        stats = np.abs((1 - 2 * bits) @ d)
        return float(np.mean(stats >= observed - tol)), True
    signs = rng.choice(np.array([-1.0, 1.0]), size=(reps, k))
    stats = np.abs(signs @ d)
    return float((1 + np.sum(stats >= observed - tol)) / (1 + reps)), False


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values (None entries are left out and returned as None)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type,return-value]
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    m = len(order)
    for rank, i in enumerate(order):
        adj = min(1.0, (m - rank) * float(pvalues[i]))  # type: ignore[arg-type]
        running = max(running, adj)
        out[i] = running
    return out


def margin_95(n: int, p: float = 0.5) -> float:
    """Half-width (pp) of a 95% normal interval of one accuracy on n independent questions."""
    return 1.96 * math.sqrt(p * (1 - p) / n) * 100 if n else float("nan")


def _reading(row: MetricComparison, alpha: float = 0.05) -> str:
    if row.diff is None or row.ci is None:
        return "no paired questions"
    if row.a_only == 0 and row.b_only == 0:
        return "no difference: both runs have the same outcome on every question"
    half = (row.ci[1] - row.ci[0]) / 2
    if row.p is not None and row.p < alpha and (row.ci[0] > 0 or row.ci[1] < 0):
        who = "B" if row.diff > 0 else "A"
        return f"{who} higher: the gap is outside the noise (p={row.p:.3g})"
    return f"not distinguishable: with n={row.n} over {row.videos} videos, gaps within about ±{half:.1f} pp are noise"


def compare(
    a: Sequence[ScoredSample],
    b: Sequence[ScoredSample],
    reps: int = DEFAULT_BOOTSTRAP_REPS,
    permutation_reps: int = DEFAULT_PERMUTATION_REPS,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
    metrics: Sequence[str] = METRICS,
    input_modes: tuple[str | None, str | None] | None = None,
    across_inputs: bool = False,
) -> Comparison:
    """Paired comparison of runs ``a`` and ``b`` on the questions both answered (B - A).

    Runs on different data are never compared. Runs that gave the model different inputs
    (``input_modes``, each run's as its log records it: naru_eval.core.runfiles.SampleLog.input_mode;
    by default the samples' ``input_mode``) are refused unless ``across_inputs`` asks for an input
    ablation: then they are paired per question and per category like any two runs, and the
    comparison says which input modes it compares."""
    fa = {s.data_fingerprint for s in a if s.data_fingerprint}
    fb = {s.data_fingerprint for s in b if s.data_fingerprint}
    if fa and fb and fa != fb:
        raise ValueError(
            f"the runs were computed on different data (fingerprints {', '.join(sorted(fa))} vs "
            f"{', '.join(sorted(fb))}); runs on different data are never compared"
        )
    if input_modes is None:
        input_modes = (
            ", ".join(sorted({s.input_mode for s in a if s.input_mode})) or None,
            ", ".join(sorted({s.input_mode for s in b if s.input_mode})) or None,
        )
    mode_a, mode_b = input_modes
    notes = []
    if mode_a and mode_b and mode_a != mode_b:
        if not across_inputs:
            raise ValueError(
                f"the runs gave the model different inputs (input mode {mode_a} vs {mode_b}); runs of different "
                "input modes are never paired unless an input ablation is asked for (--across-inputs)"
            )
        notes.append(
            f"input ablation: A's input mode {mode_a} against B's {mode_b}, paired per question and per category"
        )
    by_a = {s.question_id: s for s in a}
    by_b = {s.question_id: s for s in b}
    common = [q for q in by_a if q in by_b]
    only_a = sorted(set(by_a) - set(by_b))
    only_b = sorted(set(by_b) - set(by_a))
    mismatched = [q for q in common if (by_a[q].video_id, by_a[q].category) != (by_b[q].video_id, by_b[q].category)]
    if mismatched:
        raise ValueError(
            f"{len(mismatched)} question(s) have a different video or category in the two runs "
            f"(different data?): {', '.join(mismatched[:20])}"
        )
    if only_a or only_b:
        notes.append(
            f"{len(only_a)} question(s) only in A and {len(only_b)} only in B are left out; "
            "only questions both runs answered are compared"
        )
    sa = [by_a[q] for q in common]
    sb = [by_b[q] for q in common]
    ta = score_table(sa, metrics)
    tb = score_table(sb, metrics)
    s_a, n = ta.cluster_sums()
    s_b, _ = tb.cluster_sums()
    d = s_b - s_a  # (V, M) per-video difference of score sums
    rng = np.random.default_rng(seed)
    w = cluster_weights(rng, len(ta.cluster_names), reps) if common else np.zeros((0, 0))
    boot = ratio(w @ d, w @ n) if common else np.zeros((0, len(metrics)))
    if common and any(m in MCQ.macro for m in metrics):
        # a macro difference is the difference of the two runs' macro means on the same resample
        ma = macro_draws(_category_ratios(sa, "video_id", w))
        mb = macro_draws(_category_ratios(sb, "video_id", w))
        cat_a = score_table(sa, CATEGORIES)  # same question order, so the same video indices as ta
        cat_d = score_table(sb, CATEGORIES).cluster_sums()[0] - cat_a.cluster_sums()[0]  # (V, 9)
        n_cat = cat_a.mask.sum(axis=0)
        for j, m in enumerate(metrics):
            if m not in MCQ.macro:
                continue
            boot[:, j] = mb[m] - ma[m]
            # per-video contribution to the macro difference (linear in the category sums)
            coef = np.array([macro_weights(sa, m).get(c, 0.0) / n_cat[k] if n_cat[k] else 0.0
                             for k, c in enumerate(CATEGORIES)])  # fmt: skip
            d[:, j] = cat_d @ coef  # sums to macro(B) - macro(A): the sign-flip test's statistic
    cis = _percentile_interval(boot, level) if common else [None] * len(metrics)
    pa = point_estimates(sa, metrics) if common else {m: None for m in metrics}
    pb = point_estimates(sb, metrics) if common else {m: None for m in metrics}
    perm_rng = np.random.default_rng(seed + 1)
    rows = []
    for j, m in enumerate(metrics):
        nq = int(ta.mask[:, j].sum()) if common else 0
        if nq == 0:
            rows.append(MetricComparison(m, 0, 0, None, None, None, None, None, True, 0, 0))
            continue
        ea = (ta.scores[:, j] > 0) & ta.mask[:, j]
        eb = (tb.scores[:, j] > 0) & tb.mask[:, j]
        p, exact = _sign_flip_p(d[:, j], permutation_reps, perm_rng)
        rows.append(
            MetricComparison(
                metric=m,
                n=nq,
                videos=int((n[:, j] > 0).sum()),
                a=pa[m],
                b=pb[m],
                diff=float(pb[m] - pa[m]),  # type: ignore[operator]
                ci=cis[j],
                p=p,
                p_exact=exact,
                a_only=int((ea & ~eb).sum()),
                b_only=int((eb & ~ea).sum()),
            )
        )
    cat_rows = [r for r in rows if r.metric in CATEGORIES]
    for r, adj in zip(cat_rows, holm([r.p for r in cat_rows]), strict=True):
        r.p_holm = adj
    for r in rows:
        r.reading = _reading(r)
    return Comparison(
        rows=rows,
        paired=len(common),
        only_a=only_a,
        only_b=only_b,
        videos=len(ta.cluster_names),
        reps=reps,
        permutation_reps=permutation_reps,
        seed=seed,
        level=level,
        notes=notes,
        input_modes=(mode_a, mode_b),
    )


def explain(cmp: Comparison) -> str:
    """What a gap means given n: the plain-language notes printed under a comparison table."""
    overall = next((r for r in cmp.rows if r.metric == "overall"), None)
    cats = [r for r in cmp.rows if r.metric in CATEGORIES and r.n]
    lines = [
        "How to read this:",
        "- diff = B - A in percentage points (for invalid_rate, a positive diff means B has more invalid answers).",
        "- 95% CI: paired bootstrap over videos (whole videos resampled, both runs together). "
        "p: paired sign-flip permutation test over videos (A and B swapped per video); "
        "'exact' when few enough videos differ to enumerate every flip.",
        "- A gap is evidence of a real difference only when its CI excludes 0 (and p < 0.05). "
        "A>B / B>A: the questions only A / only B got right; only those move the difference.",
    ]
    if overall and overall.n:
        m = margin_95(overall.n)
        lines.append(
            f"- With n={overall.n} paired questions over {overall.videos} videos, one accuracy near 50% "
            f"has a 95% margin of about ±{m:.1f} pp if questions were independent; questions of one "
            "video are correlated, so the real margin is wider, and the CI above already accounts for it."
        )
        if overall.ci:
            lines.append(
                f"- Overall, differences within about ±{(overall.ci[1] - overall.ci[0]) / 2:.1f} pp "
                "are not distinguishable from noise at this n."
            )
    if cats:
        nmin = min(r.n for r in cats)
        nmax = max(r.n for r in cats)
        ns = f"{nmin}" if nmin == nmax else f"{nmin}-{nmax}"
        ms = f"{margin_95(nmin):.0f}" if nmin == nmax else f"{margin_95(nmax):.0f}-{margin_95(nmin):.0f}"
        lines.append(
            f"- A category has only {ns} questions: its margin is about ±{ms} pp before clustering, so "
            "per-category gaps of a few points mean nothing; with nine categories tested, use p_holm "
            "(Holm-adjusted) before calling one category different."
        )
    if cmp.videos and cmp.videos < 20:
        lines.append(
            f"- Only {cmp.videos} videos: a bootstrap over so few clusters gives intervals that are too narrow, "
            "and the permutation test cannot reach small p-values; trust p, and read the CI as optimistic."
        )
    return "\n".join(lines)


def format_comparison(cmp: Comparison, label_a: str = "A", label_b: str = "B") -> str:
    """A Markdown table plus the notes of :func:`explain`."""

    def fp(p: float | None, exact: bool = False) -> str:
        if p is None:
            return NA
        s = f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"
        return s + (" (exact)" if exact else "")

    mode_a, mode_b = (m or "unknown" for m in cmp.input_modes)
    lines = [
        f"A = {label_a}",
        f"B = {label_b}",
        f"input modes: A {mode_a}, B {mode_b}" + (" (an input ablation)" if cmp.across_inputs else ""),
        f"paired on {cmp.paired} question(s) over {cmp.videos} video(s); bootstrap {cmp.reps} reps, "
        f"permutation {cmp.permutation_reps} reps, seed {cmp.seed}",
        "",
        "| metric | n | A | B | diff (B-A) | 95% CI | p | p_holm | A>B | B>A | reading |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in cmp.rows:
        ci = fmt_ci(r.ci, signed=True) or NA
        lines.append(
            f"| {r.metric} | {r.n} | {fmt_num(r.a)} | {fmt_num(r.b)} | {fmt_num(r.diff, signed=True)} | {ci} | {fp(r.p, r.p_exact)} | "
            f"{fp(r.p_holm) if r.p_holm is not None else '-'} | {r.a_only} | {r.b_only} | {r.reading} |"
        )
    lines += ["", *cmp.notes, explain(cmp)]
    return "\n".join(x for x in lines if x is not None)
