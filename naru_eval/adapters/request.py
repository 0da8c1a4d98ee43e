"""A request as every adapter sees it, and what comes back: the one definition of each.

:class:`NaruRequest` is one question an adapter is asked (its doc, the prompt lmms-eval built, its
media, generation kwargs and input plan); an adapter answers with text or an :class:`Answer`
(text and usage), or raises :class:`RequestFailed` when the request failed for good, which is
kept as a failure (:func:`failed`: the marker the extractor reads as invalid), never scored as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from naru_eval.core.doc import NaruDoc
from naru_eval.core.inputs import InputPlan
from naru_eval.core.json_types import JSONMapping, number
from naru_eval.store.responses import Usage

#: Text recorded for a request that failed after its retries. The extractor reads it as
#: invalid ("failed"), so it is scored wrong and counted, never parsed as an answer.
FAILED_MARKER = "[NARU_REQUEST_FAILED]"


class RequestFailed(RuntimeError):
    """Raised by an adapter when a request failed for good (after its retries)."""

    def __init__(self, reason: str, usage: Usage | None = None) -> None:
        super().__init__(reason)
        self.usage = dict(usage) if usage else None


class Answer(NamedTuple):
    """An adapter's reply; ``usage`` (tokens, cost) is stored with it."""

    text: str
    usage: Usage | None = None


class NaruRequest(NamedTuple):
    """One question as an adapter sees it: its doc (naru_eval.core.doc), the prompt lmms-eval
    built, its media and generation kwargs, and the plan of its inputs (``inputs``: the run's
    plan, or ``naru_eval.core.inputs.TEXT`` without media; None on a request built by hand, e.g. a
    benchmark's: :meth:`NaruModel.plan_of` then gives the adapter's)."""

    doc: NaruDoc
    prompt: str
    videos: Sequence[str]
    gen_kwargs: JSONMapping  # the task's generation_kwargs (until, max_new_tokens, temperature, ...)
    task: str
    doc_id: int
    inputs: InputPlan | None = None

    @property
    def question_id(self) -> str:
        return str(self.doc["question_id"])

    @property
    def duration_s(self) -> float | None:
        """The video's duration as the doc carries it (the annotation's, else the preflight's
        probe); None when not known."""
        value = self.doc.get("duration_s")
        return number(value) if value else None

    @property
    def video(self) -> str | None:
        return self.videos[0] if self.videos else None


def failed(reason: str) -> str:
    """The response text of a failed request (never scored as an answer)."""
    return f"{FAILED_MARKER} {reason}"
