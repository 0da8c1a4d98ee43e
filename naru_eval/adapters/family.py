"""A model family's facts, declared once: :class:`Family`, a frozen value each adapter class
holds as its ``family`` (one module per family in ``model_adapters/``).

Everything else is derived from the declarations: the adapter's lmms-eval id and args model
(``NaruModel.model_id``, ``NaruModel.Args``), the registry and lmms-eval's manifest
(``naru_eval.adapters.registry``), a run's default sampling, the docs tables
(``naru-eval adapters --write docs/adapters.md``), the GPU check's families and the parametrized
family tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from naru_eval.core.budgets import FrameBudget, Sampling
from naru_eval.core.inputs import INPUT_KINDS

if TYPE_CHECKING:
    from naru_eval.adapters.args import RunArgs


#: how a transformers family's frames are sized before its processor (``Family.frames``):
#: ``cap``, at most ``max_pixels`` (default 448x448) of the displayed size, the processor resizing
#: them again to its own grid; ``processor``, exactly the size the processor itself makes of the
#: native frames (``InputBuilder.processor_size``), resized from them with its arithmetic, so it
#: leaves them as they are; ``native``, the frames as the file holds them (the processor resizes)
CAP, PROCESSOR, NATIVE = "cap", "processor", "native"
FRAME_SIZES = (CAP, PROCESSOR, NATIVE)


#: how a family's model is told when each frame was (``Family.times``), as its reference does:
#: ``m-rope-spacing``, one temporal-position spacing per video (Qwen2.5-VL's ``second_per_grid_ts``:
#: time since the video's first frame); ``qwen3-timestamps``, a ``<t seconds>`` text before each
#: temporal patch (Qwen3-VL, Qwen3.5); ``glm-timestamps``, the whole seconds after each temporal
#: patch's image (GLM-4.1V); ``labelled-seconds``, "Frame i sampled at t seconds" (Nemotron-Omni);
#: ``tmrope``, each temporal patch's positions at its true time (the Qwen-Omni thinkers); ``order``,
#: the frames' order only (InternVL3.5's ``FrameN:``, MiniCPM-o's images): no times
TIME_ENCODINGS = ("m-rope-spacing", "qwen3-timestamps", "glm-timestamps", "labelled-seconds", "tmrope", "order")


@dataclass(frozen=True)
class Official:
    """A default sampling and where it comes from: the rows of the official NARU leaderboard run
    at it (``rows``: their names in the package's ``official_results.json``, checked by a test),
    or, for an adapter whose model is the user's choice, ``note``."""

    sampling: Sampling
    rows: tuple[str, ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if not self.sampling.given:
            raise ValueError("a default sampling sets a frame count or a rate")
        if not self.rows and not self.note:
            raise ValueError("a default sampling names its official rows (or, without one, a note why)")


@dataclass(frozen=True)
class Family:
    """One adapter's facts.

    - ``id``: the lmms-eval model id (``--model``);
    - ``args``: its typed ``--model_args`` (``naru_eval.adapters.args``);
    - ``default``: the sampling of a run without ``num_frames=``/``fps=`` (the official row's),
      ``by_checkpoint``: a checkpoint (the last part of its hub id) whose row differs;
    - ``budget``: the context-maximal frame budget with its arithmetic;
    - ``checkpoints``: ``config.model_type`` -> the transformers class that loads it;
    - ``positions``: the position layout the model is given (``naru_eval.adapters.hf.positions``;
      ``MODEL_OWN``: the model computes its own);
    - ``frames``: how the frames are sized before the processor (:data:`FRAME_SIZES`; every
      transformers family says which, none inherits a cap silently);
    - ``times``: how its model is told when each frame was (:data:`TIME_ENCODINGS`; the tests read
      the times back from the model's inputs by it);
    - ``inputs``: the inputs it takes besides the prompt (fields of
      ``naru_eval.core.inputs.InputPlan``: ``frames``, ``audio``); none: the adapter gives a model
      nothing (replay).
    """

    id: str
    args: type[RunArgs]
    default: Official | None = None
    by_checkpoint: Mapping[str, Official] = field(default_factory=dict)
    budget: FrameBudget | None = None
    checkpoints: Mapping[str, str] = field(default_factory=dict)
    positions: str | None = None
    inputs: tuple[str, ...] = ("frames",)
    frames: str | None = None
    times: str | None = None

    def __post_init__(self) -> None:
        if not self.id.startswith("naru_"):
            raise ValueError(f"a family id starts with naru_ (lmms-eval's built-in names must not clash): {self.id!r}")
        unknown = sorted(set(self.inputs) - set(INPUT_KINDS))
        if unknown:
            raise ValueError(f"{self.id}: unknown inputs {unknown}; an input plan holds {list(INPUT_KINDS)}")
        if self.times is not None and self.times not in TIME_ENCODINGS:
            raise ValueError(f"{self.id}: times={self.times!r}; the time encodings are {list(TIME_ENCODINGS)}")
        if self.frames is not None and self.frames not in FRAME_SIZES:
            raise ValueError(f"{self.id}: frames={self.frames!r}; the frame sizes are {list(FRAME_SIZES)}")

    def default_for(self, checkpoint: str | None) -> Official | None:
        """The default sampling for ``checkpoint`` (its own row's, where it has one)."""
        if checkpoint:
            name = str(checkpoint).rstrip("/").rsplit("/", 1)[-1]
            if name in self.by_checkpoint:
                return self.by_checkpoint[name]
        return self.default

    def resolve(self, given: Sampling, checkpoint: str | None = None) -> Sampling:
        """``given`` when it sets a count or a rate; else the default's count or rate, with the
        caps ``given`` sets (``max_frames``, ``max_pixels``, ``min_frames``)."""
        if given.given:
            return given
        default = self.default_for(checkpoint)
        if default is None:
            return given
        return replace(given, frames=default.sampling.frames, fps=default.sampling.fps)
