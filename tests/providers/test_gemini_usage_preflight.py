"""naru_eval.providers.gemini: the usage totals read from the response store, the usage summary
model, the preflight and the run estimate's paper totals."""

from __future__ import annotations

import json

import pytest

from naru_eval.providers.gemini.estimate import paper_questions, paper_totals
from naru_eval.providers.gemini.preflight import Asked, ContextOverflow, TokenPlan, calibrate, preflight
from naru_eval.providers.gemini.request import RequestConfig
from naru_eval.providers.gemini.tokens import text_tokens
from naru_eval.providers.gemini.usage import UsageTotals, usage_from_store
from naru_eval.providers.gemini.video import PrepSpec
from naru_eval.store.responses import ResponseStore


def test_usage_from_store_sums_per_run_key_and_filters(tmp_path):
    store = ResponseStore(tmp_path / "r.sqlite")
    usage = {"input_tokens": 100, "output_tokens": 2, "cost_usd": 0.5, "input_by_modality": {"VIDEO": 90, "TEXT": 10}}
    store.put_ok("a", "q1", "A", usage)
    store.put_ok("a", "q2", "B", {**usage, "cost_usd": None})  # tokens without a price
    store.put_failed("a", "q3", "boom", None)
    store.put_ok("b", "q1", "C", usage)
    sums = usage_from_store(store.path)
    assert set(sums) == {"a", "b"}
    a = sums["a"]
    assert (a.requests, a.ok, a.failed, a.input_tokens, a.cost_unknown) == (3, 2, 1, 200, 1)
    assert a.by_modality == {"VIDEO": 180, "TEXT": 20} and a.cost_usd == pytest.approx(0.5)
    assert list(usage_from_store(store.path, "b")) == ["b"] == list(usage_from_store(store.path, ["b"]))
    # the JSON form rounds the cost to a micro-dollar
    t = UsageTotals(cost_usd=0.123456789)
    assert json.loads(t.model_dump_json())["cost_usd"] == 0.123457 == t.model_dump()["cost_usd"]


def test_paper_totals_come_from_the_package_data():
    paper = paper_totals()
    assert (paper.questions, paper.videos, paper.hours, paper.longest_s) == (1481, 155, 146.8, 4 * 3600.0)
    qs, longest, source = paper_questions("naru_mcq_500")
    assert len(qs) == paper.diagnostic_subset == 500 and longest.duration_s == 4 * 3600.0
    assert len({q.video for q in paper_questions("naru_mcq")[0]}) == 155 and "146.8 h" in source


def test_preflight_estimates_each_question_and_refuses_an_overflow(tmp_path):
    plan = TokenPlan("gemini-2.5-flash", 1.0, "default", True)
    asked = [
        Asked(("naru_mcq", "q1"), "/v/a.mp4", "質問", 600.0),
        Asked(("naru_mcq", "q2"), "/v/a.mp4", "もう一つの質問", 600.0),
        Asked(("naru_mcq_blind", "q1"), None, "blind question", None),
    ]
    spec = PrepSpec(fps=1.0)  # re-encoded: file sizes are not checked (the paths do not exist)
    planned = preflight(asked, plan, spec, 2.0, 20.0)
    assert planned.durations == {"/v/a.mp4": 600.0}
    assert planned.estimates[("naru_mcq_blind", "q1")] == text_tokens("blind question")
    assert planned.estimates[("naru_mcq", "q2")] == plan.estimate(600.0, "もう一つの質問").total
    assert planned.longest is not None and planned.longest[1] == "もう一つの質問"
    assert planned.report is not None and planned.report.longest_estimate == planned.estimates[("naru_mcq", "q2")]
    assert preflight(asked[2:], plan, spec, 2.0, 20.0).longest is None  # text only: nothing to upload
    tight = TokenPlan("gemini-2.5-flash", 1.0, "default", True, max_input_tokens=1000)
    with pytest.raises(ContextOverflow, match="media_resolution=low"):
        preflight(asked, tight, spec, 2.0, 20.0)


def test_calibration_records_the_count_then_refuses_an_overflow():
    """``count`` stands in for the remote countTokens: it returns totals only."""
    plan = TokenPlan("gemini-3-flash-preview", 1.0, "default", True, max_input_tokens=50_000)
    est = plan.estimate(60.0, "q")
    seen = []
    calls = iter([5, 40_000])  # the text, then the video part
    calibrate(
        plan,
        RequestConfig(fps=1.0),
        ("/v/a.mp4", "q", est),
        ("files/x", "video/mp4"),
        lambda _: next(calls),
        seen.append,
    )
    (info,) = seen
    assert (info.counted_text, info.counted_video, info.calibrated, info.frame_scale) == (5, 40_000, 40_005, 1.0)
    seen.clear()
    big = iter([5, 60_000])
    with pytest.raises(ContextOverflow, match="counted by countTokens"):
        calibrate(
            plan,
            RequestConfig(fps=1.0),
            ("/v/a.mp4", "q", est),
            ("files/x", "video/mp4"),
            lambda _: next(big),
            seen.append,
        )
    assert seen[0].calibrated == 60_005  # recorded before the refusal
