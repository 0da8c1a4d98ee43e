"""The metric tables (naru_eval/core/metrics.py): one row per metric, read by the payloads, the
recomputation, the bootstrap and the leaderboard's columns."""

from __future__ import annotations

import dataclasses

import pytest

from naru_eval.core.data import CATEGORIES, NaruQuestion
from naru_eval.core.metrics import MACRO_KEY, Metric, MetricTable, compute
from naru_eval.core.scoring import MCQ, ScoredSample, compute_metrics, metric_payloads, score_response
from naru_eval.core.variants import CIRCULAR
from naru_eval.judge.score import OPEN
from naru_eval.report.stats import bootstrap_values


def _samples() -> list[ScoredSample]:
    qs = [
        NaruQuestion(f"q{i}", f"v{i % 4}", CATEGORIES[i % 9], "?", ("a", "b", "c", "d"), "ABCD"[i % 4])
        for i in range(36)
    ]
    return [score_response(q, q.answer if i % 3 else "zz", "fp") for i, q in enumerate(qs)]


def test_a_row_added_to_a_table_reaches_the_payloads_the_recomputation_and_the_bootstrap():
    """A metric is declared once: a table with one more row gives its payload, its value and its
    interval with nothing else written for it."""
    wrong = Metric("wrong", "share answered wrong", "all", lambda s: 0.0 if s.correct else 100.0, "mean")
    table = dataclasses.replace(MCQ, metrics=(*MCQ.metrics, wrong))
    samples = _samples()

    def payloads(s: ScoredSample):
        return table.payloads(s.record(), s)

    got = compute(table, samples, payloads)
    assert got["wrong"] == pytest.approx(100.0 - got["accuracy"]) and {k: got[k] for k in MCQ.names} == compute_metrics(
        samples
    )
    assert payloads(samples[0])["wrong"]["score"] == 100.0  # question 0 was answered "zz"
    ci = bootstrap_values(samples, table, reps=50)
    assert set(ci) == set(table.per_item) and "wrong" in ci and ci["wrong"] is not None
    assert table.columns[-1] == "wrong"


def test_the_tables_payload_conventions():
    s = _samples()[1]
    p = metric_payloads(s)
    assert list(p) == list(MCQ.names)
    assert MACRO_KEY in p["overall"] and "score" not in p["overall"]  # a macro mean: never `score`
    assert (
        "score" in p["accuracy"]
        and "score" in p[s.category]
        and all("score" not in p[c] for c in CATEGORIES if c != s.category)
    )
    assert MCQ.macro == ("overall", "narrative", "cultural") and MCQ.headline == (*MCQ.macro, "accuracy")
    assert CIRCULAR["circular"].aggregation == "group" and CIRCULAR.macro == ()
    assert OPEN.columns == (*OPEN.macro, *CATEGORIES, "recall") and OPEN.digits == 2 and MCQ.digits == 1


def test_a_table_refuses_an_unknown_scope_a_duplicate_or_no_record_metric():
    with pytest.raises(ValueError, match="scope 'X.9'"):
        Metric("m", "?", "X.9", lambda s: 1.0, "mean")
    m = Metric("m", "?", "all", lambda s: 1.0, "mean")
    with pytest.raises(ValueError, match="unique"):
        MetricTable("t", "%", 1, "levels", "m", (m, m))
    with pytest.raises(ValueError, match="include 'overall'"):
        MetricTable("t", "%", 1, "levels", "overall", (m,))
    with pytest.raises(KeyError, match="no metric 'x'"):
        MCQ["x"]
