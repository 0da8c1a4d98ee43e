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
    assert {"paper-reference", "sweep-status", "sweep-manifest", "leaderboard", "compare", "diagnose"} <= set(
        sub.choices
    )
    assert {"estimate-cost", "judge", "demo", "score", "validate-data", "make-synthetic", "tasks-path"} <= set(
        sub.choices
    )
