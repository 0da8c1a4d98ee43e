"""The opt-in LLM fallback of MCQ answer extraction."""

from __future__ import annotations

import pytest

from naru_eval.core.data import NaruQuestion
from naru_eval.core.scoring import ScoredSample, compute_metrics, metric_payloads
from naru_eval.core.scoring import score_response as score_rules
from naru_eval.judge.mcq_fallback import fallback_rate
from naru_eval.lmms.tasks import mcq_fallback

pytestmark = pytest.mark.api

Q = NaruQuestion(
    "q1",
    "v1",
    "N.1",
    "Which colour fills segment 2?",
    ("red screen", "blue screen", "green screen", "black screen"),
    "B",
)
NO_LETTER = "Looking at the video, I think the second one is right."


def score_response(question: NaruQuestion, response: str | None) -> ScoredSample:
    """Scoring as the lmms-eval bridge does it: the fallback from NARU_MCQ_LLM_FALLBACK."""
    return score_rules(question, response, fallback=mcq_fallback())


def responses():
    return [
        ("The answer is B.", "explicit"),
        (NO_LETTER, None),
        ("I cannot determine the answer from the video.", "invalid:refusal"),
        ("", "invalid:empty"),
        ("Hmm, the fourth one maybe, or the first one.", None),
    ]


def test_off_by_default_changes_nothing(stub, monkeypatch):
    monkeypatch.setenv("NARU_JUDGE_BASE_URL", stub.base_url)
    samples = [score_response(Q, r) for r, _ in responses()]
    assert [s.method for s in samples] == [
        "explicit",
        "invalid:no_letter",
        "invalid:refusal",
        "invalid:empty",
        "invalid:no_letter",
    ]
    assert stub.chat_requests() == []
    assert fallback_rate(samples).llm_fallback == 0


def test_on_reads_letters_the_rules_cannot(stub, monkeypatch):
    monkeypatch.setenv("NARU_JUDGE_BASE_URL", stub.base_url)
    off = [score_response(Q, r) for r, _ in responses()]
    monkeypatch.setenv("NARU_MCQ_LLM_FALLBACK", "1")
    on = [score_response(Q, r) for r, _ in responses()]
    assert [(s.pred, s.method) for s in on] == [
        ("B", "explicit"),
        ("B", "llm_fallback"),
        (None, "invalid:refusal"),  # refusals and empty answers are never sent
        (None, "invalid:empty"),
        (None, "invalid:no_letter"),  # the judge saw two options: "none"
    ]
    assert on[1].correct and on[1].valid
    reqs = stub.chat_requests()
    assert len(reqs) == 2 and {r.body["response_format"]["json_schema"]["name"] for r in reqs} == {"McqChoice"}
    assert "<<<RESPONSE " in reqs[0].body["messages"][1]["content"]
    rate = fallback_rate(on)
    assert rate.model_dump() == {
        "n": 5,
        "llm_fallback": 1,
        "fallback_rate": 0.2,
        "fallback_correct": 1,
        "still_invalid": 3,
    }
    m_off, m_on = compute_metrics(off), compute_metrics(on)
    assert m_off["invalid_rate"] == 80.0 and m_on["invalid_rate"] == 60.0
    assert metric_payloads(on[1])["overall"]["method"] == "llm_fallback"
    # cached: scoring again asks nothing
    stub.reset()
    assert [score_response(Q, r).method for r, _ in responses()] == [s.method for s in on]
    assert stub.chat_requests() == []


def test_judge_down_leaves_the_answer_invalid(monkeypatch):
    from tests.helpers.stubs import OpenAIStub

    with OpenAIStub(statuses=[400] * 5) as stub:
        monkeypatch.setenv("NARU_JUDGE_BASE_URL", stub.base_url)
        monkeypatch.setenv("NARU_MCQ_LLM_FALLBACK", "1")
        s = score_response(Q, NO_LETTER)
    assert s.method == "invalid:no_letter" and not s.valid


def test_scoring_itself_reads_no_setting(stub, monkeypatch):
    """The fallback is a parameter of scoring: the environment alone turns nothing on in core."""
    monkeypatch.setenv("NARU_JUDGE_BASE_URL", stub.base_url)
    monkeypatch.setenv("NARU_MCQ_LLM_FALLBACK", "1")
    assert score_rules(Q, NO_LETTER).method == "invalid:no_letter"
    assert stub.chat_requests() == []
    assert score_response(Q, NO_LETTER).method == "llm_fallback"
