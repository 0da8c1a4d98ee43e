"""The one API path (naru_eval.api.caller), through the real ``openai`` SDK against the loopback stub:
retries with the server's hints, the adaptive limiter fed by each attempt, the config-error breaker,
and retry logs that name the request but never the key."""

from __future__ import annotations

import threading

import pytest

from naru_eval.api.caller import ApiCaller
from naru_eval.api.limiter import AdaptiveLimiter, clear_limiters, limiter_for
from naru_eval.api.openai_client import make_openai_client, openai_errors, usage_of
from naru_eval.api.retry import ConfigErrorBreaker, ConfigurationError, RetryError, RetryPolicy
from tests.helpers.stubs import OpenAIStub

pytestmark = pytest.mark.api

FAKE_KEY = "sk-naru-caller-test-0123456789abcdef-SECRET"
MSGS = [{"role": "user", "content": "Which letter?"}]


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)


def make(stub: OpenAIStub, **kw) -> tuple[ApiCaller, list[float], list[str]]:
    sleeps: list[float] = []
    warnings: list[str] = []
    client = make_openai_client(stub.base_url, timeout=10)
    caller = ApiCaller(
        "test",
        kw.pop("policy", RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=5.0)),
        catch=openai_errors,
        sleep=sleeps.append,
        warn=warnings.append,
        **kw,
    )
    caller.client = client  # type: ignore[attr-defined]
    return caller, sleeps, warnings


def ask(caller: ApiCaller):
    return lambda: caller.client.chat.completions.create(model="stub", messages=MSGS, max_tokens=4)  # type: ignore[attr-defined]


def test_retries_feed_the_limiter_and_log_without_the_key():
    with OpenAIStub(statuses=[429, 503], retry_after=3) as stub:
        limiter = AdaptiveLimiter(cap=8)
        caller, sleeps, warnings = make(stub, limiter=limiter)
        called = caller.call(ask(caller), "question q1")
        assert [r.status for r in stub.chat_requests()] == [429, 503, 200]
    assert called.attempts == 3 and called.value.choices[0].message.content == "A"
    assert sleeps == [3.0, 3.0]  # Retry-After honoured (the SDK's own retries are off)
    assert limiter.cuts == 1 and limiter.limit == 4.25  # halved on the 429 (8 -> 4), +1/4 for the success
    assert limiter.in_flight == 0
    assert len(warnings) == 2 and "test: question q1: attempt 1/4 failed (HTTP 429" in warnings[0]
    assert all(FAKE_KEY not in w for w in warnings)
    assert usage_of(called.value.usage)["completion_tokens"] == 1


def test_gives_up_and_a_400_is_not_retried():
    with OpenAIStub(statuses=[500] * 9) as stub:
        caller, sleeps, _ = make(stub, policy=RetryPolicy(max_attempts=3, base_delay=0.1))
        with pytest.raises(RetryError, match="gave up after 3") as err:
            caller.call(ask(caller), "q")
        assert err.value.attempts == 3 and len(stub.chat_requests()) == 3 and len(sleeps) == 2
    with OpenAIStub(statuses=[400]) as stub:
        caller, sleeps, _ = make(stub)
        with pytest.raises(RetryError, match="not retryable"):
            caller.call(ask(caller), "q")
        assert len(stub.chat_requests()) == 1 and sleeps == []


def test_the_breaker_trips_on_one_client_error_and_then_sends_nothing():
    with OpenAIStub(statuses=[401] * 3) as stub:
        failures: list[RetryError] = []
        caller, _, _ = make(stub, breaker=ConfigErrorBreaker("test", after=2))
        with pytest.raises(RetryError):
            caller.call(ask(caller), "q1", on_failure=failures.append)
        with pytest.raises(ConfigurationError, match="HTTP 401: stub error 401"):
            caller.call(ask(caller), "q2", on_failure=failures.append)
        with pytest.raises(ConfigurationError):
            caller.call(ask(caller), "q3", on_failure=failures.append)
        assert len(stub.chat_requests()) == 2  # the tripped breaker stopped q3 before it was sent
    assert len(failures) == 2  # each failure for good is counted before the breaker sees it


def test_a_success_disarms_the_breaker():
    with OpenAIStub(statuses=[200, 401, 401, 401]) as stub:
        caller, _, _ = make(stub, breaker=ConfigErrorBreaker("test", after=2))
        caller.call(ask(caller), "ok")
        for _ in range(3):
            with pytest.raises(RetryError):
                caller.call(ask(caller), "q")


def test_the_limiter_bounds_attempts_in_flight():
    with OpenAIStub(hold_after=0) as stub:
        limiter = AdaptiveLimiter(cap=3)
        caller, _, _ = make(stub, limiter=limiter)
        threads = [threading.Thread(target=caller.call, args=(ask(caller), f"q{i}")) for i in range(6)]
        for t in threads:
            t.start()
        import time

        deadline = time.monotonic() + 10
        while len(stub.held()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # a 4th request would have arrived by now
        assert len(stub.held()) == 3 and limiter.in_flight == 3
        stub.release()
        for t in threads:
            t.join()
        assert stub.max_in_flight == 3 and len(stub.chat_requests()) == 6


def test_one_limiter_per_endpoint_and_model():
    clear_limiters()
    a = limiter_for("http://h:1/v1/", "m", 8)
    assert limiter_for("http://h:1/v1", "m", 8) is a  # the same server and model share the limit
    assert limiter_for("http://h:1/v1", "other", 8) is not a
    assert limiter_for("http://h:2/v1", "m", 8) is not a
    a.throttled(a.acquire())
    a.release()
    assert limiter_for("http://h:1/v1", "m", 16).limit == 4.0  # a cut limit stays cut for a new client
    assert a.cap == 16


def test_adaptive_limiter_halves_on_429_and_grows_slowly():
    lim = AdaptiveLimiter(cap=8)
    epochs = [lim.acquire() for _ in range(8)]
    assert lim.limit == 8 and lim.in_flight == 8
    for e in epochs:  # a burst of 429s from requests of one epoch halves once
        lim.throttled(e)
        lim.release()
    assert lim.limit == 4 and lim.cuts == 1 and lim.in_flight == 0
    lim.throttled(lim.acquire())
    lim.release()
    assert lim.limit == 2 and lim.cuts == 2
    grown = []
    for _ in range(6):
        lim.succeeded()
        grown.append(int(lim.limit))
    assert grown == [2, 2, 3, 3, 3, 4]  # +1 per window of successes
    for _ in range(100):
        lim.succeeded()
    assert lim.limit == 8  # the cap
