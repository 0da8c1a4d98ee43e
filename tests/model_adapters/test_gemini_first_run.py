"""What a first live ``naru_gemini`` run meets, through the real SDK against the stub.

Blind tasks answered as text, thinking settings checked per model family, the countTokens
calibration from what the API returns, audio dropped by ``videoMetadata.contentLayers``, and
Gemini's ``RetryInfo`` wait honoured. The stub computes every count from what it receives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lmms_eval.api.instance import Instance

from model_adapters.gemini import Gemini
from naru_eval.adapters.request import FAILED_MARKER
from naru_eval.api.retry import RetryPolicy, call_with_retry, retry_after, retry_info_delay
from naru_eval.core.scoring import METRICS
from naru_eval.lmms.run import run_lmms_eval
from naru_eval.lmms.tasks import doc_to_text, doc_to_visual_blind, process_docs_blind_500, process_results_blind
from naru_eval.providers.gemini.families import THINKING_LEVELS
from naru_eval.providers.gemini.tokens import AUDIO_TOKENS_PER_S, text_tokens
from tests.helpers.data import lmms_instances
from tests.helpers.expected import expected_metrics
from tests.helpers.gemini import (
    FAKE_KEY,
    GEMINI_POST,
    INVALID_TEXT,
    ROOT,
    answer_for,
    instances,
    make_model,
    responder,
    write_av,
)
from tests.helpers.stubs.gemini_server import GeminiStub

#: data, docs, gemini_env: tests/model_adapters/conftest.py
pytestmark = [pytest.mark.api, pytest.mark.usefixtures("gemini_env")]

BLIND = "naru_mcq_500_blind"


# ------------------------------------------------------------------------- blind questions


@pytest.fixture
def blind_docs(data, monkeypatch) -> list[dict[str, Any]]:
    """The naru_mcq_500_blind docs as lmms-eval builds them (``video`` is None)."""
    monkeypatch.setenv("NARU_DATA_DIR", str(data))
    return [dict(d) for d in process_docs_blind_500(None)]


def blind_instances(docs: list[dict[str, Any]]) -> list[Instance]:
    return lmms_instances(docs, BLIND, "test", visual=doc_to_visual_blind)


def test_blind_questions_are_asked_as_text_alone(tmp_path, blind_docs):
    assert blind_docs and all(d["video"] is None for d in blind_docs)
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        model, _ = make_model(stub, tmp_path, blind_docs)
        model.task_dict = {BLIND: {"test": blind_docs}}
        out = model.generate_until(blind_instances(blind_docs))
        reqs = stub.generate_requests()
        assert stub.uploads_started == 0 and stub.file_gets() == [] and stub.count_requests() == []
        assert len(reqs) == len(blind_docs) and all(r.status == 200 for r in reqs)
        assert all([next(iter(p)) for p in r.parts] == ["text"] for r in reqs)  # no video part
        # a rerun asks nothing: every answer was stored as an answer, not a failure
        stub.reset()
        again, _ = make_model(stub, tmp_path, blind_docs)
        again.task_dict = {BLIND: {"test": blind_docs}}
        assert again.generate_until(blind_instances(blind_docs)) == out
        assert stub.requests == [] and again.reused == len(blind_docs)
    assert not any(o.startswith(FAILED_MARKER) for o in out) and model.failures == {}
    assert out == [answer_for(doc_to_text(d)) for d in blind_docs]
    scored = [process_results_blind(d, [o]) for d, o in zip(blind_docs, out, strict=True)]
    payloads = [next(iter(s.values())) for s in scored]  # every payload carries the whole record
    assert sum(p["valid"] for p in payloads) == sum(o != INVALID_TEXT for o in out)
    assert all(p["blind"] for p in payloads)
    usage = model.store.get(*model.request_key(model.to_naru_requests(blind_instances(blind_docs))[0])).usage
    assert usage["estimated_input_tokens"] == text_tokens(doc_to_text(blind_docs[0])) and usage["input_tokens"] > 0
    assert set(usage["input_by_modality"]) == {"TEXT"}


@pytest.mark.slow
def test_lmms_eval_runs_naru_mcq_500_blind_end_to_end(data, tmp_path, monkeypatch):
    monkeypatch.setenv("NARU_DATA_DIR", str(data))
    blind = [dict(d) for d in process_docs_blind_500(None)]
    run_env = {
        "NARU_DATA_DIR": str(data),
        "NARU_RESPONSE_STORE": str(tmp_path / "store.sqlite"),
        "NARU_CACHE_DIR": str(tmp_path / "cache"),
        "GOOGLE_API_KEY": FAKE_KEY,
        "PYTHONPATH": str(ROOT),
    }
    intended = {}
    for d in blind:
        ans = answer_for(doc_to_text(d, {"pre_prompt": "", "post_prompt": GEMINI_POST}))
        intended[d["question_id"]] = None if ans == INVALID_TEXT else ans[len("The answer is ")]
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        args = f"model=gemini-2.5-flash,base_url={stub.base_url}"
        run = run_lmms_eval("naru_gemini", args, [BLIND], tmp_path / "out", env=run_env, timeout=240)
        assert run.ok, run.stderr[-5000:]
        assert stub.uploads_started == 0 and len(stub.generate_requests()) == len(blind)
    want = expected_metrics(data / "annotations.jsonl", intended, set(intended))
    for m in METRICS:
        assert run.metric(BLIND, m) == pytest.approx(want[m], abs=1e-9), m


# ------------------------------------------------------------------------ thinking settings


@pytest.mark.parametrize(
    "model,args,allowed",
    [
        ("gemini-2.5-flash", {"thinking_level": "low"}, "takes thinking_budget (-1 (dynamic), 0 (off) or 1..24576)"),
        ("gemini-2.5-pro", {"thinking_budget": 0}, "cannot turn thinking off"),
        ("gemini-2.5-pro", {"thinking_level": "high"}, "-1 (dynamic) or 128..32768"),
        ("gemini-2.5-flash-lite", {"thinking_budget": 100}, "0 (off) or 512..24576"),
        ("gemini-3-pro-preview", {"thinking_budget": 0}, "takes thinking_level (low, high)"),
        ("gemini-3-pro-preview", {"thinking_level": "minimal"}, "thinking_level in (low, high)"),
        ("gemini-3-pro-preview", {"thinking_level": "medium"}, "thinking_level in (low, high)"),
        ("gemini-3-flash-preview", {"thinking_budget": 1024}, "(minimal, low, medium, high)"),
        ("gemini-3-flash-preview", {"thinking_level": "xhigh"}, "(minimal, low, medium, high)"),
        ("gemini-2.0-flash", {"thinking_budget": 0}, "has no thinking"),
    ],
)
def test_a_wrong_thinking_setting_is_refused_at_start(tmp_path, docs, model, args, allowed):
    with GeminiStub(api_key=FAKE_KEY) as stub:
        with pytest.raises(ValueError) as err:
            make_model(stub, tmp_path, docs[:1], model=model, **args)
        assert stub.requests == []
    assert allowed in str(err.value) and model in str(err.value)


@pytest.mark.parametrize(
    "model,args,sent",
    [
        ("gemini-2.5-flash", {"thinking_budget": 0}, {"thinking_budget": 0}),
        ("gemini-2.5-pro", {"thinking_budget": -1}, {"thinking_budget": -1}),
        ("gemini-3-pro-preview", {"thinking_level": "low"}, {"thinking_level": "LOW"}),
        ("gemini-3-flash-preview", {"thinking_level": "minimal"}, {"thinking_level": "MINIMAL"}),
        ("gemini-4-ultra-preview", {"thinking_level": "xhigh"}, {"thinking_level": "XHIGH"}),  # unknown: passed on
    ],
)
def test_a_right_thinking_setting_reaches_the_api(tmp_path, docs, model, args, sent):
    with GeminiStub(api_key=FAKE_KEY) as stub:  # the stub answers 400 to a wrong pairing, as the API
        m, _ = make_model(stub, tmp_path, docs[:1], model=model, max_input_tokens=1_000_000, **args)
        assert m.generate_until(instances(docs[:1])) == ["A"]
        (r,) = stub.generate_requests()
    assert r.status == 200 and r.generation_config["thinkingConfig"] == sent


def test_unknown_families_pass_through_with_a_warning_and_levels_match_the_sdk(caplog):
    from google.genai import types
    from loguru import logger

    assert THINKING_LEVELS == tuple(
        x.value.lower() for x in types.ThinkingLevel if x.name != "THINKING_LEVEL_UNSPECIFIED"
    )
    seen: list[str] = []
    sink = logger.add(seen.append, level="WARNING")
    try:
        Gemini(model="gemini-4-ultra-preview", thinking_level="xhigh")
    finally:
        logger.remove(sink)
    assert any("not in the thinking table" in s and "sent as given" in s for s in seen)
    with pytest.raises(ValueError, match="thinking_level=.*must be one of"):
        Gemini(model="gemini-4-ultra-preview", thinking_level="extreme")


# ----------------------------------------------------------------- countTokens calibration


def _av_doc(tmp_path: Path, docs) -> dict[str, Any]:
    return {**docs[0], "video": str(write_av(tmp_path / "talk.mp4")), "duration_s": None}


def test_calibration_rescales_only_the_frames_for_gemini_2_5(tmp_path, docs):
    """Gemini 2.5 at low resolution: countTokens counts at the default one, so the frames are
    counted alone (contentLayers=[FRAMES]) and rescaled; the audio is not."""
    doc = _av_doc(tmp_path, docs)
    # the stub's truth per frame is the adapter's model (frame tokens + 10 of overhead)
    tokens = {None: 268, "MEDIA_RESOLUTION_UNSPECIFIED": 268, "MEDIA_RESOLUTION_LOW": 76}
    with GeminiStub(api_key=FAKE_KEY, frame_tokens=tokens) as stub:
        model, _ = make_model(stub, tmp_path, [doc], media_resolution="low", fps=1)
        model.generate_until(instances([doc]))
        counts, (gen,) = stub.count_requests(), stub.generate_requests()
        truth, by = stub.count(gen.body)
    assert [r.status for r in counts] == [200, 200, 200]
    assert all("generationConfig" not in r.body for r in counts)
    assert all("mediaResolution" not in p for r in counts for p in r.parts)  # Gemini 3 only
    assert [r.video_metadata for r in counts[1:]] == [[{"fps": 1.0}], [{"fps": 1.0, "content_layers": ["FRAMES"]}]]
    cal = model._run.calibration.model_dump()
    assert by["AUDIO"] == 12 * AUDIO_TOKENS_PER_S and by["VIDEO"] == 12 * 76
    assert cal["calibrated"] == truth  # the audio kept, the frames rescaled 268 -> 76
    assert cal["counted_video"] - cal["counted_frames"] == by["AUDIO"]


def test_calibration_counts_gemini_3_at_the_runs_resolution_per_part(tmp_path, docs):
    doc = _av_doc(tmp_path, docs)
    tokens = {None: 70, "MEDIA_RESOLUTION_UNSPECIFIED": 70, "MEDIA_RESOLUTION_HIGH": 280}
    with GeminiStub(api_key=FAKE_KEY, frame_tokens=tokens) as stub:
        model, _ = make_model(stub, tmp_path, [doc], model="gemini-3-flash-preview", media_resolution="high", fps=1)
        model.generate_until(instances([doc]))
        counts, (gen,) = stub.count_requests(), stub.generate_requests()
        truth, by = stub.count(gen.body)
    assert [r.status for r in counts] == [200, 200]  # the text, the video at its own resolution
    (video,) = counts[1].parts
    assert video["mediaResolution"] == {"level": "MEDIA_RESOLUTION_HIGH"}
    assert "mediaResolution" not in gen.parts[0] and gen.generation_config["mediaResolution"] == "MEDIA_RESOLUTION_HIGH"
    assert by["VIDEO"] == 12 * 280 and by["AUDIO"] == 12 * AUDIO_TOKENS_PER_S
    assert model._run.calibration.calibrated == truth and model._run.calibration.frame_scale == 1.0


# -------------------------------------------------------------------- audio off, by the API


def test_audio_off_asks_the_api_for_frames_only_without_re_encoding(tmp_path, docs):
    doc = _av_doc(tmp_path, docs)
    size = Path(doc["video"]).stat().st_size
    with GeminiStub(api_key=FAKE_KEY) as stub:
        model, _ = make_model(stub, tmp_path, [doc], audio=False)
        model.generate_until(instances([doc]))
        (r,) = stub.generate_requests()
        sent = stub.file_by_uri(r.file_uris[0])
        _, by = stub.count(r.body)
        stub.reset()
        # the fallback, should the API refuse content layers: strip the track locally
        local, _ = make_model(stub, tmp_path, [doc], audio=False, strip_audio=True)
        local.generate_until(instances([doc]))
        (r2,) = stub.generate_requests()
        stripped = stub.file_by_uri(r2.file_uris[0])
    assert r.video_metadata == [{"fps": 0.25, "content_layers": ["FRAMES"]}]
    assert sent.has_audio and sent.size_bytes == size and model.upload_stats["preprocessed"] == 0
    assert "AUDIO" not in by and by["VIDEO"] > 0
    assert model._run.preflight.longest_estimate < model.estimate(12.0, doc_to_text(doc), audio=True).total
    assert r2.video_metadata == [{"fps": 0.25}] and not stripped.has_audio
    assert model.describe()["content_layers"] == ["FRAMES"] and model.describe()["preprocess"] is None
    assert local.describe() != model.describe() and local.describe()["preprocess"]["audio"] is False


# ------------------------------------------------------------------------------ retry hints


def test_gemini_retry_info_in_the_error_body_sets_the_wait(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, statuses=[429, 429], retry_delay="7s") as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], retry_max_delay=60)
        assert model.generate_until(instances(docs[:1])) == ["A"]
        statuses = [r.status for r in stub.generate_requests()]
    assert statuses == [429, 429, 200] and sleeps == [7.0, 7.0]  # not full jitter in [0, 0.5 * 2^n]
    with GeminiStub(api_key=FAKE_KEY, statuses=[429], retry_delay="90s") as stub:
        model, sleeps = make_model(stub, tmp_path / "b", docs[:1], retry_max_delay=20)
        model.generate_until(instances(docs[:1]))
    assert sleeps == [20.0]  # capped at retry_max_delay


def test_retry_info_parsing():
    body = {
        "error": {
            "code": 429,
            "details": [
                {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.250s"},
            ],
        }
    }
    assert retry_info_delay(body) == 0.25
    assert retry_info_delay({"error": {"details": [{"@type": "x", "retryDelay": "3s"}]}}) is None
    assert retry_info_delay({"error": {"details": "nope"}}) is None and retry_info_delay(None) is None
    bad = json.loads(json.dumps(body).replace("0.250s", "soon"))
    assert retry_info_delay(bad) is None

    class E(Exception):
        status_code = 429
        body = {"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}]}}

    assert retry_after(E()) == 2.0
    sleeps: list[float] = []
    calls = iter([E(), "ok"])

    def fn() -> str:
        x = next(calls)
        if isinstance(x, Exception):
            raise x
        return x

    assert call_with_retry(fn, RetryPolicy(max_attempts=3, max_delay=60), sleep=sleeps.append) == "ok"
    assert sleeps == [2.0]
