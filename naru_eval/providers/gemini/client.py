"""The ``google-genai`` client: the key from the environment, the SDK's retries off, and what a
request may fail with (for the caller's retry classification)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from naru_eval.api.openai_client import api_key

if TYPE_CHECKING:
    from google import genai

T = TypeVar("T")

#: environment variables the key is read from, in order (as the SDK does)
KEY_ENV = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"


class TransientUpload(RuntimeError):
    """The SDK's upload broke off without an HTTP status (no upload URL, not finalized)."""

    retryable = True


class Call(Protocol):
    """The adapter's one API path (retries, the limiter, the breaker): ``call(fn, what)`` sends
    ``fn`` until it answers, and gives its answer."""

    def __call__(self, fn: Callable[[], T], what: str, /) -> T: ...


def api_key_from_env() -> str | None:
    return api_key(KEY_ENV)


def make_client(key: str, *, api_version: str, timeout: float, base_url: str | None) -> genai.Client:
    """A ``genai.Client`` for the Gemini API (not Vertex), one attempt per request."""
    from google import genai
    from google.genai import types

    opts = types.HttpOptions(
        api_version=api_version, timeout=int(timeout * 1000), retry_options=types.HttpRetryOptions(attempts=1)
    )
    if base_url:
        opts.base_url = base_url
    return genai.Client(vertexai=False, api_key=key, http_options=opts)


def genai_errors() -> tuple[type[BaseException], ...]:
    """What a Gemini request may fail with: the SDK's API errors, transport errors, a body that
    is not JSON, and an interrupted upload."""
    from google.genai import errors

    out: list[type[BaseException]] = [errors.APIError, json.JSONDecodeError, TimeoutError, ConnectionError]
    out.append(TransientUpload)
    for mod in ("httpx", "httpx2"):
        try:
            out.append(__import__(mod).HTTPError)
        except (ImportError, AttributeError):
            pass
    return tuple(out)
