"""The naru_open lmms-eval hooks in-process: prompt, reference, and process_results' contract
(thread-safe, deterministic under lmms-eval's retries, never raising over the judge)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from naru_eval.judge.score import OPEN_METRICS
from naru_eval.lmms import open_task
from naru_eval.lmms import tasks as lmms_tasks

pytestmark = [pytest.mark.api, pytest.mark.usefixtures("judge_env")]  # judge_env: tests/helpers/judge.py

BASE = dict(
    question_id="q1",
    video_id="v1",
    category="C.3",
    question="[C.3] Why do they bow?",
    options=["to greet", "to apologise", "to pray", "to leave"],
    answer="B",
)


def test_prompt_and_reference_fallbacks():
    plain = {**BASE, "open_question": None, "reference_answer": None}
    assert lmms_tasks.doc_to_text_open(plain).startswith("[C.3] Why do they bow?\nAnswer the question")
    assert lmms_tasks.doc_to_target_open(plain) == "to apologise"
    rich = {**BASE, "open_question": "Why do the two men bow deeply?", "reference_answer": "They apologise."}
    assert lmms_tasks.doc_to_text_open(rich, {"pre_prompt": "", "post_prompt": "Be brief."}) == (
        "Why do the two men bow deeply?\nBe brief."
    )
    assert "(A)" not in lmms_tasks.doc_to_text_open(rich)
    assert lmms_tasks.doc_to_target_open(rich) == "They apologise."


def test_process_docs_registers_the_subset(small_data, monkeypatch):
    monkeypatch.setenv("NARU_DATA_DIR", str(small_data))
    docs = lmms_tasks.process_docs_open_500(None)
    assert len(docs) == 36
    assert [i.question_id for i in open_task._items] == [d["question_id"] for d in docs]


def test_process_results_is_deterministic_threaded_and_cached(stub, fake, monkeypatch):
    monkeypatch.setenv("NARU_JUDGE_BASE_URL", stub.base_url)
    docs = [
        {**BASE, "question_id": f"q{i}", "reference_answer": f"They bow {i} times. They apologise."} for i in range(12)
    ]
    open_task.register_items([open_task.item_of(d) for d in docs])
    for d in docs:  # lmms-eval builds every request before it judges any
        lmms_tasks.doc_to_text_open(d)
    answers = [[d["reference_answer"] if i % 2 else "They apologise."] for i, d in enumerate(docs)]
    with ThreadPoolExecutor(4) as ex:
        first = list(ex.map(lmms_tasks.process_results_open, docs, answers))
    assert fake.counts["FactList"] == 12  # prefetched once, shared by the threads
    assert set(first[0]) == set(OPEN_METRICS)
    assert [p["overall"]["recall"] for p in first] == [0.5, 1.0] * 6
    stub.reset()
    again = [lmms_tasks.process_results_open(d, a) for d, a in zip(docs, answers, strict=True)]  # lmms-eval retries
    assert again == first and stub.chat_requests() == []


def test_process_results_never_raises_over_the_judge(monkeypatch):
    monkeypatch.setenv("NARU_JUDGE_BACKEND", "no-such-backend")
    out = lmms_tasks.process_results_open({**BASE, "reference_answer": "x."}, ["an answer"])
    p = out["overall"]
    assert p["status"] == "unscored" and p["reason"].startswith("judge error: JudgeConfigError")
    assert "no-such-backend" in p["reason"]  # the setting is named
    assert "score" not in p and out["unscored_rate"]["score"] == 1.0
    assert p["judge_unreached"] is True  # a judge error: no score for a run of such responses


def test_a_limited_run_prefetches_its_questions_only(stub, fake, monkeypatch):
    """``--limit 5``: lmms-eval builds 5 prompts, so 5 references are decomposed, not all 12
    (read off lmms-eval's own requests, not the command line)."""
    monkeypatch.setenv("NARU_JUDGE_BASE_URL", stub.base_url)
    docs = [{**BASE, "question_id": f"q{i}", "reference_answer": f"They bow {i} times. They stop."} for i in range(12)]
    open_task.register_items([open_task.item_of(d) for d in docs])
    for d in docs[:5]:
        lmms_tasks.doc_to_text_open(d)
    lmms_tasks.process_results_open(docs[0], ["They stop."])
    assert fake.counts["FactList"] == 5
    assert open_task.prefetch_enabled()
    monkeypatch.setenv("NARU_JUDGE_PREFETCH", "0")
    assert not open_task.prefetch_enabled()


def test_open_payloads_carry_the_data_fingerprint(small_data, stub, monkeypatch):
    """As the MCQ payloads do: every naru_open sample records the annotations' fingerprint, judged
    or not, and it reads back from the log (the leaderboard's ``data`` column)."""
    from naru_eval.core.data import load_local
    from naru_eval.judge.score import JudgedSample

    fingerprint = load_local(small_data).fingerprint
    assert fingerprint
    monkeypatch.setenv("NARU_DATA_DIR", str(small_data))
    monkeypatch.setenv("NARU_JUDGE_BASE_URL", stub.base_url)
    monkeypatch.setenv("NARU_JUDGE_PREFETCH", "0")
    doc = lmms_tasks.process_docs_open_500(None)[0]
    assert doc["data_fingerprint"] == fingerprint
    scored = lmms_tasks.process_results_open(doc, [lmms_tasks.doc_to_target_open(doc)])["overall"]
    assert scored["status"] == "scored" and scored["data_fingerprint"] == fingerprint
    assert JudgedSample.from_dict(scored).data_fingerprint == fingerprint
    monkeypatch.setenv("NARU_JUDGE_BACKEND", "no-such-backend")
    unscored = lmms_tasks.process_results_open(doc, ["an answer"])["overall"]
    assert unscored["status"] == "unscored" and unscored["data_fingerprint"] == fingerprint


def test_unknown_judge_cost_aggregates_to_none_and_lmms_eval_prints_na():
    """``judge_cost_usd`` with an unpriced call is None, typed so, and lmms-eval's results
    table shows ``N/A`` for it (not ``None``, not a partial sum)."""
    import typing

    from lmms_eval.utils import make_table

    assert typing.get_type_hints(lmms_tasks.aggregate_open_cost)["return"] == float | None
    priced = [{"score": 0.25}, {"score": 0.5}]
    assert lmms_tasks.aggregate_open_cost(priced) == 0.75
    cost = lmms_tasks.aggregate_open_cost([*priced, {"score": 0.0, "cost_unknown": True}])
    assert cost is None
    results = {"naru_open": {"alias": "naru_open", "judge_cost_usd,none": cost, "judge_cost_usd_stderr,none": "N/A"}}
    table = make_table({"results": results, "n-shot": {"naru_open": 0}, "higher_is_better": {}})
    row = next(line for line in table.splitlines() if "judge_cost_usd" in line)
    assert "N/A" in row and "None" not in row
    results["naru_open"] = {"alias": "naru_open", "judge_cost_usd,none": 0.75, "judge_cost_usd_stderr,none": "N/A"}
    table = make_table({"results": results, "n-shot": {"naru_open": 0}, "higher_is_better": {}})
    row = next(line for line in table.splitlines() if "judge_cost_usd" in line)
    assert "0.75" in row and "N/A" not in row.split("judge_cost_usd")[1].split("±")[0]
