"""The NARU paper's published figures, the authors' published leaderboard, and a check that
the paper's figures are consistent with each other.

Both ship with the package (``naru_eval/data_files/``), so nothing outside the installation is
read at run time:

* ``naru_paper.json``: the paper's printed figures (tables I-III, the Fig. 3 end points);
* ``official_results.json``: the authors' published leaderboard (13 multiple-choice
  configurations as correct counts per category, 8 open-ended ones as per-category recall).

``results/paper_reference.json`` is the normalised paper reference, rebuilt by::

    naru-eval paper-reference -o results/paper_reference.json

:func:`consistency_checks` shows that the paper's overall accuracies follow from its narrative
and cultural accuracies by the authors' aggregation, overall = (narrative + cultural) / 2, e.g.
Gemini-3-Flash: (84.2 + 68.2) / 2 = 76.2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE
from naru_eval.report.models import ComparisonRow, Entry

PAPER_TITLE = (
    "NARU: A Benchmark for NARrative Evolution and Cultural Nuance Understanding in Japanese Extreme Long Video"
)
PAPER_ARXIV = "2608.13210"
#: how the page and the JSON name the paper: its title and arXiv id, nothing else
PAPER = {"title": PAPER_TITLE, "arxiv": PAPER_ARXIV}
PAPER_SOURCE_FILE = "naru_eval/data_files/naru_paper.json"


def _package_json(name: str) -> dict[str, Any]:
    return json.loads((resources.files("naru_eval") / "data_files" / name).read_text(encoding="utf-8"))


def paper_source() -> dict[str, Any]:
    """The paper's figures as shipped in the package (``naru_eval/data_files/naru_paper.json``)."""
    return _package_json("naru_paper.json")


def official_results() -> dict[str, Any]:
    """The authors' published leaderboard (``naru_eval/data_files/official_results.json``)."""
    return _package_json("official_results.json")


REFERENCE_SCHEMA_VERSION = 1

#: The paper's values are printed to one decimal: each published number is within 0.05 of the
#: true value, so an overall recomputed from rounded narrative/cultural values may differ from the
#: printed overall by up to 0.05 (rounding of the inputs, a mean) + 0.05 (of the output).
ROUNDING_TOLERANCE = 0.1


#: a figure as the paper prints it: an int stays an int in the reference file, a float a float
Figure = int | float


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReferenceSource(_Section):
    document: str
    file: str | None
    built_by: str


class TableI(_Section):
    """Table I: the question count of each category, its name, and the benchmark's totals."""

    counts: dict[str, int]
    names: dict[str, str]
    totals: dict[str, Figure]


class TableII(_Section):
    """Table II: MCQ accuracy (percent) of each model, as many metrics as the paper prints."""

    unit: str
    metric: str
    protocol: dict[str, str | None]
    rows: dict[str, dict[str, Figure]]


class TableIII(_Section):
    """Table III: open-ended recall (fraction), the mean of the nine category recalls."""

    unit: str
    metric: str
    judge: str | None
    rows: dict[str, Figure]
    share_with_at_least_one_fact: dict[str, Figure] | None


class FrameSweep(_Section):
    """Fig. 3's end points (approximate): overall accuracy per model and frame budget."""

    unit: str
    metric: str
    budgets: list[int]
    approximate: bool
    note: str | None
    overall: dict[str, dict[str, Figure]]
    narrative_gain_pp_range: list[Figure] | None
    cultural_gain_pp_range: list[Figure] | None


class PaperReference(_Section):
    """The normalised paper reference (``results/paper_reference.json``)."""

    schema_version: int
    paper: dict[str, str]
    source: ReferenceSource
    chance: Figure
    table_i: TableI
    table_ii: TableII
    table_iii: TableIII
    frame_sweep: FrameSweep


def reference_from_source(src: Mapping[str, Any], source_file: str | None = PAPER_SOURCE_FILE) -> PaperReference:
    """The normalised reference (tables I-III, the frame-sweep end points) from the figures JSON."""
    cats = src["categories"]
    sweep = dict(src["frame_sweep_overall_accuracy_approx"])
    recall = dict(src["open_ended_recall_table_iii"])
    share = recall.pop("share_with_at_least_one_fact", None)
    note = sweep.pop("note", None)
    nar_gain = sweep.pop("narrative_gain_pp_range", None)
    cul_gain = sweep.pop("cultural_gain_pp_range", None)
    totals = src["totals"]
    protocol = src["protocol"]
    return PaperReference(
        schema_version=REFERENCE_SCHEMA_VERSION,
        paper=dict(PAPER),
        source=ReferenceSource(
            document=src["source"],
            file=source_file,
            built_by="naru-eval paper-reference -o results/paper_reference.json",
        ),
        chance=protocol.get("chance", 25.0),
        table_i=TableI(
            counts={c: cats[c]["count"] for c in CATEGORIES},
            names={c: cats[c]["name"] for c in CATEGORIES},
            totals={k: totals[k] for k in ("questions", "narrative", "cultural", "videos", "hours")},
        ),
        table_ii=TableII(
            unit="percent",
            metric="MCQ accuracy on all 1,481 questions",
            protocol={"gemini": protocol.get("gemini"), "open_weight": protocol.get("open_weight")},
            rows={name: dict(row) for name, row in src["mcq_accuracy_table_ii"].items()},
        ),
        table_iii=TableIII(
            unit="fraction",
            metric="open-ended atomic-fact recall",
            judge=protocol.get("open_ended_judge"),
            rows=recall,
            share_with_at_least_one_fact=share,
        ),
        frame_sweep=FrameSweep(
            unit="percent",
            metric="overall MCQ accuracy on the 500-question diagnostic subset",
            budgets=list(protocol.get("frame_sweep", [8, 16, 32, 64, 128])),
            approximate=True,
            note=note,
            overall={name: {str(k): v for k, v in row.items()} for name, row in sweep.items()},
            narrative_gain_pp_range=nar_gain,
            cultural_gain_pp_range=cul_gain,
        ),
    )


def load_reference(path: str | Path | None = None) -> PaperReference:
    """A reference file (``results/paper_reference.json`` format), or the one built from the
    package's copy of the paper's figures."""
    if path is None:
        return reference_from_source(paper_source())
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("schema_version") != REFERENCE_SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {data.get('schema_version')!r}, expected {REFERENCE_SCHEMA_VERSION}")
    try:
        return PaperReference.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"{path}: not a paper reference: {e}") from None


def paper_models(ref: PaperReference) -> list[str]:
    names: dict[str, None] = {}
    for section in (ref.table_ii.rows, ref.table_iii.rows, ref.frame_sweep.overall):
        names.update(dict.fromkeys(section))
    return list(names)


@dataclass(frozen=True)
class ConsistencyCheck:
    """One check of the paper against itself."""

    name: str
    model: str | None
    ok: bool | None  # None: not checkable (the paper gives too few numbers)
    stated: float | None
    implied: float | None
    detail: str


def implied_overall(narrative: float, cultural: float) -> float:
    """The overall accuracy that narrative and cultural accuracies imply by the authors'
    aggregation: their plain mean (not weighted by question counts)."""
    return (narrative + cultural) / 2


def consistency_checks(ref: PaperReference, tolerance: float = ROUNDING_TOLERANCE) -> list[ConsistencyCheck]:
    """Table I counts add up; each table II overall is the mean of its narrative/cultural values."""
    checks: list[ConsistencyCheck] = []
    counts = ref.table_i.counts
    totals = ref.table_i.totals
    n_nar = sum(counts[c] for c in NARRATIVE)
    n_cul = sum(counts[c] for c in CULTURAL)
    for name, got, want in (
        ("table I: narrative count N.1-N.4", n_nar, totals["narrative"]),
        ("table I: cultural count C.1-C.5", n_cul, totals["cultural"]),
        ("table I: all questions", n_nar + n_cul, totals["questions"]),
    ):
        checks.append(
            ConsistencyCheck(name, None, got == want, float(want), float(got), f"sum of category counts = {got}")
        )
    for model, row in ref.table_ii.rows.items():
        if all(row.get(k) is not None for k in ("overall", "narrative", "cultural")):
            imp = implied_overall(row["narrative"], row["cultural"])
            ok = abs(imp - row["overall"]) <= tolerance + 1e-9
            detail = f"({row['narrative']} + {row['cultural']})/2 = {imp:.3f} ≈ {imp:.1f}; stated {row['overall']}" + (
                "" if ok else f" (off by more than {tolerance})"
            )
            checks.append(
                ConsistencyCheck(
                    "table II: overall from narrative and cultural", model, ok, row["overall"], imp, detail
                )
            )
        elif "overall" in row:
            given = ", ".join(k for k in row if k != "overall") or "nothing else"
            checks.append(
                ConsistencyCheck(
                    "table II: overall from narrative and cultural",
                    model,
                    None,
                    row["overall"],
                    None,
                    f"not checkable: the paper gives overall and {given}, not narrative and cultural",
                )
            )
    return checks


def format_checks(checks: Sequence[ConsistencyCheck]) -> str:
    """The checks as a Markdown table; the rows that cannot be checked (only an overall is
    printed) are named in one line below it instead of a row each."""
    mark = {True: "OK", False: "MISMATCH"}
    lines = ["| check | model | result | detail |", "|---|---|---|---|"]
    for c in checks:
        if c.ok is not None:
            lines.append(f"| {c.name} | {c.model or ''} | {mark[c.ok]} | {c.detail} |")
    if unchecked := not_checkable(checks):
        lines += ["", f"Not checkable (the paper prints only an overall): {', '.join(unchecked)}."]
    return "\n".join(lines)


def not_checkable(checks: Sequence[ConsistencyCheck]) -> list[str]:
    """The models (or checks) whose figures cannot be checked against each other."""
    return [c.model or c.name for c in checks if c.ok is None]


# --------------------------------------------------------------------------- our runs beside the paper


def paper_comparison(entries: Sequence[Entry], names: Mapping[str, str], ref: PaperReference) -> list[ComparisonRow]:
    """Our entries beside the paper's rows (table II for naru_mcq; Fig. 3 end points for
    naru_mcq_500 at 8/128 frames; table III recall for open-ended tasks), with the difference."""
    rows: list[ComparisonRow] = []

    def add(e: Entry, paper_model: str, source: str, metric: str, ours_key: str, paper: float, approx: bool) -> None:
        ours = e.metrics.get(ours_key)
        ci = (e.ci95 or {}).get(ours_key)
        rows.append(
            ComparisonRow.model_validate(
                {
                    "model": e.model,
                    "paper_model": paper_model,
                    "source": source,
                    "task": e.task,
                    "budget": e.budget,
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
        paper_model = names.get(e.model)
        if not paper_model:
            continue
        if e.task == "naru_mcq":
            for metric, value in ref.table_ii.rows.get(paper_model, {}).items():
                add(e, paper_model, "table_ii", metric, metric, value, False)
        if e.task == "naru_mcq_500" and e.frames is not None:
            point = ref.frame_sweep.overall.get(paper_model, {}).get(str(e.frames))
            if point is not None:
                add(e, paper_model, "frame_sweep", "overall", "overall", float(point), True)
        recall = ref.table_iii.rows.get(paper_model)
        if e.task.startswith("naru_open") and recall is not None:
            # table III prints the mean of the nine category recalls: our ``overall`` (not ``recall``)
            add(e, paper_model, "table_iii", "overall", "overall", recall, False)
    return rows


def paper_points(names: Mapping[str, str], ref: PaperReference) -> dict[str, dict[str, float]]:
    """Our model name -> the paper's approximate sweep end points, for the Fig. 3 overlay."""
    sweep = ref.frame_sweep.overall
    return {ours: dict(sweep[p]) for ours, p in names.items() if p in sweep}
