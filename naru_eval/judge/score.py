"""Step 3: per-response recall and the run's metrics (0-1, like the paper's table III).

* ``recall`` = covered facts / facts; ``recall_with_partial`` = (covered + 0.5 partial) / facts,
  reported apart. ``any_fact``: the response recovers at least one fact (recall > 0).
* Empty answers and failed requests are scored 0 without a judge call; abstentions are judged
  (and score 0 when they cover nothing): all stay in the denominator.
* A response whose judge output could not be used after bounded retries, or whose question has
  no facts, is **unscored**: never 0, never dropped. Metrics average over the scored responses,
  and ``n_scored``, ``n_unscored`` and ``unscored_rate`` say how many were left out.

The lmms-eval payloads follow the MCQ convention (naru_eval.core.scoring): a per-item metric's
payload carries ``score`` only when the response counts towards it; ``overall``, ``narrative``
and ``cultural`` are the authors' macro means (table III: ``overall`` = mean of the nine category
recalls, ``narrative``/``cultural`` = means of their categories), so their payloads carry the
recall under ``item_score`` and :func:`naru_eval.core.scoring.aggregate_macro` averages category means.
``recall`` is the per-item mean over every scored response (micro). Every number of
``results.json`` recomputes from the sample log (:func:`metrics_from_open_log`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

from pydantic import BaseModel

from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE
from naru_eval.core.scoring import MACRO_KEY, MACRO_METRICS, aggregate_macro, sample_records
from naru_eval.judge.config import RequestParams
from naru_eval.judge.schemas import FactRecord, Tally, fact_records

#: statuses that count (recall known); everything else is unscored
SCORED_STATUSES = ("scored", "empty", "failed")
STATUSES = (*SCORED_STATUSES, "unscored")

RECALL_METRICS: tuple[str, ...] = (*MACRO_METRICS, *CATEGORIES, "recall")
MEAN_METRICS: tuple[str, ...] = (
    *RECALL_METRICS,
    "recall_with_partial",
    "any_fact",
    "any_fact_narrative",
    "any_fact_cultural",
    "unscored_rate",
)
SUM_METRICS: tuple[str, ...] = ("n_scored", "n_unscored", "judge_cost_usd")
OPEN_METRICS: tuple[str, ...] = (*MEAN_METRICS, *SUM_METRICS)


class JudgeInfo(TypedDict, total=False):
    """Who judged a response, with which prompts and settings (a sample payload's ``judge``)."""

    backend: str
    model: str
    base_url: str | None
    fact_model: str
    facts_prompt_version: str
    verify_prompt_version: str
    settings: RequestParams  # JudgeConfig.request_params (empty for an offline judge)
    attempts: int
    system_fingerprints: list[str]
    response_models: list[str]


class CallsUsage(TypedDict, total=False):
    """What a response's verification calls used (a sample payload's ``usage``); ``cost_usd`` is
    nominal (cached or not) and None when a call had no price."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cost_usd: float | None


@dataclass
class JudgedSample:
    """One response, judged. Every field is in the ``overall`` payload of the sample log."""

    question_id: str
    video_id: str
    category: str
    level: str
    question: str
    reference: str
    response: str | None
    status: str  # scored | empty | failed | unscored
    reason: str | None = None  # why unscored
    n_facts: int = 0
    covered: int = 0
    partial: int = 0
    not_covered: int = 0
    contradicted: int = 0
    recall: float | None = None
    recall_with_partial: float | None = None
    any_fact: bool | None = None
    abstention: bool = False
    response_truncated: bool = False
    facts: list[FactRecord] = field(default_factory=list)  # the fact and its verdict, one per reference fact
    judge: JudgeInfo = field(default_factory=lambda: JudgeInfo())
    usage: CallsUsage = field(default_factory=lambda: CallsUsage())
    data_fingerprint: str | None = None  # the annotations' fingerprint (naru_eval.core.data.Dataset), as MCQ records it
    # what the model was given, as its adapter recorded it (naru_eval.core.provenance)
    adapter: str | None = None
    input_mode: str | None = None
    positions: str | None = None
    world_size: int | None = None  # the processes the run was sharded over, as MCQ records it

    @classmethod
    def unscored(cls, item: Any, response: str | None, **fields: Any) -> JudgedSample:
        """A not-yet-scored sample of ``item`` (a JudgeItem): the judge fills in the verdicts."""
        return cls(
            question_id=item.question_id,
            video_id=item.video_id,
            category=item.category,
            level=item.level,
            question=item.question,
            reference=item.reference,
            response=response,
            status="unscored",
            **fields,
        )

    @property
    def scored(self) -> bool:
        return self.status in SCORED_STATUSES

    def to_dict(self) -> OpenRecord:
        """The fields as JSON, in their order (the ``overall`` payload, a scores file's row)."""
        return cast(OpenRecord, asdict(self))  # every field, whatever is added later (a test checks)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JudgedSample:
        names = set(cls.__dataclass_fields__)
        fields = {k: v for k, v in d.items() if k in names}
        fields["facts"] = fact_records(fields.get("facts") or [], f"question {d.get('question_id')}")
        return cls(**fields)


class OpenRecord(TypedDict):
    """A :class:`JudgedSample` as JSON (:meth:`JudgedSample.to_dict`)."""

    question_id: str
    video_id: str
    category: str
    level: str
    question: str
    reference: str
    response: str | None
    status: str
    reason: str | None
    n_facts: int
    covered: int
    partial: int
    not_covered: int
    contradicted: int
    recall: float | None
    recall_with_partial: float | None
    any_fact: bool | None
    abstention: bool
    response_truncated: bool
    facts: list[FactRecord]
    judge: JudgeInfo
    usage: CallsUsage
    data_fingerprint: str | None
    adapter: str | None
    input_mode: str | None
    positions: str | None
    world_size: int | None


class OpenValue(TypedDict, total=False):
    """What a naru_open payload adds for its metric: the value under ``score`` or
    :data:`~naru_eval.core.scoring.MACRO_KEY`, or ``cost_unknown`` (``judge_cost_usd`` of calls
    to a model without a price)."""

    score: float
    item_score: float
    cost_unknown: bool


class OpenKeys(TypedDict):
    """The slim record a naru_open payload other than ``overall`` carries."""

    question_id: str
    video_id: str
    category: str
    level: str
    status: str


class OverallPayload(OpenRecord, OpenValue):
    """The ``overall`` payload: the whole record (every metric recomputes from it)."""


class SlimPayload(OpenKeys, OpenValue):
    """Every other metric's payload."""


#: one naru_open ``process_results`` payload (:func:`open_payloads`)
OpenPayload = OverallPayload | SlimPayload


def tally(verdicts: Sequence[FactRecord]) -> Tally:
    """Counts and recalls from per-fact verdicts."""
    counts = Counter(v["verdict"] for v in verdicts)
    n = len(verdicts)
    covered, partial = counts["covered"], counts["partial"]
    return {
        "n_facts": n,
        "covered": covered,
        "partial": partial,
        "not_covered": counts["not_covered"],
        "contradicted": counts["contradicted"],
        "recall": covered / n if n else None,
        "recall_with_partial": (covered + 0.5 * partial) / n if n else None,
        "any_fact": covered > 0 if n else None,
    }


# ----------------------------------------------------------------------------------- metrics


def _in_scope(metric: str, category: str) -> bool:
    if metric in ("overall", "recall", "recall_with_partial", "any_fact"):
        return True
    if metric in ("narrative", "any_fact_narrative"):
        return category in NARRATIVE
    if metric in ("cultural", "any_fact_cultural"):
        return category in CULTURAL
    return metric == category


def metric_value(metric: str, s: JudgedSample) -> float | None:
    """The value ``s`` contributes to ``metric``, or None when it does not count towards it."""
    if metric == "unscored_rate":
        return 0.0 if s.scored else 1.0
    if metric == "n_scored":
        return 1.0 if s.scored else 0.0
    if metric == "n_unscored":
        return 0.0 if s.scored else 1.0
    if metric == "judge_cost_usd":
        c = s.usage.get("cost_usd")
        return float(c) if c is not None else None
    if not s.scored or not _in_scope(metric, s.category):
        return None
    if metric in RECALL_METRICS:
        return float(s.recall or 0.0)
    if metric == "recall_with_partial":
        return float(s.recall_with_partial or 0.0)
    if metric.startswith("any_fact"):
        return 1.0 if s.any_fact else 0.0
    raise KeyError(metric)


def open_payloads(s: JudgedSample) -> dict[str, OpenPayload]:
    """``process_results`` return value: the whole record under ``overall``, a slim one elsewhere."""
    slim = OpenKeys(question_id=s.question_id, video_id=s.video_id, category=s.category, level=s.level, status=s.status)
    out: dict[str, OpenPayload] = {}
    for metric in OPEN_METRICS:
        payload: OpenPayload = OverallPayload(**s.to_dict()) if metric == "overall" else SlimPayload(**slim)
        value = metric_value(metric, s)
        if value is not None:
            if metric in MACRO_METRICS:
                payload[MACRO_KEY] = value
            else:
                payload["score"] = value
        elif metric == "judge_cost_usd" and s.usage.get("calls"):
            payload["cost_unknown"] = True  # calls of a model without a price
        out[metric] = payload
    return out


def aggregate_mean(items: Iterable[Mapping[str, Any]]) -> float | None:
    scores = [float(x["score"]) for x in items if "score" in x]
    return sum(scores) / len(scores) if scores else None


def aggregate_open_macro(items: Iterable[Mapping[str, Any]]) -> float | None:
    """``overall``/``narrative``/``cultural`` of naru_open: the mean of the category mean recalls
    in scope (``overall`` over all nine categories, as the authors' table III)."""
    return aggregate_macro(items, overall="categories")


def aggregate_sum(items: Iterable[Mapping[str, Any]]) -> float | None:
    """The sum of the scores; None (unknown) when an item's value is unknown (``judge_cost_usd``
    of a judge without a price), never a partial sum shown as the total."""
    items = list(items)
    if any(x.get("cost_unknown") for x in items):
        return None
    return float(sum(float(x["score"]) for x in items if "score" in x))


def compute_open_metrics(samples: Sequence[JudgedSample]) -> dict[str, float | None]:
    """Every ``naru_open`` metric, exactly as the lmms-eval aggregation computes it."""
    out: dict[str, float | None] = {}
    all_payloads = [open_payloads(s) for s in samples]
    for m in OPEN_METRICS:
        payloads = [p[m] for p in all_payloads]
        if m in SUM_METRICS:
            out[m] = aggregate_sum(payloads)
        else:
            out[m] = aggregate_open_macro(payloads) if m in MACRO_METRICS else aggregate_mean(payloads)
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def reason_kind(reason: str | None) -> str:
    """``malformed``, ``id mismatch``, ``refusal``, ``length``, ``no facts``, ``judge unavailable``, ..."""
    return re.split(r"[:(]", reason or "unknown", maxsplit=1)[0].strip() or "unknown"


class RecallCell(BaseModel):
    """One cell of :class:`OpenReport`'s table: the scored responses of a group and their means."""

    n: int
    recall: float | None
    recall_with_partial: float | None
    any_fact: float | None


class OpenReport(BaseModel):
    """:func:`summarize`: one run's recall table and its unscored responses (the fields of
    ``<log>.report.json`` after ``log``, ``scores`` and ``judge``)."""

    n: int
    n_scored: int
    n_unscored: int
    unscored_rate: float | None
    unscored_by_category: dict[str, int]
    unscored_reasons: dict[str, int]
    status_counts: dict[str, int]
    abstentions: int
    contradicted_fact_share: float | None
    table: dict[str, RecallCell]
    metrics: dict[str, float | None]


def summarize(samples: Sequence[JudgedSample]) -> OpenReport:
    """The report of one run: recall (and with partial credit, and share recovering >= 1 fact)
    overall / narrative / cultural / per category, with n per cell; unscored counts and reasons."""
    scored = [s for s in samples if s.scored]
    groups: dict[str, list[JudgedSample]] = {"overall": scored}
    groups["narrative"] = [s for s in scored if s.category in NARRATIVE]
    groups["cultural"] = [s for s in scored if s.category in CULTURAL]
    for c in CATEGORIES:
        groups[c] = [s for s in scored if s.category == c]
    table = {
        name: RecallCell(
            n=len(g),
            recall=_mean([float(s.recall or 0.0) for s in g]),
            recall_with_partial=_mean([float(s.recall_with_partial or 0.0) for s in g]),
            any_fact=_mean([1.0 if s.any_fact else 0.0 for s in g]),
        )
        for name, g in groups.items()
    }
    n_facts = sum(s.n_facts for s in scored if s.status == "scored")
    contradicted = sum(s.contradicted for s in scored)
    reasons = Counter(reason_kind(s.reason) for s in samples if not s.scored)
    n_unscored = len(samples) - len(scored)
    return OpenReport(
        n=len(samples),
        n_scored=len(scored),
        n_unscored=n_unscored,
        unscored_rate=n_unscored / len(samples) if samples else None,
        unscored_by_category=dict(Counter(s.category for s in samples if not s.scored)),
        unscored_reasons=dict(reasons),
        status_counts=dict(Counter(s.status for s in samples)),
        abstentions=sum(1 for s in samples if s.abstention),
        contradicted_fact_share=contradicted / n_facts if n_facts else None,
        table=table,
        metrics=compute_open_metrics(samples),
    )


# ------------------------------------------------------------------------------- sample logs


def samples_from_open_log(path: str | Path) -> list[JudgedSample]:
    """JudgedSamples back from a ``*_samples_naru_open*.jsonl`` log."""
    return [JudgedSample.from_dict(p) for _, p in sample_records(path, ("reference",), "naru_open")]


def responses_from_open_log(path: str | Path) -> list[tuple[dict[str, Any], str | None]]:
    """(overall payload, response) pairs: what ``naru-eval judge score`` re-judges."""
    out = []
    for rec, p in sample_records(path, ("reference", "question"), "naru_open"):
        response = p.get("response")
        if response is None:
            fr = rec.get("filtered_resps") or []
            response = fr[0] if fr and isinstance(fr[0], str) else None
        out.append((p, response))
    return out


def metrics_from_open_log(path: str | Path) -> dict[str, float | None]:
    return compute_open_metrics(samples_from_open_log(path))
