"""Per-question scoring and the multiple-choice metrics (paper table II columns, as percentages).

Each question yields one :class:`ScoredSample`. lmms-eval drops the doc from its sample log, so
the whole record travels in every metric's ``process_results`` payload; every metric is then
recomputable from the ``*_samples_<task>.jsonl`` log (see :func:`metrics_from_samples_log`).

The metrics are the table :data:`MCQ` (naru_eval.core.metrics: name, scope, per-question value,
aggregation), in two kinds, as the NARU authors aggregate them (docs/metrics.md):

* **per-item means** (``accuracy``, ``N.1`` … ``C.5``, ``invalid_rate``): the payload carries
  ``score`` (0 or 100) only when the question is in the metric's scope, and the metric is the
  mean of ``score``. lmms-eval's ``_stderr_clt``/``_stderr_clustered`` (``cluster_key:
  video_id``, ``score_key: score``) are then the right standard errors.
* **macro means** (``overall``, ``narrative``, ``cultural``): the payload carries the per-item
  value under ``item_score`` instead (``MACRO_KEY``), and the aggregation takes the mean per
  category, then the mean over the level's categories, then (``overall``) the mean of the two
  levels. Their payloads carry no ``score``, so lmms-eval prints N/A for their per-item standard
  errors instead of the standard error of a micro mean; their uncertainty is the video-clustered
  bootstrap of :mod:`naru_eval.report.stats`, which recomputes the same macro mean.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from naru_eval.core.data import CATEGORIES, NaruQuestion, level_of, loads_strict
from naru_eval.core.extract import Extraction, extract_answer
from naru_eval.core.json_types import JSONMapping, JSONObject, from_record
from naru_eval.core.metrics import Metric, MetricTable, Payload, compute
from naru_eval.core.provenance import FIELDS, Provenance

#: a second reading of an answer the rules found invalid: (extraction, question, response) ->
#: extraction. The opt-in LLM fallback (naru_eval.judge.mcq_fallback) is one, wired in by the
#: lmms-eval bridge (naru_eval.lmms.tasks) when ``NARU_MCQ_LLM_FALLBACK=1``.
Fallback = Callable[[Extraction, NaruQuestion, "str | None"], Extraction]
S = TypeVar("S", bound="ScoredSample")


@dataclasses.dataclass(frozen=True)
class McqOutcome:
    """What one question's answer was: the first fields of :class:`ScoredSample`."""

    question_id: str
    video_id: str
    category: str
    level: str
    gold: str
    pred: str | None  # the extracted letter, None when invalid
    method: str  # how it was extracted, or "invalid:<kind>"
    correct: bool
    valid: bool
    duration_s: float | None = None  # the video's length when the data has it (diagnostics)
    data_fingerprint: str | None = None  # the annotations' fingerprint (naru_eval.core.data.Dataset)
    world_size: int | None = None  # the processes the run was sharded over (lmms-eval's WORLD_SIZE)


@dataclasses.dataclass(frozen=True)
class ScoredSample(Provenance, McqOutcome):
    """One question's outcome and what the model was given: the fields every metric is
    recomputed from, and the record every payload of the question carries (:meth:`record`).

    The fields are :class:`McqOutcome`'s, then :class:`~naru_eval.core.provenance.Provenance`'s
    (a dataclass lists its bases' fields from the last base to the first)."""

    def record(self) -> Payload:
        """The fields as JSON, in their order."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls: type[S], record: JSONMapping) -> S:
        """A sample from its record (a sample log's payload); fields with a default may be absent
        (logs written before they existed still read), unknown keys (``score``) are left out."""
        return from_record(cls, record)


def _hit(s: ScoredSample) -> float:
    return 100.0 if s.correct else 0.0


def _invalid(s: ScoredSample) -> float:
    return 0.0 if s.valid else 100.0


#: the multiple-choice metrics (percent), in the order lmms-eval reports them
MCQ: MetricTable[ScoredSample] = MetricTable(
    kind="mcq",
    unit="%",
    digits=1,
    overall="levels",
    record_metric="overall",
    metrics=(
        Metric(
            "overall",
            "(narrative + cultural) / 2: the authors' aggregation (table II)",
            "all",
            _hit,
            "macro",
            headline=True,
        ),  # fmt: skip
        Metric("narrative", "mean of the N.1-N.4 accuracies", "narrative", _hit, "macro", headline=True),
        Metric("cultural", "mean of the C.1-C.5 accuracies", "cultural", _hit, "macro", headline=True),
        *(Metric(c, f"accuracy on the {c} questions", c, _hit, "mean") for c in CATEGORIES),
        Metric("accuracy", "accuracy over all questions (micro)", "all", _hit, "mean", headline=True),
        Metric(
            "invalid_rate",
            "share of answers no letter could be read from (they also count as wrong)",
            "all",
            _invalid,
            "mean",
            higher_is_better=False,
        ),  # fmt: skip
    ),
)
#: the authors' headline metrics: means of category means (naru_eval.core.metrics.macro_levels)
MACRO_METRICS: tuple[str, ...] = MCQ.macro
METRICS: tuple[str, ...] = MCQ.names


def score_response(
    question: NaruQuestion,
    response: str | None,
    data_fingerprint: str | None = None,
    fallback: Fallback | None = None,
    provenance: Mapping[str, str] | None = None,
    world_size: int | None = None,
) -> ScoredSample:
    """Extract the letter from ``response`` and compare it with the gold answer. ``fallback``
    (none by default) gets a second look at an invalid answer; scoring itself reads no setting.
    ``provenance``: what the adapter recorded (naru_eval.core.provenance.current); ``world_size``:
    the run's process count, as the lmms-eval bridge reads it."""
    ext = extract_answer(response, question.options)
    if not ext.valid and fallback is not None:
        ext = fallback(ext, question, response)
    return ScoredSample(
        question_id=question.question_id,
        video_id=question.video_id,
        category=question.category,
        level=level_of(question.category),
        gold=question.answer,
        pred=ext.letter,
        method=ext.method,
        correct=ext.letter == question.answer,
        valid=ext.valid,
        duration_s=question.duration_s,
        data_fingerprint=data_fingerprint,
        world_size=world_size,
        **{k: v for k, v in (provenance or {}).items() if k in FIELDS},
    )


def metric_payloads(sample: ScoredSample) -> dict[str, Payload]:
    """The ``process_results`` return value: one payload per metric, each the whole record."""
    return MCQ.payloads(sample.record(), sample)


def compute_metrics(samples: Sequence[ScoredSample]) -> dict[str, float | None]:
    """All task metrics from scored samples, exactly as the lmms-eval aggregation computes them."""
    return compute(MCQ, samples, metric_payloads)


class SampleLogError(ValueError):
    """A sample log that cannot be read as the log it should be: the message names the file (and
    the line) and what to do. ``naru-eval`` prints it without a traceback (a user's file, not a
    bug of ours)."""


class ForeignLogError(SampleLogError):
    """A readable sample log of something else (another task, another benchmark): no NARU payload."""


def sample_records(
    path: str | Path, required: Sequence[str] = (), kind: str = "NARU MCQ", key: str = "overall"
) -> Iterator[tuple[JSONObject, JSONObject]]:
    """(sample-log line, its ``key`` payload) for each line of an lmms-eval samples log.

    The one reader of sample logs, strict: the ``overall`` payload (``accuracy_all`` for the
    circular variant) carries the whole per-question record (see the module docstring). A line
    that is not JSON (a truncated log), that has no such payload or lacks a ``required`` field,
    a log that cannot be read, and an empty log are a :class:`SampleLogError` naming the file and
    the line."""
    n = 0
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise SampleLogError(
                        f"{path}:{lineno}: not UTF-8 text (byte {e.start} of the line: {e.reason}); "
                        "not an lmms-eval sample log, or a corrupt one"
                    ) from None
                if not line.strip():
                    continue
                try:
                    rec = loads_strict(line)
                except ValueError as e:
                    raise SampleLogError(
                        f"{path}:{lineno}: not a JSON line ({e}); the log is truncated or corrupt "
                        "(a crashed run or a full disk): rerun the task"
                    ) from None
                payload = rec.get(key) if isinstance(rec, dict) else None
                if (
                    not isinstance(rec, dict)
                    or not isinstance(payload, dict)
                    or any(k not in payload for k in required)
                ):
                    raise ForeignLogError(f"{path}:{lineno}: no {kind} '{key}' payload; not a {kind} sample log")
                n += 1
                yield rec, payload
    except OSError as e:
        raise SampleLogError(f"{path}: cannot read the sample log ({e.strerror or e})") from None
    if n == 0:
        raise SampleLogError(f"{path}: empty sample log (no line): the run logged nothing; rerun it with --log_samples")


#: the fields a MCQ payload must carry (the others have defaults: older logs lack them)
REQUIRED_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(ScoredSample) if f.default is dataclasses.MISSING
)


def samples_from_log(path: str | Path) -> list[ScoredSample]:
    """Read ScoredSamples back from an lmms-eval ``*_samples_<task>.jsonl`` log (logs written
    before a field with a default existed still read)."""
    return [ScoredSample.from_record(payload) for _, payload in sample_records(path, REQUIRED_FIELDS)]


def metrics_from_samples_log(path: str | Path) -> dict[str, float | None]:
    """Recompute every metric from a sample log (the reproducibility check)."""
    return compute_metrics(samples_from_log(path))


def close(a: float | None, b: float | None, tol: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, abs_tol=tol)
