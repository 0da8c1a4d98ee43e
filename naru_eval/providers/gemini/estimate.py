"""The expected tokens and dollars of a whole Gemini run (``naru-eval estimate-cost``), before
it starts: :func:`estimate_request` summed over the questions, priced three ways.

Without a cache each question re-sends its video: ~10 questions per NARU video means ~10x the
video's tokens; the adapter's explicit cache (providers/gemini/caching.py) and the Batch API
(providers/gemini/batch.py) are priced here too. Without a data directory the paper's totals
stand in (:func:`paper_questions`, read from the package data).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources

from pydantic import BaseModel, Field, computed_field

from naru_eval.providers.gemini.families import context_window, family, normalise_resolution
from naru_eval.providers.gemini.pricing import (
    GeminiPrices,
    cache_min_tokens,
    cache_storage_cost,
    load_prices,
    request_cost,
)
from naru_eval.providers.gemini.tokens import TokenEstimate, estimate_request, frames_sampled


class PaperTotals(BaseModel):
    """The paper's data set as naru_eval/data_files/naru_paper.json gives it (``totals``)."""

    questions: int
    videos: int
    hours: float
    video_minutes: tuple[float, float]
    diagnostic_subset: int

    @property
    def longest_s(self) -> float:
        return self.video_minutes[1] * 60.0


@functools.lru_cache(maxsize=1)
def paper_totals() -> PaperTotals:
    """The paper's totals, from the package data (the file report/paper.py reads too)."""
    text = resources.files("naru_eval").joinpath("data_files/naru_paper.json").read_text(encoding="utf-8")
    return PaperTotals.model_validate(json.loads(text)["totals"])


class RunEstimate(BaseModel):
    """Expected tokens and dollars of a whole run (``naru-eval estimate-cost``; ``--json`` prints
    its ``model_dump()``, the two derived totals last)."""

    model: str
    task: str
    fps: float
    media_resolution: str
    audio: bool
    questions: int
    videos: int
    hours: float
    source: str  # "data: DIR" or "paper totals"
    frames_per_pass: int  # frames over every video once
    video_tokens: int  # summed over questions (each re-sends its video)
    audio_tokens: int
    text_tokens: int
    output_tokens: int
    thinking_tokens: int
    longest_video: str
    longest_s: float
    longest_request_tokens: int
    context_window: int
    context_known: bool
    cost_usd: float | None
    cost_usd_cached: float | None  # if every repeat of a video were served from the implicit cache
    price_as_of: str
    price_source: str
    notes: list[str] = Field(default_factory=list)
    #: explicit context caching: each video cached once (creation at the input price), its
    #: questions at the cached price, storage for as long as its questions take
    cost_usd_explicit_cache: float | None = None
    cache_videos: int = 0  # videos that get a cache (the others are asked uncached)
    cache_storage_usd: float | None = None
    #: every question through the Batch API, at the batch price
    cost_usd_batch: float | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def input_tokens(self) -> int:
        return self.video_tokens + self.audio_tokens + self.text_tokens

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fits(self) -> bool:
        return self.longest_request_tokens <= self.context_window


@dataclass(frozen=True)
class QuestionSpec:
    """What a run estimate needs of one question."""

    video: str
    duration_s: float
    prompt: str | None = None


@dataclass(frozen=True)
class _Pricer:
    """The dollars of one estimated request for one model's price entry (None: unknown)."""

    price: Mapping[str, float] | None
    output_tokens: int
    thinking_tokens: int

    def cost(self, est: TokenEstimate, cached: int = 0, batch: bool = False) -> float | None:
        return request_cost(
            self.price,
            prompt_tokens=est.total,
            output_tokens=self.output_tokens,
            thinking_tokens=self.thinking_tokens,
            audio_tokens=est.audio_tokens,
            cached_tokens=cached,
            batch=batch,
        )


def _total(costs: Iterable[float | None]) -> float | None:
    """The sum, or None (unknown) as soon as one cost is."""
    out = 0.0
    for c in costs:
        if c is None:
            return None
        out += c
    return out


def estimate_run(
    questions: Iterable[QuestionSpec],
    *,
    model: str,
    task: str,
    fps: float,
    media_resolution: str = "default",
    audio: bool = True,
    output_tokens: int = 2,
    thinking_tokens: int = 0,
    prices: GeminiPrices | None = None,
    source: str = "data",
    longest: QuestionSpec | None = None,
    latency_s: float = 60.0,
    concurrency: int = 8,
) -> RunEstimate:
    """Sum :func:`estimate_request` over ``questions``; ``longest`` overrides the request the
    context check is made on (default: the largest of ``questions``). The explicit-cache price
    assumes ``latency_s`` per question at ``concurrency`` questions at a time for storage."""
    prices = prices or load_prices()
    price = prices.for_model(model)
    res = normalise_resolution(media_resolution)
    pricer = _Pricer(price, output_tokens, thinking_tokens)

    def estimate(q: QuestionSpec) -> TokenEstimate:
        return estimate_request(q.duration_s, model=model, fps=fps, media_resolution=res, audio=audio, prompt=q.prompt)

    asked = [(q, estimate(q)) for q in questions]
    by_video: dict[str, list[TokenEstimate]] = {}
    durations: dict[str, float] = {}
    for q, est in asked:
        by_video.setdefault(q.video, []).append(est)
        durations[q.video] = q.duration_s
    # the implicit cache: the first question on a video pays in full, the others hit the cache
    seen: set[str] = set()
    implicit: list[float | None] = []
    for q, est in asked:
        implicit.append(pricer.cost(est, cached=est.media_tokens if q.video in seen else 0))
        seen.add(q.video)
    longest_t = max(((est.total, q.video, q.duration_s) for q, est in asked), default=(0, "", 0.0))
    if longest is not None:
        longest_t = (estimate(longest).total, longest.video, longest.duration_s)
    explicit, storage, cached_videos = _explicit_cache_cost(by_video, pricer, model, res, latency_s, concurrency)
    batch = _total(pricer.cost(est, batch=True) for _, est in asked)
    window, known = context_window(model)
    n_questions = len(asked)
    return RunEstimate(
        model=model,
        task=task,
        fps=fps,
        media_resolution=res,
        audio=audio,
        questions=n_questions,
        videos=len(durations),
        hours=sum(durations.values()) / 3600,
        source=source,
        frames_per_pass=sum(frames_sampled(d, fps) for d in durations.values()),
        video_tokens=sum(est.video_tokens for _, est in asked),
        audio_tokens=sum(est.audio_tokens for _, est in asked),
        text_tokens=sum(est.text_tokens for _, est in asked),
        output_tokens=n_questions * output_tokens,
        thinking_tokens=n_questions * thinking_tokens,
        longest_video=longest_t[1],
        longest_s=longest_t[2],
        longest_request_tokens=longest_t[0],
        context_window=window,
        context_known=known,
        cost_usd=_total(pricer.cost(est) for _, est in asked) if price is not None else None,
        cost_usd_cached=_total(implicit) if price is not None else None,
        price_as_of=prices.as_of,
        price_source=prices.source,
        notes=_notes(model, res, prices if price is None else None, explicit is None, batch is None, window, known)
        + (
            ["thinking tokens assumed 0 (they are billed as output; pass --thinking-tokens N per request)"]
            if thinking_tokens == 0
            else []
        ),
        cost_usd_explicit_cache=explicit,
        cache_videos=cached_videos,
        cache_storage_usd=storage,
        cost_usd_batch=batch if price is not None else None,
    )


def _notes(
    model: str,
    resolution: str,
    unpriced_in: GeminiPrices | None,
    no_cache_price: bool,
    no_batch_price: bool,
    window: int,
    known: bool,
) -> list[str]:
    """What the estimate could not price; ``unpriced_in``: the table the model is missing from."""
    priced = unpriced_in is None
    notes = []
    if priced and no_cache_price:
        notes.append(f"{model}: no cache_storage_per_hour price; explicit caching cost unknown")
    if priced and no_batch_price:
        notes.append(f"{model}: no batch price; batch cost unknown")
    if family(model) == "gemini-2" and resolution != "default":
        notes.append("Gemini 2.x at a non-default media resolution is not cached explicitly (naru_gemini)")
    if not known:
        notes.append(f"{model}: not in the context-window table; assumed {window:,} tokens")
    if unpriced_in is not None:
        notes.append(f"{model}: not in the price table ({unpriced_in.source}); no cost")
    return notes


def _explicit_cache_cost(
    by_video: Mapping[str, list[TokenEstimate]],
    pricer: _Pricer,
    model: str,
    resolution: str,
    latency_s: float,
    concurrency: int,
) -> tuple[float | None, float | None, int]:
    """(total cost, of which storage, videos cached) with one explicit cache per video, as the
    adapter does it (providers/gemini/caching.py): a video below ``cache_min_tokens``, with a
    single question, or Gemini 2.x at a non-default resolution is asked uncached."""
    price = pricer.price
    if price is None or "cache_storage_per_hour" not in price:
        return None, None, 0
    minimum = cache_min_tokens(price) or 0
    refused = family(model) == "gemini-2" and resolution != "default"
    total = storage = 0.0
    cached_videos = 0
    for ests in by_video.values():
        media = ests[0].media_tokens
        audio = ests[0].audio_tokens
        use = not refused and len(ests) >= 2 and media >= minimum
        for est in ests:
            total += pricer.cost(est, cached=media if use else 0) or 0.0
        if use:
            cached_videos += 1
            total += request_cost(price, prompt_tokens=media, audio_tokens=audio) or 0.0  # the creation
            hours = math.ceil(len(ests) / max(1, concurrency)) * latency_s / 3600
            stored = cache_storage_cost(price, media, hours) or 0.0
            storage += stored
            total += stored
    return total, storage, cached_videos


def paper_questions(task: str) -> tuple[list[QuestionSpec], QuestionSpec, str]:
    """Questions standing in for the paper's data when no data directory is given.

    The paper gives totals only (146.8 h over 155 videos, 1,481 questions, videos of 30-240
    min; read from naru_eval/data_files/naru_paper.json, :func:`paper_totals`): every video is taken at the mean duration, the questions dealt round-robin over the
    155 videos (9 or 10 each; 500 for ``*_500`` tasks), and the overflow check is made on a
    4 h video. Token counts are linear in duration, so the totals are right to within the
    per-video rounding of ``floor(duration * fps)``. Returns (questions, longest, source).
    """
    paper = paper_totals()
    n_questions = paper.diagnostic_subset if task.endswith("_500") else paper.questions
    mean_s = paper.hours * 3600 / paper.videos
    qs = [QuestionSpec(f"video{i % paper.videos:03d}", mean_s) for i in range(n_questions)]
    longest_h = paper.longest_s / 3600
    src = (
        f"paper totals: {paper.hours} h over {paper.videos} videos (mean {mean_s / 60:.1f} min), "
        f"{n_questions:,} questions; longest request checked on a {longest_h:g} h video"
    )
    return qs, QuestionSpec(f"longest ({longest_h:g} h)", paper.longest_s), src
