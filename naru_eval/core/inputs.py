"""What a request gives the model besides its prompt: a typed, frozen plan of its inputs.

An adapter builds one :class:`InputPlan` for its run (from its family's declared inputs and its
parsed args) and every request carries it (``naru_eval.adapters.base.NaruRequest.inputs``; a
request without media carries :data:`TEXT`). Each input is one optional field of the plan, a
frozen value holding what its sampler needs:

- ``frames``: :class:`FramesInput`, the frame sampling (:class:`naru_eval.core.budgets.Sampling`,
  the one sampler ``naru_eval.media.sampler`` and its cache key ``naru_eval.media.frame_cache``)
  and how the frames reach the model: one video, separate images, or a file the server samples;
- ``audio``: :class:`AudioInput`, the video's audio track (as a provider takes it natively with
  the uploaded video, Gemini, or as the omni families' audio samples);
- ``transcript``: :class:`naru_eval.core.transcripts.TranscriptInput`, the video's transcript as
  text (its source, layout and control).

The run's input mode (``naru_eval.core.provenance``, recorded in every sample payload) is
derived from the plan, :attr:`InputPlan.mode`: each field's part in field order, joined by
``+`` (``video``, ``images``, ``server-sampled``, ``video+audio``, ``video+transcript``,
``transcript``, ``video+audio+transcript``), ``text`` when there is
nothing but the prompt. A new input (a transcript, audio samples for an omni model) is a new
field here with its own part, its own sampler in ``media/`` and its own cache key; the mode, its
validation and the provenance follow from the field (docs/extending.md, "Add an input").
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Literal, get_args, get_type_hints

from naru_eval.core.budgets import Sampling
from naru_eval.core.transcripts import TranscriptInput

#: how the frames reach the model: one video input (our frames, in order, with their timing),
#: separate images, or a file the server samples itself
FrameDelivery = Literal["video", "images", "server-sampled"]


class InputPart:
    """One input of a plan: the parts it may give an input mode (``MODES``) and the one it gives."""

    MODES: ClassVar[tuple[str, ...]] = ()

    @property
    def mode(self) -> str:  # pragma: no cover - every part defines it
        raise NotImplementedError


@dataclass(frozen=True)
class FramesInput(InputPart):
    """The video's frames: how they are sampled and delivered.

    ``decoded``: whether naru-eval's sampler decodes them (False: the file itself goes to the
    provider, which samples it at ``sampling``'s rate, Gemini; or to a server that samples it its
    own way, ``server-sampled``)."""

    sampling: Sampling
    delivery: FrameDelivery = "video"
    decoded: bool = True
    #: the parts this input may contribute to an input mode
    MODES: ClassVar[tuple[str, ...]] = get_args(FrameDelivery)

    @property
    def mode(self) -> str:
        return self.delivery


#: where a request's soundtrack comes from: its own video, or another video's (an ablation's
#: control: ``naru_eval.media.audio_plan.derangement``)
AudioSource = Literal["own", "other"]


@dataclass(frozen=True)
class AudioInput(InputPart):
    """The video's audio track.

    ``delivery``: ``native``, the provider takes it with the uploaded file (no audio is decoded
    here: Gemini); ``samples``, naru-eval's audio sampler (``naru_eval.media.audio``) decodes it
    and the adapter feeds the model the samples of the audio plan's windows (the omni families).
    ``source``: the video's own soundtrack or, for the control of an audio ablation, another
    video's; ``window_s``: a fixed window per sampled frame instead of the plan's choice;
    ``stream``: a container stream instead of the one a player plays."""

    delivery: Literal["native", "samples"] = "native"
    source: AudioSource = "own"
    window_s: float | None = None
    stream: int | None = None
    MODES: ClassVar[tuple[str, ...]] = ("audio",)

    @property
    def mode(self) -> str:
        return "audio"


#: an input mode with no media: the prompt alone (the blind tasks, a request without a video)
TEXT_MODE = "text"


@dataclass(frozen=True)
class InputPlan:
    """A request's inputs besides the prompt; a field left None is not given."""

    frames: FramesInput | None = None
    audio: AudioInput | None = None
    transcript: TranscriptInput | None = None

    @property
    def mode(self) -> str:
        """``+``-joined parts of the fields given, in field order; ``text`` when none is."""
        parts = [part.mode for part in self.parts()]
        return "+".join(parts) if parts else TEXT_MODE

    def parts(self) -> list[InputPart]:
        """The inputs given, in field order."""
        return [getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None]

    @property
    def kinds(self) -> tuple[str, ...]:
        """The names of the inputs given (``frames``, ``audio``, ``transcript``): what a family
        declares it takes."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) is not None)


#: the plan of a request without media
TEXT = InputPlan()

#: every input a plan can hold (its field names)
INPUT_KINDS: tuple[str, ...] = tuple(f.name for f in fields(InputPlan))


def _part_types() -> list[type[InputPart] | type[TranscriptInput]]:
    """The class of each field of :class:`InputPlan`, in field order (read off its annotations)."""
    hints = get_type_hints(InputPlan)
    return [next(t for t in get_args(hints[f.name]) if t is not type(None)) for f in fields(InputPlan)]


def is_input_mode(mode: str) -> bool:
    """Whether ``mode`` is one :attr:`InputPlan.mode` can give: ``text``, or at most one part per
    field, in field order."""
    if mode == TEXT_MODE:
        return True
    allowed = [t.MODES for t in _part_types()]
    at = 0
    for part in mode.split("+"):
        while at < len(allowed) and part not in allowed[at]:
            at += 1
        if at == len(allowed):
            return False
        at += 1
    return True


def input_modes() -> list[str]:
    """Every input mode, ``text`` first (for messages and docs)."""
    combos: list[list[str]] = [[]]
    for t in _part_types():
        combos = [c + [m] for c in combos for m in t.MODES] + combos
    return [TEXT_MODE] + sorted({"+".join(c) for c in combos if c}, key=lambda m: (m.count("+"), m))
