"""``scripts/frame_sweep.sh`` and its SLURM template: dry runs, loud failures, and a real sweep with
``naru_replay`` that is killed mid-way and resumed (under ``accelerate launch``) without redoing or
losing anything."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from naru_eval.core.data import load_local
from naru_eval.core.scoring import METRICS, metrics_from_samples_log
from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, make_dataset
from tests.helpers.data import read_jsonl
from tests.helpers.expected import expected_metrics, make_predictions
from tests.helpers.runs import MODEL_ARGS, write_run

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "scripts" / "frame_sweep.sh"
SLURM = ROOT / "scripts" / "frame_sweep.slurm"
BIN = Path(sys.executable).parent


def sweep_env(data: Path | None = None, **extra: str) -> dict[str, str]:
    """The checkout's naru_eval first on the path, the venv's lmms-eval on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NARU_", "SLURM_", "SWEEP_"))}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHON"] = sys.executable
    env.update({"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    if data is not None:
        env["NARU_DATA_DIR"] = str(data)
    env.update(extra)
    return env


def sweep(*args: str, env: dict[str, str], script: Path = SWEEP, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=timeout)


def invocations(out: Path) -> dict[str, int]:
    """lmms-eval starts per budget, from the sweep's own log."""
    counts: dict[str, int] = {}
    for line in (out / "sweep.log").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2].startswith("invoke"):
            counts[parts[1]] = counts.get(parts[1], 0) + 1
    return counts


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def results_file(d: Path) -> Path:
    found = sorted(d.rglob("*_results.json"))
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------- fast


def test_dry_run_prints_one_command_per_budget_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    p = sweep(
        "--model", "naru_replay", "--model_args", "predictions=preds_{F}.jsonl,api_key=TOPSECRET",
        "--budgets", "8,16", "--out", str(out), "--dry-run", "--", "--verbosity", "DEBUG",
        env=sweep_env(tmp_path),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    cmds = [line for line in p.stdout.splitlines() if not line.startswith("#")]
    assert len(cmds) == 2
    heads = [line for line in p.stdout.splitlines() if line.startswith("#")]
    assert [h.split("(")[0].strip() for h in heads] == ["# f=8 [8 Frames]", "# f=16 [16 Frames]"]
    for f, cmd in zip((8, 16), cmds, strict=True):
        assert f"--model_args 'predictions=preds_{f}.jsonl,api_key=***,num_frames={f}'" in cmd
        assert f"--output_path {out}/f{f} " in cmd
        assert "--tasks naru_mcq_500" in cmd and "--log_samples" in cmd and cmd.endswith("--verbosity DEBUG")
        assert f"NARU_RESPONSE_STORE={out}/responses.sqlite" in cmd and f"NARU_FRAME_CACHE={out}/frames" in cmd
    assert "TOPSECRET" not in p.stdout + p.stderr
    assert not out.exists()


def test_dry_run_launcher_open_task_index_and_slurm_template(tmp_path):
    env = sweep_env(tmp_path)
    p = sweep(
        "--model", "naru_qwen2_5_vl", "--model_args", "pretrained=Qwen/Qwen2.5-VL-7B-Instruct", "--out", str(tmp_path / "o"),
        "--launcher", "accelerate launch --multi_gpu --num_processes 4 -m lmms_eval", "--open", "--index", "4",
        "--dry-run", env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    (cmd,) = [line for line in p.stdout.splitlines() if not line.startswith("#")]
    assert " accelerate launch --multi_gpu --num_processes 4 -m lmms_eval --model naru_qwen2_5_vl " in cmd
    assert "pretrained=Qwen/Qwen2.5-VL-7B-Instruct,num_frames=128" in cmd
    assert "--tasks naru_mcq_500,naru_open" in cmd

    # the SLURM template: the array index picks the budget, one response store per budget
    env_slurm = {**env, "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_JOB_ID": "77", "SLURM_SUBMIT_DIR": str(ROOT)}
    p = sweep("--model", "naru_replay", "--model_args", "predictions=p.jsonl", "--out", str(tmp_path / "s"), "--dry-run",
              env=env_slurm, script=SLURM)  # fmt: skip
    assert p.returncode == 0, p.stderr
    (cmd,) = [line for line in p.stdout.splitlines() if not line.startswith("#")]
    assert "num_frames=32" in cmd and f"--output_path {tmp_path}/s/f32" in cmd
    assert f"NARU_RESPONSE_STORE={tmp_path}/s/f32/responses.sqlite" in cmd
    p = sweep(
        "--model",
        "m",
        "--out",
        str(tmp_path / "s"),
        "--dry-run",
        env={**env, "SLURM_SUBMIT_DIR": str(ROOT)},
        script=SLURM,
    )
    assert p.returncode != 0 and "array" in p.stderr


@pytest.mark.parametrize(
    "launcher, message",
    [
        ("accelerate launch --num_processes 2 -m lmms_eval", "without --multi_gpu starts one process, not 2"),
        ("accelerate launch --cpu --num-processes=4 -m lmms_eval", "--cpu --num_processes 4` starts one process"),
    ],
)
def test_a_launcher_that_would_run_one_process_is_refused_before_anything_starts(tmp_path, launcher, message):
    """accelerate silently runs one process for these on a machine without two CUDA devices."""
    out = tmp_path / "out"
    p = sweep("--model", "naru_replay", "--model_args", "predictions=p.jsonl", "--budgets", "8", "--out", str(out),
              "--launcher", launcher, env=sweep_env(tmp_path))  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and "accelerate launch --multi_gpu --num_processes" in p.stderr
    assert not out.exists()


def test_store_per_budget_wins_over_an_exported_store(tmp_path):
    """One store per array task: an exported NARU_RESPONSE_STORE (one file) does not override it,
    and says so; a store template per budget ({F}) is the user's own layout and is kept."""
    out = tmp_path / "out"
    shared = tmp_path / "shared.sqlite"
    args = ["--model", "naru_replay", "--model_args", "predictions=p.jsonl", "--budgets", "8,16", "--out", str(out),
            "--store-per-budget", "--dry-run"]  # fmt: skip
    p = sweep(*args, env=sweep_env(tmp_path, NARU_RESPONSE_STORE=str(shared)))
    assert p.returncode == 0, p.stderr
    for f in (8, 16):
        assert f"NARU_RESPONSE_STORE={out}/f{f}/responses.sqlite " in p.stdout
    assert str(shared) not in p.stdout and f"NARU_RESPONSE_STORE={shared} is ignored" in p.stderr
    own = str(tmp_path / "scratch" / "f{F}" / "responses.{rank}.sqlite")
    p = sweep(*args, env=sweep_env(tmp_path, NARU_RESPONSE_STORE=own))
    assert p.returncode == 0 and "ignored" not in p.stderr
    assert f"NARU_RESPONSE_STORE={tmp_path}/scratch/f16/responses.{{rank}}.sqlite " in p.stdout


def test_a_python_without_naru_eval_is_named_with_the_fix(tmp_path):
    """No venv on PATH and no --python: the sweep names the Python it found and how to give one,
    instead of failing on `No module named 'pydantic'`."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    copy = checkout / "scripts" / "frame_sweep.sh"
    copy.write_bytes(SWEEP.read_bytes())
    env = {k: v for k, v in sweep_env(tmp_path).items() if k not in ("PYTHON", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    p = sweep("--model", "naru_replay", "--out", str(tmp_path / "o"), "--dry-run", env=env, script=copy)
    assert p.returncode == 2
    assert "error: python3 has no" in p.stderr and "pydantic installed" in p.stderr
    assert "--python /path/to/venv/bin/python" in p.stderr and p.stderr.rstrip().endswith("finds itself")
    assert "No module named" not in p.stderr
    # a checkout with its .venv (make env): the sweep finds it itself
    (checkout / ".venv" / "bin").mkdir(parents=True)
    venv_python = checkout / ".venv" / "bin" / "python"
    venv_python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    venv_python.chmod(0o755)
    env["PYTHONPATH"] = str(ROOT)
    p = sweep("--model", "naru_replay", "--model_args", "predictions=p.jsonl", "--out", str(tmp_path / "o"),
              "--dry-run", env=env, script=copy)  # fmt: skip
    assert p.returncode == 0, p.stderr


def test_a_signal_stops_lmms_eval_and_marks_the_budget_cancelled(small_data, tmp_path):
    """scancel, a time limit or Ctrl-C: the budget's manifest says cancelled (not running), the
    launched process tree is gone, and the exit status is 128 + the signal."""
    fake = tmp_path / "fake_lmms_eval.sh"
    pidfile = tmp_path / "child.pid"
    fake.write_text(f"#!/usr/bin/env bash\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        ["bash", str(SWEEP), "--model", "naru_replay", "--model_args", "predictions=p.jsonl", "--budgets", "8,16",
         "--out", str(out), "--launcher", str(fake), "--quiet"],
        env=sweep_env(small_data), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 120, proc)
        grandchild = int(pidfile.read_text())
        assert json.loads((out / "f8" / "manifest.json").read_text())["status"] == "running"
        proc.send_signal(signal.SIGTERM)  # the sweep alone, as slurmstepd's SIGTERM reaches it
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    man = json.loads((out / "f8" / "manifest.json").read_text())
    assert man["status"] == "cancelled" and "stopped by SIGTERM" in man["message"]
    assert "f=8 CANCELLED by SIGTERM" in (out / "sweep.log").read_text()
    assert not (out / "f16").exists()  # nothing more was started
    # lmms-eval's own children are stopped too (gone, or a zombie not yet reaped)
    _wait_for_exit(grandchild, 30)


def test_sweep_status_by_hand_reads_the_manifests(tmp_path, monkeypatch, capsys):
    """`naru-eval sweep-status DIR` outside the sweep (no SWEEP_* variables): each budget checked
    against its own manifest, for one budget or the whole root."""
    from naru_eval.cli import main
    from naru_eval.report.sweep import write_manifest

    for k in ("SWEEP_MODEL", "SWEEP_MODEL_ARGS", "SWEEP_TASKS", "SWEEP_BUDGET"):
        monkeypatch.delenv(k, raising=False)
    root = tmp_path / "sweep"
    for f, status in ((8, "done"), (16, "cancelled")):
        d = root / f"f{f}"
        write_run(d, model_args=f"{MODEL_ARGS},num_frames={f}")
        write_manifest(d, {"status": status, "updated_at": "2026-01-01T00:00:00+00:00", "model": "naru_replay",
                           "model_args_string": f"{MODEL_ARGS},num_frames={f}", "tasks": ["naru_mcq"],
                           "budget": {"num_frames": f}})  # fmt: skip
    rf16 = next((root / "f16").glob("*_results.json"))
    rf16.unlink()  # the cancelled budget has no results
    assert main(["sweep-status", str(root / "f8")]) == 0
    assert "f8 (8 frames): done, complete" in capsys.readouterr().out
    assert main(["sweep-status", str(root)]) == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("f8 (8 frames): done, complete") and lines[1].startswith("f16 (16 frames): cancelled")
    assert main(["sweep-status", str(tmp_path)]) == 2
    assert "not a frame-sweep or experiment directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--model", "naru_replay", "--model_args", "predictions=p.jsonl,num_frames=8", "--out", "o"],
            "sets num_frames",
        ),
        (["--model", "naru_replay", "--out", "o", "--budgets", "8,x"], "not a positive integer"),
        (["--model", "naru_replay", "--out", "o", "--index", "5"], "outside the 5 budget"),
        (["--out", "o"], "--model is required"),
    ],
)
def test_usage_errors(tmp_path, args, message):
    p = sweep(*args, "--dry-run", env=sweep_env(tmp_path))
    assert p.returncode == 2 and message in p.stderr


def test_a_run_that_writes_no_results_fails_loudly(small_data, tmp_path):
    """lmms-eval 0.7.3 exits 0 on a crashed evaluation: an exit status of 0 is not success."""
    out = tmp_path / "out"
    p = sweep(
        "--model", "naru_replay", "--model_args", "predictions=p.jsonl,api_key=TOPSECRET", "--budgets", "8,16",
        "--out", str(out), "--launcher", "true", "--label", "crashy",
        env=sweep_env(small_data),
    )  # fmt: skip
    assert p.returncode == 1
    assert "f=8 FAILED: no complete results file" in p.stderr and "exits 0 even when the evaluation crashed" in p.stderr
    assert invocations(out) == {"f=8": 1}  # stops at the first failure
    manifest = json.loads((out / "f8" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "lmms-eval exited 0" in manifest["message"]
    assert manifest["model_args"] == {"predictions": "p.jsonl", "num_frames": "8"}
    assert manifest["label"] == "crashy" and manifest["budget"] == {"num_frames": 8}
    assert manifest["sampling"] == "8 Frames"
    assert manifest["data"]["fingerprint"] == load_local(small_data).fingerprint
    for f in out.rglob("*"):
        if f.is_file():
            assert b"TOPSECRET" not in f.read_bytes(), f


def test_a_key_inside_an_argument_value_is_written_nowhere(small_data, tmp_path):
    """Issue 33 (14): a key inside a model arg's value (not its name) was written in clear to the
    manifest, OUT/sweep.log and lmms-eval's log (and printed). The one redaction now applies to
    everything the driver writes or prints; a URL carrying user:password@ is refused before any."""
    key = "sk-naru-value-0123456789abcdef"
    echo = tmp_path / "echo_lmms_eval.sh"
    echo.write_text('#!/usr/bin/env bash\necho "lmms-eval got: $*"\n')
    echo.chmod(0o755)
    out = tmp_path / "out"
    p = sweep("--model", "naru_replay", "--model_args", f"predictions=p.jsonl,pretrained={key}", "--budgets", "8",
              "--out", str(out), "--launcher", str(echo), env=sweep_env(small_data))  # fmt: skip
    assert p.returncode == 1 and "f=8 FAILED" in p.stderr, p.stderr
    assert "lmms-eval got:" in (out / "f8" / "lmms_eval.log").read_text()  # the output was kept, redacted
    assert key not in p.stdout + p.stderr
    written = [f for f in out.rglob("*") if f.is_file()]
    assert {f.name for f in written} >= {"manifest.json", "sweep.log", "lmms_eval.log"}
    for f in written:
        assert key.encode() not in f.read_bytes(), f
    p = sweep("--model", "naru_openai_compat", "--model_args", f"model=m,base_url=http://u:{key}@127.0.0.1:9/v1",
              "--budgets", "8", "--out", str(tmp_path / "o2"), env=sweep_env(small_data))  # fmt: skip
    assert p.returncode == 2 and "must not carry credentials" in p.stderr and key not in p.stderr
    assert not (tmp_path / "o2").exists()


def test_refuses_a_directory_holding_another_configuration(small_data, tmp_path):
    out = tmp_path / "out"
    (out / "f8").mkdir(parents=True)
    (out / "f8" / "20260101_000000_results.json").write_text(
        json.dumps(
            {"config": {"model": "naru_replay", "model_args": "predictions=other.jsonl,num_frames=8"}, "results": {}}
        )
    )
    p = sweep("--model", "naru_replay", "--model_args", "predictions=p.jsonl", "--budgets", "8", "--out", str(out),
              env=sweep_env(small_data))  # fmt: skip
    assert p.returncode == 1 and "holds results of a different model/model_args" in p.stderr


def test_sweep_status_is_the_full_check_of_a_run(tmp_path, monkeypatch, capsys):
    """``naru-eval sweep-status`` finds a budget done only when every sample log parses, holds one
    line per question of the task and recomputes (naru_eval.core.runfiles, as verify-run)."""
    from naru_eval.cli import main
    from naru_eval.report.sweep import write_manifest

    d = tmp_path / "f8"
    rf, log = write_run(d)
    write_manifest(d, {"status": "done", "updated_at": "2026-01-01T00:00:00+00:00", "model": "naru_replay",
                       "model_args_string": MODEL_ARGS, "tasks": ["naru_mcq"], "budget": {"num_frames": 8}})  # fmt: skip
    assert main(["sweep-status", str(d)]) == 0 and f"{rf}: complete" in capsys.readouterr().out
    log.write_bytes(log.read_bytes()[:-50])  # a full disk: the line count still matches
    assert main(["sweep-status", str(d)]) == 3
    assert f"{log}:18: not a JSON line (cut short: was the disk full?)" in capsys.readouterr().out
    assert main(["verify-run", str(d)]) == 1 and f"{log}:18" in capsys.readouterr().err
    recs = [json.loads(line) for line in log.read_text().splitlines()[:-1]]
    recs.append({**recs[0], "doc_id": 17})  # 18 lines that parse, one of them not the run's answer
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["sweep-status", str(d)]) == 3
    assert "do not recompute from the sample log" in capsys.readouterr().out
    write_run(d, original=36)  # a --limit run is not a finished budget
    assert main(["sweep-status", str(d)]) == 3
    assert "18 of the task's 36 questions evaluated" in capsys.readouterr().out
    assert main(["verify-run", str(d)]) == 0  # the runner's check: the run did what it was asked


# --------------------------------------------------------------------------- real lmms-eval


@pytest.fixture(scope="module")
def sweep_data(tmp_path_factory):
    base = tmp_path_factory.mktemp("sweep")
    data = make_dataset(base / "data", SyntheticSpec(counts={c: 3 for c in PAPER_COUNTS}, n_videos=6, seed=5))
    intended = {f: make_predictions(data / "annotations.jsonl", base / f"preds_{f}.jsonl", seed=f) for f in (8, 16)}
    return base, data, intended


def _wait_for_exit(pid: int, timeout: float) -> None:
    t0 = time.monotonic()
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return
        if state in ("Z", "X"):
            return
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"process {pid} still running ({state})")
        time.sleep(0.1)


def _wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    t0 = time.monotonic()
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(
                f"sweep ended early (rc={proc.returncode}): {proc.stderr.read() if proc.stderr else ''}"
            )
        if time.monotonic() - t0 > timeout:
            raise AssertionError("timed out waiting for the sweep")
        time.sleep(0.1)


@pytest.mark.slow
def test_sweep_killed_midway_resumes_without_redoing_or_losing(sweep_data, tmp_path):
    base, data, intended = sweep_data
    out = tmp_path / "sweep"
    args = [
        "--model", "naru_replay", "--model_args", f"predictions={base}/preds_{{F}}.jsonl,store=true",
        "--budgets", "8,16", "--out", str(out), "--label", "replay-model", "--quiet",
    ]  # fmt: skip
    env = sweep_env(data)
    proc = subprocess.Popen(
        ["bash", str(SWEEP), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    log = out / "sweep.log"
    try:
        # f=8 finished and f=16's lmms-eval started: kill the whole process group, lmms-eval included
        _wait_for(lambda: log.exists() and "f=16 invoke" in log.read_text(), 240, proc)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    f8 = results_file(out / "f8")
    f8_stat, f8_hash = f8.stat().st_mtime_ns, hashlib.sha256(f8.read_bytes()).hexdigest()
    assert not list((out / "f16").rglob("*_results.json"))  # killed before it finished
    assert json.loads((out / "f16" / "manifest.json").read_text())["status"] == "running"

    # resume under accelerate launch (2 CPU processes, sharing the sweep's store): the launcher is
    # not part of the run's identity
    launcher = (
        f"{BIN / 'accelerate'} launch --multi_gpu --num_processes 2 --main_process_port {free_port()} -m lmms_eval"
    )
    accelerate = ["--launcher", launcher]
    p = subprocess.run(["bash", str(SWEEP), *args, *accelerate], env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-4000:]
    # finished budgets are not redone, the unfinished one is run again, once
    assert invocations(out) == {"f=8": 1, "f=16": 2}
    assert "f=8 skip: complete" in p.stderr
    assert (f8.stat().st_mtime_ns, hashlib.sha256(f8.read_bytes()).hexdigest()) == (f8_stat, f8_hash)
    # nothing is lost: both budgets complete and exact
    for f in (8, 16):
        rf = results_file(out / f"f{f}")
        res = json.loads(rf.read_text())
        assert res["n-samples"]["naru_mcq_500"]["effective"] == res["n-samples"]["naru_mcq_500"]["original"] == 27
        log_f = rf.with_name(rf.name.replace("_results.json", "_samples_naru_mcq_500.jsonl"))
        ids = {s["overall"]["question_id"] for s in read_jsonl(log_f)}
        want = expected_metrics(data / "annotations.jsonl", intended[f], ids)
        assert metrics_from_samples_log(log_f) == pytest.approx(want, abs=1e-9)
        for m in METRICS:
            assert res["results"]["naru_mcq_500"][f"{m},none"] == pytest.approx(want[m], abs=1e-9)
        man = json.loads((out / f"f{f}" / "manifest.json").read_text())
        assert man["status"] == "done" and man["invocations"] == (1 if f == 8 else 2)
        assert man["budget"] == {"num_frames": f} and man["model"] == "naru_replay" and man["label"] == "replay-model"
        assert man["sampling"] == f"{f} Frames"
        assert f"f={f} invoke [{f} Frames]:" in (out / "sweep.log").read_text()
        assert man["versions"]["naru-eval"] and man["versions"]["lmms-eval"] == "0.7.3" and man["versions"]["torch"]
        assert man["data"]["fingerprint"] == load_local(data).fingerprint
        assert man["git_revision"] is None or len(man["git_revision"].split("-")[0]) == 40
        assert (out / f"f{f}" / man["results_file"]) == rf
        # the response store was passed through: every answer written through, per budget
        assert man["env"]["NARU_RESPONSE_STORE"] == str(out / "responses.sqlite")
        # summed by the one usage sum (UsageTotals): 27 answers, none failed
        assert (man["usage"]["requests"], man["usage"]["ok"], man["usage"]["failed"]) == (27, 27, 0)
        assert (man["launcher"] == launcher) == (f == 16)
        world = subprocess.run([sys.executable, "-m", "naru_eval.cli", "verify-run", str(out / f"f{f}")],
                               env=env, capture_output=True, text=True)  # fmt: skip
        assert world.stdout.strip().endswith("complete (2 processes)" if f == 16 else "complete (1 process)"), world
    # a third run does nothing
    p = subprocess.run(["bash", str(SWEEP), *args], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and invocations(out) == {"f=8": 1, "f=16": 2}

    # the sweep feeds the leaderboard: provenance from the manifests, one entry per budget
    from naru_eval.report.leaderboard import build_leaderboard

    lb = build_leaderboard([out], reps=200)
    assert not lb.errors
    assert [(e["model"], e["frames"]) for e in lb.data["entries"]] == [("replay-model", 8), ("replay-model", 16)]
    # the sampling the payloads record ("8 Frames"); "(model_args)": the adapter recorded none
    assert [e["sampling"].removesuffix(" (model_args)") for e in lb.data["entries"]] == ["8 Frames", "16 Frames"]
    for e in lb.data["entries"]:
        assert e["manifest"]["data_fingerprint"] == load_local(data).fingerprint
        assert set(e["cost"]) == {"usage"} and (e["cost"]["usage"]["ok"], e["cost"]["usage"]["failed"]) == (27, 0)


@pytest.mark.slow
def test_sweep_with_a_tiny_model(small_data, tmp_path):
    """The sweep drives a real adapter: a tiny random Qwen2.5-VL, two budgets; each budget's
    answers come from exactly that many sampled frames, and the leaderboard sees both."""
    import sqlite3

    from tests.helpers.tiny_models import build_qwen2_5_vl

    ckpt = build_qwen2_5_vl(tmp_path / "ckpt")
    out = tmp_path / "sweep"
    args = [
        "--model", "naru_qwen2_5_vl", "--model_args", f"pretrained={ckpt},device=cpu,max_new_tokens=4",
        "--budgets", "2,4", "--out", str(out), "--quiet",
    ]  # fmt: skip
    p = sweep(*args, env=sweep_env(small_data), timeout=400)
    assert p.returncode == 0, p.stderr[-4000:]
    assert invocations(out) == {"f=2": 1, "f=4": 1}
    for f in (2, 4):
        res = json.loads(results_file(out / f"f{f}").read_text())
        assert res["n-samples"]["naru_mcq_500"]["effective"] == 36
        assert set(METRICS) <= {k.split(",")[0] for k in res["results"]["naru_mcq_500"]}
    usage = [json.loads(u) for (u,) in sqlite3.connect(out / "responses.sqlite").execute("SELECT usage FROM responses")]
    assert sorted(u["frames"] for u in usage) == [2] * 36 + [4] * 36
    from naru_eval.report.leaderboard import build_leaderboard

    lb = build_leaderboard([out], reps=50)
    assert sorted(e["frames"] for e in lb.data["entries"]) == [2, 4]
