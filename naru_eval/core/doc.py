"""The doc: one NARU question as lmms-eval carries it from the task hooks to the adapters.

What lmms-eval forces (0.7.3): a task's ``process_docs`` must return a ``datasets.Dataset``, and
every hook (``doc_to_text``, ``doc_to_visual``, ``process_results``) and every model (through
``task_dict[task][split][doc_id]``) is handed one of its rows, a plain dict; nothing else
travels with a request. So a :class:`~naru_eval.core.data.NaruQuestion` crosses lmms-eval once,
as a row: :func:`to_doc` writes it (the question's fields, plus what the run adds: the video
path, the level, the data's fingerprint, a rotation), :class:`NaruDoc` types it on both sides,
and :func:`question_of` reads the question back where a hook needs the typed object (scoring,
the judge). Nothing else converts between the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from naru_eval.core.data import NaruQuestion, QuestionRow


class NaruDoc(QuestionRow):
    """A question's row in the task's ``datasets.Dataset``, as hooks and adapters read it: the
    question's own fields (:class:`~naru_eval.core.data.QuestionRow`; ``duration_s`` there is
    the annotation's, else the preflight's probe of the file) and what the run adds."""

    #: the video file the model is given (None: a blind task, no media)
    video: str | None
    level: str
    data_fingerprint: str | None


class Rotation(TypedDict):
    """What the circular variant adds to a rotated question's doc (naru_eval.core.variants)."""

    base_question_id: str
    rotation: int
    n_rotations: int


class RotatedDoc(NaruDoc, Rotation):
    """A doc of the circular variant: the rotated question and its rotation."""


def to_doc(
    question: NaruQuestion,
    *,
    video: str | None,
    data_fingerprint: str | None,
    duration_s: float | None = None,
    rotation: Rotation | None = None,
) -> NaruDoc:
    """The row of ``question``: ``video`` (None: no media), the data's fingerprint (every payload
    records it), and ``duration_s`` where the annotation has none (the preflight's probe, so
    duration diagnostics and the Gemini preflight need no second probe)."""
    doc = cast(NaruDoc, question.to_doc())
    doc["video"] = video
    doc["level"] = question.level
    doc["data_fingerprint"] = data_fingerprint or None
    if doc.get("duration_s") is None:
        doc["duration_s"] = duration_s
    if rotation is not None:
        return cast(RotatedDoc, {**doc, **rotation})
    return doc


def question_of(doc: Mapping[str, Any]) -> NaruQuestion:
    """The question a doc was written from (:func:`to_doc`)."""
    return NaruQuestion.from_doc(doc)
