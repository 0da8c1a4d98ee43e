"""Task variants and ``naru-eval diagnose`` on constructed sample logs (no lmms-eval run)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest

from naru_eval.cli import diagnose as cli_diagnose
from naru_eval.cli.main import main as cli_main
from naru_eval.core.data import CATEGORIES, LETTERS, NaruQuestion
from naru_eval.core.extract import INVALID_KINDS
from naru_eval.core.scoring import compute_metrics, metric_payloads, samples_from_log, score_response
from naru_eval.core.variants import (
    CIRCULAR_METRICS,
    aggregate_circular,
    blind_payloads,
    circular_metrics,
    circular_payloads,
    circular_questions,
    rotate_letter,
    rotate_question,
    split_rotated_id,
    unrotate_letter,
)
from naru_eval.report.diagnostics import (
    default_leak_min,
    diagnose,
    duration_accuracy,
    duration_bucket,
    invalid_breakdown,
    letter_distribution,
)
from naru_eval.report.diagnostics_render import write_report
from naru_eval.report.gaps import Unit, cluster_bootstrap

OPTS = ("red", "green", "blue", "white")


def q(qid: str, cat: str = "N.1", answer: str = "B", video: str = "v1", duration_s: float | None = 3600.0):
    return NaruQuestion(qid, video, cat, "What colour?", OPTS, answer, duration_s=duration_s)


# --------------------------------------------------------------------------- rotations


def test_rotation_moves_options_and_gold():
    base = q("q1", answer="B")
    r1 = rotate_question(base, 1)
    assert r1.question_id == "q1#r1" and split_rotated_id(r1.question_id) == ("q1", 1)
    assert r1.options == ("white", "red", "green", "blue")  # option at letter i goes to i+1
    assert r1.answer == "C" and r1.answer_text == base.answer_text
    for k in range(4):
        rk = rotate_question(base, k)
        assert rk.answer_text == "green" and rk.answer == rotate_letter("B", k)
        assert unrotate_letter(rk.answer, k) == "B"
    rot = circular_questions([base, q("q2", answer="D")])
    assert [(r.question_id, b, k) for r, b, k in rot][:5] == [
        ("q1#r0", "q1", 0), ("q1#r1", "q1", 1), ("q1#r2", "q1", 2), ("q1#r3", "q1", 3), ("q2#r0", "q2", 0),
    ]  # fmt: skip
    assert sorted(r.answer for r, _, _ in rot[:4]) == list(LETTERS)  # gold visits every letter once
    with pytest.raises(ValueError):
        split_rotated_id("q1")


def circ_records(answers: dict[str, list[str | None]], gold: dict[str, str]) -> list[dict]:
    """Records of a circular run: ``answers[qid][k]`` is the response text to rotation k."""
    out = []
    for qid, resps in answers.items():
        base = q(qid, answer=gold[qid])
        for k, resp in enumerate(resps):
            s = score_response(rotate_question(base, k), resp)
            out.append(circular_payloads(s, qid, k)["accuracy_all"])
    return out


def test_circular_metrics_exact():
    gold = {"a": "A", "b": "B", "c": "C", "d": "D"}
    rights = {qid: [rotate_letter(g, k) for k in range(4)] for qid, g in gold.items()}
    answers = {
        "a": rights["a"],  # right in all four
        "b": rights["b"][:3] + ["A" if rights["b"][3] != "A" else "B"],  # three of four
        "c": ["A", "A", "A", "A"],  # always A: right once
        "d": rights["d"][:2] + ["", "I cannot tell."],  # two right, two invalid
    }
    recs = circ_records(answers, gold)
    m = circular_metrics(recs)
    assert set(m) == set(CIRCULAR_METRICS)
    assert m["circular"] == 25.0  # only "a"
    assert m["accuracy_r0"] == 75.0  # a, b, d right in rotation 0; c's gold C is shown at C
    assert m["accuracy_all"] == 100.0 * (4 + 3 + 1 + 2) / 16
    assert m["invalid_rate"] == 100.0 * 2 / 16
    valid = [r for r in recs if r["valid"]]
    for x in LETTERS:
        assert m[f"pick_{x}"] == pytest.approx(100.0 * sum(r["pred"] == x for r in valid) / len(valid))
    assert sum(m[f"pick_{x}"] for x in LETTERS) == pytest.approx(100.0)
    # base_pred maps the picked letter back to the original option order
    c_recs = [r for r in recs if r["base_question_id"] == "c"]
    assert [r["base_pred"] for r in c_recs] == ["A", "D", "C", "B"]
    assert all(r["base_gold"] == "C" for r in c_recs)


def test_aggregate_circular_groups_and_incomplete():
    recs = circ_records({"a": ["A", "B", "C", "D"], "b": ["B", "C", "D", "A"]}, {"a": "A", "b": "B"})
    payloads = [dict(r) for r in recs]
    assert aggregate_circular(payloads) == 100.0
    # shuffled order does not matter; an incomplete group is left out, not counted wrong
    assert aggregate_circular(list(reversed(payloads[:7]))) == 100.0
    assert aggregate_circular(payloads[:3]) is None
    # circular payloads carry no per-item score (its stderr would describe something else)
    s = score_response(rotate_question(q("a", answer="A"), 0), "A")
    p = circular_payloads(s, "a", 0)
    assert "score" not in p["circular"] and p["accuracy_r0"]["score"] == 100.0
    assert "score" not in circular_payloads(s, "a", 1)["accuracy_r0"]
    bad = circular_payloads(score_response(q("a", answer="A"), ""), "a", 2)
    assert all("score" not in bad[f"pick_{x}"] for x in LETTERS) and bad["invalid_rate"]["score"] == 100.0


def test_blind_payloads_are_the_mcq_payloads_marked():
    s = score_response(q("q1"), "B")
    plain, blind = metric_payloads(s), blind_payloads(s)
    assert set(plain) == set(blind)
    for m in plain:
        assert blind[m].pop("blind") is True and blind[m] == plain[m]


def test_payload_carries_duration_and_old_logs_still_read(tmp_path):
    s = score_response(q("q1", duration_s=1234.0), "B")
    assert metric_payloads(s)["overall"]["duration_s"] == 1234.0
    payload = {k: v for k, v in metric_payloads(s)["overall"].items() if k != "duration_s"}
    log = tmp_path / "old_samples_naru_mcq.jsonl"
    log.write_text(json.dumps({"doc_id": 0, "overall": payload}) + "\n")
    (old,) = samples_from_log(log)
    assert old.duration_s is None and old.correct


# --------------------------------------------------------------------------- statistics


def rec(pred, gold, method=None, valid=None, **kw):
    valid = pred is not None if valid is None else valid
    return {"pred": pred, "gold": gold, "valid": valid, "method": method or ("bare" if valid else "invalid:no_letter"), **kw}  # fmt: skip


def test_letter_distribution():
    recs = [rec("A", "A"), rec("A", "B"), rec("A", "C"), rec("B", "D"), rec(None, "D", "invalid:empty")]
    d = letter_distribution(recs).model_dump()
    assert d["pred"] == {"A": 3, "B": 1, "C": 0, "D": 0, "invalid": 1}
    assert d["gold"] == {"A": 1, "B": 1, "C": 1, "D": 2}
    assert d["pred_pct"] == {"A": 75.0, "B": 25.0, "C": 0.0, "D": 0.0}
    assert d["gold_pct"] == {"A": 20.0, "B": 20.0, "C": 20.0, "D": 40.0}
    assert d["excess_pp"] == pytest.approx({"A": 55.0, "B": 5.0, "C": -20.0, "D": -40.0})
    assert d["tv_distance_pp"] == pytest.approx(60.0) and d["most_over_picked"] == "A"
    empty = letter_distribution([rec(None, "A", "invalid:empty")]).model_dump()
    assert empty["pred_pct"]["A"] is None and empty["tv_distance_pp"] is None


def test_invalid_kinds_from_real_responses():
    responses = {
        "": "empty",
        "[NARU_REQUEST_FAILED] timeout": "failed",
        "[LMMS_EVAL_REQUEST_FAILED] 503": "failed",
        "I cannot determine the answer from the video.": "refusal",
        "None of the options is correct.": "none_of_options",
        "The answer is E.": "off_option",
        "The answer is A. No wait, the answer is B.": "ambiguous",
        "Hmm, colours are nice.": "no_letter",
        "<think>The answer is B, but let me check": "unfinished_reasoning",
    }
    samples = [score_response(q(f"q{i}"), r) for i, r in enumerate(responses)]
    samples += [score_response(q("ok1"), "B"), score_response(q("ok2"), "(C)")]
    recs = [metric_payloads(s)["overall"] for s in samples]
    inv = invalid_breakdown(recs).model_dump()
    assert list(inv["kinds"]) == list(INVALID_KINDS)
    assert inv["kinds"] == {
        "empty": 1, "failed": 2, "refusal": 1, "none_of_options": 1, "off_option": 1, "ambiguous": 1, "no_letter": 1,
        "unfinished_reasoning": 1,
    }  # fmt: skip
    assert inv["n_invalid"] == 9 and inv["rate"] == pytest.approx(900 / 11)
    assert inv["kinds_pct"]["failed"] == pytest.approx(200 / 11)
    assert inv["rate"] == compute_metrics(samples)["invalid_rate"]


@pytest.mark.parametrize(
    ("minutes", "bucket"),
    [
        (29.99, "<30 min"), (30, "30-60 min"), (59.99, "30-60 min"), (60, "60-120 min"), (119.5, "60-120 min"),
        (120, "120-240 min"), (240, "120-240 min"), (240.01, ">240 min"), (None, "unknown"),
    ],
)  # fmt: skip
def test_duration_bucket_edges(minutes, bucket):
    assert duration_bucket(None if minutes is None else minutes * 60, (30, 60, 120, 240)) == bucket


def test_duration_accuracy_exact():
    units = [
        Unit("a", "v1", "N.1", "A", 45 * 60, True),
        Unit("b", "v1", "N.1", "A", 45 * 60, False),
        Unit("c", "v2", "N.1", "A", 50 * 60, True),
        Unit("d", "v3", "C.1", "A", 90 * 60, True),
        Unit("e", "v4", "C.1", "A", 200 * 60, False),
        Unit("f", "v5", "C.1", "A", None, True),
        Unit("g", "v6", "C.1", "A", 5 * 60, False),
    ]
    out = [b.model_dump() for b in duration_accuracy(units, (30, 60, 120, 240), iters=200, seed=0, name="t")]
    by = {b["bucket"]: b for b in out}
    assert list(by) == ["<30 min", "30-60 min", "60-120 min", "120-240 min", "unknown"]
    assert by["30-60 min"]["n"] == 3 and by["30-60 min"]["n_videos"] == 2
    assert by["30-60 min"]["accuracy"] == pytest.approx(200 / 3)
    assert by["60-120 min"]["accuracy"] == 100.0 and by["60-120 min"]["ci95"] is None  # one video
    assert by["120-240 min"]["accuracy"] == 0.0 and by["unknown"]["accuracy"] == 100.0
    assert by["<30 min"]["n"] == 1
    # configurable edges (synthetic videos are seconds long)
    fine = [b.model_dump() for b in duration_accuracy(units, (0, 1, 1000), iters=0, seed=0, name="t")]
    assert [b["bucket"] for b in fine] == ["0-1 min", "1-1000 min", "unknown"]
    assert fine[1]["n"] == 6


def test_cluster_bootstrap_paired_and_seeded():
    a = [1, 1, 0, 1, 0, 1, 1, 0]
    b = [1, 0, 0, 1, 0, 0, 1, 0]
    vids = ["v1", "v1", "v2", "v2", "v3", "v3", "v4", "v4"]
    st = cluster_bootstrap(a, vids, b=b, iters=500, seed=3)
    assert st["value"] == pytest.approx(25.0) and st["n"] == 8 and st["n_clusters"] == 4
    lo, hi = st["ci95"]
    assert lo <= 25.0 <= hi and lo >= 0.0  # paired: b never beats a on a question
    assert cluster_bootstrap(a, vids, b=b, iters=500, seed=3) == st
    assert cluster_bootstrap(a, vids, b=a, iters=100, seed=0)["ci95"] == [0.0, 0.0]
    assert cluster_bootstrap(a, ["v"] * 8, iters=100)["ci95"] is None
    assert cluster_bootstrap([], [])["value"] is None


# --------------------------------------------------------------------------- whole reports


QUESTIONS = [
    q(f"q{i:02d}", cat=("N.1", "N.2", "C.1", "C.2")[i % 4], answer=LETTERS[(i * 7) % 4], video=f"v{i % 5}",
      duration_s=(40 * 60, 90 * 60, 150 * 60, None)[i % 4])
    for i in range(20)
]  # fmt: skip


def wrong(letter: str) -> str:
    return LETTERS[(LETTERS.index(letter) + 1) % 4]


def write_log(folder: Path, stamp: str, task: str, lines: list[dict], results: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{stamp}_samples_{task}.jsonl", "w", encoding="utf-8") as f:
        for i, payloads in enumerate(lines):
            f.write(json.dumps({"doc_id": i, "target": "x", "input": "prompt", **payloads}) + "\n")
    if results is not None:
        path = folder / f"{stamp}_results.json"
        old = json.loads(path.read_text()) if path.exists() else {"results": {}, "config": {"model": "naru_replay"}}
        old["results"][task] = {f"{k},none": v for k, v in results.items()}
        path.write_text(json.dumps(old))


def plain_log(folder, stamp, task, right: set[str], blind=False, tamper=False):
    make = blind_payloads if blind else metric_payloads
    samples = [score_response(x, x.answer if x.question_id in right else wrong(x.answer)) for x in QUESTIONS]
    metrics = compute_metrics(samples)
    if tamper:
        metrics["overall"] += 1
    write_log(folder, stamp, task, [make(s) for s in samples], metrics)


def circular_log(folder, stamp, right_all: set[str], right_r0: set[str]):
    lines = []
    for x in QUESTIONS:
        for k in range(4):
            rx = rotate_question(x, k)
            ok = x.question_id in right_all or (k == 0 and x.question_id in right_r0)
            lines.append(circular_payloads(score_response(rx, rx.answer if ok else wrong(rx.answer)), x.question_id, k))
    recs = [p["accuracy_all"] for p in lines]
    write_log(folder, stamp, "naru_mcq_500_circular", lines, circular_metrics(recs))


def qids(idx):
    return {f"q{i:02d}" for i in idx}


@pytest.fixture
def runs_dir(tmp_path):
    out = tmp_path / "runs"
    # model m1: video (15/20), blind (5/20), circular (all 4 rotations right: 8; rotation 0 only: 4 more)
    plain_log(out / "m1", "20260101_000000", "naru_mcq_500", qids(range(15)))
    plain_log(out / "m1", "20260101_000100", "naru_mcq_500_blind", qids(range(5)), blind=True)
    circular_log(out / "m1", "20260101_000200", qids(range(8)), qids(range(8, 12)))
    # m1 ran the blind task twice: the older log is superseded
    plain_log(out / "m1", "20250101_000000", "naru_mcq_500_blind", set(), blind=True)
    # model m2: blind only (answers q00-q02 and q10 right), results.json tampered
    plain_log(out / "m2", "20260101_000000", "naru_mcq_500_blind", qids([0, 1, 2, 10]), blind=True, tamper=True)
    # model m3: blind only (q00, q01, q19)
    plain_log(out / "m3", "20260101_000000", "naru_mcq_500_blind", qids([0, 1, 19]), blind=True)
    # not a NARU log
    write_log(out / "other", "20260101_000000", "mmmu_val", [{"acc": 1}])
    return out


def test_diagnose_constructed_runs(runs_dir):
    rep = diagnose([runs_dir], iters=300, seed=1)
    by = {r.label: r for r in rep.runs}
    assert set(by) == {
        "runs/m1:naru_mcq_500", "runs/m1:naru_mcq_500_blind", "runs/m1:naru_mcq_500_circular",
        "runs/m2:naru_mcq_500_blind", "runs/m3:naru_mcq_500_blind",
    }  # fmt: skip
    assert [s["samples"].endswith("mmmu_val.jsonl") for s in rep.skipped] == [True]
    assert len(rep.superseded) == 1 and "20250101_000000" in rep.superseded[0]
    assert by["runs/m1:naru_mcq_500"].kind == "plain" and by["runs/m1:naru_mcq_500_blind"].kind == "blind"
    assert by["runs/m1:naru_mcq_500_circular"].kind == "circular"
    assert by["runs/m1:naru_mcq_500"].recomputes is True
    assert by["runs/m1:naru_mcq_500_circular"].recomputes is True
    assert by["runs/m2:naru_mcq_500_blind"].recomputes is False  # results.json was tampered with

    circ = by["runs/m1:naru_mcq_500_circular"]
    assert circ.metrics["circular"] == 40.0 and circ.metrics["accuracy_r0"] == 60.0
    assert circ.n_docs == 80 and circ.n_questions == 20
    assert circ.letters.gold_pct == {x: 25.0 for x in LETTERS}

    # duration buckets: durations cycle 40, 90, 150 min and unknown
    dur = {b.bucket: b for b in by["runs/m1:naru_mcq_500"].duration.buckets}
    assert {k: v.n for k, v in dur.items()} == {"30-60 min": 5, "60-120 min": 5, "120-240 min": 5, "unknown": 5}
    # q00..q14 right: i % 4 == 0 (40 min) -> q00,q04,q08,q12 right, q16 wrong
    assert dur["30-60 min"].accuracy == 80.0 and dur["unknown"].accuracy == 60.0  # q03,q07,q11 of 5
    assert by["runs/m1:naru_mcq_500"].duration.n_unknown == 5

    (bv,) = rep.blind_vs_video
    assert bv.video_run == "runs/m1:naru_mcq_500" and bv.blind_run == "runs/m1:naru_mcq_500_blind"
    assert bv.video_accuracy == 75.0 and bv.blind_accuracy == 25.0 and bv.gap == 50.0
    assert bv.ci95[0] <= 50.0 <= bv.ci95[1]
    n1 = bv.by_scope["N.1"]  # q00 q04 q08 q12 q16: video 4/5, blind 2/5
    assert (n1.n, n1.video_accuracy, n1.blind_accuracy, n1.gap) == (5, 80.0, 40.0, 40.0)

    cvp = {g.plain_run: g for g in rep.circular_vs_plain}
    r0 = cvp["runs/m1:naru_mcq_500_circular (rotation 0)"]
    assert (r0.circular_accuracy, r0.plain_accuracy, r0.gap) == (40.0, 60.0, -20.0)
    pl = cvp["runs/m1:naru_mcq_500"]
    assert (pl.circular_accuracy, pl.plain_accuracy, pl.gap) == (40.0, 75.0, -35.0)
    assert pl.ci95[0] <= -35.0 <= pl.ci95[1] <= 0.0

    sc = rep.shortcut_candidates
    assert sc.n_models == 3 and sc.min_correct == default_leak_min(3) == 2
    listed = {x.question_id: x.n_correct for x in sc.questions}
    assert listed == {"q00": 3, "q01": 3, "q02": 2}  # q10 (m2) and q19 (m3) only once
    assert sc.questions[0].models == ["runs/m1", "runs/m2", "runs/m3"]
    p2 = 3 * 0.25**2 * 0.75 + 0.25**3
    assert sc.expected_by_chance == pytest.approx(20 * p2)
    # a custom threshold
    assert diagnose([runs_dir], iters=0, leak_min=1).shortcut_candidates.n_candidates == 7


def test_diagnose_is_reproducible_and_writes_plots(runs_dir, tmp_path):
    a = diagnose([runs_dir], iters=300, seed=5)
    b = diagnose([runs_dir], iters=300, seed=5)
    assert a == b
    out = write_report(a, tmp_path / "diag" / "report.json")
    assert json.loads(out.read_text())["runs"] == a.model_dump(mode="json", exclude_unset=True)["runs"]
    names = sorted(Path(p).name for p in a.plots)
    assert names == ["report_duration.png", "report_gaps.png", "report_invalid.png", "report_letters.png"]
    for p in a.plots:
        assert Path(p).parent == out.parent and Path(p).read_bytes()[:4] == b"\x89PNG"


def test_cli_register_and_main(runs_dir, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="naru-eval")
    sub = parser.add_subparsers(dest="command", required=True)
    cli_diagnose.register(sub)
    args = parser.parse_args(["diagnose", str(runs_dir), "--duration-edges", "0,1,2.5", "--bootstrap", "50"])
    assert args.func is cli_diagnose.cmd_diagnose and args.duration_edges == [0.0, 1.0, 2.5]
    with pytest.raises(SystemExit):
        parser.parse_args(["diagnose", str(runs_dir), "--duration-edges", "60,30"])

    rc = cli_main(["diagnose", str(runs_dir), "-o", str(tmp_path / "r.json"), "--bootstrap", "50", "--no-plots"])
    captured = capsys.readouterr()
    assert rc == 0 and "Blind vs video" in captured.out and "Shortcut candidates" in captured.out
    assert "runs/m2:naru_mcq_500_blind: the log's metrics differ from results.json" in captured.err
    assert not list(tmp_path.glob("r_*.png")) and json.loads((tmp_path / "r.json").read_text())["runs"]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli_main(["diagnose", str(empty)]) == 1
    assert cli_main(["diagnose", str(tmp_path / "missing")]) == 2


def test_fill_durations_from_data_dir(copy_data, tmp_path):
    from naru_eval.core.data import load_local

    data = copy_data()
    ann = data / "annotations.jsonl"
    rows = [json.loads(line) for line in ann.read_text().splitlines()]
    for r in rows[::2]:
        r.pop("duration_s")  # these must come from the video itself
    for r in rows[1::2]:
        r["duration_s"] = 5400.0  # 90 minutes, from the annotation
    ann.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = load_local(data).questions
    samples = [score_response(dataclass_no_duration(x), x.answer) for x in questions]
    write_log(tmp_path / "out", "20260101_000000", "naru_mcq", [metric_payloads(s) for s in samples])
    rep = diagnose([tmp_path / "out"], edges_min=(0, 1, 60, 120), iters=0, data_dir=data)
    assert rep.settings.durations_filled == len(rows)
    dur = {b.bucket: b.n for b in rep.runs[0].duration.buckets}
    assert dur == {"0-1 min": math.ceil(len(rows) / 2), "1-60 min": 0, "60-120 min": len(rows) // 2}


def dataclass_no_duration(x: NaruQuestion) -> NaruQuestion:
    import dataclasses

    return dataclasses.replace(x, duration_s=None)


def test_paired_gap_scopes_use_the_authors_macro():
    """Unequal categories: by_scope overall/narrative/cultural are differences of means of
    category accuracies; the top level and ``accuracy`` stay the micro gap."""
    from naru_eval.report.gaps import Unit, paired_gap

    cats = ["N.1"] * 10 + ["N.2"] * 2 + ["C.1"] * 2
    a = {f"q{i}": Unit(f"q{i}", f"v{i % 4}", c, "A", None, c != "N.2") for i, c in enumerate(cats)}
    b = {q: Unit(u.question_id, u.video_id, u.category, "A", None, False) for q, u in a.items()}
    gap = paired_gap(a, b, iters=300, seed=0, name="t", scopes=True)
    sc = gap.by_scope
    assert sc["narrative"].gap == pytest.approx(50.0)  # mean(N.1 100, N.2 0); micro 10/12
    assert sc["cultural"].gap == pytest.approx(100.0)
    assert sc["overall"].gap == pytest.approx(75.0) and sc["overall"].a_accuracy == pytest.approx(75.0)
    assert gap.gap == pytest.approx(100 * 12 / 14) == sc["accuracy"].gap
    lo, hi = sc["overall"].ci95
    assert lo <= 75.0 <= hi


def test_macro_gap_ci_is_the_same_bootstrap_as_compare():
    """diagnose's macro gap resamples videos exactly as ``naru-eval compare`` does (one bootstrap,
    naru_eval.report.stats): the same data and seed give the same interval."""
    from naru_eval.core.data import level_of
    from naru_eval.core.scoring import ScoredSample
    from naru_eval.report.compare import compare
    from naru_eval.report.gaps import macro_cluster_bootstrap

    rng = np.random.default_rng(1)
    cats = [CATEGORIES[i % 9] for i in range(300)]
    qids = [f"q{i:03d}" for i in range(len(cats))]  # sorted = data order: the same video order in both
    vids = [f"v{i // 5:02d}" for i in range(len(cats))]
    ra = list(rng.random(len(cats)) < 0.6)
    rb = list(rng.random(len(cats)) < 0.4)

    def run(correct: list[bool]) -> list[ScoredSample]:
        return [
            ScoredSample(q, v, c, level_of(c), "A", "A" if ok else "B", "bare", bool(ok), True)
            for q, v, c, ok in zip(qids, vids, cats, correct, strict=True)
        ]

    cmp = compare(run(rb), run(ra), reps=400, permutation_reps=10, seed=5, metrics=("overall", "narrative"))
    for metric in ("overall", "narrative"):
        st = macro_cluster_bootstrap(
            [float(x) for x in ra], [float(x) for x in rb], cats, vids, metric, iters=400, seed=5
        )
        assert st["value"] == pytest.approx(cmp.row(metric).diff)
        assert st["ci95"] == pytest.approx(list(cmp.row(metric).ci))


def test_micro_gap_ci_is_the_same_bootstrap_as_compare():
    """diagnose's accuracy gap (micro) draws the same videos as ``naru-eval compare`` for the same
    seed (one bootstrap), so the two reproduce each other's interval; before, diagnose drew its own
    indices and gave a different interval."""
    from naru_eval.core.data import level_of
    from naru_eval.core.scoring import ScoredSample
    from naru_eval.report.compare import compare
    from naru_eval.report.gaps import cluster_bootstrap

    rng = np.random.default_rng(2)
    cats = [CATEGORIES[i % 9] for i in range(240)]
    qids = [f"q{i:03d}" for i in range(len(cats))]
    vids = [f"v{i // 6:02d}" for i in range(len(cats))]
    ra = list(rng.random(len(cats)) < 0.55)
    rb = list(rng.random(len(cats)) < 0.45)

    def run(correct: list[bool]) -> list[ScoredSample]:
        return [
            ScoredSample(q, v, c, level_of(c), "A", "A" if ok else "B", "bare", bool(ok), True)
            for q, v, c, ok in zip(qids, vids, cats, correct, strict=True)
        ]

    cmp = compare(run(rb), run(ra), reps=400, permutation_reps=10, seed=7, metrics=("accuracy",))
    st = cluster_bootstrap([float(x) for x in ra], vids, b=[float(x) for x in rb], iters=400, seed=7)
    assert st["value"] == pytest.approx(cmp.row("accuracy").diff)
    assert st["ci95"] == pytest.approx(list(cmp.row("accuracy").ci))


def test_report_is_typed_and_a_bad_field_is_caught(tmp_path):
    """The report validates as :class:`DiagnosticsReport` (what ``diagnose`` returns and writes);
    a report whose run lacks a field is an error naming the output file, not a half-written JSON."""
    from naru_eval.report.diagnostics_render import write_report
    from naru_eval.report.models import DiagnosticsReport, load_model

    report = {
        "naru_eval_diagnose": 1,
        "settings": {
            "paths": ["x"],
            "duration_edges_min": [0.0, 30.0],
            "bootstrap_iters": 10,
            "seed": 0,
            "ci": "95%",
            "data_dir": None,
            "durations_filled": 0,
        },
        "runs": [],
        "blind_vs_video": [],
        "circular_vs_plain": [],
        "shortcut_candidates": None,
        "skipped": [],
        "superseded": [],
    }
    out = write_report(dict(report), tmp_path / "diag.json", plots=False)
    assert load_model(DiagnosticsReport, out).model_dump(mode="json", exclude_unset=True) == report
    with pytest.raises(ValueError, match=r"bad\.json: not a valid DiagnosticsReport.*runs\.0"):
        write_report({**report, "runs": [{"label": "x"}]}, tmp_path / "bad.json", plots=False)
    assert not (tmp_path / "bad.json").exists()
