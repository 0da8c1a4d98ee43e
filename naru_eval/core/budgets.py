"""The sampling value and the frame-budget record: types only, the values are the families'.

A run samples its video one way, :class:`Sampling`: a fixed frame count or a rate, with the
caps a family takes. The value is frozen: the adapter builds it once from its parsed model args
(``naru_eval.adapters.args``) and its family's declared default, and the same object reaches the
sampler and the run's provenance (``label``: "128 Frames", "0.25 FPS", the official
leaderboard's form).

:class:`FrameBudget` is how a family records its context-maximal frame budget (the paper's
"maximum uniform sparse-frame sampling permitted by each model's context window") with the
arithmetic behind it. The rule every family's budget follows:

    budget = the largest sweep value (<= 128) whose visual tokens, at the frame size the NARU
             sampler delivers (<= 448x448 px), fit the checkpoint's context window, and that
             the model's own documentation allows for video.

Each family declares its budget and its default sampling in its own module
(``model_adapters/<family>.py``, :class:`naru_eval.adapters.family.Family`); docs/adapters.md's
tables are generated from those declarations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class FrameBudget(NamedTuple):
    """A family's context-maximal frame count and the arithmetic behind it."""

    frames: int
    checkpoint: str  # the reference checkpoint the numbers are for
    context_tokens: int  # the language model's context window (max_position_embeddings)
    tokens_per_frame: int  # visual tokens one <=448x448 frame costs
    source: str


@dataclass(frozen=True)
class Sampling:
    """How a run samples its video: a fixed frame count or a rate (at most one is set), the cap
    on a rate's count (``max_frames``), the pixels per decoded frame (``max_pixels``; None: the
    sampler's default) and, for the Qwen rule, the floor of a rate's count (``min_frames``).

    ``label`` is the form the official NARU leaderboard prints ("128 Frames", "0.25 FPS")."""

    frames: int | None = None
    fps: float | None = None
    max_frames: int | None = None
    max_pixels: int | None = None
    min_frames: int | None = None

    def __post_init__(self) -> None:
        if self.frames is not None and self.fps is not None:
            raise ValueError(f"a sampling is a frame count or a rate, not both (frames={self.frames}, fps={self.fps})")

    @property
    def given(self) -> bool:
        """Whether a frame count or a rate is set (else the family's default applies)."""
        return self.frames is not None or self.fps is not None

    @property
    def label(self) -> str:
        if self.fps is not None:
            return f"{self.fps:g} FPS"
        if self.frames is not None:
            return f"{self.frames} Frames"
        return "n/a"
