"""What audio is worth, end to end on a tiny checkpoint: ``scripts/audio_ablation.sh`` runs the real
``lmms-eval`` console script with ``naru_qwen2_5_omni`` four times on ``naru_mcq_500`` (frames,
frames + audio, audio only, the control with another video's audio), over synthetic videos with a
soundtrack, then compares the arms and builds the leaderboard. The numbers are those of random
weights; what is tested is the chain: every run complete (``naru-eval verify-run``), each arm its
own leaderboard entry with its input mode and variant, each comparison paired per category,
every answer's record of what it heard in the response store."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from tests.helpers.tiny_models import build_qwen2_5_omni

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ARMS = {
    "frames": ("video", "audio=false"),
    "frames_audio": ("video+audio", ""),
    "audio": ("audio", "video=false"),
    "control": ("video+audio", "audio_source=other"),
}


@pytest.fixture(scope="module")
def ablation(tmp_path_factory):
    root = tmp_path_factory.mktemp("audio_ablation")
    data = make_dataset(
        root / "data",
        SyntheticSpec(counts={c: 2 for c in CATEGORIES}, n_videos=3, seconds=8.0, audio=True, subset_flags=True),
    )
    ckpt = build_qwen2_5_omni(root / "ckpt")
    out = root / "out"
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "NARU_DATA_DIR": str(data),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHON": sys.executable,
    }
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "audio_ablation.sh"),
            "--model",
            "naru_qwen2_5_omni",
            "--model_args",
            f"pretrained={ckpt},num_frames=4,device=cpu,max_new_tokens=4",
            "--out",
            str(out),
            "--label",
            "tiny-omni",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    return proc, out


def test_every_arm_is_complete_and_its_own_entry(ablation):
    proc, out = ablation
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-8000:]
    for arm in ARMS:
        check = subprocess.run(
            [sys.executable, "-m", "naru_eval.cli", "verify-run", str(out / arm)], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout + check.stderr
    board = json.loads((out / "leaderboard.json").read_text())
    rows = [e for e in board["entries"] if e["task"] == "naru_mcq_500" and not e["published"]]
    got = sorted((e["input_mode"], e.get("variant") or "") for e in rows)
    # the variant: the arm's args and the run's own max_new_tokens=4, sorted
    want = [(m, ",".join(sorted(filter(None, [v, "max_new_tokens=4"])))) for m, v in ARMS.values()]
    assert got == sorted(want), got
    assert all(e["model"].startswith("tiny-omni") for e in rows)


def test_the_arms_are_paired_per_category(ablation):
    _, out = ablation
    for name in ("frames_vs_frames_audio", "audio_vs_frames", "audio_vs_frames_audio", "control_vs_frames_audio"):
        report = json.loads((out / "compare" / f"naru_mcq_500_{name}.json").read_text())["tasks"]["naru_mcq_500"]
        cats = {row["metric"] for row in report["rows"]}
        assert {"C.1", "C.5", "overall"} <= cats, (name, cats)
        assert report["paired_questions"] > 0
        assert report["across_inputs"] == (name != "control_vs_frames_audio")


def test_each_answer_records_what_it_heard(ablation):
    _, out = ablation
    rows = sqlite3.connect(out / "responses.sqlite").execute("SELECT status, usage FROM responses").fetchall()
    usages = [json.loads(u) for s, u in rows if s == "ok"]
    heard = [u["audio"] for u in usages if "audio" in u]
    assert heard and all(a["tokens"] > 0 and 0 < a["coverage"] <= 1 for a in heard)
    assert any("from_video" in a for a in heard)  # the control's answers heard another video
    assert any("audio" not in u and u["frames"] == 4 for u in usages)  # the frames-only arm


def test_each_payload_says_what_its_question_heard(ablation):
    _, out = ablation
    for arm, (mode, _) in ARMS.items():
        (log,) = (out / arm).rglob("*_samples_naru_mcq_500.jsonl")
        payloads = [json.loads(line)["overall"] for line in log.read_text().splitlines() if line.strip()]
        assert payloads and all(p["input_mode"] == mode for p in payloads)
        heard = [p.get("audio") for p in payloads]
        if arm == "frames":
            assert all(h is None for h in heard)
        else:
            assert all(h and h.startswith(("full:", "windows of")) and "% of the video" in h for h in heard), heard
        if arm == "control":
            assert all(", from " in h for h in heard)
