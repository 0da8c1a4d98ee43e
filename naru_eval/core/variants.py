"""Task variants that work with any model: blind (no video) and circular (rotated options).

**Blind** (``naru_mcq_blind``, ``naru_mcq_500_blind``): the same questions, prompt and metrics
with no video (``doc_to_visual`` returns ``[]`` and the doc's ``video`` is ``None``). Every
payload carries ``blind: true`` so a sample log says what it is.

**Circular** (``naru_mcq_500_circular``): every question is asked in the four cyclic rotations
of its options. Rotation ``k`` moves the option at letter ``i`` to letter ``(i + k) mod 4``
(rotation 1 of ``A B C D`` shows ``D A B C``) and the gold letter moves with it. Rotated docs
have ``question_id = "<qid>#r<k>"`` (``#r0`` included, so all four are distinct), and carry
``base_question_id`` and ``rotation``. Its metrics (percent) are the table :data:`CIRCULAR`:
accuracy on rotation 0 and over all rotations, ``circular`` (a question right in *all* four
rotations, aggregated over the payloads grouped by ``base_question_id``: :func:`aggregate_circular`),
``pick_A`` … ``pick_D`` (the share of valid answers choosing each letter: gold letters are uniform
by construction, each question's gold visits every letter once, so a model without letter bias
picks each about 25 %) and ``invalid_rate``.

Every number recomputes from the sample log: each payload carries the whole per-doc record
(:func:`circular_metrics` does the recomputation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from naru_eval.core.data import LETTERS, NaruQuestion
from naru_eval.core.json_types import JSONMapping, integer
from naru_eval.core.metrics import Metric, MetricTable, Payload, compute
from naru_eval.core.scoring import ScoredSample, metric_payloads

N_ROTATIONS = 4
ROTATION_SEP = "#r"


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


def blind_payloads(sample: ScoredSample) -> dict[str, Payload]:
    """The MCQ payloads of :func:`naru_eval.core.scoring.metric_payloads`, marked ``blind: true``."""
    out = metric_payloads(sample)
    for payload in out.values():
        payload["blind"] = True
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class CircularSample(ScoredSample):
    """One rotated doc's outcome: the question's (rotated) outcome, its rotation, and the gold and
    predicted letters in the original option order. Every circular payload carries its fields
    (:meth:`~naru_eval.core.scoring.ScoredSample.record`)."""

    base_question_id: str
    rotation: int
    n_rotations: int = N_ROTATIONS
    base_gold: str | None = None
    base_pred: str | None = None


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


def circular_payloads(
    sample: ScoredSample, base_question_id: str, rotation: int, n_rotations: int = N_ROTATIONS
) -> dict[str, Payload]:
    """The circular task's ``process_results`` value: one payload per metric."""
    record = circular_record(sample, base_question_id, rotation, n_rotations)
    return CIRCULAR.payloads(record.record(), record)


# --------------------------------------------------------------------------- aggregation


def circular_groups(items: Iterable[JSONMapping]) -> dict[str, dict[int, bool]]:
    """``base_question_id -> {rotation: correct}`` over the payloads (or records) given."""
    groups: dict[str, dict[int, bool]] = {}
    for x in items:
        groups.setdefault(str(x["base_question_id"]), {})[integer(x["rotation"])] = bool(x["correct"])
    return groups


def circular_correct(items: Iterable[JSONMapping]) -> dict[str, bool]:
    """``base_question_id -> right in all rotations`` for the *complete* groups only.

    A group is complete when every rotation ``0 … n_rotations-1`` is present. Incomplete groups
    (``--limit`` cutting a question's rotations) are left out rather than guessed.
    """
    items = list(items)
    n_rot = {str(x["base_question_id"]): integer(x.get("n_rotations", N_ROTATIONS)) for x in items}
    out = {}
    for base, rots in circular_groups(items).items():
        if set(rots) == set(range(n_rot[base])):
            out[base] = all(rots.values())
    return out


def aggregate_circular(items: Iterable[JSONMapping]) -> float | None:
    """Percent of questions right in all rotations; None when no question is complete."""
    verdicts = circular_correct(items)
    if not verdicts:
        return None
    return 100.0 * sum(verdicts.values()) / len(verdicts)


def _right(s: CircularSample) -> float:
    return 100.0 if s.correct else 0.0


def _pick(letter: str) -> Metric[CircularSample]:
    def value(s: CircularSample) -> float | None:
        return (100.0 if s.pred == letter else 0.0) if s.valid else None

    return Metric(
        f"pick_{letter}", f"share of the valid answers (all rotations) choosing {letter}", "all", value, "mean",
        higher_is_better=False,
    )  # fmt: skip


#: the circular variant's metrics (percent). ``circular`` is a property of a group of docs
#: (:func:`aggregate_circular`): no payload carries a value for it, so lmms-eval's per-item
#: standard errors read N/A for it rather than a number that would describe something else.
CIRCULAR: MetricTable[CircularSample] = MetricTable(
    kind="circular",
    unit="%",
    digits=1,
    overall="levels",
    record_metric="accuracy_all",
    metrics=(
        Metric(
            "accuracy_r0",
            "accuracy on rotation 0, the original option order",
            "all",
            lambda s: _right(s) if s.rotation == 0 else None,
            "mean",
        ),  # fmt: skip
        Metric("accuracy_all", "accuracy over all rotated docs (a question counts four times)", "all", _right, "mean"),
        Metric("circular", "share of questions answered right in all four rotations", "all", lambda s: None, "group"),
        *(_pick(x) for x in LETTERS),
        Metric(
            "invalid_rate",
            "share of rotated docs no letter could be read from",
            "all",
            lambda s: 0.0 if s.valid else 100.0,
            "mean",
            higher_is_better=False,
        ),  # fmt: skip
    ),
    group=aggregate_circular,
)
CIRCULAR_METRICS: tuple[str, ...] = CIRCULAR.names


def circular_metrics(records: Sequence[JSONMapping]) -> dict[str, float | None]:
    """Every circular metric from the per-doc records (e.g. the payloads of a sample log)."""
    samples = [CircularSample.from_record(r) for r in records]
    return compute(CIRCULAR, samples, lambda s: CIRCULAR.payloads(s.record(), s))
