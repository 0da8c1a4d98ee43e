"""The one experiment driver (``naru-eval experiment run|status|compare``, ``sweep submit``): a grid
of model-arg variants declared as data. Fast: the grids the options declare and every problem of
a declaration named at once. Slow: the transcript ablation through the real lmms-eval against the
loopback OpenAI stub, killed midway and resumed without asking anything twice, then compared; the
audio and transcript ablations as SLURM arrays on a real one-node cluster, one cancelled midway
and resubmitted."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from naru_eval.cli.grid import GridError, GridOptions, adapter_args, build, check_cells
from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, dialogue_srt, make_dataset
from tests.helpers.slurm import SlurmCluster, unavailable
from tests.helpers.stubs.openai_server import OpenAIStub, StubRequest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
OMNI = "Qwen/Qwen2.5-Omni-7B"  # a served omni model: the audio arms' requests carry its soundtrack
FAKE_KEY = "sk-naru-experiment-test-SECRET"


def grid(**kw: object) -> GridOptions:
    base: dict[str, object] = {
        "budgets": None, "ablation": None, "arms": None, "axes": (), "variants": (), "tasks": "naru_mcq_500",
        "open": False,
    }  # fmt: skip
    base.update(kw)
    return GridOptions(**base)  # type: ignore[arg-type]


def fields(model: str) -> set[str]:
    args = adapter_args(model)
    assert args is not None
    return set(args.model_fields)


# --------------------------------------------------------------------------- fast: the grids


def test_a_selector_axis_is_one_more_axis_paired_at_each_budget():
    """Issue 35's ablation (uniform, random and a selector at the same budgets) is declared with
    the options alone: nine cells, each selector paired with uniform at its own budget."""
    exp = build("naru_replay", "predictions=p_{F}.jsonl", grid(budgets="8,16,32", axes=("select=uniform,random,its",)),
                None)  # fmt: skip
    cells = exp.cells()
    assert [c.name for c in cells[:3]] == ["f8-uniform", "f8-random", "f8-its"] and len(cells) == 9
    assert exp.args_of(cells[2]) == "predictions=p_8.jsonl,num_frames=8,select=its"
    assert cells[2].tag == "f=8,select=its" and cells[2].budget == 8
    pairs = [(a.name, b.name, x) for a, b, x in exp.pairs()]
    assert pairs == [(f"f{b}-uniform", f"f{b}-{s}", False) for s in ("random", "its") for b in (8, 16, 32)], (
        pairs
    )  # never across budgets: each selector against uniform at the same budget


def test_the_ablations_arms_follow_the_adapters_args():
    """Which arms an adapter has is read from its args: Gemini takes the soundtrack natively with
    the video (frames and frames_audio only); an omni family has all four; a family that cannot
    hear is refused by name. The transcript arms need transcript=, which every video adapter takes."""
    arms = {
        m: [c.name for c in build(m, "", grid(ablation="audio"), fields(m)).cells()]
        for m in ("naru_gemini", "naru_openai_compat", "naru_qwen2_5_omni")
    }
    assert arms == {
        "naru_gemini": ["frames", "frames_audio"],
        "naru_openai_compat": ["frames", "frames_audio", "audio", "control"],
        "naru_qwen2_5_omni": ["frames", "frames_audio", "audio", "control"],
    }
    with pytest.raises(GridError, match="naru_qwen3_vl's args allow none of its arms"):
        build("naru_qwen3_vl", "", grid(ablation="audio"), fields("naru_qwen3_vl"))
    exp = build("naru_qwen3_vl", "pretrained=x", grid(ablation="transcript=/data/subs"), fields("naru_qwen3_vl"))
    assert [exp.args_of(c) for c in exp.cells()] == [
        "pretrained=x,transcript=none",
        "pretrained=x,transcript=/data/subs",
        "pretrained=x,transcript=/data/subs,video=false",
        "pretrained=x,transcript=/data/subs,transcript_source=other",
    ]
    assert [(a.name, b.name, x) for a, b, x in exp.pairs()] == [
        ("frames", "frames_transcript", True),
        ("control", "frames_transcript", False),
        ("transcript", "frames", True),
        ("transcript", "frames_transcript", True),
    ]


def test_every_problem_of_a_declaration_is_named_at_once():
    with pytest.raises(GridError) as e:
        build(
            "naru_qwen2_5_omni", "pretrained=x,num_frames=8,audio=true",
            grid(budgets="8,8,x", ablation="audio", arms="frames,stereo", axes=("audio=a,b", "nothing")), None,
        )  # fmt: skip
    lines = str(e.value).splitlines()
    for want in (
        "--budgets 8,8,x: budget 8 is given twice",
        "unknown arm stereo of --ablation audio (frames, frames_audio, audio, control)",
        "--axis 'nothing': give KEY=V1,V2",
        "--model_args sets audio; the arms set it",
        "the audio and audio axes both set audio",
    ):
        assert any(want in line for line in lines), (want, lines)
    with pytest.raises(GridError, match="the select variant 'its' is given twice"):
        build("naru_replay", "", grid(axes=("select=uniform,its,its",)), None)
    with pytest.raises(GridError, match="--ablation transcript needs the transcript source"):
        build("naru_qwen3_vl", "", grid(ablation="transcript"), None)
    with pytest.raises(GridError, match=r"--arms needs --ablation"):
        build("naru_replay", "", grid(arms="frames"), None)


def test_a_bad_value_in_the_last_cell_is_named_before_the_first_runs():
    """Each cell's args go through the adapter's own parser before anything runs."""
    exp = build("naru_replay", "predictions=p.jsonl", grid(variants=("ok:max_frames=8", "bad:max_frames=lots")),
                fields("naru_replay"))  # fmt: skip
    (problem,) = check_cells(exp, adapter_args("naru_replay"))
    assert problem.startswith("bad: naru_replay: max_frames='lots'"), problem


# --------------------------------------------------------------------------- slow: real runs


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


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    t0 = time.monotonic()
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"ended early while waiting for {what}: {proc.stderr.read() if proc.stderr else ''}")
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def run_env(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NARU_", "SLURM_", "OPENAI_"))}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "NARU_DATA_DIR": str(data), "PYTHON": sys.executable}
    )
    env.update({"OPENAI_API_KEY": FAKE_KEY, **extra})
    return env


def naru_eval(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "naru_eval.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def ablation_data(tmp_path_factory):
    """Nine categories x 2 questions over 3 videos with a soundtrack, and a subtitle file each."""
    base = tmp_path_factory.mktemp("experiment")
    data = make_dataset(
        base / "data", SyntheticSpec(counts={c: 2 for c in CATEGORIES}, n_videos=3, seconds=8.0, audio=True)
    )
    subs = base / "subs"
    subs.mkdir()
    videos = sorted({json.loads(line)["video_id"] for line in (data / "annotations.jsonl").read_text().splitlines()})
    for i, vid in enumerate(videos):
        (subs / f"{vid}.srt").write_text(dialogue_srt(8.0, chars_per_s=6.0, seed=i), encoding="utf-8")
    return base, data, subs


N = 18  # questions per cell


def check_arms(out: Path, arms: list[str], env: dict[str, str], modes: dict[str, str]) -> None:
    """Every arm complete (verify-run), its payloads' input mode, and each pair compared per category."""
    for arm in arms:
        v = naru_eval("verify-run", str(out / arm), env=env)
        assert v.returncode == 0, v.stdout + v.stderr
        (log,) = (out / arm).rglob("*_samples_naru_mcq_500.jsonl")
        got = {json.loads(line)["overall"]["input_mode"] for line in log.read_text().splitlines() if line.strip()}
        assert got == {modes[arm]}, (arm, got)
        man = json.loads((out / arm / "manifest.json").read_text())
        assert man["status"] == "done" and man["cell"] == arm and man["usage"]["ok"] == N
    compared = sorted(p.name for p in (out / "compare").glob("*.json"))
    assert len(compared) == 4, compared
    for p in (out / "compare").glob("*.json"):
        report = json.loads(p.read_text())["tasks"]["naru_mcq_500"]
        assert {"C.1", "C.5", "N.1", "overall"} <= {r["metric"] for r in report["rows"]} and report[
            "paired_questions"
        ] == N
    for f in (p for p in out.rglob("*") if p.is_file() and ".sqlite" not in p.name):
        assert FAKE_KEY.encode() not in f.read_bytes(), f


@pytest.mark.slow
def test_the_transcript_ablation_killed_midway_resumes_and_is_compared(ablation_data, tmp_path):
    """`naru-eval experiment run --ablation transcript=SUBS`: killed (SIGKILL, the whole process
    group) while its second arm runs, then run again: the finished arm is skipped, the killed one
    resumes from the store, nothing is asked twice, and the four pairs are compared per category."""
    _base, data, subs = ablation_data
    out = tmp_path / "out"
    with OpenAIStub(responder=letter_for) as stub:
        env = run_env(data)
        cmd = [sys.executable, "-m", "naru_eval.cli", "experiment", "run", "--model", "naru_openai_compat",
               "--model_args", f"model=stub,base_url={stub.base_url},num_frames=4", "--ablation",
               f"transcript={subs}", "--out", str(out), "--quiet"]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # fmt: skip
        try:
            wait_for(lambda: ok_rows(out / "responses.sqlite") >= N + 5, 400, "the second arm half-way", proc)
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        assert json.loads((out / "frames_transcript" / "manifest.json").read_text())["status"] == "running"
        asked = len(stub.chat_requests())
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-4000:]
        assert "arm=frames skip: complete" in p.stderr
        assert len(stub.chat_requests()) == 4 * N  # every question of every arm asked exactly once
        assert asked < 4 * N
    status = naru_eval("experiment", "status", str(out), env=env)
    assert status.returncode == 0 and len(status.stdout.splitlines()) == 4, status.stdout + status.stderr
    modes = {"frames": "images", "frames_transcript": "images+transcript", "transcript": "transcript",
             "control": "images+transcript"}  # fmt: skip
    check_arms(out, list(modes), env, modes)
    man = json.loads((out / "frames_transcript" / "manifest.json").read_text())
    assert man["invocations"] == 2 and man["variants"] == {"transcript": "frames_transcript"}


# --------------------------------------------------------------------------- slow: a real cluster


def logs(root: Path) -> str:
    """The end of every job's log and lmms-eval's, for a failure's message."""
    found = sorted([*root.rglob("slurm/*.out"), *root.rglob("lmms_eval.log")])
    return "\n".join(f"== {p}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-25:]) for p in found)


@pytest.fixture(scope="module")
def cluster():
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with SlurmCluster.start() as c:
        yield c


@pytest.mark.slow
def test_the_audio_and_transcript_ablations_on_a_real_cluster(cluster, ablation_data, tmp_path):
    """`naru-eval sweep submit --ablation audio` and `--ablation transcript=SUBS`: one array task
    per arm, under an output root holding `%j` (kept literal), the audio array cancelled midway and
    the same command submitted again; every arm ends complete, each pair compared by the final
    job, nothing asked twice, no key written."""
    _base, data, subs = ablation_data
    root = tmp_path / "run%j"
    with OpenAIStub(responder=letter_for, models=[OMNI, "stub"], owner="vllm", max_model_len=64_000,
                    hold_after=N + 5) as stub:  # fmt: skip
        env = run_env(data, **cluster.env)
        common = ["sweep", "submit", "--repo", str(ROOT), "--max-parallel", "1", "--model", "naru_openai_compat",
                  "--label", "api", "--leaderboard-arg=--no-plots", "--leaderboard-arg=--reps=200"]  # fmt: skip
        audio = [*common, "--model_args", f"model={OMNI},base_url={stub.base_url},num_frames=4", "--out",
                 str(root / "audio"), "--ablation", "audio"]  # fmt: skip
        # a served model without a family of its own: frames as images, the cues between them
        text = [*common, "--model_args", f"model=stub,base_url={stub.base_url},num_frames=4", "--out",
                str(root / "transcript"), "--ablation", f"transcript={subs}"]  # fmt: skip
        p = naru_eval(*audio, env=env)
        assert p.returncode == 0, p.stderr
        (job,) = re.findall(r"array job (\d+)", p.stdout)
        (board,) = re.findall(r"leaderboard: job (\d+)", p.stdout)
        store = root / "audio" / "api" / "frames_audio" / "responses.sqlite"
        wait_for(lambda: ok_rows(store) >= 5 and bool(stub.held()), 600, "the second arm half-way")
        cluster.run("scancel", job)
        states = cluster.wait(job, timeout=120)
        assert states["0"] == "COMPLETED" and states["1"] == "CANCELLED", states
        assert cluster.wait(board, timeout=60) == {"0": "CANCELLED"}
        stub.release()
        wait_for(lambda: not stub.held(), 60, "the held requests to end")
        stub.hold_after = None
        asked_before = len(stub.chat_requests())  # the held requests were never answered: asked again
        assert ok_rows(store) == 5
        p = naru_eval(*audio, env=env)
        assert p.returncode == 0, p.stderr
        (job,) = re.findall(r"array job (\d+)", p.stdout)
        (board,) = re.findall(r"leaderboard: job (\d+)", p.stdout)
        q = naru_eval(*text, env=env)
        assert q.returncode == 0, q.stderr
        (tjob,) = re.findall(r"array job (\d+)", q.stdout)
        (tboard,) = re.findall(r"leaderboard: job (\d+)", q.stdout)
        for j in (job, tjob):
            assert set(cluster.wait(j, timeout=900).values()) == {"COMPLETED"}, logs(root)
        for b in (board, tboard):
            assert cluster.wait(b, timeout=300) == {"0": "COMPLETED"}
        # after the resubmission only what no store held: 13 of frames_audio, two arms more, four transcript arms
        assert len(stub.chat_requests()) - asked_before == (N - 5) + 2 * N + 4 * N
    audio_modes = {"frames": "video", "frames_audio": "video+audio", "audio": "audio", "control": "video+audio"}
    check_arms(root / "audio" / "api", list(audio_modes), env, audio_modes)
    text_modes = {"frames": "images", "frames_transcript": "images+transcript", "transcript": "transcript",
                  "control": "images+transcript"}  # fmt: skip
    check_arms(root / "transcript" / "api", list(text_modes), env, text_modes)
    assert json.loads((root / "audio" / "api" / "frames_audio" / "manifest.json").read_text())["invocations"] == 2
    for sub in ("audio", "transcript"):
        lb = json.loads((root / sub / "leaderboard.json").read_text())
        assert len([e for e in lb["entries"] if not e["published"]]) == 4 and not lb["errors"]
        task_logs = [p.read_text() for p in (root / sub / "api" / "slurm").glob("*.out")]
        assert len(task_logs) >= 4 and all("frame_sweep.slurm: job" in t for t in task_logs)  # under --out
        assert sum("arm=frames" in t and "invoke" in t for t in task_logs) >= 1  # the driver's lines too
