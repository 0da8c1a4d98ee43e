"""``naru-eval adapters``: the adapters' tables generated from the family declarations, printed,
checked against a doc (exit 1 when stale) and written into it."""

from __future__ import annotations

import shutil
from pathlib import Path

from naru_eval.adapters.registry import registered
from naru_eval.cli.main import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def test_print_check_and_write(tmp_path, capsys):
    assert main(["adapters"]) == 0
    printed = capsys.readouterr().out
    assert all(f"`{m}`" in printed for m in registered())
    doc = tmp_path / "adapters.md"
    shutil.copy(DOC, doc)
    assert main(["adapters", "--write", str(doc), "--check"]) == 0  # the committed doc is current
    stale = doc.read_text(encoding="utf-8").replace("| `naru_replay` |", "| `naru_old` |")
    doc.write_text(stale, encoding="utf-8")
    assert main(["adapters", "--write", str(doc), "--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert main(["adapters", "--write", str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")
