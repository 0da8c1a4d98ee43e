"""The real ``lmms-eval`` console script, in a subprocess, on generated NARU data.

lmms-eval exits 0 even when it crashed, so these tests assert on the files it writes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from naru_eval.core.scoring import METRICS, metrics_from_samples_log
from naru_eval.lmms.run import run_lmms_eval
from tests.helpers.data import EXPECTED_500, read_jsonl, write_jsonl
from tests.helpers.expected import expected_metrics, make_predictions

pytestmark = pytest.mark.slow


def test_full_benchmark_and_subset_metrics_exact(paper_data, tmp_path):
    preds = tmp_path / "preds.jsonl"
    intended = make_predictions(paper_data / "annotations.jsonl", preds)
    run = run_lmms_eval(
        "naru_replay", f"predictions={preds}", ["naru_mcq", "naru_mcq_500"], tmp_path / "out",
        env={"NARU_DATA_DIR": str(paper_data)},
    )  # fmt: skip
    assert run.ok, run.stderr[-5000:]
    res = run.results()
    assert res["n-samples"]["naru_mcq"]["effective"] == 1481
    assert res["n-samples"]["naru_mcq_500"]["effective"] == 500

    samples_500 = read_jsonl(run.sample_files["naru_mcq_500"])
    assert Counter(s["overall"]["category"] for s in samples_500) == EXPECTED_500

    for task in ("naru_mcq", "naru_mcq_500"):
        logged = read_jsonl(run.sample_files[task])
        ids = {s["overall"]["question_id"] for s in logged}
        want = expected_metrics(paper_data / "annotations.jsonl", intended, ids)
        for m in METRICS:
            assert run.metric(task, m) == pytest.approx(want[m], abs=1e-9), (task, m)
        # every metric recomputes from the sample log alone
        assert metrics_from_samples_log(run.sample_files[task]) == pytest.approx(want, abs=1e-9)
        for s in logged:
            p = s["overall"]
            for key in ("question_id", "video_id", "category", "gold", "pred", "method", "correct"):
                assert key in p
        assert run.metric(task, "overall") != pytest.approx(run.metric(task, "accuracy"), abs=1e-6)
        # clustered standard errors by video for the per-item means; none (N/A) for the macro
        # means, whose lmms-eval per-item formula would describe a micro mean (docs/metrics.md)
        r = res["results"][task]
        for m in ("accuracy", "N.1", "C.5", "invalid_rate"):
            assert isinstance(r[f"{m}_stderr_clustered,none"], float), m
        for m in ("overall", "narrative", "cultural"):
            assert r[f"{m}_stderr_clustered,none"] == "N/A" and r[f"{m}_stderr_clt,none"] == "N/A", m
            assert r[f"{m}_stderr,none"] == "N/A", m
        fps = {s["overall"]["data_fingerprint"] for s in logged}
        assert len(fps) == 1 and None not in fps  # every sample says which data it was computed on
    assert res["configs"]["naru_mcq"]["cluster_key"] == "video_id"


def test_group_runs_both_tasks(small_data, tmp_path):
    preds = tmp_path / "preds.jsonl"
    make_predictions(small_data / "annotations.jsonl", preds)
    run = run_lmms_eval(
        "naru_replay", f"predictions={preds}", ["naru"], tmp_path / "out", env={"NARU_DATA_DIR": str(small_data)}
    )
    assert run.ok, run.stderr[-5000:]
    assert {"naru_mcq", "naru_mcq_500"} <= set(run.results()["results"])


def test_preflight_stops_before_inference(copy_data, tmp_path):
    d = copy_data()
    (d / "videos" / "vid000.mp4").unlink()
    (d / "videos" / "vid004.mp4").write_bytes(b"corrupt" * 50)
    preds = tmp_path / "preds.jsonl"
    make_predictions(d / "annotations.jsonl", preds)
    run = run_lmms_eval(
        "naru_replay", f"predictions={preds}", ["naru_mcq"], tmp_path / "out", env={"NARU_DATA_DIR": str(d)}
    )
    assert not run.ok and not run.sample_files
    log = run.stdout + run.stderr
    assert "NARU preflight failed" in log
    assert "'vid000'" in log and "'vid004'" in log and "video not found" in log


def test_replay_missing_ids_one_error(small_data, tmp_path):
    preds = tmp_path / "preds.jsonl"
    make_predictions(small_data / "annotations.jsonl", preds)
    rows = read_jsonl(preds)
    write_jsonl(preds, rows[3:])
    run = run_lmms_eval(
        "naru_replay", f"predictions={preds}", ["naru_mcq"], tmp_path / "out", env={"NARU_DATA_DIR": str(small_data)}
    )
    assert not run.ok
    log = run.stdout + run.stderr
    assert "3 question id(s) of the task are missing" in log
    assert all(r["question_id"] in log for r in rows[:3])


def test_include_path_from_checkout():
    """``--include_path tasks/naru`` indexes the checkout's YAMLs on their own."""
    from lmms_eval.tasks import TaskManager

    root = Path(__file__).resolve().parents[2]
    tm = TaskManager(include_path=str(root / "tasks" / "naru"), include_defaults=False)
    assert {"naru_mcq", "naru_mcq_500", "naru"} <= set(tm.all_tasks)
    assert tm.task_index["naru_mcq"]["yaml_path"].startswith(str(root))


def test_installed_wheel_ships_the_yamls():
    """The installed package carries the task YAMLs where lmms-eval looks without flags."""
    proc = subprocess.run([sys.executable, "-m", "naru_eval.cli", "tasks-path"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    installed = Path(proc.stdout.strip())
    assert installed.parts[-3:] == ("lmms_eval", "tasks", "naru")
    for name in ("naru_mcq.yaml", "naru_mcq_500.yaml", "naru.yaml", "_default_template_yaml", "utils.py"):
        assert (installed / name).exists(), name


def test_demo_command(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "naru_eval.cli", "demo", "--out", str(tmp_path / "demo"), "--per-category", "3",
         "--videos", "4"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert set(summary["metrics"]) == {"naru_mcq", "naru_mcq_500"}
    assert set(summary["metrics"]["naru_mcq"]) == set(METRICS)
    assert "every metric recomputes from the sample log" in proc.stdout
    # it ends with the leaderboard, and where the page is: the published table (the reference) and
    # the demo's own table apart; its data is synthetic, never ranked beside the published rows
    page = tmp_path / "demo" / "leaderboard.html"
    assert f"demo: leaderboard page: {page}" in proc.stdout and page.is_file()
    assert (
        "demo: leaderboard with 2 published table(s) as the reference and the demo run in 2 table(s) of its own "
        "(data: synthetic; never ranked among the published rows)"
    ) in proc.stdout
    lb = json.loads(page.with_suffix(".json").read_text())
    published, table = [t for t in lb["tables"] if t["task"] == "naru_mcq"]
    assert published["data"] is None and len(published["rows"]) == 13
    assert table["status"] == "synthetic" and table["data"].startswith("synthetic-")
    runs = [i for i in table["rows"] if not i.startswith("published")]
    assert len(table["rows"]) == 1 and runs[0].startswith("demo (replayed answers) | naru_mcq |")
    assert "SYNTHETIC data" in page.read_text(encoding="utf-8")
    (entry,) = [e for e in lb["entries"] if e["task"] == "naru_mcq"]
    assert entry["data"] == table["data"]
    assert entry["metrics"]["overall"] == pytest.approx(summary["metrics"]["naru_mcq"]["overall"], abs=1e-9)
