"""The done-when run of frame selection: ``lmms-eval --model naru_qwen3_vl --model_args
pretrained=<tiny>,select=its,select_encoder=<tiny encoder>,num_frames=8 --tasks naru_mcq``
completes, ``naru-eval verify-run`` accepts it, every payload records the selector and the times of
the frames chosen for its question, and the leaderboard lists it apart from the uniform run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.lmms.run import run_lmms_eval
from naru_eval.media.index import frame_index, index_duration
from tests.helpers.colour_encoder import build_colour_encoder
from tests.helpers.data import read_jsonl
from tests.helpers.tiny_models import build_qwen3_vl

pytestmark = pytest.mark.slow


def test_its_on_qwen3_vl_end_to_end(tmp_path):
    data = make_dataset(tmp_path / "data", SyntheticSpec(counts={c: 1 for c in CATEGORIES}, n_videos=2, seconds=24.0))
    ckpt = build_qwen3_vl(tmp_path / "ckpt")
    encoder = build_colour_encoder(tmp_path / "colour-siglip")
    env = {
        "NARU_DATA_DIR": str(data),
        "NARU_RESPONSE_STORE": str(tmp_path / "store.sqlite"),
        "NARU_SELECT_CACHE": str(tmp_path / "pools"),
    }
    base = f"pretrained={ckpt},num_frames=8,device=cpu,max_new_tokens=4"
    runs = {}
    for name, extra in (("uniform", ""), ("its", f",select=its,select_encoder={encoder}")):
        runs[name] = run_lmms_eval("naru_qwen3_vl", base + extra, ["naru_mcq"], tmp_path / name, env=env, timeout=600)
        assert runs[name].ok, (runs[name].stdout + runs[name].stderr)[-6000:]
        verify = subprocess.run(
            [sys.executable, "-m", "naru_eval.cli", "verify-run", str(tmp_path / name)], capture_output=True, text=True
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr

    uniform, its = (read_jsonl(runs[k].sample_files["naru_mcq"]) for k in ("uniform", "its"))
    assert len(its) == len(uniform) == 9
    for s in uniform:
        assert s["overall"].get("selection") is None and s["overall"].get("frame_times") is None
    for s in its:
        p = s["overall"]
        assert p["selection"].startswith("its(pool_fps=1, encoder=colour-siglip@") and "alpha=3" in p["selection"]
        times = [float(t) for t in p["frame_times"].split(",")]
        video = data / "videos" / f"{p['video_id']}.mp4"
        duration = index_duration(video, frame_index(video))
        assert len(times) == 8 and times == sorted(times) and 0 <= times[0] and times[-1] < duration
    board = subprocess.run(
        [sys.executable, "-m", "naru_eval.cli", "leaderboard", str(tmp_path / "uniform"), str(tmp_path / "its"),
         "-o", str(tmp_path / "board.json")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert board.returncode == 0, board.stdout + board.stderr
    md = (tmp_path / "board.md").read_text(encoding="utf-8")
    rows = [line for line in md.splitlines() if "naru_qwen3_vl" in line or "ckpt" in line]
    assert any("8 Frames, its(" in r for r in rows) and any("| 8 Frames |" in r for r in rows), md
