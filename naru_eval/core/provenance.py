"""What the model was given, as the adapter that gave it says: written into every sample payload.

lmms-eval hands ``process_results`` the doc and the response, never the model, so the adapter
records its input provenance here (one process, one model) when it starts answering, and the
task hooks copy it into each payload (every sample record ends with the :class:`Provenance`
fields). A run's input mode (``video``, ``images``, ``server-sampled``, ``video+audio``, ``text``:
derived from its input plan, ``naru_eval.core.inputs.InputPlan.mode``), its position
layout (``qwen-reference``, ...), its resolved sampling ("128 Frames", "0.25 FPS") and its
variant (the answer-changing arguments that differ from the adapter's defaults) then sit beside
its numbers in the sample log, where the leaderboard and ``compare`` read them: runs that gave
the model different inputs are never ranked or paired as if they were the same, and no report
re-reads ``--model_args`` to guess what a run did.

A log whose payloads carry these fields but no ``adapter`` was written by a model that is not
one of naru-eval's (one of lmms-eval's own models): its frames came from the model's own
sampler, which the leaderboard says (docs/leaderboard.md).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping

from naru_eval.core.inputs import input_modes, is_input_mode


@dataclasses.dataclass(frozen=True)
class Provenance:
    """What the model was given, as its adapter recorded it: the last fields of every sample
    record (``core.scoring.ScoredSample``, ``judge.score.JudgedSample``); None when not recorded."""

    adapter: str | None = None  # the lmms-eval model id of the naru-eval adapter
    input_mode: str | None = None  # naru_eval.core.inputs: derived from the input plan (InputPlan.mode)
    positions: str | None = None  # the position layout of the model's input (e.g. qwen-reference)
    sampling: str | None = None  # the resolved sampling, as the official table prints it: "128 Frames", "0.25 FPS"
    #: the answer-changing arguments that differ from the adapter's defaults, canonical ``k=v,...``
    #: (:func:`variant_string`); "" when none
    variant: str | None = None
    #: what the model heard of this question's video (an omni adapter with its soundtrack): the
    #: audio plan's record, ``full|windows <window>: <seconds> s, <tokens> tokens, <coverage>% of
    #: the video`` (:func:`audio_summary`); None without audio
    audio: str | None = None
    #: the transcript this question's video was given (``transcript=``): its source, fingerprint,
    #: layout, the cues kept and what the budget cut (``naru_eval.adapters.transcript.summary``)
    transcript: str | None = None
    #: how the frames were chosen (``select=``, ``naru_eval.core.selection.Selection.label``: its
    #: method, encoder, parameters and pool rate); None: uniform, the official protocol
    selection: str | None = None
    #: the times (seconds, comma-separated) of the frames chosen for this question (``select=``)
    frame_times: str | None = None


#: the provenance fields a sample payload carries
FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Provenance))


def _value(value: object) -> str:
    """A value as the variant writes it: true/false (as ``--model_args`` spells them), none,
    ``1.5``, a string quoted only when it holds a separator."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return json.dumps(text, ensure_ascii=False) if not text or any(c in text for c in ',= "') else text


def variant_string(changed: Mapping[str, object]) -> str:
    """The canonical ``variant``: ``k=v`` pairs sorted by name, joined by commas; "" when nothing
    differs from the defaults (``naru_eval.adapters.args.AdapterArgs.variant`` gives ``changed``)."""
    return ",".join(f"{k}={_value(changed[k])}" for k in sorted(changed))


def audio_summary(record: Mapping[str, object]) -> str:
    """The ``audio`` field of an answer's audio record (``naru_eval.media.audio_plan.AudioRecord``)."""
    how = "full" if record.get("mode") == "full" else f"windows of {_value(record.get('window_s'))} s"
    coverage = float(record.get("coverage") or 0.0) * 100  # type: ignore[arg-type]
    text = f"{how}: {_value(record.get('seconds'))} s, {record.get('tokens')} tokens, {coverage:.1f}% of the video"
    other = record.get("from_video")
    return f"{text}, from {other}" if other else text


_lock = threading.Lock()
_current: dict[str, str] = {}
#: video_id -> what its questions were given beyond the run's fields (``audio``)
_per_video: dict[str, dict[str, str]] = {}
#: question_id -> what it alone was given (the frames chosen for it)
_per_question: dict[str, dict[str, str]] = {}


def record(**fields: str | None) -> None:
    """Record (or update) this process's input provenance; ``None`` values are ignored."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown provenance field(s) {sorted(unknown)}; known: {list(FIELDS)}")
    mode = fields.get("input_mode")
    if mode is not None and not is_input_mode(mode):
        raise ValueError(f"input_mode {mode!r} is not one of {input_modes()}")
    with _lock:
        _current.update({k: str(v) for k, v in fields.items() if v is not None})


def record_video(video_id: str, **fields: str | None) -> None:
    """Record what one video's questions were given beyond the run's provenance (its ``audio``)."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown provenance field(s) {sorted(unknown)}; known: {list(FIELDS)}")
    with _lock:
        _per_video.setdefault(str(video_id), {}).update({k: str(v) for k, v in fields.items() if v is not None})


def record_question(question_id: str, **fields: str | None) -> None:
    """Record what one question alone was given (the frames chosen for it: ``frame_times``)."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown provenance field(s) {sorted(unknown)}; known: {list(FIELDS)}")
    with _lock:
        _per_question.setdefault(str(question_id), {}).update({k: str(v) for k, v in fields.items() if v is not None})


def current(video_id: str | None = None, question_id: str | None = None) -> dict[str, str]:
    """A copy of what has been recorded in this process (empty when no adapter recorded anything),
    with what ``video_id``'s questions and ``question_id`` itself were given."""
    with _lock:
        out = dict(_current)
        if video_id is not None:
            out.update(_per_video.get(str(video_id), {}))
        if question_id is not None:
            out.update(_per_question.get(str(question_id), {}))
        return out


def clear() -> None:
    """Forget the recorded provenance (tests; a second model in one process)."""
    with _lock:
        _current.clear()
        _per_video.clear()
        _per_question.clear()
