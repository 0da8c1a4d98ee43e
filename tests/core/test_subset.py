import random

from naru_eval.core.data import NaruQuestion
from naru_eval.core.subset import allocate, select_subset
from naru_eval.core.synthetic import PAPER_COUNTS
from tests.helpers.data import EXPECTED_500


def _questions(counts, subset=None):
    out = []
    for cat, n in counts.items():
        for i in range(n):
            out.append(NaruQuestion(f"{cat}-{i}", f"v{i % 7}", cat, "q?", ("a", "b", "c", "d"), "A", subset))
    return out


def test_paper_quotas_by_largest_remainder():
    # 500 * n / 1481: floors sum to 496; the 4 largest remainders are C.3 (.966), N.3 (.795),
    # C.2 (.628) and N.1 (.458).
    assert allocate(PAPER_COUNTS) == EXPECTED_500
    assert sum(allocate(PAPER_COUNTS).values()) == 500


def test_selection_is_order_independent_and_stable():
    qs = _questions(PAPER_COUNTS)
    first = {q.question_id for q in select_subset(qs)}
    shuffled = qs[:]
    random.Random(7).shuffle(shuffled)
    assert {q.question_id for q in select_subset(shuffled)} == first
    assert len(first) == 500
    by_cat = {}
    for q in select_subset(qs):
        by_cat[q.category] = by_cat.get(q.category, 0) + 1
    assert by_cat == EXPECTED_500


def test_official_flags_win():
    qs = _questions({"N.1": 3, "C.1": 3}, subset=False)
    qs[1] = qs[1].__class__(**{**qs[1].__dict__, "subset_500": True})
    assert [q.question_id for q in select_subset(qs)] == [qs[1].question_id]


def test_small_sets_keep_everything():
    qs = _questions({"N.1": 4, "C.5": 4})
    assert len(select_subset(qs)) == 8
