"""Bootstrap intervals clustered by video, and the paired comparison of two runs (naru_eval.report.stats)."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import numpy as np
import pytest

from naru_eval.core.data import CATEGORIES, NARRATIVE
from naru_eval.core.scoring import MACRO_METRICS, METRICS, ScoredSample, compute_metrics
from naru_eval.judge.score import JudgedSample, compute_open_metrics
from naru_eval.report.compare import compare, format_comparison, holm
from naru_eval.report.stats import bootstrap_ci, bootstrap_open_ci, score_table


def sample(qid: str, vid: str, cat: str, correct: bool, valid: bool = True) -> ScoredSample:
    gold = "A"
    pred = ("A" if correct else "B") if valid else None
    return ScoredSample(
        qid,
        vid,
        cat,
        "narrative" if cat in NARRATIVE else "cultural",
        gold,
        pred,
        "bare" if valid else "invalid:empty",
        correct,
        valid,
    )


def make_run(
    n_videos: int = 40, per_video: int = 9, p_video=None, seed: int = 0, invalid: float = 0.0
) -> list[ScoredSample]:
    """``per_video`` questions per video cycling through the categories; ``p_video(v)`` = P(correct)."""
    rng = random.Random(seed)
    out = []
    for v in range(n_videos):
        p = p_video(v) if p_video else 0.5
        for k in range(per_video):
            cat = CATEGORIES[(v + k) % len(CATEGORIES)]
            valid = rng.random() >= invalid
            out.append(sample(f"q{v:03d}_{k}", f"vid{v:03d}", cat, valid and rng.random() < p, valid))
    return out


def width(ci) -> float:
    return ci[1] - ci[0]


def test_ci_contains_point_estimate_for_every_metric():
    run = make_run(p_video=lambda v: 0.3 + 0.4 * (v % 3) / 2, invalid=0.1)
    point = compute_metrics(run)
    ci = bootstrap_ci(run, reps=1000, seed=1)
    assert set(ci) == set(METRICS)
    for m in METRICS:
        lo, hi = ci[m]
        assert lo <= point[m] <= hi, (m, lo, point[m], hi)
        assert 0 <= lo < hi <= 100


def test_clustered_ci_is_wider_when_outcomes_are_correlated_within_videos():
    # each video is all right or all wrong: 40 independent units, not 400
    run = make_run(n_videos=40, per_video=10, p_video=lambda v: float(v % 2))
    clustered = bootstrap_ci(run, reps=2000, seed=0)
    naive = bootstrap_ci(run, reps=2000, seed=0, cluster="question_id")
    assert compute_metrics(run)["overall"] == 50.0
    assert width(clustered["overall"]) > 2.5 * width(naive["overall"])
    # sqrt(10) times wider in theory: the design effect of 10 perfectly correlated questions
    assert width(clustered["overall"]) / width(naive["overall"]) == pytest.approx(math.sqrt(10), rel=0.25)


def test_clustered_ci_matches_the_analytical_clustered_standard_error():
    """An independent check: the percentile interval's half-width ~ 1.96 x the ratio estimator's
    cluster-robust standard error, computed here by its formula."""
    rng = random.Random(3)
    ability = [rng.random() for _ in range(150)]
    run = make_run(n_videos=150, per_video=10, p_video=lambda v: ability[v], seed=4)
    ci = bootstrap_ci(run, reps=4000, seed=5)["overall"]
    by_video: dict[str, list[float]] = {}
    for s in run:
        by_video.setdefault(s.video_id, []).append(100.0 * s.correct)
    sums = np.array([sum(v) for v in by_video.values()])
    ns = np.array([len(v) for v in by_video.values()])
    r = sums.sum() / ns.sum()
    g = len(sums)
    se = math.sqrt(g / (g - 1) * np.sum((sums - r * ns) ** 2)) / ns.sum()
    assert width(ci) / 2 == pytest.approx(1.96 * se, rel=0.15)


def test_bootstrap_is_seeded():
    run = make_run(p_video=lambda v: 0.6)
    assert bootstrap_ci(run, reps=300, seed=7) == bootstrap_ci(run, reps=300, seed=7)
    assert bootstrap_ci(run, reps=300, seed=7) != bootstrap_ci(run, reps=300, seed=8)


def test_metric_without_questions_has_no_interval():
    run = [s for s in make_run() if s.category != "C.5"]
    ci = bootstrap_ci(run, reps=200)
    assert ci["C.5"] is None and ci["overall"] is not None


def test_score_table_matches_compute_metrics():
    run = make_run(p_video=lambda v: 0.5, invalid=0.2, seed=9)
    t = score_table(run)
    s, n = t.cluster_sums()
    got = dict(zip(t.metrics, s.sum(0) / n.sum(0), strict=True))
    want = compute_metrics(run)
    per_item = [m for m in METRICS if m not in MACRO_METRICS]  # the macro ones are means of these
    assert {m: got[m] for m in per_item} == pytest.approx({m: want[m] for m in per_item})


def unbalanced_run(n1_right: bool = False, n_videos: int = 12) -> list[ScoredSample]:
    """Per video: 10 N.1 questions (all wrong unless ``n1_right``), one of each other category, all
    right. Every category's accuracy is the same on every resample, so the macro metrics are
    constant across the bootstrap; the micro ones would sit far away (3/13 for narrative)."""
    out = []
    for v in range(n_videos):
        vid = f"vid{v:02d}"
        out += [sample(f"{vid}_n1_{k}", vid, "N.1", n1_right) for k in range(10)]
        out += [sample(f"{vid}_{c}", vid, c, True) for c in CATEGORIES if c != "N.1"]
    return out


def test_bootstrap_recomputes_the_authors_macro_on_each_resample():
    run = unbalanced_run()
    point = compute_metrics(run)
    assert point["narrative"] == 75.0 and point["cultural"] == 100.0 and point["overall"] == 87.5
    assert point["accuracy"] == pytest.approx(100 * 8 / 18)  # micro: 8 right of 18 per video
    ci = bootstrap_ci(run, reps=300, seed=3)
    assert ci["narrative"] == (75.0, 75.0)  # a micro recomputation would give ~23.1
    assert ci["overall"] == (87.5, 87.5)
    assert ci["accuracy"] == pytest.approx((100 * 8 / 18, 100 * 8 / 18))


def test_compare_macro_difference_and_permutation():
    a, b = unbalanced_run(), unbalanced_run(n1_right=True)
    cmp = compare(a, b, reps=300, permutation_reps=500, seed=0)
    nar = cmp.row("narrative")
    assert nar.diff == pytest.approx(25.0)  # N.1 0 -> 100 moves the mean of four categories by 25
    assert nar.ci == pytest.approx((25.0, 25.0))
    assert cmp.row("overall").diff == pytest.approx(12.5)
    assert cmp.row("accuracy").diff == pytest.approx(100 * 10 / 18)  # micro: 10 more right of 18
    # all 12 videos gain: every sign flip but the identity is less extreme -> exact p = 2 / 2^12
    assert nar.p_exact and nar.p == pytest.approx(2 / 2**12)
    assert nar.a_only == 0 and nar.b_only == 120


# --------------------------------------------------------------------------- paired comparison


def test_identical_runs_p_is_one_and_diff_zero():
    run = make_run(p_video=lambda v: 0.5, invalid=0.1)
    cmp = compare(run, list(reversed(run)), reps=500, permutation_reps=500)
    assert cmp.paired == len(run) and not cmp.only_a and not cmp.only_b
    for r in cmp.rows:
        assert r.diff == 0.0
        assert r.p == 1.0
        assert r.ci == (0.0, 0.0)
        assert r.a_only == r.b_only == 0
        assert "no difference" in r.reading


def test_known_large_difference_gives_small_p():
    a = make_run(n_videos=60, per_video=9, p_video=lambda v: 0.35, seed=1)
    # B: the same questions, right far more often
    rng = random.Random(2)
    b = [sample(s.question_id, s.video_id, s.category, rng.random() < 0.75) for s in a]
    cmp = compare(a, b, reps=1000, permutation_reps=2000, seed=0)
    overall = cmp.row("overall")
    want = compute_metrics(b)["overall"] - compute_metrics(a)["overall"]
    assert overall.diff == pytest.approx(want)
    assert overall.diff > 25
    assert overall.p < 0.001 and not overall.p_exact
    assert overall.ci[0] > 0 and overall.ci[0] <= overall.diff <= overall.ci[1]
    for level in ("narrative", "cultural"):
        want = compute_metrics(b)[level] - compute_metrics(a)[level]
        assert cmp.row(level).diff == pytest.approx(want)
        assert cmp.row(level).p < 0.01
    # category rows: difference by hand, Holm-adjusted p not below the raw p
    for c in CATEGORIES:
        r = cmp.row(c)
        ia = [s.correct for s in a if s.category == c]
        ib = [s.correct for s in b if s.category == c]
        assert r.diff == pytest.approx(100 * (sum(ib) - sum(ia)) / len(ia))
        assert r.n == len(ia)
        assert r.p_holm >= r.p
    text = format_comparison(cmp, "run A", "run B")
    assert "B higher" in text and "How to read this" in text and f"n={len(a)}" in text


def test_compare_is_seeded_and_pairs_by_question_id():
    a = make_run(seed=1)
    b = make_run(seed=2)
    c1 = compare(a, b, reps=300, permutation_reps=300, seed=4)
    c2 = compare(a, list(reversed(b)), reps=300, permutation_reps=300, seed=4)
    assert [r.as_row() for r in c1.rows] == [r.as_row() for r in c2.rows]


def test_compare_reports_unpaired_and_rejects_other_data():
    a = make_run(seed=1)
    b = make_run(seed=2)[5:]
    cmp = compare(a, b, reps=200, permutation_reps=200)
    assert len(cmp.only_a) == 5 and cmp.paired == len(a) - 5
    assert any("only in A" in n for n in cmp.notes)
    moved = [replace(a[0], video_id="elsewhere"), *a[1:]]
    with pytest.raises(ValueError, match="different video or category"):
        compare(a, moved)
    other_data = [replace(s, data_fingerprint="f2") for s in b]
    with pytest.raises(ValueError, match="different data"):
        compare([replace(s, data_fingerprint="f1") for s in a], other_data)


def test_sign_flip_p_is_exact_for_few_differing_videos():
    """Three videos differ: the exact p-value is the share of the 8 sign patterns at least as extreme."""
    a = make_run(n_videos=10, per_video=4, p_video=lambda v: 0.0)
    b = [
        sample(
            s.question_id,
            s.video_id,
            s.category,
            s.video_id in ("vid000", "vid001", "vid002") and s.question_id[-1] in "01",
        )
        for s in a
    ]
    cmp = compare(a, b, reps=100, permutation_reps=100)
    r = cmp.row("overall")
    d = [2.0, 2.0, 2.0]  # correct answers gained per differing video
    stats = [abs(sum(x * y for x, y in zip(signs, d, strict=True))) for signs in itertools.product((-1, 1), repeat=3)]
    assert r.p_exact
    assert r.p == pytest.approx(sum(s >= abs(sum(d)) for s in stats) / len(stats))  # 2/8
    assert r.p == pytest.approx(0.25)


def test_holm():
    adj = holm([0.01, 0.04, None, 0.03])
    assert adj[2] is None
    assert adj[0] == pytest.approx(0.03) and adj[3] == pytest.approx(0.06) and adj[1] == pytest.approx(0.06)


# --------------------------------------------------------------------------- naru_open (recall 0-1)


def judged(qid: str, vid: str, cat: str, recall: float | None) -> JudgedSample:
    """A judged open-ended response; ``recall=None``: unscored (left out of every recall)."""
    return JudgedSample(
        question_id=qid,
        video_id=vid,
        category=cat,
        level="narrative" if cat in NARRATIVE else "cultural",
        question="q",
        reference="r",
        response="a",
        status="unscored" if recall is None else "scored",
        recall=recall,
    )


def test_open_bootstrap_recomputes_the_table_iii_macro_on_each_resample():
    """Per video: 10 N.1 responses with recall 0, one of every other category with recall 1, one
    unscored C.5. Every category mean is the same on every resample, so the table III macro
    (mean of the nine category recalls) is constant; the per-response ``recall`` is not."""
    run = []
    for v in range(12):
        vid = f"vid{v:02d}"
        run += [judged(f"{vid}_n1_{k}", vid, "N.1", 0.0) for k in range(10)]
        run += [judged(f"{vid}_{c}", vid, c, 1.0) for c in CATEGORIES if c != "N.1"]
        run.append(judged(f"{vid}_u", vid, "C.5", None))
    point = compute_open_metrics(run)
    assert point["overall"] == pytest.approx(8 / 9) and point["narrative"] == pytest.approx(0.75)
    assert point["recall"] == pytest.approx(8 / 18)
    ci = bootstrap_open_ci(run, reps=300, seed=3)
    assert ci["overall"] == pytest.approx((8 / 9, 8 / 9))  # a micro recomputation would sit at 8/18
    assert ci["narrative"] == pytest.approx((0.75, 0.75)) and ci["cultural"] == pytest.approx((1.0, 1.0))
    assert ci["recall"] == pytest.approx((8 / 18, 8 / 18))  # balanced per video: constant too
    assert ci["unscored_rate"] == pytest.approx((1 / 19, 1 / 19))
    assert "n_scored" not in ci and "judge_cost_usd" not in ci  # sums have no interval


def test_open_bootstrap_equals_a_direct_resampling_of_videos():
    """The vectorised bootstrap against a plain loop: draw videos with the same generator, pool the
    drawn videos' responses, take the category means, then their mean (table III)."""
    rng = random.Random(4)
    run = [
        judged(f"q{v}_{k}", f"vid{v}", CATEGORIES[(v * 3 + k) % 9], None if rng.random() < 0.1 else rng.random())
        for v in range(15)
        for k in range(rng.randint(3, 9))
    ]
    reps, seed = 400, 11
    ci = bootstrap_open_ci(run, reps=reps, seed=seed, metrics=("overall", "cultural", "recall"))
    videos = list(dict.fromkeys(s.video_id for s in run))
    counts = np.random.default_rng(seed).multinomial(len(videos), [1 / len(videos)] * len(videos), size=reps)
    draws: dict[str, list[float]] = {"overall": [], "cultural": [], "recall": []}
    for row in counts:
        pool = [s for vid, k in zip(videos, row, strict=True) for s in run if s.video_id == vid for _ in range(k)]
        scored = [s for s in pool if s.recall is not None]
        cat = {c: [s.recall for s in scored if s.category == c] for c in CATEGORIES}
        means = {c: sum(v) / len(v) for c, v in cat.items() if v}
        draws["overall"].append(sum(means.values()) / len(means))
        cul = [means[c] for c in CATEGORIES[4:] if c in means]
        draws["cultural"].append(sum(cul) / len(cul))
        draws["recall"].append(sum(s.recall for s in scored) / len(scored))
    for m, d in draws.items():
        assert ci[m] == pytest.approx((np.percentile(d, 2.5), np.percentile(d, 97.5)), abs=1e-12), m
    point = compute_open_metrics(run)
    assert all(ci[m][0] <= point[m] <= ci[m][1] for m in draws)


def test_score_command_prints_seeded_video_clustered_intervals(tmp_path, capsys):
    """``naru-eval score LOG`` prints each macro metric and accuracy with the bootstrap interval of
    :func:`bootstrap_ci` (seeded), and ``--json`` carries the same numbers."""
    import json

    from naru_eval.cli import main
    from naru_eval.core.scoring import metric_payloads

    run = make_run(n_videos=20, p_video=lambda v: 0.2 + 0.03 * v, seed=2)
    log = tmp_path / "x_samples_naru_mcq.jsonl"
    log.write_text("".join(json.dumps(metric_payloads(s)) + "\n" for s in run), encoding="utf-8")
    assert main(["score", str(log), "--json", "--reps", "500", "--seed", "4"]) == 0
    out = json.loads(capsys.readouterr().out)[log.name]
    want = bootstrap_ci(run, reps=500, seed=4)
    point = compute_metrics(run)
    for m in ("overall", "narrative", "cultural", "accuracy"):
        assert out[m] == pytest.approx(point[m]) and out["ci95"][m] == pytest.approx(list(want[m])), m
    assert out["bootstrap"] == {"cluster": "video_id", "reps": 500, "seed": 4, "level": 0.95,
                                "metrics": ["overall", "narrative", "cultural", "accuracy"]}  # fmt: skip
    assert main(["score", str(log), "--reps", "500", "--seed", "4"]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith(f"| {log.name} |"))
    cells = dict(zip(METRICS, [c.strip() for c in row.split("|")[2:-1]], strict=True))
    lo, hi = want["overall"]
    assert cells["overall"] == f"{point['overall']:.1f} [{lo:.1f}, {hi:.1f}]"
    assert cells["N.1"] == f"{point['N.1']:.1f}"  # categories: no interval printed
    assert "500 reps, seed 4" in text
    assert main(["score", str(log), "--json", "--reps", "500", "--seed", "5"]) == 0
    assert json.loads(capsys.readouterr().out)[log.name]["ci95"] != out["ci95"]  # the seed matters
