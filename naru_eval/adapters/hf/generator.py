"""``Generator``: one answer from a transformers model, per question or from the shared video prefix.

The second part of the transformers path (the first is the family's
:class:`naru_eval.adapters.hf.builder.InputBuilder`). Greedy unless the task samples
(``do_sample=False``, never a temperature); only the new tokens are decoded, by the builder.

The questions of one video share the prompt up to the question (system turn, video): the first
runs the vision encoder and prefills that prefix once (:meth:`Generator.prefill_prefix`), each then
prefills only its own text on a copy of the prefix's cache (:meth:`Generator.generate_shared`),
with the model state generate() reads back (Qwen's ``rope_deltas``) restored and the family's own
positions of the whole prompt. ``shared_prefix=false`` turns it off; docs/adapters.md says where it
falls back to the per-question path and why. With ``decode_workers`` the processor runs one video
ahead in a thread (:class:`ProcessorAhead`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.hf.builder import InputBuilder
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.request import Answer, NaruRequest, RequestFailed
from naru_eval.core.json_types import JSON, integer, number
from naru_eval.settings import parse_flag

if TYPE_CHECKING:
    from naru_eval.media.sampler import SampledFrames

#: max_new_tokens when neither the model args nor the task's generation_kwargs give one
DEFAULT_MAX_NEW_TOKENS = 16

#: the audio encoders' inputs: like the pixels, encoded into the prefix's cache once and not
#: given again with a question
ENCODER_INPUTS = ("input_features", "feature_attention_mask", "input_features_mask")

#: what identifies a prefix's inputs: (video, frame numbers, frames' shape, prefix text)
PrefixKey = tuple[str | None, tuple[int, ...], tuple[int, ...], str]


class GenerationKwargs(TypedDict, total=False):
    """What ``model.generate`` is given besides the inputs: greedy unless the task samples."""

    max_new_tokens: int
    do_sample: bool
    num_beams: int
    temperature: float
    top_p: float
    top_k: int
    pad_token_id: int


class Prefix(NamedTuple):
    """The prefilled shared prefix of one video: everything before the question."""

    key: PrefixKey
    cache: Any  # the model's cache after the prefix (copied per question, never mutated)
    ids: Any  # 1 x L token ids standing for the cached positions
    #: per-token inputs (e.g. mm_token_type_ids) and per-video ones (grids): generate()'s kwargs
    extra: dict[str, Any]
    rope_deltas: Any  # Qwen M-RoPE: where the suffix's positions continue (None: no such state)
    tokens: int  # the prefix's tokens as the processor wrote them (usage's input_tokens)


class PrefillStats(TypedDict):
    """How often the vision encoder + prefix prefill ran and the tokens prefilled (benchmarks,
    scripts/gpu_check.py); the seconds the model waited for the processor (run inline, or not yet
    done ahead), and the videos whose processor ran ahead."""

    prefix_prefills: int
    prefill_tokens: int
    questions: int
    processor_wait_s: float
    processor_ahead: int


def new_prefill_stats() -> PrefillStats:
    """All counters at zero (a new adapter)."""
    return {"prefix_prefills": 0, "prefill_tokens": 0, "questions": 0, "processor_wait_s": 0.0, "processor_ahead": 0}


def prefix_key(request: NaruRequest, sampled: SampledFrames, prefix: str) -> PrefixKey:
    """What identifies a prefix's inputs: the video, its frames and the prefix text."""
    return (request.video, tuple(sampled.indices.tolist()), tuple(sampled.frames.shape), prefix)


def _gen_flag(value: JSON) -> bool:
    """A generation kwarg flag (``do_sample``): strings through ``parse_flag``."""
    return parse_flag(value, "do_sample") if isinstance(value, str) else bool(value)


def _gen_int(value: JSON) -> int | None:
    return None if value in (None, "", "none", "None") else integer(value)


class ProcessorAhead:
    """The processor for the next video, in one background thread, while the model answers the
    current one: with ``decode_workers`` the frames are decoded ahead by worker processes, and
    this runs the processor on them as soon as they are there, so the model waits for neither.
    The thread has its own copy of the processor (a fast tokenizer must not be used by two
    threads at once), runs the very call :meth:`Generator.prefill_prefix` would, and holds at most
    one video's inputs ahead. The decode workers cannot run it: the media layer never imports
    transformers, and the inputs are the model's, not the video's."""

    def __init__(self, generator: Generator, order: Sequence[NaruRequest]) -> None:
        import copy
        from concurrent.futures import ThreadPoolExecutor

        self.generator = generator
        self.order = list(order)  # the first request of each video, in answer order
        self.processor = copy.deepcopy(generator.checkpoint.processor)
        name = f"{generator.adapter.model_id}-processor"
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self.jobs: dict[str, Future[tuple[PrefixKey, Any]]] = {}  # video -> (prefix key, processor inputs)

    def submit_after(self, video: str | None) -> None:
        """Start the processor for the video after ``video`` (its frames come from the decode
        workers through the frame cache; the split is computed here, in the model's thread)."""
        at = next((i for i, r in enumerate(self.order) if r.video == video), None)
        if at is None or at + 1 >= len(self.order):
            return
        nxt = self.order[at + 1]
        if nxt.video is None or nxt.video in self.jobs:
            return
        split = self.generator.split_prompt(nxt)
        if split is None:
            return
        self.jobs[nxt.video] = self.pool.submit(self._run, nxt, split[0])

    def _run(self, request: NaruRequest, prefix: str) -> tuple[PrefixKey, Any]:
        builder = self.generator.builder
        sampled = builder.sampled(request)
        assert sampled is not None  # submit_after only takes requests with a video
        return prefix_key(request, sampled, prefix), builder.processor_inputs(prefix, sampled, self.processor)

    def take(self, video: str | None, key: PrefixKey) -> Any | None:
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


class Generator:
    """Answers a request from the model (the module docstring): :meth:`answer`."""

    def __init__(self, adapter: NaruModel, builder: InputBuilder, checkpoint: Checkpoint) -> None:
        self.adapter = adapter
        self.builder = builder
        self.checkpoint = checkpoint
        self.args = builder.args
        #: whether this run answers from a shared prefix (``shared_prefix``, and the family can)
        self.shared_prefix = bool(self.args.shared_prefix) and builder.supports_shared_prefix
        #: with decode_workers: run the processor for the next video ahead, in a thread
        self.processor_ahead = True
        #: the prefilled shared prefix of the video being answered (one video at a time)
        self.prefix: Prefix | None = None
        self.ahead: ProcessorAhead | None = None
        #: the vision-encoder + prefix prefills, the tokens prefilled, the processor's waits
        self.stats: PrefillStats = new_prefill_stats()
        #: the model's wait for the processor, per prefix (video) in answer order (benchmarks)
        self.processor_waits: list[float] = []

    # -- the run's edges ------------------------------------------------------------------------
    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """With decode-ahead and the shared prefix, the processor runs one video ahead."""
        self.close_processor_ahead()
        if requests and self.adapter.decode_workers > 0 and self.shared_prefix and self.processor_ahead:
            first: dict[str, NaruRequest] = {}
            for r in requests:
                if r.video is not None:
                    first.setdefault(r.video, r)
            if len(first) > 1:
                self.ahead = ProcessorAhead(self, list(first.values()))

    def finish(self) -> None:
        """Drop the held prefix cache and the processor thread (after the last question)."""
        self.prefix = None
        self.close_processor_ahead()

    def close_processor_ahead(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None

    # -- settings -------------------------------------------------------------------------------
    def generation_kwargs(self, request: NaruRequest) -> GenerationKwargs:
        """Greedy by default: do_sample=False and no temperature/top_p/top_k."""
        gk = request.gen_kwargs
        max_new = (
            self.args.max_new_tokens
            or self.builder.reasoning_max_new_tokens
            or _gen_int(gk.get("max_new_tokens"))
            or DEFAULT_MAX_NEW_TOKENS
        )
        temperature = number(gk.get("temperature") or 0.0)
        sample = _gen_flag(gk.get("do_sample", False)) and temperature > 0
        out: GenerationKwargs = {"max_new_tokens": int(max_new), "do_sample": sample}
        num_beams = _gen_int(gk.get("num_beams"))
        if num_beams and num_beams > 1:
            out["num_beams"] = num_beams
        if sample:
            out["temperature"] = temperature
            # the task's values (generate checks them)
            if gk.get("top_p") is not None:
                out["top_p"] = number(gk["top_p"])
            if gk.get("top_k") is not None:
                out["top_k"] = integer(gk["top_k"])
        return out

    def final_generation_kwargs(self, request: NaruRequest) -> GenerationKwargs:
        # Generation arguments override the checkpoint's generation_config (some ship sampling
        # defaults; with do_sample=False transformers ignores their temperature/top_p/top_k).
        gen = self.generation_kwargs(request)
        tok = getattr(self.checkpoint.processor, "tokenizer", None)
        if getattr(self.checkpoint.model.generation_config, "pad_token_id", None) is None and tok is not None:
            if tok.pad_token_id is not None:
                gen["pad_token_id"] = tok.pad_token_id
        return gen

    # -- the answer -----------------------------------------------------------------------------
    def answer(self, request: NaruRequest, sampled: SampledFrames | None) -> Answer:
        """One answer: from a copy of the video's prefilled prefix when the family, the prompt and
        the decoding allow it (:meth:`split_prompt`), else from the whole prompt."""
        gen = self.final_generation_kwargs(request)
        split = self.split_prompt(request) if sampled is not None and self.shared_prefix else None
        if split is not None and sampled is not None and gen.get("num_beams", 1) == 1:
            return self.generate_shared(request, sampled, split, gen)
        return self.generate_whole(request, sampled, gen)

    def generate_whole(self, request: NaruRequest, sampled: SampledFrames | None, gen: GenerationKwargs) -> Answer:
        """The per-question path: the whole prompt in one processor call and one generate."""
        import torch

        ckpt, builder = self.checkpoint, self.builder
        batch = ckpt.to_device(builder.build_inputs(request, sampled), builder.model_dtype_keys)
        n_in = int(batch["input_ids"].shape[1])
        pos = builder.position_ids(batch["input_ids"], batch)
        if pos is not None:
            batch["position_ids"] = pos
        with torch.inference_mode():
            out = ckpt.model.generate(**builder.model_inputs(batch), **gen)
        new = out[0, n_in:]
        self.stats["questions"] += 1
        self.stats["prefill_tokens"] += n_in
        if sampled is not None:
            self.stats["prefix_prefills"] += 1
        frames = int(len(sampled.frames)) if sampled is not None else 0
        usage = {"input_tokens": n_in, "output_tokens": int(new.shape[0]), "frames": frames}
        return Answer(builder.decode(request, [int(t) for t in new]), usage)

    def split_prompt(self, request: NaruRequest) -> tuple[str, str] | None:
        """(prefix, suffix) of the rendered prompt, split where the question text starts, or None
        when the prompt cannot share a prefix: the family cannot (``supports_shared_prefix``), the
        video does not come before the question (the prefix would then not hold it), or the
        split is not on a token boundary (tokenizing the halves apart differs from the whole)."""
        builder = self.builder
        if not builder.supports_shared_prefix or not request.prompt:
            return None
        text = builder.chat_text(request)
        at = text.find(request.prompt)
        if at <= 0:
            return None
        prefix, suffix = text[:at], text[at:]
        blind = builder.chat_text(request, with_video=False)
        if blind.find(request.prompt) < 0 or blind[: blind.find(request.prompt)] == prefix:
            return None  # the video is not in the part before the question
        tok = self.checkpoint.processor.tokenizer

        def ids(t: str) -> list[int]:
            return list(tok(t, add_special_tokens=False)["input_ids"])

        if ids(prefix) + ids(suffix) != ids(text):
            return None
        return prefix, suffix

    def prefill_prefix(self, request: NaruRequest, sampled: SampledFrames, prefix: str) -> Prefix:
        """Run the vision encoder and prefill the prefix once: the cache every question of the
        video starts from."""
        import time

        import torch

        ckpt, builder = self.checkpoint, self.builder
        key = prefix_key(request, sampled, prefix)
        if self.prefix is not None and self.prefix.key == key:
            return self.prefix
        self.prefix = None  # the previous video's cache goes before this one is built
        start = time.perf_counter()
        inputs = self.ahead.take(request.video, key) if self.ahead is not None else None
        if inputs is not None:
            self.stats["processor_ahead"] += 1
        else:
            inputs = builder.processor_inputs(prefix, sampled)
        waited = time.perf_counter() - start
        self.stats["processor_wait_s"] += waited
        self.processor_waits.append(waited)
        if self.ahead is not None:  # the next video's processor runs while this one is answered
            self.ahead.submit_after(request.video)
        batch = ckpt.to_device(inputs, builder.model_dtype_keys)
        ids = batch["input_ids"]
        pos = builder.position_ids(ids, batch)
        if pos is not None:
            batch["position_ids"] = pos
        with torch.inference_mode():
            out = ckpt.model(**builder.model_inputs(batch), use_cache=True, logits_to_keep=1)
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        cached = int(cache.get_seq_length())
        n = int(ids.shape[1])
        if cached != n:
            # the model dropped tokens inside forward (Nemotron's video pruning): the cached
            # positions stand for pruned tokens, so ids only fill their places
            pad = getattr(ckpt.processor.tokenizer, "pad_token_id", None) or 0
            ids = torch.full((1, cached), int(pad), dtype=ids.dtype, device=ids.device)
        extra = {}
        for k, v in batch.items():
            if (
                k in ("input_ids", "attention_mask", "position_ids")
                or k.startswith("pixel_values")
                or k in ENCODER_INPUTS
            ):
                continue  # the encoders' inputs are in the cache now
            if isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape == (1, n):
                if cached != n:
                    continue  # per-token inputs of pruned positions: nothing to line up
                extra[k] = v
            else:
                extra[k] = v
        inner = getattr(ckpt.model, "model", None)
        rope_deltas = getattr(inner, "rope_deltas", None) if inner is not None else None
        self.stats["prefix_prefills"] += 1
        self.stats["prefill_tokens"] += n
        self.prefix = Prefix(key, cache, ids, extra, rope_deltas, n)
        return self.prefix

    def generate_shared(
        self, request: NaruRequest, sampled: SampledFrames, split: tuple[str, str], gen: Mapping[str, Any]
    ) -> Answer:
        """Answer from a copy of the prefilled prefix: only the question is prefilled."""
        import copy

        import torch

        ckpt, builder = self.checkpoint, self.builder
        prefix_text, suffix_text = split
        p = self.prefill_prefix(request, sampled, prefix_text)
        tok = ckpt.processor.tokenizer
        suffix = torch.tensor([tok(suffix_text, add_special_tokens=False)["input_ids"]], dtype=p.ids.dtype)
        suffix = suffix.to(p.ids.device)
        ids = torch.cat([p.ids, suffix], dim=1)
        kw: dict[str, Any] = {}
        for k, v in p.extra.items():
            if isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape == p.ids.shape:
                v = torch.cat([v, torch.zeros_like(suffix, dtype=v.dtype)], dim=1)  # text: type 0
            kw[k] = v
        if p.rope_deltas is not None:  # Qwen M-RoPE: the suffix continues from the prefix's
            ckpt.model.model.rope_deltas = p.rope_deltas
        # the positions of the whole prompt, as the per-question path computes them; generate
        # gives the model only the uncached (question) part
        pos = builder.position_ids(ids, kw)
        if pos is not None:
            kw["position_ids"] = pos
        kw[ckpt.cache_kwarg()] = copy.deepcopy(p.cache)
        n_in = int(ids.shape[1])
        with torch.inference_mode():
            out = ckpt.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), **builder.model_inputs(kw), **gen
            )
        new = out[0, n_in:]
        self.stats["questions"] += 1
        self.stats["prefill_tokens"] += int(suffix.shape[1])
        usage = {
            "input_tokens": p.tokens + int(suffix.shape[1]),
            "output_tokens": int(new.shape[0]),
            "frames": int(len(sampled.frames)),
            "shared_prefix_tokens": p.tokens,
        }
        return Answer(builder.decode(request, [int(t) for t in new]), usage)


def out_of_memory(e: BaseException, sampled: SampledFrames | None) -> RequestFailed | None:
    """The request's failure when ``e`` is torch's out-of-memory error (it fails this request, not
    the run); None for any other error."""
    if type(e).__name__ != "OutOfMemoryError":
        return None
    n = len(sampled.frames) if sampled is not None else 0
    return RequestFailed(f"out of memory with {n} frames: {e}")
