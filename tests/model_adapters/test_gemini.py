"""``naru_gemini`` through the real ``google-genai`` SDK against a local Gemini REST stub.

The fast tests drive the adapter's ``generate_until`` with lmms-eval ``Instance``s; the ``slow``
one runs the real ``lmms-eval`` console script twice (end to end; the second run reuses every
upload). No network: the stub binds 127.0.0.1 and the key is fake.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from model_adapters.gemini import ConfigurationRefused, ContextOverflow, Gemini
from naru_eval.adapters.request import FAILED_MARKER
from naru_eval.cli import gemini as cli_gemini
from naru_eval.cli.main import main as cli_main
from naru_eval.core.data import NaruQuestion
from naru_eval.core.scoring import METRICS, score_response
from naru_eval.lmms.run import run_lmms_eval
from naru_eval.lmms.tasks import doc_to_text
from naru_eval.providers.gemini.pricing import load_prices, request_cost
from naru_eval.providers.gemini.tokens import AUDIO_TOKENS_PER_S
from naru_eval.providers.gemini.usage import usage_from_store
from naru_eval.store.uploads import UploadRegistry
from tests.helpers.expected import expected_metrics
from tests.helpers.gemini import (
    FAKE_KEY,
    GEMINI_POST,
    INVALID_TEXT,
    MODEL,
    ROOT,
    TASK,
    answer_for,
    instances,
    make_model,
    responder,
    write_av,
)
from tests.helpers.stubs.gemini_server import GeminiStub, GReply, probe_bytes

#: data, docs, gemini_env: tests/model_adapters/conftest.py
pytestmark = [pytest.mark.api, pytest.mark.usefixtures("gemini_env")]


def stored(model: Gemini, docs, i: int = 0):
    return model.store.get(*model.request_key(model.to_naru_requests(instances(docs))[i]))


def files_of(tmp_path: Path) -> list[Path]:
    return [p for p in tmp_path.rglob("*") if p.is_file()]


# ------------------------------------------------------------------------------- the request


def test_sends_the_video_first_at_fps_0_25_and_the_media_resolution(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        assert stub.host == "127.0.0.1"
        model, _ = make_model(stub, tmp_path, docs, media_resolution="low", max_concurrency=4)
        assert not model._client.built  # built lazily
        out = model.generate_until(instances(docs))
        reqs = stub.generate_requests()
        chunks = stub.upload_chunks()
        others = [r for r in stub.requests if r not in chunks]
    assert out == [answer_for(doc_to_text(d)) for d in docs]  # in request order
    assert len(reqs) == len(docs)
    for r in reqs:
        assert r.route == f"/v1beta/models/{MODEL}:generateContent"
        assert [next(iter(p)) for p in r.parts] == ["fileData", "text"]  # video first, question last
        assert r.video_metadata == [{"fps": 0.25}]
        assert r.generation_config["mediaResolution"] == "MEDIA_RESOLUTION_LOW"
        assert r.generation_config["temperature"] == 0  # Gemini 2.5: the task's temperature
        assert "maxOutputTokens" not in r.generation_config  # thinking would eat a 32-token budget
    by_text = {r.text: r for r in reqs}
    uris = {}
    for d in docs:
        uris.setdefault(d["video_id"], set()).update(by_text[doc_to_text(d)].file_uris)
    assert len(uris) == 4 and all(len(u) == 1 for u in uris.values())  # one upload per video
    assert {r.headers.get("x-goog-api-key") for r in others} == {FAKE_KEY}
    assert all("x-goog-api-key" not in r.headers for r in chunks)  # the SDK's chunk requests


def test_config_options_reach_generation_config(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY) as stub:
        model, _ = make_model(stub, tmp_path, docs[:1], model="gemini-3-flash-preview", thinking_level="low", seed=7)
        model.generate_until(instances(docs[:1]))
        gc = stub.generate_requests()[0].generation_config
        assert "mediaResolution" not in gc and "temperature" not in gc  # Gemini 3: its default temperature
        assert gc["seed"] == 7 and gc["thinkingConfig"] == {"thinking_level": "LOW"}
        stub.reset()
        model, _ = make_model(stub, tmp_path / "b", docs[:1], thinking_budget=0, fps=1, media_resolution="high")
        model.generate_until(instances(docs[:1]))
        r = stub.generate_requests()[0]
        assert r.generation_config["thinkingConfig"] == {"thinking_budget": 0}
        assert r.generation_config["mediaResolution"] == "MEDIA_RESOLUTION_HIGH"
        assert r.video_metadata == [{"fps": 1.0}]
    # what changes the answers is in the run key; the URL and the concurrency are not
    a = Gemini(model=MODEL, media_resolution="low").describe()
    b = Gemini(model=MODEL, media_resolution="low", base_url="http://127.0.0.1:9/", max_concurrency=2).describe()
    assert a == b
    for change in ({"fps": 0.5}, {"media_resolution": "medium"}, {"audio": False}, {"thinking_budget": 128}):
        assert Gemini(**{"model": MODEL, "media_resolution": "low", **change}).describe() != a, change
    assert Gemini(model="gemini-2.5-pro").describe() != Gemini(model=MODEL).describe()


# --------------------------------------------------------------------------------- uploads


def test_each_video_is_uploaded_once_across_questions_and_runs(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder, processing_polls=2, upload_delay=0.1) as stub:
        model, _ = make_model(stub, tmp_path, docs, max_concurrency=4, upload_concurrency=4)
        model.generate_until(instances(docs))
        assert stub.uploads_started == 4 and stub.uploads_finished == 4
        assert stub.max_uploads_in_flight > 1  # the upload pool runs in parallel
        assert all(r.status == 200 for r in stub.generate_requests())  # never asked before ACTIVE
        assert model.upload_stats["uploaded"] == 4 and model.upload_stats["reused"] == 0
        registry = UploadRegistry(tmp_path / "uploads.sqlite")
        assert len(registry.all()) == 4 and {r.state for r in registry.all()} == {"ACTIVE"}

        # run 2: another configuration (new run key, so every question is asked again) -> zero uploads
        stub.reset()
        again, _ = make_model(stub, tmp_path, docs, thinking_budget=0, max_concurrency=4)
        out = again.generate_until(instances(docs))
        assert stub.uploads_started == 0 and len(stub.generate_requests()) == len(docs)
        assert len(stub.file_gets()) == 4  # each reuse is checked once with files.get
        assert again.upload_stats["reused"] == 4 and again.reused == 0
        assert out == [answer_for(doc_to_text(d)) for d in docs]

        # the server forgot one file (48 h retention): only that video is uploaded again
        gone = registry.all()[0]
        stub.expire(gone.name)
        stub.reset()
        third, _ = make_model(stub, tmp_path, docs, thinking_budget=1)
        third.generate_until(instances(docs))
        assert stub.uploads_started == 1 and third.upload_stats["reused"] == 3
        assert registry.get(gone.sha256, gone.account).name != gone.name

        # another key (another project) never reuses these uploads
        stub.reset()
        stub.api_key = None
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GOOGLE_API_KEY", "AIza-another-project-key-000000")
            other, _ = make_model(stub, tmp_path, docs, thinking_budget=2)
            other.generate_until(instances(docs))
        assert stub.uploads_started == 4


def test_an_upload_that_never_becomes_active_fails_its_questions_only(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder, processing_polls=10**6) as stub:
        model, _ = make_model(stub, tmp_path, docs, active_timeout=1.0, poll_interval=0.25)
        out = model.generate_until(instances(docs))
        assert stub.generate_requests() == []
    assert all(o.startswith(FAILED_MARKER) and "still PROCESSING after 1 s" in o for o in out)
    assert len(model.failures) == len(docs)
    with GeminiStub(api_key=FAKE_KEY, fail_processing=True) as stub:
        model, _ = make_model(stub, tmp_path / "b", docs[:2])
        out = model.generate_until(instances(docs[:2]))
    assert all("state FAILED" in o for o in out)


def test_a_failed_upload_fails_one_video_and_is_retried_next_run(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder, upload_statuses=[400]) as stub:
        model, _ = make_model(stub, tmp_path, docs, upload_concurrency=1)
        out = model.generate_until(instances(docs))
        failed = {d["video_id"] for d, o in zip(docs, out, strict=True) if o.startswith(FAILED_MARKER)}
        assert len(failed) == 1 and all("upload of" in model.failures[q] for q in model.failures)
        assert stub.uploads_started == 4  # a 400 is not retried
        stub.reset()
        again, _ = make_model(stub, tmp_path, docs)
        out = again.generate_until(instances(docs))
        assert stub.uploads_started == 1
        assert sorted(r.text for r in stub.generate_requests()) == sorted(
            doc_to_text(d) for d in docs if d["video_id"] in failed
        )
    assert out == [answer_for(doc_to_text(d)) for d in docs]
    with GeminiStub(api_key=FAKE_KEY, upload_statuses=[503]) as stub:
        model, sleeps = make_model(stub, tmp_path / "b", docs[:1])
        assert model.generate_until(instances(docs[:1])) == ["A"]
        assert stub.uploads_started == 2 and len(sleeps) == 1  # a 503 on upload is retried


# ------------------------------------------------------------------------------------ retries


def test_retries_429_then_503_then_answers_and_halves_concurrency(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, statuses=[429, 503], responder=lambda r: "B") as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], max_retries=5, max_concurrency=8)
        assert model.generate_until(instances(docs[:1])) == ["B"]
        assert [r.status for r in stub.generate_requests()] == [429, 503, 200]
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.5 and 0 <= sleeps[1] <= 1.0  # full jitter
    assert model.limiter.cuts == 1 and model.limiter.limit < 8  # AIMD: halved on the 429
    assert stored(model, docs[:1]).usage["attempts"] == 3


def test_retries_stop_at_the_bound_and_the_failure_is_counted(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, statuses=[503] * 10) as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1], max_retries=2)
        out = model.generate_until(instances(docs[:1]))
        assert len(stub.generate_requests()) == 3
    assert len(sleeps) == 2
    assert out[0].startswith(FAILED_MARKER) and "503" in out[0]
    assert not score_response(NaruQuestion.from_doc(docs[0]), out[0]).valid
    s = stored(model, docs[:1])
    assert s.status == "failed" and s.response is None and s.usage["attempts"] == 3
    summary = json.loads(model._run.written.read_text())
    assert summary["this_run"]["failed"] == 1 and docs[0]["question_id"] in summary["failures"]


def test_retry_after_is_honoured_and_client_errors_are_not_retried(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, statuses=[429], retry_after=7) as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1])
        model.generate_until(instances(docs[:1]))
    assert sleeps == [7.0]
    with GeminiStub(api_key=FAKE_KEY, statuses=[400, 400]) as stub:
        model, sleeps = make_model(stub, tmp_path / "b", docs[:1])
        out = model.generate_until(instances(docs[:1]))
        assert len(stub.generate_requests()) == 1 and sleeps == []
    assert "400" in out[0] and out[0].startswith(FAILED_MARKER)


# ------------------------------------------------------------------- safety and empty answers


@pytest.mark.parametrize(
    "reply,reason",
    [
        (GReply(finish_reason="SAFETY"), "finish_reason=SAFETY"),
        (GReply(block_reason="PROHIBITED_CONTENT"), "block_reason=PROHIBITED_CONTENT"),
        (GReply(no_candidates=True), "no candidates"),
        (GReply(text="B", finish_reason="RECITATION"), "finish_reason=RECITATION"),
        (GReply(text=None, finish_reason="MAX_TOKENS", thoughts_tokens=900), "thinking may have used"),
        (GReply(text="  "), "empty answer"),
    ],
)
def test_blocks_and_empty_answers_are_counted_failures(tmp_path, docs, reply, reason):
    with GeminiStub(api_key=FAKE_KEY, responder=lambda r: reply) as stub:
        model, sleeps = make_model(stub, tmp_path, docs[:1])
        out = model.generate_until(instances(docs[:1]))
        assert len(stub.generate_requests()) == 1  # not retried
    assert out[0].startswith(FAILED_MARKER) and reason in out[0]
    scored = score_response(NaruQuestion.from_doc(docs[0]), out[0])
    assert not scored.valid and not scored.correct
    s = stored(model, docs[:1])
    assert s.status == "failed" and reason in s.error
    assert s.usage["input_tokens"] > 0  # a blocked request is still billed: its tokens are kept


# ----------------------------------------------------------------------------- usage and cost


def test_usage_and_cost_are_stored_summed_and_written(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=lambda r: GReply(text="C", thoughts_tokens=40)) as stub:
        model, _ = make_model(stub, tmp_path, docs, media_resolution="low", max_concurrency=3)
        model.generate_until(instances(docs))
        truth = [stub.count(r.body)[0] for r in stub.generate_requests()]
    price = load_prices().for_model(MODEL)
    s = stored(model, docs)
    u = s.usage
    assert u["thinking_tokens"] == 40 and u["output_tokens"] == 1 and u["input_by_modality"]["VIDEO"] > 0
    assert u["cost_usd"] == pytest.approx(
        request_cost(price, prompt_tokens=u["input_tokens"], output_tokens=1, thinking_tokens=40)
    )
    assert u["estimated_input_tokens"] >= u["input_tokens"]  # the estimate errs high
    summary_path = model._run.written
    assert summary_path.parent == tmp_path / "cache" and summary_path.name.startswith("gemini_usage_")
    summary = json.loads(summary_path.read_text())
    this = summary["this_run"]
    assert this["requests"] == this["ok"] == len(docs)
    assert this["input_tokens"] == sum(truth) and this["thinking_tokens"] == 40 * len(docs)
    assert summary["uploads"]["uploaded"] == 4 and summary["prices"]["as_of"]
    from_store = usage_from_store(model.store.path)
    (rk,) = summary["run_keys"]
    assert from_store[rk].input_tokens == sum(truth)
    assert from_store[rk].cost_usd == pytest.approx(this["cost_usd"], abs=1e-6)
    # the summary is written as the last answer arrives, and refreshed at exit (or the next
    # pass) with the store's totals, which then hold that last answer too
    model.refresh_usage_summary()
    summary = json.loads(summary_path.read_text())
    assert summary["store_totals_by_run_key"][rk]["input_tokens"] == sum(truth)
    assert summary["this_run"] == this


def test_key_never_reaches_store_registry_usage_or_logs(tmp_path, docs, capfd):
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        model, _ = make_model(stub, tmp_path, docs)
        model.generate_until(instances(docs))
    written = files_of(tmp_path)
    names = {p.name for p in written}
    assert {"store.sqlite", "uploads.sqlite"} <= names and any(n.startswith("gemini_usage_") for n in names)
    assert any(n.endswith("-wal") for n in names)
    for p in written:
        assert FAKE_KEY.encode() not in p.read_bytes(), p
    captured = capfd.readouterr()
    assert FAKE_KEY not in captured.out + captured.err
    assert FAKE_KEY not in json.dumps(model.describe(), default=str)


@pytest.mark.parametrize(
    "arg_string",
    [
        "model=gemini-2.5-flash,api_key=AIza-abc",
        "model=gemini-2.5-flash,google_api_key=AIza-abc",
        "model=gemini-2.5-flash,token=abc",
        f"model=gemini-2.5-flash,base_url=http://127.0.0.1:1/{FAKE_KEY}",
        f"model={FAKE_KEY}",
    ],
)
def test_a_key_in_model_args_is_refused(arg_string, capsys):
    """Through lmms-eval's constructor: the message on stderr and exit status 2, no traceback."""
    with pytest.raises(SystemExit) as e:
        Gemini.create_from_arg_string(arg_string, {"batch_size": 1, "device": None})
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "GOOGLE_API_KEY" in err and "Traceback" not in err


def test_bad_model_args_are_clear_errors(tmp_path, docs, monkeypatch):
    with pytest.raises(ValueError, match="fps="):
        Gemini(num_frames=32)
    with pytest.raises(ValueError, match=r"\(0, 24\]"):
        Gemini(fps=0)
    with pytest.raises(ValueError, match="unknown model_args"):
        Gemini(media_resolutoin="low")
    with pytest.raises(ValueError, match="media_resolution"):
        Gemini(media_resolution="ultra")
    with pytest.raises(ValueError, match="not both"):
        Gemini(thinking_budget=0, thinking_level="low")
    with pytest.raises(ValueError, match="credentials"):
        Gemini(base_url="http://user:pw@127.0.0.1:1/")
    m = Gemini.create_from_arg_string(
        "model=gemini-3-pro-preview,fps=0.5,media_resolution=low,audio=false,max_concurrency=3,max_retries=0",
        {"batch_size": 1, "device": "cuda"},
    )
    assert (m.fps, m.args.media_resolution, m.args.audio, m.max_concurrency, m.args.retry_policy().max_attempts) == (
        0.5,
        "low",
        False,
        3,
        1,
    )
    monkeypatch.delenv("GOOGLE_API_KEY")
    with GeminiStub() as stub:
        model, _ = make_model(stub, tmp_path, docs[:1])
        with pytest.raises(RuntimeError, match="GOOGLE_API_KEY"):
            model.generate_until(instances(docs[:1]))
        assert stub.requests == []


# --------------------------------------------------------------------- the context preflight


def test_an_overflowing_configuration_is_refused_before_any_request(tmp_path, docs):
    long_docs = [{**d, "duration_s": 4 * 3600.0} if d["video_id"] == "vid002" else d for d in docs]
    with GeminiStub(api_key=FAKE_KEY) as stub:
        model, _ = make_model(stub, tmp_path, long_docs)  # gemini-2.5-flash, default resolution, audio
        with pytest.raises(ContextOverflow) as err:
            model.generate_until(instances(long_docs))
        assert stub.requests == []  # not an upload, not a files.get, not a question
    msg = str(err.value)
    assert "vid002.mp4" in msg and "4.00 h" in msg and "1,048,576" in msg and "No request was spent" in msg
    assert "3,600 frames" in msg and "460,800 audio tokens" in msg
    assert "media_resolution=low -> 734," in msg and "audio=false -> 964," in msg
    # the same data fits at low resolution (no error before the first request)
    with GeminiStub(api_key=FAKE_KEY) as stub:
        model, _ = make_model(stub, tmp_path / "b", long_docs, media_resolution="low", calibrate=False)
        model.generate_until(instances(long_docs))
        assert len(stub.generate_requests()) == len(docs)


@pytest.mark.parametrize(
    "args,match",
    [({"max_file_gb": 1e-6}, "per-file limit"), ({"storage_limit_gb": 1e-6}, "GB per project")],
)
def test_files_over_the_files_api_limits_are_refused_before_any_request(tmp_path, docs, args, match):
    with GeminiStub(api_key=FAKE_KEY) as stub:
        model, _ = make_model(stub, tmp_path, docs, **args)
        with pytest.raises(ConfigurationRefused, match=match) as err:
            model.generate_until(instances(docs))
        assert stub.requests == [] and "downsample=true" in str(err.value)
        model, _ = make_model(stub, tmp_path / "b", docs[:2], downsample=True, **args)
        model.generate_until(instances(docs[:2]))  # re-encoded files are not checked up front
        assert len(stub.generate_requests()) == 2


def test_count_tokens_calibration_refuses_before_any_question(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, token_scale=50.0) as stub:  # the server counts far more
        model, _ = make_model(stub, tmp_path, docs, max_input_tokens=3000)
        with pytest.raises(ContextOverflow, match="counted by countTokens"):
            model.generate_until(instances(docs))
        assert len(stub.count_requests()) == 2  # the text and the video, counted apart
        assert stub.generate_requests() == []
        assert all("generationConfig" not in r.body for r in stub.count_requests())  # not accepted by the API
    assert model._run.calibration.ratio > 10


# -------------------------------------------------------------- local pre-processing (PyAV)


def test_downsampling_and_stripping_audio_keep_the_video_tokens(tmp_path, docs):
    video = write_av(tmp_path / "talk.mp4")
    doc = {**docs[0], "video": str(video), "duration_s": None}
    with GeminiStub(api_key=FAKE_KEY) as stub:
        plain, _ = make_model(stub, tmp_path, [doc])
        plain.generate_until(instances([doc]))
        small, _ = make_model(stub, tmp_path, [doc], downsample=True, audio=False)
        small.generate_until(instances([doc]))
        a, b = stub.generate_requests()
        f_plain, f_small = (stub.file_by_uri(r.file_uris[0]) for r in (a, b))
        usage_plain, usage_small = stub.count(a.body)[1], stub.count(b.body)[1]
    assert stub.uploads_started == 2
    assert (f_plain.has_audio, f_plain.height, f_plain.frame_rate) == (True, 480, 10.0)
    # what was sent: no audio track, 360p, re-encoded at 4 x 0.25 = 1 fps, same duration
    assert (f_small.has_audio, f_small.height, f_small.frame_rate) == (False, 360, 1.0)
    assert f_small.duration_s == pytest.approx(f_plain.duration_s, abs=0.5)
    assert f_small.size_bytes < f_plain.size_bytes
    assert small.upload_stats["bytes_saved"] == f_plain.size_bytes - f_small.size_bytes
    # what the stub bills: the same video tokens (by duration x fps), no audio tokens
    assert usage_small["VIDEO"] == usage_plain["VIDEO"]
    assert usage_plain["AUDIO"] == 12 * AUDIO_TOKENS_PER_S and "AUDIO" not in usage_small
    assert stored(small, [doc]).usage["input_by_modality"] == usage_small
    assert small.describe()["preprocess"] == {"audio": False, "fps": 1.0, "max_height": 360, "crf": 28}
    assert probe_bytes(f_small.data)["n_frames"] == 12


def test_estimate_cost_cli_unknown_price(capsys):
    assert (
        cli_main(["estimate-cost", "--model", "gemini-2.5-flash-image", "--media-resolution", "low", "--no-audio"]) == 0
    )
    out = capsys.readouterr().out
    assert "cost uncached   : n/a (model not in the price table)" in out and "not in the price table" in out
    assert (
        cli_main(
            ["estimate-cost", "--model", "gemini-2.5-flash-image", "--no-audio", "--media-resolution", "low", "--json"]
        )
        == 0
    )
    est = json.loads(capsys.readouterr().out)
    assert est["cost_usd"] is None and est["cost_usd_cached"] is None and est["fits"]
    assert est["cost_usd_explicit_cache"] is None and est["cost_usd_batch"] is None


def test_estimate_cost_cli(capsys, data):
    assert cli_main(["estimate-cost", "--model", "gemini-2.5-flash"]) == 1  # 4 h at default + audio overflows
    out = capsys.readouterr().out
    assert "1,481 over 155 videos (146.8 h)" in out and "WOULD BE REFUSED" in out and "TO BE CHECKED" in out
    assert (
        cli_main(["estimate-cost", "--model", "gemini-3-flash", "--media-resolution", "low", "--no-audio", "--json"])
        == 0
    )
    est = json.loads(capsys.readouterr().out)
    assert est["questions"] == 1481 and est["audio_tokens"] == 0 and est["fits"]
    assert est["frames_per_pass"] == 155 * int(146.8 * 3600 / 155 * 0.25)
    assert est["video_tokens"] == 1481 * int(146.8 * 3600 / 155 * 0.25) * (70 + 10)
    assert 0 < est["cost_usd_cached"] < est["cost_usd"]
    assert cli_main(["estimate-cost", "--model", "gemini-2.5-flash", "--task", "naru_mcq_500", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["questions"] == 500
    assert cli_main(["estimate-cost", "--model", "gemini-2.5-flash", "--data-dir", str(data), "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert (est["questions"], est["videos"], est["source"]) == (18, 4, f"data: {data}")
    import argparse

    sub = argparse.ArgumentParser(prog="naru-eval").add_subparsers(dest="command")
    cli_gemini.register(sub)
    args = sub.choices["estimate-cost"].parse_args(["--model", "gemini-3-pro-preview", "--no-audio"])
    assert args.func is cli_gemini.cmd_estimate_cost and args.audio is False


def test_estimate_cost_prices_the_prompt_the_task_sends(data, docs):
    """The estimate's prompt is naru_gemini's, read from the installed task template (no copy of
    it): the same text ``doc_to_text`` builds with the template's kwargs."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    template = yaml.load((ROOT / "tasks" / "naru" / "_default_template_yaml").read_text(), Loader=Loader)
    kwargs = cli_gemini.gemini_prompt_kwargs()
    assert kwargs == template["lmms_eval_specific_kwargs"]["naru_gemini"]
    questions, _ = cli_gemini.data_questions(data, "naru_mcq")
    first = docs[0]
    assert any(q.prompt == doc_to_text(first, kwargs) for q in questions)


# ------------------------------------------------------------------- the real lmms-eval, slow


def _store_counts(path: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM responses GROUP BY status").fetchall())


@pytest.mark.slow
def test_lmms_eval_end_to_end_then_a_rerun_uploads_nothing(data, docs, tmp_path):
    store, cache = tmp_path / "store.sqlite", tmp_path / "cache"
    env = {
        "NARU_DATA_DIR": str(data),
        "NARU_RESPONSE_STORE": str(store),
        "NARU_CACHE_DIR": str(cache),
        "GOOGLE_API_KEY": FAKE_KEY,
        "PYTHONPATH": str(ROOT),  # the adapter under test is this checkout's; the task YAMLs the install's
    }
    intended = {}
    for d in docs:
        text = doc_to_text(d, {"pre_prompt": "", "post_prompt": GEMINI_POST})
        ans = answer_for(text)
        intended[d["question_id"]] = None if ans == INVALID_TEXT else ans[len("The answer is ")]
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        args = f"model={MODEL},base_url={stub.base_url},media_resolution=low,poll_interval=0.05"
        run = run_lmms_eval("naru_gemini", args, [TASK], tmp_path / "out", env=env, timeout=240)
        reqs = stub.generate_requests()
        assert run.ok, run.stderr[-5000:]
        want = expected_metrics(data / "annotations.jsonl", intended, set(intended))
        for m in METRICS:
            assert run.metric(TASK, m) == pytest.approx(want[m], abs=1e-9), m
        assert stub.uploads_started == 4 and len(reqs) == len(docs)
        assert all(r.video_metadata == [{"fps": 0.25}] for r in reqs)
        assert all(r.generation_config["mediaResolution"] == "MEDIA_RESOLUTION_LOW" for r in reqs)
        assert all(r.text.endswith(GEMINI_POST) for r in reqs)  # the naru_gemini prompt variant
        assert _store_counts(store) == {"ok": len(docs)}
        usage_files = sorted(cache.glob("gemini_usage_*.json"))
        assert len(usage_files) == 1
        assert json.loads(usage_files[0].read_text())["this_run"]["requests"] == len(docs)
        assert "api_key" not in json.dumps(run.results()["config"]["model_args"])

        # a second configuration: every question asked again, not one video uploaded again
        stub.reset()
        run2 = run_lmms_eval(
            "naru_gemini", args + ",thinking_budget=0", [TASK], tmp_path / "out2", env=env, timeout=240
        )
        assert run2.ok, run2.stderr[-5000:]
        assert stub.uploads_started == 0 and len(stub.file_gets()) == 4
        assert len(stub.generate_requests()) == len(docs)
    for p in files_of(tmp_path):  # results, samples, store (+ -wal), registry, usage files
        assert FAKE_KEY.encode() not in p.read_bytes(), p
    assert FAKE_KEY not in run.stdout + run.stderr + run2.stdout + run2.stderr
