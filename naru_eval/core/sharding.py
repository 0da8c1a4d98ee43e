"""Keep each video's questions on one rank under ``accelerate launch``.

lmms-eval gives doc i to rank ``i % world_size``, which spreads one video's ~10 questions over
every rank, so every rank decodes every video. :func:`order_for_ranks` reorders the docs so
that the positions a rank receives hold whole videos: videos are assigned to ranks greedily
(largest first, to the least-loaded rank), then a few questions move between ranks only where
needed to give each rank exactly the count lmms-eval will hand it (at most ``world_size - 1``
videos are split).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

from naru_eval.core.data import NaruQuestion

Q = TypeVar("Q", bound=NaruQuestion)


def world_size_from_env() -> int:
    """The processes of this run (``WORLD_SIZE``, set by ``accelerate launch`` / torchrun; 1 without)."""
    return max(1, int(os.environ.get("WORLD_SIZE", "1") or 1))


def rank_from_env() -> int:
    """This process's global rank (``RANK``; 0 without a launcher)."""
    return max(0, int(os.environ.get("RANK", "0") or 0))


def order_for_ranks(questions: Sequence[Q], world_size: int) -> list[Q]:
    """Docs reordered so that rank r's positions (r, r+W, …) hold whole videos."""
    n = len(questions)
    if world_size <= 1 or n == 0:
        return list(questions)
    by_video: dict[str, list[Q]] = {}
    for q in questions:
        by_video.setdefault(q.video_id, []).append(q)
    capacity = [len(range(r, n, world_size)) for r in range(world_size)]
    queues: list[list[Q]] = [[] for _ in range(world_size)]
    for vid in sorted(by_video, key=lambda v: (-len(by_video[v]), v)):
        r = min(range(world_size), key=lambda k: (len(queues[k]) - capacity[k], k))
        queues[r].extend(by_video[vid])
    # move the overflow of over-full ranks (from the end: their last video) to short ones
    spill: list[Q] = []
    for r in range(world_size):
        while len(queues[r]) > capacity[r]:
            spill.append(queues[r].pop())
    for r in range(world_size):
        while len(queues[r]) < capacity[r]:
            queues[r].append(spill.pop())
    out: list[Q] = []
    cursors = [0] * world_size
    for i in range(n):
        r = i % world_size
        out.append(queues[r][cursors[r]])
        cursors[r] += 1
    return out
