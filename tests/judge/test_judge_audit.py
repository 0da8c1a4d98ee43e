"""The audit sheet: export, and the report's arithmetic against the paper's figures."""

from __future__ import annotations

import csv
import json

import pytest

from naru_eval.cli.main import main as judge_main
from naru_eval.core.data import CATEGORIES
from naru_eval.judge.audit import (
    audit_report,
    cohen_kappa,
    export_audit,
    krippendorff_alpha_nominal,
    read_sheet,
    stratified_sample,
)
from naru_eval.judge.score import JudgedSample


def paper_validation() -> dict:
    """The judge validation of the paper's sec. IV-D, from the package's copy of its figures."""
    from naru_eval.report.paper import paper_source

    return paper_source()["judge_validation"]


def judged(i: int, category: str, recall: float, status: str = "scored") -> JudgedSample:
    n = 4
    covered = round(recall * n)
    facts = [
        {
            "id": f"F{k + 1}",
            "text": f"fact {k + 1}",
            "verdict": "covered" if k < covered else "not_covered",
            "evidence": "",
        }
        for k in range(n)
    ]
    return JudgedSample(
        question_id=f"q{i:04d}",
        video_id="v",
        category=category,
        level="narrative" if category.startswith("N") else "cultural",
        question=f"Question {i}?",
        reference="ref",
        response=f"response {i}",
        status=status,
        n_facts=n,
        covered=covered,
        not_covered=n - covered,
        recall=recall if status != "unscored" else None,
        recall_with_partial=recall if status != "unscored" else None,
        facts=facts,
    )


def paper_sheet(tmp_path, fmt: str = "csv"):
    """50 judged responses, 3 annotators, 150 verdicts built to the paper's figures:
    rejections a1: units 0,1,2-5 (6), a2: 0,6-9 (5), a3: 1,10-12 (4); units 0 and 1 rejected by 2 of 3."""
    samples = [("gemini-3-flash", judged(i, CATEGORIES[i % 9], 1.0 if i < 30 else 0.25)) for i in range(50)]
    out = tmp_path / f"sheet.{fmt}"
    path, n = export_audit(samples, out, n=50, annotators=3, seed=0)
    assert n == 50
    rows = read_sheet(path)
    rejects = {
        "annotator_1": {0, 1, 2, 3, 4, 5},
        "annotator_2": {0, 6, 7, 8, 9},
        "annotator_3": {1, 10, 11, 12},
    }
    # units are addressed in question-id order so that units 0 and 1 are judged "pass"
    order = sorted(range(len(rows)), key=lambda k: rows[k]["question_id"])
    for rank, k in enumerate(order):
        for a, rej in rejects.items():
            rows[k][a] = "reject" if rank in rej else "accept"
    cols = list(rows[0])
    if fmt == "csv":
        with open(path, "w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_report_reproduces_the_paper_figures(tmp_path, fmt):
    paper = paper_validation()
    path, rows = paper_sheet(tmp_path, fmt)
    rep = audit_report(read_sheet(path))
    assert rep.annotated_units == paper["sampled_responses"] == 50
    assert rep.annotators == paper["annotators"] == 3
    assert rep.verdicts == paper["verdicts"] == 150
    assert rep.acceptance == pytest.approx(paper["acceptance"])  # 135 / 150
    per = [v.acceptance for v in rep.per_annotator.values()]
    assert per == pytest.approx([0.88, 0.90, 0.92])
    assert rep.acceptance_range == pytest.approx(paper["acceptance_per_annotator"])
    assert rep.majority_accepted == 48
    assert rep.majority_acceptance == pytest.approx(paper["majority_acceptance"])
    assert rep.rejected_by_all == 0  # "no judgment is rejected by all three annotators"
    assert rep.mean_pairwise_agreement == pytest.approx(124 / 150)
    assert round(rep.mean_pairwise_agreement, 3) == paper["mean_pairwise_agreement"]
    assert rep.pairwise_agreement == pytest.approx(
        {"annotator_1~annotator_2": 41 / 50, "annotator_1~annotator_3": 42 / 50, "annotator_2~annotator_3": 41 / 50}
    )
    # judge labels: 30 pass, 20 fail; the human majority flips two passes to fail
    po, pe = 48 / 50, (30 / 50) * (28 / 50) + (20 / 50) * (22 / 50)
    assert rep.cohen_kappa_judge_vs_majority == pytest.approx((po - pe) / (1 - pe))
    assert rep.kappa_units == 50 and rep.majority_ties == 0
    assert -1 <= rep.krippendorff_alpha <= 1


def test_cli_audit_report_prints_the_figures(tmp_path, capsys):
    path, _ = paper_sheet(tmp_path)
    assert judge_main(["judge", "audit", "report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "acceptance: 90.0% (per annotator 88.0% to 92.0%)" in out
    assert "majority acceptance: 48 of 50 (96.0%)" in out and "rejected by every annotator: 0" in out
    assert "mean pairwise agreement: 82.7%" in out


def test_krippendorff_alpha_published_example():
    """Krippendorff (2011), 'Computing Krippendorff's alpha-reliability': nominal alpha = 0.743."""
    n = None
    coders = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    ]
    assert krippendorff_alpha_nominal(list(zip(*coders, strict=True))) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha_nominal([[1, 1], [2, 2], [1, 1]]) == 1.0
    assert krippendorff_alpha_nominal([[1, 1], [1, 1]]) is None  # no variation: undefined


def test_cohen_kappa():
    assert cohen_kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == 1.0
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == 0.0
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None
    try:
        from sklearn.metrics import cohen_kappa_score
    except ImportError:
        return
    a = list("aabbbabaab")
    b = list("abbbaabaaa")
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))


def test_export_is_stratified_seeded_and_judged_only(tmp_path):
    samples = [("m", judged(i, CATEGORIES[i % 9], 0.5)) for i in range(180)]
    samples += [("m", judged(1000 + i, "N.1", 0.0, status="empty")) for i in range(20)]
    chosen = stratified_sample(samples, 45, seed=3)
    assert len(chosen) == 45
    assert {c: sum(1 for _, s in chosen if s.category == c) for c in CATEGORIES} == {c: 5 for c in CATEGORIES}
    assert all(s.status == "scored" for _, s in chosen)
    assert [s.question_id for _, s in stratified_sample(samples, 45, seed=3)] == [s.question_id for _, s in chosen]
    assert [s.question_id for _, s in stratified_sample(samples, 45, seed=4)] != [s.question_id for _, s in chosen]
    path, n = export_audit(samples, tmp_path / "facts.csv", n=9, annotators=2, unit="fact")
    rows = read_sheet(path)
    assert n == len(rows) == 9 * 4
    assert {"fact_id", "fact", "judge_verdict", "judge_evidence", "judge_label", "annotator_1", "annotator_2"} <= set(
        rows[0]
    )
    assert {r["judge_label"] for r in rows} <= {"covered", "not_covered"}


def test_fact_unit_labels_and_bad_cells(tmp_path):
    samples = [("m", judged(i, CATEGORIES[i % 9], 0.5)) for i in range(9)]
    path, _ = export_audit(samples, tmp_path / "s.jsonl", n=2, annotators=2, unit="fact")
    rows = read_sheet(path)
    for r in rows:
        r["annotator_1"] = "accept"
        r["annotator_2"] = "partial"  # a label: binarised to not_covered
    rep = audit_report(rows)
    n_cov = sum(r["judge_label"] == "covered" for r in rows)
    assert rep.per_annotator["annotator_2"].acceptance == pytest.approx(1 - n_cov / len(rows))
    rows[0]["annotator_1"] = "maybe"
    with pytest.raises(ValueError, match="cannot read annotation 'maybe'"):
        audit_report(rows)


def test_cli_audit_export_from_scores(tmp_path, capsys):
    scores = tmp_path / "run.scores.jsonl"
    scores.write_text(
        "".join(json.dumps(judged(i, CATEGORIES[i % 9], 0.75).to_dict() | {"model": "m1"}) + "\n" for i in range(90))
    )
    out = tmp_path / "audit.csv"
    assert judge_main(["judge", "audit", "export", str(scores), "--out", str(out), "--n", "18", "--seed", "7"]) == 0
    rows = read_sheet(out)
    assert len(rows) == 18 and {r["model"] for r in rows} == {"m1"}
    assert [f"annotator_{i}" for i in (1, 2, 3)] == [c for c in rows[0] if c.startswith("annotator_")]
