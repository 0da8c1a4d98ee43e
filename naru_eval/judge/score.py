"""Step 3: per-response recall and the run's metrics (0-1, like the paper's table III).

* ``recall`` = covered facts / facts; ``recall_with_partial`` = (covered + 0.5 partial) / facts,
  reported apart. ``any_fact``: the response recovers at least one fact (recall > 0).
* Empty answers and failed requests are scored 0 without a judge call; abstentions are judged
  (and score 0 when they cover nothing): all stay in the denominator.
* A response whose judge output could not be used after bounded retries, or whose question has
  no facts, is **unscored**: never 0, never dropped. Metrics average over the scored responses,
  and ``n_scored``, ``n_unscored`` and ``unscored_rate`` say how many were left out.
* A run whose judge could not be reached (transport failures after the retries, a judge error)
  for more than :data:`MAX_UNREACHED_SHARE` of its responses has **no score**: every recall
  metric is N/A (None), so nothing that looks like a score is written; the payloads of such
  responses carry ``judge_unreached`` (:func:`unreached`).

The lmms-eval payloads follow the MCQ convention (naru_eval.core.scoring): a per-item metric's
payload carries ``score`` only when the response counts towards it; ``overall``, ``narrative``
and ``cultural`` are the authors' macro means (table III: ``overall`` = mean of the nine category
recalls, ``narrative``/``cultural`` = means of their categories), so their payloads carry the
recall under ``item_score`` and :func:`naru_eval.core.scoring.aggregate_macro` averages category means.
``recall`` is the per-item mean over every scored response (micro). Every number of
``results.json`` recomputes from the sample log (:func:`metrics_from_open_log`).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pydantic import BaseModel

from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE
from naru_eval.core.json_types import JSONMapping, JSONObject, as_str, from_record
from naru_eval.core.metrics import Metric, MetricTable, Payload, compute
from naru_eval.core.provenance import FIELDS as PROVENANCE_FIELDS
from naru_eval.core.provenance import Provenance
from naru_eval.core.scoring import sample_records
from naru_eval.judge.config import RequestParams
from naru_eval.judge.schemas import FactRecord, Tally, fact_records

if TYPE_CHECKING:
    from naru_eval.judge.items import JudgeItem

#: the largest share of a run's responses the judge may have failed to reach (after its retries)
#: for the run to have a score; above it every recall metric is N/A and ``naru-eval judge score``
#: exits 1 naming the endpoint and the model (docs/judge.md)
MAX_UNREACHED_SHARE = 0.05
_UNREACHED = re.compile(r"(?:no facts: )?judge (?:unavailable|error)\b")

#: statuses that count (recall known); everything else is unscored
SCORED_STATUSES = ("scored", "empty", "failed")
#: what a naru_open payload other than ``overall`` carries of the record (``overall`` has it all)
SLIM_FIELDS: tuple[str, ...] = ("question_id", "video_id", "category", "level", "status")


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


@dataclasses.dataclass(frozen=True)
class JudgedOutcome:
    """What the judge made of one response: the first fields of :class:`JudgedSample`."""

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
    world_size: int | None = None  # the processes the run was sharded over, as MCQ records it


@dataclasses.dataclass(frozen=True)
class JudgedSample(Provenance, JudgedOutcome):
    """One response, judged, and what the model was given: every field is in the ``overall``
    payload of the sample log (:meth:`to_dict`). The fields are :class:`JudgedOutcome`'s, then
    :class:`~naru_eval.core.provenance.Provenance`'s, as the MCQ record's."""

    @classmethod
    def unscored(cls, item: JudgeItem, response: str | None) -> JudgedSample:
        """A not-yet-scored sample of ``item``: the judge fills in the verdicts."""
        return cls(
            question_id=item.question_id,
            video_id=item.video_id,
            category=item.category,
            level=item.level,
            question=item.question,
            reference=item.reference,
            response=response,
            status="unscored",
        )

    @property
    def scored(self) -> bool:
        return self.status in SCORED_STATUSES

    def to_dict(self) -> Payload:
        """The fields as JSON, in their order (the ``overall`` payload, a scores file's row)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: JSONMapping) -> JudgedSample:
        """A sample from its payload (:meth:`to_dict`), its fact verdicts validated."""
        facts = d.get("facts") or []
        checked = fact_records(facts if isinstance(facts, list) else [facts], f"question {d.get('question_id')}")
        return dataclasses.replace(from_record(cls, d), facts=checked)

    def with_provenance(
        self, data_fingerprint: str | None, provenance: JSONMapping, world_size: int | None = None
    ) -> JudgedSample:
        """This sample with the data it came from and what the model was given (as MCQ records
        them): ``provenance`` is what the adapter recorded (naru_eval.core.provenance.current),
        or a logged payload; ``world_size``: the run's process count."""
        recorded = Provenance(**{k: as_str(provenance.get(k)) for k in PROVENANCE_FIELDS})
        return dataclasses.replace(
            self, data_fingerprint=data_fingerprint, world_size=world_size, **dataclasses.asdict(recorded)
        )


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


def _scored(value: Callable[[JudgedSample], float]) -> Callable[[JudgedSample], float | None]:
    """``value`` for a scored response; an unscored one does not count (never 0)."""
    return lambda s: value(s) if s.scored else None


_recall = _scored(lambda s: float(s.recall or 0.0))
_any_fact = _scored(lambda s: 1.0 if s.any_fact else 0.0)


def unreached(s: JudgedSample) -> bool:
    """Whether the judge could not be reached for ``s`` (unscored by a transport failure after the
    retries, or a judge error: for its facts or its verdicts)."""
    return not s.scored and _UNREACHED.match(s.reason or "") is not None


def _too_few_judged(items: Sequence[JSONMapping]) -> bool:
    """More than :data:`MAX_UNREACHED_SHARE` of a score metric's payloads are of responses the
    judge could not be reached for: the metric is no score."""
    return bool(items) and sum(1 for x in items if x.get("judge_unreached")) > MAX_UNREACHED_SHARE * len(items)


def unreached_problem(samples: Sequence[JudgedSample], judge: str) -> str | None:
    """Why a run has no score (``judge``: "MODEL at URL"), or None."""
    n, k = len(samples), sum(1 for x in samples if unreached(x))
    if not n or k <= MAX_UNREACHED_SHARE * n:
        return None
    return (
        f"the judge {judge} could not be reached for {k} of {n} responses ({k / n:.0%}, more than "
        f"{MAX_UNREACHED_SHARE:.0%}), so the run has no score and none is written. Check the endpoint, the model "
        "and the key (--base-url, NARU_JUDGE_BASE_URL / OPENAI_BASE_URL; --judge-model, NARU_JUDGE_MODEL) and "
        "rerun: what was judged is cached and is not asked again"
    )


def _cost(s: JudgedSample) -> float | None:
    c = s.usage.get("cost_usd")
    return float(c) if c is not None else None


#: the naru_open metrics (recall 0-1), in the order lmms-eval reports them
OPEN: MetricTable[JudgedSample] = MetricTable(
    kind="open",
    unit="recall 0-1",
    digits=2,
    overall="categories",
    record_metric="overall",
    unscorable=_too_few_judged,
    metrics=(
        Metric("overall", "mean of the nine category mean recalls (the authors' table III)", "all", _recall, "macro"),
        Metric("narrative", "mean of the N.1-N.4 mean recalls", "narrative", _recall, "macro"),
        Metric("cultural", "mean of the C.1-C.5 mean recalls", "cultural", _recall, "macro"),
        *(Metric(c, f"mean recall on the {c} questions", c, _recall, "mean") for c in CATEGORIES),
        Metric("recall", "mean recall over every scored response (micro)", "all", _recall, "mean"),
        Metric(
            "recall_with_partial",
            "(covered + 0.5 partial) / facts, the mean over scored responses",
            "all",
            _scored(lambda s: float(s.recall_with_partial or 0.0)),
            "mean",
            shown=False,
        ),  # fmt: skip
        Metric(
            "any_fact", "share of scored responses recovering at least one fact", "all", _any_fact, "mean", shown=False
        ),
        Metric(
            "any_fact_narrative", "any_fact on the narrative questions", "narrative", _any_fact, "mean", shown=False
        ),
        Metric("any_fact_cultural", "any_fact on the cultural questions", "cultural", _any_fact, "mean", shown=False),
        Metric(
            "unscored_rate",
            "share of responses the judge could not score (left out, never 0)",
            "all",
            lambda s: 0.0 if s.scored else 1.0,
            "mean",
            higher_is_better=False,
            shown=False,
            count=True,
        ),  # fmt: skip
        Metric(
            "n_scored", "responses scored", "all", lambda s: 1.0 if s.scored else 0.0, "sum", shown=False, count=True
        ),
        Metric(
            "n_unscored",
            "responses unscored",
            "all",
            lambda s: 0.0 if s.scored else 1.0,
            "sum",
            higher_is_better=False,
            shown=False,
            count=True,
        ),  # fmt: skip
        Metric(
            "judge_cost_usd",
            "nominal cost of the run's verification calls; null when a call had no price",
            "all",
            _cost,
            "cost",
            higher_is_better=False,
            shown=False,
            count=True,
        ),  # fmt: skip
    ),
)
OPEN_METRICS: tuple[str, ...] = OPEN.names


def open_payloads(s: JudgedSample) -> dict[str, Payload]:
    """``process_results`` return value: the whole record under ``overall``, a slim one elsewhere
    (:data:`SLIM_FIELDS`); a cost of calls to a model without a price is marked ``cost_unknown``;
    every score metric's payload of a response the judge could not be reached for is marked
    ``judge_unreached`` (too many of them and the run has no score: :data:`MAX_UNREACHED_SHARE`)."""
    record = s.to_dict()
    slim = {k: record[k] for k in SLIM_FIELDS}
    not_reached = unreached(s)
    out: dict[str, Payload] = {}
    for name, payload in OPEN.payloads(slim, s).items():
        if name == OPEN.record_metric:
            payload = {**record, **{k: v for k, v in payload.items() if k not in slim}}
        if not_reached and not OPEN[name].count:
            payload["judge_unreached"] = True
        if OPEN[name].aggregation == "cost" and "score" not in payload and s.usage.get("calls"):
            payload["cost_unknown"] = True  # calls of a model without a price
        out[name] = payload
    return out


def compute_open_metrics(samples: Sequence[JudgedSample]) -> dict[str, float | None]:
    """Every ``naru_open`` metric, exactly as the lmms-eval aggregation computes it."""
    return compute(OPEN, samples, open_payloads)


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


def responses_from_open_log(path: str | Path) -> list[tuple[JSONObject, str | None]]:
    """(overall payload, response) pairs: what ``naru-eval judge score`` re-judges."""
    out = []
    for rec, p in sample_records(path, ("reference", "question"), "naru_open"):
        response = as_str(p.get("response"))
        if response is None:
            fr = rec.get("filtered_resps")
            response = fr[0] if isinstance(fr, list) and fr and isinstance(fr[0], str) else None
        out.append((p, response))
    return out


def metrics_from_open_log(path: str | Path) -> dict[str, float | None]:
    return compute_open_metrics(samples_from_open_log(path))
