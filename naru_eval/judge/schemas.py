"""The judge's structured outputs, as Pydantic models.

Each is sent with ``response_format`` = a strict JSON schema named after the class (what
``client.chat.completions.parse(response_format=Model)`` sends), and every reply is validated
against the same model here. No length or value constraints live in the schemas (strict mode
rejects some); the checks that matter (fact ids, non-empty facts) are done in code, and a reply
that fails them is retried, then reported unscored. ``json_schemas()`` prints them all
(``naru-eval judge schemas``); docs/judge.md shows them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import Required, TypedDict

from naru_eval.core.json_types import JSON, JSONObject

Verdict = Literal["covered", "partial", "not_covered", "contradicted"]


class FactList(BaseModel):
    """Decomposition of one reference answer (ids ``F1..Fn`` are assigned in code, in order)."""

    facts: list[str] = Field(description="Self-contained atomic facts, in the order of the reference answer.")


class FactVerdict(BaseModel):
    fact_id: str = Field(description="The id of the fact, exactly as given (F1, F2, ...).")
    verdict: Verdict
    evidence: str = Field(description="Shortest verbatim span of the response supporting the verdict; '' if none.")


class CoverageReport(BaseModel):
    """Coverage of every reference fact by one response: one verdict per fact id, each id once."""

    verdicts: list[FactVerdict]


class MinervaScore(BaseModel):
    """MINERVA-style holistic grade: 0 wrong / 1 partially correct / 2 correct."""

    rationale: str
    score: Literal[0, 1, 2]


class McqChoice(BaseModel):
    """The option a free-text MCQ response commits to, or ``none``."""

    letter: Literal["A", "B", "C", "D", "none"]


# ----------------------------------------------------------- the verdict records the sample log stores
# (not sent to the judge: they are not in SCHEMAS, so no schema hash or cache key depends on them)


@with_config(ConfigDict(extra="forbid"))
class FactRecord(TypedDict, total=False):
    """One reference fact of a judged response, as ``JudgedSample.facts`` and the sample log hold
    it: the fact, and the judge's verdict on it (absent when the response is unscored)."""

    id: Required[str]
    text: Required[str]
    verdict: Verdict
    evidence: str  # the judge's verbatim span ('' if none)
    evidence_found: bool | None  # whether that span is in the response (None: no span)
    similarity: float  # the offline judge's similarity to the best sentence


class Tally(TypedDict):
    """The counts and recalls of one response's verdicts (``naru_eval.judge.score.tally``)."""

    n_facts: int
    covered: int
    partial: int
    not_covered: int
    contradicted: int
    recall: float | None
    recall_with_partial: float | None
    any_fact: bool | None


@functools.cache
def _fact_records() -> TypeAdapter[list[FactRecord]]:
    return TypeAdapter(list[FactRecord])


def fact_records(data: Sequence[JSON], where: str) -> list[FactRecord]:
    """Validated verdict records (read back from a sample log); a malformed one is a ValueError
    naming ``where`` (the question) and the field."""
    try:
        return _fact_records().validate_python(list(data))
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:5])
        raise ValueError(f"{where}: malformed fact verdicts ({problems})") from None


SCHEMAS: tuple[type[BaseModel], ...] = (FactList, CoverageReport, MinervaScore, McqChoice)


def strict_schema(model: type[BaseModel]) -> JSONObject:
    """The JSON schema sent on the wire (the openai SDK's strict transformation)."""
    from openai.lib._pydantic import to_strict_json_schema  # the SDK's own transformation

    return to_strict_json_schema(model)


def response_format(model: type[BaseModel]) -> JSONObject:
    """The ``response_format`` a structured-output request carries, exactly as
    ``chat.completions.parse(response_format=model)`` sends it (the SDK's own conversion): what
    a Batch API line must hold to be the same request as the live one."""
    from openai.lib._parsing._completions import type_to_response_format_param

    return dict(type_to_response_format_param(model))  # type: ignore[arg-type]


def schema_hash(model: type[BaseModel]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(model.model_json_schema(), sort_keys=True).encode()).hexdigest()[:12]


def json_schemas() -> JSONObject:
    return {m.__name__: strict_schema(m) for m in SCHEMAS}
