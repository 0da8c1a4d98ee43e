"""``naru-eval sweep submit`` and scripts/frame_sweep.slurm: what is submitted (dry runs), and a
real one-node SLURM cluster (tests/helpers/slurm.py) that runs two models x two budgets, has
one budget cancelled midway and resumed from its store, and ends with verified runs and a
leaderboard, with no script edited."""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, make_dataset
from tests.helpers.expected import make_predictions
from tests.helpers.slurm import SlurmCluster, unavailable
from tests.helpers.stubs.openai_server import OpenAIStub, StubRequest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SLURM = ROOT / "scripts" / "frame_sweep.slurm"
SWEEP_SH = ROOT / "scripts" / "frame_sweep.sh"
FAKE_KEY = "sk-naru-slurm-test-SECRET"


def submit_env(data: Path, **extra: str) -> dict[str, str]:
    """The checkout first on the path, the venv on PATH, the data set: what the jobs inherit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NARU_", "SLURM_", "SWEEP_"))}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHON"] = sys.executable
    env.update({"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "NARU_DATA_DIR": str(data)})
    env.update(extra)
    return env


def naru_eval(*args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "naru_eval.cli", *args], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


# --------------------------------------------------------------------------- fast: what is submitted


def test_dry_run_derives_the_arrays_and_chains_the_leaderboard(tmp_path):
    root = tmp_path / "sweeps"
    p = naru_eval(
        "sweep", "submit", "--repo", str(ROOT), "--out", str(root), "--budgets", "8,16,32",
        "--model", "naru_replay", "--model_args", "predictions=p_{F}.jsonl", "--label", "replay-a",
        "--model", "naru_qwen2_5_vl", "--model_args", "pretrained=Qwen/Qwen2.5-VL-7B-Instruct",
        "--gpus", "1", "--mem", "64G", "--time", "08:00:00", "--partition", "gpu", "--dry-run", "--", "--limit", "5",
        env=submit_env(tmp_path),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    a, b, board = (shlex.split(line) for line in p.stdout.splitlines())
    for cmd, slug, model in ((a, "replay-a", "naru_replay"), (b, "Qwen2.5-VL-7B-Instruct", "naru_qwen2_5_vl")):
        assert cmd[:2] == ["sbatch", "--parsable"] and "--array=0-2" in cmd
        assert f"--output={root}/{slug}/slurm/%A_%a.out" in cmd  # under the output root
        assert {"--gres=gpu:1", "--mem=64G", "--time=08:00:00", "--partition=gpu"} <= set(cmd)
        script = cmd.index(str(SLURM))
        assert cmd[script + 1 : script + 3] == ["--model", model]
        assert cmd[cmd.index("--out") + 1] == f"{root}/{slug}" and cmd[-2:] == ["--limit", "5"]
    assert "--dependency=afterok:<the array jobs>" in board and "--kill-on-invalid-dep=yes" in board
    assert not any(w.startswith(("--gres", "--mem")) for w in board)  # the leaderboard needs no GPU
    wrap = shlex.split(next(w for w in board if w.startswith("--wrap=")).removeprefix("--wrap="))
    assert wrap[1:4] == ["-m", "naru_eval.cli", "leaderboard"]
    assert wrap[4:6] == [f"{root}/replay-a", f"{root}/Qwen2.5-VL-7B-Instruct"]
    assert not root.exists()  # a dry run writes nothing


def test_defaults_ask_for_nothing_a_stock_partition_refuses(tmp_path):
    """No GPU, memory, CPU or time request unless asked: the partition's defaults."""
    p = naru_eval("sweep", "submit", "--repo", str(ROOT), "--out", str(tmp_path / "o"), "--model", "naru_replay",
                  "--model_args", "predictions=p.jsonl", "--dry-run", env=submit_env(tmp_path))  # fmt: skip
    assert p.returncode == 0, p.stderr
    first = shlex.split(p.stdout.splitlines()[0])
    asked = [w for w in first[: first.index(str(SLURM))] if w.startswith("--")]
    assert [w.split("=")[0] for w in asked] == [
        "--parsable", "--job-name", "--array", "--output", "--open-mode", "--nodes", "--ntasks",
    ]  # fmt: skip
    assert "--array=0-4" in first  # the five default budgets
    # the template itself asks for no more than one task on one node
    header = [line for line in SLURM.read_text().splitlines() if line.startswith("#SBATCH")]
    assert [h.split()[1].split("=")[0] for h in header] == ["--job-name", "--nodes", "--ntasks", "--output", "--error"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--budgets", "8,16", "--array", "0-2"], "index 2 is outside the 2 budget(s) 8,16"),
        (["--model_args", "predictions=p.jsonl,api_key=sk-x"], "sets api_key"),
        (["--model_args", "predictions=p.jsonl,num_frames=8"], "sets num_frames"),
        (["--launcher", "accelerate launch --num_processes 2 -m lmms_eval"], "without --multi_gpu starts one process"),
        (["--model", "naru_replay"], "would both write"),
    ],
)
def test_submission_refuses_what_would_fail_in_the_job(tmp_path, extra, message):
    p = naru_eval("sweep", "submit", "--repo", str(ROOT), "--out", str(tmp_path / "o"), "--model", "naru_replay",
                  *extra, "--dry-run", env=submit_env(tmp_path))  # fmt: skip
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_submission_needs_the_data(tmp_path):
    env = {k: v for k, v in submit_env(tmp_path).items() if k != "NARU_DATA_DIR"}
    p = naru_eval("sweep", "submit", "--repo", str(ROOT), "--out", "o", "--model", "naru_replay", env=env)
    assert p.returncode == 2 and "set NARU_DATA_DIR" in p.stderr


URL_KEY = "sk-naru-in-a-url-0123456789"


@pytest.mark.parametrize(
    "extra",
    [
        ["--model", "naru_openai_compat", "--model_args", f"model=m,base_url=http://u:{URL_KEY}@127.0.0.1:9/v1"],
        ["--model", "naru_replay", "--model_args", f"predictions=p.jsonl,pretrained={URL_KEY}"],
        ["--model", "naru_replay", "--model_args", "predictions=p.jsonl", "--", "--hf_hub_token", URL_KEY],
    ],
)
def test_a_key_inside_any_value_is_refused_before_anything_reaches_slurm(tmp_path, extra):
    """Issue 33 (14): only secret-named model args were refused; a key inside a value (a URL's
    user:key@, a key-shaped label, an lmms-eval argument) went to the sbatch line, SLURM's job
    record and the submission log. Every word bound for SLURM now passes the one redaction."""
    out = tmp_path / "o"
    p = naru_eval("sweep", "submit", "--repo", str(ROOT), "--out", str(out), *extra, "--dry-run",
                  env=submit_env(tmp_path))  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    assert URL_KEY not in p.stdout + p.stderr and "Traceback" not in p.stderr
    assert "[REDACTED" in p.stderr and not out.exists()


def fake_sbatch(tmp_path: Path) -> dict[str, str]:
    """A stand-in for the cluster's sbatch (a remote service): records its argv, answers a job id."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        "#!/usr/bin/env bash\n"
        f"n=$(( $(wc -l < {tmp_path}/sbatch.log 2>/dev/null || echo 0) + 100 ))\n"
        f'printf "%s\\n" "$*" >> {tmp_path}/sbatch.log\necho "$n"\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_no_leaderboard_submits_and_records_without_a_traceback(tmp_path):
    """Issue 33 (15): with --no-leaderboard OUT/slurm/ was never made, so the array was submitted
    and then the submission record failed (a traceback, the record lost)."""
    out = tmp_path / "o"
    env = submit_env(tmp_path, **fake_sbatch(tmp_path))
    p = naru_eval("sweep", "submit", "--repo", str(ROOT), "--out", str(out), "--budgets", "8,16", "--no-leaderboard",
                  "--model", "naru_replay", "--model_args", "predictions=p.jsonl", "--label", "r", env=env)  # fmt: skip
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    (record,) = [json.loads(line) for line in (out / "slurm" / "submissions.jsonl").read_text().splitlines()]
    assert [m["job"] for m in record["models"]] == ["100"] and "leaderboard" not in record
    assert len((tmp_path / "sbatch.log").read_text().splitlines()) == 1


def test_what_the_array_task_would_refuse_is_refused_at_submission(tmp_path):
    """Issue 33 (15): `--budgets '8, 16'` passed submission and killed every array task (the task
    read the budgets with other rules); `--budgets 8,8` ran one budget twice into one folder;
    `--label ..` wrote outside --out. One validator serves both: a submitted task's own options
    pass the array task's check, and what it would refuse is refused here."""
    env = submit_env(tmp_path)
    base = ["sweep", "submit", "--repo", str(ROOT), "--out", str(tmp_path / "o"), "--model", "naru_replay",
            "--model_args", "predictions=p.jsonl"]  # fmt: skip
    p = naru_eval(*base, "--budgets", "8, 16", "--dry-run", env=env)
    assert p.returncode == 0, p.stderr
    cmd = shlex.split(p.stdout.splitlines()[0])
    task = cmd[cmd.index(str(SLURM)) + 1 :]
    assert task[task.index("--budgets") + 1] == "8,16"
    # the array task's second index, as SLURM runs it, with the submitted words
    t = subprocess.run(["bash", str(SLURM), *task, "--dry-run"], capture_output=True, text=True, timeout=120,
                       env={**env, "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_JOB_ID": "9", "SLURM_SUBMIT_DIR": str(ROOT)})  # fmt: skip
    assert t.returncode == 0 and "num_frames=16" in t.stdout, t.stderr
    for extra, message in (
        (["--budgets", "8,8"], "budget 8 is given twice"),
        (["--label", ".."], "not a folder inside --out"),
    ):
        p = naru_eval(*base, *extra, "--dry-run", env=env)
        assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, p.stderr
        if extra[0] != "--label":  # the model's folder under --out is the submission's; the grid, the task's too
            t = subprocess.run(["bash", str(SWEEP_SH), *base[6:], "--out", str(tmp_path / "t"), *extra, "--dry-run"],
                               capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
            assert t.returncode == 2 and message in t.stderr, t.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "t").exists()


def test_a_percent_in_the_output_root_is_kept_literal_for_sbatch(tmp_path):
    """Issue 33 (15): sbatch expands %j, %A, ... in --output, so `--out /x/run%j` sent the job's log
    to a folder that does not exist and the job died with no log. The percent signs are escaped."""
    root = tmp_path / "run%j"
    p = naru_eval("sweep", "submit", "--repo", str(ROOT), "--out", str(root), "--model", "naru_replay",
                  "--model_args", "predictions=p.jsonl", "--label", "r", "--dry-run", env=submit_env(tmp_path))  # fmt: skip
    assert p.returncode == 0, p.stderr
    first, board = (shlex.split(line) for line in p.stdout.splitlines())
    assert f"--output={tmp_path}/run%%j/r/slurm/%A_%a.out" in first
    assert first[first.index("--out") + 1] == f"{root}/r"  # the task's own argument is not an sbatch pattern
    assert f"--output={tmp_path}/run%%j/slurm/leaderboard_%j.out" in board


# --------------------------------------------------------------------------- slow: a real cluster


@pytest.fixture(scope="module")
def cluster():
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with SlurmCluster.start() as c:
        yield c


@pytest.fixture(scope="module")
def sweep_data(tmp_path_factory):
    base = tmp_path_factory.mktemp("slurm_sweep")
    data = make_dataset(base / "data", SyntheticSpec(counts={c: 2 for c in PAPER_COUNTS}, n_videos=4, seed=7))
    for f in (8, 16):
        make_predictions(data / "annotations.jsonl", base / f"preds_{f}.jsonl", seed=f)
    return base, data


def letter_for(req: StubRequest) -> str:
    return f"The answer is {'ABCD'[sum(req.text.encode()) % 4]}."


def ok_rows(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM responses WHERE status='ok'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def wait_for(predicate, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def job_ids(stdout: str) -> tuple[list[str], str]:
    arrays = re.findall(r"array job (\d+)", stdout)
    (board,) = re.findall(r"leaderboard: job (\d+)", stdout)
    return arrays, board


@pytest.mark.slow
def test_two_models_two_budgets_on_a_real_cluster_with_a_cancelled_budget_resumed(cluster, sweep_data, tmp_path):
    base, data = sweep_data
    n = 18  # questions per budget
    root = tmp_path / "sweeps"
    submit_dir = tmp_path / "submit_dir"  # where sbatch is run from: nothing may land here
    submit_dir.mkdir()
    with OpenAIStub(responder=letter_for, hold_after=n + 5) as stub:
        env = submit_env(data, OPENAI_API_KEY=FAKE_KEY, **cluster.env)
        cmd = [
            "sweep", "submit", "--repo", str(ROOT), "--out", str(root), "--budgets", "8,16", "--max-parallel", "1",
            "--model", "naru_replay", "--model_args", f"predictions={base}/preds_{{F}}.jsonl", "--label", "replay",
            "--model", "naru_openai_compat", "--model_args", f"model=stub,base_url={stub.base_url}", "--label", "api",
            "--leaderboard-arg=--no-plots", "--leaderboard-arg=--reps=200",
        ]  # fmt: skip
        p = naru_eval(*cmd, env=env, cwd=submit_dir)
        assert p.returncode == 0, p.stderr
        (replay_job, api_job), board_job = job_ids(p.stdout)

        # the API model's second budget stops after 5 answers (the stub holds the rest): cancel it
        f16_store = root / "api" / "f16" / "responses.sqlite"
        wait_for(lambda: ok_rows(f16_store) >= 5 and stub.held(), 400, "the API's f16 budget to be half-way")
        cluster.run("scancel", f"{api_job}_1")
        states = cluster.wait(api_job, timeout=120)
        assert states == {"0": "COMPLETED", "1": "CANCELLED"}, states
        assert cluster.wait(replay_job, timeout=400) == {"0": "COMPLETED", "1": "COMPLETED"}
        # afterok can no longer be met: SLURM cancels the leaderboard job (it never runs)
        assert cluster.wait(board_job, timeout=60) == {"0": "CANCELLED"}
        man = json.loads((root / "api" / "f16" / "manifest.json").read_text())
        assert man["status"] == "cancelled" and "SIGTERM" in man["message"], man
        assert man["slurm_job"] == f"{api_job}_1"
        assert ok_rows(f16_store) == 5
        stub.release()
        wait_for(lambda: not stub.held(), 60, "the held requests to end")
        asked_before = len(stub.chat_requests())

        # the same command again: finished budgets are skipped, the cancelled one resumes from its store
        p = naru_eval(*cmd, env=env, cwd=submit_dir)
        assert p.returncode == 0, p.stderr
        (replay_job2, api_job2), board_job2 = job_ids(p.stdout)
        for job in (replay_job2, api_job2):
            assert cluster.wait(job, timeout=400) == {"0": "COMPLETED", "1": "COMPLETED"}
        assert cluster.wait(board_job2, timeout=300) == {"0": "COMPLETED"}, (root / "slurm").iterdir()
        assert len(stub.chat_requests()) - asked_before == n - 5  # only what the store did not hold

    for label in ("replay", "api"):
        for f in (8, 16):
            d = root / label / f"f{f}"
            v = naru_eval("verify-run", str(d), env=env)
            assert v.returncode == 0 and "complete" in v.stdout, v.stderr
            man = json.loads((d / "manifest.json").read_text())
            assert man["status"] == "done" and man["label"] == label and man["budget"] == {"num_frames": f}
            assert man["invocations"] == (2 if (label, f) == ("api", 16) else 1)
        # every job's log is under the output root
        logs = sorted(p.name for p in (root / label / "slurm").glob("*.out"))
        assert len(logs) == 4, logs
        assert "skip: complete" in (root / label / "sweep.log").read_text()
    assert ok_rows(f16_store) == n
    assert list(submit_dir.iterdir()) == []  # no slurm-*.out in the submit directory
    lb = json.loads((root / "leaderboard.json").read_text())
    ours = sorted((e["model"], e["frames"]) for e in lb["entries"] if e.get("source") != "published")
    assert ours == [("api", 8), ("api", 16), ("replay", 8), ("replay", 16)], ours
    assert not lb["errors"]
    for text in [p.read_text(errors="replace") for p in root.rglob("*") if p.is_file() and p.suffix != ".sqlite"]:
        assert FAKE_KEY not in text


@pytest.mark.slow
def test_the_documented_sbatch_line_runs_unedited_and_logs_under_the_output_root(cluster, sweep_data, tmp_path):
    """`sbatch --array=... scripts/frame_sweep.slurm ...` as docs/cluster.md writes it: the header
    asks for nothing the stock partition refuses (EnforcePartLimits=ALL refuses at sbatch), and
    the log is OUT/slurm/<job>_<task>.out, not a slurm-*.out in the submit directory."""
    base, data = sweep_data
    out = tmp_path / "out"
    env = submit_env(data, NARU_EVAL_REPO=str(ROOT), **cluster.env)
    p = subprocess.run(
        ["sbatch", "--parsable", "--array=0", str(SLURM), "--model", "naru_replay",
         "--model_args", f"predictions={base}/preds_{{F}}.jsonl", "--budgets", "8", "--out", str(out), "--quiet"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip().split(";")[0]
    assert cluster.wait(job, timeout=400) == {"0": "COMPLETED"}
    log = out / "slurm" / f"{job}_0.out"
    assert "frame_sweep.slurm: job" in log.read_text() and "f=8" in log.read_text()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out"]
    assert naru_eval("verify-run", str(out / "f8"), env=env).returncode == 0
