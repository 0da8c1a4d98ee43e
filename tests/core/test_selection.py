"""The selectors' arithmetic (naru_eval/core/selection.py): exactly N distinct pool positions in
time order, alpha 0 uniform over the pool exactly, AKS's relevance and coverage, the seeded control,
the dialogue's cue frames."""

from __future__ import annotations

import numpy as np
import pytest

from naru_eval.core import selection as sel
from naru_eval.core.selection import Selection


@pytest.mark.parametrize("size,n", [(120, 8), (121, 8), (7, 7), (1000, 128), (9, 2)])
def test_its_with_alpha_zero_is_uniform_over_the_pool_exactly(size, n):
    scores = np.random.default_rng(1).random(size)
    got = sel.its(scores, n, 0.0)
    assert got.tolist() == sel.uniform_pool(size, n).tolist() == [int((k + 0.5) * size / n) for k in range(n)]


def test_its_follows_the_similarity_and_its_power():
    size, n = 200, 10
    scores = np.zeros(size)
    scores[50:60] = 1.0  # one relevant stretch
    sharp = sel.its(scores, n, 8.0)
    assert len(set(sharp.tolist())) == n and sharp.tolist() == sorted(sharp.tolist())
    assert all(50 <= p < 60 for p in sharp)  # a sharp density: the stretch alone
    graded = np.linspace(0.3, 0.6, size)
    graded[50:60] = 1.0
    soft = sel.its(graded, n, 1.0)  # a soft density: more there than uniform would put (0.5), not all
    inside = sum(50 <= p < 60 for p in soft)
    assert 1 <= inside < n  # uniform puts 0 or 1 there (10 of 200 frames, a stretch of 10)


def test_its_never_repeats_a_frame_and_clips_the_budget():
    scores = np.zeros(50)
    scores[10] = 1.0  # all the mass on one frame: the repeats move to its nearest free neighbours
    got = sel.its(scores, 6, 50.0)
    assert got.tolist() == [7, 8, 9, 10, 11, 12]
    assert len(sel.its(np.ones(5), 9, 3.0)) == 5


def test_aks_takes_a_stretch_that_stands_out_else_covers_by_halves():
    scores = np.zeros(128)
    scores[100:104] = 1.0
    top = sel.aks(scores, 4, threshold=0.8, depth=5)  # the top four stand out by 1.0 - 4/128 > 0.8
    assert top.tolist() == [100, 101, 102, 103]
    spread = sel.aks(scores, 8, threshold=0.99, depth=5)  # never relevant enough: halves down to depth
    assert len(spread) == 8 and len(set(spread.tolist())) == 8
    assert {p // 16 for p in spread} == set(range(8))  # one frame per sixteenth: coverage
    assert set(range(100, 104)) & set(spread.tolist())  # the relevant stretch's half still takes its best


def test_random_is_seeded_the_same_everywhere():
    a = sel.random_subset(120, 8, sel.seeded("fp", "q1", 0))
    b = sel.random_subset(120, 8, sel.seeded("fp", "q1", 0))
    c = sel.random_subset(120, 8, sel.seeded("fp", "q2", 0))
    assert a.tolist() == b.tolist() != c.tolist() and a.tolist() == sorted(set(a.tolist()))


def test_dialogue_takes_the_cues_frames_then_uniform():
    pool_times = np.arange(100, dtype=np.float64) + 0.5
    got = sel.dialogue([10.0, 70.0, 70.2], np.array([0.9, 0.8, 0.1]), pool_times, 4)
    assert 9 in got.tolist() or 10 in got.tolist()
    assert 69 in got.tolist() or 70 in got.tolist()
    assert len(got) == 4 and len(set(got.tolist())) == 4


def test_a_selection_records_only_what_chooses_its_frames():
    assert Selection().params() == {} and Selection().label() == "uniform"
    its = Selection(method="its", encoder="org/enc", encoder_fingerprint="ab", alpha=2.0)
    assert its.params() == {
        "method": "its", "pool_fps": 1.0, "encoder": "org/enc", "encoder_fingerprint": "ab", "query": "question",
        "alpha": 2.0,
    }  # fmt: skip
    assert its.label() == "its(pool_fps=1, encoder=enc@ab, query=question, alpha=2)"
    assert Selection(method="random", seed=3).params() == {"method": "random", "pool_fps": 1.0, "seed": 3}
