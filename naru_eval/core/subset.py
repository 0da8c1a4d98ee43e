"""The 500-question diagnostic subset (``naru_mcq_500``, the frame sweep, ``naru_open``).

When the data carries ``subset_500``, that official membership is used as is. Otherwise the
subset is chosen so that every user gets the same questions from the same data:

1. **Quotas** by proportional allocation across the nine categories with the largest-remainder
   method: category c with n_c of N questions gets ``floor(500 * n_c / N)``, and the seats left
   go to the largest fractional parts (ties: category order N.1 ... C.5).
2. **Members** of category c are its ``quota_c`` questions with the smallest
   ``sha256(f"{seed}:{question_id}")``. This depends on the ids alone, never on file order.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

from naru_eval.core.data import CATEGORIES, NaruQuestion

SUBSET_SIZE = 500
SUBSET_SEED = "naru-500-v1"


def allocate(counts: dict[str, int], size: int = SUBSET_SIZE) -> dict[str, int]:
    """Largest-remainder quotas summing to ``min(size, total)``."""
    total = sum(counts.values())
    size = min(size, total)
    if total == 0:
        return {c: 0 for c in counts}
    exact = {c: size * counts.get(c, 0) / total for c in CATEGORIES if c in counts}
    quotas = {c: int(v) for c, v in exact.items()}
    left = size - sum(quotas.values())
    order = sorted(exact, key=lambda c: (-(exact[c] - quotas[c]), CATEGORIES.index(c)))
    for c in order[:left]:
        quotas[c] += 1
    return quotas


def _rank_key(question_id: str, seed: str) -> str:
    return hashlib.sha256(f"{seed}:{question_id}".encode()).hexdigest()


def select_subset(
    questions: Sequence[NaruQuestion], size: int = SUBSET_SIZE, seed: str = SUBSET_SEED
) -> list[NaruQuestion]:
    """The diagnostic subset, in the input order; official ``subset_500`` flags win."""
    if any(q.subset_500 is not None for q in questions):
        return [q for q in questions if q.subset_500]
    quotas = allocate(dict(Counter(q.category for q in questions)), size)
    chosen: set[str] = set()
    for cat, quota in quotas.items():
        members = sorted((q for q in questions if q.category == cat), key=lambda q: _rank_key(q.question_id, seed))
        chosen.update(q.question_id for q in members[:quota])
    return [q for q in questions if q.question_id in chosen]
