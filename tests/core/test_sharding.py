from collections import Counter, defaultdict

import pytest

from naru_eval.core.data import NaruQuestion
from naru_eval.core.sharding import order_for_ranks


def _questions(per_video):
    out = []
    for v, n in enumerate(per_video):
        for k in range(n):
            out.append(NaruQuestion(f"q{v}-{k}", f"v{v:03d}", "N.1", "?", ("a", "b", "c", "d"), "A"))
    return out


@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_videos_stay_on_one_rank(world):
    per_video = [(v * 7) % 13 + 3 for v in range(155)]  # 3..15 questions per video
    qs = _questions(per_video)
    ordered = order_for_ranks(qs, world)
    assert sorted(q.question_id for q in ordered) == sorted(q.question_id for q in qs)  # a permutation
    ranks_of = defaultdict(set)
    for i, q in enumerate(ordered):  # lmms-eval hands doc i to rank i % world
        ranks_of[q.video_id].add(i % world)
    split = [v for v, r in ranks_of.items() if len(r) > 1]
    assert len(split) <= world - 1
    load = Counter(i % world for i in range(len(ordered)))
    assert max(load.values()) - min(load.values()) <= 1


def test_single_process_keeps_order():
    qs = _questions([3, 2])
    assert order_for_ranks(qs, 1) == qs


def test_naive_split_would_spread_videos():
    qs = _questions([10] * 20)
    spread = sum(len({i % 4 for i, q in enumerate(qs) if q.video_id == v}) > 1 for v in {q.video_id for q in qs})
    assert spread == 20  # what lmms-eval does without reordering
