"""Validating the judge against people (the paper's protocol, sec. IV-D).

``export``: a seeded sample of judged responses, stratified by category (largest-remainder
quotas as for the 500-question subset; within a category the smallest
``sha256(seed:model:question_id)``), written as a sheet (CSV or JSONL) with one empty column per
annotator. Only responses the judge actually graded (status ``scored``) are eligible.

* ``unit=response`` (the paper's): one row per response, its facts and verdicts, its recall,
  and ``judge_label`` = ``pass`` when recall >= 0.5 else ``fail``.
* ``unit=fact``: one row per (response, fact), ``judge_label`` = ``covered`` when the verdict
  is covered else ``not_covered``.

Annotators fill their column with ``accept`` / ``reject`` (also 1/0, y/n, yes/no, agree/disagree)
or with the label they think right (``pass``/``fail``, or a verdict: covered / partial /
not_covered / contradicted, binarised to covered vs not). Blank = not annotated.

``report`` reads a filled sheet back and computes:

* acceptance per annotator and pooled (accepted verdicts / annotated verdicts);
* majority acceptance (units accepted by a strict majority of their annotators) and the units
  every annotator rejected;
* mean pairwise agreement (per pair of annotators, the share of units both annotated on which
  they agree; the mean over pairs);
* Cohen's kappa of the judge's binary label against the human majority label (a rejection
  flips the judge's label; units with a tied majority are left out and counted);
* Krippendorff's alpha (nominal) across annotators, on their labels and on accept/reject.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from naru_eval.core.json_types import JSON, JSONMapping, JSONObject
from naru_eval.core.numbers import fmt_num
from naru_eval.core.subset import allocate
from naru_eval.judge.score import JudgedSample

ACCEPT = frozenset({"accept", "accepted", "1", "y", "yes", "agree", "true", "ok", "a"})
REJECT = frozenset({"reject", "rejected", "0", "n", "no", "disagree", "false", "r", "x"})
RESPONSE_LABELS = ("pass", "fail")
FACT_LABELS = ("covered", "not_covered")
_VERDICT_TO_BINARY = {
    "covered": "covered",
    "partial": "not_covered",
    "not_covered": "not_covered",
    "contradicted": "not_covered",
}
PASS_RECALL = 0.5

BASE_COLUMNS = ("audit_id", "unit", "model", "question_id", "category", "question", "reference", "response")
RESPONSE_COLUMNS = ("facts_and_verdicts", "recall", "recall_with_partial", "judge_label")
FACT_COLUMNS = ("fact_id", "fact", "judge_verdict", "judge_evidence", "judge_label")


# ------------------------------------------------------------------------------------ export


def _rank(seed: int | str, model: str, qid: str) -> str:
    return hashlib.sha256(f"{seed}:{model}:{qid}".encode()).hexdigest()


def stratified_sample(
    samples: Sequence[tuple[str, JudgedSample]], n: int, seed: int | str = 0
) -> list[tuple[str, JudgedSample]]:
    """``n`` (model, sample) pairs among the judged ones, proportional to their categories."""
    eligible = [(m, s) for m, s in samples if s.status == "scored"]
    quotas = allocate(dict(Counter(s.category for _, s in eligible)), n)
    chosen: list[tuple[str, JudgedSample]] = []
    for cat, quota in quotas.items():
        members = sorted(
            (p for p in eligible if p[1].category == cat), key=lambda p: _rank(seed, p[0], p[1].question_id)
        )
        chosen.extend(members[:quota])
    return sorted(chosen, key=lambda p: (p[1].category, p[0], p[1].question_id))


def _facts_text(s: JudgedSample) -> str:
    lines = []
    for f in s.facts:
        ev = f" | evidence: {f['evidence']}" if f.get("evidence") else ""
        lines.append(f"{f['id']} [{f.get('verdict')}] {f['text']}{ev}")
    return "\n".join(lines)


#: one cell of an audit sheet (CSV or JSONL): text, a recall, or blank
Cell = str | float | None


def sheet_rows(
    chosen: Sequence[tuple[str, JudgedSample]], annotators: int = 3, unit: str = "response"
) -> tuple[list[str], list[dict[str, Cell]]]:
    """(columns, rows) of the audit sheet: one row per response or per fact, blank annotator
    columns to fill in."""
    if unit not in ("response", "fact"):
        raise ValueError("unit must be 'response' or 'fact'")
    ann = [f"annotator_{i}" for i in range(1, annotators + 1)]
    cols = [*BASE_COLUMNS, *(RESPONSE_COLUMNS if unit == "response" else FACT_COLUMNS), *ann, "notes"]
    rows: list[dict[str, Cell]] = []
    for model, s in chosen:
        base: dict[str, Cell] = {
            "unit": unit,
            "model": model,
            "question_id": s.question_id,
            "category": s.category,
            "question": s.question,
            "reference": s.reference,
            "response": s.response or "",
        }
        blank = {a: "" for a in ann} | {"notes": ""}
        if unit == "response":
            rows.append(
                {
                    **base,
                    "audit_id": f"R{len(rows) + 1:04d}",
                    "facts_and_verdicts": _facts_text(s),
                    "recall": s.recall,
                    "recall_with_partial": s.recall_with_partial,
                    "judge_label": "pass" if (s.recall or 0.0) >= PASS_RECALL else "fail",
                    **blank,
                }
            )
        else:
            for f in s.facts:
                rows.append(
                    {
                        **base,
                        "audit_id": f"F{len(rows) + 1:05d}",
                        "fact_id": f["id"],
                        "fact": f["text"],
                        "judge_verdict": f.get("verdict"),
                        "judge_evidence": f.get("evidence", ""),
                        "judge_label": _VERDICT_TO_BINARY.get(str(f.get("verdict")), "not_covered"),
                        **blank,
                    }
                )
    return cols, rows


def write_sheet(path: str | Path, columns: Sequence[str], rows: Sequence[Mapping[str, Cell]]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() == ".jsonl":
        with open(p, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({c: r.get(c, "") for c in columns}, ensure_ascii=False) + "\n")
    else:
        with open(p, "w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({c: "" if r.get(c) is None else r.get(c) for c in columns})
    return p


def export_audit(
    samples: Sequence[tuple[str, JudgedSample]],
    out: str | Path,
    *,
    n: int = 50,
    annotators: int = 3,
    seed: int | str = 0,
    unit: str = "response",
) -> tuple[Path, int]:
    chosen = stratified_sample(samples, n, seed)
    cols, rows = sheet_rows(chosen, annotators, unit)
    return write_sheet(out, cols, rows), len(rows)


# ------------------------------------------------------------------------------------ report


def read_sheet(path: str | Path) -> list[JSONObject]:
    p = Path(path)
    if p.suffix.lower() == ".jsonl":
        return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    with open(p, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


def _binary(label: str, unit: str) -> str | None:
    label = label.strip().lower().replace(" ", "_").replace("-", "_")
    if unit == "response":
        return label if label in RESPONSE_LABELS else None
    return _VERDICT_TO_BINARY.get(label)


def _flip(label: str, unit: str) -> str:
    pair = RESPONSE_LABELS if unit == "response" else FACT_LABELS
    return pair[1] if label == pair[0] else pair[0]


def parse_cell(value: JSON, judge_label: str, unit: str) -> tuple[bool, str] | None:
    """(accepted?, human binary label) of one annotation; None when blank. Raises ValueError."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    low = text.lower()
    if low in ACCEPT:
        return True, judge_label
    if low in REJECT:
        return False, _flip(judge_label, unit)
    label = _binary(text, unit)
    if label is None:
        raise ValueError(f"cannot read annotation {text!r}")
    return label == judge_label, label


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two label sequences; None when undefined (chance agreement of 1)."""
    if len(a) != len(b) or not a:
        return None
    n = len(a)
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if pe >= 1.0:
        return None
    return (po - pe) / (1 - pe)


def krippendorff_alpha_nominal(units: Iterable[Sequence[Hashable]]) -> float | None:
    """Krippendorff's alpha for nominal data; each unit lists its coders' values (None = missing).
    Units with fewer than two values are not pairable and are ignored. None when undefined."""
    o: dict[tuple[Hashable, Hashable], float] = defaultdict(float)
    for unit in units:
        vals = [v for v in unit if v is not None and v != ""]
        m = len(vals)
        if m < 2:
            continue
        for i, j in itertools.permutations(range(m), 2):
            o[(vals[i], vals[j])] += 1.0 / (m - 1)
    n_c: dict[Hashable, float] = defaultdict(float)
    for (c, _k), w in o.items():
        n_c[c] += w
    n = sum(n_c.values())
    if n <= 1:
        return None
    d_o = sum(w for (c, k), w in o.items() if c != k) / n
    d_e = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k) / (n * (n - 1))
    if d_e == 0:
        return None
    return 1.0 - d_o / d_e


class AnnotatorAcceptance(BaseModel):
    n: int
    acceptance: float | None


class AuditReport(BaseModel):
    """``naru-eval judge audit report``: how far human annotators accept the judge's verdicts."""

    units: int
    annotated_units: int
    annotators: int
    verdicts: int
    acceptance: float | None
    per_annotator: dict[str, AnnotatorAcceptance]
    acceptance_range: list[float] | None
    majority_accepted: int
    majority_acceptance: float | None
    rejected_by_all: int
    pairwise_agreement: dict[str, float | None]
    mean_pairwise_agreement: float | None
    cohen_kappa_judge_vs_majority: float | None
    kappa_units: int
    majority_ties: int
    krippendorff_alpha: float | None
    krippendorff_alpha_acceptance: float | None


@dataclass
class _Unit:
    """One row of the sheet, read: its id, the judge's label, and each annotator's (accepted?, label)."""

    id: JSON  # the sheet's audit_id
    judge: str
    cells: dict[str, tuple[bool, str] | None]


def audit_report(rows: Sequence[JSONMapping]) -> AuditReport:
    if not rows:
        raise ValueError("the audit sheet has no rows")
    ann = sorted((c for c in rows[0] if str(c).startswith("annotator_")), key=lambda c: int(str(c).split("_")[1]))
    if not ann:
        raise ValueError("the audit sheet has no annotator_<i> columns")
    problems: list[str] = []
    units: list[_Unit] = []
    for r in rows:
        unit = str(r.get("unit") or "response")
        judge_label = str(r.get("judge_label") or "").strip()
        if unit not in ("response", "fact") or _binary(judge_label, unit) is None:
            problems.append(f"{r.get('audit_id')}: bad unit/judge_label {unit!r}/{judge_label!r}")
            continue
        cells: dict[str, tuple[bool, str] | None] = {}
        for a in ann:
            try:
                cells[a] = parse_cell(r.get(a), judge_label, unit)
            except ValueError as e:
                problems.append(f"{r.get('audit_id')} {a}: {e}")
                cells[a] = None
        units.append(_Unit(r.get("audit_id"), judge_label, cells))
    if problems:
        raise ValueError("audit sheet problems:\n  - " + "\n  - ".join(problems))

    per_annotator: dict[str, AnnotatorAcceptance] = {}
    for a in ann:
        got = [c[0] for u in units if (c := u.cells[a]) is not None]
        per_annotator[a] = AnnotatorAcceptance(n=len(got), acceptance=sum(got) / len(got) if got else None)
    answered = [c for u in units for c in u.cells.values() if c is not None]
    accepted_units = rejected_by_all = annotated_units = 0
    for u in units:
        cs = [c for c in u.cells.values() if c is not None]
        if not cs:
            continue
        annotated_units += 1
        acc = sum(1 for c in cs if c[0])
        accepted_units += acc * 2 > len(cs)
        rejected_by_all += acc == 0
    pairs = {}
    for a, b in itertools.combinations(ann, 2):
        both = [(x, y) for u in units if (x := u.cells[a]) is not None and (y := u.cells[b]) is not None]
        pairs[f"{a}~{b}"] = sum(x[1] == y[1] for x, y in both) / len(both) if both else None
    pair_values = [v for v in pairs.values() if v is not None]

    judge_labels, majority_labels, ties = [], [], 0
    for u in units:
        labels = [c[1] for c in u.cells.values() if c is not None]
        if not labels:
            continue
        (top, n_top), *rest = Counter(labels).most_common()
        if rest and rest[0][1] == n_top:
            ties += 1
            continue
        judge_labels.append(u.judge)
        majority_labels.append(top)
    return AuditReport(
        units=len(units),
        annotated_units=annotated_units,
        annotators=len(ann),
        verdicts=len(answered),
        acceptance=sum(c[0] for c in answered) / len(answered) if answered else None,
        per_annotator=per_annotator,
        acceptance_range=[
            min(v.acceptance for v in per_annotator.values() if v.acceptance is not None),
            max(v.acceptance for v in per_annotator.values() if v.acceptance is not None),
        ]
        if any(v.acceptance is not None for v in per_annotator.values())
        else None,
        majority_accepted=accepted_units,
        majority_acceptance=accepted_units / annotated_units if annotated_units else None,
        rejected_by_all=rejected_by_all,
        pairwise_agreement=pairs,
        mean_pairwise_agreement=sum(pair_values) / len(pair_values) if pair_values else None,
        cohen_kappa_judge_vs_majority=cohen_kappa(judge_labels, majority_labels),
        kappa_units=len(judge_labels),
        majority_ties=ties,
        krippendorff_alpha=krippendorff_alpha_nominal(
            [[c[1] if (c := u.cells[a]) else None for a in ann] for u in units]
        ),
        krippendorff_alpha_acceptance=krippendorff_alpha_nominal(
            [[c[0] if (c := u.cells[a]) else None for a in ann] for u in units]
        ),
    )


def format_report(rep: AuditReport) -> str:
    def pct(v: float | None) -> str:
        return fmt_num(v, 1, scale=100, suffix="%")

    def num(v: float | None) -> str:
        return fmt_num(v, 3)

    lines = [
        f"units: {rep.annotated_units} annotated of {rep.units}; annotators: {rep.annotators}; "
        f"verdicts: {rep.verdicts}",
        f"acceptance: {pct(rep.acceptance)}"
        + (
            f" (per annotator {pct(rep.acceptance_range[0])} to {pct(rep.acceptance_range[1])})"
            if rep.acceptance_range
            else ""
        ),
    ]
    for a, v in rep.per_annotator.items():
        lines.append(f"  {a}: {pct(v.acceptance)} of {v.n}")
    lines += [
        f"majority acceptance: {rep.majority_accepted} of {rep.annotated_units} ({pct(rep.majority_acceptance)}); "
        f"rejected by every annotator: {rep.rejected_by_all}",
        f"mean pairwise agreement: {pct(rep.mean_pairwise_agreement)}",
        f"Cohen's kappa, judge vs human majority: {num(rep.cohen_kappa_judge_vs_majority)} "
        f"({rep.kappa_units} units, {rep.majority_ties} tied)",
        f"Krippendorff's alpha (nominal) across annotators: labels {num(rep.krippendorff_alpha)}, "
        f"accept/reject {num(rep.krippendorff_alpha_acceptance)}",
    ]
    return "\n".join(lines)
