"""Paired accuracy gaps between two runs over the questions both answered, with the video-
clustered bootstrap of :mod:`naru_eval.report.stats` (whole videos drawn with replacement, the
same draws for the same seed): what ``naru-eval diagnose`` reports for blind-vs-video and
circular-vs-plain. Each interval's seed depends on its name only (:func:`seed_for`), so adding a
run does not move the others."""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from naru_eval.core.data import CATEGORIES
from naru_eval.core.metrics import Metric, in_scope, macro_levels
from naru_eval.core.scoring import MACRO_METRICS, MCQ, ScoredSample

DEFAULT_BOOTSTRAP = 2000


class BootstrapStat(TypedDict):
    """A statistic in percent (or percentage points) with its 95% cluster-bootstrap interval."""

    value: float | None
    ci95: list[float] | None  # None with fewer than two videos
    n: int  # questions
    n_clusters: int  # videos


def seed_for(seed: int, name: str) -> int:
    """A per-interval seed: depends on the base seed and the interval's name only."""
    return (int(seed) * 1_000_003 + zlib.crc32(name.encode())) % 2**32


def cluster_bootstrap(
    a: Sequence[float],
    clusters: Sequence[Hashable],
    b: Sequence[float] | None = None,
    iters: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> BootstrapStat:
    """``100 * (mean(a) - mean(b))`` (or ``100 * mean(a)``) with a 95 % cluster-bootstrap CI.

    ``a`` and ``b`` are per-question 0/1 outcomes, paired (same questions, same order);
    ``clusters`` the questions' videos. Videos are resampled with replacement; each replicate's
    statistic is the ratio of the resampled sums. ``ci95`` is None with fewer than two videos.
    """
    import numpy as np

    n = len(a)
    if n == 0:
        return BootstrapStat(value=None, ci95=None, n=0, n_clusters=0)
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
    return BootstrapStat(value=value, ci95=ci, n=n, n_clusters=v)


def pct(k: float, n: float) -> float | None:
    return 100.0 * k / n if n else None


@dataclass(frozen=True)
class Unit:
    """One question's outcome: the unit every accuracy, gap and interval is computed over."""

    question_id: str
    video_id: str
    category: str
    gold: str
    duration_s: float | None
    correct: bool


def _scope_order(m: Metric[ScoredSample]) -> int:
    return 0 if m.aggregation == "macro" else 1 if m.scope == "all" else 2


#: the accuracy scopes a gap is given for (the MCQ table's accuracies, with their categories):
#: the macro means, accuracy over all questions, then each category
SCOPES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (m.name, tuple(c for c in CATEGORIES if in_scope(m.scope, c)))
    for m in sorted((m for m in MCQ if m.higher_is_better), key=_scope_order)
)


def macro_cluster_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    categories: Sequence[str],
    clusters: Sequence[Hashable],
    metric: str,
    iters: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> BootstrapStat:
    """``macro(a) - macro(b)`` for the authors' ``metric`` (overall/narrative/cultural: means of
    category accuracies, :func:`naru_eval.core.metrics.macro_levels`), paired, with a 95 % CI from
    resampling videos and recomputing both macro means on each replicate."""
    import numpy as np

    from naru_eval.report.stats import cluster_weights, macro_draws, percentile_interval, ratio

    n = len(a)
    if n == 0:
        return BootstrapStat(value=None, ci95=None, n=0, n_clusters=0)
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
    return BootstrapStat(value=value, ci95=ci, n=n, n_clusters=v)


def _macro_pct(units: Sequence[Unit], metric: str) -> float | None:
    by: dict[str, list[bool]] = {}
    for u in units:
        by.setdefault(u.category, []).append(u.correct)
    return macro_levels({c: 100.0 * sum(x) / len(x) for c, x in by.items()})[metric]


@dataclass(frozen=True)
class PairedGap:
    """``acc(a) - acc(b)`` (percent) on the questions both runs have, with its paired interval;
    ``by_scope`` (when asked for): the same per scope."""

    n: int
    n_videos: int
    a_accuracy: float | None
    b_accuracy: float | None
    gap: float | None
    ci95: list[float] | None
    by_scope: dict[str, PairedGap] | None = None


def paired_gap(
    a: Mapping[str, Unit], b: Mapping[str, Unit], iters: int, seed: int, name: str, scopes: bool = False
) -> PairedGap:
    """``acc(a) - acc(b)`` over the questions both have, with a paired cluster-bootstrap CI.

    The top level is the gap in accuracy over all those questions (micro). ``by_scope``: the
    authors' overall/narrative/cultural (means of category accuracies, recomputed on every
    resample), ``accuracy`` (micro, as the top level) and each category."""
    common = sorted(a.keys() & b.keys())

    def one(qids: list[str], tag: str, macro: str | None = None) -> PairedGap:
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
            acc_a = pct(sum(a[q].correct for q in qids), len(qids))
            acc_b = pct(sum(b[q].correct for q in qids), len(qids))
        return PairedGap(
            n=len(qids), n_videos=st["n_clusters"], a_accuracy=acc_a, b_accuracy=acc_b, gap=st["value"], ci95=st["ci95"]
        )

    out = one(common, "overall")
    if not scopes:
        return out
    by_scope = {
        scope: one([q for q in common if a[q].category in cats], scope, scope if scope in MACRO_METRICS else None)
        for scope, cats in SCOPES
        if any(a[q].category in cats for q in common)
    }
    return dataclasses.replace(out, by_scope=by_scope)
