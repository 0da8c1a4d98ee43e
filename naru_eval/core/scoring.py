"""Per-question scoring and the task metrics (paper table II columns, as percentages).

Each question yields one :class:`ScoredSample`. lmms-eval drops the doc from its sample log, so
the whole record travels in every metric's ``process_results`` payload; every metric is then
recomputable from the ``*_samples_<task>.jsonl`` log (see :func:`metrics_from_samples_log`).

Two kinds of metric, as the NARU authors aggregate them (docs/metrics.md):

* **per-item means** (``accuracy``, ``N.1`` … ``C.5``, ``invalid_rate``): the payload carries
  ``score`` (0 or 100) only when the question is in the metric's scope, and the metric is the
  mean of ``score`` (:func:`aggregate_score`). lmms-eval's ``_stderr_clt``/``_stderr_clustered``
  (``cluster_key: video_id``, ``score_key: score``) are then the right standard errors.
* **macro means** (``overall``, ``narrative``, ``cultural``): the payload carries the per-item
  value under ``item_score`` instead (:data:`MACRO_KEY`), and :func:`aggregate_macro` takes the
  mean per category, then the mean over the level's categories, then (``overall``) the mean of
  the two levels. Their payloads carry no ``score``, so lmms-eval prints N/A for their per-item
  standard errors instead of the standard error of a micro mean; their uncertainty is the
  video-clustered bootstrap of :mod:`naru_eval.report.stats`, which recomputes the same macro mean.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, TypedDict, cast

from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE, NaruQuestion, level_of
from naru_eval.core.extract import Extraction, extract_answer

#: the authors' headline metrics: means of category means (see :func:`macro_levels`)
MACRO_METRICS: tuple[str, ...] = ("overall", "narrative", "cultural")
METRICS: tuple[str, ...] = (*MACRO_METRICS, *CATEGORIES, "accuracy", "invalid_rate")
#: where a macro metric's payload carries its question's value (never ``score``: see the module doc)
MACRO_KEY: Final = "item_score"

#: a second reading of an answer the rules found invalid: (extraction, question, response) ->
#: extraction. The opt-in LLM fallback (naru_eval.judge.mcq_fallback) is one, wired in by the
#: lmms-eval bridge (naru_eval.lmms.tasks) when ``NARU_MCQ_LLM_FALLBACK=1``.
Fallback = Callable[[Extraction, NaruQuestion, "str | None"], Extraction]


@dataclass(frozen=True)
class ScoredSample:
    """One question's outcome; the fields every metric is recomputed from."""

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
    # what the model was given, as its adapter recorded it (naru_eval.core.provenance)
    adapter: str | None = None
    input_mode: str | None = None  # video | images | server-sampled | text
    positions: str | None = None  # the position layout of the model's input (e.g. qwen-reference)
    world_size: int | None = None  # the processes the run was sharded over (lmms-eval's WORLD_SIZE)

    def record(self) -> McqRecord:
        """The fields as JSON, in their order: what every payload of the question carries."""
        return cast(McqRecord, asdict(self))  # every field, whatever is added later (a test checks)


class McqRecord(TypedDict):
    """A :class:`ScoredSample` as its payloads carry it (:meth:`ScoredSample.record`)."""

    question_id: str
    video_id: str
    category: str
    level: str
    gold: str
    pred: str | None
    method: str
    correct: bool
    valid: bool
    duration_s: float | None
    data_fingerprint: str | None
    adapter: str | None
    input_mode: str | None
    positions: str | None
    world_size: int | None


class McqPayload(McqRecord, total=False):
    """One metric's ``process_results`` payload (:func:`metric_payloads`): the question's record,
    with its value under ``score`` (a per-item mean, in scope) or :data:`MACRO_KEY` (a macro
    mean), and ``blind`` on the blind task (naru_eval.core.variants.blind_payloads)."""

    score: float
    item_score: float
    blind: bool


def score_response(
    question: NaruQuestion,
    response: str | None,
    data_fingerprint: str | None = None,
    fallback: Fallback | None = None,
    provenance: Mapping[str, str] | None = None,
    world_size: int | None = None,
) -> ScoredSample:
    """Extract the letter from ``response`` and compare it with the gold answer. ``fallback``
    (none by default) gets a second look at an invalid answer; scoring itself reads no setting
    (``world_size``: the run's process count, as the lmms-eval bridge reads it)."""
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
        adapter=(provenance or {}).get("adapter"),
        input_mode=(provenance or {}).get("input_mode"),
        positions=(provenance or {}).get("positions"),
        world_size=world_size,
    )


def in_scope(metric: str, category: str) -> bool:
    """Whether a question of ``category`` counts towards ``metric``."""
    if metric in ("overall", "accuracy", "invalid_rate"):
        return True
    if metric == "narrative":
        return category in NARRATIVE
    if metric == "cultural":
        return category in CULTURAL
    return metric == category


def metric_payloads(sample: ScoredSample) -> dict[str, McqPayload]:
    """The ``process_results`` return value: one payload per metric."""
    record = sample.record()
    out: dict[str, McqPayload] = {}
    for metric in METRICS:
        payload = McqPayload(**record)
        if in_scope(metric, sample.category):
            hit = (not sample.valid) if metric == "invalid_rate" else sample.correct
            if metric in MACRO_METRICS:
                payload[MACRO_KEY] = 100.0 if hit else 0.0
            else:
                payload["score"] = 100.0 if hit else 0.0
        out[metric] = payload
    return out


def aggregate_score(items: Iterable[Mapping[str, Any]]) -> float | None:
    """Mean ``score`` of the payloads in scope; None (shown N/A) when no question is in scope."""
    scores = [float(x["score"]) for x in items if "score" in x]
    if not scores:
        return None
    return sum(scores) / len(scores)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def macro_levels(category_means: Mapping[str, float | None], overall: str = "levels") -> dict[str, float | None]:
    """The authors' aggregation: ``narrative`` = mean of the N.1-N.4 values, ``cultural`` = mean
    of the C.1-C.5 values; ``overall`` = (narrative + cultural) / 2 (``overall="levels"``, table
    II, multiple choice) or the mean of the nine category values (``overall="categories"``,
    table III, open-ended).

    Categories with no value (None or NaN: no question in scope) are left out of the means; a
    level with none is None, and ``overall`` is then the other level's mean."""
    if overall not in ("levels", "categories"):
        raise ValueError(f"overall={overall!r}: expected 'levels' or 'categories'")

    def present(cats: Sequence[str]) -> list[float]:
        vals = [category_means.get(c) for c in cats]
        return [float(v) for v in vals if v is not None and not math.isnan(v)]

    nar, cul = _mean(present(NARRATIVE)), _mean(present(CULTURAL))
    if overall == "levels":
        ov = _mean([v for v in (nar, cul) if v is not None])
    else:
        ov = _mean(present(CATEGORIES))
    return {"overall": ov, "narrative": nar, "cultural": cul}


def aggregate_macro(items: Iterable[Mapping[str, Any]], overall: str = "levels") -> float | None:
    """A macro metric from its payloads: the mean of ``item_score`` per category, then
    :func:`macro_levels`. Out-of-scope payloads carry no ``item_score``, so the ``narrative``
    payloads give the narrative mean and the ``overall`` payloads the overall one."""
    by_cat: dict[str, list[float]] = {}
    for x in items:
        if MACRO_KEY in x:
            by_cat.setdefault(str(x["category"]), []).append(float(x[MACRO_KEY]))
    if not by_cat:
        return None
    unknown = sorted(set(by_cat) - set(CATEGORIES))
    if unknown:
        raise ValueError(f"payload category {unknown[0]!r} is not one of {', '.join(CATEGORIES)}")
    return macro_levels({c: _mean(v) for c, v in by_cat.items()}, overall)["overall"]


def compute_metrics(samples: Sequence[ScoredSample]) -> dict[str, float | None]:
    """All task metrics from scored samples, exactly as the lmms-eval aggregation computes them."""
    payloads = [metric_payloads(s) for s in samples]
    return {m: (aggregate_macro if m in MACRO_METRICS else aggregate_score)(p[m] for p in payloads) for m in METRICS}


class SampleLogError(ValueError):
    """A sample log that cannot be read as the log it should be: the message names the file (and
    the line) and what to do. ``naru-eval`` prints it without a traceback (a user's file, not a
    bug of ours)."""


class ForeignLogError(SampleLogError):
    """A readable sample log of something else (another task, another benchmark): no NARU payload."""


def _no_constant(token: str) -> float:
    raise ValueError(f"bare {token} is not JSON")


def sample_records(
    path: str | Path, required: Sequence[str] = (), kind: str = "NARU MCQ", key: str = "overall"
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
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
                    rec = json.loads(line, parse_constant=_no_constant)
                except ValueError as e:
                    raise SampleLogError(
                        f"{path}:{lineno}: not a JSON line ({e}); the log is truncated or corrupt "
                        "(a crashed run or a full disk): rerun the task"
                    ) from None
                payload = rec.get(key) if isinstance(rec, dict) else None
                if not isinstance(payload, dict) or any(k not in payload for k in required):
                    raise ForeignLogError(f"{path}:{lineno}: no {kind} '{key}' payload; not a {kind} sample log")
                n += 1
                yield rec, payload
    except OSError as e:
        raise SampleLogError(f"{path}: cannot read the sample log ({e.strerror or e})") from None
    if n == 0:
        raise SampleLogError(f"{path}: empty sample log (no line): the run logged nothing; rerun it with --log_samples")


#: the fields a MCQ payload must carry (the others have defaults: older logs lack them)
REQUIRED_FIELDS: tuple[str, ...] = tuple(
    name for name, f in ScoredSample.__dataclass_fields__.items() if f.default is dataclasses.MISSING
)


def samples_from_log(path: str | Path) -> list[ScoredSample]:
    """Read ScoredSamples back from an lmms-eval ``*_samples_<task>.jsonl`` log.

    Fields with a default (``duration_s``) may be absent: logs written before they existed
    still read."""
    fields = set(ScoredSample.__dataclass_fields__)
    return [
        ScoredSample(**{k: payload[k] for k in fields if k in payload})
        for _, payload in sample_records(path, REQUIRED_FIELDS)
    ]


def metrics_from_samples_log(path: str | Path) -> dict[str, float | None]:
    """Recompute every metric from a sample log (the reproducibility check)."""
    return compute_metrics(samples_from_log(path))


def close(a: float | None, b: float | None, tol: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, abs_tol=tol)
