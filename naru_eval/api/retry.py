"""The one retry helper every API client uses: bounded attempts, full-jitter backoff.

    policy = RetryPolicy(max_attempts=6, base_delay=1.0, max_delay=60.0)
    result = call_with_retry(lambda: client.chat.completions.create(...), policy)

* Retried: HTTP 408, 409, 429 and every 5xx; timeouts; connection errors.
* Never retried: 400, 401, 403, 404 (and every other 4xx): the request itself is wrong, and
  asking again only costs money.
* The wait before retry ``n`` (1-based) is uniform in ``[0, min(max_delay, base_delay * 2**(n-1))]``
  ("full jitter"), unless the server sent a ``Retry-After`` (or ``retry-after-ms``) hint, or a
  ``google.rpc.RetryInfo`` ``retryDelay`` in the error body (Gemini): then it waits what the
  server asked, capped at ``max_delay``.
* When the call fails for good, :class:`RetryError` is raised (from the last error) with the
  number of attempts made and whether the bound was reached.

Errors are classified by duck typing, so the helper works for the ``openai`` SDK, httpx,
``google-genai`` and plain ``urllib`` alike: an HTTP status is read from ``status_code``,
``status`` or an integer ``code`` (or ``response.status_code``); timeouts and connection errors
by type (``TimeoutError``, ``ConnectionError``, or a class named ``*Timeout*`` or
``*Connect*Error``). An exception may force the decision with a boolean ``retryable``
attribute. ``sleep`` and ``rand`` are injectable so tests run instantly and deterministically.

Every client declares its retry settings once, through :class:`RetryArgs` (``naru_gemini``'s and
``naru_openai_compat``'s model args, the judge's ``JudgeConfig``): the same three names, the same
defaults (5 retries, a 1 s base delay, a 60 s ceiling), the same policy.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, Field

from naru_eval.redaction import redact, redact_exception
from naru_eval.settings import settings

T = TypeVar("T")

log = logging.getLogger(__name__)

#: HTTP statuses worth asking again (plus every 5xx).
RETRY_STATUSES: frozenset[int] = frozenset({408, 409, 429})
#: HTTP statuses that are never retried, whatever else the error says.
NEVER_RETRY_STATUSES: frozenset[int] = frozenset({400, 401, 403, 404})


#: the one full-jitter base delay of every client, seconds: the first retry waits up to 1 s, the
#: sixth up to 32 s; a server's ``Retry-After`` / ``RetryInfo`` overrides it
DEFAULT_BASE_DELAY = 1.0
DEFAULT_MAX_DELAY = 60.0
DEFAULT_MAX_RETRIES = 5


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` counts the first try (1 = no retry); delays are in seconds."""

    max_attempts: int = 6
    base_delay: float = DEFAULT_BASE_DELAY
    max_delay: float = DEFAULT_MAX_DELAY

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("RetryPolicy delays must be >= 0")

    def backoff(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Full-jitter delay before retry number ``retry`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** max(0, retry - 1)))
        return rand() * ceiling


class RetryArgs(BaseModel):
    """The retry settings of a client, declared once (mixed into the API adapters' model args
    and the judge's configuration)."""

    max_retries: int = Field(DEFAULT_MAX_RETRIES, ge=0, description="retries after the first try (429, 5xx, timeouts)")
    retry_base_delay: float = Field(DEFAULT_BASE_DELAY, ge=0, description="full-jitter backoff base, seconds")
    retry_max_delay: float = Field(DEFAULT_MAX_DELAY, ge=0, description="backoff ceiling, seconds")

    def retry_policy(self) -> RetryPolicy:
        """The bounded policy: ``max_retries`` retries after the first try."""
        return RetryPolicy(
            max_attempts=self.max_retries + 1, base_delay=self.retry_base_delay, max_delay=self.retry_max_delay
        )


class RetryError(RuntimeError):
    """A call failed for good: ``exhausted`` is True when every attempt was used."""

    def __init__(self, message: str, *, attempts: int, last_error: BaseException, exhausted: bool) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error
        self.exhausted = exhausted

    @property
    def status(self) -> int | None:
        return status_of(self.last_error)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an error carries, if any."""
    for attr in ("status_code", "status", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def _type_names(exc: BaseException) -> list[str]:
    return [cls.__name__ for cls in type(exc).__mro__]


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or any("Timeout" in name for name in _type_names(exc))


def is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError):
        return True
    return any(
        ("Connect" in name and "Error" in name) or name in ("RemoteProtocolError", "ReadError", "WriteError")
        for name in _type_names(exc)
    )


def is_retryable(exc: BaseException) -> bool:
    """The default classification (see the module docstring)."""
    forced = getattr(exc, "retryable", None)
    if isinstance(forced, bool):
        return forced
    status = status_of(exc)
    if status is not None:
        if status in NEVER_RETRY_STATUSES:
            return False
        return status in RETRY_STATUSES or 500 <= status <= 599
    return is_timeout(exc) or is_connection_error(exc)


def _headers_of(exc: BaseException) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        headers = getattr(exc, "headers", None)
    return headers if hasattr(headers, "get") else None


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` value: delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = str(value).strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if seconds == seconds else None  # NaN -> None


RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"


def parse_duration(value: object) -> float | None:
    """Seconds of a protobuf ``Duration`` in JSON (``"7s"``, ``"0.250s"``), else None."""
    text = str(value).strip() if isinstance(value, (str, int, float)) else ""
    if not text.endswith("s"):
        return None
    try:
        seconds = float(text[:-1])
    except ValueError:
        return None
    return max(0.0, seconds) if seconds == seconds else None  # NaN -> None


def retry_info_delay(body: object) -> float | None:
    """``retryDelay`` of a ``google.rpc.RetryInfo`` in a Google error body
    (``{"error": {"details": [{"@type": ".../google.rpc.RetryInfo", "retryDelay": "7s"}]}}``):
    how Gemini says how long to wait on a 429 (it sends no ``Retry-After``)."""
    error = body.get("error", body) if isinstance(body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    for d in details if isinstance(details, list) else []:
        if isinstance(d, Mapping) and d.get("@type") == RETRY_INFO_TYPE:
            return parse_duration(d.get("retryDelay", d.get("retry_delay")))
    return None


def retry_after(exc: BaseException) -> float | None:
    """The server's wait hint on an error, in seconds: ``retry-after-ms``, then ``Retry-After``,
    then a ``google.rpc.RetryInfo`` in the error body (google-genai's ``details``, openai's ``body``)."""
    headers = _headers_of(exc)
    if headers is not None:
        ms = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
        if ms is not None:
            try:
                return max(0.0, float(ms) / 1000.0)
            except ValueError:
                pass
        seconds = parse_retry_after(headers.get("retry-after") or headers.get("Retry-After"))
        if seconds is not None:
            return seconds
    for attr in ("details", "body"):
        seconds = retry_info_delay(getattr(exc, attr, None))
        if seconds is not None:
            return seconds
    return None


def describe_error(exc: BaseException) -> str:
    """``HTTP 401: <the error's text>`` (or its type), on one line, cut to 300 characters, with
    every key redacted (naru_eval.redaction): what logs, stores and exception messages show."""
    status = status_of(exc)
    text = redact(str(exc).strip().replace("\n", " "))
    if len(text) > 300:
        text = text[:300] + "..."
    head = f"HTTP {status}" if status is not None else type(exc).__name__
    return f"{head}: {text}" if text else head


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    retryable: Callable[[BaseException], bool] = is_retryable,
    hint: Callable[[BaseException], float | None] = retry_after,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    catch: tuple[type[BaseException], ...] = (Exception,),
) -> T:
    """Call ``fn`` until it returns, a non-retryable error occurs, or the attempts run out.

    ``on_retry(attempt, error, delay)`` is called before each wait (for logging). Raises
    :class:`RetryError` from the last error when the call failed for good.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except catch as exc:
            redact_exception(exc)  # a server may echo the key: nothing after this can show it
            if not retryable(exc):
                raise RetryError(
                    f"{describe_error(exc)} (not retryable, attempt {attempt})",
                    attempts=attempt,
                    last_error=exc,
                    exhausted=False,
                ) from exc
            if attempt >= policy.max_attempts:
                raise RetryError(
                    f"{describe_error(exc)} (gave up after {attempt} attempt(s))",
                    attempts=attempt,
                    last_error=exc,
                    exhausted=True,
                ) from exc
            wanted = hint(exc)
            delay = min(wanted, policy.max_delay) if wanted is not None else policy.backoff(attempt, rand)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            else:
                log.info("attempt %d failed (%s); retrying in %.2fs", attempt, describe_error(exc), delay)
            sleep(delay)


# ------------------------------------------------------------------- configuration errors
#: Client errors that, when every one of the first answered requests gets the same one, mean
#: the configuration (key, model name, settings) is wrong rather than one question.
CONFIG_ERROR_STATUSES: frozenset[int] = frozenset({400, 401, 403, 404})
#: How many answered requests decide (``NARU_CONFIG_ERROR_AFTER``; 0 turns the check off).
DEFAULT_CONFIG_ERROR_AFTER = 3


class ConfigurationError(RuntimeError):
    """The first answered requests all failed with the same client error: the run stops.

    Not a per-question failure: nothing of it is stored, so a rerun after fixing the
    configuration asks those questions again.
    """


def _chain(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and what it wraps: RetryError's last error, then each ``raise ... from`` cause."""
    out: list[BaseException] = []
    while exc is not None and all(exc is not e for e in out):
        out.append(exc)
        exc = exc.last_error if isinstance(exc, RetryError) else exc.__cause__
    return out


def api_message(exc: BaseException) -> str:
    """The API's own error message (openai ``body.message``, google-genai ``message``), else
    str(), with every key redacted."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, Mapping) else None
        if msg:
            return redact(str(msg).strip())
    msg = getattr(exc, "message", None)
    if isinstance(msg, str) and msg.strip():
        return redact(msg.strip())
    return redact(str(exc).strip())


def config_error_after_from_env() -> int:
    after = settings().config_error_after
    return DEFAULT_CONFIG_ERROR_AFTER if after is None else max(0, after)


class ConfigErrorBreaker:
    """Stops a run whose first ``after`` answered requests all failed with one client error.

    "Answered" means the API replied: a success, a refusal or empty reply, or an HTTP error.
    Transport trouble (connection errors, timeouts, 408/409/429/5xx after the retries) says
    nothing about the configuration and is not counted. The breaker decides once:

    * the first ``after`` answered requests all failed with the same status in
      :data:`CONFIG_ERROR_STATUSES` and the same API message: it *trips*. :meth:`failed`
      raises :class:`ConfigurationError` (with the API's message) for that request and for
      every later failure, and :meth:`check` raises it before any further request is sent;
    * anything else among them (one success, another status or message, a non-HTTP failure):
      it *disarms* for good, and every failure is a per-question failure as before.

    While it is undecided a caller that stores failures holds them back (:attr:`undecided`),
    so a tripped run stores none of them. Thread-safe; ``after=0`` disables it.
    """

    def __init__(self, what: str, after: int | None = None) -> None:
        import threading

        self.what = what
        self.after = config_error_after_from_env() if after is None else max(0, int(after))
        self._lock = threading.Lock()
        self._signature: tuple[int, str] | None = None
        self._count = 0
        self._state = "watching" if self.after > 0 else "disarmed"
        self._error: ConfigurationError | None = None

    @property
    def undecided(self) -> bool:
        with self._lock:
            return self._state == "watching"

    @property
    def tripped(self) -> bool:
        with self._lock:
            return self._state == "tripped"

    def check(self) -> None:
        """Before a request: raise the ConfigurationError if the breaker has tripped."""
        with self._lock:
            error = self._error
        if error is not None:
            raise ConfigurationError(str(error))

    def succeeded(self) -> None:
        with self._lock:
            if self._state == "watching":
                self._state = "disarmed"

    def failed(self, exc: BaseException) -> bool:
        """Record a failed request; raises ConfigurationError when this trips the breaker (or it
        had tripped). True when the failure counted towards a trip: a caller that stores
        failures holds it back while :attr:`undecided`. Transport failures do not count."""
        chain = _chain(exc)
        api = next((e for e in chain if not isinstance(e, RetryError) and status_of(e) is not None), None)
        status = status_of(api) if api is not None else None
        with self._lock:
            if self._state == "tripped":
                raise ConfigurationError(str(self._error))
            if self._state != "watching":
                return False
            if api is None or status is None:
                if not any(is_timeout(e) or is_connection_error(e) for e in chain):
                    self._state = "disarmed"  # a refusal, an empty reply, ...: the API answered
                return False
            if status not in CONFIG_ERROR_STATUSES:
                if not (status in RETRY_STATUSES or status >= 500):  # server trouble says nothing
                    self._state = "disarmed"
                return False
            signature = (status, api_message(api))
            if self._signature is None:
                self._signature = signature
            elif signature != self._signature:
                self._state = "disarmed"
                return False
            self._count += 1
            if self._count < self.after:
                return True
            self._state = "tripped"
            self._error = ConfigurationError(
                f"{self.what}: the first {self._count} answered request(s) all failed with HTTP {status}: "
                f"{signature[1][:500]} -- a configuration error (API key, model name or a model "
                "setting), not a per-question failure. Stopping; none of these failures was "
                "stored, so a rerun after fixing it asks them again. "
                "(NARU_CONFIG_ERROR_AFTER=0 turns this check off.)"
            )
            raise ConfigurationError(str(self._error))
