"""A run is complete only when its sample logs parse, hold one line per question, and the metrics
recompute from them (naru_eval/core/runfiles.py, bound in naru_eval/lmms/run.py): a full output
disk, on which lmms-eval 0.7.3 exits 0 beside a complete results file and a cut sample log, is a
failed run for the runner,
``naru-eval verify-run``, the frame sweep and the demo; the response store keeps the answers, so
the rerun asks nothing again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from naru_eval.cli import main
from naru_eval.lmms.run import run_lmms_eval, run_problems
from tests.helpers.data import docs_of
from tests.helpers.disk import small_disk
from tests.helpers.expected import make_predictions
from tests.helpers.stubs import OpenAIStub

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TASK = "naru_mcq"


@pytest.fixture(scope="module")
def replay_run(small_data, tmp_path_factory):
    """One real lmms-eval run of naru_replay on the 36-question data (read-only for the tests)."""
    root = tmp_path_factory.mktemp("replay_run")
    preds = root / "preds.jsonl"
    make_predictions(small_data / "annotations.jsonl", preds)
    run = run_lmms_eval(
        "naru_replay", f"predictions={preds}", [TASK], root / "out", env={"NARU_DATA_DIR": str(small_data)}
    )
    assert run.ok, run.failure()
    assert run.problems == [] and run_problems(run.results_file) == []
    return run


def _copy(run, tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the run's folder: (results file, sample log)."""
    dst = tmp_path / "copy"
    shutil.copytree(run.results_file.parent, dst)
    return dst / run.results_file.name, dst / run.sample_files[TASK].name


def test_a_sample_log_cut_in_its_last_line_is_not_complete(replay_run, tmp_path, capsys):
    """36 lines still (the old line count passes), but the last one is cut mid-line."""
    rf, log = _copy(replay_run, tmp_path)
    data = log.read_bytes()
    log.write_bytes(data[:-200])
    (problem,) = run_problems(rf)
    assert f"{log}:36: not a JSON line (cut short: was the disk full?)" in problem
    assert main(["verify-run", str(rf.parent)]) == 1
    err = capsys.readouterr().err
    assert "the run is not complete (1 problem(s))" in err and f"{log}:36" in err and "Traceback" not in err


def test_a_short_an_empty_and_an_altered_log(replay_run, tmp_path):
    rf, log = _copy(replay_run, tmp_path)
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join(lines[:24]) + b"\n" + lines[24][:100])  # 24 of 36 lines and a cut one
    problems = run_problems(rf)
    assert any(f"{log}:25: not a JSON line" in p for p in problems)
    assert any("25 line(s), expected one per question: 36" in p for p in problems)
    log.write_bytes(b"")
    assert run_problems(rf) == [f"{log}: 0 line(s), expected one per question: 36"]
    # every line parses and is there, but one answer was changed after scoring: nothing recomputes
    recs = [json.loads(line) for line in lines if line.strip()]
    payload = recs[0]["overall"]
    payload["correct"] = not payload["correct"]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    (problem,) = run_problems(rf)
    assert problem.startswith(f"{log}: ") and "do not recompute from the sample log" in problem
    assert "accuracy" in problem
    log.unlink()
    assert run_problems(rf) == [f"{rf}: {TASK}: no sample log (run lmms-eval with --log_samples)"]


def test_a_full_output_disk_fails_the_run_and_the_rerun_asks_nothing_again(small_data, tmp_path):
    """The output folder on a 128 KiB tmpfs: lmms-eval writes the results file (17 KB), then the
    sample log (170 KB) is cut and lmms-eval exits 0. The runner says the run failed; the
    answers are in the response store (another disk), so the rerun asks the server nothing."""
    store = tmp_path / "responses.sqlite"
    env = {"NARU_DATA_DIR": str(small_data), "NARU_RESPONSE_STORE": str(store), "OPENAI_API_KEY": "sk-naru-test"}
    n = len(docs_of(small_data))
    with OpenAIStub(responder=lambda req: "The answer is C.") as stub:
        args = f"model=stub,base_url={stub.base_url},num_frames=2"
        with small_disk(tmp_path / "full", "128k") as full:
            first = run_lmms_eval("naru_openai_compat", args, [TASK], full / "out", env=env, timeout=300)
            assert first.returncode == 0 and first.results_file is not None  # lmms-eval is fooled
            assert not first.ok
            assert any("cut short: was the disk full?" in p for p in first.problems), first.problems
            assert "not complete" in first.failure()
        assert len(stub.chat_requests()) == n
        stub.reset()
        second = run_lmms_eval("naru_openai_compat", args, [TASK], tmp_path / "out", env=env, timeout=300)
        assert second.ok, second.failure()
        assert stub.chat_requests() == []  # every answer came from the store


def test_the_frame_sweep_fails_a_run_whose_sample_log_was_cut(small_data, tmp_path):
    """A launcher that runs lmms-eval and then cuts the last line of the sample log, as a full
    disk does: the line count still matches, yet the sweep reports the budget as failed."""
    preds = tmp_path / "preds.jsonl"
    make_predictions(small_data / "annotations.jsonl", preds)
    launcher = tmp_path / "cut_launcher.sh"
    launcher.write_text(
        "#!/usr/bin/env bash\n"
        f'{Path(sys.executable).with_name("lmms-eval")} "$@"\n'
        'out=""; while [[ $# -gt 0 ]]; do [[ "$1" == --output_path ]] && out="$2"; shift; done\n'
        'for f in "$out"/*_samples_*.jsonl; do truncate -s -200 "$f"; done\n'
    )
    launcher.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NARU_", "SLURM_", "SWEEP_"))}
    env.update(
        NARU_DATA_DIR=str(small_data), PYTHON=sys.executable, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
        PYTHONPATH=str(ROOT), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )  # fmt: skip
    out = tmp_path / "sweep"
    cmd = ["bash", str(ROOT / "scripts" / "frame_sweep.sh"), "--model", "naru_replay", "--budgets", "8"]
    cmd += ["--model_args", f"predictions={preds}", "--tasks", TASK, "--out", str(out), "--launcher", str(launcher)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr[-3000:]
    assert "f=8 FAILED" in p.stderr and "cut short: was the disk full?" in p.stderr
    manifest = json.loads((out / "f8" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "cut short" in manifest["message"]


def test_the_demo_reports_a_run_cut_by_a_full_disk(tmp_path, capsys):
    """The demo's folder on a 64 KiB tmpfs: the data, the predictions and the results file fit
    (9 pages), the first sample log (43 KB) does not. The demo says FAILED and why."""
    from naru_eval.cli.demo import run_demo

    with small_disk(tmp_path / "full", "64k") as full:
        assert run_demo(full / "demo", per_category=1, videos=2) == 1
        err = capsys.readouterr().err
    assert "demo: FAILED: the lmms-eval run is not complete" in err
    assert "cut short: was the disk full?" in err or "line(s), expected one per question" in err, err[-3000:]


def test_a_run_whose_every_question_failed_writes_no_results(small_data, tmp_path):
    """Issue 33: a run whose every request failed (here a server that answers every question with
    HTTP 500, no retries) went on to a results file of failures that read as a 0 % score. It now
    ends before lmms-eval writes one, exit 1, saying so; one answered question is a run again."""
    store = tmp_path / "responses.sqlite"
    env = {"NARU_DATA_DIR": str(small_data), "NARU_RESPONSE_STORE": str(store), "OPENAI_API_KEY": "sk-naru-test"}
    n = len(docs_of(small_data))
    with OpenAIStub(responder=lambda req: "The answer is C.", statuses=[500] * n) as stub:
        args = f"model=stub,base_url={stub.base_url},num_frames=2,max_retries=0,abort_after={n + 1}"
        failed = run_lmms_eval("naru_openai_compat", args, [TASK], tmp_path / "out", env=env, timeout=300)
        assert len(stub.chat_requests()) == n
        assert failed.returncode == 1 and failed.results_file is None, failed.stderr[-3000:]
        assert f"every one of the run's {n} questions failed" in failed.stderr
        assert not list((tmp_path / "out").rglob("*_results.json"))
        again = run_lmms_eval("naru_openai_compat", args, [TASK], tmp_path / "out", env=env, timeout=300)
        assert again.ok, again.failure()  # the failures were asked again, and answered
