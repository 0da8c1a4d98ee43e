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
* the paired comparison of two runs (:mod:`naru_eval.report.compare`) resamples the same way.

Everything is computed from :class:`~naru_eval.core.scoring.ScoredSample` records, i.e. from the
lmms-eval sample logs (:func:`naru_eval.core.scoring.samples_from_log`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from naru_eval.core.data import CATEGORIES
from naru_eval.core.metrics import Categorised, MetricTable, macro_levels
from naru_eval.core.scoring import MCQ, METRICS, ScoredSample, compute_metrics

if TYPE_CHECKING:
    from naru_eval.judge.score import JudgedSample


class Clustered(Categorised, Protocol):
    """A scored record the bootstrap resamples: its question (and, by attribute name, its cluster)."""

    @property
    def question_id(self) -> str: ...


C = TypeVar("C", bound=Clustered)

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
    items: Sequence[C],
    metrics: Sequence[str],
    table: MetricTable[C],
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
    ci = percentile_intervals(np.asarray(draws, dtype=float).reshape(-1, 1), level)[0]
    return None if ci is None else [ci[0], ci[1]]


def percentile_intervals(draws: np.ndarray, level: float) -> list[tuple[float, float] | None]:
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
    samples: Sequence[JudgedSample],
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
    items: Sequence[C],
    table: MetricTable[C],
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
    return dict(zip(metrics, percentile_intervals(draws, level), strict=True))


def category_ratios(samples: Sequence[ScoredSample], cluster: str, w: np.ndarray) -> np.ndarray:
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
