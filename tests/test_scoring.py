from naru_eval.data import NaruQuestion
from naru_eval.scoring import METRICS, aggregate_score, compute_metrics, metric_payloads, score_response


def _q(qid, cat, answer="B", video="v1"):
    return NaruQuestion(qid, video, cat, "What happens?", ("one", "two", "three", "four"), answer)


def test_payload_scopes():
    s = score_response(_q("q1", "N.2"), "The answer is B")
    p = metric_payloads(s)
    assert set(p) == set(METRICS)
    assert p["overall"]["score"] == 100.0 and p["narrative"]["score"] == 100.0 and p["N.2"]["score"] == 100.0
    assert "score" not in p["cultural"] and "score" not in p["N.1"] and "score" not in p["C.1"]
    assert p["invalid_rate"]["score"] == 0.0
    for payload in p.values():  # the whole record travels in each payload
        assert payload["question_id"] == "q1" and payload["video_id"] == "v1" and payload["gold"] == "B"
        assert payload["pred"] == "B" and payload["method"] == "explicit" and payload["correct"] is True


def test_metrics_on_constructed_samples():
    samples = [
        score_response(_q("a", "N.1"), "B"),  # right
        score_response(_q("b", "N.1"), "C"),  # wrong
        score_response(_q("c", "N.4"), ""),  # invalid -> wrong
        score_response(_q("d", "C.1"), "(B)"),  # right
        score_response(_q("e", "C.3"), "I cannot answer."),  # invalid
    ]
    m = compute_metrics(samples)
    assert m["overall"] == 40.0
    assert m["narrative"] == 100 / 3
    assert m["cultural"] == 50.0
    assert m["N.1"] == 50.0 and m["N.4"] == 0.0 and m["C.1"] == 100.0 and m["C.3"] == 0.0
    assert m["N.2"] is None and m["C.5"] is None  # no question in scope: N/A, never 0
    assert m["invalid_rate"] == 40.0


def test_aggregate_ignores_out_of_scope():
    assert aggregate_score([{"x": 1}, {"score": 100.0}, {"score": 0.0}]) == 50.0
    assert aggregate_score([{"x": 1}]) is None
