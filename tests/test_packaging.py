"""``pip install .``: every package and data file is declared, so setuptools warns about nothing
(it used to warn that ``naru_eval.report.templates`` was absent from ``packages``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_builds_without_warnings_and_ships_the_data(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("naru_eval", "model_adapters", "tasks"):
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=src,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    assert "absent from the `packages` configuration" not in log, log[-3000:]
    assert "Warning" not in log, log[-3000:]
    (wheel,) = tmp_path.glob("naru_eval-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "naru_eval/report/templates/leaderboard.html.j2",
        "naru_eval/data_files/official_results.json",
        "naru_eval/data_files/prices.json",
        "lmms_eval/tasks/naru/naru_mcq.yaml",
        "lmms_eval/tasks/naru/_default_template_yaml",
    ):
        assert needed in names, needed
