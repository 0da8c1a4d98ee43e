"""``FrameSelector``: a run's frames chosen for each question (``select=``), for every adapter.

The adapter (``naru_eval.adapters.base.NaruModel.frames``) asks it for a question's frame numbers
and then takes exactly those frames from the one sampler, sized as its family declares; the
budget ``N`` is the run's own (``num_frames``/``fps``: the same number of frames as the uniform run
would give). Before the first answer :meth:`FrameSelector.prepare` builds (or reads) the candidate
pool of every video of the run, with a progress bar, and refuses a video whose pool is smaller
than its budget. Each question's query (its text, with its options for
``select_query=question+options``) is embedded once; a question's frames are the same in every
run, process and rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from naru_eval.core import selection as sel
from naru_eval.core.json_types import JSONObject
from naru_eval.core.selection import Selection
from naru_eval.select.encoder import Encoder
from naru_eval.select.pool import Pool, build_pool
from naru_eval.settings import UserError

if TYPE_CHECKING:
    from naru_eval.media.transcript import Transcript


class Chosen(NamedTuple):
    """A question's frames: their numbers in the frame index and their times (seconds)."""

    indices: tuple[int, ...]
    times: tuple[float, ...]

    def record(self) -> str:
        """The payloads' ``frame_times``: the times, to the millisecond, comma-separated."""
        return ",".join(f"{t:.3f}" for t in self.times)


class Query(NamedTuple):
    """What a question's frames are chosen for: its id (random's seed), its text and options."""

    question_id: str
    text: str
    options: tuple[str, ...] = ()


class PoolTooSmall(UserError):
    """Videos whose pool holds fewer frames than the run's budget (each named, before any compute)."""


class FrameSelector:
    """The run's selector (the module docstring)."""

    def __init__(self, selection: Selection, who: str, device: str | None = None) -> None:
        self.selection = selection
        self.who = who
        self.encoder = Encoder(selection.encoder, device) if selection.encoder else None
        self._pools: dict[str, Pool] = {}
        self._queries: dict[str, np.ndarray] = {}
        self._chosen: dict[tuple[str, str, int], Chosen] = {}

    def resolved(self) -> Selection:
        """The selection with the encoder's weights fingerprint filled in (the run key's)."""
        if self.encoder is None:
            return self.selection
        from dataclasses import replace

        return replace(self.selection, encoder_fingerprint=self.encoder.fingerprint())

    def describe(self) -> JSONObject:
        """The run key's ``selection`` part: what changes the frames chosen."""
        return self.resolved().params()

    def label(self) -> str:
        return self.resolved().label()

    # -- the pools ------------------------------------------------------------------------------
    def pool(self, video: str) -> Pool:
        """``video``'s candidate pool: embedded once (``random``: its frame numbers and times only)."""
        if video not in self._pools:
            if self.encoder is None:
                from naru_eval.select.pool import pool_plan

                idx, times, _ = pool_plan(video, self.selection.pool_fps)
                self._pools[video] = Pool(idx, times, np.zeros((len(idx), 0), np.float32))
            else:
                self._pools[video] = build_pool(video, self.encoder, self.selection.pool_fps)
        return self._pools[video]

    def prepare(self, budgets: dict[str, int]) -> None:
        """Build every video's pool (``budgets``: video -> its frame budget) before any answer, with a
        progress bar; videos whose pool is smaller than their budget are refused, all named at once."""
        from tqdm import tqdm

        small = []
        for video in tqdm(sorted(budgets), desc=f"{self.who}: candidate pools", disable=len(budgets) < 2):
            size = len(self.pool(video).indices)
            if size < budgets[video]:
                small.append(f"{video}: {size} pool frames at {self.selection.pool_fps:g} fps < {budgets[video]}")
        if small:
            listed = "\n  - ".join(small)
            raise PoolTooSmall(
                f"{self.who}: select={self.selection.method} chooses the budget's frames from a pool at "
                f"select_pool_fps={self.selection.pool_fps:g}; {len(small)} video(s) have fewer pool frames than "
                f"the budget (nothing was run; raise select_pool_fps or lower the budget):\n  - {listed}"
            )

    # -- a question's frames ---------------------------------------------------------------------
    def query_text(self, q: Query) -> str:
        if self.selection.query == "question+options" and q.options:
            return q.text + "\n" + "\n".join(q.options)
        return q.text

    def _query(self, q: Query) -> np.ndarray:
        text = self.query_text(q)
        if text not in self._queries:
            assert self.encoder is not None
            self._queries[text] = self.encoder.texts([text])[0]
        return self._queries[text]

    def choose(self, video: str, n: int, q: Query, transcript: Transcript | None = None) -> Chosen:
        """The ``n`` frames of ``video`` chosen for ``q`` (the same every time it is asked)."""
        key = (video, q.question_id + "\x1f" + self.query_text(q), int(n))
        if key in self._chosen:
            return self._chosen[key]
        s = self.selection
        pool = self.pool(video)
        if s.method == "random":
            from naru_eval.media.fingerprint import content_fingerprint

            rng = sel.seeded(content_fingerprint(video), q.question_id, s.seed)
            positions = sel.random_subset(len(pool.indices), n, rng)
        elif s.method == "dialogue":
            assert self.encoder is not None
            cues = list(transcript.cues) if transcript is not None else []
            if cues:
                scores = self.encoder.texts([c.text for c in cues]) @ self._query(q)
                mids = [(c.start + c.end) / 2 for c in cues]
                positions = sel.dialogue(mids, scores, pool.times, n)
            else:  # no line to go by: the pool's uniform frames
                positions = sel.uniform_pool(len(pool.indices), n)
        else:
            scores = pool.embeddings @ self._query(q)
            if s.method == "its":
                positions = sel.its(scores, n, s.alpha)
            else:
                positions = sel.aks(scores, n, s.aks_threshold, s.aks_depth)
        chosen = Chosen(tuple(int(pool.indices[p]) for p in positions), tuple(float(pool.times[p]) for p in positions))
        self._chosen[key] = chosen
        return chosen


def planned_count(video: str, num_frames: int | None, fps: float | None, max_frames: int | None) -> int:
    """How many frames the sampler would take of ``video`` at this count or rate (the budget a
    selector fills): ``num_frames`` (capped by ``max_frames``), or the rate's plan."""
    if num_frames is not None:
        return min(num_frames, max_frames) if max_frames else num_frames
    from pathlib import Path

    from naru_eval.media.index import frame_index, index_duration
    from naru_eval.media.plan import frames_for_fps

    index = frame_index(Path(video))
    return frames_for_fps(index_duration(Path(video), index), float(fps or 0.0), max_frames, len(index.pts))


def chosen_from(indices: Sequence[int], times: Sequence[float]) -> Chosen:
    """A :class:`Chosen` from stored numbers and times (an answer reused from the response store)."""
    return Chosen(tuple(int(i) for i in indices), tuple(float(t) for t in times))
