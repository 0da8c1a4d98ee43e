"""``HFVideoModel``: the transformers machinery every open-weight family shares.

A family is one small module (``model_adapters/<family>.py``) that declares its facts
(``family = Family(...)``: id, args, default sampling and its official row, budget, the
checkpoint classes by ``model_type``, the position layout) and, where it differs, overrides a
hook: the chat's media parts (:meth:`HFVideoModel.chat_media`), the processor's settings
(:meth:`HFVideoModel.family_processor_kwargs`), its part of the run key
(:meth:`HFVideoModel.family_description`), loading, decoding. Per request the base:

1. takes the frames from :meth:`NaruModel.frames` (the one sampler, through the frame cache):
   a uint8 ``N x H x W x 3`` array, with the frame numbers, timestamps and the video's fps;
2. builds the chat (the media first, then the prompt text) and renders the processor's chat
   template as text only (``tokenize=False``: nothing in the template opens the video);
3. calls the processor with those exact frames, ``do_sample_frames=False`` and a
   ``video_metadata`` entry (fps, total frames, frame numbers) so models with temporal position
   ids or timestamps (Qwen2.5-VL, Qwen3-VL, Qwen3.5) see the real sampling rate, N / duration;
4. generates greedily (``do_sample=False``, never a temperature) and decodes only the new tokens.

Its parts live one concern per module: where the checkpoint goes and how it is loaded
(:mod:`naru_eval.adapters.hf.loading`, :class:`HFCheckpointModel`), and the shared video prefix
(:mod:`naru_eval.adapters.hf.prefix`: the questions of one video are answered from a copy of one
prefilled prefix, :meth:`SharedPrefixMixin.generate_shared`; ``shared_prefix=false`` turns it off,
docs/adapters.md says where it falls back and why; with ``decode_workers`` the processor runs one
video ahead in a thread, :class:`naru_eval.adapters.hf.prefix.ProcessorAhead`). This module holds
the prompt, the processor inputs, the generation settings and the per-question answer.

The model's position ids are the family's declared layout (``Family.positions``, recorded in the
provenance and the run key): the Qwen families compute Qwen's reference M-RoPE positions
themselves (:mod:`naru_eval.adapters.hf.positions`) and pass them in both paths, so neither path
nor the installed transformers changes them.

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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

from naru_eval.adapters.args import HFArgs
from naru_eval.adapters.base import Answer, NaruRequest, RequestFailed
from naru_eval.adapters.chat import TextPart
from naru_eval.adapters.hf.loading import HFCheckpointModel
from naru_eval.adapters.hf.positions import SEQUENTIAL
from naru_eval.adapters.hf.prefix import PrefillStats, Prefix, ProcessorAhead, SharedPrefixMixin, new_prefill_stats
from naru_eval.settings import parse_flag

if TYPE_CHECKING:
    from naru_eval.adapters.transcript import Rendered
    from naru_eval.media.sampler import SampledFrames


def chunk_of(sampled: SampledFrames, r: range, group: int = 1) -> SampledFrames:
    """The frames ``r`` of ``sampled`` (an interleaved transcript's chunk of the video). A last
    chunk shorter than a ``group`` (a temporal patch) repeats its last frame to fill it, as the
    processor pads the whole video's last patch (some refuse a video shorter than a patch)."""
    take = list(r) + [r.stop - 1] * max(0, group - len(r))
    return sampled._replace(
        frames=sampled.frames[take], indices=sampled.indices[take], timestamps=sampled.timestamps[take]
    )


#: max_new_tokens when neither the model args nor the task's generation_kwargs give one
DEFAULT_MAX_NEW_TOKENS = 16


class ChatMediaPart(TypedDict):
    """Where a medium goes in a chat turn (``video``, ``image``, ...: the chat template writes
    the family's tokens for it)."""

    type: str


class ChatMessage(TypedDict):
    """One chat turn as the processor's chat template takes it."""

    role: Literal["system", "user"]
    content: list[ChatMediaPart | TextPart]


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
#: the video processor takes it), then a family's (:meth:`HFVideoModel.family_processor_kwargs`)
ProcessorKwargs = dict[str, Any]


class GenerationKwargs(TypedDict, total=False):
    """What ``model.generate`` is given besides the inputs: greedy unless the task samples."""

    max_new_tokens: int
    do_sample: bool
    num_beams: int
    temperature: float
    top_p: float
    top_k: int
    pad_token_id: int


class HFDescription(TypedDict):
    """The base's keys of the run key's ``hf`` part (``describe()["hf"]``): what changes a
    family's answers besides the sampling. Nested on purpose: the store drops top-level keys that
    look like secrets, and "max_new_tokens" contains "token". A family's own keys follow these
    (:meth:`HFVideoModel.family_description`), in that order: the run key's JSON is compared byte
    for byte."""

    pretrained: str
    revision: str | None
    dtype: str
    max_new_tokens: int | None
    system_prompt: str | None
    template_kwargs: dict[str, bool]
    cap_pixels_per_frame: bool
    positions: str


def _gen_flag(value: Any) -> bool:
    """A generation kwarg flag (``do_sample``): strings through ``parse_flag``."""
    return parse_flag(value, "do_sample") if isinstance(value, str) else bool(value)


def _gen_int(value: Any) -> int | None:
    return None if value in (None, "", "none", "None") else int(value)


class HFVideoModel(SharedPrefixMixin, HFCheckpointModel):
    """Base of the transformers families; a family declares ``family`` and overrides hooks."""

    model_id = "naru_hf"
    #: extra variables for the chat template (e.g. enable_thinking; a family may set it per instance)
    template_kwargs: Mapping[str, bool] = {}
    #: a reasoning family's generation budget (set per instance when its reasoning is on): it
    #: replaces the task's max_new_tokens, which budgets an answer, not the reasoning before it
    reasoning_max_new_tokens: int | None = None
    #: whether this family can answer from a copy of the prefilled video prefix (docs/adapters.md)
    supports_shared_prefix: ClassVar[bool] = True
    #: keys of the processor step's outputs that are the adapter's own (e.g. the time positions
    #: an omni family computes its positions from): kept for :meth:`position_ids`, never given
    #: to the model (:meth:`model_inputs`)
    adapter_keys: ClassVar[tuple[str, ...]] = ()

    #: this adapter's model args (``family.args``): a family with args of its own declares a
    #: subclass of ``HFArgs`` with them as fields and reads them from ``self.args``
    Args: ClassVar[type[HFArgs]] = HFArgs
    #: the parsed model args (an instance of ``Args``)
    args: HFArgs

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("family")
        if declared is not None and (declared.default is None or not declared.checkpoints):
            raise TypeError(
                f"{cls.__name__}: an HF family declares its default sampling (the official row's) and the "
                "checkpoint classes it loads (Family.default, Family.checkpoints)"
            )

    def __init__(self, **model_args: Any) -> None:
        super().__init__(**model_args)
        args = self.args
        self.max_new_tokens = args.max_new_tokens
        self.system_prompt = args.system_prompt
        self.cap_pixels_per_frame = args.cap_pixels_per_frame
        # throughput: the shared video prefix and decode-ahead
        self.shared_prefix = args.shared_prefix and self.supports_shared_prefix
        self.decode_workers = args.decode_workers
        self.decode_budget_bytes = args.decode_budget_mb << 20
        #: the prefilled shared prefix of the video being answered (one video at a time)
        self._prefix: Prefix | None = None
        #: the vision-encoder + prefix prefills, the tokens prefilled, the processor's waits
        self.prefill_stats: PrefillStats = new_prefill_stats()
        #: the model's wait for the processor, per prefix (video) in answer order (benchmarks)
        self.processor_waits: list[float] = []
        #: with decode_workers: run the processor for the next video ahead, in a thread
        self.processor_ahead = True
        #: video -> its transcript as given (run_processor splits an interleaved video by it)
        self._views: dict[str, Rendered] = {}
        self._ahead: ProcessorAhead | None = None

    @property
    def positions_layout(self) -> str:
        """The position layout the model is given (``Family.positions``; provenance and run key)."""
        return self.family.positions or SEQUENTIAL

    # -- the run key --------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "hf": self.hf_description()}

    def hf_description(self) -> dict[str, Any]:
        """The run key's ``hf`` part: the base's keys (:class:`HFDescription`), then the family's."""
        base: HFDescription = {
            "pretrained": self.pretrained,
            "revision": self.revision,
            "dtype": self.dtype_name,
            "max_new_tokens": self.max_new_tokens,
            "system_prompt": self.system_prompt,
            "template_kwargs": dict(self.template_kwargs),
            "cap_pixels_per_frame": self.cap_pixels_per_frame,
            # a new layout is a new run: answers given with other positions are never reused
            "positions": self.positions_layout,
        }
        return {**base, **self.family_description()}

    def family_description(self) -> dict[str, Any]:
        """What else changes this family's answers (its own args, in a fixed order): the keys
        the run key's ``hf`` part adds after the base's."""
        return {}

    def provenance(self) -> dict[str, str | None]:
        return {**super().provenance(), "positions": self.positions_layout}

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Load before the first answer when there is work (a bad checkpoint fails up front);
        a run served entirely from the response store never loads the model. With decode-ahead
        and the shared prefix, the processor then runs one video ahead (:class:`ProcessorAhead`)."""
        if requests:
            self.ensure_loaded()
        self.close_processor_ahead()
        if requests and self.decode_workers > 0 and self.shared_prefix and self.processor_ahead:
            self.start_processor_ahead(requests)

    def finish(self) -> None:
        self.release_prefix()
        self.close_processor_ahead()

    # -- per-request hooks (families override what differs) ---------------------------------
    def sampled(self, request: NaruRequest) -> SampledFrames | None:
        """The request's frames, or None when its plan has none (a text-only, blind request);
        an unreadable video fails the request for good (:meth:`NaruModel.frames`)."""
        if request.video is None or self.plan_of(request).frames is None:
            return None
        return self.frames(request)

    def chat_media(self, request: NaruRequest) -> list[ChatMediaPart | TextPart]:
        """The chat's media parts, before the prompt: one video item (an omni family adds its
        audio here, and the labels it gives them)."""
        return [{"type": "video"}]

    def messages(self, request: NaruRequest, with_video: bool = True) -> list[ChatMessage]:
        """The chat: the media and the transcript first (unless text-only), then the prompt text
        (and a system turn)."""
        msgs: list[ChatMessage] = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": [{"type": "text", "text": self.system_prompt}]})
        content: list[ChatMediaPart | TextPart] = self.media_and_transcript(request) if with_video else []
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

    # -- the transcript (naru_eval.adapters.transcript) -----------------------------------------
    def media_and_transcript(self, request: NaruRequest) -> list[ChatMediaPart | TextPart]:
        """The chat's parts before the prompt: the media (:meth:`chat_media`), with the transcript
        either between the video's chunks (``interleaved``: a video item per chunk, a text part
        of cue lines between them) or after the media (``block``); the media alone without one."""
        plan = self.plan_of(request)
        media: list[ChatMediaPart | TextPart] = []
        if plan.frames is not None or plan.audio is not None:
            media = [*self.chat_media(request)]
        view = self.transcript_view(request) if plan.transcript is not None else None
        if view is None:
            return media
        if view.interleaved:
            out: list[ChatMediaPart | TextPart] = []
            for piece in view.pieces:
                if isinstance(piece, str):
                    out.append({"type": "text", "text": piece + "\n"})
                else:
                    out.extend(self.chat_media(request))  # one video item per chunk
            return out
        return [*media, {"type": "text", "text": view.block + "\n"}] if view.block else media

    def transcript_view(self, request: NaruRequest) -> Rendered | None:
        """The request's video's transcript as it is given (the same for all its questions),
        fitted beside the frames in the model's context with its own tokenizer."""
        if self.transcripts is None or request.video is None:
            return None
        sampled = self.sampled(request)
        tok = self.processor.tokenizer

        def count(text: str) -> int:
            return len(tok(text, add_special_tokens=False)["input_ids"])

        if sampled is None:
            times, frame_tokens = None, (lambda n: 0)
        else:
            times = [float(t) for t in sampled.timestamps]
            frame_tokens = lambda n: self.transcript_frame_tokens(sampled, n)  # noqa: E731
        budget = self.context_tokens() - self.transcript_reserve()
        view = self.render_transcript(request, times, count, frame_tokens, budget, group=self.interleave_group())
        if view is not None and sampled is not None:
            self._views[sampled.info.path] = view
        return view

    def context_tokens(self) -> int:
        """The language model's context (its config's ``max_position_embeddings``)."""
        config = self.model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        return int(text.max_position_embeddings)

    def transcript_reserve(self) -> int:
        """Tokens the transcript's plan leaves for the prompt and the answer (and the reasoning)."""
        return int(getattr(self.args, "transcript_reserve_tokens", 0)) + int(self.reasoning_max_new_tokens or 0)

    def transcript_frame_tokens(self, sampled: SampledFrames, n: int) -> int:
        """What ``n`` of the video's frames cost in the context: the family's declared tokens per
        frame (``Family.budget``); a family that knows better from the frames' size overrides it."""
        per = self.family.budget.tokens_per_frame if self.family.budget is not None else 0
        return int(per) * int(n)

    def interleave_group(self) -> int:
        """How many frames one video token covers (text cannot go inside): 1."""
        return 1

    def interleaved_view(self, sampled: SampledFrames) -> Rendered | None:
        """The video's transcript as given, when it goes between the frames (None otherwise)."""
        view = self._views.get(sampled.info.path) if self.transcripts is not None else None
        return view if view is not None and view.interleaved else None

    def chunks(self, sampled: SampledFrames) -> list[range] | None:
        """The video's chunks when its transcript is interleaved (None: one video)."""
        view = self.interleaved_view(sampled)
        return None if view is None else [p for p in view.pieces if isinstance(p, range)]

    def video_input(self, sampled: SampledFrames) -> Any:
        """The frames as the processor takes them: the sampler's uint8 N x H x W x 3 array."""
        return sampled.frames

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

    def processor_kwargs(self) -> ProcessorKwargs:
        kw: ProcessorKwargs = {"do_sample_frames": False}  # keep exactly the frames given
        vp = getattr(self.processor, "video_processor", None)
        valid = getattr(getattr(vp, "valid_kwargs", None), "__annotations__", {})
        if "cap_pixels_per_frame" in valid:
            # qwen-vl-utils' per-frame pixel cap (the reference behaviour); silences the
            # transformers warning about the uncapped default.
            kw["cap_pixels_per_frame"] = self.cap_pixels_per_frame
        return {**kw, **self.family_processor_kwargs()}

    def family_processor_kwargs(self) -> ProcessorKwargs:
        """A family's own processor settings (e.g. Qwen by rate: ``do_resize=False``)."""
        return {}

    def run_processor(self, text: str, sampled: SampledFrames, processor: Any = None) -> Any:
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

    def build_inputs(self, request: NaruRequest, sampled: SampledFrames | None) -> Any:
        """The processor's inputs for the whole prompt (the per-question path)."""
        given = sampled is not None or (request.video is not None and self.plan_of(request).transcript is not None)
        text = self.chat_text(request, with_video=given)
        if sampled is None:  # blind tasks: the question alone; transcript only: it and the question
            return self.processor(text=[text], return_tensors="pt")
        return self.run_processor(text, sampled)

    def model_inputs(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """``batch`` without the adapter's own keys (:attr:`adapter_keys`): what the model takes."""
        return {k: v for k, v in batch.items() if k not in self.adapter_keys}

    def position_ids(self, input_ids: Any, inputs: Mapping[str, Any]) -> Any | None:
        """The ``position_ids`` of the whole prompt ``input_ids`` (1 x L) when this family computes
        them itself (the Qwen families: ``naru_eval.adapters.hf.positions``), with ``inputs`` the
        processor's other outputs (grids); None: the model's own (one per token)."""
        return None

    def generation_kwargs(self, request: NaruRequest) -> GenerationKwargs:
        """Greedy by default: do_sample=False and no temperature/top_p/top_k."""
        gk = request.gen_kwargs
        max_new = (
            self.max_new_tokens
            or self.reasoning_max_new_tokens
            or _gen_int(gk.get("max_new_tokens"))
            or DEFAULT_MAX_NEW_TOKENS
        )
        temperature = float(gk.get("temperature") or 0.0)
        sample = _gen_flag(gk.get("do_sample", False)) and temperature > 0
        out: GenerationKwargs = {"max_new_tokens": int(max_new), "do_sample": sample}
        num_beams = _gen_int(gk.get("num_beams"))
        if num_beams and num_beams > 1:
            out["num_beams"] = num_beams
        if sample:
            out["temperature"] = temperature
            # the task's values as given (generate checks them)
            if gk.get("top_p") is not None:
                out["top_p"] = gk["top_p"]
            if gk.get("top_k") is not None:
                out["top_k"] = gk["top_k"]
        return out

    def _final_generation_kwargs(self, request: NaruRequest) -> GenerationKwargs:
        # Generation arguments override the checkpoint's generation_config (some ship sampling
        # defaults; with do_sample=False transformers ignores their temperature/top_p/top_k).
        gen = self.generation_kwargs(request)
        tok = getattr(self.processor, "tokenizer", None)
        if getattr(self.model.generation_config, "pad_token_id", None) is None and tok is not None:
            if tok.pad_token_id is not None:
                gen["pad_token_id"] = tok.pad_token_id
        return gen

    # -- the answer ---------------------------------------------------------------------------
    def respond(self, request: NaruRequest) -> Answer:
        sampled = self.sampled(request)  # an unreadable video fails before any loading
        self.ensure_loaded()
        try:
            return self.generate(request, sampled)
        except Exception as e:  # out of GPU memory fails this request, not the run
            if type(e).__name__ == "OutOfMemoryError":
                self._empty_cache()
                n = len(sampled.frames) if sampled is not None else 0
                raise RequestFailed(f"out of memory with {n} frames: {e}") from None
            raise

    def generate(self, request: NaruRequest, sampled: SampledFrames | None) -> Answer:
        """One answer: from a copy of the video's prefilled prefix when the family, the prompt and
        the decoding allow it (:meth:`split_prompt`), else from the whole prompt."""
        import torch

        gen = self._final_generation_kwargs(request)
        split = self.split_prompt(request) if sampled is not None and self.shared_prefix else None
        if split is not None and sampled is not None and gen.get("num_beams", 1) == 1:
            return self.generate_shared(request, sampled, split, gen)
        batch = self._to_device(self.build_inputs(request, sampled))
        n_in = int(batch["input_ids"].shape[1])
        pos = self.position_ids(batch["input_ids"], batch)
        if pos is not None:
            batch["position_ids"] = pos
        with torch.inference_mode():
            out = self.model.generate(**self.model_inputs(batch), **gen)
        new = out[0, n_in:]
        self.prefill_stats["questions"] += 1
        self.prefill_stats["prefill_tokens"] += n_in
        if sampled is not None:
            self.prefill_stats["prefix_prefills"] += 1
        frames = int(len(sampled.frames)) if sampled is not None else 0
        usage = {"input_tokens": n_in, "output_tokens": int(new.shape[0]), "frames": frames}
        return Answer(self.decode(request, [int(t) for t in new]), usage)

    def decode(self, request: NaruRequest, new_ids: list[int]) -> str:
        """The response text of the generated token ids: decoded, cut at the task's stops."""
        text = self.processor.batch_decode([new_ids], skip_special_tokens=True, clean_up_tokenization_spaces=False)[0]
        return self.cut_at_stops(text.strip(), request.gen_kwargs.get("until"))

    @staticmethod
    def cut_at_stops(text: str, until: Any) -> str:
        stops = [until] if isinstance(until, str) else list(until or [])
        for s in stops:
            if s and s in text:
                text = text[: text.index(s)]
        return text.strip()
