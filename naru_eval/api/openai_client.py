"""The one ``openai.OpenAI`` factory and the one reading of a chat completion's usage.

``naru_openai_compat`` and the judge both talk to OpenAI-compatible servers. Both build their
client here (the SDK's own retries off: :mod:`naru_eval.api.caller` retries; the key from the
environment only, never from arguments) and read token usage with :func:`usage_of`, from an SDK
object or a raw JSON body alike.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

from naru_eval.core.json_types import JSON, JSONMapping, as_int

if TYPE_CHECKING:
    from openai import OpenAI
    from pydantic import BaseModel

_REASONING_FAMILY = re.compile(r"^(?:[\w.-]+/)?(?:gpt-5|gpt-[6-9]|o\d)(?:[.\-_]|$)", re.I)


def is_reasoning_family(model: str) -> bool:
    """gpt-5* (and later) and o-series models: they reject a non-default ``temperature``."""
    return bool(_REASONING_FAMILY.match(model.strip()))


class TokenUsage(TypedDict, total=False):
    """A chat completion's tokens (the openai ``usage``, flattened by :func:`usage_of`), as the
    judge cache keeps them; ``batch``: answered by a Batch API job."""

    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cached_tokens: int
    reasoning_tokens: int
    batch: bool


def api_key(env: Sequence[str]) -> str | None:
    """The first non-empty of the environment variables ``env``."""
    for name in env:
        value = (os.environ.get(name) or "").strip()
        if value:
            return value
    return None


def make_openai_client(
    base_url: str,
    *,
    timeout: float,
    key_env: Sequence[str] = ("OPENAI_API_KEY",),
    who: str = "openai",
    info: Callable[[str], object] | None = None,
) -> OpenAI:
    """An ``openai.OpenAI`` client for ``base_url`` with the SDK's retries off.

    Without a key in ``key_env`` the placeholder ``EMPTY`` is sent (local servers take any key),
    and ``info`` is told so, naming the variables, never a value.
    """
    from openai import OpenAI

    key = api_key(key_env)
    if not key and info is not None:
        info(f"{who}: {' / '.join(key_env)} is not set; sending the placeholder 'EMPTY'")
    return OpenAI(api_key=key or "EMPTY", base_url=base_url, max_retries=0, timeout=timeout)


def openai_errors() -> tuple[type[BaseException], ...]:
    """What an OpenAI-compatible request fails with: the SDK's errors, and a 200 whose body is not JSON."""
    import openai

    return (openai.OpenAIError, json.JSONDecodeError)


def _as_mapping(value: BaseModel | JSON) -> JSONMapping:
    """An SDK object's JSON (``model_dump``), a JSON object as it is; anything else none."""
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else {}


def usage_of(usage: BaseModel | JSON) -> TokenUsage:
    """Tokens of a completion's ``usage`` (an SDK ``CompletionUsage`` or its JSON): prompt,
    completion and total, plus cached and reasoning tokens where the server reports them."""
    u = _as_mapping(usage)
    out: TokenUsage = {
        "prompt_tokens": as_int(u.get("prompt_tokens")),
        "completion_tokens": as_int(u.get("completion_tokens")),
        "total_tokens": as_int(u.get("total_tokens")),
    }
    cached = as_int(_as_mapping(u.get("prompt_tokens_details")).get("cached_tokens"))
    if cached is not None:
        out["cached_tokens"] = cached
    reasoning = as_int(_as_mapping(u.get("completion_tokens_details")).get("reasoning_tokens"))
    if reasoning is not None:
        out["reasoning_tokens"] = reasoning
    return out
