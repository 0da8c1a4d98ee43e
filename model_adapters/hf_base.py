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

The questions of one video share the prompt up to the question (system turn, video): the first
runs the vision encoder and prefills that prefix once, each then prefills only its own text on
a copy of the prefix's cache (:meth:`HFVideoModel.generate_shared`; ``shared_prefix=false``
turns it off, docs/adapters.md says where it falls back and why).

The model's position ids are the family's declared layout (``positions_layout``, recorded in the
provenance and the run key): the Qwen families compute Qwen's reference M-RoPE positions
themselves (:mod:`model_adapters.positions`) and pass them in both paths, so neither path nor the
installed transformers changes them. With ``decode_workers`` the processor runs one video ahead
in a thread (:class:`_ProcessorAhead`), on the frames the decode workers deliver.

Nothing is loaded at import or in ``__init__``: the processor and weights are built on first use,
so a run whose answers are all in the response store never loads a model.

Model args (strings from ``--model_args``) are :class:`model_adapters.args.HFArgs`, parsed by
``parse_model_args`` (an unknown arg is refused, listing the valid ones): ``pretrained`` (hub id
or directory), ``device`` (default ``cuda`` when available, else ``cpu``), ``dtype`` (``auto``:
the checkpoint's), ``device_map`` (e.g. ``auto`` to shard a large checkpoint over the visible
GPUs), ``attn_implementation``, ``max_new_tokens`` (else a reasoning family's budget, else the
task's, else 16), ``system_prompt``, ``trust_remote_code``, ``revision``, plus the base's
``num_frames`` / ``fps`` / ``max_frames`` / ``max_pixels`` (their default: the model's official
setting, ``naru_eval.core.budgets.default_sampling``) the throughput args ``shared_prefix`` (true), ``decode_workers`` (0: decode inline) and
``decode_budget_mb`` (4096), and a family's own args. Under ``accelerate launch`` (``WORLD_SIZE`` > 1) each process holds a whole copy
on ``cuda:{LOCAL_RANK}`` (data parallel) and ``device_map`` is ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

from loguru import logger

from model_adapters.args import HFArgs, parse_model_args
from model_adapters.base import Answer, NaruModel, NaruRequest, RequestFailed, _as_bool, _opt_int
from model_adapters.positions import SEQUENTIAL
from naru_eval.core.budgets import resolve_sampling

#: max_new_tokens when neither the model args nor the task's generation_kwargs give one
DEFAULT_MAX_NEW_TOKENS = 16


class _Prefix(NamedTuple):
    """The prefilled shared prefix of one video: everything before the question."""

    key: tuple[Any, ...]  # (video, frame sampling, prefix text)
    cache: Any  # the model's cache after the prefix (copied per question, never mutated)
    ids: Any  # 1 x L token ids standing for the cached positions
    extra: dict[str, Any]  # per-token inputs (e.g. mm_token_type_ids) and per-video ones (grids)
    state: dict[str, Any]  # model attributes generate() reads back (Qwen's rope_deltas)
    tokens: int  # the prefix's tokens as the processor wrote them (usage's input_tokens)


class _ProcessorAhead:
    """The processor for the next video, in one background thread, while the model answers the
    current one (issue 17): with ``decode_workers`` the frames are decoded ahead by worker
    processes, and this runs the processor on them as soon as they are there, so the model waits
    for neither. The thread has its own copy of the processor (a fast tokenizer must not be used
    by two threads at once), runs the very call :meth:`HFVideoModel.prefill_prefix` would, and
    holds at most one video's inputs ahead. The decode workers cannot run it: the media layer
    never imports transformers, and the inputs are the model's, not the video's."""

    def __init__(self, adapter: HFVideoModel, order: Sequence[NaruRequest]) -> None:
        import copy
        from concurrent.futures import ThreadPoolExecutor

        self.adapter = adapter
        self.order = list(order)  # the first request of each video, in answer order
        self.processor = copy.deepcopy(adapter.processor)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{adapter.model_id}-processor")
        self.jobs: dict[str, Any] = {}  # video -> Future[(prefix key, processor inputs)]

    def submit_after(self, video: str | None) -> None:
        """Start the processor for the video after ``video`` (its frames come from the decode
        workers through the frame cache; the split is computed here, in the model's thread)."""
        at = next((i for i, r in enumerate(self.order) if r.video == video), None)
        if at is None or at + 1 >= len(self.order):
            return
        nxt = self.order[at + 1]
        if nxt.video is None or nxt.video in self.jobs:
            return
        split = self.adapter.split_prompt(nxt)
        if split is None:
            return
        self.jobs[nxt.video] = self.pool.submit(self._run, nxt, split[0])

    def _run(self, request: NaruRequest, prefix: str) -> tuple[tuple[Any, ...], Any]:
        sampled = self.adapter.sampled(request)
        return self.adapter.prefix_key(request, sampled, prefix), self.adapter.run_processor(
            prefix, sampled, self.processor
        )

    def take(self, video: str | None, key: tuple[Any, ...]) -> Any | None:
        """The inputs computed ahead for ``video`` (waiting for them if still running), or None:
        not started, failed (the model's own call then raises the error), or another prefix."""
        job = self.jobs.pop(video or "", None)
        if job is None:
            return None
        try:
            got_key, inputs = job.result()
        except Exception:
            return None
        return inputs if got_key == key else None

    def close(self) -> None:
        for job in self.jobs.values():
            job.cancel()
        self.jobs.clear()
        self.pool.shutdown(wait=True, cancel_futures=True)


class HFVideoModel(NaruModel):
    """Base of the transformers families; subclasses set the class attributes below."""

    model_id = "naru_hf"
    #: key of naru_eval.core.budgets.FRAME_BUDGETS
    family: ClassVar[str] = ""
    #: config.model_type -> the transformers class that loads it (the family's checkpoints)
    model_classes: ClassVar[Mapping[str, str]] = {}
    #: extra keyword arguments for the processor call (besides text/videos/video_metadata)
    video_kwargs: ClassVar[Mapping[str, Any]] = {"do_sample_frames": False}
    #: extra variables for the chat template (e.g. enable_thinking; a family may set it per instance)
    template_kwargs: Mapping[str, Any] = {}
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
        super().__init__(**base)
        self.pretrained = args.pretrained
        self.dtype_name = args.dtype
        self.attn_implementation = args.attn_implementation
        self.max_new_tokens = args.max_new_tokens
        self.system_prompt = args.system_prompt
        self.trust_remote_code = args.trust_remote_code
        self.revision = args.revision
        self.cap_pixels_per_frame = args.cap_pixels_per_frame
        self._setup_devices(args.device, args.device_map)
        # --- issue 14 (throughput) model args: the shared video prefix and decode-ahead ---
        self.shared_prefix = args.shared_prefix and self.supports_shared_prefix
        self.decode_workers = args.decode_workers
        self.decode_budget_bytes = args.decode_budget_mb << 20
        self.model: Any = None
        self.processor: Any = None
        #: the prefilled shared prefix of the video being answered (one video at a time)
        self._prefix: _Prefix | None = None
        #: how often the vision encoder + prefix prefill ran, and the tokens prefilled (benchmarks);
        #: processor_wait_s: the seconds the model waited for the processor (run inline, or not
        #: yet done ahead), processor_ahead: the videos whose processor ran ahead
        self.prefill_stats: dict[str, Any] = {
            "prefix_prefills": 0,
            "prefill_tokens": 0,
            "questions": 0,
            "processor_wait_s": 0.0,
            "processor_ahead": 0,
        }
        #: the model's wait for the processor, per prefix (video) in answer order (benchmarks)
        self.processor_waits: list[float] = []
        #: with decode_workers: run the processor for the next video ahead, in a thread
        self.processor_ahead = True
        self._ahead: _ProcessorAhead | None = None

    # -- placement --------------------------------------------------------------------------
    def _setup_devices(self, device: str | None, device_map: str | None) -> None:
        import torch

        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world > 1:
            # accelerate launch: data parallel, one whole model per process on its own GPU.
            from accelerate import Accelerator

            self.accelerator = Accelerator()
            local = self.accelerator.local_process_index
            self._device = torch.device(f"cuda:{local}")
            self.device_map: str | dict[str, Any] | None = {"": f"cuda:{local}"}
            self._rank = self.accelerator.process_index
            self._world_size = self.accelerator.num_processes
            if device_map not in (None, "", "none"):
                logger.warning(
                    f"{self.model_id}: device_map={device_map} ignored under accelerate launch "
                    f"(WORLD_SIZE={world}); rank {self._rank} uses cuda:{local}"
                )
            return
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self._device = torch.device(device)
        # device_map=auto (or balanced, sequential, a JSON map) shards a large checkpoint over
        # the visible GPUs; otherwise the whole model goes to `device`.
        self.device_map = device_map if device_map else str(self._device)

    @property
    def device(self) -> Any:
        return self._device

    # -- the run key --------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        desc = super().describe()
        # Nested on purpose: the store drops top-level keys that look like secrets, and
        # "max_new_tokens" contains "token".
        desc["hf"] = {
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
        return desc

    def provenance(self) -> dict[str, str | None]:
        return {**super().provenance(), "positions": self.positions_layout}

    # -- loading ------------------------------------------------------------------------------
    def _torch_dtype(self) -> Any:
        import torch

        if self.dtype_name == "auto":
            return "auto"
        dt = getattr(torch, self.dtype_name, None)
        if not isinstance(dt, torch.dtype):
            raise ValueError(f"{self.model_id}: unknown dtype={self.dtype_name!r} (auto, bfloat16, float16, float32)")
        return dt

    def _pretrained_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.revision:
            kw["revision"] = self.revision
        if self.trust_remote_code:
            kw["trust_remote_code"] = True
        return kw

    def model_class(self) -> Any:
        """The transformers class for this checkpoint's ``model_type``."""
        import transformers

        config = transformers.AutoConfig.from_pretrained(self.pretrained, **self._pretrained_kwargs())
        name = self.model_classes.get(config.model_type)
        if name is None:
            raise ValueError(
                f"{self.model_id}: {self.pretrained} is a {config.model_type!r} checkpoint; this adapter "
                f"loads {sorted(self.model_classes)}"
            )
        cls = getattr(transformers, name, None)
        if cls is None:
            raise ImportError(f"{self.model_id}: transformers {transformers.__version__} has no {name}")
        return cls

    def load_kwargs(self) -> dict[str, Any]:
        """Extra ``from_pretrained`` keyword arguments of a family (config overrides)."""
        return {}

    def load(self) -> None:
        """Build the processor and the model (called once, on first use)."""
        from transformers import AutoProcessor

        cls = self.model_class()
        kw: dict[str, Any] = {"dtype": self._torch_dtype(), "device_map": self.device_map, **self.load_kwargs()}
        if self.attn_implementation:
            kw["attn_implementation"] = self.attn_implementation
        logger.info(f"{self.model_id}: loading {cls.__name__} from {self.pretrained} ({kw})")
        self.processor = AutoProcessor.from_pretrained(self.pretrained, **self._pretrained_kwargs())
        self.model = cls.from_pretrained(self.pretrained, **kw, **self._pretrained_kwargs()).eval()

    def ensure_loaded(self) -> None:
        if self.model is None:
            self.load()

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Load before the first answer when there is work (a bad checkpoint fails up front);
        a run served entirely from the response store never loads the model. With decode-ahead
        and the shared prefix, the processor then runs one video ahead (:class:`_ProcessorAhead`)."""
        if requests:
            self.ensure_loaded()
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None
        if requests and self.decode_workers > 0 and self.shared_prefix and self.processor_ahead:
            first: dict[str, NaruRequest] = {}
            for r in requests:
                if r.video is not None:
                    first.setdefault(r.video, r)
            if len(first) > 1:
                self._ahead = _ProcessorAhead(self, list(first.values()))

    @property
    def input_device(self) -> Any:
        """Where inputs go: the model's first device (also under device_map=auto)."""
        dev = getattr(self.model, "device", None)
        return dev if dev is not None else self._device

    # -- per-request hooks (families override what differs) ---------------------------------
    def sampled(self, request: NaruRequest) -> Any:
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

    def messages(self, request: NaruRequest, with_video: bool = True) -> list[dict[str, Any]]:
        """The chat: the video first (unless text-only), then the prompt text (and a system turn)."""
        msgs: list[dict[str, Any]] = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": [{"type": "text", "text": self.system_prompt}]})
        content: list[dict[str, Any]] = [{"type": "video"}] if with_video else []
        content.append({"type": "text", "text": request.prompt})
        msgs.append({"role": "user", "content": content})
        return msgs

    def video_input(self, sampled: Any) -> Any:
        """The frames as the processor takes them: the sampler's uint8 N x H x W x 3 array."""
        return sampled.frames

    def video_metadata(self, sampled: Any) -> dict[str, Any]:
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

    def processor_kwargs(self) -> dict[str, Any]:
        kw = dict(self.video_kwargs)
        vp = getattr(self.processor, "video_processor", None)
        valid = getattr(getattr(vp, "valid_kwargs", None), "__annotations__", {})
        if "cap_pixels_per_frame" in valid:
            # qwen-vl-utils' per-frame pixel cap (the reference behaviour); silences the
            # transformers warning about the uncapped default.
            kw["cap_pixels_per_frame"] = self.cap_pixels_per_frame
        return kw

    def generation_kwargs(self, request: NaruRequest) -> dict[str, Any]:
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
        out: dict[str, Any] = {"max_new_tokens": int(max_new), "do_sample": sample}
        num_beams = _opt_int(gk.get("num_beams"))
        if num_beams and num_beams > 1:
            out["num_beams"] = num_beams
        if sample:
            out["temperature"] = temperature
            for k in ("top_p", "top_k"):
                if gk.get(k) is not None:
                    out[k] = gk[k]
        return out

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

    def build_inputs(self, request: NaruRequest, sampled: Any) -> Any:
        text = self.chat_text(request, with_video=sampled is not None)
        if sampled is None:  # blind tasks: the question alone
            return self.processor(text=[text], return_tensors="pt")
        return self.processor(
            text=[text],
            videos=[self.video_input(sampled)],
            video_metadata=[self.video_metadata(sampled)],
            return_tensors="pt",
            **self.processor_kwargs(),
        )

    def position_ids(self, input_ids: Any, inputs: Mapping[str, Any]) -> Any | None:
        """The ``position_ids`` of the whole prompt ``input_ids`` (1 x L) when this family computes
        them itself (the Qwen families: ``model_adapters.positions``), with ``inputs`` the
        processor's other outputs (grids); None: the model's own (one per token)."""
        return None

    def _cache_kwarg(self) -> str:
        """How this transformers names the cache argument (``cache`` from 5.2x, before it
        ``past_key_values``): the GPU image's transformers 5.17 has only the old name."""
        import inspect

        params = inspect.signature(self.model.forward).parameters
        return "cache" if "cache" in params else "past_key_values"

    def _to_device(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        import torch

        dtype = getattr(self.model, "dtype", None)
        device = self.input_device
        batch = {}
        for k, v in inputs.items():
            if isinstance(v, torch.Tensor):
                # pixels take the model's dtype; ids, grids and timings keep theirs
                v = v.to(device=device, dtype=dtype) if k.startswith("pixel_values") and dtype else v.to(device)
            batch[k] = v
        return batch

    def _final_generation_kwargs(self, request: NaruRequest) -> dict[str, Any]:
        # Generation arguments override the checkpoint's generation_config (some ship sampling
        # defaults; with do_sample=False transformers ignores their temperature/top_p/top_k).
        gen = self.generation_kwargs(request)
        tok = getattr(self.processor, "tokenizer", None)
        if getattr(self.model.generation_config, "pad_token_id", None) is None and tok is not None:
            if tok.pad_token_id is not None:
                gen["pad_token_id"] = tok.pad_token_id
        return gen

    def generate(self, request: NaruRequest, sampled: Any) -> Answer:
        """One answer: from a copy of the video's prefilled prefix when the family, the prompt and
        the decoding allow it (:meth:`split_prompt`), else from the whole prompt."""
        import torch

        gen = self._final_generation_kwargs(request)
        split = self.split_prompt(request) if sampled is not None and self.shared_prefix else None
        if split is not None and gen.get("num_beams", 1) == 1:
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

    # -- the shared video prefix ---------------------------------------------------------------
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

    def split_prompt(self, request: NaruRequest) -> tuple[str, str] | None:
        """(prefix, suffix) of the rendered prompt, split where the question text starts, or None
        when the prompt cannot share a prefix: the family cannot (``supports_shared_prefix``), the
        video does not come before the question (the prefix would then not hold it), or the
        split is not on a token boundary (tokenizing the halves apart differs from the whole)."""
        if not self.supports_shared_prefix or not request.prompt:
            return None
        text = self.chat_text(request)
        at = text.find(request.prompt)
        if at <= 0:
            return None
        prefix, suffix = text[:at], text[at:]
        blind = self.chat_text(request, with_video=False)
        if blind.find(request.prompt) < 0 or blind[: blind.find(request.prompt)] == prefix:
            return None  # the video is not in the part before the question
        tok = self.processor.tokenizer

        def ids(t: str) -> list[int]:
            return list(tok(t, add_special_tokens=False)["input_ids"])

        if ids(prefix) + ids(suffix) != ids(text):
            return None
        return prefix, suffix

    def prefix_key(self, request: NaruRequest, sampled: Any, prefix: str) -> tuple[Any, ...]:
        """What identifies a prefix's inputs: the video, its frames and the prefix text."""
        return (request.video, tuple(sampled.indices.tolist()), sampled.frames.shape, prefix)

    def run_processor(self, prefix: str, sampled: Any, processor: Any = None) -> Any:
        """The processor's inputs for the prefix text and the video (``processor``: a copy of the
        adapter's, when called from the processor-ahead thread)."""
        return (processor or self.processor)(
            text=[prefix],
            videos=[self.video_input(sampled)],
            video_metadata=[self.video_metadata(sampled)],
            return_tensors="pt",
            **self.processor_kwargs(),
        )

    def prefill_prefix(self, request: NaruRequest, sampled: Any, prefix: str) -> _Prefix:
        """Run the vision encoder and prefill the prefix once: the cache every question of the
        video starts from."""
        import time

        import torch

        key = self.prefix_key(request, sampled, prefix)
        if self._prefix is not None and self._prefix.key == key:
            return self._prefix
        self._prefix = None  # the previous video's cache goes before this one is built
        start = time.perf_counter()
        inputs = self._ahead.take(request.video, key) if self._ahead is not None else None
        if inputs is not None:
            self.prefill_stats["processor_ahead"] += 1
        else:
            inputs = self.run_processor(prefix, sampled)
        waited = time.perf_counter() - start
        self.prefill_stats["processor_wait_s"] += waited
        self.processor_waits.append(waited)
        if self._ahead is not None:  # the next video's processor runs while this one is answered
            self._ahead.submit_after(request.video)
        batch = self._to_device(inputs)
        ids = batch["input_ids"]
        pos = self.position_ids(ids, batch)
        if pos is not None:
            batch["position_ids"] = pos
        with torch.inference_mode():
            out = self.model(**batch, use_cache=True, logits_to_keep=1)
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        cached = int(cache.get_seq_length())
        n = int(ids.shape[1])
        if cached != n:
            # the model dropped tokens inside forward (Nemotron's video pruning): the cached
            # positions stand for pruned tokens, so ids only fill their places
            pad = getattr(self.processor.tokenizer, "pad_token_id", None) or 0
            ids = torch.full((1, cached), int(pad), dtype=ids.dtype, device=ids.device)
        extra = {}
        for k, v in batch.items():
            if k in ("input_ids", "attention_mask", "position_ids") or k.startswith("pixel_values"):
                continue
            if isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape == (1, n):
                if cached != n:
                    continue  # per-token inputs of pruned positions: nothing to line up
                extra[k] = v
            else:
                extra[k] = v
        inner = getattr(self.model, "model", None)
        state = {}
        if inner is not None and getattr(inner, "rope_deltas", None) is not None:
            state["rope_deltas"] = inner.rope_deltas  # Qwen M-RoPE: the suffix continues from here
        self.prefill_stats["prefix_prefills"] += 1
        self.prefill_stats["prefill_tokens"] += n
        self._prefix = _Prefix(key, cache, ids, extra, state, n)
        return self._prefix

    def generate_shared(
        self, request: NaruRequest, sampled: Any, split: tuple[str, str], gen: dict[str, Any]
    ) -> Answer:
        """Answer from a copy of the prefilled prefix: only the question is prefilled."""
        import copy

        import torch

        prefix_text, suffix_text = split
        p = self.prefill_prefix(request, sampled, prefix_text)
        tok = self.processor.tokenizer
        suffix = torch.tensor([tok(suffix_text, add_special_tokens=False)["input_ids"]], dtype=p.ids.dtype)
        suffix = suffix.to(p.ids.device)
        ids = torch.cat([p.ids, suffix], dim=1)
        kw: dict[str, Any] = {}
        for k, v in p.extra.items():
            if isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape == p.ids.shape:
                v = torch.cat([v, torch.zeros_like(suffix, dtype=v.dtype)], dim=1)  # text: type 0
            kw[k] = v
        inner = getattr(self.model, "model", None)
        for name, value in p.state.items():
            setattr(inner, name, value)
        # the positions of the whole prompt, as the per-question path computes them; generate
        # gives the model only the uncached (question) part
        pos = self.position_ids(ids, kw)
        if pos is not None:
            kw["position_ids"] = pos
        kw[self._cache_kwarg()] = copy.deepcopy(p.cache)
        n_in = int(ids.shape[1])
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kw, **gen)
        new = out[0, n_in:]
        self.prefill_stats["questions"] += 1
        self.prefill_stats["prefill_tokens"] += int(suffix.shape[1])
        usage = {
            "input_tokens": p.tokens + int(suffix.shape[1]),
            "output_tokens": int(new.shape[0]),
            "frames": int(len(sampled.frames)),
            "shared_prefix_tokens": p.tokens,
        }
        return Answer(self.decode(request, [int(t) for t in new]), usage)

    def release_prefix(self) -> None:
        """Drop the held prefix cache (after the last question of a batch)."""
        self._prefix = None

    def finish(self) -> None:
        self.release_prefix()
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None

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

    def _empty_cache(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
