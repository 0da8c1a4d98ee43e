"""What the model was given, as the adapter that gave it says: written into every sample payload.

lmms-eval hands ``process_results`` the doc and the response, never the model, so the adapter
records its input provenance here (one process, one model) when it starts answering, and the
task hooks copy it into each payload. A run's input mode (``video``, ``images``,
``server-sampled``, ``video+audio``, ``text``: derived from its input plan,
``naru_eval.core.inputs.InputPlan.mode``), its position layout (``qwen-reference``, ...), its
sampling (the leaderboard's label, "128 Frames") and its variant (the answer-changing model args
that differ from the adapter's defaults, ``k=v`` joined by ``,``; empty when none) then sit beside
its numbers in the sample log, where the leaderboard and ``compare`` read them: runs that gave
the model different inputs are never ranked or paired as if they were the same.
"""

from __future__ import annotations

import threading

from naru_eval.core.inputs import input_modes, is_input_mode

#: the provenance fields a sample payload may carry (None when the adapter did not say)
FIELDS: tuple[str, ...] = ("adapter", "input_mode", "positions", "sampling", "variant")

_lock = threading.Lock()
_current: dict[str, str] = {}


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


def current() -> dict[str, str]:
    """A copy of what has been recorded in this process (empty when no adapter recorded anything)."""
    with _lock:
        return dict(_current)


def clear() -> None:
    """Forget the recorded provenance (tests; a second model in one process)."""
    with _lock:
        _current.clear()
