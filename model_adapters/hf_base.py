"""``HFVideoModel``: the transformers machinery every open-weight family shares.

A family is a small subclass that names its model classes and, where it differs, how the video
enters the chat and the processor. Per request the base:

1. takes the frames from :meth:`NaruModel.frames` (the one sampler, through the frame cache):
   a uint8 ``N x H x W x 3`` array, with the frame numbers, timestamps and the video's fps;
2. builds the chat (the video first, then the prompt text) and renders the processor's chat
   template as text only (``tokenize=False``: nothing in the template opens the video);
3. calls the processor with those exact frames, ``do_sample_frames=False`` and a
   ``video_metadata`` entry (fps, total frames, frame numbers) so models with temporal position
   ids or timestamps (Qwen2.5-VL, Qwen3-VL, Qwen3.5) see the real sampling rate, N / duration;
4. generates greedily (``do_sample=False``, never a temperature) and decodes only the new tokens.

Its parts live one concern per module: where the checkpoint goes and how it is loaded
(:mod:`model_adapters.hf_loading`, :class:`HFCheckpointModel`), and the shared video prefix
(:mod:`model_adapters.hf_prefix`: the questions of one video are answered from a copy of one
prefilled prefix, :meth:`SharedPrefixMixin.generate_shared`; ``shared_prefix=false`` turns it off,
docs/adapters.md says where it falls back and why; with ``decode_workers`` the processor runs one
video ahead in a thread, :class:`model_adapters.hf_prefix.ProcessorAhead`). This module holds the
prompt, the processor inputs, the generation settings and the per-question answer.

The model's position ids are the family's declared layout (``positions_layout``, recorded in the
provenance and the run key): the Qwen families compute Qwen's reference M-RoPE positions
themselves (:mod:`model_adapters.positions`) and pass them in both paths, so neither path nor the
installed transformers changes them.

Model args (strings from ``--model_args``) are :class:`model_adapters.args.HFArgs`, parsed by
``parse_model_args`` (an unknown arg is refused, listing the valid ones): ``pretrained`` (hub id
or directory), ``device`` (default ``cuda`` when available, else ``cpu``), ``dtype`` (``auto``:
the checkpoint's), ``device_map`` (e.g. ``auto`` to shard a large checkpoint over the visible
GPUs), ``attn_implementation``, ``max_new_tokens`` (else a reasoning family's budget, else the
task's, else 16), ``system_prompt``, ``trust_remote_code``, ``revision``, plus the base's
``num_frames`` / ``fps`` / ``max_frames`` / ``max_pixels`` (their default: the model's official
setting, ``naru_eval.core.budgets.default_sampling``) the throughput args ``shared_prefix`` (true), ``decode_workers`` (0: decode inline) and
``decode_budget_mb`` (4096), and a family's own args. Under ``accelerate launch`` (``WORLD_SIZE`` > 1) each process holds a whole copy
on ``cuda:{LOCAL_RANK}`` (``device=cpu``: on the CPU; data parallel) and ``device_map`` is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

from model_adapters.args import HFArgs, parse_model_args
from model_adapters.base import Answer, NaruRequest, RequestFailed, _as_bool, _opt_int
from model_adapters.hf_loading import HFCheckpointModel
from model_adapters.hf_prefix import PrefillStats, Prefix, ProcessorAhead, SharedPrefixMixin, new_prefill_stats
from model_adapters.positions import SEQUENTIAL
from naru_eval.core.budgets import resolve_sampling

if TYPE_CHECKING:
    from naru_eval.media.sampler import SampledFrames

#: max_new_tokens when neither the model args nor the task's generation_kwargs give one
DEFAULT_MAX_NEW_TOKENS = 16


class VideoPart(TypedDict):
    """Where the video goes in a chat turn (the chat template writes the family's video tokens)."""

    type: Literal["video"]


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ChatMessage(TypedDict):
    """One chat turn as the processor's chat template takes it."""

    role: Literal["system", "user"]
    content: list[VideoPart | TextPart]


class VideoMetadata(TypedDict):
    """transformers ``VideoMetadata`` of the sampled frames (the processor's ``video_metadata``)."""

    total_num_frames: int
    fps: float
    duration: float
    frames_indices: list[int]
    width: int
    height: int


class ProcessorKwargs(TypedDict, total=False):
    """The processor call's settings besides text/videos/video_metadata."""

    do_sample_frames: bool  # False: keep exactly the frames given
    cap_pixels_per_frame: bool  # qwen-vl-utils' per-frame pixel cap
    do_resize: bool  # False: the frames already have the size the model takes (Qwen by rate)


class GenerationKwargs(TypedDict, total=False):
    """What ``model.generate`` is given besides the inputs: greedy unless the task samples."""

    max_new_tokens: int
    do_sample: bool
    num_beams: int
    temperature: float
    top_p: float
    top_k: int
    pad_token_id: int


class HFDescription(TypedDict, total=False):
    """The run key's ``hf`` part (``describe()["hf"]``): what changes a family's answers besides
    the base's sampling. Nested on purpose: the store drops top-level keys that look like
    secrets, and "max_new_tokens" contains "token". A family adds its own keys (the ones below
    the base's), in this order: the run key's JSON is compared byte for byte."""

    pretrained: str
    revision: str | None
    dtype: str
    max_new_tokens: int | None
    system_prompt: str | None
    template_kwargs: dict[str, bool]
    cap_pixels_per_frame: bool
    positions: str
    # Qwen (sampling by rate): qwen-vl-utils' sizing
    qwen_vl_utils_sizing: QwenSizing
    # Nemotron-Omni
    video_pruning_rate: float | None
    reasoning_budget: int | None
    # MiniCPM-o
    max_slice_nums: int
    use_image_id: bool
    native_decoding: bool


class QwenSizing(TypedDict):
    patch_size: int
    min_frames: int | None
    model_seq_len: int


class HFVideoModel(SharedPrefixMixin, HFCheckpointModel):
    """Base of the transformers families; subclasses set the class attributes below."""

    model_id = "naru_hf"
    #: key of naru_eval.core.budgets.FRAME_BUDGETS
    family: ClassVar[str] = ""
    #: extra keyword arguments for the processor call (besides text/videos/video_metadata)
    video_kwargs: ClassVar[ProcessorKwargs] = {"do_sample_frames": False}
    #: extra variables for the chat template (e.g. enable_thinking; a family may set it per instance)
    template_kwargs: Mapping[str, bool] = {}
    #: the sampling comes from naru_eval.core.budgets.default_sampling (the official leaderboard's)
    default_num_frames = None
    #: a reasoning family's generation budget (set per instance when its reasoning is on): it
    #: replaces the task's max_new_tokens, which budgets an answer, not the reasoning before it
    reasoning_max_new_tokens: int | None = None
    #: whether this family can answer from a copy of the prefilled video prefix (docs/adapters.md)
    supports_shared_prefix: ClassVar[bool] = True
    #: the position layout the model is given (``model_adapters.positions``; provenance and run key)
    positions_layout: ClassVar[str] = SEQUENTIAL

    #: this adapter's model args (``model_adapters.args``); a family with args of its own declares
    #: ``class Args(HFArgs)`` with them as fields and reads them from ``self.args``
    Args: ClassVar[type[HFArgs]] = HFArgs
    #: the parsed model args (an instance of ``Args``)
    args: HFArgs

    def __init__(self, **model_args: Any) -> None:
        args = parse_model_args(self.Args, model_args, self.model_id)
        self.args = args
        base = args.base_kwargs()
        # unset: the official leaderboard's setting for this model (one place: budgets.py)
        base["num_frames"], base["fps"] = resolve_sampling(self.model_id, args.num_frames, args.fps, args.pretrained)
        super().__init__(args, **base)
        self.max_new_tokens = args.max_new_tokens
        self.system_prompt = args.system_prompt
        self.cap_pixels_per_frame = args.cap_pixels_per_frame
        # --- issue 14 (throughput) model args: the shared video prefix and decode-ahead ---
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
        self._ahead: ProcessorAhead | None = None

    # -- the run key --------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "hf": self.hf_description()}

    def hf_description(self) -> HFDescription:
        """The run key's ``hf`` part; a family extends it (:class:`HFDescription`)."""
        return {
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
        """The request's frames, or None for a text-only (blind) request; an unreadable video
        fails the request for good."""
        from naru_eval.media.video import VideoError

        if request.video is None:
            return None
        try:
            s = self.frames(request)
        except VideoError as e:
            raise RequestFailed(f"video: {e}") from None
        if len(s.frames) == 0:
            raise RequestFailed(f"video {request.video}: no frames sampled")
        return s

    def messages(self, request: NaruRequest, with_video: bool = True) -> list[ChatMessage]:
        """The chat: the video first (unless text-only), then the prompt text (and a system turn)."""
        msgs: list[ChatMessage] = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": [{"type": "text", "text": self.system_prompt}]})
        content: list[VideoPart | TextPart] = [{"type": "video"}] if with_video else []
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
        kw = self.video_kwargs.copy()
        vp = getattr(self.processor, "video_processor", None)
        valid = getattr(getattr(vp, "valid_kwargs", None), "__annotations__", {})
        if "cap_pixels_per_frame" in valid:
            # qwen-vl-utils' per-frame pixel cap (the reference behaviour); silences the
            # transformers warning about the uncapped default.
            kw["cap_pixels_per_frame"] = self.cap_pixels_per_frame
        return kw

    def run_processor(self, text: str, sampled: SampledFrames, processor: Any = None) -> Any:
        """The processor's inputs for the text and the video (``processor``: a copy of the
        adapter's, when called from the processor-ahead thread)."""
        return (processor or self.processor)(
            text=[text],
            videos=[self.video_input(sampled)],
            video_metadata=[self.video_metadata(sampled)],
            return_tensors="pt",
            **self.processor_kwargs(),
        )

    def build_inputs(self, request: NaruRequest, sampled: SampledFrames | None) -> Any:
        """The processor's inputs for the whole prompt (the per-question path)."""
        text = self.chat_text(request, with_video=sampled is not None)
        if sampled is None:  # blind tasks: the question alone
            return self.processor(text=[text], return_tensors="pt")
        return self.run_processor(text, sampled)

    def position_ids(self, input_ids: Any, inputs: Mapping[str, Any]) -> Any | None:
        """The ``position_ids`` of the whole prompt ``input_ids`` (1 x L) when this family computes
        them itself (the Qwen families: ``model_adapters.positions``), with ``inputs`` the
        processor's other outputs (grids); None: the model's own (one per token)."""
        return None

    def generation_kwargs(self, request: NaruRequest) -> GenerationKwargs:
        """Greedy by default: do_sample=False and no temperature/top_p/top_k."""
        gk = request.gen_kwargs
        max_new = (
            self.max_new_tokens
            or self.reasoning_max_new_tokens
            or _opt_int(gk.get("max_new_tokens"))
            or DEFAULT_MAX_NEW_TOKENS
        )
        temperature = float(gk.get("temperature") or 0.0)
        sample = _as_bool(gk.get("do_sample", False)) and temperature > 0
        out: GenerationKwargs = {"max_new_tokens": int(max_new), "do_sample": sample}
        num_beams = _opt_int(gk.get("num_beams"))
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
            out = self.model.generate(**batch, **gen)
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
