"""Opt-in LLM fallback for MCQ answer extraction (LVBench style).

With ``NARU_MCQ_LLM_FALLBACK=1`` (read by the lmms-eval bridge, :func:`naru_eval.lmms.tasks.mcq_fallback`,
which passes :func:`fallback_for` to :func:`naru_eval.core.scoring.score_response`), a response from which the rule-based extractor reads no
letter (kinds ``no_letter`` and ``ambiguous``; ``NARU_MCQ_LLM_FALLBACK_KINDS`` changes the list)
is shown to the judge model (the same client and ``NARU_JUDGE_*`` configuration as the open-ended
judge, structured output :class:`~naru_eval.judge.schemas.McqChoice`). When it names one option,
that letter is scored and ``method`` is ``llm_fallback``; otherwise the answer stays invalid with
its original kind. Empty answers, failed requests, refusals, "none of the options" and
off-option letters are never sent.

Off (the default), nothing changes: no call, the same methods and the same metrics. On, MCQ
accuracy depends on the judge model, so report it with the results (the fallback rate from
:func:`fallback_rate` / ``naru-eval judge mcq-fallback LOG``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from naru_eval.core.data import NaruQuestion
from naru_eval.core.extract import LLM_FALLBACK_METHOD, Extraction  # "llm_fallback"
from naru_eval.core.scoring import Fallback, ScoredSample
from naru_eval.judge.client import JudgeUnavailable
from naru_eval.judge.prompts import MCQ_FALLBACK_PROMPT_VERSION, mcq_fallback_messages, retry_note
from naru_eval.judge.schemas import McqChoice
from naru_eval.settings import settings

if TYPE_CHECKING:
    from naru_eval.judge.pipeline import Judge

log = logging.getLogger("naru_eval.judge")

DEFAULT_KINDS = ("no_letter", "ambiguous")


def fallback_kinds() -> frozenset[str]:
    raw = settings().mcq_llm_fallback_kinds
    return frozenset(k.strip() for k in raw.split(",") if k.strip()) if raw else frozenset(DEFAULT_KINDS)


def llm_letter(judge: Judge, question: str, options: Sequence[str], response: str) -> str | None:
    """The letter ``judge`` reads in ``response``, or None (none / unusable / unreachable)."""
    if judge.client is None:
        log.warning("naru MCQ fallback needs the openai judge backend; %s is offline", judge.config.backend)
        return None
    base = mcq_fallback_messages(question, options, response)
    messages = list(base)
    attempts = judge.config.parse_attempts
    for attempt in range(1, attempts + 1):
        try:
            r = judge.client.call("mcq_fallback", messages, McqChoice, prompt_version=MCQ_FALLBACK_PROMPT_VERSION)
        except JudgeUnavailable as e:
            log.warning("naru MCQ fallback: judge unavailable (%s); the answer stays invalid", e)
            return None
        parsed, reason = r.parse(McqChoice)
        if parsed is not None:
            letter = parsed.letter
            return None if letter == "none" else str(letter)
        messages = [*base, retry_note(attempt + 1, attempts, reason or "invalid")]
    return None


def apply_fallback(judge: Judge, ext: Extraction, question: NaruQuestion, response: str | None) -> Extraction:
    """``ext`` or, when ``judge`` reads a letter, ``Extraction(letter, "llm_fallback")``."""
    if ext.valid or not response or not response.strip():
        return ext
    kind = ext.method.split(":", 1)[1] if ext.method.startswith("invalid:") else ext.method
    if kind not in fallback_kinds():
        return ext
    letter = llm_letter(judge, question.question, list(question.options), response)
    return Extraction(letter, LLM_FALLBACK_METHOD) if letter else ext


def fallback_for(judge_of: Callable[[], Judge]) -> Fallback:
    """The :data:`~naru_eval.core.scoring.Fallback` of :func:`naru_eval.core.scoring.score_response`
    over the judge ``judge_of()`` returns, asked for only when an answer needs it."""

    def fallback(ext: Extraction, question: NaruQuestion, response: str | None) -> Extraction:
        if ext.valid or not response or not response.strip():
            return ext
        return apply_fallback(judge_of(), ext, question, response)

    return fallback


class FallbackRate(BaseModel):
    """How many of a log's answers the LLM fallback read, and how many it got right."""

    n: int
    llm_fallback: int
    fallback_rate: float | None
    fallback_correct: int
    still_invalid: int


def fallback_rate(samples: Sequence[ScoredSample]) -> FallbackRate:
    """How many answers the fallback read (ScoredSamples, e.g. from ``samples_from_log``)."""
    n = len(samples)
    methods = Counter(s.method for s in samples)
    used = methods.get(LLM_FALLBACK_METHOD, 0)
    correct = sum(1 for s in samples if s.method == LLM_FALLBACK_METHOD and s.correct)
    return FallbackRate(
        n=n,
        llm_fallback=used,
        fallback_rate=used / n if n else None,
        fallback_correct=correct,
        still_invalid=sum(1 for s in samples if not s.valid),
    )
