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
