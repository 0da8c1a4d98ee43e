"""The judge client: retries, concurrency bound, sampling settings, cache keys, usage and cost."""

from __future__ import annotations

import os
import threading

import pytest

from naru_eval.api.openai_client import is_reasoning_family
from naru_eval.judge.client import JudgeClient
from naru_eval.judge.config import JudgeConfig, cost_usd, env_fingerprint, load_prices
from naru_eval.judge.prompts import VERIFY_PROMPT_VERSION
from naru_eval.judge.schemas import FactList
from naru_eval.store.judge_cache import JudgeStore
from tests.helpers.judge import item
from tests.helpers.stubs import OpenAIStub

pytestmark = pytest.mark.api

MSGS = [{"role": "system", "content": "s"}, {"role": "user", "content": "<<<REFERENCE>>>\nA. B.\n<<<END REFERENCE>>>"}]


def client(stub: OpenAIStub, tmp_path, **kw) -> tuple[JudgeClient, list[float]]:
    kw.setdefault("retry_base_delay", 0.5)
    cfg = JudgeConfig(base_url=stub.base_url, cache_path=str(tmp_path / "c.sqlite"), **kw)
    sleeps: list[float] = []
    return JudgeClient(cfg, JudgeStore(cfg.cache_path), sleep=sleeps.append), sleeps


def test_429_and_503_are_retried_with_backoff(tmp_path, fake):
    with OpenAIStub(responder=fake, statuses=[429, 429, 503]) as stub:
        c, sleeps = client(stub, tmp_path, max_retries=5)
        r = c.call("facts", MSGS, FactList, prompt_version="v")
        assert [q.status for q in stub.chat_requests()] == [429, 429, 503, 200]
    assert r.parse(FactList)[0].facts == ["A.", "B."]
    assert len(sleeps) == 3 and all(0 <= s <= 2.0 for s in sleeps)


def test_retry_after_is_honoured_and_bounded(tmp_path, fake):
    with OpenAIStub(responder=fake, statuses=[429], retry_after=7) as stub:
        c, sleeps = client(stub, tmp_path)
        c.call("facts", MSGS, FactList, prompt_version="v")
    assert sleeps == [7.0]
    with OpenAIStub(responder=fake, statuses=[429] * 10) as stub:
        c, sleeps = client(stub, tmp_path / "b", max_retries=2)
        from naru_eval.judge.client import JudgeUnavailable

        with pytest.raises(JudgeUnavailable, match="gave up after 3"):
            c.call("facts", MSGS, FactList, prompt_version="v")
        assert len(stub.chat_requests()) == 3  # the SDK's own retries are off
    assert c.store.count_calls() == 0  # transport failures are never cached


def test_400_is_not_retried(tmp_path, fake):
    from naru_eval.judge.client import JudgeUnavailable

    with OpenAIStub(responder=fake, statuses=[400]) as stub:
        c, sleeps = client(stub, tmp_path)
        with pytest.raises(JudgeUnavailable, match="not retryable"):
            c.call("facts", MSGS, FactList, prompt_version="v")
        assert len(stub.chat_requests()) == 1 and sleeps == []


def test_concurrency_bound(tmp_path):
    """At most `concurrency` requests in flight (16 by default), and the bound is reached."""
    import time

    with OpenAIStub(responder=lambda r: '{"facts": ["x"]}', hold_after=0) as stub:
        cfg = JudgeConfig(base_url=stub.base_url, cache_path=str(tmp_path / "c.sqlite"))
        assert cfg.concurrency == 16
        c = JudgeClient(cfg, JudgeStore(cfg.cache_path))
        threads = [
            threading.Thread(
                target=c.call,
                args=("facts", [{"role": "user", "content": f"q{i}"}], FactList),
                kwargs={"prompt_version": "v"},
            )
            for i in range(40)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while len(stub.held()) < 16 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # a 17th request would have arrived by now
        assert len(stub.held()) == 16
        stub.release()
        for t in threads:
            t.join()
        assert len(stub.chat_requests()) == 40
        assert stub.max_in_flight == 16


def test_concurrency_bound_in_judge_many(make_judge, stub):
    stub.latency = 0.1
    j = make_judge(concurrency=5)
    items = [item(f"q{i}", question=f"What happens in scene {i}?") for i in range(20)]
    j.judge_many([(it, it.reference) for it in items])
    assert stub.max_in_flight == 5


def test_sampling_settings_are_explicit(tmp_path, fake):
    with OpenAIStub(responder=fake) as stub:
        c, _ = client(stub, tmp_path, model="gpt-5.5", temperature=0.7)
        c.call("facts", MSGS, FactList, prompt_version="v")
        body = stub.chat_requests()[-1].body
        assert "temperature" not in body  # gpt-5 family rejects a non-default temperature
        assert body["reasoning_effort"] == "medium" and body["max_completion_tokens"] == 8192
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "FactList"
        assert body["response_format"]["json_schema"]["strict"] is True
        c2, _ = client(stub, tmp_path / "b", model="gpt-4o-mini", seed=7)
        c2.call("facts", MSGS, FactList, prompt_version="v")
        body = stub.chat_requests()[-1].body
        assert body["temperature"] == 0.0 and body["seed"] == 7 and "reasoning_effort" not in body
    assert is_reasoning_family("gpt-5.5") and is_reasoning_family("o3-mini") and is_reasoning_family("openai/gpt-5")
    assert not is_reasoning_family("gpt-4o") and not is_reasoning_family("qwen3-vl")


def test_usage_fingerprint_and_cost_recorded(tmp_path, fake):
    with OpenAIStub(responder=fake, fingerprint="fp_judge_1") as stub:
        c, _ = client(stub, tmp_path, model="gpt-5")
        r = c.call("facts", MSGS, FactList, prompt_version="v")
        again = c.call("facts", MSGS, FactList, prompt_version="v")
        assert len(stub.chat_requests()) == 1
    assert r.system_fingerprint == "fp_judge_1" and again.system_fingerprint == "fp_judge_1"
    assert r.usage["prompt_tokens"] > 0 and r.usage["completion_tokens"] > 0
    assert not r.cached and again.cached
    p = load_prices(None)["gpt-5"]
    want = (r.usage["prompt_tokens"] * p["input"] + r.usage["completion_tokens"] * p["output"]) / 1e6
    assert r.cost_usd == pytest.approx(want)
    s = c.ledger.summary()
    assert s.total.calls == 1 and s.total.cached == 1
    assert s.total.cost_usd == pytest.approx(want) and s.total.nominal_cost_usd == pytest.approx(2 * want)
    assert s.system_fingerprints == {"fp_judge_1": 2}


def test_an_unpriced_judge_costs_unknown_never_another_models_price(tmp_path, fake, capsys):
    """gpt-5.5 has no dated price in the table: its cost is None and shown as unknown."""
    with OpenAIStub(responder=fake) as stub:
        c, _ = client(stub, tmp_path, model="gpt-5.5")
        r = c.call("facts", MSGS, FactList, prompt_version="v")
    assert r.cost_usd is None
    total = c.ledger.summary().total
    assert total.unpriced == 1 and total.cost_usd is None and total.nominal_cost_usd is None
    from naru_eval.cli.judge import _usage_line

    assert "cost now unknown, from scratch unknown, 1 unpriced" in _usage_line(c.ledger.summary())


def test_prices_are_dated_data_with_a_source_and_match_exactly():
    from naru_eval.api.prices import entries

    table = entries("openai")
    assert table and all(e.get("as_of") and e.get("source", "").startswith("https://") for e in table.values())
    for e in entries("gemini").values():
        assert e.get("as_of") and e.get("source", "").startswith("https://")
    prices = load_prices('{"my-judge": {"input": 2, "output": 4, "as_of": "2026-01-01", "source": "my page"}}')
    assert cost_usd("my-judge", {"prompt_tokens": 1_000_000, "completion_tokens": 500_000}, prices) == 4.0
    assert cost_usd("gpt-5-2025-08-07", {"prompt_tokens": 1_000_000}, prices) == 1.25  # a dated snapshot
    assert cost_usd("mystery-model", {"prompt_tokens": 10}, prices) is None
    assert cost_usd("gpt-5.5", {"prompt_tokens": 10}, prices) is None  # not priced as gpt-5 was
    with_55 = load_prices('{"gpt-5.5": {"input": 5, "output": 30}}')
    assert cost_usd("gpt-5.5", {"prompt_tokens": 1_000_000}, with_55) == 5.0
    assert cost_usd("gpt-5.5-pro", {"prompt_tokens": 10}, with_55) is None  # never a prefix match
    assert cost_usd("gpt-5-mini", {"prompt_tokens": 1_000_000}, with_55) == 0.25  # its own entry
    with pytest.raises(ValueError):
        load_prices('{"x": {"input": 1}}')


def test_the_price_file_ships_as_package_data():
    from pathlib import Path

    import tomllib

    from naru_eval.providers.gemini.pricing import load_prices

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.json" in data["naru_eval.data_files"]
    table = load_prices()
    assert table.models["gemini-2.5-flash"]["input"] > 0 and table.as_of[:2] == "20" and "https://" in table.source


@pytest.mark.parametrize(
    "model,effort,ok",
    [
        ("gpt-5", "minimal", True),
        ("gpt-5.5", "minimal", False),  # gpt-5.1 and later refuse minimal
        ("gpt-5.1", "minimal", False),
        ("gpt-5.5", "none", True),
        ("gpt-5.5", "xhigh", True),  # an SDK value the old list refused
        ("gpt-5.5-pro", "medium", False),  # -pro models take high only
        ("gpt-5-pro", "high", True),
        ("gpt-5.5", "extreme", False),  # not a value of the SDK's type
    ],
)
def test_reasoning_effort_is_checked_against_the_model_family(model, effort, ok):
    from naru_eval.judge.config import sdk_reasoning_efforts

    assert {"none", "minimal", "low", "medium", "high", "xhigh"} <= set(sdk_reasoning_efforts())
    if ok:
        assert JudgeConfig(model=model, reasoning_effort=effort).request_params()["reasoning_effort"] == effort
    else:
        with pytest.raises(ValueError, match=f"{effort!r} is not one {model} takes; allowed: "):
            JudgeConfig(model=model, reasoning_effort=effort)


def test_pro_models_default_to_high_and_the_effort_reaches_the_api(tmp_path, fake):
    assert JudgeConfig(model="gpt-5.5-pro").request_params()["reasoning_effort"] == "high"
    with OpenAIStub(responder=fake) as stub:
        c, _ = client(stub, tmp_path, model="gpt-5.5", reasoning_effort="xhigh")
        c.call("facts", MSGS, FactList, prompt_version="v")
        assert stub.chat_requests()[-1].body["reasoning_effort"] == "xhigh"


def test_a_configuration_error_stops_the_judge_once(tmp_path, fake):
    """401 on the first three answered requests: ConfigurationError with the API's message, and
    nothing more is sent; a per-question 400 after a success stays a per-item failure."""
    from naru_eval.api.retry import ConfigurationError
    from naru_eval.judge.client import JudgeUnavailable

    with OpenAIStub(responder=fake, statuses=[401] * 10) as stub:
        c, _ = client(stub, tmp_path)
        for i in range(2):
            with pytest.raises(JudgeUnavailable):
                c.call("facts", [{"role": "user", "content": f"q{i}"}], FactList, prompt_version="v")
        with pytest.raises(ConfigurationError, match="HTTP 401: stub error 401"):
            c.call("facts", [{"role": "user", "content": "q2"}], FactList, prompt_version="v")
        with pytest.raises(ConfigurationError):
            c.call("facts", [{"role": "user", "content": "q3"}], FactList, prompt_version="v")
        assert len(stub.chat_requests()) == 3
    with OpenAIStub(responder=fake, statuses=[200, 400, 400, 400, 400]) as stub:
        c, _ = client(stub, tmp_path / "b")
        c.call("facts", MSGS, FactList, prompt_version="v")
        for i in range(4):
            with pytest.raises(JudgeUnavailable, match="400"):
                c.call("facts", [{"role": "user", "content": f"q{i}"}], FactList, prompt_version="v")
        assert len(stub.chat_requests()) == 5


def test_a_configuration_error_stops_judge_many(make_judge, stub):
    from naru_eval.api.retry import ConfigurationError

    stub.statuses = [403] * 100
    j = make_judge(concurrency=1)
    items = [item(f"q{i}", question=f"What happens in scene {i}?") for i in range(10)]
    with pytest.raises(ConfigurationError, match="HTTP 403"):
        j.judge_many([(it, it.reference) for it in items])
    assert len(stub.chat_requests()) == 3  # not one refused request per question


def test_cache_key_covers_everything_that_changes_the_output(tmp_path):
    def key(**kw):
        base = dict(base_url="http://127.0.0.1:1/v1", cache_path=str(tmp_path / "k.sqlite"))
        base.update(kw)
        cfg = JudgeConfig(**base)
        c = JudgeClient(cfg, JudgeStore(cfg.cache_path))
        return c.key_for("verify", MSGS, FactList, prompt_version=VERIFY_PROMPT_VERSION, params=cfg.request_params())

    k0 = key()
    assert key() == k0
    assert key(model="gpt-5-mini") != k0
    assert key(base_url="http://127.0.0.1:2/v1") != k0
    assert key(reasoning_effort="high") != k0
    assert key(max_completion_tokens=100) != k0
    assert key(concurrency=3, max_retries=1, timeout=5) == k0  # transport settings change nothing


def test_config_from_env(monkeypatch):
    monkeypatch.setenv("NARU_JUDGE_MODEL", "gpt-4.1")
    monkeypatch.setenv("NARU_JUDGE_BASE_URL", "http://judge.local:8000/v1/")
    monkeypatch.setenv("NARU_JUDGE_CONCURRENCY", "32")
    monkeypatch.setenv("NARU_JUDGE_TEMPERATURE", "0.2")
    cfg = JudgeConfig.from_env()
    assert cfg.model == "gpt-4.1" and cfg.base_url == "http://judge.local:8000/v1" and cfg.concurrency == 32
    assert cfg.request_params() == {"max_completion_tokens": 8192, "temperature": 0.2}
    assert JudgeConfig.from_env(model="gpt-5.5").request_params() == {
        "max_completion_tokens": 8192,
        "reasoning_effort": "medium",
    }
    with pytest.raises(ValueError, match="credentials"):
        JudgeConfig(base_url="http://user:pw@host/v1")
    monkeypatch.setenv("NARU_JUDGE_CONCURRENCY", "many")
    with pytest.raises(ValueError, match="NARU_JUDGE_CONCURRENCY"):
        JudgeConfig.from_env()


def test_the_runs_judge_cost_is_unknown_without_a_price(make_judge):
    """``judge_cost_usd`` of a judge without a price is None (unknown), not $0 or a partial sum."""
    from naru_eval.judge.score import compute_open_metrics

    it = item()
    unpriced = make_judge(prices=load_prices(None)).judge_many([(it, it.reference)])
    assert compute_open_metrics(unpriced)["judge_cost_usd"] is None
    priced = make_judge(prices=load_prices('{"gpt-5.5": {"input": 1, "output": 8}}')).judge_many([(it, it.reference)])
    assert compute_open_metrics(priced)["judge_cost_usd"] > 0


def test_judge_defaults_are_written_once_and_the_settings_docs_state_them():
    """JudgeConfig's fields hold every default; an unset NARU_JUDGE_* takes it, and the default
    docs/settings.md states for that variable is the same value."""
    from naru_eval.settings import Settings

    env_default = JudgeConfig.from_env({})
    fields = JudgeConfig.model_fields
    pairs = {
        "judge_max_tokens": "max_completion_tokens",
        "judge_concurrency": "concurrency",
        "judge_max_retries": "max_retries",
        "judge_retry_base_delay": "retry_base_delay",
        "judge_retry_max_delay": "retry_max_delay",
        "judge_parse_attempts": "parse_attempts",
        "judge_timeout": "timeout",
        "judge_model": "model",
        "judge_backend": "backend",
    }
    for var, name in pairs.items():
        default = fields[name].default
        assert getattr(env_default, name) == default, name
        extra = Settings.model_fields[var].json_schema_extra
        assert isinstance(extra, dict) and str(extra["default_doc"]) in (
            str(default),
            f"{default:g}" if isinstance(default, float) else str(default),
        ), var


@pytest.mark.parametrize(
    "old,new", [("minilm", "offline-minilm"), ("offline:minilm", "offline-minilm"), ("lexical", "offline-lexical")]
)
def test_the_offline_judge_has_one_spelling(old, new):
    with pytest.raises(ValueError, match=f"is spelled '{new}'"):
        JudgeConfig(backend=old)
    with pytest.raises(ValueError, match=f"is spelled '{new}'"):
        JudgeConfig.from_env({"NARU_JUDGE_BACKEND": old})
    assert JudgeConfig(backend=new).backend == new


def test_env_fingerprint_reads_the_environment_through_settings(monkeypatch):
    """The judge singleton's key: the NARU_JUDGE_* variables but the key, OPENAI_BASE_URL and
    NARU_CACHE_DIR, read through naru_eval.settings (a dict or the process's environment)."""
    env = {
        "NARU_JUDGE_MODEL": "gpt-5.5",
        "NARU_JUDGE_API_KEY": "sk-secret",
        "OPENAI_BASE_URL": "http://judge:8000/v1",
        "NARU_CACHE_DIR": "/cache",
        "NARU_DATA_DIR": "/data",
        "HOME": "/home/x",
    }
    want = (("NARU_JUDGE_MODEL", "gpt-5.5"), ("OPENAI_BASE_URL", "http://judge:8000/v1"), ("NARU_CACHE_DIR", "/cache"))
    assert env_fingerprint(env) == want
    for k in list(os.environ):
        if k.startswith("NARU_") or k == "OPENAI_BASE_URL":
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert env_fingerprint() == want
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert env_fingerprint()[1] == ("OPENAI_BASE_URL", "")
