"""The shared video prefix of the transformers families.

The questions of one video share the prompt up to the question (system turn, video): the first
runs the vision encoder and prefills that prefix once (:meth:`SharedPrefixMixin.prefill_prefix`),
each then prefills only its own text on a copy of the prefix's cache
(:meth:`SharedPrefixMixin.generate_shared`), with the model state generate() reads back (Qwen's
``rope_deltas``) restored and the family's own positions of the whole prompt. With
``decode_workers`` the processor runs one video ahead in a thread (:class:`ProcessorAhead`).
docs/adapters.md says where it falls back to the per-question path and why.

The machinery is a mixin of :class:`naru_eval.adapters.hf.base.HFVideoModel`, typed against
:class:`PrefixHost` (what it needs of the adapter): the adapter's hooks (``chat_text``,
``run_processor``, ``position_ids``, ``decode``) stay overridable per family and per test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, TypedDict

from naru_eval.adapters.base import Answer, NaruRequest

if TYPE_CHECKING:
    from naru_eval.media.sampler import SampledFrames

#: the audio encoders' inputs: like the pixels, encoded into the prefix's cache once and not
#: given again with a question
ENCODER_INPUTS = ("input_features", "feature_attention_mask", "input_features_mask")

#: what identifies a prefix's inputs: (video, frame numbers, frames' shape, prefix text)
PrefixKey = tuple[str | None, tuple[int, ...], tuple[int, ...], str]


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


class PrefixHost(Protocol):
    """What the shared-prefix machinery needs of its adapter (``HFVideoModel``)."""

    model_id: ClassVar[str]
    supports_shared_prefix: ClassVar[bool]
    model: Any
    processor: Any
    prefill_stats: PrefillStats
    processor_waits: list[float]
    _prefix: Prefix | None
    _ahead: ProcessorAhead | None

    def sampled(self, request: NaruRequest) -> SampledFrames | None: ...
    def chat_text(self, request: NaruRequest, with_video: bool = True) -> str: ...
    def split_prompt(self, request: NaruRequest) -> tuple[str, str] | None: ...
    def prefill_prefix(self, request: NaruRequest, sampled: SampledFrames, prefix: str) -> Prefix: ...
    def run_processor(self, prefix: str, sampled: SampledFrames, processor: Any = None) -> Any: ...
    def position_ids(self, input_ids: Any, inputs: Mapping[str, Any]) -> Any | None: ...
    def decode(self, request: NaruRequest, new_ids: list[int]) -> str: ...
    def _to_device(self, inputs: Mapping[str, Any]) -> dict[str, Any]: ...
    def model_inputs(self, batch: Mapping[str, Any]) -> dict[str, Any]: ...
    def _cache_kwarg(self) -> str: ...


class ProcessorAhead:
    """The processor for the next video, in one background thread, while the model answers the
    current one: with ``decode_workers`` the frames are decoded ahead by worker
    processes, and this runs the processor on them as soon as they are there, so the model waits
    for neither. The thread has its own copy of the processor (a fast tokenizer must not be used
    by two threads at once), runs the very call :meth:`SharedPrefixMixin.prefill_prefix` would,
    and holds at most one video's inputs ahead. The decode workers cannot run it: the media layer
    never imports transformers, and the inputs are the model's, not the video's."""

    def __init__(self, adapter: PrefixHost, order: Sequence[NaruRequest]) -> None:
        import copy
        from concurrent.futures import ThreadPoolExecutor

        self.adapter = adapter
        self.order = list(order)  # the first request of each video, in answer order
        self.processor = copy.deepcopy(adapter.processor)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{adapter.model_id}-processor")
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
        split = self.adapter.split_prompt(nxt)
        if split is None:
            return
        self.jobs[nxt.video] = self.pool.submit(self._run, nxt, split[0])

    def _run(self, request: NaruRequest, prefix: str) -> tuple[PrefixKey, Any]:
        sampled = self.adapter.sampled(request)
        assert sampled is not None  # submit_after only takes requests with a video
        return prefix_key(request, sampled, prefix), self.adapter.run_processor(prefix, sampled, self.processor)

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


class SharedPrefixMixin:
    """The shared-prefix methods of ``HFVideoModel`` (module docstring)."""

    #: the prefilled shared prefix of the video being answered (one video at a time)
    _prefix: Prefix | None
    #: with decode_workers: the processor of the next video, run ahead in a thread
    _ahead: ProcessorAhead | None

    def split_prompt(self: PrefixHost, request: NaruRequest) -> tuple[str, str] | None:
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

    def start_processor_ahead(self: PrefixHost, requests: Sequence[NaruRequest]) -> None:
        """Run the processor one video ahead (:class:`ProcessorAhead`) over the first request
        of each video, when there is more than one video."""
        first: dict[str, NaruRequest] = {}
        for r in requests:
            if r.video is not None:
                first.setdefault(r.video, r)
        if len(first) > 1:
            self._ahead = ProcessorAhead(self, list(first.values()))

    def prefill_prefix(self: PrefixHost, request: NaruRequest, sampled: SampledFrames, prefix: str) -> Prefix:
        """Run the vision encoder and prefill the prefix once: the cache every question of the
        video starts from."""
        import time

        import torch

        key = prefix_key(request, sampled, prefix)
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
            out = self.model(**self.model_inputs(batch), use_cache=True, logits_to_keep=1)
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
        inner = getattr(self.model, "model", None)
        rope_deltas = getattr(inner, "rope_deltas", None) if inner is not None else None
        self.prefill_stats["prefix_prefills"] += 1
        self.prefill_stats["prefill_tokens"] += n
        self._prefix = Prefix(key, cache, ids, extra, rope_deltas, n)
        return self._prefix

    def generate_shared(
        self: PrefixHost, request: NaruRequest, sampled: SampledFrames, split: tuple[str, str], gen: Mapping[str, Any]
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
        if p.rope_deltas is not None:  # Qwen M-RoPE: the suffix continues from the prefix's
            self.model.model.rope_deltas = p.rope_deltas
        # the positions of the whole prompt, as the per-question path computes them; generate
        # gives the model only the uncached (question) part
        pos = self.position_ids(ids, kw)
        if pos is not None:
            kw["position_ids"] = pos
        kw[self._cache_kwarg()] = copy.deepcopy(p.cache)
        n_in = int(ids.shape[1])
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), **self.model_inputs(kw), **gen
            )
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

    def release_prefix(self: PrefixHost) -> None:
        """Drop the held prefix cache (after the last question of a batch)."""
        self._prefix = None

    def close_processor_ahead(self: PrefixHost) -> None:
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None
