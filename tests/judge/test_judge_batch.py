"""The judge's verification calls as OpenAI Batch API jobs, through the real openai SDK against the
stub (files upload and content, batches create and retrieve in the wire format), the fake judge
answering each batch line exactly as it answers a live request."""

from __future__ import annotations

import json

import pytest

from naru_eval.judge.batch import BatchNotReady, set_key
from naru_eval.judge.config import JudgeConfig, cost_usd, load_prices
from naru_eval.judge.cost import estimate_cost
from tests.helpers.judge import STUB_PRICE, chat_schemas, item
from tests.helpers.stubs import OpenAIStub, Reply

pytestmark = pytest.mark.api

#: the stub's gpt-5.5 price with the Batch API's half price
BATCH_PRICE = '{"gpt-5.5": {"input": 1.0, "cached_input": 0.1, "output": 8.0, "batch_discount": 0.5}}'


def pairs():
    """Scored, partial, fixed by the corrective retry, malformed every time, empty."""
    refs = [f"Fact {i} one. Fact {i} two. Fact {i} three." for i in range(5)]
    items = [
        item(f"q{i}", category=c, reference=r)
        for i, (c, r) in enumerate(zip(["N.1", "N.2", "C.1", "C.2", "C.5"], refs, strict=True))
    ]
    responses = [
        refs[0],
        "Fact 1 one.",
        "MISMATCH_ONCE Fact 2 one. Fact 2 two.",
        "MALFORMED",
        "",
    ]
    return list(zip(items, responses, strict=True))


def without_usage(d: dict) -> dict:
    """A judged sample without what legitimately differs between live and batch: its cost."""
    d = dict(d)
    d.pop("usage", None)
    return d


def count(stub: OpenAIStub, method: str, suffix: str) -> int:
    return len(stub.requests_to(method, suffix))


def test_batch_results_equal_the_live_path_and_the_request_lines_are_the_live_requests(make_judge, stub):
    live_judge = make_judge()
    live = live_judge.judge_many(pairs())
    live_bodies = sorted(
        json.dumps({k: v for k, v in r.body.items() if k != "stream"}, sort_keys=True)  # parse() adds stream=false
        for r in stub.chat_requests()
        if r.body["response_format"]["json_schema"]["name"] == "CoverageReport"
    )
    stub.reset()
    j = make_judge(cache=live_judge.store.path.with_name("batch.sqlite"), batch=True, prices=load_prices(BATCH_PRICE))
    got = j.judge_many(pairs())
    # the facts are decomposed live; no verification is sent live
    assert chat_schemas(stub) == ["FactList"] * 5
    # round 1: 4 responses (the empty one needs no call); round 2: the MISMATCH_ONCE retry and the
    # MALFORMED retry; round 3: MALFORMED's third attempt
    assert count(stub, "POST", "/files") == count(stub, "POST", "/batches") == 3
    assert [b.total for b in stub.batches.values()] == [4, 2, 1]
    assert all(b.endpoint == "/v1/chat/completions" and b.completion_window == "24h" for b in stub.batches.values())
    assert all(f.purpose == "batch" for f in stub.files.values() if f.filename == "naru_judge_batch.jsonl")
    # each batch line is the very request the live path sent (same strict JSON schema, settings,
    # messages), less the "stream": false that parse() adds (a batch line never streams)
    assert not any("stream" in r.body for r in stub.batch_lines)
    batch_bodies = sorted(json.dumps(r.body, sort_keys=True) for r in stub.batch_lines)
    assert batch_bodies == live_bodies
    assert [without_usage(s.to_dict()) for s in got] == [without_usage(s.to_dict()) for s in live]
    assert [s.status for s in got] == ["scored", "scored", "scored", "unscored", "empty"]
    assert got[3].reason.startswith("malformed") and got[3].recall is None  # unscored, never 0
    # the calls made were batch calls, at half the live price
    lv, bt = (x.ledger.summary().by_purpose["verify"] for x in (live_judge, j))
    assert bt.calls == lv.calls == 7 and bt.prompt_tokens == lv.prompt_tokens
    assert bt.cost_usd == pytest.approx(lv.cost_usd / 2)  # live: STUB_PRICE, the same numbers
    assert got[0].usage["cost_usd"] == pytest.approx(live[0].usage["cost_usd"] / 2)
    assert j.batch_jobs["submitted"] == list(stub.batches) and j.batch_jobs["resumed"] == []
    # re-scoring costs nothing: no job, no call
    stub.reset()
    n_batches = len(stub.batches)
    again = make_judge(cache=j.store.path, batch=True, prices=load_prices(BATCH_PRICE))
    assert [s.to_dict() for s in again.judge_many(pairs())] == [s.to_dict() for s in got]
    assert stub.requests == [] and len(stub.batches) == n_batches
    total = again.ledger.summary().total
    verify = again.ledger.summary().by_purpose["verify"]
    assert total.calls == 0 and total.cost_usd == 0
    assert verify.nominal_cost_usd == pytest.approx(bt.cost_usd)  # replays keep the batch price


class Killed(BaseException):
    """The process dies while it waits for the job."""


def test_a_rerun_after_a_kill_resumes_the_same_job(make_judge, stub, tmp_path):
    stub.batch_polls = 3
    j = make_judge(batch=True)

    def die(_: float) -> None:
        raise Killed

    j.client.sleep = die  # type: ignore[union-attr]
    ps = pairs()[:2]
    with pytest.raises(Killed):
        j.judge_many(ps)
    assert count(stub, "POST", "/batches") == 1 and count(stub, "POST", "/files") == 1
    (rec,) = j.store.batches()
    assert rec.state == "submitted" and rec.batch_id in stub.batches and rec.n_requests == 2
    j.store.close()
    # a new process: a new store connection, a new client
    k = make_judge(batch=True)
    waits: list[float] = []
    k.client.sleep = waits.append  # type: ignore[union-attr]
    got = k.judge_many(ps)
    assert count(stub, "POST", "/batches") == 1 and count(stub, "POST", "/files") == 1  # nothing submitted again
    assert k.batch_jobs == {"submitted": [], "resumed": [rec.batch_id]}
    assert [s.status for s in got] == ["scored", "scored"] and got[0].recall == 1.0
    assert waits == [10.0, 20.0]  # the backoff, restarted: base, doubling (bounded by batch_poll_max)
    assert k.store.batches()[0].state == "consumed"
    assert "CoverageReport" not in chat_schemas(stub)


def test_the_poll_backoff_is_bounded_and_a_wait_limit_leaves_the_job_for_a_rerun(make_judge, stub):
    stub.batch_polls = 6
    j = make_judge(batch=True, batch_poll_base=2.0, batch_poll_max=5.0)
    waits: list[float] = []
    j.client.sleep = waits.append  # type: ignore[union-attr]
    j.judge_many(pairs()[:1])
    assert waits == [2.0, 4.0, 5.0, 5.0, 5.0, 5.0]
    stub.batch_polls = 100
    k = make_judge(batch=True, batch_poll_base=2.0, batch_poll_max=5.0, batch_wait=0.5)
    with pytest.raises(BatchNotReady, match="still in_progress"):
        k.judge_many(pairs()[1:2])
    assert k.store.batches()[-1].state == "submitted"


def test_failed_lines_and_failed_jobs_are_unscored_never_zero(make_judge, stub, fake):
    def responder(req):
        if (
            "Fact 1 one" in req.body["messages"][1]["content"]
            and req.body["response_format"]["json_schema"]["name"] == "CoverageReport"
        ):
            return Reply(status=500)
        return fake(req)

    stub.responder = responder

    def corrupt(record, text):
        return text[:40] if "Fact 2" in json.dumps(record) else text

    stub.batch_line_hook = corrupt
    j = make_judge(batch=True)
    ps = pairs()[:3]
    got = j.judge_many(ps)
    assert got[0].status == "scored"
    assert got[1].status == "unscored" and got[1].recall is None
    assert "judge unavailable" in got[1].reason and "HTTP 500" in got[1].reason
    assert got[2].status == "unscored" and "without an answer" in got[2].reason  # its line was not JSON
    assert count(stub, "POST", "/batches") == 1  # failed lines are not resubmitted within the run
    # the next run submits only what failed
    stub.responder, stub.batch_line_hook = fake, None
    before = len(stub.batches)
    k = make_judge(batch=True)
    again = k.judge_many(ps)
    assert [s.status for s in again] == ["scored"] * 3
    assert stub.batches[list(stub.batches)[before]].total == 2  # q1 and q2; q0 replays from the cache
    # a job that fails as a whole leaves its responses unscored with the job's reason
    stub.batch_final_status = "failed"
    m = make_judge(batch=True)
    (s,) = m.judge_many([(item("q9", reference="Alone here."), "Alone here.")])
    assert s.status == "unscored" and "ended failed" in s.reason and "stub: the batch failed" in s.reason


def test_an_expired_job_keeps_what_it_answered(make_judge, stub):
    stub.batch_final_status, stub.batch_expire_after = "expired", 1
    got = make_judge(batch=True).judge_many(pairs()[:2])
    assert sorted(s.status for s in got) == ["scored", "unscored"]
    assert "ended expired" in next(s.reason for s in got if s.status == "unscored")


def test_the_job_is_keyed_by_its_set_of_requests():
    a = set_key("gpt-5.5", "http://h/v1", ["k2", "k1"])
    assert a == set_key("gpt-5.5", "http://h/v1", ["k1", "k2", "k1"])
    assert a != set_key("gpt-5.5", "http://h/v1", ["k1"]) != set_key("gpt-5-mini", "http://h/v1", ["k1", "k2"])


def test_the_setting_and_the_cli_flag(monkeypatch, tmp_path, stub, capsys):
    monkeypatch.setenv("NARU_JUDGE_BATCH", "1")
    assert JudgeConfig.from_env().batch is True
    monkeypatch.setenv("NARU_JUDGE_BATCH", "maybe")
    with pytest.raises(ValueError, match="NARU_JUDGE_BATCH"):
        JudgeConfig.from_env()
    monkeypatch.delenv("NARU_JUDGE_BATCH")
    assert JudgeConfig.from_env().batch is False

    from naru_eval.cli.main import main
    from tests.helpers.judge import REF, write_open_log

    stub.batch_polls = 0  # the CLI waits for real: the job is done at the first poll
    write_open_log(
        tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF, "The bride wears a white kimono."]
    )
    argv = ["judge", "score", str(tmp_path / "run"), "--base-url", stub.base_url, "--prices", STUB_PRICE, "--batch"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Batch API jobs: submitted ['batch_stub0001'], resumed none" in out
    assert count(stub, "POST", "/batches") == 1 and "CoverageReport" not in chat_schemas(stub)
    assert main([*argv[:-1], "--batch", "--protocol", "minerva"]) == 2
    assert "facts protocol" in capsys.readouterr().err


def test_batch_prices_are_half_and_unknown_stays_unknown():
    prices = load_prices(None)
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 100_000}
    live = cost_usd("gpt-5", usage, prices)
    assert live == pytest.approx(1.25 + 1.0)
    assert cost_usd("gpt-5", {**usage, "batch": True}, prices) == pytest.approx(live / 2)
    # an entry without a batch discount has an unknown batch price, never the live one
    own = load_prices('{"my-judge": {"input": 2, "output": 4}}')
    assert cost_usd("my-judge", usage, own) == pytest.approx(2.4)
    assert cost_usd("my-judge", {**usage, "batch": True}, own) is None
    est = estimate_cost(500, 8, "gpt-5").model_dump()
    assert est["batch_factor"] == 0.5
    assert est["verify"]["batch_usd"] == pytest.approx(est["verify"]["usd"] / 2)
    assert est["total_batch_usd"] == pytest.approx(est["facts"]["usd"] + est["verify"]["usd"] / 2)
    unknown = estimate_cost(500, 8, "gpt-5.5").model_dump()
    assert (
        unknown["total_usd"] is None and unknown["total_batch_usd"] is None and unknown["verify"]["batch_usd"] is None
    )


def test_judge_cost_prints_both_prices(capsys):
    from naru_eval.cli.main import main

    assert main(["judge", "cost", "--judge-model", "gpt-5"]) == 0
    out = capsys.readouterr().out
    assert "$41.30 live, $20.65 batch" in out  # docs/judge.md's verification line, and half of it
    assert "total with the verifications as Batch API jobs" in out and "$24.27" in out  # $3.625 + $20.65
    assert main(["judge", "cost"]) == 0  # gpt-5.5: no price, neither live nor batch
    out = capsys.readouterr().out
    assert "unknown live, unknown batch" in out and "$" not in out.split("total")[1]


def test_jobs_stay_within_the_apis_limits(make_judge, stub, monkeypatch):
    import naru_eval.judge.batch as batch

    monkeypatch.setattr(batch, "MAX_REQUESTS", 2)
    got = make_judge(batch=True).judge_many(pairs()[:3] + [(item("q7", reference="Seven."), "Seven.")])
    assert [b.total for b in stub.batches.values()][:2] == [2, 2]  # round 1: four requests, two jobs
    assert [s.status for s in got] == ["scored"] * 4


def test_one_response_at_a_time_stays_live_and_says_so(make_judge, stub, caplog):
    j = make_judge(batch=True)
    s = j.judge(item(), item().reference)
    assert s.status == "scored" and chat_schemas(stub) == ["FactList", "CoverageReport"]
    assert stub.batches == {}
    assert "stays live" in caplog.text


def test_kill_9_while_waiting_then_the_next_process_resumes_the_job(tmp_path, stub):
    """A real process killed after it submitted; the rerun (another process) submits nothing."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.helpers.judge import REF, write_open_log

    root = Path(__file__).resolve().parents[2]
    write_open_log(tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF, "Guests bow twice."])
    stub.batch_polls = 10_000  # the first process never sees the job end
    argv = ["judge", "score", str(tmp_path / "run"), "--base-url", stub.base_url, "--prices", BATCH_PRICE, "--batch"]
    cmd = [sys.executable, "-c", "import sys; from naru_eval.cli.main import main; sys.exit(main(sys.argv[1:]))"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    first = subprocess.Popen([*cmd, *argv], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not stub.requests_to("GET", "/batches/batch_stub0001") and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert count(stub, "POST", "/batches") == 1
    stub.batch_polls = 0  # the job is done by now
    second = subprocess.run([*cmd, *argv], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "submitted none, resumed ['batch_stub0001']" in second.stdout
    assert count(stub, "POST", "/batches") == 1 and count(stub, "POST", "/files") == 1
    assert "CoverageReport" not in chat_schemas(stub)
    scores = next((tmp_path / "run").rglob("*.scores.jsonl")).read_text().splitlines()
    assert [json.loads(x)["status"] for x in scores] == ["scored", "scored"]
