"""``naru-eval leaderboard``: the published NARU leaderboard, with the user's runs beside it.

The authors' published figures (13 multiple-choice configurations, 8 open-ended ones; shipped in
``naru_eval/data_files/official_results.json``) are always in the page, marked as published
figures, aggregated as the authors do (:mod:`naru_eval.report.published`). Every run under the
given directories (:mod:`naru_eval.report.runs`) becomes one typed entry per (model, task,
sampling, judge, data) (:mod:`naru_eval.report.entries`): every metric **recomputed from the
sample log** and checked against what lmms-eval reported, question counts, 95% bootstrap
intervals clustered by video, the run configuration (secrets dropped), and provenance/cost from
the frame-sweep manifest when there is one. Entries with the same key are never merged
silently: identical numbers are deduplicated with a note, different numbers are a conflict
(listed; the command exits 1). Runs on different data are never merged or compared, and only
runs on the official data sit beside the published rows.

Outputs (``-o results/leaderboard.json``, :mod:`naru_eval.report.render`): the JSON (schema in
``docs/leaderboard.md``), a Markdown page (``.md``) and a self-contained HTML page (``.html``:
inline CSS, figures as base64 PNG, nothing fetched), plus the figures as PNG files in
``<stem>_plots/``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from naru_eval.core.scoring import METRICS
from naru_eval.report.entries import (
    DEFAULT_REPS,
    DEFAULT_SEED,
    build_entries,
    leaderboard_tables,
    rel,
    resolve_duplicates,
    sort_key,
)
from naru_eval.report.models import (
    Aggregation,
    Bootstrap,
    Consistency,
    LeaderboardDocument,
    PaperRef,
    PaperSection,
    Published,
)
from naru_eval.report.published import OFFICIAL_DATA, OFFICIAL_DATA_NOTE, published_rows
from naru_eval.report.runs import discover
from naru_eval.report.sweep import package_version

if TYPE_CHECKING:
    from naru_eval.report.paper import PaperReference

SCHEMA_VERSION = 3

__all__ = ["OFFICIAL_DATA", "Leaderboard", "build_leaderboard"]


@dataclass
class Leaderboard:
    """The built leaderboard: the typed document, and ``data``, the JSON it is written as."""

    document: LeaderboardDocument
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    data: dict[str, JsonValue] = field(init=False)

    def __post_init__(self) -> None:
        self.data = self.document.model_dump(mode="json", by_alias=True, exclude_unset=True)


def build_leaderboard(
    paths: Sequence[str | Path],
    paper_names: Mapping[str, str] | None = None,
    reference: PaperReference | None = None,
    labels: Mapping[str, str] | None = None,
    reps: int = DEFAULT_REPS,
    seed: int = DEFAULT_SEED,
    include_incomplete: bool = False,
    published: bool = True,
) -> Leaderboard:
    """The leaderboard of the runs below ``paths`` (none: the published rows only), beside the
    authors' published rows (unless ``published=False``)."""
    from naru_eval.report import paper

    ref = reference if reference is not None else paper.load_reference()
    names = dict(paper_names or {})
    errors: list[str] = []
    known = paper.paper_models(ref)
    for ours, theirs in names.items():
        if theirs not in known:
            errors.append(
                f"--paper-name {ours}={theirs}: the paper has no model {theirs!r} (known: {', '.join(known)})"
            )
    warnings: list[str] = []
    entries, unverified = [], []
    if paths:
        found = discover(paths)
        if not found.results:
            warnings.append(f"no *_results.json under {', '.join(map(str, paths))}")
        built = build_entries(found, labels, reps, seed, include_incomplete)
        entries, unverified = built.entries, built.unverified
        warnings += built.warnings
        errors += built.errors
    entries, duplicates, conflicts = resolve_duplicates(entries)
    entries.sort(
        key=lambda e: (e.task, e.data or "", e.frames if e.frames is not None else -1, e.fps or 0, *sort_key(e))
    )
    for d in duplicates:
        warnings.append(f"duplicate entry {d.id}: identical numbers in {d.kept} and {', '.join(d.dropped)}; kept one")
    for c in conflicts:
        diffs = "; ".join(f"{k}: {v}" for k, v in c.differences.items())
        errors.append(f"conflicting entries for {c.id} (same key, different numbers): {', '.join(c.files)} ({diffs})")
    datas = sorted({e.data or "unknown" for e in entries})
    if len(datas) > 1:
        warnings.append(
            f"the runs were computed on different data ({', '.join(datas)}): they are in separate tables "
            "and never compared with each other"
        )
    unmatched = sorted(set(names) - {e.model for e in entries})
    if unmatched:
        warnings.append(f"--paper-name given for model(s) with no entry: {', '.join(unmatched)}")
    pub = published_rows() if published else []
    ranked = {e.id for e in entries if e.reported_matches_log is not False}
    checks = paper.consistency_checks(ref)
    document = LeaderboardDocument(
        schema_version=SCHEMA_VERSION,
        generated_by=f"naru-eval {package_version('naru-eval')}",
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        sources=[rel(Path(p)) for p in paths],
        bootstrap=Bootstrap(
            method="percentile bootstrap, videos resampled with replacement; overall/narrative/cultural "
            "recomputed as means of category means on each resample",
            cluster="video_id",
            reps=reps,
            seed=seed,
            level=0.95,
        ),
        aggregation=Aggregation(
            mcq="category accuracy; narrative = mean of N.1-N.4, cultural = mean of C.1-C.5, "
            "overall = (narrative + cultural) / 2; accuracy = over all questions (micro)",
            open="category mean recall; narrative/cultural = means of their categories, overall = mean of "
            "the nine categories; recall = over all scored responses (micro)",
        ),
        data_note=OFFICIAL_DATA_NOTE,
        metrics=list(METRICS),
        published=Published(
            paper=PaperRef(**paper.PAPER),
            note="published figures of the NARU authors, not runs of ours",
            rows=pub,
        ),
        entries=entries,
        tables=leaderboard_tables(entries, pub, ranked),
        unverified=unverified,
        duplicates=duplicates,
        conflicts=conflicts,
        paper=PaperSection(
            **paper.PAPER,
            names=names,
            comparison=paper.paper_comparison(entries, names, ref),
            consistency=[Consistency.model_validate(c, from_attributes=True) for c in checks],
            consistent=all(c.ok is not False for c in checks),
        ),
        warnings=warnings,
        errors=errors,
    )
    return Leaderboard(document, warnings, errors)
