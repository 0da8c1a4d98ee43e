"""The doc: one NARU question as lmms-eval carries it from the task hooks to the adapters.

What lmms-eval forces (0.7.3): a task's ``process_docs`` must return a ``datasets.Dataset``, and
every hook (``doc_to_text``, ``doc_to_visual``, ``process_results``) and every model (through
``task_dict[task][split][doc_id]``) is handed one of its rows, a plain dict; nothing else
travels with a request. So a :class:`~naru_eval.core.data.NaruQuestion` crosses lmms-eval once,
as a row: :func:`to_doc` writes it (the question's fields, then what the run adds,
:class:`RunFields`, and a rotated question's :class:`Rotation`), and the readers take the typed
objects back (:func:`question_of`, :func:`run_fields`, :func:`rotation_of`). Each field is
declared once, in one of those three dataclasses; the row itself is JSON (:data:`NaruDoc`).
"""

from __future__ import annotations

import dataclasses

from naru_eval.core.data import NaruQuestion
from naru_eval.core.json_types import JSONMapping, JSONObject, from_record, integer

#: a doc as lmms-eval hands it to the hooks and the adapters: the JSON row :func:`to_doc` wrote
NaruDoc = JSONMapping


@dataclasses.dataclass(frozen=True)
class RunFields:
    """What the run adds to a question's row (after the question's own fields)."""

    #: the video file the model is given (None: a blind task, no media)
    video: str | None
    level: str
    data_fingerprint: str | None


@dataclasses.dataclass(frozen=True)
class Rotation:
    """What the circular variant adds to a rotated question's row (naru_eval.core.variants)."""

    base_question_id: str
    rotation: int
    n_rotations: int


def to_doc(
    question: NaruQuestion,
    *,
    video: str | None,
    data_fingerprint: str | None,
    duration_s: float | None = None,
    rotation: Rotation | None = None,
) -> JSONObject:
    """The row of ``question``: its fields (``duration_s`` the annotation's, else ``duration_s``
    here, the preflight's probe, so duration diagnostics and the Gemini preflight need no second
    probe), then ``video`` (None: no media), the level and the data's fingerprint (every payload
    records it), then the rotation of a rotated question."""
    doc = question.to_doc()
    if doc.get("duration_s") is None:
        doc["duration_s"] = duration_s
    doc.update(dataclasses.asdict(RunFields(video, question.level, data_fingerprint or None)))
    if rotation is not None:
        doc.update(dataclasses.asdict(rotation))
    return doc


def question_of(doc: NaruDoc) -> NaruQuestion:
    """The question a doc was written from (:func:`to_doc`)."""
    return NaruQuestion.from_doc(doc)


def run_fields(doc: NaruDoc) -> RunFields:
    """What the run added to ``doc`` (:func:`to_doc`)."""
    return from_record(RunFields, {f.name: doc.get(f.name) for f in dataclasses.fields(RunFields)})


def rotation_of(doc: NaruDoc) -> Rotation:
    """A rotated doc's rotation (the circular variant's docs only)."""
    return Rotation(
        base_question_id=str(doc["base_question_id"]),
        rotation=integer(doc["rotation"]),
        n_rotations=integer(doc["n_rotations"]),
    )
