"""``naru_gemini``'s explicit context caches and batch mode, through the real ``google-genai`` SDK
against the local Gemini REST stub (cachedContents and batches endpoints as the API shapes them).

The stub's videos are 3 s long: at the default fps=0.25 a video is one frame (258 tokens), below
gemini-2.5-flash's 1,024-token minimum; at fps=2 it is 6 frames (1,548 tokens), above it.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from naru_eval.adapters.request import FAILED_MARKER
from naru_eval.cli.main import main as cli_main
from naru_eval.lmms.tasks import doc_to_text
from naru_eval.providers.gemini.pricing import load_prices, request_cost
from naru_eval.store.gemini_jobs import GeminiJobs
from tests.helpers.gemini import FAKE_KEY, answer_for, instances, make_model, responder
from tests.helpers.stubs.gemini_server import GeminiStub, GReply

pytestmark = [pytest.mark.api, pytest.mark.usefixtures("gemini_env")]


def video_of(docs) -> dict[str, str]:
    """prompt text -> its video id."""
    return {doc_to_text(d): d["video_id"] for d in docs}


def jobs_of(tmp_path) -> GeminiJobs:
    return GeminiJobs(tmp_path / "uploads.sqlite")


# ------------------------------------------------------------------------------ context caching


def test_one_cache_per_video_used_by_each_question_then_deleted(tmp_path, docs):
    per_video = defaultdict(int)
    for d in docs:
        per_video[d["video_id"]] += 1
    assert len(per_video) == 4 and min(per_video.values()) >= 2
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        model, _ = make_model(stub, tmp_path, docs, fps=2, max_concurrency=4)
        out = model.generate_until(instances(docs))
        creates, deletes, gens = stub.cache_creates(), stub.cache_deletes(), stub.generate_requests()
        created = list(stub.caches_created)
        assert stub.caches == {}  # every cache deleted
    assert out == [answer_for(doc_to_text(d)) for d in docs]
    assert len(creates) == 4 and len(created) == 4 and len(deletes) == 4
    for c in creates:  # the cache holds the video part as the questions would send it
        (part,) = c.body["contents"][0]["parts"]
        assert "fileData" in part and part["videoMetadata"] == {"fps": 2.0}
        assert c.body["model"] == "models/gemini-2.5-flash" and re.fullmatch(r"\d+s", c.body["ttl"])
        assert 300 <= int(c.body["ttl"][:-1]) <= 6 * 3600
    videos = video_of(docs)
    caches_by_video: dict[str, set[str]] = defaultdict(set)
    last_question: dict[str, int] = {}
    for g in gens:
        assert [next(iter(p)) for p in g.parts] == ["text"]  # the question alone: the video is cached
        v = videos[g.text]
        caches_by_video[v].add(g.body["cachedContent"])
        last_question[v] = max(last_question.get(v, -1), g.index)
    assert len(gens) == len(docs)
    assert all(len(names) == 1 for names in caches_by_video.values())  # every question, its video's cache
    assert len(set().union(*caches_by_video.values())) == 4  # one cache per video
    deleted_at = {d.route.split("/", 2)[2]: d.index for d in deletes}
    for v, (name,) in ((v, tuple(n)) for v, n in caches_by_video.items()):
        assert deleted_at[name] > last_question[v]  # deleted after the video's last question
    # the API's cached count is stored with each answer and priced at the cached price
    tokens = {c.name: c.tokens for c in created}
    price = load_prices().for_model("gemini-2.5-flash")
    for r in model.to_naru_requests(instances(docs)):
        u = model.store.get(*model.request_key(r)).usage
        assert u["cached_tokens"] == tokens[u["context_cache"]] > 0
        assert u["cost_usd"] == pytest.approx(
            request_cost(
                price,
                prompt_tokens=u["input_tokens"],
                output_tokens=u["output_tokens"],
                cached_tokens=u["cached_tokens"],
            )
        )
    summary = json.loads(model._run.written.read_text())
    cc = summary["context_caches"]
    assert (cc["created"], cc["deleted"], cc["tokens"]) == (4, 4, sum(tokens.values()))
    assert cc["storage_cost_usd"] >= 0 and cc["creation_cost_usd"] > 0
    assert summary["cost_usd_with_caches"] == pytest.approx(
        summary["this_run"]["cost_usd"] + cc["creation_cost_usd"] + cc["storage_cost_usd"], abs=1e-6
    )
    (rk,) = summary["run_keys"]
    assert summary["context_cache_storage_by_run_key"][rk]["caches"] == 4
    recorded = jobs_of(tmp_path).caches()
    assert {r.name for r in recorded} == set(tokens) and all(r.deleted is not None for r in recorded)


def test_a_rerun_creates_caches_only_for_unanswered_questions(tmp_path, docs):
    first_video = docs[0]["video_id"]
    failing = {doc_to_text(d) for d in docs if d["video_id"] == first_video}

    def flaky(req):
        return GReply(finish_reason="SAFETY") if req.text in failing else responder(req)

    with GeminiStub(api_key=FAKE_KEY, responder=flaky) as stub:
        model, _ = make_model(stub, tmp_path, docs, fps=2, max_concurrency=4)
        out = model.generate_until(instances(docs))
        assert sum(o.startswith(FAILED_MARKER) for o in out) == len(failing)
        assert len(stub.cache_creates()) == 4
        stub.reset()
        stub.responder = responder
        again, _ = make_model(stub, tmp_path, docs, fps=2, max_concurrency=4)
        out = again.generate_until(instances(docs))
        assert out == [answer_for(doc_to_text(d)) for d in docs]
        assert len(stub.cache_creates()) == 1 and len(stub.generate_requests()) == len(failing)
        stub.reset()
        third, _ = make_model(stub, tmp_path, docs, fps=2, max_concurrency=4)
        third.generate_until(instances(docs))
        assert stub.cache_creates() == [] and stub.generate_requests() == []  # all answered: none


def test_below_the_minimum_or_off_no_cache_and_implicit_caching_is_reported(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder, implicit_cache=True) as stub:
        # fps=0.25: one frame per video, below gemini-2.5-flash's minimum: skipped, not refused by the API
        model, _ = make_model(stub, tmp_path, docs, max_concurrency=4)
        model.generate_until(instances(docs))
        assert stub.cache_creates() == []
        assert model.caches.stats.skipped == {"below the minimum cacheable size": 4}
        assert all("fileData" in g.parts[0] and "cachedContent" not in g.body for g in stub.generate_requests())
        # context_cache=false above the minimum: no explicit cache; the implicit one serves repeats,
        # which needs the video first and the questions of a video one after another
        stub.reset()
        off, _ = make_model(stub, tmp_path / "off", docs, fps=2, context_cache=False, max_concurrency=1)
        off.generate_until(instances(docs))
        gens = stub.generate_requests()
        assert stub.cache_creates() == [] and len(gens) == len(docs)
        order = [g.file_uris[0] for g in gens]
        assert all("fileData" in g.parts[0] for g in gens)
        assert len(order) == len(docs) and sum(a != b for a, b in zip(order, order[1:], strict=False)) == 3
        summary = json.loads(off._run.written.read_text())
        repeats = len(docs) - 4
        per_video = {g.file_uris[0]: stub.count({"contents": [{"parts": [g.parts[0]]}]})[0] for g in gens}
        assert summary["this_run"]["cached_tokens"] == repeats * next(iter(per_video.values())) > 0
        assert summary["context_caches"]["created"] == 0


def test_gemini_2_at_low_resolution_is_not_cached_but_gemini_3_caches_its_resolution(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        model, _ = make_model(stub, tmp_path, docs[:6], fps=2, media_resolution="low")
        model.generate_until(instances(docs[:6]))
        assert stub.cache_creates() == []  # the cache could not carry generationConfig.mediaResolution
        stub.reset()
        g3, _ = make_model(
            stub, tmp_path / "g3", docs[:6], model="gemini-3-flash-preview", fps=2, media_resolution="high"
        )
        g3.generate_until(instances(docs[:6]))
        creates = stub.cache_creates()
        assert creates and all(
            c.body["contents"][0]["parts"][0]["mediaResolution"] == {"level": "MEDIA_RESOLUTION_HIGH"} for c in creates
        )


def test_a_cache_gone_early_falls_back_to_sending_the_video(tmp_path, docs):
    state = {"cleared": False}

    def clearing(req):
        if "cachedContent" in req.body and not state["cleared"]:
            state["cleared"] = True
            stub.caches.clear()  # the server lost it (expired early, deleted elsewhere)
        return responder(req)

    with GeminiStub(api_key=FAKE_KEY, responder=clearing) as stub:
        model, _ = make_model(stub, tmp_path, docs[:5], fps=2, max_concurrency=1)
        out = model.generate_until(instances(docs[:5]))
        statuses = [g.status for g in stub.generate_requests()]
    assert out == [answer_for(doc_to_text(d)) for d in docs[:5]]
    assert 403 in statuses and model.caches.stats.fallbacks >= 1


# ---------------------------------------------------------------------------------- batch mode


def test_batch_mode_submits_once_at_the_batch_price_and_a_rerun_asks_nothing(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder, batch_polls=2) as stub:
        model, _ = make_model(stub, tmp_path, docs, batch=True)
        out = model.generate_until(instances(docs))
        (create,) = stub.batch_creates()
        assert stub.generate_requests() == [] and stub.cache_creates() == []
        sent = create.body["batch"]["inputConfig"]["requests"]["requests"]
        assert len(sent) == len(docs)
        for item in sent:  # each request as a direct question sends it: video first, fps, the question
            parts = item["request"]["contents"][0]["parts"]
            assert [next(iter(p)) for p in parts] == ["fileData", "text"] and parts[0]["videoMetadata"] == {"fps": 0.25}
            assert item["metadata"]["key"]
        assert len(stub.batch_gets()) == 3  # RUNNING, RUNNING, SUCCEEDED
        assert model.poll_sleep.__self__.polls[-2:] == [30.0, 45.0]  # after the uploads: backoff x1.5
        stub.reset()
        again, _ = make_model(stub, tmp_path, docs, batch=True)
        assert again.generate_until(instances(docs)) == out
        assert stub.batch_creates() == [] and stub.batch_gets() == []
    assert out == [answer_for(doc_to_text(d)) for d in docs]
    price = load_prices().for_model("gemini-2.5-flash")
    u = model.store.get(*model.request_key(model.to_naru_requests(instances(docs))[0])).usage
    assert u["batch_job"] == create_name(stub)
    assert u["cost_usd"] == pytest.approx(
        request_cost(price, prompt_tokens=u["input_tokens"], output_tokens=u["output_tokens"], batch=True)
    )
    assert u["cost_usd"] == pytest.approx(
        request_cost(price, prompt_tokens=u["input_tokens"], output_tokens=u["output_tokens"]) / 2
    )
    (job,) = jobs_of(tmp_path).batches()
    assert job.consumed is not None and job.state == "JOB_STATE_SUCCEEDED" and len(job.question_keys) == len(docs)


def create_name(stub: GeminiStub) -> str:
    (name,) = stub.batches
    return name


class Killed(BaseException):
    """The process dies (a signal, a crash) while it waits for the batch job."""


def test_a_batch_job_is_resumed_after_a_kill_not_submitted_again(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder, batch_polls=3) as stub:
        first, _ = make_model(stub, tmp_path, docs, batch=True)

        upload_sleep = first.poll_sleep

        def die(s: float) -> None:
            if s >= 30:  # the first wait for the batch job (uploads poll every 0.25 s here)
                raise Killed
            upload_sleep(s)

        first.poll_sleep = die
        with pytest.raises(Killed):
            first.generate_until(instances(docs))
        assert len(stub.batch_creates()) == 1
        name = create_name(stub)
        assert first.store.answered(first.request_key(first.to_naru_requests(instances(docs))[0])[0]) == {}
        (open_job,) = jobs_of(tmp_path).batches()
        assert open_job.name == name and open_job.consumed is None
        stub.reset()
        second, _ = make_model(stub, tmp_path, docs, batch=True)
        out = second.generate_until(instances(docs))
        assert stub.batch_creates() == []  # picked up, not submitted again
        assert {g.route.rsplit("/", 1)[-1] for g in stub.batch_gets()} == {name.split("/", 1)[1]}
    assert out == [answer_for(doc_to_text(d)) for d in docs]
    assert second.batcher.stats.resumed == [name]
    rk = second.request_key(second.to_naru_requests(instances(docs))[0])[0]
    assert len(second.store.answered(rk)) == len(docs)


def test_batch_failures_are_stored_as_failures_and_retried_in_a_new_job(tmp_path, docs):
    texts = [doc_to_text(d) for d in docs]

    def mixed(req):
        if req.text == texts[0]:
            return GReply(status=500)
        if req.text == texts[1]:
            return GReply(finish_reason="SAFETY")
        return responder(req)

    with GeminiStub(api_key=FAKE_KEY, responder=mixed) as stub:
        model, _ = make_model(stub, tmp_path, docs, batch=True)
        out = model.generate_until(instances(docs))
        assert out[0].startswith(FAILED_MARKER) and "request failed (500" in out[0]
        assert out[1].startswith(FAILED_MARKER) and "SAFETY" in out[1]
        assert out[2:] == [answer_for(t) for t in texts[2:]]
        reqs = model.to_naru_requests(instances(docs))
        for i in (0, 1):
            hit = model.store.get(*model.request_key(reqs[i]))
            assert hit.status == "failed" and hit.response is None
        # the next run asks the two failures again, in a new job
        stub.reset()
        stub.responder = responder
        again, _ = make_model(stub, tmp_path, docs, batch=True)
        assert again.generate_until(instances(docs)) == [answer_for(t) for t in texts]
        (create,) = stub.batch_creates()
        assert len(create.body["batch"]["inputConfig"]["requests"]["requests"]) == 2


def test_a_failed_job_fails_its_questions_and_a_timeout_leaves_it_to_resume(tmp_path, docs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder, batch_final_state="BATCH_STATE_FAILED") as stub:
        model, _ = make_model(stub, tmp_path, docs[:3], batch=True)
        out = model.generate_until(instances(docs[:3]))
        assert all(o.startswith(FAILED_MARKER) and "JOB_STATE_FAILED" in o for o in out)
        # a submit that fails for good fails the questions, not the run (400: not retried)
        stub.batch_create_statuses = [400]
        model, _ = make_model(stub, tmp_path / "s", docs[:3], batch=True)
        out = model.generate_until(instances(docs[:3]))
        assert all(o.startswith(FAILED_MARKER) and "not submitted" in o for o in out)
    with GeminiStub(api_key=FAKE_KEY, responder=responder, batch_polls=50) as stub:
        model, _ = make_model(stub, tmp_path / "t", docs[:3], batch=True, batch_timeout=100)
        out = model.generate_until(instances(docs[:3]))
        assert all(o.startswith(FAILED_MARKER) and "a rerun resumes it" in o for o in out)
        assert model.poll_sleep.__self__.polls[-3:] == [30.0, 45.0, 25.0]  # bounded by batch_timeout
        stub.batch_polls = 0
        for job in stub.batches.values():
            job.polls_left = 0
        stub.reset()
        again, _ = make_model(stub, tmp_path / "t", docs[:3], batch=True)
        assert again.generate_until(instances(docs[:3])) == [answer_for(doc_to_text(d)) for d in docs[:3]]
        assert stub.batch_creates() == []


# ------------------------------------------------------------------------------- estimate-cost


def test_estimate_cost_shows_uncached_explicit_cache_and_batch_side_by_side(capsys, data, tmp_path):
    assert cli_main(["estimate-cost", "--model", "gemini-3-flash-preview"]) == 0
    out = capsys.readouterr().out
    assert "cost uncached   : $" in out and "cost cached     : $" in out and "cost batch      : $" in out
    assert "155 of 155 videos cached" in out
    assert cli_main(["estimate-cost", "--model", "gemini-3-flash-preview", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    # every batch price is half the standard one
    assert est["cost_usd_batch"] == pytest.approx(est["cost_usd"] / 2)
    assert 0 < est["cache_storage_usd"] < est["cost_usd_explicit_cache"] < est["cost_usd"]
    # longer questions per video keep a cache alive longer: more storage
    assert cli_main(["estimate-cost", "--model", "gemini-3-flash-preview", "--json", "--latency", "600"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert slow["cache_storage_usd"] == pytest.approx(10 * est["cache_storage_usd"])
    # the stub data's 3 s videos: one frame at fps=0.25, below the minimum, so caching changes nothing
    args = ["estimate-cost", "--model", "gemini-2.5-flash", "--data-dir", str(data), "--json"]
    assert cli_main(args) == 0
    small = json.loads(capsys.readouterr().out)
    assert small["cache_videos"] == 0 and small["cost_usd_explicit_cache"] == pytest.approx(small["cost_usd"])
    assert cli_main([*args, "--fps", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["cache_videos"] == 4
    # a price table without storage or batch prices: those costs are unknown, not guessed
    table = tmp_path / "p.json"
    table.write_text(json.dumps({"gemini-3-flash": {"input": 1, "output": 2, "as_of": "2030-01-01"}}))
    assert cli_main(["estimate-cost", "--model", "gemini-3-flash", "--prices", str(table), "--json"]) == 0
    bare = json.loads(capsys.readouterr().out)
    assert bare["cost_usd"] > 0 and bare["cost_usd_explicit_cache"] is None and bare["cost_usd_batch"] is None


def test_caches_left_at_shutdown_are_deleted(tmp_path, docs):
    """A run stopped between a video's questions (a breaker, an interrupt) deletes its caches at
    exit (``atexit``: :meth:`VideoCaches.close`), and the record says when."""
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        model, _ = make_model(stub, tmp_path, docs, fps=2)
        requests = model.to_naru_requests(instances(docs))
        requests.sort(key=lambda r: r.video or "")
        model.prepare(requests)
        model.respond(requests[0])  # the first question of the first video: its cache is made
        assert len(stub.caches) == 1 and stub.cache_deletes() == []
        model.caches.close(at_exit=True)  # what the exit handler calls
        assert stub.caches == {} and len(stub.cache_deletes()) == 1
        model.write_usage_summary()  # the partial run's summary now, not at interpreter exit
    (record,) = jobs_of(tmp_path).caches()
    assert record.deleted is not None and record.deleted <= record.expires


_SUBMIT_AND_WAIT = """
import sys
from pathlib import Path
from model_adapters.gemini import Gemini
from tests.helpers.data import docs_of
from tests.helpers.gemini import SPLIT, TASK, instances
base_url, tmp, data = sys.argv[1:4]
docs = docs_of(Path(data))
model = Gemini(model="gemini-2.5-flash", base_url=base_url, response_store=tmp + "/store.sqlite",
               upload_registry=tmp + "/uploads.sqlite", batch=True, batch_poll_interval=0.05, batch_poll_max=0.05,
               poll_interval=0.05)
model.task_dict = {TASK: {SPLIT: docs}}
model.generate_until(instances(docs))
print("finished", flush=True)
"""


def test_a_batch_job_survives_kill_9_of_the_process_that_submitted_it(tmp_path, data, docs):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers.gemini import ROOT

    with GeminiStub(api_key=FAKE_KEY, responder=responder, batch_polls=10**9) as stub:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SUBMIT_AND_WAIT, stub.base_url, str(tmp_path), str(data)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while len(stub.batch_gets()) < 2 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(stub.batch_gets()) >= 2, "the first process never polled its batch job"
            proc.send_signal(signal.SIGKILL)  # dies while the job runs: no result stored
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert b"finished" not in (proc.stdout.read() if proc.stdout else b"")
        (name,) = stub.batches
        for job in stub.batches.values():
            job.polls_left = 0  # the job completes on the server meanwhile
        stub.reset()
        second, _ = make_model(stub, tmp_path, docs, batch=True)
        out = second.generate_until(instances(docs))
        assert stub.batch_creates() == [] and second.batcher.stats.resumed == [name]
    assert out == [answer_for(doc_to_text(d)) for d in docs]


def test_blind_questions_go_in_the_batch_job_too(tmp_path, data, monkeypatch):
    """Text-only questions (no upload, nothing to cache) are batched like the others."""
    from naru_eval.lmms.tasks import doc_to_visual_blind, process_docs_blind_500
    from tests.helpers.data import lmms_instances

    monkeypatch.setenv("NARU_DATA_DIR", str(data))
    blind = [dict(d) for d in process_docs_blind_500(None)]
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        model, _ = make_model(stub, tmp_path, blind, batch=True)
        model.task_dict = {"naru_mcq_500_blind": {"test": blind}}
        out = model.generate_until(lmms_instances(blind, "naru_mcq_500_blind", "test", visual=doc_to_visual_blind))
        (create,) = stub.batch_creates()
        assert stub.uploads_started == 0 and stub.generate_requests() == []
        sent = create.body["batch"]["inputConfig"]["requests"]["requests"]
        assert all([next(iter(p)) for p in r["request"]["contents"][0]["parts"]] == ["text"] for r in sent)
    assert out == [answer_for(doc_to_text(d)) for d in blind]
