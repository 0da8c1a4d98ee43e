"""The results subcommands through the one ``naru-eval`` parser."""

from __future__ import annotations

import json
from pathlib import Path

from naru_eval.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def test_paper_reference_rebuilds_the_committed_file(tmp_path, capsys):
    out = tmp_path / "paper_reference.json"
    assert main(["paper-reference", "-o", str(out)]) == 0
    assert "MISMATCH" not in capsys.readouterr().err
    committed = json.loads((ROOT / "results" / "paper_reference.json").read_text(encoding="utf-8"))
    assert json.loads(out.read_text(encoding="utf-8")) == committed
    assert committed["source"]["built_by"] == "naru-eval paper-reference -o results/paper_reference.json"


def test_every_command_is_in_the_one_parser():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {"paper-reference", "sweep-status", "experiment", "sweep", "leaderboard", "compare", "diagnose"} <= set(
        sub.choices
    )
    assert {
        "estimate-cost",
        "judge",
        "demo",
        "score",
        "validate-data",
        "make-synthetic",
        "tasks-path",
        "adapters",
    } <= set(sub.choices)


def test_store_usage_sums_the_cells_run_keys(tmp_path):
    """An experiment cell's manifest usage: the response store's answers of the run keys its
    invocations used, summed by the one usage sum (``UsageTotals``) over the store's typed query."""
    from naru_eval.cli.runner import store_usage
    from naru_eval.store.responses import ResponseStore, run_key

    store = ResponseStore(tmp_path / "r.sqlite")
    keys = {}
    for nf, tokens in ((8, 10), (16, 100)):
        desc = {"model": "naru_openai_compat", "num_frames": nf, "args": {}}
        key = keys[nf] = run_key(desc)
        store.register_run(key, desc)
        store.put_ok(key, "q1", "A", {"input_tokens": tokens, "cost_usd": 0.5})
        store.put_ok(key, "q2", "B", {"input_tokens": tokens, "cost_usd": 0.25})
        store.put_failed(key, "q3", "timeout")
    store.close()
    usage = store_usage(tmp_path / "r.sqlite", [keys[16]])
    assert usage is not None
    assert (usage.ok, usage.failed, usage.input_tokens, usage.cost_usd) == (2, 1, 200, 0.75)
    assert store_usage(tmp_path / "r.sqlite", ["no-such-key"]) is None
    assert store_usage(tmp_path / "missing.sqlite", [keys[8]]) is None


def _rank_stores(tmp_path, template: str) -> str:
    """Two ranks' stores of one run key (rank 0: q1, q2; rank 1: q3), at ``template``."""
    from naru_eval.store.responses import ResponseStore, run_key

    desc = {"model": "naru_openai_compat", "num_frames": 8, "args": {}}
    key = run_key(desc)
    for rank, qids in ((0, ("q1", "q2")), (1, ("q3",))):
        store = ResponseStore(template.replace("{rank}", str(rank)))
        store.register_run(key, desc)
        for q in qids:
            store.put_ok(key, q, "A", {"input_tokens": 10})
        store.close()
    return key


def test_store_usage_sums_every_rank_of_a_per_rank_store(tmp_path):
    """NARU_RESPONSE_STORE=.../responses.{rank}.sqlite: the cell's usage is every rank's file."""
    from naru_eval.cli.runner import store_usage

    key = _rank_stores(tmp_path, str(tmp_path / "responses.{rank}.sqlite"))
    usage = store_usage(tmp_path / "responses.{rank}.sqlite", [key])
    assert usage is not None and (usage.ok, usage.input_tokens) == (3, 30)


def test_store_usage_reads_rank_folders_and_counts_a_merged_store_once(tmp_path):
    """Issue 33 (16): ``{rank}`` in a folder's name was not expanded (no usage at all), and a merged
    store beside its sources was counted with them (every answer twice)."""
    from naru_eval.cli.runner import store_usage
    from naru_eval.store.merge import merge_stores

    key = _rank_stores(tmp_path, str(tmp_path / "rank{rank}" / "responses.sqlite"))
    usage = store_usage(tmp_path / "rank{rank}" / "responses.sqlite", [key])
    assert usage is not None and (usage.ok, usage.input_tokens) == (3, 30)
    flat = tmp_path / "flat"
    key = _rank_stores(flat, str(flat / "responses.{rank}.sqlite"))
    merge_stores([flat / "responses.0.sqlite", flat / "responses.1.sqlite"], flat / "responses.all.sqlite")
    merge_stores([flat / "responses.1.sqlite"], flat / "responses.0.sqlite")  # rank 1 merged into rank 0 too
    usage = store_usage(flat / "responses.{rank}.sqlite", [key])
    assert usage is not None and (usage.ok, usage.input_tokens) == (3, 30)
