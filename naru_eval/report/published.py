"""The authors' published rows, and which data a run is on.

Published rows are the NARU authors' figures on their official release. A run sits beside them
only when it is on that data: its fingerprint is a known fingerprint of the release
(``naru_eval/data_files/official_fingerprints.json``), or, until the release has been
fingerprinted, its question and per-category counts match the paper's Table I exactly and the
data is not synthetic ("counts match, release unverified"). Synthetic data
(``naru_eval.core.synthetic``) is marked in its annotations, and its fingerprint says so
(``synthetic-…``, :func:`naru_eval.core.data.fingerprint_questions`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from naru_eval.core.data import CATEGORIES, SYNTHETIC_PREFIX
from naru_eval.core.metrics import macro_levels
from naru_eval.core.scoring import MCQ
from naru_eval.report.models import DataStatus, Entry, Number

#: the ``data`` of the published rows: the authors' official release of the benchmark
OFFICIAL_DATA = "official"
OFFICIAL_DATA_NOTE = (
    "Published rows are the NARU authors' own figures on the official data (Hugging Face "
    "infinimind/naru_benchmark), not runs of ours. Every run names the data it was computed on "
    "(a fingerprint of the annotations); runs on different data are never merged or compared "
    "with each other, and are listed in separate tables. A run sits beside the published rows only "
    "when it was computed on the official data: a known fingerprint of the release, or question and "
    'category counts that match Table I exactly on data that is not synthetic (marked "counts match, '
    'release unverified"). Every other run, synthetic data included, has a table of its own.'
)
#: what each data status means on the page
STATUS_NOTES: dict[str, str] = {
    "official": "the official data",
    "counts-match": "counts match Table I, release unverified",
    "synthetic": "SYNTHETIC data: not comparable with the published rows",
    "other": "not the official release: not comparable with the published rows",
}


@cache
def official_fingerprints() -> frozenset[str]:
    """The known fingerprints of the official release (package data; empty until it is seen)."""
    text = resources.files("naru_eval.data_files").joinpath("official_fingerprints.json").read_text("utf-8")
    return frozenset(json.loads(text)["fingerprints"])


def table_i_counts(official: Mapping[str, Any] | None = None) -> dict[str, int]:
    """The paper's Table I: questions per category (1,481 in all)."""
    from naru_eval.report import paper

    off = official if official is not None else paper.official_results()
    totals = [*off["category_totals"]["narrative"], *off["category_totals"]["cultural"]]
    return dict(zip(CATEGORIES, totals, strict=True))


def data_status(fingerprint: str | None, category_counts: Mapping[str, int] | None) -> DataStatus:
    """Which data a run is on, from its fingerprint and its questions per category (None when the
    run's counts are not those of its data, e.g. a subset task)."""
    if fingerprint and fingerprint in official_fingerprints():
        return "official"
    if fingerprint and fingerprint.startswith(SYNTHETIC_PREFIX):
        return "synthetic"
    if category_counts is not None and dict(category_counts) == table_i_counts():
        return "counts-match"
    return "other"


def published_rows(official: Mapping[str, Any] | None = None) -> list[Entry]:
    """The authors' published leaderboard as entries, aggregated as they do it.

    Multiple choice (``naru_mcq``, all 1,481 questions): category accuracy = correct / category
    total x 100 (rows published as accuracies are taken as they are), narrative/cultural = the
    means of their categories, overall = (narrative + cultural) / 2; ``accuracy`` (micro) from
    the counts where there are counts. Open-ended (``naru_open``, the 500-question subset):
    per-category recall as published, overall = the mean of the nine categories."""
    from naru_eval.judge.score import OPEN
    from naru_eval.report import paper

    off = dict(official) if official is not None else paper.official_results()
    n_cat = table_i_counts(off)
    total = sum(n_cat.values())
    rows: list[Entry] = []
    org: dict[str, str | None] = {}
    for name, r in off["mcq_rq1"]["rows"].items():
        vals = [*r["narrative"], *r["cultural"]]
        counts: dict[str, int] | None
        if r.get("percent"):
            cat = {c: float(v) for c, v in zip(CATEGORIES, vals, strict=True)}
            accuracy, counts = None, None
        else:
            cat = {c: 100.0 * k / n_cat[c] for c, k in zip(CATEGORIES, vals, strict=True)}
            accuracy, counts = 100.0 * sum(vals) / total, dict(zip(CATEGORIES, vals, strict=True))
        org[name] = r.get("from")
        known: dict[str, Number] = {**macro_levels(cat), **cat, "accuracy": accuracy}
        metrics: dict[str, Number] = {m: known.get(m) for m in MCQ.names}  # invalid_rate: not published
        figures = "published accuracies" if r.get("percent") else "correct counts"
        rows.append(
            _published(name, r.get("from"), r, "naru_mcq", metrics, {"overall": total, **n_cat}, counts, figures)
        )
    for name, r in off["open_rq3"]["rows"].items():
        cat = {c: float(v) for c, v in zip(CATEGORIES, [*r["narrative"], *r["cultural"]], strict=True)}
        known = {**macro_levels(cat, overall=OPEN.overall), **cat}
        metrics = {m: known.get(m) for m in OPEN.columns}  # recall (micro): not published
        made_by = r.get("from", org.get(name))
        rows.append(
            _published(name, made_by, r, "naru_open", metrics, {"overall": 500}, None, "published recalls (2 decimals)")
        )
    return rows


def _published(
    name: str,
    made_by: str | None,
    r: Mapping[str, Any],
    task: str,
    metrics: dict[str, Number],
    n: dict[str, int],
    counts: dict[str, int] | None,
    figures: str,
) -> Entry:
    return Entry(
        id=f"published | {name} | {task}",
        model=name,
        from_=made_by,
        checkpoint=r.get("checkpoint"),
        published=True,
        task=task,
        frames=None,
        fps=None,
        budget=r.get("sampling"),
        sampling=r.get("sampling"),
        judge=None,
        data=OFFICIAL_DATA,
        metrics=metrics,
        ci95=None,
        n=n,
        counts=counts,
        figures=figures,
        metrics_source="published",
    )
