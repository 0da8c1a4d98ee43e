"""One Gemini request and its reply: the parts sent (video first, then the question), the
generation config, and the answer, usage and cost read off a ``GenerateContentResponse``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, TypedDict

from naru_eval.providers.gemini.families import MEDIA_RESOLUTION_ENUM
from naru_eval.providers.gemini.pricing import request_cost

if TYPE_CHECKING:
    from google.genai import types

#: finish reasons that carry an answer; every other one is a failure (SAFETY, RECITATION, ...)
ANSWER_FINISH_REASONS = frozenset({"STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED", ""})


class NoAnswer(RuntimeError):
    """A reply without an answer (blocked, no candidate, a non-answer finish, empty): its usage
    is kept for the store."""

    def __init__(self, reason: str, usage: GeminiUsage) -> None:
        super().__init__(reason)
        self.usage = usage.copy()


@dataclass(frozen=True)
class RequestConfig:
    """What a request carries besides the parts (from the adapter's typed args): the video
    part's ``videoMetadata`` and the ``generationConfig``."""

    fps: float
    media_resolution: str = "default"
    content_layers: tuple[str, ...] | None = None
    thinking_budget: int | None = None
    thinking_level: str | None = None
    temperature: float | None = None
    seed: int | None = None
    max_output_tokens: int | None = None


def video_part(
    s: RequestConfig, uri: str, mime_type: str, layers: list[str] | None = None, per_part_resolution: bool = False
) -> types.Part:
    """``fileData`` + ``videoMetadata`` (fps, content layers); optionally the part's own
    ``mediaResolution`` (countTokens takes no generationConfig; Gemini 3 takes it per part)."""
    from google.genai import types

    chosen = layers if layers is not None else (list(s.content_layers) if s.content_layers else None)
    meta = types.VideoMetadata(
        fps=s.fps, content_layers=[types.VideoMetadataContentLayer(x) for x in chosen] if chosen else None
    )
    part = types.Part(file_data=types.FileData(file_uri=uri, mime_type=mime_type), video_metadata=meta)
    if per_part_resolution and s.media_resolution != "default":
        level = types.PartMediaResolutionLevel(MEDIA_RESOLUTION_ENUM[s.media_resolution])
        part.media_resolution = types.PartMediaResolution(level=level)
    return part


def contents(s: RequestConfig, video: tuple[str, str] | None, prompt: str) -> list[types.Content]:
    """The video part first (``video`` = (uri, mime type)), then the question; the question
    alone for a text-only (blind) request."""
    from google.genai import types

    parts = [video_part(s, *video)] if video is not None else []
    return [types.Content(role="user", parts=[*parts, types.Part(text=prompt)])]


def text_contents(parts: list[types.Part]) -> list[types.Content]:
    from google.genai import types

    return [types.Content(role="user", parts=parts)]


def text_part(text: str) -> types.Part:
    from google.genai import types

    return types.Part(text=text)


def generation_config(s: RequestConfig, cached_content: str | None = None) -> types.GenerateContentConfig:
    """The request's config; ``cached_content``: the name of the explicit cache holding the
    video (the request then carries the question alone)."""
    from google.genai import types

    cfg = types.GenerateContentConfig()  # the fields set below, and only they, are sent
    if cached_content is not None:
        cfg.cached_content = cached_content
    if s.media_resolution != "default":
        cfg.media_resolution = types.MediaResolution(MEDIA_RESOLUTION_ENUM[s.media_resolution])
    if s.thinking_budget is not None:
        cfg.thinking_config = types.ThinkingConfig(thinking_budget=s.thinking_budget)
    elif s.thinking_level is not None:
        cfg.thinking_config = types.ThinkingConfig(thinking_level=types.ThinkingLevel(s.thinking_level.upper()))
    if s.temperature is not None:
        cfg.temperature = s.temperature
    if s.seed is not None:
        cfg.seed = s.seed
    if s.max_output_tokens is not None:
        cfg.max_output_tokens = s.max_output_tokens
    return cfg


class _UsageBase(TypedDict):
    attempts: int
    input_tokens: int
    output_tokens: int
    thinking_tokens: int
    cached_tokens: int
    total_tokens: int
    input_by_modality: dict[str, int]  # TEXT / VIDEO / AUDIO
    estimated_input_tokens: int | None  # the preflight's estimate
    model_version: str | None
    response_id: str | None
    cost_usd: float | None  # None: no price (an unknown cost, never 0)


class GeminiUsage(_UsageBase, total=False):
    """The ``usage`` stored with each Gemini answer or failure (the response store's ``usage``
    column; naru_eval.providers.gemini.usage sums it)."""

    finish_reason: str | None
    block_reason: str | None
    batch_job: str  # answered through this batch job
    context_cache: str  # the explicit cache the question referenced


def usage_of(
    response: types.GenerateContentResponse,
    attempts: int,
    price: Mapping[str, float] | None,
    estimated: int | None,
    batch: bool = False,
) -> GeminiUsage:
    """Tokens, cost and provenance of a ``GenerateContentResponse`` (stored with the answer);
    ``batch``: priced at the Batch API's prices."""
    u = getattr(response, "usage_metadata", None)
    prompt = int(getattr(u, "prompt_token_count", 0) or 0)
    output = int(getattr(u, "candidates_token_count", 0) or 0)
    thinking = int(getattr(u, "thoughts_token_count", 0) or 0)
    cached = int(getattr(u, "cached_content_token_count", 0) or 0)
    by = modalities(getattr(u, "prompt_tokens_details", None))
    return {
        "attempts": attempts,
        "input_tokens": prompt,
        "output_tokens": output,
        "thinking_tokens": thinking,
        "cached_tokens": cached,
        "total_tokens": int(getattr(u, "total_token_count", 0) or (prompt + output + thinking)),
        "input_by_modality": by,
        "estimated_input_tokens": estimated,
        "model_version": getattr(response, "model_version", None),
        "response_id": getattr(response, "response_id", None),
        "cost_usd": request_cost(
            price,
            prompt_tokens=prompt,
            output_tokens=output,
            thinking_tokens=thinking,
            cached_tokens=cached,
            audio_tokens=by.get("AUDIO", 0),
            batch=batch,
        )
        if u is not None
        else None,
    }


def answer_text(
    response: types.GenerateContentResponse,
    attempts: int = 1,
    price: Mapping[str, float] | None = None,
    estimated: int | None = None,
    batch: bool = False,
) -> tuple[str, GeminiUsage]:
    """The answer and usage of a response, or NoAnswer: blocked prompt, no candidate, a non-answer
    finish (SAFETY, RECITATION, ...), or no text."""
    usage = usage_of(response, attempts, price, estimated, batch)
    candidates = getattr(response, "candidates", None) or []
    if not candidates:
        feedback = getattr(response, "prompt_feedback", None)
        reason = enum_value(getattr(feedback, "block_reason", None)) if feedback is not None else None
        usage["block_reason"] = reason
        if reason:
            msg = getattr(feedback, "block_reason_message", None)
            raise NoAnswer(f"gemini: prompt blocked (block_reason={reason}{': ' + msg if msg else ''})", usage)
        raise NoAnswer("gemini: the reply has no candidates (and no block reason)", usage)
    cand = candidates[0]
    finish = enum_value(getattr(cand, "finish_reason", None)) or ""
    usage["finish_reason"] = finish or None
    if finish not in ANSWER_FINISH_REASONS:
        raise NoAnswer(f"gemini: finish_reason={finish}: no answer", usage)
    content = getattr(cand, "content", None)
    parts = getattr(content, "parts", None) or []
    text = "".join(p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False))
    if not text.strip():
        hint = " (thinking may have used the whole output budget)" if finish == "MAX_TOKENS" else ""
        raise NoAnswer(f"gemini: empty answer (finish_reason={finish or 'none'}){hint}", usage)
    return text, usage


def enum_value(value: Enum | str | None) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def modalities(details: list[types.ModalityTokenCount] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in details or []:
        name = enum_value(getattr(d, "modality", None)) or "UNKNOWN"
        out[name] = out.get(name, 0) + int(getattr(d, "token_count", 0) or 0)
    return out
