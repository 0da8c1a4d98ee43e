"""Token and cost arithmetic for Gemini on NARU: one table of constants, one set of formulas.

Used by the ``naru_gemini`` adapter (the preflight that refuses a configuration overflowing the
context before any request is spent, and the cost of each answer) and by
``naru-eval estimate-cost`` (the expected tokens and dollars of a whole run before it starts).

How Gemini counts a video sent through the Files API (sources in :data:`TOKEN_SOURCES`):

* frames are sampled at ``videoMetadata.fps`` (1 fps when unset) over the file's timeline:
  ``frames = max(1, floor(duration_s * fps))``; each frame costs a fixed number of tokens that
  depends on the model family and ``mediaResolution`` (:data:`FRAME_TOKENS`), plus a small
  per-frame timestamp overhead (:data:`FRAME_OVERHEAD_TOKENS`);
* the audio track, when the file has one, costs :data:`AUDIO_TOKENS_PER_S` per second of the
  whole duration, whatever the fps or media resolution;
* the question's text costs about one token per Japanese character and one per ~4 ASCII
  characters (:func:`text_tokens`, an over-estimate on purpose).

Without a cache each question re-sends its video: ~10 questions per NARU video means ~10x the
video's tokens; the adapter's explicit cache (providers/gemini/caching.py) and the Batch API
(providers/gemini/batch.py) are priced here too (:func:`cache_storage_cost`, ``batch=``).
These are estimates; the adapter calibrates them once per run with ``countTokens`` and records
the true counts (``usageMetadata``) with every answer.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from naru_eval.api.prices import expand, match, price_table, provenance
from naru_eval.settings import settings
from naru_eval.store.responses import usage_by_run

# ----------------------------------------------------------------------------- the constants

#: tokens per sampled video frame, by model family and media resolution ("default": not sent)
FRAME_TOKENS: dict[str, dict[str, int]] = {
    # Gemini 2.x: 258 tokens per frame, 66 at MEDIA_RESOLUTION_LOW; medium and high are the
    # default for video (the SDK's enum doc: "LOW (64 tokens), MEDIUM (256), HIGH (zoomed
    # reframing with 256)").
    "gemini-2": {"default": 258, "low": 66, "medium": 258, "high": 258},
    # Gemini 3: video frames are capped at 70 tokens at low and medium (and, observed, by
    # default), 280 at high.
    "gemini-3": {"default": 70, "low": 70, "medium": 70, "high": 280},
}
#: audio tokens per second of the whole duration (any model, any resolution)
AUDIO_TOKENS_PER_S = 32
#: timestamp/metadata tokens per sampled frame (conservative; see TOKEN_SOURCES)
FRAME_OVERHEAD_TOKENS = 10

TOKEN_SOURCES: dict[str, str] = {
    "gemini-2 frames": "ai.google.dev video understanding docs, 'Technical details about videos': "
    "258 tokens per frame, 66 with media resolution low",
    "audio": "ai.google.dev video understanding docs: 32 tokens per second of audio",
    "overhead": "same page: ~300 tokens per second of video at default resolution (1 fps), i.e. "
    "258 + 32 + ~10 of metadata; 10 per frame is the assumption here",
    "gemini-3 frames": "ai.google.dev Gemini 3 developer guide and media-resolution docs: video "
    "70 tokens per frame at low/medium, 280 at high; the default (unset) observed at ~70 "
    "(discuss.ai.google.dev 'Media Resolution - Gemini API'). TO BE CHECKED: countTokens calibrates.",
}

#: input-token limit (context window) per model, from the ai.google.dev model pages
CONTEXT_WINDOWS: dict[str, int] = {
    "gemini-3-pro": 1_048_576,
    "gemini-3-flash": 1_048_576,
    "gemini-3.1-pro": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
}
DEFAULT_CONTEXT_WINDOW = 1_048_576

MEDIA_RESOLUTIONS = ("default", "low", "medium", "high")
#: the API enum value of each media resolution ("default" is not sent)
MEDIA_RESOLUTION_ENUM = {
    "low": "MEDIA_RESOLUTION_LOW",
    "medium": "MEDIA_RESOLUTION_MEDIUM",
    "high": "MEDIA_RESOLUTION_HIGH",
}

#: the paper's data set: 146.8 h over 155 videos of 30-240 min, 1,481 questions
PAPER_HOURS = 146.8
PAPER_VIDEOS = 155
PAPER_QUESTIONS = 1481
PAPER_LONGEST_S = 4 * 3600.0
#: a typical NARU MCQ prompt (Japanese question, four options, instruction), in characters
TYPICAL_PROMPT_CHARS = 300

# ---------------------------------------------------------------------------- model tables


def bare_model(model: str) -> str:
    """A model id as the tables spell it: lower case, without the API's ``models/`` prefix."""
    name = model.strip().lower()
    return name.split("/", 1)[1] if name.startswith("models/") else name


def canonical_model(model: str) -> str:
    """The row of the model tables (context windows, thinking) a model id falls under:
    ``models/gemini-3-flash-preview`` -> ``gemini-3-flash``.

    A family rule: the longest key of :data:`CONTEXT_WINDOWS` / :data:`THINKING` that prefixes
    the id wins, so ``gemini-2.5-flash-lite-preview-09-2025`` is ``gemini-2.5-flash-lite``; an id
    matching no key is returned bare. Prices never go through this: a model's price is its own
    entry's (:meth:`PriceTable.for_model`, exact matching).
    """
    name = bare_model(model)
    for key in sorted(set(CONTEXT_WINDOWS) | set(THINKING), key=len, reverse=True):
        if name == key or name.startswith(key + "-"):
            return key
    return name


def family(model: str) -> str:
    """``gemini-3`` for Gemini 3.x (and later), ``gemini-2`` otherwise (the token table's rows)."""
    m = re.match(r"gemini-(\d+)", canonical_model(model))
    return "gemini-3" if m and int(m.group(1)) >= 3 else "gemini-2"


def context_window(model: str) -> tuple[int, bool]:
    """(input-token limit, whether the model is in the table)."""
    key = canonical_model(model)
    if key in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[key], True
    return DEFAULT_CONTEXT_WINDOW, False


#: the thinking settings each model takes (ai.google.dev "Gemini thinking" and Gemini 3 guide,
#: read 2026-12): Gemini 2.5 takes ``thinkingBudget`` only, Gemini 3 ``thinkingLevel`` only; the
#: other one, or a value outside these, is a 400 on every request. ``budget`` is (min, max) of an
#: explicit budget; ``-1`` (dynamic) is always allowed, ``0`` (off) only where ``off`` is True.
THINKING: dict[str, dict[str, Any]] = {
    "gemini-2.5-pro": {"budget": (128, 32_768), "off": False},
    "gemini-2.5-flash": {"budget": (1, 24_576), "off": True},
    "gemini-2.5-flash-lite": {"budget": (512, 24_576), "off": True},
    "gemini-3-pro": {"levels": ("low", "high")},
    "gemini-3.1-pro": {"levels": ("low", "medium", "high")},
    "gemini-3-flash": {"levels": ("minimal", "low", "medium", "high")},
}
#: every level the SDK's ``ThinkingLevel`` enum has (3.6.1), minus UNSPECIFIED; a test checks it
THINKING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")
#: families without thinking: any thinking setting is refused
_NO_THINKING = re.compile(r"gemini-(1\.|2\.0)")


def check_thinking(model: str, budget: int | None, level: str | None) -> str | None:
    """Refuse a thinking setting ``model`` does not take (ValueError naming what it takes).

    Returns a warning for a model not in :data:`THINKING` (a newer family): its setting is sent
    as given, since refusing would block every model released after this table.
    """
    if budget is None and level is None:
        return None
    key = canonical_model(model)
    given = f"thinking_budget={budget}" if budget is not None else f"thinking_level={level}"
    if _NO_THINKING.match(key):
        raise ValueError(f"naru_gemini: {model} has no thinking; drop {given}")
    rule = THINKING.get(key)
    if rule is None:
        return (
            f"naru_gemini: {model} is not in the thinking table (Gemini 2.5: thinking_budget, Gemini 3: "
            f"thinking_level); {given} is sent as given, and the API answers 400 if the model does not take it"
        )
    if "levels" in rule:
        allowed = ", ".join(rule["levels"])
        if level is None:
            raise ValueError(
                f"naru_gemini: {model} takes thinking_level ({allowed}), not thinking_budget; thinking cannot be "
                "turned off with a budget (the API answers 400 on every request)"
            )
        if level not in rule["levels"]:
            raise ValueError(f"naru_gemini: {model} takes thinking_level in ({allowed}), got {level!r}")
        return None
    lo, hi = rule["budget"]
    allowed = f"-1 (dynamic){', 0 (off)' if rule['off'] else ''} or {lo}..{hi}"
    if budget is None:
        raise ValueError(f"naru_gemini: {model} takes thinking_budget ({allowed}), not thinking_level")
    if budget == -1 or (budget == 0 and rule["off"]) or lo <= budget <= hi:
        return None
    off = "" if rule["off"] else f" ({model} cannot turn thinking off)"
    raise ValueError(f"naru_gemini: {model} takes thinking_budget {allowed}, got {budget}{off}")


def normalise_resolution(value: Any) -> str:
    text = "default" if value in (None, "", "none", "None") else str(value).strip().lower()
    text = text.removeprefix("media_resolution_")
    if text == "unspecified":
        text = "default"
    if text not in MEDIA_RESOLUTIONS:
        raise ValueError(f"media_resolution must be one of {MEDIA_RESOLUTIONS}, got {value!r}")
    return text


# ------------------------------------------------------------------------------- estimates


def text_tokens(text: str) -> int:
    """An over-estimate of a prompt's tokens: 1 per non-ASCII character, 1 per 4 ASCII ones."""
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    return non_ascii + math.ceil((len(text) - non_ascii) / 4)


def frames_sampled(duration_s: float, fps: float) -> int:
    """Frames Gemini samples from ``duration_s`` at ``fps`` (as naru_eval.media.video.frames_for_fps)."""
    return max(1, int(duration_s * fps))


@dataclass(frozen=True)
class TokenEstimate:
    """The prompt tokens of one request: its video and its text."""

    duration_s: float
    fps: float
    frames: int
    frame_tokens: int  # per frame
    video_tokens: int  # frames x (frame tokens + overhead)
    audio_tokens: int
    text_tokens: int

    @property
    def media_tokens(self) -> int:
        return self.video_tokens + self.audio_tokens

    @property
    def total(self) -> int:
        return self.video_tokens + self.audio_tokens + self.text_tokens


def estimate_request(
    duration_s: float,
    *,
    model: str,
    fps: float,
    media_resolution: str = "default",
    audio: bool = True,
    prompt: str | None = None,
    prompt_chars: int | None = None,
) -> TokenEstimate:
    """Estimated prompt tokens of one question on a video of ``duration_s`` seconds."""
    res = normalise_resolution(media_resolution)
    per = FRAME_TOKENS[family(model)][res]
    frames = frames_sampled(duration_s, fps)
    if prompt is not None:
        ttok = text_tokens(prompt)
    else:
        ttok = int(prompt_chars if prompt_chars is not None else TYPICAL_PROMPT_CHARS)
    return TokenEstimate(
        duration_s=float(duration_s),
        fps=float(fps),
        frames=frames,
        frame_tokens=per,
        video_tokens=frames * (per + FRAME_OVERHEAD_TOKENS),
        audio_tokens=int(math.ceil(duration_s * AUDIO_TOKENS_PER_S)) if audio else 0,
        text_tokens=ttok,
    )


def max_fps_that_fits(
    duration_s: float, limit: int, *, model: str, media_resolution: str, audio: bool, text: int
) -> float:
    """The highest fps at which a ``duration_s`` video still fits ``limit`` tokens (0 if none)."""
    per = FRAME_TOKENS[family(model)][normalise_resolution(media_resolution)] + FRAME_OVERHEAD_TOKENS
    room = limit - text - (math.ceil(duration_s * AUDIO_TOKENS_PER_S) if audio else 0)
    if room < per:
        return 0.0
    return (room // per) / duration_s


# -------------------------------------------------------------------------------------- prices


@dataclass
class PriceTable:
    """``model -> prices`` (aliases as keys of their own), with the date and source they came from."""

    models: dict[str, dict[str, float]]
    as_of: str
    source: str

    def for_model(self, model: str) -> dict[str, float] | None:
        """The model's own prices (:func:`naru_eval.api.prices.match`: its id, an alias, or a dated
        snapshot of either); None, an unknown cost, for a model without an entry."""
        key = match(bare_model(model), self.models)
        return self.models[key] if key is not None else None


def load_prices(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The price table: ``path``, else ``$NARU_GEMINI_PRICES``, else the ``gemini`` entries of
    naru_eval/data_files/prices.json. An override file is ``{"as_of": ..., "source": ...,
    "models": {name: {field: USD per 1M tokens, "aliases": [...]}}}``."""
    path = path or settings().gemini_prices
    if path:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        models = {k.lower(): v for k, v in expand(raw["models"]).items()}
        return PriceTable(models, raw.get("as_of", "?"), str(path))
    as_of, source = provenance("gemini")
    return PriceTable(price_table("gemini"), as_of, source + " -- TO BE CHECKED before budgeting")


def request_cost(
    prices: Mapping[str, float] | None,
    *,
    prompt_tokens: int,
    output_tokens: int = 0,
    thinking_tokens: int = 0,
    cached_tokens: int = 0,
    audio_tokens: int = 0,
    batch: bool = False,
) -> float | None:
    """Dollars for one request (None without a price). Thinking tokens are billed as output;
    cached tokens at the cached price, split between audio and the rest in proportion.

    ``batch``: the Batch API's prices (``batch_*`` fields; cached tokens without a
    ``batch_cached_input`` price at the batch input price). A model without ``batch_input`` has
    an unknown batch cost (None), never the standard one."""
    if not prices:
        return None
    pre = "batch_" if batch else ""
    if batch and "batch_input" not in prices:
        return None
    long = prompt_tokens > prices.get("long_context_threshold", math.inf)

    def price(name: str, fallback: str | None = None) -> float:
        for key in ([f"{name}_long"] if long else []) + [name] + ([fallback] if fallback else []):
            if pre + key in prices:
                return float(prices[pre + key])
        return price(fallback) if fallback else 0.0

    cached = min(max(0, cached_tokens), prompt_tokens)
    frac = cached / prompt_tokens if prompt_tokens else 0.0
    audio = min(max(0, audio_tokens), prompt_tokens)
    other = prompt_tokens - audio
    dollars = (
        other * (1 - frac) * price("input")
        + audio * (1 - frac) * price("input_audio", "input")
        + other * frac * price("cached_input", "input")
        + audio * frac * price("cached_input_audio", "input_audio")
        + (output_tokens + thinking_tokens) * price("output")
    )
    return dollars / 1_000_000


def cache_storage_cost(prices: Mapping[str, float] | None, tokens: int, hours: float) -> float | None:
    """Dollars for keeping ``tokens`` in an explicit context cache for ``hours`` (None: no
    ``cache_storage_per_hour`` price, an unknown cost)."""
    if not prices or "cache_storage_per_hour" not in prices:
        return None
    return float(prices["cache_storage_per_hour"]) * max(0, tokens) * max(0.0, hours) / 1_000_000


def cache_ttl(
    n_questions: int, latency_s: float, concurrency: int, ttl_min_s: float = 300.0, ttl_max_s: float = 6 * 3600.0
) -> float:
    """Seconds an explicit cache of a video must live to serve its ``n_questions``: the questions
    in rounds of ``concurrency`` at twice ``latency_s`` each (retries, queueing), plus the
    minimum as a margin, at most ``ttl_max_s``. Storage is billed by the hour, so the cache is
    deleted after the last question anyway; the TTL only bounds what a crash leaves behind."""
    rounds = math.ceil(max(1, n_questions) / max(1, concurrency))
    return float(min(ttl_max_s, max(ttl_min_s, ttl_min_s + rounds * 2 * max(0.0, latency_s))))


def cache_min_tokens(prices: Mapping[str, float] | None) -> int | None:
    """The smallest explicit context cache the API accepts for the model (``cache_min_tokens``
    of its price entry); None when the table does not say (the API's 400 then decides)."""
    if not prices or "cache_min_tokens" not in prices:
        return None
    return int(prices["cache_min_tokens"])


# ------------------------------------------------------------------------------- usage sums

USAGE_FIELDS = ("input_tokens", "output_tokens", "thinking_tokens", "cached_tokens", "total_tokens")


@dataclass
class UsageTotals:
    """Summed usage of a set of requests (answers and failures that came back with usage)."""

    requests: int = 0
    ok: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0  # requests with tokens but no price
    by_modality: dict[str, int] = field(default_factory=dict)

    def add(self, usage: Mapping[str, Any] | None, ok: bool) -> None:
        self.requests += 1
        self.ok += int(ok)
        self.failed += int(not ok)
        if not usage:
            return
        for name in USAGE_FIELDS:
            setattr(self, name, getattr(self, name) + int(usage.get(name) or 0))
        for modality, n in (usage.get("input_by_modality") or {}).items():
            self.by_modality[modality] = self.by_modality.get(modality, 0) + int(n or 0)
        if usage.get("cost_usd") is not None:
            self.cost_usd += float(usage["cost_usd"])
        elif usage.get("input_tokens"):
            self.cost_unknown += 1

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cost_usd"] = round(self.cost_usd, 6)
        return out


def usage_from_store(path: str | os.PathLike[str], run_key: str | None = None) -> dict[str, UsageTotals]:
    """Usage summed per run key from a response store (``responses.usage``), read-only.

    Every answer the adapter stored carries its tokens and cost in the ``usage`` JSON column, so
    a run's totals survive crashes and reruns: a resumed run's answers from earlier runs count.
    """
    out: dict[str, UsageTotals] = {}
    for rk, rows in usage_by_run(path, None if run_key is None else [run_key]).items():
        totals = out[rk] = UsageTotals()
        for row in rows:
            totals.add(row.usage, row.status == "ok")
    return out


# -------------------------------------------------------------------------- run estimates


@dataclass
class RunEstimate:
    """Expected tokens and dollars of a whole run (``naru-eval estimate-cost``)."""

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
    notes: list[str] = field(default_factory=list)
    #: explicit context caching: each video cached once (creation at the input price), its
    #: questions at the cached price, storage for as long as its questions take
    cost_usd_explicit_cache: float | None = None
    cache_videos: int = 0  # videos that get a cache (the others are asked uncached)
    cache_storage_usd: float | None = None
    #: every question through the Batch API, at the batch price
    cost_usd_batch: float | None = None

    @property
    def input_tokens(self) -> int:
        return self.video_tokens + self.audio_tokens + self.text_tokens

    @property
    def fits(self) -> bool:
        return self.longest_request_tokens <= self.context_window

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(input_tokens=self.input_tokens, fits=self.fits)
        return out


@dataclass(frozen=True)
class QuestionSpec:
    """What a run estimate needs of one question."""

    video: str
    duration_s: float
    prompt: str | None = None


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
    prices: PriceTable | None = None,
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
    qs = list(questions)
    per_video: dict[str, int] = {}
    durations: dict[str, float] = {}
    vt = at = tt = 0
    cost = cost_cached = 0.0
    longest_t: tuple[int, str, float] = (0, "", 0.0)
    by_video: dict[str, list[TokenEstimate]] = {}
    batch: float | None = 0.0
    for q in qs:
        est = estimate_request(q.duration_s, model=model, fps=fps, media_resolution=res, audio=audio, prompt=q.prompt)
        by_video.setdefault(q.video, []).append(est)
        one_batch = request_cost(
            price,
            prompt_tokens=est.total,
            output_tokens=output_tokens,
            thinking_tokens=thinking_tokens,
            audio_tokens=est.audio_tokens,
            batch=True,
        )
        batch = None if batch is None or one_batch is None else batch + one_batch
        per_video[q.video] = per_video.get(q.video, 0) + 1
        durations[q.video] = q.duration_s
        vt += est.video_tokens
        at += est.audio_tokens
        tt += est.text_tokens
        longest_t = max(longest_t, (est.total, q.video, q.duration_s))
        one = request_cost(
            price,
            prompt_tokens=est.total,
            output_tokens=output_tokens,
            thinking_tokens=thinking_tokens,
            audio_tokens=est.audio_tokens,
        )
        if one is not None:
            cost += one
            # the first question on a video pays in full, the others hit the implicit cache
            repeat = per_video[q.video] > 1
            cached = request_cost(
                price,
                prompt_tokens=est.total,
                output_tokens=output_tokens,
                thinking_tokens=thinking_tokens,
                audio_tokens=est.audio_tokens,
                cached_tokens=est.media_tokens if repeat else 0,
            )
            cost_cached += cached or 0.0
    if longest is not None:
        est = estimate_request(
            longest.duration_s, model=model, fps=fps, media_resolution=res, audio=audio, prompt=longest.prompt
        )
        longest_t = (est.total, longest.video, longest.duration_s)
    explicit, storage, cached_videos = _explicit_cache_cost(
        by_video, price, model, res, output_tokens, thinking_tokens, latency_s, concurrency
    )
    window, known = context_window(model)
    n_questions = len(qs)
    notes = []
    if price is not None and explicit is None:
        notes.append(f"{model}: no cache_storage_per_hour price; explicit caching cost unknown")
    if price is not None and batch is None:
        notes.append(f"{model}: no batch price; batch cost unknown")
    if family(model) == "gemini-2" and res != "default":
        notes.append("Gemini 2.x at a non-default media resolution is not cached explicitly (naru_gemini)")
    if not known:
        notes.append(f"{model}: not in the context-window table; assumed {window:,} tokens")
    if price is None:
        notes.append(f"{model}: not in the price table ({prices.source}); no cost")
    if thinking_tokens == 0:
        notes.append("thinking tokens assumed 0 (they are billed as output; pass --thinking-tokens N per request)")
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
        video_tokens=vt,
        audio_tokens=at,
        text_tokens=tt,
        output_tokens=n_questions * output_tokens,
        thinking_tokens=n_questions * thinking_tokens,
        longest_video=longest_t[1],
        longest_s=longest_t[2],
        longest_request_tokens=longest_t[0],
        context_window=window,
        context_known=known,
        cost_usd=cost if price is not None else None,
        cost_usd_cached=cost_cached if price is not None else None,
        price_as_of=prices.as_of,
        price_source=prices.source,
        notes=notes,
        cost_usd_explicit_cache=explicit,
        cache_videos=cached_videos,
        cache_storage_usd=storage,
        cost_usd_batch=batch if price is not None else None,
    )


def _explicit_cache_cost(
    by_video: Mapping[str, list[TokenEstimate]],
    price: Mapping[str, float] | None,
    model: str,
    resolution: str,
    output_tokens: int,
    thinking_tokens: int,
    latency_s: float,
    concurrency: int,
) -> tuple[float | None, float | None, int]:
    """(total cost, of which storage, videos cached) with one explicit cache per video, as the
    adapter does it (providers/gemini/caching.py): a video below ``cache_min_tokens``, with a
    single question, or Gemini 2.x at a non-default resolution is asked uncached."""
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
            total += (
                request_cost(
                    price,
                    prompt_tokens=est.total,
                    output_tokens=output_tokens,
                    thinking_tokens=thinking_tokens,
                    audio_tokens=est.audio_tokens,
                    cached_tokens=media if use else 0,
                )
                or 0.0
            )
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
    min): every video is taken at the mean duration, the questions dealt round-robin over the
    155 videos (9 or 10 each; 500 for ``*_500`` tasks), and the overflow check is made on a
    4 h video. Token counts are linear in duration, so the totals are right to within the
    per-video rounding of ``floor(duration * fps)``. Returns (questions, longest, source).
    """
    n_questions = 500 if task.endswith("_500") else PAPER_QUESTIONS
    mean_s = PAPER_HOURS * 3600 / PAPER_VIDEOS
    qs = [QuestionSpec(f"video{i % PAPER_VIDEOS:03d}", mean_s) for i in range(n_questions)]
    src = (
        f"paper totals: {PAPER_HOURS} h over {PAPER_VIDEOS} videos (mean {mean_s / 60:.1f} min), "
        f"{n_questions:,} questions; longest request checked on a 4 h video"
    )
    return qs, QuestionSpec("longest (4 h)", PAPER_LONGEST_S), src
