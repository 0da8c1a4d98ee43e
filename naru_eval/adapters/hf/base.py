"""``HFVideoModel``: the adapter of every open-weight (transformers) family, three parts composed.

A family is one small module (``model_adapters/<family>.py``): an adapter class that declares its
facts (``family = Family(...)``: id, args, default sampling and its official row, budget, the
checkpoint classes by ``model_type``, how its frames are sized, the position layout) and names
its input builder (``Inputs``, where it differs from the base's). Per request the adapter:

1. takes the frames from :meth:`NaruModel.frames` (the one sampler, through the frame cache),
   sized as the family declares (``Family.frames``);
2. asks the family's :class:`naru_eval.adapters.hf.builder.InputBuilder` for the model's inputs
   (the chat, rendered as text, and the processor call with exactly those frames);
3. asks the :class:`naru_eval.adapters.hf.generator.Generator` for the answer: greedy, from the
   whole prompt or from a copy of the video's prefilled prefix, decoded by the builder;

over the :class:`naru_eval.adapters.hf.loading.Checkpoint` (placement, dtype, class, loading),
built on first use. The model's position ids are the family's declared layout
(``Family.positions``, recorded in the provenance and the run key).

Model args are :class:`naru_eval.adapters.args.HFArgs` (or a family's subclass), parsed by the
base with the one parser: ``pretrained`` (hub id or directory), ``device`` (default ``cuda`` when
available, else ``cpu``), ``dtype`` (``auto``: the checkpoint's), ``device_map`` (e.g. ``auto`` to
shard a large checkpoint over the visible GPUs), ``attn_implementation``, ``max_new_tokens``
(else a reasoning family's budget, else the task's, else 16), ``system_prompt``,
``trust_remote_code``, ``revision``, the sampling (``num_frames`` / ``fps`` / ``max_frames`` /
``max_pixels``; unset: the family's official default), the throughput args ``shared_prefix``
(true), ``decode_workers`` (0: decode inline) and ``decode_budget_mb`` (4096), and a family's own
args. Under ``accelerate launch`` (``WORLD_SIZE`` > 1) each process holds a whole copy on
``cuda:{LOCAL_RANK}`` (``device=cpu``: on the CPU; data parallel) and ``device_map`` is ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from naru_eval.adapters.args import HFArgs
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import FRAME_SIZES, TIME_ENCODINGS
from naru_eval.adapters.hf.builder import InputBuilder
from naru_eval.adapters.hf.generator import Generator, out_of_memory
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.hf.positions import SEQUENTIAL
from naru_eval.adapters.request import Answer, NaruRequest

if TYPE_CHECKING:
    import torch

    from naru_eval.media.frame_cache import SamplingParams
    from naru_eval.media.sampler import SampledFrames


class HFDescription(TypedDict):
    """The base's keys of the run key's ``hf`` part (``describe()["hf"]``): what changes a
    family's answers besides the sampling. Nested on purpose: the store drops top-level keys that
    look like secrets, and "max_new_tokens" contains "token". A family's own keys follow these
    (:meth:`InputBuilder.description`), in that order: the run key's JSON is compared byte for byte."""

    pretrained: str
    revision: str | None
    dtype: str
    max_new_tokens: int | None
    system_prompt: str | None
    template_kwargs: dict[str, bool]
    cap_pixels_per_frame: bool
    positions: str


class HFVideoModel(NaruModel):
    """The transformers families' adapter; a family declares ``family`` and, where it differs,
    its ``Inputs`` (an :class:`InputBuilder` subclass) or ``Generate``."""

    model_id = "naru_hf"
    #: the family's input builder (the one part a family overrides)
    Inputs: ClassVar[type[InputBuilder]] = InputBuilder
    #: how answers are generated (a family with a chat interface of its own replaces it)
    Generate: ClassVar[type[Generator]] = Generator

    #: this adapter's model args (``family.args``): a family with args of its own declares a
    #: subclass of ``HFArgs`` with them as fields and reads them from ``self.args``
    Args: ClassVar[type[HFArgs]] = HFArgs
    #: the parsed model args (an instance of ``Args``)
    args: HFArgs

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("family")
        if declared is None:
            return
        missing = [
            what
            for what, ok in (
                ("its default sampling, the official row's (Family.default)", declared.default is not None),
                ("the checkpoint classes it loads (Family.checkpoints)", bool(declared.checkpoints)),
                (f"how its frames are sized (Family.frames: one of {list(FRAME_SIZES)})", declared.frames is not None),
                ("its position layout (Family.positions)", declared.positions is not None),
                (
                    f"how its model is told the frames' times (Family.times: one of {list(TIME_ENCODINGS)})",
                    declared.times is not None,
                ),
            )
            if not ok
        ]
        if missing:
            raise TypeError(f"{cls.__name__}: a transformers family declares " + "; ".join(missing))

    def __init__(self, **model_args: object) -> None:
        super().__init__(**model_args)
        args = self.args
        self.decode_workers = args.decode_workers
        self.decode_budget_bytes = args.decode_budget_mb << 20
        self.checkpoint = Checkpoint(self.model_id, args, self.family.checkpoints, lambda: self.builder.load_kwargs())
        self.builder = self.Inputs(self, self.checkpoint)
        where = self.checkpoint.placement
        if where.accelerator is not None:  # accelerate launch: lmms-eval's rank and world size
            self.accelerator = where.accelerator
            self._rank, self._world_size = where.rank, where.world_size
        self.generator = self.Generate(self, self.builder, self.checkpoint)

    # -- the checkpoint (naru_eval.adapters.hf.loading) -----------------------------------------
    @property
    def model(self) -> Any:
        return self.checkpoint.model

    @model.setter
    def model(self, value: Any) -> None:
        self.checkpoint.model = value

    @property
    def processor(self) -> Any:
        return self.checkpoint.processor

    @processor.setter
    def processor(self, value: Any) -> None:
        self.checkpoint.processor = value

    @property
    def device(self) -> torch.device:
        return self.checkpoint.device

    def ensure_loaded(self) -> None:
        """Load the checkpoint on first use, then let the family check it (:meth:`InputBuilder.loaded`)."""
        if self.checkpoint.model is None:
            self.checkpoint.load()
            self.builder.loaded()

    def ensure_processor(self) -> Any:
        return self.checkpoint.ensure_processor()

    def context_tokens(self) -> int:
        """The language model's context (its config's ``max_position_embeddings``)."""
        return self.checkpoint.context_tokens()

    # -- the run key and the provenance -----------------------------------------------------------
    @property
    def positions_layout(self) -> str:
        """The position layout the model is given (``Family.positions``; provenance and run key)."""
        return self.family.positions or SEQUENTIAL

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "hf": self.hf_description()}

    def hf_description(self) -> dict[str, Any]:
        """The run key's ``hf`` part: the base's keys (:class:`HFDescription`), then the family's."""
        args = self.args
        base: HFDescription = {
            "pretrained": args.pretrained,
            "revision": args.revision,
            "dtype": args.dtype,
            "max_new_tokens": args.max_new_tokens,
            "system_prompt": args.system_prompt,
            "template_kwargs": dict(self.builder.template_kwargs),
            "cap_pixels_per_frame": args.cap_pixels_per_frame,
            # a new layout is a new run: answers given with other positions are never reused
            "positions": self.positions_layout,
        }
        return {**base, **self.builder.description()}

    def provenance(self) -> dict[str, str | None]:
        return {**super().provenance(), "positions": self.positions_layout}

    def can_interleave_transcript(self) -> bool:
        return self.Inputs.interleaves_transcript

    # -- a run --------------------------------------------------------------------------------
    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Load before the first answer when there is work (a bad checkpoint fails up front);
        a run served entirely from the response store never loads the model."""
        if requests:
            self.ensure_loaded()
        self.generator.prepare(requests)

    def finish(self) -> None:
        self.generator.finish()

    def frame_params(self, video: str) -> SamplingParams:
        return self.builder.frame_params(video)

    def sampled(self, request: NaruRequest) -> SampledFrames | None:
        """The request's frames as the builder takes them (:meth:`InputBuilder.sampled`)."""
        return self.builder.sampled(request)

    def frame_tokens_of(self, sampled: SampledFrames) -> int:
        """What all of ``sampled``'s frames cost (the soundtrack's plan is made beside them)."""
        return self.builder.frame_tokens(sampled, len(sampled.frames))

    def respond(self, request: NaruRequest) -> Answer:
        sampled = self.sampled(request)  # an unreadable video fails before any loading
        self.ensure_loaded()
        try:
            return self.generator.answer(request, sampled)
        except Exception as e:  # out of GPU memory fails this request, not the run
            failed = out_of_memory(e, sampled)
            if failed is None:
                raise
            self.checkpoint.empty_cache()
            raise failed from None
