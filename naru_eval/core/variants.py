"""Task variants that work with any model: blind (no video) and circular (rotated options).

**Blind** (``naru_mcq_blind``, ``naru_mcq_500_blind``): the same questions, prompt and metrics
with no video (``doc_to_visual`` returns ``[]`` and the doc's ``video`` is ``None``). Every
payload carries ``blind: true`` so a sample log says what it is.

**Circular** (``naru_mcq_500_circular``): every question is asked in the four cyclic rotations
of its options. Rotation ``k`` moves the option at letter ``i`` to letter ``(i + k) mod 4``
(rotation 1 of ``A B C D`` shows ``D A B C``) and the gold letter moves with it. Rotated docs
have ``question_id = "<qid>#r<k>"`` (``#r0`` included, so all four are distinct), and carry
``base_question_id`` and ``rotation``. Metrics (percent):

* ``accuracy_r0``: accuracy on rotation 0, the original option order (plain accuracy);
* ``accuracy_all``: accuracy over all rotated docs (each question counts four times);
* ``circular``: share of questions answered right in *all* four rotations; aggregated over the
  payloads grouped by ``base_question_id`` (:func:`aggregate_circular`);
* ``pick_A`` … ``pick_D``: share of the valid answers (all rotations) choosing each letter.
  Gold letters are uniform by construction (each question's gold visits every letter once),
  so a model without letter bias picks each about 25 %;
* ``invalid_rate``: share of rotated docs no letter could be read from.

Every number recomputes from the sample log: each payload carries the whole per-doc record
(:func:`circular_metrics` does the recomputation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, cast

from naru_eval.core.data import LETTERS, NaruQuestion
from naru_eval.core.scoring import McqPayload, McqRecord, ScoredSample, aggregate_score, metric_payloads

N_ROTATIONS = 4
ROTATION_SEP = "#r"
PICK_METRICS: tuple[str, ...] = tuple(f"pick_{x}" for x in LETTERS)
CIRCULAR_METRICS: tuple[str, ...] = ("accuracy_r0", "accuracy_all", "circular", *PICK_METRICS, "invalid_rate")


# --------------------------------------------------------------------------- rotations


def rotated_id(question_id: str, rotation: int) -> str:
    """``"<qid>#r<k>"``: the id of rotation ``k`` (the id predictions files must use)."""
    return f"{question_id}{ROTATION_SEP}{rotation}"


def split_rotated_id(rotated: str) -> tuple[str, int]:
    """``"<qid>#r<k>"`` -> ``(qid, k)``."""
    base, sep, k = rotated.rpartition(ROTATION_SEP)
    if not sep or not k.isdigit():
        raise ValueError(f"{rotated!r} is not a rotated question id (<qid>{ROTATION_SEP}<k>)")
    return base, int(k)


def rotate_letter(letter: str, rotation: int) -> str:
    """Where the option shown at ``letter`` in the original order is shown in rotation ``k``."""
    return LETTERS[(LETTERS.index(letter) + rotation) % N_ROTATIONS]


def unrotate_letter(letter: str | None, rotation: int) -> str | None:
    """The original-order letter of the option shown at ``letter`` in rotation ``k``."""
    if letter is None or letter not in LETTERS:
        return None
    return LETTERS[(LETTERS.index(letter) - rotation) % N_ROTATIONS]


def rotate_question(q: NaruQuestion, rotation: int) -> NaruQuestion:
    """Rotation ``k`` of ``q``: options shifted ``k`` places down cyclically, gold moved along."""
    k = rotation % N_ROTATIONS
    options = tuple(q.options[(j - k) % N_ROTATIONS] for j in range(N_ROTATIONS))
    return dataclasses.replace(
        q,
        question_id=rotated_id(q.question_id, rotation),
        options=options,  # type: ignore[arg-type]
        answer=rotate_letter(q.answer, k),
    )


def circular_questions(questions: Sequence[NaruQuestion]) -> list[tuple[NaruQuestion, str, int]]:
    """``(rotated question, base question id, rotation)``, the four rotations of each in turn."""
    return [(rotate_question(q, k), q.question_id, k) for q in questions for k in range(N_ROTATIONS)]


# --------------------------------------------------------------------------- payloads


def blind_payloads(sample: ScoredSample) -> dict[str, McqPayload]:
    """The MCQ payloads of :func:`naru_eval.core.scoring.metric_payloads`, marked ``blind: true``."""
    out = metric_payloads(sample)
    for payload in out.values():
        payload["blind"] = True
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class CircularSample(ScoredSample):
    """One rotated doc's outcome: the question's (rotated) outcome, its rotation, and the gold and
    predicted letters in the original option order. Every circular payload carries its fields."""

    base_question_id: str
    rotation: int
    n_rotations: int
    base_gold: str | None
    base_pred: str | None

    def record(self) -> CircularRecord:
        return cast(CircularRecord, asdict(self))  # every field, whatever is added later (a test checks)


class CircularRecord(McqRecord):
    """A :class:`CircularSample` as its payloads carry it."""

    base_question_id: str
    rotation: int
    n_rotations: int
    base_gold: str | None
    base_pred: str | None


class CircularPayload(CircularRecord, total=False):
    """One metric's payload of the circular task (:func:`circular_payloads`)."""

    score: float


def circular_record(
    sample: ScoredSample, base_question_id: str, rotation: int, n_rotations: int = N_ROTATIONS
) -> CircularSample:
    """The per-doc record every circular payload carries."""
    return CircularSample(
        **{f.name: getattr(sample, f.name) for f in dataclasses.fields(ScoredSample)},
        base_question_id=base_question_id,
        rotation=int(rotation),
        n_rotations=int(n_rotations),
        base_gold=unrotate_letter(sample.gold, rotation),
        base_pred=unrotate_letter(sample.pred, rotation),
    )


def circular_scope_score(metric: str, record: Mapping[str, Any]) -> float | None:
    """The ``score`` a circular doc carries under ``metric``; None when out of scope.

    ``circular`` never carries one: it is a property of a group of docs, computed by
    :func:`aggregate_circular` (lmms-eval's per-item standard errors then read N/A for it,
    rather than a number that would describe something else).
    """
    if metric == "accuracy_r0":
        return (100.0 if record["correct"] else 0.0) if record["rotation"] == 0 else None
    if metric == "accuracy_all":
        return 100.0 if record["correct"] else 0.0
    if metric == "invalid_rate":
        return 0.0 if record["valid"] else 100.0
    if metric in PICK_METRICS:
        if not record["valid"]:
            return None
        return 100.0 if record["pred"] == metric[-1] else 0.0
    return None


def circular_payloads(
    sample: ScoredSample, base_question_id: str, rotation: int, n_rotations: int = N_ROTATIONS
) -> dict[str, CircularPayload]:
    """The circular task's ``process_results`` value: one payload per metric."""
    record = circular_record(sample, base_question_id, rotation, n_rotations).record()
    out: dict[str, CircularPayload] = {}
    for metric in CIRCULAR_METRICS:
        payload = CircularPayload(**record)
        score = circular_scope_score(metric, record)
        if score is not None:
            payload["score"] = score
        out[metric] = payload
    return out


# --------------------------------------------------------------------------- aggregation


def circular_groups(items: Iterable[Mapping[str, Any]]) -> dict[str, dict[int, bool]]:
    """``base_question_id -> {rotation: correct}`` over the payloads (or records) given."""
    groups: dict[str, dict[int, bool]] = {}
    for x in items:
        groups.setdefault(str(x["base_question_id"]), {})[int(x["rotation"])] = bool(x["correct"])
    return groups


def circular_correct(items: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """``base_question_id -> right in all rotations`` for the *complete* groups only.

    A group is complete when every rotation ``0 … n_rotations-1`` is present. Incomplete groups
    (``--limit`` cutting a question's rotations) are left out rather than guessed.
    """
    items = list(items)
    n_rot = {str(x["base_question_id"]): int(x.get("n_rotations", N_ROTATIONS)) for x in items}
    out = {}
    for base, rots in circular_groups(items).items():
        if set(rots) == set(range(n_rot[base])):
            out[base] = all(rots.values())
    return out


def aggregate_circular(items: Iterable[Mapping[str, Any]]) -> float | None:
    """Percent of questions right in all rotations; None when no question is complete."""
    verdicts = circular_correct(items)
    if not verdicts:
        return None
    return 100.0 * sum(verdicts.values()) / len(verdicts)


def circular_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Every circular metric from the per-doc records (e.g. the payloads of a sample log)."""
    out: dict[str, float | None] = {}
    for metric in CIRCULAR_METRICS:
        if metric == "circular":
            out[metric] = aggregate_circular(records)
            continue
        scored = []
        for r in records:
            s = circular_scope_score(metric, r)
            if s is not None:
                scored.append({"score": s})
        out[metric] = aggregate_score(scored)
    return out
