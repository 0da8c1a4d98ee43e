"""``InputBuilder``: what the model is given for one request, the one part a family overrides.

The transformers path is two parts composed by the adapter (:class:`naru_eval.adapters.hf.base.HFVideoModel`):
this builder (the chat text and the processor call) and the generator
(:mod:`naru_eval.adapters.hf.generator`: one question at a time, or the shared video prefix). A
family that differs from the base overrides hooks of a builder subclass in its own module and
names it on its adapter (``Inputs = MyInputs``); the complete hook table is :data:`HOOKS`
(docs/extending.md's copy is generated from it: ``naru-eval adapters --write docs/extending.md``).

Per request the base builds:

1. the frames: from the one sampler through the frame cache, sized as the family declares
   (``Family.frames``: ``cap``, at most ``max_pixels``; ``processor``, exactly the processor's own
   size for the native frames, :meth:`InputBuilder.processor_size`; ``native``);
2. the chat: the media parts (:meth:`InputBuilder.media`), the transcript where the run gives one
   (interleaved between the video's chunks or as a block), then the prompt, rendered by the
   processor's chat template as text only (``tokenize=False``: nothing in it opens the video);
3. the processor call with exactly those frames, ``do_sample_frames=False`` and a
   ``video_metadata`` entry (fps, total frames, frame numbers), so a model with temporal
   positions or timestamps sees the frames' real times (:meth:`InputBuilder.processor_inputs`);
4. the positions, where the family computes them itself (:meth:`InputBuilder.position_ids`), and
   the answer text of the generated ids (:meth:`InputBuilder.decode`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, TypedDict

from naru_eval.adapters.args import HFArgs
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.chat import TextPart
from naru_eval.adapters.family import CAP, NATIVE, PROCESSOR
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.request import NaruRequest
from naru_eval.core.json_types import JSON, JSONObject
from naru_eval.media.sampler import frames_key

if TYPE_CHECKING:
    import torch

    from naru_eval.adapters.transcript import Rendered
    from naru_eval.media.frame_cache import SamplingParams
    from naru_eval.media.sampler import SampledFrames
    from naru_eval.media.video import VideoInfo


class ChatMediaPart(TypedDict):
    """Where a medium goes in a chat turn (``video``, ``image``, ``audio``: the chat template
    writes the family's tokens for it)."""

    type: str


ChatPart = ChatMediaPart | TextPart


class ChatMessage(TypedDict):
    """One chat turn as the processor's chat template takes it."""

    role: Literal["system", "user"]
    content: list[ChatPart]


class VideoMetadata(TypedDict):
    """transformers ``VideoMetadata`` of the sampled frames (the processor's ``video_metadata``)."""

    total_num_frames: int
    fps: float
    duration: float
    frames_indices: list[int]
    width: int
    height: int


#: the processor call's settings besides text/videos/video_metadata: the base's
#: ``do_sample_frames=False`` (keep exactly the frames given) and ``cap_pixels_per_frame`` (where
#: the video processor takes it), then a family's (:meth:`InputBuilder.family_processor_kwargs`)
ProcessorKwargs = dict[str, bool | int | float | str]


class Hook(NamedTuple):
    """One overridable part of :class:`InputBuilder` and what it gives (docs/extending.md's table)."""

    name: str
    gives: str


#: every part a family may override, methods then settings, the usual ones first; a test checks
#: that these and :data:`MACHINERY` are every public name of :class:`InputBuilder`, and that no
#: family overrides the machinery
HOOKS: tuple[Hook, ...] = (
    Hook("media(request)", 'the chat\'s media parts before the prompt (default: one `{"type": "video"}`)'),
    Hook(
        "processor_inputs(text, sampled, processor)",
        "the processor call for the rendered text and the frames (default: one video, or one per transcript "
        "chunk, with `video_metadata` and `processor_kwargs()`)",
    ),
    Hook(
        "processor_size(info)",
        "the (height, width) the processor itself makes of a native frame (`Family.frames=processor`: the "
        "sampler delivers exactly that size, resized with the processor's arithmetic); None: the native frames",
    ),
    Hook("frame_tokens(sampled, n)", "what `n` frames cost in the context (default: the budget's tokens per frame)"),
    Hook(
        "position_ids(input_ids, inputs)",
        "the positions the family computes itself (`Family.positions`); None: the model's own",
    ),
    Hook("decode(request, new_ids)", "the response text of the generated ids (a reasoning model's answer split)"),
    Hook("description()", 'its part of the run key (`describe()["hf"]`, after the base\'s): every answer-changing arg'),
    Hook("family_processor_kwargs()", "the processor call's own settings (Qwen by rate: `do_resize=False`)"),
    Hook("video_metadata(sampled)", "the frames' timing as the processor takes it"),
    Hook("video_input(sampled)", "the frames as the processor takes them (default: the uint8 N x H x W x 3 array)"),
    Hook("frame_params(video)", "how the frames are sampled and sized (default: `Family.frames`, through `sized`)"),
    Hook("load_kwargs()", "extra `from_pretrained` keyword arguments (config overrides, remote code's switches)"),
    Hook("loaded()", "checks of the loaded checkpoint against its processor, before the first answer"),
    Hook("interleave_group()", "frames one video token covers: a transcript line goes between such groups"),
    Hook("chunks(sampled)", "the video's parts when its transcript is interleaved (default: one item per chunk)"),
    Hook(
        "media_and_transcript(request)",
        "the media and the transcript before the prompt (InternVL: the cue lines inside its one video item)",
    ),
    Hook("interleaves_transcript", "setting: a transcript can go between the frames (`transcript_layout=interleaved`)"),
    Hook("supports_shared_prefix", "setting: the questions of a video can be answered from one prefilled prefix"),
    Hook("adapter_keys", "setting: processor outputs that are the builder's own (kept for positions, not given)"),
    Hook("model_dtype_keys", "setting: outputs besides the pixels that take the model's dtype (audio features)"),
    Hook("resize", "setting: the exact-size resize's arithmetic for `Family.frames=processor` (`float`, `uint8`)"),
    Hook("template_kwargs", "setting (per run): the chat template's variables (`enable_thinking`)"),
    Hook("reasoning_max_new_tokens", "setting (per run): a reasoning family's generation budget"),
)

#: the builder's own machinery: called by the adapter and the generator, built from the hooks,
#: never overridden by a family
MACHINERY = (
    "adapter", "checkpoint", "args", "processor", "model", "sampled", "sized", "processor_kwargs", "messages",
    "chat_text", "build_inputs", "model_inputs", "transcript_view", "transcript_reserve", "interleaved_view",
)  # fmt: skip


def chunk_of(sampled: SampledFrames, r: range, group: int = 1) -> SampledFrames:
    """The frames ``r`` of ``sampled`` (an interleaved transcript's chunk of the video). A last
    chunk shorter than a ``group`` (a temporal patch) repeats its last frame to fill it, as the
    processor pads the whole video's last patch (some refuse a video shorter than a patch)."""
    take = list(r) + [r.stop - 1] * max(0, group - len(r))
    return sampled._replace(
        frames=sampled.frames[take], indices=sampled.indices[take], timestamps=sampled.timestamps[take]
    )


class InputBuilder:
    """The family's part: the chat and the processor inputs of a request (the module docstring).
    A family subclasses it and overrides hooks (:data:`HOOKS`); ``self.adapter`` is its adapter
    (the run's family, args, sampling, input plan, transcripts and soundtrack), ``self.checkpoint``
    the model and processor (loaded on first use)."""

    #: whether a transcript can go between the frames (``transcript_layout=interleaved``): a
    #: family that can (a video item per chunk, or lines inside one item) says so
    interleaves_transcript: ClassVar[bool] = False
    #: whether the questions of a video can be answered from one prefilled prefix
    supports_shared_prefix: ClassVar[bool] = True
    #: keys of the processor's outputs that are the builder's own (e.g. the time positions an omni
    #: family computes its positions from): kept for :meth:`position_ids`, never given to the model
    adapter_keys: ClassVar[tuple[str, ...]] = ()
    #: keys of the processor's outputs besides the pixels that take the model's dtype (an audio
    #: tower's features)
    model_dtype_keys: ClassVar[tuple[str, ...]] = ()
    #: the arithmetic of the exact-size resize of ``Family.frames=processor`` (``media.pixels``)
    resize: ClassVar[str] = "float"

    #: the run's parsed model args (a family with args of its own narrows the type)
    args: HFArgs

    def __init__(self, adapter: NaruModel, checkpoint: Checkpoint) -> None:
        self.adapter = adapter
        self.checkpoint = checkpoint
        assert isinstance(adapter.args, HFArgs), f"{adapter.model_id}: a transformers family's args are HFArgs"
        self.args = adapter.args
        #: extra variables for the chat template (e.g. ``enable_thinking``)
        self.template_kwargs: dict[str, bool] = {}
        #: a reasoning family's generation budget: it replaces the task's ``max_new_tokens``, which
        #: budgets an answer, not the reasoning before it
        self.reasoning_max_new_tokens: int | None = None
        #: a video's frames (``frames_key``) -> its transcript as given (processor_inputs splits an
        #: interleaved video by it)
        self._views: dict[str, Rendered] = {}

    @property
    def processor(self) -> Any:
        return self.checkpoint.processor

    @property
    def model(self) -> Any:
        return self.checkpoint.model

    def sampled(self, request: NaruRequest) -> SampledFrames | None:
        """The request's frames (also for audio only: their times centre the audio windows), or
        None when its plan has neither (a text-only, blind request); an unreadable video fails the
        request for good (:meth:`NaruModel.frames`)."""
        plan = self.adapter.plan_of(request)
        if request.video is None or (plan.frames is None and plan.audio is None):
            return None
        return self.adapter.frames(request)

    # -- hooks ----------------------------------------------------------------------------------
    def media(self, request: NaruRequest) -> list[ChatPart]:
        """The chat's media parts, before the prompt: one video item."""
        return [{"type": "video"}]

    def processor_inputs(self, text: str, sampled: SampledFrames, processor: Any = None) -> Any:
        """The processor's inputs for the text and the video (``processor``: a copy of the
        adapter's, when called from the processor-ahead thread)."""
        chunks = self.chunks(sampled)
        g = self.interleave_group()
        parts = [sampled] if chunks is None else [chunk_of(sampled, r, g) for r in chunks]
        out = (processor or self.processor)(
            text=[text],
            videos=[self.video_input(p) for p in parts],
            video_metadata=[self.video_metadata(p) for p in parts],
            return_tensors="pt",
            **self.processor_kwargs(),
        )
        if chunks is not None and out.get("second_per_grid_ts") is not None:
            # a chunk's metadata gives its own share of the frames; its temporal spacing is the
            # whole video's (the frames-only run's second_per_grid_ts)
            import torch

            n = len(sampled.frames)
            spg = out["second_per_grid_ts"]
            fixed = [float(v) * len(p.indices) / n for v, p in zip(spg, parts, strict=True)]
            out["second_per_grid_ts"] = torch.tensor(fixed, dtype=spg.dtype) if hasattr(spg, "dtype") else fixed
        return out

    def processor_size(self, info: VideoInfo) -> tuple[int, int] | None:
        """(height, width) the processor makes of a native ``info`` frame (``Family.frames=processor``)."""
        raise NotImplementedError(
            f"{type(self).__name__}: Family.frames='processor' needs processor_size() (the processor's own size)"
        )

    def frame_tokens(self, sampled: SampledFrames, n: int) -> int:
        """What ``n`` of the video's frames cost in the context: the family's declared tokens per
        frame (``Family.budget``); a family that knows better from the frames' size overrides it."""
        budget = self.adapter.family.budget
        return int(budget.tokens_per_frame if budget is not None else 0) * int(n)

    def position_ids(self, input_ids: torch.Tensor, inputs: Mapping[str, Any]) -> torch.Tensor | None:
        """The ``position_ids`` of the whole prompt ``input_ids`` (1 x L) when this family computes
        them itself (the Qwen families: ``naru_eval.adapters.hf.positions``), with ``inputs`` the
        processor's other outputs (grids); None: the model's own."""
        return None

    def decode(self, request: NaruRequest, new_ids: list[int]) -> str:
        """The response text of the generated token ids: decoded, cut at the task's stops."""
        text = self.processor.batch_decode([new_ids], skip_special_tokens=True, clean_up_tokenization_spaces=False)[0]
        return cut_at_stops(text.strip(), request.gen_kwargs.get("until"))

    def family_processor_kwargs(self) -> ProcessorKwargs:
        """A family's own processor settings (e.g. Qwen by rate: ``do_resize=False``)."""
        return {}

    def video_metadata(self, sampled: SampledFrames) -> VideoMetadata:
        """transformers VideoMetadata of the sampled frames: with the video's fps, total frames and
        frame numbers, ``sampled_fps`` = N / duration and timestamps = frame / fps."""
        info = sampled.info
        h, w = sampled.frames.shape[1:3]
        return {
            "total_num_frames": int(info.frame_count),
            "fps": float(info.fps),
            "duration": float(info.duration_s),
            "frames_indices": [int(i) for i in sampled.indices],
            "width": int(w),
            "height": int(h),
        }

    def video_input(self, sampled: SampledFrames) -> Any:
        """The frames as the processor takes them: the sampler's uint8 N x H x W x 3 array."""
        return sampled.frames

    def frame_params(self, video: str) -> SamplingParams:
        """The sampling of ``video`` as the frame cache takes it, sized as ``Family.frames`` says."""
        how = self.adapter.family.frames
        assert how is not None  # every transformers family declares it (HFVideoModel.__init_subclass__)
        return self.sized(video, how)

    def sized(self, video: str, how: str) -> SamplingParams:
        """The run's sampling of ``video`` with its frames sized ``how`` (``Family.frames``)."""
        from naru_eval.media.frame_cache import sampling_params
        from naru_eval.media.plan import DEFAULT_MAX_PIXELS

        s = self.adapter.sampling
        if how == PROCESSOR:
            from naru_eval.media.video import probe_video

            size = self.processor_size(probe_video(video, check_end=False))
            if size is not None:
                return sampling_params(
                    num_frames=s.frames, fps=s.fps, max_frames=s.max_frames, size=size, resize=self.resize
                )
            how = NATIVE  # the processor resizes the native frames itself
        if how == NATIVE:
            return sampling_params(num_frames=s.frames, fps=s.fps, max_frames=s.max_frames, max_pixels=None)
        assert how == CAP, how
        return sampling_params(
            num_frames=s.frames,
            fps=s.fps,
            max_frames=s.max_frames,
            max_pixels=s.max_pixels if s.max_pixels is not None else DEFAULT_MAX_PIXELS,
        )

    def description(self) -> JSONObject:
        """What else changes this family's answers (its own args, in a fixed order): the keys the
        run key's ``hf`` part adds after the base's."""
        return {}

    def load_kwargs(self) -> dict[str, Any]:
        """Extra ``from_pretrained`` keyword arguments of a family (config overrides)."""
        return {}

    def interleave_group(self) -> int:
        """How many frames one video token covers (text cannot go inside): 1."""
        return 1

    def loaded(self) -> None:
        """Called once the checkpoint is loaded, before the first answer: a family's checks of
        the model against its processor (a mismatch stops the run with both numbers)."""

    # -- the chat -------------------------------------------------------------------------------
    def processor_kwargs(self) -> ProcessorKwargs:
        kw: ProcessorKwargs = {"do_sample_frames": False}  # keep exactly the frames given
        vp = getattr(self.processor, "video_processor", None)
        valid = getattr(getattr(vp, "valid_kwargs", None), "__annotations__", {})
        if "cap_pixels_per_frame" in valid:
            # qwen-vl-utils' per-frame pixel cap (the reference behaviour); silences the
            # transformers warning about the uncapped default.
            kw["cap_pixels_per_frame"] = self.args.cap_pixels_per_frame
        return {**kw, **self.family_processor_kwargs()}

    def messages(self, request: NaruRequest, with_video: bool = True) -> list[ChatMessage]:
        """The chat: the media and the transcript first (unless text-only), then the prompt text
        (and a system turn)."""
        msgs: list[ChatMessage] = []
        system = self.args.system_prompt
        if system:
            msgs.append({"role": "system", "content": [{"type": "text", "text": system}]})
        content: list[ChatPart] = self.media_and_transcript(request) if with_video else []
        content.append({"type": "text", "text": request.prompt})
        msgs.append({"role": "user", "content": content})
        return msgs

    def chat_text(self, request: NaruRequest, with_video: bool = True) -> str:
        """The rendered chat template (text only: nothing in it opens the video)."""
        return str(
            self.processor.apply_chat_template(
                self.messages(request, with_video=with_video),
                tokenize=False,
                add_generation_prompt=True,
                **self.template_kwargs,
            )
        )

    def build_inputs(self, request: NaruRequest, sampled: SampledFrames | None) -> Any:
        """The processor's inputs for the whole prompt (the per-question path)."""
        plan = self.adapter.plan_of(request)
        given = sampled is not None or (request.video is not None and plan.transcript is not None)
        text = self.chat_text(request, with_video=given)
        if sampled is None:  # blind tasks: the question alone; transcript only: it and the question
            return self.processor(text=[text], return_tensors="pt")
        return self.processor_inputs(text, sampled)

    def model_inputs(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """``batch`` without the builder's own keys (:attr:`adapter_keys`): what the model takes."""
        return {k: v for k, v in batch.items() if k not in self.adapter_keys}

    # -- the transcript (naru_eval.adapters.transcript) -----------------------------------------
    def media_and_transcript(self, request: NaruRequest) -> list[ChatPart]:
        """The chat's parts before the prompt: the media (:meth:`media`), with the transcript
        either between the video's chunks (``interleaved``: a video item per chunk, a text part of
        cue lines between them) or after the media (``block``); the media alone without one."""
        plan = self.adapter.plan_of(request)
        media: list[ChatPart] = []
        if plan.frames is not None or plan.audio is not None:
            media = [*self.media(request)]
        view = self.transcript_view(request) if plan.transcript is not None else None
        if view is None:
            return media
        if view.interleaved:
            out: list[ChatPart] = []
            for piece in view.pieces:
                if isinstance(piece, str):
                    out.append({"type": "text", "text": piece + "\n"})
                else:
                    out.extend(self.media(request))  # one video item per chunk
            return out
        return [*media, {"type": "text", "text": view.block + "\n"}] if view.block else media

    def transcript_view(self, request: NaruRequest) -> Rendered | None:
        """The request's video's transcript as it is given (the same for all its questions),
        fitted beside the frames in the model's context with its own tokenizer."""
        adapter = self.adapter
        if adapter.transcripts is None or request.video is None:
            return None
        sampled = self.sampled(request)
        tok = self.processor.tokenizer

        def count(text: str) -> int:
            return len(tok(text, add_special_tokens=False)["input_ids"])

        if sampled is None:
            times, frame_tokens = None, (lambda n: 0)
        else:
            times = [float(t) for t in sampled.timestamps]
            frame_tokens = lambda n: self.frame_tokens(sampled, n)  # noqa: E731
        budget = self.checkpoint.context_tokens() - self.transcript_reserve()
        view = adapter.render_transcript(request, times, count, frame_tokens, budget, group=self.interleave_group())
        if view is not None and sampled is not None:
            self._views[frames_key(sampled)] = view
        return view

    def transcript_reserve(self) -> int:
        """Tokens the transcript's plan leaves for the prompt and the answer (and the reasoning)."""
        reserve = int(self.args.transcript_reserve_tokens)
        return reserve + int(self.reasoning_max_new_tokens or 0)

    def interleaved_view(self, sampled: SampledFrames) -> Rendered | None:
        """The video's transcript as given, when it goes between the frames (None otherwise)."""
        view = self._views.get(frames_key(sampled)) if self.adapter.transcripts is not None else None
        return view if view is not None and view.interleaved else None

    def chunks(self, sampled: SampledFrames) -> list[range] | None:
        """The video's chunks when its transcript is interleaved (None: one video)."""
        view = self.interleaved_view(sampled)
        return None if view is None else [p for p in view.pieces if isinstance(p, range)]


def cut_at_stops(text: str, until: JSON) -> str:
    """``text`` up to the first of the task's stop strings (``until``: one or a list)."""
    stops = (
        [until]
        if isinstance(until, str)
        else [s for s in until if isinstance(s, str)]
        if isinstance(until, (list, tuple))
        else []
    )
    for s in stops:
        if s and s in text:
            text = text[: text.index(s)]
    return text.strip()
