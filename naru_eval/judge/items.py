"""What the judge grades: one open-ended question (prompt, reference) and one response."""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass

from naru_eval.core.data import NaruQuestion, level_of
from naru_eval.core.extract import FAILURE_MARKERS, strip_reasoning
from naru_eval.core.json_types import JSONMapping


def open_prompt_question(q: NaruQuestion) -> str:
    """The open-ended prompt: ``open_question`` where the data has it, else ``question``."""
    return q.open_question.strip() if q.open_question and q.open_question.strip() else q.question


def reference_of(q: NaruQuestion) -> str:
    """The reference: ``reference_answer`` where present, else the correct option's text."""
    if q.reference_answer and q.reference_answer.strip():
        return q.reference_answer.strip()
    return q.answer_text


def _norm(text: str) -> str:
    return unicodedata.normalize("NFC", text).strip()


def reference_hash(question: str, reference: str) -> str:
    """Identifies the decomposition input: the prompt question and the reference answer."""
    return hashlib.sha256(f"{_norm(question)}\n\x1e\n{_norm(reference)}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class JudgeItem:
    question_id: str
    video_id: str
    category: str
    question: str  # as the model was asked it
    reference: str
    options: tuple[str, ...] | None = None

    @property
    def level(self) -> str:
        return level_of(self.category)

    @property
    def ref_hash(self) -> str:
        return reference_hash(self.question, self.reference)

    @classmethod
    def from_question(cls, q: NaruQuestion) -> JudgeItem:
        return cls(q.question_id, q.video_id, q.category, open_prompt_question(q), reference_of(q), tuple(q.options))

    @classmethod
    def from_payload(cls, p: JSONMapping) -> JudgeItem:
        """From a ``naru_open`` sample-log payload (``overall``)."""
        return cls(
            str(p["question_id"]),
            str(p.get("video_id") or ""),
            str(p["category"]),
            str(p["question"]),
            str(p["reference"]),
        )


def classify_response(response: str | None) -> tuple[str, str]:
    """(kind, text): kind is ``failed`` (no answer came back), ``empty`` or ``answered``.

    The reasoning is removed as for the multiple-choice tasks (:func:`naru_eval.core.extract.strip_reasoning`):
    a reasoning that never finished (``<think>`` left open: generation stopped while thinking)
    has no answer, so it is ``empty`` (recall 0, no judge call), as the MCQ side counts it
    invalid; its thoughts are never judged as an answer."""
    if response is None:
        return "empty", ""
    if any(marker in response for marker in FAILURE_MARKERS):
        return "failed", ""
    text = (strip_reasoning(response) or "").strip()
    return ("answered", text) if text else ("empty", "")


def is_abstention(text: str) -> bool:
    """A short response that only declines (reported; it is still judged and scored)."""
    from naru_eval.core.extract import _REFUSAL

    return len(text) <= 300 and bool(_REFUSAL.search(unicodedata.normalize("NFKC", text)))
