"""Other judge protocols. ``minerva``: MINERVA-Cultural-style holistic grading.

The judge compares the response with the whole reference answer and grades it 0 (wrong),
1 (partially correct) or 2 (correct); it is asked ``k`` times (independent samples: each
sample index is its own cached request, sent at the model's default temperature for the gpt-5 /
o-series families and at temperature 1.0 otherwise), and the grade is the majority vote. With no
strict majority (e.g. 0, 1, 2) the median vote wins (the lower median for an even number).
A sample whose output cannot be used is retried (``parse_attempts``); when half of the samples
or more are unusable, the response is unscored. Empty answers and failed requests score 0
without a call. Scores are reported on 0-2 and normalised to 0-1 (score / 2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Literal

from pydantic import BaseModel

from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE
from naru_eval.core.json_types import JSONObject
from naru_eval.judge.client import CallResult, JudgeClient, JudgeUnavailable
from naru_eval.judge.items import JudgeItem, classify_response
from naru_eval.judge.prompts import MAX_RESPONSE_CHARS, MINERVA_PROMPT_VERSION, minerva_messages, retry_note
from naru_eval.judge.schemas import MinervaScore


def majority_vote(votes: Sequence[int]) -> int:
    """The most common vote if it has a strict majority, else the (lower) median."""
    if not votes:
        raise ValueError("no votes")
    top, n = Counter(votes).most_common(1)[0]
    if n * 2 > len(votes):
        return top
    ordered = sorted(votes)
    return ordered[(len(ordered) - 1) // 2]


@dataclass
class MinervaResult:
    question_id: str
    video_id: str
    category: str
    status: str  # scored | empty | failed | unscored
    score: int | None = None  # 0-2
    votes: list[int] = field(default_factory=list)
    reason: str | None = None
    rationales: list[str] = field(default_factory=list)
    system_fingerprints: list[str] = field(default_factory=list)

    @property
    def scored(self) -> bool:
        return self.status in ("scored", "empty", "failed")

    @property
    def normalized(self) -> float | None:
        return None if self.score is None else self.score / 2

    def to_dict(self) -> JSONObject:
        """A scores file's row: the fields, in their order, then ``normalized``."""
        return {**asdict(self), "normalized": self.normalized}


class MinervaProtocol:
    prompt_version = MINERVA_PROMPT_VERSION

    def __init__(self, client: JudgeClient, k: int = 3) -> None:
        if k < 1:
            raise ValueError("minerva: k must be >= 1")
        self.client = client
        self.k = k

    def _sample(self, item: JudgeItem, text: str, index: int) -> tuple[int | None, str | None, list[CallResult]]:
        base = minerva_messages(item.question, item.reference, text)
        temperature = None if self.client.config.reasoning else 1.0
        messages = list(base)
        calls: list[CallResult] = []
        reason = None
        attempts = self.client.config.parse_attempts
        for attempt in range(1, attempts + 1):
            r = self.client.call(
                "minerva",
                messages,
                MinervaScore,
                prompt_version=self.prompt_version,
                temperature=temperature,
                extra_key={"sample": index},
            )
            calls.append(r)
            parsed, reason = r.parse(MinervaScore)
            if parsed is not None:
                return int(parsed.score), parsed.rationale, calls
            messages = [*base, retry_note(attempt + 1, attempts, reason or "invalid")]
        return None, reason, calls

    def grade(self, item: JudgeItem, response: str | None) -> MinervaResult:
        kind, text = classify_response(response)
        res = MinervaResult(item.question_id, item.video_id, item.category, status="unscored")
        if kind in ("empty", "failed"):
            res.status, res.score = kind, 0
            return res
        text = text[:MAX_RESPONSE_CHARS]
        fingerprints: set[str] = set()
        reasons = []
        for i in range(self.k):
            try:
                vote, why, calls = self._sample(item, text, i)
            except JudgeUnavailable as e:
                vote, why, calls = None, f"judge unavailable: {e}", []
            fingerprints.update(c.system_fingerprint for c in calls if c.system_fingerprint)
            if vote is None:
                reasons.append(why or "invalid")
            else:
                res.votes.append(vote)
                res.rationales.append(why or "")
        res.system_fingerprints = sorted(fingerprints)
        if len(res.votes) * 2 <= self.k:
            res.reason = f"{len(reasons)} of {self.k} samples unusable: {reasons[0] if reasons else ''}"
            return res
        res.status, res.score = "scored", majority_vote(res.votes)
        return res

    def grade_many(self, pairs: Sequence[tuple[JudgeItem, str | None]]) -> list[MinervaResult]:
        with ThreadPoolExecutor(max_workers=self.client.config.concurrency, thread_name_prefix="naru-minerva") as ex:
            return list(ex.map(lambda p: self.grade(*p), pairs))


class MinervaCell(BaseModel):
    """One cell of :class:`MinervaReport`'s table: the mean 0-2 score, normalised to 0-1."""

    n: int
    mean_score: float | None
    normalized: float | None
    share_correct: float | None


class MinervaReport(BaseModel):
    """:func:`summarize_minerva`: one run's MINERVA table (``<log>.report.json`` with ``--protocol minerva``)."""

    protocol: Literal["minerva"] = "minerva"
    n: int
    n_scored: int
    n_unscored: int
    unscored_rate: float | None
    table: dict[str, MinervaCell]


def summarize_minerva(results: Sequence[MinervaResult]) -> MinervaReport:
    scored = [r for r in results if r.scored]

    def cell(group: list[MinervaResult]) -> MinervaCell:
        vals = [float(r.score or 0) for r in group]
        mean = sum(vals) / len(vals) if vals else None
        return MinervaCell(
            n=len(group),
            mean_score=mean,
            normalized=None if mean is None else mean / 2,
            share_correct=sum(1 for v in vals if v == 2) / len(vals) if vals else None,
        )

    table = {"overall": cell(scored)}
    table["narrative"] = cell([r for r in scored if r.category in NARRATIVE])
    table["cultural"] = cell([r for r in scored if r.category in CULTURAL])
    for c in CATEGORIES:
        table[c] = cell([r for r in scored if r.category == c])
    n_unscored = len(results) - len(scored)
    return MinervaReport(
        n=len(results),
        n_scored=len(scored),
        n_unscored=n_unscored,
        unscored_rate=n_unscored / len(results) if results else None,
        table=table,
    )
