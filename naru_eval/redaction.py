"""Secrets are never written: the one redaction of every text an API error may carry.

A server may echo the key it was sent (a 401 saying which key is wrong, a proxy quoting the
``Authorization`` header, a URL with ``?key=``). Every error text is made safe where it is made
(the API layer's retry classification and caller, the judge client, the Gemini provider) and
again where it is kept (the response store, the Gemini usage file), with :func:`redact`:

* every configured key: the value of each environment variable that holds one (the known ones,
  ``OPENAI_API_KEY``, ``NARU_JUDGE_API_KEY``, ``GOOGLE_API_KEY``, ``GEMINI_API_KEY``, ``HF_TOKEN``,
  and any other whose name ends in ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD`` or ``CREDENTIALS``)
  becomes ``[REDACTED <VARIABLE>]``. Secrets come from the environment only, so these are all
  the keys a run holds. A known key shorter than 4 characters, or another variable's value
  shorter than 8, is no key and is left alone; a key shorter than 8 is replaced only as a whole
  word;
* any text that looks like a key becomes ``[REDACTED]``: ``sk-…`` (OpenAI), ``AIza…`` (Google),
  ``hf_…`` (Hugging Face), ``Bearer …``, a ``key=``/``token=``/``signature=`` URL parameter,
  an ``api-key: …``/``x-goog-api-key: …``/``authorization: …`` header or field, a secret-named
  ``k=v`` (``hf_token=…``, ``client_secret=…``) and a URL's ``user:password@``.

:func:`redact_http_logs` makes the HTTP stack's own log records safe too (httpx, httpcore, the
SDKs: at DEBUG they print the response headers a server echoed the key in); the API layer's
caller installs it. :func:`redact_exception` redacts an exception in place (its arguments, ``message``, ``body`` and
``details``, and those of the exceptions it was raised from), so a traceback printed by whoever
catches it, or a ``str(e)`` made later, holds no key either. This module imports nothing of
ours: every layer may use it (docs/architecture.md).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from collections.abc import Mapping
from typing import TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

#: the variables known to hold a key (any other whose name says so is found by its name)
KEY_VARIABLES: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "NARU_JUDGE_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)
_SECRET_NAME = re.compile(r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
#: what a key looks like, whoever set it: (pattern, replacement)
_LOOKS_LIKE_A_KEY: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}"), "[REDACTED]"),
    (re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{20,}"), "[REDACTED]"),
    (re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}"), "[REDACTED]"),
    (re.compile(r"(?i)\b(bearer)\s+(?!\[REDACTED)[A-Za-z0-9._~+/=\-]{4,}"), r"\1 [REDACTED]"),
    (
        re.compile(
            r"(?i)([?&;](?:key|api[_-]?key|access[_-]?token|token|sig|signature|secret)=)(?!\[REDACTED)[^&\s'\"<>#]+"
        ),
        r"\1[REDACTED]",
    ),
    (
        re.compile(
            r"(?i)\b((?:x-goog-api-key|x-api-key|api[_-]?key|authorization|access[_-]?token)[\"']?\s*[:=]\s*[\"']?)"
            r"(?!bearer\b|\[REDACTED)[^\s'\",;}&]{4,}"
        ),
        r"\1[REDACTED]",
    ),
    # a URL's user:password@ (``base_url=http://user:pass@host/v1``)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)(?!\[REDACTED)[^/\s:@'\"<>]*:[^/\s@'\"<>]+@"), r"\1[REDACTED]@"),
    # a secret-named ``k=v`` or ``'k': 'v'`` (``hf_token=…``, ``client_secret=…``; not ``max_new_tokens=4``)
    (
        re.compile(
            r"(?i)\b((?:[a-z0-9]+[_-])*(?:key|apikey|token|secret|password|passwd)[\"']?\s*[:=]\s*[\"']?)"
            r"(?!\[REDACTED|\*\*\*|none\b|null\b|true\b|false\b)[^\s'\",;}&)]{4,}"
        ),
        r"\1[REDACTED]",
    ),
)
_MIN_KEY = 4
_WHOLE_WORD_BELOW = 8


def secret_names(env: Mapping[str, str] | None = None) -> list[str]:
    """The environment variables whose values are keys: a known key variable with at least 4
    characters, or another whose name says it holds a secret with at least 8 (``FOO_TOKEN=true``
    is no key, and redacting every ``true`` would mangle the text)."""
    env = os.environ if env is None else env
    return sorted(
        k
        for k, v in env.items()
        if (k in KEY_VARIABLES and len(v.strip()) >= _MIN_KEY)
        or (_SECRET_NAME.search(k) and len(v.strip()) >= _WHOLE_WORD_BELOW)
    )


@functools.lru_cache(maxsize=16)
def _pattern(secrets: tuple[tuple[str, str], ...]) -> tuple[re.Pattern[str] | None, dict[str, str]]:
    """One alternation of every key value (longest first), and value -> its variable."""
    if not secrets:
        return None, {}
    names: dict[str, str] = {}
    for name, value in secrets:
        names.setdefault(value, name)
    parts = []
    for value in sorted(names, key=len, reverse=True):
        esc = re.escape(value)
        parts.append(esc if len(value) >= _WHOLE_WORD_BELOW else rf"(?<![A-Za-z0-9]){esc}(?![A-Za-z0-9])")
    return re.compile("|".join(parts)), names


def _configured() -> tuple[tuple[str, str], ...]:
    return tuple((k, os.environ[k].strip()) for k in secret_names())


def redact(text: str) -> str:
    """``text`` with every configured key and anything that looks like a key replaced."""
    if not text:
        return text
    pattern, names = _pattern(_configured())
    if pattern is not None:
        text = pattern.sub(lambda m: f"[REDACTED {names.get(m.group(0), 'key')}]", text)
    for rx, repl in _LOOKS_LIKE_A_KEY:
        text = rx.sub(repl, text)
    return text


def holds_secret(text: str) -> bool:
    """Whether :func:`redact` would change ``text``: it holds a configured key, something
    key-shaped or a URL's password (a model arg's value that must never be written)."""
    return redact(text) != text


@overload
def redact_data(value: Mapping[K, V]) -> dict[K, V]: ...
@overload
def redact_data(value: T) -> T: ...
def redact_data(value: object) -> object:
    """A copy of a JSON-like value (dicts, lists, strings) with every string redacted: the same
    kind of value (a mapping becomes a dict), anything else as it is."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v) for v in value)
    return value


_FIELDS = ("message", "body", "details", "_message", "msg", "reason", "doc")


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__, getattr(e, "last_error", None)]
    return seen


def redact_exception(exc: BaseException) -> BaseException:
    """``exc`` and every exception it was raised from, redacted in place (arguments and the
    SDKs' ``message``/``body``/``details``): any later ``str()``, log line or traceback is safe."""
    for e in _chain(exc):
        try:
            e.args = tuple(redact_data(a) for a in e.args)
        except (TypeError, AttributeError):  # pragma: no cover - an exception refusing new args
            pass
        for name in _FIELDS:
            value = e.__dict__.get(name) if hasattr(e, "__dict__") else None
            if isinstance(value, (str, Mapping, list, tuple)):
                try:
                    setattr(e, name, redact_data(value))
                except (AttributeError, TypeError):  # a read-only property
                    pass
    return exc


#: the loggers of the HTTP clients and SDKs (their DEBUG records print request and response headers)
HTTP_LOGGERS: tuple[str, ...] = ("httpx", "httpcore", "openai", "google_genai", "google.genai", "urllib3")
_installed = threading.Lock()
_previous_factory: list[object] = []


def redact_http_logs() -> None:
    """Redact every log record of :data:`HTTP_LOGGERS` (and their children) when it is made: a
    log record factory, installed once per process, wrapping whatever factory was there."""
    with _installed:
        if _previous_factory:
            return
        previous = logging.getLogRecordFactory()
        _previous_factory.append(previous)

        def factory(*args: object, **kwargs: object) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            name = record.name
            if any(name == p or name.startswith(p + ".") or name.startswith(p + "2") for p in HTTP_LOGGERS):
                try:
                    record.msg, record.args = redact(record.getMessage()), ()
                except Exception:  # noqa: BLE001 - a record that cannot be formatted is left to logging
                    pass
            return record

        logging.setLogRecordFactory(factory)
