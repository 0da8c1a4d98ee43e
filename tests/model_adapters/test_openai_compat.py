"""``naru_openai_compat`` through the real ``openai`` SDK against a local stub server.

The fast tests drive the adapter's ``generate_until`` directly with lmms-eval ``Instance``s; the
``slow`` ones run the real ``lmms-eval`` console script in a subprocess (end to end, crash and
resume, resume after failures).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from lmms_eval.api.instance import Instance

from model_adapters.openai_compat import OpenAICompat, ServerUnreachable
from naru_eval.adapters.request import FAILED_MARKER
from naru_eval.api.retry import (
    ConfigurationError,
    RetryError,
    RetryPolicy,
    call_with_retry,
    is_retryable,
    parse_retry_after,
    retry_after,
)
from naru_eval.core.data import CATEGORIES, LETTERS, NaruQuestion
from naru_eval.core.scoring import METRICS, score_response
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.lmms.run import lmms_eval_command, run_lmms_eval
from naru_eval.lmms.tasks import doc_to_text, doc_to_visual, doc_to_visual_blind
from naru_eval.store.responses import ResponseStore
from tests.helpers.data import docs_of, lmms_instances, read_jsonl
from tests.helpers.expected import expected_metrics
from tests.helpers.stubs import OpenAIStub, Reply, StubRequest

pytestmark = pytest.mark.api

ROOT = Path(__file__).resolve().parents[2]
FAKE_KEY = "sk-naru-test-0123456789abcdefSECRET"
TASK, SPLIT = "naru_mcq", "test"
INVALID_TEXT = "I cannot determine the answer from the video."


# ----------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """18 questions (2 per category) over 4 short H.264 videos."""
    return make_dataset(
        tmp_path_factory.mktemp("naru18"), SyntheticSpec(counts={c: 2 for c in CATEGORIES}, n_videos=4, seed=3)
    )


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def instances(docs: list[dict[str, Any]], order: list[int] | None = None, gen_kwargs: dict | None = None):
    gk = {"max_new_tokens": 32} if gen_kwargs is None else gen_kwargs
    return lmms_instances(docs, TASK, SPLIT, gen_kwargs=gk, order=order)


def make_model(stub_or_url: OpenAIStub | str, tmp_path: Path, docs, **args: Any) -> tuple[OpenAICompat, list[float]]:
    base_url = stub_or_url if isinstance(stub_or_url, str) else stub_or_url.base_url
    args.setdefault("retry_base_delay", 0.5)
    model = OpenAICompat(model="stub", base_url=base_url, response_store=str(tmp_path / "store.sqlite"), **args)
    model.task_dict = {TASK: {SPLIT: docs}}
    sleeps: list[float] = []
    model.sleep = sleeps.append
    return model, sleeps


def answer_for(text: str) -> str:
    """The stub's deterministic answer to a prompt: a letter, or (1 in 5) no answer at all."""
    h = hashlib.sha256(text.encode()).digest()
    return INVALID_TEXT if h[0] % 5 == 0 else f"The answer is {LETTERS[h[1] % 4]}."


def stub_responder(req: StubRequest) -> str:
    return answer_for(req.text)


def intended_letters(docs) -> dict[str, str | None]:
    """question_id -> the letter the stub's answer carries (None = invalid)."""
    out = {}
    for doc in docs:
        ans = answer_for(doc_to_text(doc))
        out[doc["question_id"]] = None if ans == INVALID_TEXT else ans[len("The answer is ")]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def decode_jpeg(url: str):
    from PIL import Image

    assert url.startswith("data:image/jpeg;base64,")
    img = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    img.load()
    return img


# -------------------------------------------------------------------------------- the message


def test_frames_mode_sends_n_jpegs_then_the_question(tmp_path, docs):
    with OpenAIStub(responder=stub_responder) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=4)
        out = model.generate_until(instances(docs))
        reqs = stub.chat_requests()
    assert len(reqs) == len(docs)
    assert out == [answer_for(doc_to_text(d)) for d in docs]  # answers come back in request order
    by_text = {r.text: r for r in reqs}
    for doc, nreq in zip(docs, model.to_naru_requests(instances(docs)), strict=True):
        req = by_text[doc_to_text(doc)]
        assert req.part_types == ["image_url"] * 4 + ["text"]  # video first, question last
        sampled = model.frames(nreq).frames
        assert len(sampled) == 4
        for url in req.media_urls:
            img = decode_jpeg(url)
            assert img.format == "JPEG" and img.mode == "RGB"
            assert img.size == (sampled.shape[2], sampled.shape[1])
        assert req.body["model"] == "stub"
        assert req.body["temperature"] == 0
        assert req.body["max_tokens"] == 32
    # questions on one video share the same media prefix, byte for byte
    media = {}
    for doc in docs:
        media.setdefault(doc["video_id"], set()).add(tuple(by_text[doc_to_text(doc)].media_urls))
    assert all(len(v) == 1 for v in media.values())


QUESTION_PART = b'{"type":"text","text":'  # the SDK's serialization (separators without spaces)


def _prefix_and_question(raw: bytes) -> tuple[bytes, bytes]:
    """The request body split where the question part begins: (everything before, the rest)."""
    at = raw.rfind(QUESTION_PART)
    assert at > 0, raw[:200]
    return raw[:at], raw[at:]


def test_one_videos_requests_are_byte_identical_up_to_the_question(tmp_path, docs):
    # the server's prefix cache (vLLM APC, SGLang RadixAttention) serves a video's later questions
    # only if their bytes before the question are the same: same frames, encoding, order, fields
    video = docs[0]["video_id"]
    same_video = [d for d in docs if d["video_id"] == video][:3]
    assert len(same_video) == 3
    bodies: list[bytes] = []
    for run in ("a", "b"):  # a second adapter decodes and encodes the video afresh (a rerun)
        with OpenAIStub(responder=stub_responder) as stub:
            model, _ = make_model(stub, tmp_path / run, same_video, num_frames=4, max_concurrency=1)
            model.generate_until(instances(same_video))
            bodies += [r.raw for r in sorted(stub.chat_requests(), key=lambda r: r.received)]
    assert len(bodies) == 6
    split = [_prefix_and_question(b) for b in bodies]
    prefixes = {p for p, _ in split}
    assert len(prefixes) == 1, "the bytes before the question differ between questions of one video"
    prefix = prefixes.pop()
    assert prefix.count(b"data:image/jpeg;base64,") == 4  # the whole video is in the shared prefix
    assert b'"model":"stub"' in prefix and b"max_tokens" not in prefix and b"temperature" not in prefix
    # and the question (with everything after it) is what differs
    assert len({q for _, q in split[:3]}) == 3
    assert [q for _, q in split[:3]] == [q for _, q in split[3:]]
    texts = [json.loads(b)["messages"][-1]["content"][-1]["text"] for b in bodies[:3]]
    assert sorted(texts) == sorted(doc_to_text(d) for d in same_video)


def test_jpeg_encoding_is_deterministic():
    import numpy as np

    from naru_eval.providers.openai_compat.wire import encode_jpeg

    frame = np.random.default_rng(0).integers(0, 256, size=(48, 64, 3), dtype=np.uint8)
    assert encode_jpeg(frame, 85) == encode_jpeg(frame.copy(), 85)
    assert encode_jpeg(frame, 85) != encode_jpeg(frame, 60)


def test_max_tokens_defaults_to_16(tmp_path, docs):
    with OpenAIStub() as stub:
        model, _ = make_model(stub, tmp_path, docs[:1], num_frames=2)
        model.generate_until(instances(docs[:1], gen_kwargs={}))
        assert stub.chat_requests()[0].body["max_tokens"] == 16


def test_video_url_mode_sends_one_part_and_decodes_nothing(tmp_path, docs, monkeypatch):
    def no_decoding(*a, **k):
        raise AssertionError("video_url mode must not decode frames")

    monkeypatch.setattr("naru_eval.media.frame_cache.sample_frames", no_decoding)
    monkeypatch.setattr(OpenAICompat, "frames", no_decoding)
    with OpenAIStub() as stub:
        model, _ = make_model(stub, tmp_path, docs, video_mode="video_url")
        assert model.needs_frames is False
        model.generate_until(instances(docs))
        reqs = stub.chat_requests()
    assert len(reqs) == len(docs)
    sent = {(r.text, tuple(r.media_urls)) for r in reqs}
    assert all(r.part_types == ["video_url", "text"] for r in reqs)
    assert sent == {(doc_to_text(d), (Path(d["video"]).resolve().as_uri(),)) for d in docs}

    with OpenAIStub() as stub:
        model, _ = make_model(
            stub, tmp_path / "b", docs[:2], video_mode="video_url", video_url_prefix="http://media.local:9000/naru/"
        )
        model.generate_until(instances(docs[:2]))
        urls = sorted(u for r in stub.chat_requests() for u in r.media_urls)
    assert urls == sorted(f"http://media.local:9000/naru/{Path(d['video']).name}" for d in docs[:2])


# -------------------------------------------------------------------------------------- retries


def test_retries_429_then_503_then_answers(tmp_path, docs):
    with OpenAIStub(statuses=[429, 503], responder=lambda r: "B") as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], num_frames=2, max_retries=5)
        out = model.generate_until(instances(docs[:1]))
        assert [r.status for r in stub.chat_requests()] == [429, 503, 200]
    assert out == ["B"]
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 0.5 and 0 <= sleeps[1] <= 1.0  # full jitter under base * 2**(n-1)
    rk, qk = model.request_key(model.to_naru_requests(instances(docs[:1]))[0])
    stored = model.store.get(rk, qk)
    assert stored.status == "ok" and stored.usage["attempts"] == 3


def test_retry_after_is_honoured_and_capped(tmp_path, docs):
    with OpenAIStub(statuses=[429, 503], retry_after=7) as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], num_frames=2)
        model.generate_until(instances(docs[:1]))
    assert sleeps == [7.0, 7.0]
    with OpenAIStub(statuses=[429], retry_after=3600) as stub:
        model, sleeps = make_model(stub, tmp_path / "b", docs[:1], num_frames=2, retry_max_delay=30)
        model.generate_until(instances(docs[:1]))
    assert sleeps == [30.0]


def test_retries_stop_at_the_bound_and_the_failure_is_scored_invalid(tmp_path, docs):
    with OpenAIStub(statuses=[503] * 10) as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], num_frames=2, max_retries=2)
        out = model.generate_until(instances(docs[:1]))
        assert len(stub.chat_requests()) == 3
    assert len(sleeps) == 2
    assert out[0].startswith(FAILED_MARKER) and "503" in out[0]
    assert not score_response(NaruQuestion.from_doc(docs[0]), out[0]).valid
    assert docs[0]["question_id"] in model.failures
    rk, qk = model.request_key(model.to_naru_requests(instances(docs[:1]))[0])
    stored = model.store.get(rk, qk)
    assert stored.status == "failed" and stored.response is None and stored.usage["attempts"] == 3


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_retryable_statuses(tmp_path, docs, status):
    with OpenAIStub(statuses=[status], responder=lambda r: "C") as stub:
        model, _ = make_model(stub, tmp_path, docs[:1], num_frames=2)
        assert model.generate_until(instances(docs[:1])) == ["C"]
        assert len(stub.chat_requests()) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retried(tmp_path, docs, status):
    with OpenAIStub(statuses=[status] * 3) as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], num_frames=2)
        out = model.generate_until(instances(docs[:1]))
        assert len(stub.chat_requests()) == 1
    assert sleeps == []
    assert out[0].startswith(FAILED_MARKER) and str(status) in out[0]


def test_timeouts_are_retried(tmp_path, docs):
    with OpenAIStub(latency=1.0) as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], num_frames=2, timeout=0.2, max_retries=1)
        out = model.generate_until(instances(docs[:1]))
        assert len(stub.chat_requests()) == 2
    assert len(sleeps) == 1
    assert out[0].startswith(FAILED_MARKER) and "Timeout" in out[0]


def test_connection_errors_are_retried_then_the_run_stops(tmp_path, docs):
    url = f"http://127.0.0.1:{free_port()}/v1"
    model, sleeps = make_model(url, tmp_path, docs[:1], num_frames=2, max_retries=2, check_model=False)
    out = model.generate_until(instances(docs[:1]))
    assert len(sleeps) == 2 and out[0].startswith(FAILED_MARKER)
    # a dead server stops the run instead of failing every question slowly
    model, _ = make_model(url, tmp_path / "b", docs, num_frames=2, max_retries=0, check_model=False, abort_after=3)
    with pytest.raises(ServerUnreachable):
        model.generate_until(instances(docs))
    assert len(model.failures) == 2
    # and prepare() refuses to start against it
    model, _ = make_model(url, tmp_path / "c", docs, num_frames=2, max_retries=0)
    with pytest.raises(RuntimeError, match="not usable"):
        model.generate_until(instances(docs))


def test_unserved_model_is_one_clear_error(tmp_path, docs):
    with OpenAIStub(models=["Qwen/Qwen2.5-VL-7B-Instruct"]) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=2)
        with pytest.raises(ValueError, match="not served"):
            model.generate_until(instances(docs))
        assert stub.chat_requests() == []


# ------------------------------------------------------------------ refusals, empties, filters


@pytest.mark.parametrize(
    "reply,reason",
    [
        (Reply(content=None, refusal="I can't help with that."), "refusal"),
        (Reply(content=""), "empty completion"),
        (Reply(content="   \n"), "empty completion"),
        (Reply(content="", finish_reason="content_filter"), "content_filter"),
        (Reply(content="A", finish_reason="content_filter"), "content_filter"),
    ],
)
def test_refusal_empty_and_filtered_are_failures(tmp_path, docs, reply, reason):
    with OpenAIStub(responder=lambda r: reply) as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], num_frames=2)
        out = model.generate_until(instances(docs[:1]))
        assert len(stub.chat_requests()) == 1  # deterministic at temperature 0: not retried
    assert out[0].startswith(FAILED_MARKER) and reason in out[0]
    scored = score_response(NaruQuestion.from_doc(docs[0]), out[0])
    assert not scored.valid and not scored.correct
    stored = model.store.get(*model.request_key(model.to_naru_requests(instances(docs[:1]))[0]))
    assert stored.status == "failed" and reason in stored.error


def test_stub_refusal_and_empty_switches(tmp_path, docs):
    with OpenAIStub(refusal="no") as stub:
        model, _ = make_model(stub, tmp_path, docs[:1], num_frames=2)
        assert "refusal" in model.generate_until(instances(docs[:1]))[0]
    with OpenAIStub(empty=True) as stub:
        model, _ = make_model(stub, tmp_path / "b", docs[:1], num_frames=2)
        assert "empty completion" in model.generate_until(instances(docs[:1]))[0]


def test_usage_and_fingerprint_are_stored(tmp_path, docs):
    with OpenAIStub(responder=lambda r: "The answer is D", fingerprint="fp_abc") as stub:
        model, _ = make_model(stub, tmp_path, docs[:1], num_frames=3)
        model.generate_until(instances(docs[:1]))
    stored = model.store.get(*model.request_key(model.to_naru_requests(instances(docs[:1]))[0]))
    assert stored.response == "The answer is D"
    assert stored.usage["system_fingerprint"] == "fp_abc"
    assert stored.usage["prompt_tokens"] > 0 and stored.usage["completion_tokens"] == 4
    assert stored.usage["total_tokens"] == stored.usage["prompt_tokens"] + 4


# ---------------------------------------------------------------------------------- secrets


def test_key_from_env_is_the_bearer_token(tmp_path, docs):
    with OpenAIStub() as stub:
        assert stub.host == "127.0.0.1"  # loopback only
        model, _ = make_model(stub, tmp_path, docs[:1], num_frames=2)
        assert not model._client.built  # built lazily
        model.generate_until(instances(docs[:1]))
        assert {r.headers["authorization"] for r in stub.requests} == {f"Bearer {FAKE_KEY}"}
    assert FAKE_KEY not in json_dump(model.describe())


def json_dump(obj: Any) -> str:
    import json

    return json.dumps(obj, default=str)


@pytest.mark.parametrize(
    "arg_string",
    [
        "model=stub,base_url=http://127.0.0.1:1/v1,api_key=sk-abc",
        "model=stub,base_url=http://127.0.0.1:1/v1,openai_api_key=sk-abc",
        "model=stub,base_url=http://127.0.0.1:1/v1,token=abc",
        f"model=stub,base_url=http://127.0.0.1:1/v1,extra={FAKE_KEY}",
        f"model={FAKE_KEY},base_url=http://127.0.0.1:1/v1",
    ],
)
def test_a_key_in_model_args_is_refused(arg_string, capsys):
    """Through lmms-eval's constructor: the message on stderr and exit status 2, no traceback."""
    with pytest.raises(SystemExit) as e:
        OpenAICompat.create_from_arg_string(arg_string, {"batch_size": 1, "device": None})
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "Traceback" not in err


def test_bad_model_args_are_clear_errors():
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAICompat(model="stub", base_url="http://user:pw@127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="unknown model_args"):
        OpenAICompat(model="stub", base_url="http://127.0.0.1:1/v1", num_frame=8)
    with pytest.raises(ValueError, match="video_mode"):
        OpenAICompat(model="stub", base_url="http://127.0.0.1:1/v1", video_mode="gif")
    with pytest.raises(ValueError, match="base_url"):
        OpenAICompat(model="stub")
    with pytest.raises(ValueError, match="model="):
        OpenAICompat(base_url="http://127.0.0.1:1/v1")
    m = OpenAICompat.create_from_arg_string(
        "model=stub,base_url=http://127.0.0.1:1/v1,num_frames=8,max_concurrency=3,max_retries=0,timeout=5",
        {"batch_size": 1, "device": "cuda"},
    )
    assert (m.num_frames, m.max_concurrency, m.retry_policy.max_attempts, m.timeout) == (8, 3, 1, 5.0)
    assert "device" not in m.describe()["args"]


def test_base_url_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:5/v1")
    assert OpenAICompat(model="stub").base_url == "http://127.0.0.1:5/v1"


# ----------------------------------------------------------------- concurrency and ordering


@pytest.mark.parametrize("limit", [1, 3])
def test_concurrency_is_bounded(tmp_path, docs, limit):
    with OpenAIStub(responder=stub_responder, latency=0.05) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=limit)
        out = model.generate_until(instances(docs))
        assert stub.max_in_flight <= limit
        if limit > 1:
            assert stub.max_in_flight > 1
    assert out == [answer_for(doc_to_text(d)) for d in docs]


def test_concurrency_backs_off_on_a_429_and_grows_again(tmp_path, docs):
    """Adaptive concurrency (naru_eval.api.limiter through the caller): a 429 halves the requests
    in flight (8 -> 4), successes grow it back one slot per window, and every question is answered."""
    seen: list[int] = []  # requests in flight at the stub as each one arrived (itself included)

    def responder(req):
        seen.append(stub.in_flight)
        return answer_for(req.text)

    with OpenAIStub(responder=responder, statuses=[429], latency=0.15) as stub:
        # every question at once (prefix_first off): the limiter is measured at full fan-out
        model, sleeps = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=8, prefix_first=False)
        out = model.generate_until(instances(docs))
        statuses = [r.status for r in sorted(stub.chat_requests(), key=lambda r: r.received)]
    assert out == [answer_for(doc_to_text(d)) for d in docs]
    assert statuses.count(429) == 1 and len(sleeps) == 1
    lim = model.limiter
    assert lim.cuts == 1 and lim.history[0] == ("429", 4.0)  # backed off to half
    grown = [limit for what, limit in lim.history[1:] if what == "grow"]
    assert grown and grown == sorted(grown) and int(grown[-1]) >= 6  # and grew again, one slot at a time
    assert max(seen[:8]) == 8  # before the 429: the cap
    assert max(seen[9:]) < 8  # after it: never the cap again in this run


@pytest.mark.parametrize("limit", [1, 3])
def test_requests_are_grouped_by_video(tmp_path, docs, limit):
    # lmms-eval hands the questions over interleaved across videos
    order = sorted(range(len(docs)), key=lambda i: (i % 3, i))
    with OpenAIStub(responder=stub_responder, latency=0.02) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=limit)
        out = model.generate_until(instances(docs, order))
        reqs = sorted(stub.chat_requests(), key=lambda r: r.received)
    assert out == [answer_for(doc_to_text(docs[i])) for i in order]
    video_of = {doc_to_text(d): d["video_id"] for d in docs}
    assert len(video_of) == len(docs)  # every prompt names one question
    videos = [video_of[r.text] for r in reqs]
    counts = Counter(videos)
    assert len(counts) == 4
    for v, n in counts.items():
        pos = [i for i, x in enumerate(videos) if x == v]
        # contiguous when serial; with a pool only the in-flight window can interleave
        assert pos[-1] - pos[0] <= n - 1 + 2 * (limit - 1), videos


def test_answers_in_the_store_are_not_asked_again(tmp_path, docs):
    with OpenAIStub(responder=lambda r: Reply(status=500) if "[N.1]" in r.text else answer_for(r.text)) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=2, max_retries=0, max_concurrency=4)
        model.generate_until(instances(docs))
        failed = {d["question_id"] for d in docs if d["category"] == "N.1"}
        assert set(model.failures) == failed
        stub.reset()
        stub.responder = stub_responder
        again, _ = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=4)
        out = again.generate_until(instances(docs))
        assert sorted(r.text for r in stub.chat_requests()) == sorted(
            doc_to_text(d) for d in docs if d["question_id"] in failed
        )
    assert again.reused == len(docs) - len(failed)
    assert out == [answer_for(doc_to_text(d)) for d in docs]


# ------------------------------------------------------------------------- the retry helper


class _HTTPError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"status {status}")
        self.status_code = status
        self.headers = headers or {}


def test_retry_helper_classification_and_hints():
    assert all(is_retryable(_HTTPError(s)) for s in (408, 409, 429, 500, 503, 599))
    assert not any(is_retryable(_HTTPError(s)) for s in (400, 401, 403, 404, 422))
    assert is_retryable(TimeoutError()) and is_retryable(ConnectionResetError())
    assert not is_retryable(ValueError("bad"))
    assert retry_after(_HTTPError(429, {"Retry-After": "2.5"})) == 2.5
    assert retry_after(_HTTPError(429, {"retry-after-ms": "1500"})) == 1.5
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("soon") is None


def test_retry_helper_backoff_is_bounded_full_jitter():
    policy = RetryPolicy(max_attempts=8, base_delay=1.0, max_delay=10.0)
    sleeps: list[float] = []
    calls = []

    def flaky():
        calls.append(1)
        raise _HTTPError(503)

    with pytest.raises(RetryError) as err:
        call_with_retry(flaky, policy, sleep=sleeps.append, rand=lambda: 1.0, on_retry=lambda *a: None)
    assert len(calls) == 8 and err.value.attempts == 8 and err.value.exhausted and err.value.status == 503
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    sleeps.clear()
    with pytest.raises(RetryError):
        call_with_retry(flaky, policy, sleep=sleeps.append, rand=lambda: 0.25, on_retry=lambda *a: None)
    assert sleeps == [0.25, 0.5, 1.0, 2.0, 2.5, 2.5, 2.5]
    with pytest.raises(RetryError) as err:
        call_with_retry(lambda: (_ for _ in ()).throw(_HTTPError(400)), policy, sleep=sleeps.append)
    assert err.value.attempts == 1 and not err.value.exhausted


# ------------------------------------------------------------- text-only (the blind tasks)


def task_instances(docs, task: str, visual=doc_to_visual, ids: list[int] | None = None) -> list[Instance]:
    """One task's instances, as lmms-eval builds them (several tasks may share one call)."""
    return [
        Instance(
            "generate_until",
            (doc_to_text(docs[i]), {"max_new_tokens": 32}, visual, i, task, SPLIT),
            idx=0,
            metadata={"task": task, "doc_id": i, "repeats": 1},
        )
        for i in (ids if ids is not None else range(len(docs)))
    ]


def blind_docs(docs) -> list[dict[str, Any]]:
    return [{**d, "video": None} for d in docs]


def test_a_request_without_video_is_asked_text_only(tmp_path, docs):
    blind = blind_docs(docs)
    with OpenAIStub(responder=stub_responder) as stub:
        model, _ = make_model(stub, tmp_path, blind, num_frames=4)
        model.task_dict = {"naru_mcq_500_blind": {SPLIT: blind}}
        out = model.generate_until(task_instances(blind, "naru_mcq_500_blind", doc_to_visual_blind))
        reqs = stub.chat_requests()
    assert len(reqs) == len(docs) and all(r.part_types == ["text"] for r in reqs)
    assert out == [answer_for(doc_to_text(d)) for d in docs]
    assert model.failures == {}


# ------------------------------------------------------ one request per question, whatever the task


def test_the_same_question_in_two_tasks_is_asked_once(tmp_path, docs):
    """lmms-eval hands ``--tasks naru``'s requests over in one call: naru_mcq and naru_mcq_500
    ask the same question with the same prompt and video; the blind variant (no video) and a
    rotated one (another prompt) stay requests of their own."""
    sub = list(range(0, len(docs), 3))
    blind = blind_docs(docs)
    with OpenAIStub(responder=stub_responder) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=3)
        model.task_dict = {
            "naru_mcq": {SPLIT: docs},
            "naru_mcq_500": {SPLIT: docs},
            "naru_mcq_500_blind": {SPLIT: blind},
        }
        reqs = (
            task_instances(docs, "naru_mcq")
            + task_instances(docs, "naru_mcq_500", ids=sub)
            + task_instances(blind, "naru_mcq_500_blind", doc_to_visual_blind, ids=sub)
        )
        out = model.generate_until(reqs)
        sent = stub.chat_requests()
        assert len(sent) == len(docs) + len(sub)  # every question once with its video, once blind
        assert Counter(r.signature for r in sent).most_common(1)[0][1] == 1
        assert sum(r.part_types == ["text"] for r in sent) == len(sub)
        want = [answer_for(doc_to_text(d)) for d in docs]
        assert out == want + [want[i] for i in sub] + [want[i] for i in sub]
        # across runs through the store: naru_mcq_500 alone after naru_mcq asks nothing
        stub.reset()
        again, _ = make_model(stub, tmp_path, docs, num_frames=2)
        again.task_dict = {"naru_mcq_500": {SPLIT: docs}}
        assert again.generate_until(task_instances(docs, "naru_mcq_500", ids=sub)) == [want[i] for i in sub]
        assert stub.chat_requests() == [] and again.reused == len(sub)
    # a rotated question (its own id and prompt) is its own request
    a = model.to_naru_requests(task_instances(docs, "naru_mcq", ids=[0]))[0]
    rotated = {
        **docs[0],
        "question_id": docs[0]["question_id"] + "#r1",
        "options": docs[0]["options"][1:] + docs[0]["options"][:1],
    }
    model.task_dict["naru_mcq_500_circular"] = {SPLIT: [rotated]}
    b = model.to_naru_requests(task_instances([rotated], "naru_mcq_500_circular", ids=[0]))[0]
    assert model.request_key(a) != model.request_key(b)


# ------------------------------------------------------------------- configuration errors


def store_rows(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT question_id, status FROM responses").fetchall()


@pytest.mark.parametrize("status", [400, 401, 403, 404])
@pytest.mark.parametrize("limit", [1, 4])
def test_a_configuration_error_stops_the_run_and_stores_no_failure(tmp_path, docs, status, limit):
    with OpenAIStub(responder=stub_responder, statuses=[status] * 100) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=limit)
        with pytest.raises(ConfigurationError, match=f"HTTP {status}: stub error {status}"):
            model.generate_until(instances(docs))
        n_sent = len(stub.chat_requests())
        assert 3 <= n_sent <= 3 + 2 * (limit - 1)  # the first three decide; at most the in-flight ones more
        assert store_rows(tmp_path / "store.sqlite") == [] and model.failures == {}
        # the configuration fixed: the rerun asks every question
        stub.statuses.clear()
        stub.reset()
        again, _ = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=limit)
        assert again.generate_until(instances(docs)) == [answer_for(doc_to_text(d)) for d in docs]
        assert len(stub.chat_requests()) == len(docs)


def test_per_question_client_errors_keep_todays_behaviour(tmp_path, docs):
    """400 on some questions after one succeeded: each is a stored failure, the run goes on;
    and mixed first failures (another status) never stop it."""
    first = min(range(len(docs)), key=lambda i: (docs[i]["video"], i))  # the first one asked
    bad = {doc_to_text(d) for i, d in enumerate(docs) if i != first and d["category"] in ("N.1", "N.2", "C.1")}

    def responder(req: StubRequest) -> str | Reply:
        return Reply(status=400) if req.text in bad else answer_for(req.text)

    with OpenAIStub(responder=responder) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=1)
        out = model.generate_until(instances(docs))
    assert sum(o.startswith(FAILED_MARKER) for o in out) == len(bad)
    assert sorted(st for _, st in store_rows(tmp_path / "store.sqlite")).count("failed") == len(bad)
    with OpenAIStub(responder=stub_responder, statuses=[401, 403, 401, 401, 401]) as stub:
        model, _ = make_model(stub, tmp_path / "b", docs[:6], num_frames=2, max_concurrency=1)
        out = model.generate_until(instances(docs[:6]))
    assert sum(o.startswith(FAILED_MARKER) for o in out) == 5 and len(model.failures) == 5


# ------------------------------------------------------------- server limits, reasoning models


def test_frames_over_the_servers_image_limit_are_refused_before_any_request(tmp_path, docs):
    with OpenAIStub(responder=stub_responder) as stub:
        model, _ = make_model(stub, tmp_path, docs, num_frames=8, max_images_per_prompt=4)
        with pytest.raises(ValueError, match=r"num_frames=8 sends 8 images .* max_images_per_prompt=4"):
            model.generate_until(instances(docs))
        # fps x the longest video (the synthetic videos last 3 s): 2 fps -> 6 frames, over 4
        model, _ = make_model(stub, tmp_path / "b", docs, fps=2, max_images_per_prompt=4)
        with pytest.raises(ValueError, match=r"fps=2.0 x vid\d+\.mp4 \(3.0 s\) sends 6 images"):
            model.generate_until(instances(docs))
        assert stub.requests == []  # nothing asked, not even GET /models
        model, _ = make_model(stub, tmp_path / "c", docs, fps=2, max_frames=4, max_images_per_prompt=4)
        model.generate_until(instances(docs[:2]))
        assert [len(r.media_urls) for r in stub.chat_requests()] == [4, 4]
        blind = blind_docs(docs)
        model, _ = make_model(stub, tmp_path / "d", blind, num_frames=8, max_images_per_prompt=4)
        model.generate_until(instances(blind[:1]))  # a text-only request sends no image
    with pytest.raises(ValueError, match="video_mode=frames only"):
        OpenAICompat(model="stub", base_url="http://127.0.0.1:1/v1", video_mode="video_url", max_images_per_prompt=4)


@pytest.mark.parametrize(
    "name,args,reasoning",
    [
        ("gpt-5-mini", {}, True),
        ("openai/gpt-5.5", {}, True),
        ("o4-mini", {}, True),
        ("my-gateway-reasoner", {"reasoning": "true"}, True),
        ("gpt-5-mini", {"reasoning": "false"}, False),
        ("Qwen/Qwen2.5-VL-7B-Instruct", {}, False),
    ],
)
def test_reasoning_models_get_max_completion_tokens_and_no_temperature(tmp_path, docs, name, args, reasoning):
    with OpenAIStub(responder=stub_responder, models=(name,)) as stub:
        model = OpenAICompat(
            model=name, base_url=stub.base_url, response_store=str(tmp_path / "s.sqlite"), num_frames=2, **args
        )
        model.task_dict = {TASK: {SPLIT: docs}}
        model.generate_until(instances(docs[:1]))
        body = stub.chat_requests()[0].body
    if reasoning:
        assert body["max_completion_tokens"] == 32 and "temperature" not in body and "max_tokens" not in body
        assert model.describe()["reasoning"] is True
    else:
        assert body["max_tokens"] == 32 and body["temperature"] == 0 and "max_completion_tokens" not in body


def test_a_reasoning_budget_of_its_own(tmp_path, docs):
    with OpenAIStub(responder=stub_responder, models=("gpt-5-mini",)) as stub:
        model = OpenAICompat(
            model="gpt-5-mini", base_url=stub.base_url, response_store=str(tmp_path / "s.sqlite"),
            num_frames=2, max_completion_tokens=2048,
        )  # fmt: skip
        model.task_dict = {TASK: {SPLIT: docs}}
        model.generate_until(instances(docs[:1]))
        assert stub.chat_requests()[0].body["max_completion_tokens"] == 2048
    with pytest.raises(ValueError, match="max_completion_tokens is for reasoning models"):
        OpenAICompat(model="qwen", base_url="http://127.0.0.1:1/v1", max_completion_tokens=64)


# ------------------------------------------------------------------- the real lmms-eval, slow


def lmms_env(data: Path, store: Path) -> dict[str, str]:
    # PYTHONPATH: the adapter under test is this checkout's; the task YAMLs come from the install
    return {
        "NARU_DATA_DIR": str(data),
        "NARU_RESPONSE_STORE": str(store),
        "OPENAI_API_KEY": FAKE_KEY,
        "PYTHONPATH": str(ROOT),
    }


def model_args(stub: OpenAIStub, **extra: Any) -> str:
    args = {"model": "stub", "base_url": stub.base_url, "num_frames": 4, **extra}
    return ",".join(f"{k}={v}" for k, v in args.items())


def assert_metrics(run, data: Path, intended: dict[str, str | None]) -> None:
    assert run.ok, run.stderr[-5000:]
    want = expected_metrics(data / "annotations.jsonl", intended, set(intended))
    for m in METRICS:
        assert run.metric(TASK, m) == pytest.approx(want[m], abs=1e-9), m


def store_counts(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
            return dict(conn.execute("SELECT status, count(*) FROM responses GROUP BY status").fetchall())
    except sqlite3.OperationalError:
        return {}


@pytest.mark.slow
def test_lmms_eval_end_to_end_and_the_key_stays_secret(data, docs, tmp_path):
    store = tmp_path / "store.sqlite"
    with OpenAIStub(responder=stub_responder) as stub:
        run = run_lmms_eval(
            "naru_openai_compat", model_args(stub), [TASK], tmp_path / "out", env=lmms_env(data, store), timeout=240
        )
        reqs = stub.chat_requests()
    assert_metrics(run, data, intended_letters(docs))
    assert run.results()["n-samples"][TASK]["effective"] == len(docs)
    assert len(reqs) == len(docs) and all(r.part_types == ["image_url"] * 4 + ["text"] for r in reqs)
    assert {r.headers["authorization"] for r in stub.requests} == {f"Bearer {FAKE_KEY}"}
    assert "api_key" not in run.results()["config"]["model_args"]
    # the key is in no file lmms-eval or the store wrote
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()] + list(tmp_path.glob("store.sqlite*"))
    assert run.results_file in written and store in written
    for p in written:
        assert FAKE_KEY.encode() not in p.read_bytes(), p
    assert FAKE_KEY not in run.stdout + run.stderr
    assert store_counts(store) == {"ok": len(docs)}


@pytest.mark.slow
def test_kill_9_mid_run_then_resume_pays_for_nothing_twice(data, docs, tmp_path):
    store, out = tmp_path / "store.sqlite", tmp_path / "out"
    half = len(docs) // 2
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", **lmms_env(data, store)}
    with OpenAIStub(responder=stub_responder, hold_after=half) as stub:
        cmd = [
            *lmms_eval_command(),
            "--model", "naru_openai_compat",
            "--model_args", model_args(stub, max_concurrency=4),
            "--tasks", TASK,
            "--output_path", str(out),
            "--log_samples",
            "--batch_size", "1",
        ]  # fmt: skip
        log = (tmp_path / "run1.log").open("w")
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while not (store_counts(store).get("ok", 0) >= half and stub.held()):
                assert proc.poll() is None, (tmp_path / "run1.log").read_text()[-4000:]
                assert time.monotonic() < deadline, "run 1 never reached half way"
                time.sleep(0.05)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            log.close()
        in_flight = {r.signature for r in stub.held()}
        n_run1 = len(stub.chat_requests())
        stub.release()
        assert store_counts(store) == {"ok": half} and 1 <= len(in_flight) <= 4
        assert not list(out.rglob("*_results.json"))

        run = run_lmms_eval(
            "naru_openai_compat",
            model_args(stub, max_concurrency=4),
            [TASK],
            out,
            env=lmms_env(data, store),
            timeout=240,
        )
        reqs = stub.chat_requests()
    assert_metrics(run, data, intended_letters(docs))  # (a)
    per_question = Counter(r.signature for r in reqs)
    assert len(per_question) == len(docs)
    for sig, n in per_question.items():  # (b): only what was in flight at the kill is asked twice
        assert n <= (2 if sig in in_flight else 1)
    assert len(reqs) - n_run1 == len(docs) - half
    assert store_counts(store) == {"ok": len(docs)}  # (c)
    answers = ResponseStore(store)
    rows = answers._conn.execute("SELECT response FROM responses").fetchall()
    assert sorted(r[0] for r in rows) == sorted(answer_for(doc_to_text(d)) for d in docs)


@pytest.mark.slow
def test_failed_questions_are_invalid_then_reasked_alone(data, docs, tmp_path):
    store, out = tmp_path / "store.sqlite", tmp_path / "out"
    bad_videos = {"vid001.mp4", "vid002.mp4"}
    bad = {d["question_id"] for d in docs if Path(d["video"]).name in bad_videos}
    failing = True

    def responder(req: StubRequest) -> str | Reply:
        if failing and Path(req.media_urls[0]).name in bad_videos:
            return Reply(status=500)
        return answer_for(req.text)

    args = {"video_mode": "video_url", "max_retries": 1, "retry_base_delay": 0.01}
    with OpenAIStub(responder=responder) as stub:
        run1 = run_lmms_eval(
            "naru_openai_compat", model_args(stub, **args), [TASK], out, env=lmms_env(data, store), timeout=240
        )
        reqs1 = stub.chat_requests()
        intended = intended_letters(docs)
        assert_metrics(run1, data, {q: (None if q in bad else v) for q, v in intended.items()})
        assert len(reqs1) == len(docs) + len(bad)  # each failing question: 1 try + 1 retry
        log = run1.stdout + run1.stderr
        assert f"{len(bad)} request(s) failed and are scored invalid" in log
        assert all(q in log for q in bad)
        samples = {s["overall"]["question_id"]: s["overall"] for s in read_jsonl(run1.sample_files[TASK])}
        assert {q for q, s in samples.items() if s["method"] == "invalid:failed"} == bad
        assert store_counts(store) == {"ok": len(docs) - len(bad), "failed": len(bad)}

        failing = False
        stub.reset()
        run2 = run_lmms_eval(
            "naru_openai_compat", model_args(stub, **args), [TASK], out, env=lmms_env(data, store), timeout=240
        )
        reqs2 = stub.chat_requests()
    assert_metrics(run2, data, intended)
    texts = {d["question_id"]: doc_to_text(d) for d in docs}
    assert sorted(r.text for r in reqs2) == sorted(texts[q] for q in bad)
    assert store_counts(store) == {"ok": len(docs)}


@pytest.mark.slow
def test_lmms_eval_naru_mcq_500_blind_end_to_end(data, docs, tmp_path):
    """The blind task through the real lmms-eval: every question asked text only, scored."""
    store = tmp_path / "store.sqlite"
    task = "naru_mcq_500_blind"
    with OpenAIStub(responder=stub_responder) as stub:
        run = run_lmms_eval(
            "naru_openai_compat", model_args(stub), [task], tmp_path / "out", env=lmms_env(data, store), timeout=240
        )
        reqs = stub.chat_requests()
    assert run.ok, run.stderr[-5000:]
    assert len(reqs) == len(docs) and all(r.part_types == ["text"] for r in reqs)
    intended = {d["question_id"]: v for d, v in zip(docs, intended_letters(docs).values(), strict=True)}
    want = expected_metrics(data / "annotations.jsonl", intended, set(intended))
    for m in METRICS:
        assert run.metric(task, m) == pytest.approx(want[m], abs=1e-9), m
    assert store_counts(store) == {"ok": len(docs)}


@pytest.mark.slow
def test_lmms_eval_tasks_naru_asks_each_distinct_question_once(tmp_path):
    """``--tasks naru`` = naru_mcq + naru_mcq_500 (a strict subset here): as many requests as
    distinct questions, both tasks scored from them; a rerun asks nothing."""
    data = make_dataset(
        tmp_path / "data",
        SyntheticSpec(counts={c: 2 for c in CATEGORIES}, n_videos=4, seed=3, subset_flags=True),
    )
    docs = docs_of(data)
    subset = {r["question_id"] for r in read_jsonl(data / "annotations.jsonl") if r["subset_500"]}
    assert 0 < len(subset) < len(docs)
    store = tmp_path / "store.sqlite"
    intended = intended_letters(docs)
    with OpenAIStub(responder=stub_responder) as stub:
        run = run_lmms_eval(
            "naru_openai_compat", model_args(stub), ["naru"], tmp_path / "out", env=lmms_env(data, store), timeout=300
        )
        reqs = stub.chat_requests()
        assert run.ok, run.stderr[-5000:]
        assert run.results()["n-samples"]["naru_mcq_500"]["effective"] == len(subset)
        assert len(reqs) == len(docs)  # not len(docs) + len(subset)
        assert len({r.signature for r in reqs}) == len(docs)
        want = expected_metrics(data / "annotations.jsonl", intended, set(intended))
        for m in METRICS:
            assert run.metric("naru_mcq", m) == pytest.approx(want[m], abs=1e-9), m
        gold = {r["question_id"]: r["answer"] for r in read_jsonl(data / "annotations.jsonl")}
        right = sum(intended[q] == gold[q] for q in subset)
        # accuracy is the micro figure (overall is the authors' macro, checked above for naru_mcq)
        assert run.metric("naru_mcq_500", "accuracy") == pytest.approx(100.0 * right / len(subset))
        stub.reset()
        again = run_lmms_eval(
            "naru_openai_compat", model_args(stub), ["naru_mcq_500"], tmp_path / "out2", env=lmms_env(data, store)
        )
        assert again.ok and stub.chat_requests() == []
    assert store_counts(store) == {"ok": len(docs)}


@pytest.mark.slow
def test_lmms_eval_qwen_default_is_one_video_part_and_the_payloads_say_so(data, docs, tmp_path):
    """A Qwen-family served model through the real lmms-eval: by default one video part per
    question and no image part, every sample payload marked ``input_mode: video``."""
    qwen = "Qwen/Qwen2.5-VL-7B-Instruct"
    store = tmp_path / "store.sqlite"
    with OpenAIStub(responder=stub_responder, models=(qwen,), owner="vllm") as stub:
        run = run_lmms_eval(
            "naru_openai_compat",
            model_args(stub, model=qwen),
            [TASK],
            tmp_path / "out",
            env=lmms_env(data, store),
            timeout=240,
        )
        reqs = stub.chat_requests()
    assert_metrics(run, data, intended_letters(docs))
    assert len(reqs) == len(docs) and all(r.part_types == ["video_url", "text"] for r in reqs)
    assert all(len(r.video_frames()[0]) == 4 and r.media_io_kwargs["video"]["num_frames"] == -1 for r in reqs)
    samples = [s["overall"] for s in read_jsonl(run.sample_files[TASK])]
    assert len(samples) == len(docs)
    assert {(s["adapter"], s["input_mode"]) for s in samples} == {("naru_openai_compat", "video")}
