"""naru_eval.redaction: no key reaches a log, a store, a sample log, the Gemini usage file or an
exception message, even when the server echoes it. The loopback stubs quote the key they were
sent in every error (``echo_key``: 400, 401, 403, 429, 500 bodies and an ``x-echo-key`` header);
each real run below is then searched, every file it wrote and everything it printed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from naru_eval.api.caller import ApiCaller
from naru_eval.api.retry import ConfigErrorBreaker, ConfigurationError, RetryError, RetryPolicy, describe_error
from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.redaction import redact, redact_exception, secret_names
from tests.helpers.judge import REF, write_open_log
from tests.helpers.stubs import OpenAIStub
from tests.helpers.stubs.gemini_server import GeminiStub

ROOT = Path(__file__).resolve().parents[1]
OPENAI_KEY = "sk-naru-redaction-0123456789abcdefSECRET"
JUDGE_KEY = "naru-judge-only-key-7f3a9c2e1b-SECRET"  # no known shape: found as NARU_JUDGE_API_KEY's value
#: Google's key shape (AIza + 35 characters), built here so no key-shaped literal sits in the tree
GOOGLE_SHAPED = "AI" + "za" + "SyA1234567890abcdefghijklmnopqrstu"
GEMINI_KEY = "gemini-redaction-key-0123456789abcdef-SECRET"  # found as GOOGLE_API_KEY's value
#: every status the stubs answer in turn: the client errors are not retried, 429/500 are, once
ECHOED = [400, 401, 403, 429, 429, 500, 500]


def written(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def assert_nowhere(key: str, root: Path, *texts: str) -> None:
    """``key`` is in no file under ``root`` (outputs, stores with their -wal, caches, usage
    files) and in no text given (stdout, stderr, logs)."""
    files = written(root)
    assert files
    for p in files:
        assert key.encode() not in p.read_bytes(), p
    for t in texts:
        assert key not in t


# ------------------------------------------------------------------------------- the function


def test_configured_keys_and_key_shaped_text_are_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("NARU_JUDGE_API_KEY", JUDGE_KEY)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdefgh-1234")  # any variable named as a secret
    monkeypatch.setenv("SHORT_KEY", "ab")  # too short to be a key: left alone
    monkeypatch.setenv("FEATURE_TOKEN", "true")  # a secret-like name, but no key: "true" stays
    text = (
        f"bad key {OPENAI_KEY}; judge {JUDGE_KEY}; svc tok-abcdefgh-1234; other sk-proj-AAAAAAAAAAAAAAAAAAAA; "
        f"google {GOOGLE_SHAPED}; hf hf_abcdefghijklmnopqrstuvwxyz; "
        "Authorization: Bearer some.jwt.token-value; https://h/x?alt=json&key=plainkeyvalue123&x=1; "
        '{"x-goog-api-key": "zzzzzzzz"}; ab stays; a task-runner-label stays; {"ok": true}'
    )
    out = redact(text)
    for secret in (
        OPENAI_KEY,
        JUDGE_KEY,
        "tok-abcdefgh-1234",
        "sk-proj-AAAA",
        GOOGLE_SHAPED[:10],
        "hf_abcdef",
        "some.jwt.token",
        "plainkeyvalue123",
        "zzzzzzzz",
    ):
        assert secret not in out, (secret, out)
    assert "[REDACTED OPENAI_API_KEY]" in out and "[REDACTED NARU_JUDGE_API_KEY]" in out
    assert "Bearer [REDACTED]" in out and "key=[REDACTED]&x=1" in out
    assert "ab stays" in out and "task-runner-label" in out and '{"ok": true}' in out
    assert {"OPENAI_API_KEY", "NARU_JUDGE_API_KEY", "MY_SERVICE_TOKEN"} <= set(secret_names())
    assert "SHORT_KEY" not in secret_names() and "FEATURE_TOKEN" not in secret_names()


class EchoError(Exception):
    """An SDK error quoting the key in its text, message and body, as an echoing server's does."""

    def __init__(self, key: str, status: int) -> None:
        super().__init__(f"Error code: {status} - {{'error': {{'message': 'key {key} is invalid'}}}}")
        self.status_code = status
        self.message = f"key {key} is invalid"
        self.body = {"error": {"message": f"key {key} is invalid", "code": status}}


def test_every_error_text_the_api_layer_makes_is_redacted(monkeypatch, caplog):
    """The retry warnings, the RetryError, the configuration breaker's message and the original
    exception (which a traceback would print) hold no key."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    statuses = iter([500, 500])

    def fail() -> None:
        raise EchoError(OPENAI_KEY, next(statuses, 401))

    caller = ApiCaller("test", RetryPolicy(max_attempts=2), sleep=lambda s: None, warn=logging.getLogger("t").warning)
    with caplog.at_level(logging.INFO), pytest.raises(RetryError) as err:
        caller.call(fail, "question q1")
    assert OPENAI_KEY not in caplog.text and "attempt 1/2 failed" in caplog.text
    assert OPENAI_KEY not in str(err.value) and "HTTP 500" in str(err.value)
    original = err.value.last_error
    assert OPENAI_KEY not in str(original) and OPENAI_KEY not in json.dumps(original.body)  # type: ignore[attr-defined]
    assert OPENAI_KEY not in describe_error(EchoError(OPENAI_KEY, 403))

    breaker = ConfigErrorBreaker("test", after=2)
    caller = ApiCaller("test", RetryPolicy(max_attempts=1), breaker=breaker, sleep=lambda s: None)
    with pytest.raises(RetryError):
        caller.call(lambda: (_ for _ in ()).throw(EchoError(OPENAI_KEY, 401)), "q1")
    with pytest.raises(ConfigurationError) as stop:
        caller.call(lambda: (_ for _ in ()).throw(EchoError(OPENAI_KEY, 401)), "q2")
    assert "HTTP 401" in str(stop.value) and OPENAI_KEY not in str(stop.value)


def test_an_exception_and_its_chain_are_redacted_in_place(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", GEMINI_KEY)
    try:
        try:
            raise EchoError(GEMINI_KEY, 403)
        except EchoError as inner:
            raise RuntimeError(f"upload failed: {inner}") from inner
    except RuntimeError as e:
        outer = redact_exception(e)
    import traceback

    shown = "".join(traceback.format_exception(outer))
    assert "upload failed" in shown and "EchoError" in shown and GEMINI_KEY not in shown


# ----------------------------------------------------------------------------- real runs, slow


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """18 questions (2 per category) over 4 short videos."""
    return make_dataset(
        tmp_path_factory.mktemp("redact18"), SyntheticSpec(counts={c: 2 for c in CATEGORIES}, n_videos=4, seed=11)
    )


def _env(data: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "NARU_DATA_DIR": str(data),
        "NARU_RESPONSE_STORE": str(tmp_path / "store.sqlite"),
        "NARU_CACHE_DIR": str(tmp_path / "cache"),
        "NARU_FRAME_CACHE": str(tmp_path / "frames"),
        "PYTHONPATH": str(ROOT),  # the adapters under test are this checkout's
        **extra,
    }


def _stored_errors(store: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute("SELECT error FROM responses WHERE status='failed'")]


@pytest.mark.slow
@pytest.mark.api
def test_naru_openai_compat_writes_no_echoed_key(data, tmp_path):
    from naru_eval.lmms.run import run_lmms_eval

    env = _env(data, tmp_path, OPENAI_API_KEY=OPENAI_KEY)
    args = "model=stub,num_frames=4,max_retries=1,retry_base_delay=0,max_concurrency=1"
    with OpenAIStub(statuses=ECHOED, echo_key=True) as stub:
        run = run_lmms_eval(
            "naru_openai_compat",
            f"{args},base_url={stub.base_url}",
            ["naru_mcq"],
            tmp_path / "out",
            env=env,
            timeout=300,
        )
        assert {r.status for r in stub.chat_requests()} >= {400, 401, 403, 429, 500, 200}
    assert run.ok, run.stderr[-4000:]
    errors = _stored_errors(tmp_path / "store.sqlite")
    assert len(errors) == 5 and any("[REDACTED" in e for e in errors)  # the five failed questions, their texts kept
    assert_nowhere(OPENAI_KEY, tmp_path, run.stdout, run.stderr)

    # a key every request is refused with: the run stops on the API's message, which quotes the key
    with OpenAIStub(statuses=[401] * 50, echo_key=True) as stub:
        stopped = run_lmms_eval(
            "naru_openai_compat",
            f"{args},base_url={stub.base_url},retry_max_delay=0",
            ["naru_mcq"],
            tmp_path / "out2",
            env={**env, "NARU_RESPONSE_STORE": str(tmp_path / "store2.sqlite")},
            timeout=300,
        )
    assert "HTTP 401" in stopped.stdout + stopped.stderr and "is not allowed" in stopped.stdout + stopped.stderr
    assert_nowhere(OPENAI_KEY, tmp_path, stopped.stdout, stopped.stderr)


@pytest.mark.slow
@pytest.mark.api
def test_naru_gemini_writes_no_echoed_key(data, tmp_path):
    from naru_eval.lmms.run import run_lmms_eval

    env = _env(data, tmp_path, GOOGLE_API_KEY=GEMINI_KEY)
    with GeminiStub(api_key=GEMINI_KEY, statuses=ECHOED, echo_key=True, retry_delay="0s") as stub:
        args = f"model=gemini-2.5-flash,base_url={stub.base_url},poll_interval=0.05,max_retries=1,retry_base_delay=0"
        run = run_lmms_eval(
            "naru_gemini", f"{args},max_concurrency=1", ["naru_mcq"], tmp_path / "out", env=env, timeout=300
        )
        assert {r.status for r in stub.generate_requests()} >= {400, 401, 403, 429, 500, 200}
    assert run.ok, run.stderr[-4000:]
    usage = list((tmp_path / "cache").glob("gemini_usage_*.json"))
    assert usage and json.loads(usage[0].read_text())["failures"]  # the failures are in the usage file, redacted
    assert len(_stored_errors(tmp_path / "store.sqlite")) == 5
    assert_nowhere(GEMINI_KEY, tmp_path, run.stdout, run.stderr)


@pytest.mark.api
@pytest.mark.usefixtures("judge_env")
def test_the_judge_writes_no_echoed_key(tmp_path, fake, monkeypatch, capsys, caplog):
    """``naru-eval judge score`` against a judge that answers 400/401/403/429/500 with the key:
    its log lines, its report files, its cache and what it prints hold none of it."""
    from naru_eval.cli.main import main

    monkeypatch.setenv("NARU_JUDGE_API_KEY", JUDGE_KEY)
    monkeypatch.setenv("NARU_JUDGE_MAX_RETRIES", "1")
    monkeypatch.setenv("NARU_JUDGE_RETRY_BASE_DELAY", "0")
    monkeypatch.setenv("NARU_JUDGE_CACHE", str(tmp_path / "judge.sqlite"))
    # 5 of 120 unscored for good (4%): below the unreachable share, so the report files are written
    write_open_log(tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF] * 120)
    with OpenAIStub(responder=fake, models=("gpt-5.5",), statuses=ECHOED, echo_key=True) as stub:
        with caplog.at_level(logging.DEBUG):
            code = main(["judge", "score", str(tmp_path / "run"), "--base-url", stub.base_url, "--concurrency", "1"])
        assert {r.headers["authorization"] for r in stub.requests} == {f"Bearer {JUDGE_KEY}"}
        assert {r.status for r in stub.chat_requests()} >= {400, 401, 403, 429, 500, 200}
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "judge unavailable" in caplog.text and "[REDACTED" in caplog.text  # the failures are logged, redacted
    (scores,) = (tmp_path / "run").rglob("*.scores.jsonl")
    reasons = [json.loads(x)["reason"] for x in scores.read_text().splitlines()]
    assert sum(1 for r in reasons if r and "[REDACTED NARU_JUDGE_API_KEY]" in r) == 5  # kept, redacted
    assert_nowhere(JUDGE_KEY, tmp_path, out.out, out.err, caplog.text)
