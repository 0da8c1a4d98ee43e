"""The one path every API call takes: retry, adaptive concurrency, logging, the config breaker.

The Gemini adapter, ``naru_openai_compat`` and the judge build one :class:`ApiCaller` each and
send every request through :meth:`ApiCaller.call`:

* **retry**: bounded, full-jitter backoff honouring the server's wait hints, classified by
  :mod:`naru_eval.api.retry` (the one place that decides what is worth asking again);
* **limiter**: each *attempt* holds a slot of the endpoint+model's
  :class:`~naru_eval.api.limiter.AdaptiveLimiter`; a 429 halves it, a success grows it;
* **logging**: one warning per retry, naming the client, the request and the error's status
  and text; a server may echo the key in its error, so every error is redacted the moment it is
  caught (:mod:`naru_eval.redaction`, in :func:`~naru_eval.api.retry.call_with_retry`), before any
  log line, stored failure or exception message is made of it;
* **breaker**: with a :class:`~naru_eval.api.retry.ConfigErrorBreaker`, a tripped breaker stops
  the call before anything is sent, and a failure for good is shown to it (which raises
  :class:`~naru_eval.api.retry.ConfigurationError` when the configuration is wrong). The model
  adapters leave it out: their base class holds failures back while its breaker is undecided;
* **usage**: :class:`Called` carries the value with the attempts it took and the seconds spent,
  which the clients store with each answer.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from naru_eval.api.limiter import AdaptiveLimiter
from naru_eval.api.retry import (
    ConfigErrorBreaker,
    RetryError,
    RetryPolicy,
    call_with_retry,
    describe_error,
    is_retryable,
    retry_after,
    status_of,
)
from naru_eval.redaction import redact_http_logs

T = TypeVar("T")


@dataclass(frozen=True)
class Called(Generic[T]):
    """A call's value, how many attempts it took and how long it ran (for the usage record)."""

    value: T
    attempts: int
    seconds: float


class ApiCaller:
    """Retry + limiter + logging (+ breaker) around one client's requests; thread-safe.

    ``sleep`` is looked up at each wait, so a client may hand in ``lambda s: self.sleep(s)`` and
    tests may replace its ``sleep`` after construction. ``warn`` receives each retry's message
    (a loguru or logging method).
    """

    def __init__(
        self,
        name: str,
        policy: RetryPolicy,
        *,
        catch: tuple[type[BaseException], ...] | Callable[[], tuple[type[BaseException], ...]] = (Exception,),
        retryable: Callable[[BaseException], bool] = is_retryable,
        limiter: AdaptiveLimiter | None = None,
        breaker: ConfigErrorBreaker | None = None,
        warn: Callable[[str], object] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.name = name
        self.policy = policy
        self._catch = catch
        self.retryable = retryable
        self.limiter = limiter
        self.breaker = breaker
        self.warn = warn or logging.getLogger("naru_eval.api").warning
        self.sleep = sleep
        self.rand = rand
        redact_http_logs()  # the HTTP stack's DEBUG records quote response headers (an echoed key)

    def catch(self) -> tuple[type[BaseException], ...]:
        """The exceptions a request may fail with (resolved late: the SDK is imported on first use)."""
        return self._catch() if callable(self._catch) else self._catch

    def call(
        self,
        fn: Callable[[], T],
        what: str,
        *,
        policy: RetryPolicy | None = None,
        on_failure: Callable[[RetryError], object] | None = None,
    ) -> Called[T]:
        """Send ``fn`` until it returns or fails for good (:class:`~naru_eval.api.retry.RetryError`).

        ``on_failure`` sees a failure for good before the breaker does (which may turn it into a
        :class:`~naru_eval.api.retry.ConfigurationError`): a client counts it either way.
        """
        policy = policy or self.policy
        if self.breaker is not None:
            self.breaker.check()  # tripped: nothing more is sent
        attempts = 0
        started = time.monotonic()

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            lim = self.limiter
            if lim is None:
                return fn()
            epoch = lim.acquire()
            try:
                value = fn()
            except BaseException as e:
                if status_of(e) == 429:
                    lim.throttled(epoch)
                raise
            finally:
                lim.release()
            lim.succeeded()
            return value

        def on_retry(n: int, exc: BaseException, delay: float) -> None:
            self.warn(
                f"{self.name}: {what}: attempt {n}/{policy.max_attempts} failed "
                f"({describe_error(exc)}); retrying in {delay:.1f}s"
            )

        try:
            value = call_with_retry(
                attempt,
                policy,
                retryable=self.retryable,
                hint=retry_after,
                sleep=lambda s: self.sleep(s),
                rand=self.rand,
                on_retry=on_retry,
                catch=self.catch(),
            )
        except RetryError as e:
            if on_failure is not None:
                on_failure(e)
            if self.breaker is not None:
                self.breaker.failed(e)  # raises ConfigurationError when the configuration is wrong
            raise
        if self.breaker is not None:
            self.breaker.succeeded()
        return Called(value, attempts, time.monotonic() - started)
