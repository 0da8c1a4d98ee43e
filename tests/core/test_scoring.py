import dataclasses
import random

import pytest

from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE, NaruQuestion
from naru_eval.core.metrics import MACRO_KEY, aggregate_macro, aggregate_score, macro_levels
from naru_eval.core.provenance import FIELDS as PROVENANCE_FIELDS
from naru_eval.core.scoring import METRICS, ScoredSample, compute_metrics, metric_payloads, score_response


def _q(qid, cat, answer="B", video="v1"):
    return NaruQuestion(qid, video, cat, "What happens?", ("one", "two", "three", "four"), answer)


def test_payload_scopes():
    s = score_response(_q("q1", "N.2"), "The answer is B", data_fingerprint="abc")
    p = metric_payloads(s)
    assert set(p) == set(METRICS)
    # macro metrics carry the item's value under item_score, never "score" (lmms-eval would print
    # the standard error of a micro mean for them otherwise)
    assert p["overall"][MACRO_KEY] == 100.0 and p["narrative"][MACRO_KEY] == 100.0
    assert all("score" not in p[m] for m in ("overall", "narrative", "cultural"))
    assert MACRO_KEY not in p["cultural"]
    assert p["accuracy"]["score"] == 100.0 and p["N.2"]["score"] == 100.0
    assert "score" not in p["N.1"] and "score" not in p["C.1"]
    assert p["invalid_rate"]["score"] == 0.0
    for payload in p.values():  # the whole record travels in each payload
        assert payload["question_id"] == "q1" and payload["video_id"] == "v1" and payload["gold"] == "B"
        assert payload["pred"] == "B" and payload["method"] == "explicit" and payload["correct"] is True
        assert payload["data_fingerprint"] == "abc"


def test_each_record_is_its_dataclass_dumped_in_order_with_the_provenance_last():
    """A payload's record is the dataclass itself, dumped (one declaration, no TypedDict twin): the
    fields in order, the provenance fields last, and a record reads back into the same sample."""
    from naru_eval.core.variants import CircularSample, circular_record

    s = score_response(_q("q1", "N.2"), "B", "fp", provenance={"adapter": "naru_x", "sampling": "8 Frames"})
    fields = [f.name for f in dataclasses.fields(ScoredSample)]
    assert list(s.record()) == fields and fields[-len(PROVENANCE_FIELDS) :] == list(PROVENANCE_FIELDS)
    assert s.record() == dataclasses.asdict(s) and ScoredSample.from_record({**s.record(), "score": 1}) == s
    c = circular_record(s, "q1", 1)
    assert list(c.record()) == [f.name for f in dataclasses.fields(CircularSample)]
    assert CircularSample.from_record(c.record()) == c
    assert (c.sampling, c.variant) == ("8 Frames", None)


def test_metrics_on_constructed_samples():
    samples = [
        score_response(_q("a", "N.1"), "B"),  # right
        score_response(_q("b", "N.1"), "C"),  # wrong
        score_response(_q("c", "N.4"), ""),  # invalid -> wrong
        score_response(_q("d", "C.1"), "(B)"),  # right
        score_response(_q("e", "C.3"), "I cannot answer."),  # invalid
    ]
    m = compute_metrics(samples)
    assert m["accuracy"] == 40.0  # micro: 2 of 5
    assert m["N.1"] == 50.0 and m["N.4"] == 0.0 and m["C.1"] == 100.0 and m["C.3"] == 0.0
    assert m["narrative"] == 25.0  # mean(N.1 50, N.4 0); micro would be 33.3
    assert m["cultural"] == 50.0  # mean(C.1 100, C.3 0)
    assert m["overall"] == 37.5  # (25 + 50) / 2
    assert m["N.2"] is None and m["C.5"] is None  # no question in scope: N/A, never 0
    assert m["invalid_rate"] == 40.0


def test_macro_matches_an_independent_computation_and_differs_from_micro():
    """Unequal category sizes: the authors' mean of category means, computed here from the raw
    (category, correct) pairs, against compute_metrics; micro accuracy stays its own metric."""
    rng = random.Random(7)
    raw = []
    for i in range(400):
        cat = rng.choice(list(CATEGORIES[:3]) * 4 + list(CATEGORIES))  # N.1-N.3 over-represented
        raw.append((f"q{i}", cat, rng.random() < (0.2 + 0.07 * CATEGORIES.index(cat))))
    samples = [score_response(_q(qid, cat), "B" if ok else "C") for qid, cat, ok in raw]
    got = compute_metrics(samples)

    def acc(cats):
        xs = [ok for _, c, ok in raw if c in cats]
        return 100.0 * sum(xs) / len(xs)

    per_cat = {c: acc({c}) for c in CATEGORIES}
    nar = sum(per_cat[c] for c in NARRATIVE) / 4
    cul = sum(per_cat[c] for c in CULTURAL) / 5
    assert got["narrative"] == pytest.approx(nar, abs=1e-9)
    assert got["cultural"] == pytest.approx(cul, abs=1e-9)
    assert got["overall"] == pytest.approx((nar + cul) / 2, abs=1e-9)
    assert got["accuracy"] == pytest.approx(100.0 * sum(ok for *_, ok in raw) / len(raw), abs=1e-9)
    assert abs(got["overall"] - got["accuracy"]) > 0.5  # the two definitions really differ here
    for c in CATEGORIES:
        assert got[c] == pytest.approx(per_cat[c], abs=1e-9)


def test_official_counts_reproduce_table_ii_not_micro():
    """Gemini-3-Pro's published counts: the macro mean gives the paper's 70.0, micro 70.1."""
    totals = [185, 187, 186, 187, 143, 147, 148, 149, 149]
    right = [138, 147, 142, 125, 86, 101, 95, 104, 100]
    payloads = []
    for c, n, k in zip(CATEGORIES, totals, right, strict=True):
        payloads += [{"category": c, MACRO_KEY: 100.0 if i < k else 0.0} for i in range(n)]
    assert round(aggregate_macro(payloads), 1) == 70.0
    assert round(100 * sum(right) / sum(totals), 1) == 70.1


def test_macro_levels_skip_absent_categories():
    assert macro_levels({"N.1": 50.0, "C.2": 100.0}) == {"overall": 75.0, "narrative": 50.0, "cultural": 100.0}
    assert macro_levels({"N.1": 50.0, "N.2": float("nan")}) == {"overall": 50.0, "narrative": 50.0, "cultural": None}
    assert macro_levels({}) == {"overall": None, "narrative": None, "cultural": None}
    with pytest.raises(ValueError, match="X.9"):
        aggregate_macro([{"category": "X.9", MACRO_KEY: 1.0}])


def test_aggregate_ignores_out_of_scope():
    assert aggregate_score([{"x": 1}, {"score": 100.0}, {"score": 0.0}]) == 50.0
    assert aggregate_score([{"x": 1}]) is None
    assert aggregate_macro([{"category": "N.1"}]) is None
