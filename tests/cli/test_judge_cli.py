"""``naru-eval judge ...`` (the register()ed subcommands) on saved logs and data, stub judge."""

from __future__ import annotations

import argparse
import json

import pytest

from naru_eval.cli.judge import register
from naru_eval.cli.main import main as judge_main
from tests.helpers.judge import REF, chat_schemas, write_open_log

pytestmark = [pytest.mark.api, pytest.mark.usefixtures("judge_env")]  # judge_env: tests/helpers/judge.py


def test_register_adds_the_judge_group():
    parser = argparse.ArgumentParser(prog="naru-eval")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(["judge", "audit", "report", "x.csv"])
    assert args.command == "judge" and args.judge_command == "audit" and args.audit_command == "report"
    for argv in (["judge", "facts"], ["judge", "score", "d"], ["judge", "audit", "export", "s", "--out", "o.csv"]):
        assert callable(parser.parse_args(argv).func)


def test_score_rejudges_saved_logs(tmp_path, stub, fake, capsys):
    responses = [REF, "The bride wears a white kimono.", "", None, "MALFORMED", "Guests bow twice. The bride wears"]
    write_open_log(tmp_path / "run" / "model_a" / "20260101_000000_samples_naru_open.jsonl", responses)
    write_open_log(tmp_path / "run" / "model_b" / "20260101_000000_samples_naru_open.jsonl", list(reversed(responses)))
    base = ["judge", "score", str(tmp_path / "run"), "--base-url", stub.base_url, "--json"]
    assert judge_main(base) == 0
    out = json.loads(capsys.readouterr().out)
    reports = out["reports"]
    assert set(reports) == {"model_a/20260101_000000_samples_naru_open", "model_b/20260101_000000_samples_naru_open"}
    a = reports["model_a/20260101_000000_samples_naru_open"]
    assert a["n_scored"] == 5 and a["n_unscored"] == 1 and a["unscored_reasons"] == {"malformed": 1}
    assert a["metrics"]["overall"] == pytest.approx((1 + 1 / 3 + 0 + 0 + 1 / 3) / 5)
    # 6 questions decomposed once for both models; 4 judged responses per model (+2 retries each for MALFORMED)
    assert fake.counts["FactList"] == 6
    assert fake.counts["CoverageReport"] == 2 * (3 + 3)
    scores = tmp_path / "run" / "model_a" / "judge" / "facts_gpt-5.5" / "20260101_000000_samples_naru_open.scores.jsonl"
    rows = [json.loads(x) for x in scores.read_text().splitlines()]
    assert rows[0]["recall"] == 1.0 and rows[0]["facts"][0]["verdict"] == "covered"

    # re-scoring makes zero calls and gives the same numbers
    stub.reset()
    assert judge_main(base) == 0
    again = json.loads(capsys.readouterr().out)
    assert stub.chat_requests() == []
    assert again["reports"]["model_a/20260101_000000_samples_naru_open"]["metrics"] == a["metrics"]
    assert again["usage"]["total"]["calls"] == 0

    # another judge model, reusing the frozen facts: verifications only
    stub.reset()
    assert judge_main([*base, "--judge-model", "gpt-5-mini", "--facts-model", "gpt-5.5"]) == 0
    capsys.readouterr()
    assert "FactList" not in chat_schemas(stub) and stub.chat_requests()[0].body["model"] == "gpt-5-mini"
    # another judge model on its own: it decomposes anew (facts are keyed by judge model)
    stub.reset()
    assert judge_main([*base, "--judge-model", "gpt-4.1"]) == 0
    capsys.readouterr()
    assert chat_schemas(stub).count("FactList") == 6


def test_score_table_shows_recall_beside_the_macro_means(tmp_path, stub, capsys):
    """The Markdown table of ``judge score``: overall/narrative/cultural (table III macro) then
    ``recall`` (per response), which differ when categories are unbalanced; the re-judged rows
    keep the data fingerprint of the logged run."""
    one = "The bride wears a white kimono."
    responses = [REF, one, one, one, REF, "", "Guests bow twice."]  # recalls 1, 1/3, 1/3, 1/3, 1, 0, 1/3
    cats = ["N.1", "N.1", "N.1", "N.1", "N.2", "C.1", "C.1"]
    log = write_open_log(tmp_path / "r" / "m" / "s_samples_naru_open.jsonl", responses, cats, "fp0123")
    assert judge_main(["judge", "score", str(tmp_path / "r"), "--base-url", stub.base_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = [c.strip() for c in lines[0].split("|")[1:-1]]
    assert head[:5] == ["run", "overall", "narrative", "cultural", "recall"]
    row = dict(zip(head, [c.strip() for c in lines[2].split("|")[1:-1]], strict=True))
    n1, n2, c1 = (1 + 1 / 3 * 3) / 4, 1.0, (0 + 1 / 3) / 2
    assert row["recall"] == f"{(1 + 1 + 4 * (1 / 3)) / 7:.3f}"
    assert row["overall"] == f"{(n1 + n2 + c1) / 3:.3f}" != row["recall"]
    assert row["narrative"] == f"{(n1 + n2) / 2:.3f}" and row["cultural"] == f"{c1:.3f}"
    scores = log.parent / "judge" / "facts_gpt-5.5" / "s_samples_naru_open.scores.jsonl"
    assert {json.loads(x)["data_fingerprint"] for x in scores.read_text().splitlines()} == {"fp0123"}


def test_score_minerva_protocol(tmp_path, stub, capsys):
    write_open_log(tmp_path / "m" / "x_samples_naru_open.jsonl", [REF, "Guests bow twice.", ""])
    argv = ["judge", "score", str(tmp_path / "m"), "--base-url", stub.base_url, "--protocol", "minerva", "--k", "3"]
    assert judge_main(argv) == 0
    table = capsys.readouterr().out
    assert "| m/x_samples_naru_open |" in table
    scores = tmp_path / "m" / "judge" / "minerva_gpt-5.5" / "x_samples_naru_open.scores.jsonl"
    rows = [json.loads(x) for x in scores.read_text().splitlines()]
    assert [r["score"] for r in rows] == [2, 1, 0] and rows[0]["votes"] == [2, 2, 2]


def test_score_without_logs_fails_clearly(tmp_path, capsys):
    assert judge_main(["judge", "score", str(tmp_path)]) == 1
    assert "no naru_open sample logs" in capsys.readouterr().err


def test_facts_builds_and_exports(small_data, tmp_path, stub, fake, capsys):
    out = tmp_path / "facts.jsonl"
    argv = ["judge", "facts", "--data-dir", str(small_data), "--out", str(out), "--base-url", stub.base_url]
    assert judge_main(argv) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 36 and all(r["status"] == "ok" for r in rows)
    assert rows[0]["facts"][0]["id"] == "F1" and rows[0]["judge_model"] == "gpt-5.5"
    assert rows[0]["prompt_version"] == "naru-facts-v1" and len(rows[0]["ref_hash"]) == 16
    assert fake.counts["FactList"] == 36
    stub.reset()
    assert judge_main(argv) == 0  # frozen: exporting again asks nothing
    assert stub.chat_requests() == []
    assert "36 questions" in capsys.readouterr().out


def test_cost_and_schemas(capsys):
    assert judge_main(["judge", "cost", "--json", "--judge-model", "gpt-5"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["facts"]["calls"] == 500 and est["verify"]["calls"] == 4000
    assert est["total_usd"] == pytest.approx(est["facts"]["usd"] + est["verify"]["usd"])
    # the default judge has no dated price: the calls are counted, the dollars are unknown
    assert judge_main(["judge", "cost"]) == 0
    out = capsys.readouterr().out
    assert "cost unknown" in out and "total unknown" in out and "$" not in out.split("total")[1]
    assert judge_main(["judge", "schemas"]) == 0
    schemas = json.loads(capsys.readouterr().out)
    assert set(schemas) == {"FactList", "CoverageReport", "MinervaScore", "McqChoice"}
    verdict = schemas["CoverageReport"]["$defs"]["FactVerdict"]["properties"]["verdict"]
    assert verdict["enum"] == ["covered", "partial", "not_covered", "contradicted"]


def test_score_stops_on_a_configuration_error_with_the_apis_message(tmp_path, stub, capsys):
    """A refused key: three requests, then the API's message and exit 2 (not a traceback)."""
    write_open_log(tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF] * 12)
    stub.statuses = [401] * 100
    argv = ["judge", "score", str(tmp_path / "run"), "--base-url", stub.base_url, "--concurrency", "1"]
    assert judge_main(argv) == 2
    assert "HTTP 401: stub error 401" in capsys.readouterr().err
    assert len(stub.chat_requests()) == 3


# ------------------------------------------------------------------- the judge as configured

#: every NARU_JUDGE_* variable a judge request shows, and OPENAI_BASE_URL for the endpoint
JUDGE_ENV = {
    "NARU_JUDGE_MODEL": "gpt-4.1-mini",  # takes a temperature
    "NARU_JUDGE_FACTS_MODEL": "gpt-4.1",
    "NARU_JUDGE_TEMPERATURE": "0.3",
    "NARU_JUDGE_REASONING_EFFORT": "low",
    "NARU_JUDGE_MAX_TOKENS": "777",
    "NARU_JUDGE_SEED": "42",
    "NARU_JUDGE_CONCURRENCY": "1",
    "NARU_JUDGE_MAX_RETRIES": "2",
    "NARU_JUDGE_RETRY_BASE_DELAY": "0",
    "NARU_JUDGE_RETRY_MAX_DELAY": "0",
    "NARU_JUDGE_PARSE_ATTEMPTS": "2",
    "NARU_JUDGE_TIMEOUT": "7",
    "NARU_JUDGE_PRICES": '{"gpt-4.1-mini": {"input": 1, "output": 2}, "gpt-4.1": {"input": 3, "output": 4}}',
    "NARU_JUDGE_API_KEY": "naru-judge-env-key-0123456789",
}


def test_every_judge_variable_reaches_judge_score(tmp_path, stub, fake, monkeypatch, capsys):
    """``NARU_JUDGE_MODEL=x OPENAI_BASE_URL=… naru-eval judge score RUN`` asks model x at that
    endpoint with the configured parameters (the CLI's unset options used to replace every
    variable by the default: gpt-5.5 at api.openai.com)."""
    for k, v in JUDGE_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("NARU_JUDGE_CACHE", str(tmp_path / "env_judge.sqlite"))
    stub.statuses = [500, 500]  # the first request: two retries (NARU_JUDGE_MAX_RETRIES=2), then answered
    log = write_open_log(tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF, "MALFORMED"])
    assert judge_main(["judge", "score", str(tmp_path / "run"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    reqs = stub.chat_requests()
    assert [r.status for r in reqs[:3]] == [500, 500, 200]
    facts = [r.body for r in reqs if r.body["response_format"]["json_schema"]["name"] == "FactList"]
    verify = [r.body for r in reqs if r.body["response_format"]["json_schema"]["name"] == "CoverageReport"]
    assert facts and {b["model"] for b in facts} == {"gpt-4.1"}  # NARU_JUDGE_FACTS_MODEL
    assert {b["model"] for b in verify} == {"gpt-4.1-mini"}  # NARU_JUDGE_MODEL
    for b in facts + verify:
        assert b["temperature"] == 0.3 and b["reasoning_effort"] == "low"
        assert b["max_completion_tokens"] == 777 and b["seed"] == 42
    assert len(verify) == 1 + 2  # REF, and MALFORMED twice (NARU_JUDGE_PARSE_ATTEMPTS=2)
    assert {r.headers["authorization"] for r in reqs} == {"Bearer naru-judge-env-key-0123456789"}
    assert stub.max_in_flight == 1  # NARU_JUDGE_CONCURRENCY
    assert (tmp_path / "env_judge.sqlite").is_file()  # NARU_JUDGE_CACHE
    (report,) = out["reports"].values()
    judge = report["judge"]
    assert judge["base_url"] == stub.base_url and judge["timeout"] == 7.0 and judge["parse_attempts"] == 2
    assert out["usage"]["total"]["cost_usd"] is not None  # NARU_JUDGE_PRICES priced both models
    assert log.exists()

    # an option given wins over its variable; NARU_JUDGE_BASE_URL wins over OPENAI_BASE_URL
    from tests.helpers.stubs import OpenAIStub

    with OpenAIStub(responder=fake) as other:
        monkeypatch.setenv("NARU_JUDGE_BASE_URL", other.base_url)
        assert judge_main(["judge", "score", str(tmp_path / "run"), "--judge-model", "gpt-4.1-nano", "--refresh"]) == 0
        capsys.readouterr()
        assert other.chat_requests() and {r.body["model"] for r in other.chat_requests()} >= {"gpt-4.1-nano"}


def test_judge_facts_uses_the_configured_judge(small_data, tmp_path, stub, monkeypatch, capsys):
    for k in ("NARU_JUDGE_MODEL", "NARU_JUDGE_TEMPERATURE", "NARU_JUDGE_MAX_TOKENS", "NARU_JUDGE_SEED"):
        monkeypatch.setenv(k, JUDGE_ENV[k])
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    out = tmp_path / "facts.jsonl"
    assert judge_main(["judge", "facts", "--data-dir", str(small_data), "--out", str(out)]) == 0
    capsys.readouterr()
    bodies = [r.body for r in stub.chat_requests()]
    assert len(bodies) == 36 and {b["model"] for b in bodies} == {"gpt-4.1-mini"}
    assert all(b["temperature"] == 0.3 and b["max_completion_tokens"] == 777 and b["seed"] == 42 for b in bodies)
    assert json.loads(out.read_text().splitlines()[0])["judge_model"] == "gpt-4.1-mini"


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_judge_exits_1_naming_it_and_writes_no_score(tmp_path, monkeypatch, capsys):
    """All 29 responses "judge unavailable" used to print ``overall 0.000`` and exit 0."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    monkeypatch.setenv("NARU_JUDGE_MODEL", "local-judge")
    monkeypatch.setenv("NARU_JUDGE_BASE_URL", url)
    monkeypatch.setenv("NARU_JUDGE_MAX_RETRIES", "0")
    write_open_log(tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF, "", None] * 10)
    assert judge_main(["judge", "score", str(tmp_path / "run")]) == 1
    got = capsys.readouterr()
    assert f"the judge local-judge at {url} could not be reached for 30 of 30 responses" in got.err
    assert "Traceback" not in got.err and "| m/" not in got.out and "overall" not in got.out  # no table
    assert not list((tmp_path / "run").rglob("*.scores.jsonl")) and not list((tmp_path / "run").rglob("*.report.json"))
    assert judge_main(["judge", "facts", "--data-dir", str(tmp_path / "nowhere")]) == 1  # named data error
    assert "data directory does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("NARU_JUDGE_TIMEOUT", "-5", "NARU_JUDGE_TIMEOUT='-5': Input should be greater than 0"),
        ("NARU_JUDGE_MAX_TOKENS", "0", "NARU_JUDGE_MAX_TOKENS='0'"),
        ("NARU_JUDGE_TEMPERATURE", "nan", "NARU_JUDGE_TEMPERATURE='nan': Input should be a finite number"),
        ("NARU_JUDGE_PRICES", "{not json", "NARU_JUDGE_PRICES: prices {not json: not JSON"),
        ("NARU_JUDGE_PRICES", '{"m": {"input": -1, "output": 1}}', "NARU_JUDGE_PRICES: prices"),
        ("NARU_JUDGE_BASE_UR", "http://x/v1", "did you mean NARU_JUDGE_BASE_URL?"),
    ],
)
def test_bad_judge_settings_are_one_message(tmp_path, monkeypatch, capsys, name, value, needle):
    monkeypatch.setenv(name, value)
    write_open_log(tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF])
    assert judge_main(["judge", "score", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_bad_judge_options_are_one_message(tmp_path, capsys):
    write_open_log(tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF])
    assert judge_main(["judge", "score", str(tmp_path / "run"), "--concurrency", "0"]) == 2
    assert "judge concurrency=0: Input should be greater than or equal to 1" in capsys.readouterr().err
    assert judge_main(["judge", "score", str(tmp_path / "run"), "--prices", "[1]"]) == 2
    assert "--prices: prices [1]: must be a JSON object" in capsys.readouterr().err


def test_the_batch_and_backend_variables_reach_judge_score(tmp_path, stub, monkeypatch, capsys):
    """NARU_JUDGE_BATCH=1 alone (no --batch) sends the verifications as a Batch API job, and
    NARU_JUDGE_BACKEND=offline-lexical alone sends nothing: both were replaced by the defaults."""
    from tests.helpers.judge import STUB_PRICE

    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("NARU_JUDGE_PRICES", STUB_PRICE)
    monkeypatch.setenv("NARU_JUDGE_BATCH", "1")
    stub.batch_polls = 0
    write_open_log(tmp_path / "run" / "m" / "20260101_000000_samples_naru_open.jsonl", [REF, "Guests bow twice."])
    assert judge_main(["judge", "score", str(tmp_path / "run")]) == 0
    assert "Batch API jobs: submitted ['batch_stub0001']" in capsys.readouterr().out
    assert "CoverageReport" not in chat_schemas(stub) and stub.batches
    monkeypatch.delenv("NARU_JUDGE_BATCH")
    monkeypatch.setenv("NARU_JUDGE_BACKEND", "offline-lexical")
    stub.reset()
    assert judge_main(["judge", "score", str(tmp_path / "run"), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)["reports"].values()
    assert report["judge"]["backend"] == "offline-lexical" and stub.requests == []
