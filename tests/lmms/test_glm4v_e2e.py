"""Issue 34's done-when for GLM-4.1V: ``lmms-eval --model naru_glm4v --tasks naru_mcq`` on the tiny
scripted GLM-4.1V-Thinking (``<think>A</think><answer>C</answer>``) completes, ``naru-eval
verify-run`` accepts it, and every question's letter is the one inside ``<answer>`` (C), never the
reasoning's (A); with a token budget that cuts the reasoning every answer is invalid and counted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.lmms.run import run_lmms_eval
from tests.helpers.data import read_jsonl
from tests.helpers.tiny_models import GLM_SCRIPT, build_glm4v

pytestmark = pytest.mark.slow


def test_glm4v_runs_naru_mcq_to_a_verified_run(tmp_path):
    data = make_dataset(tmp_path / "data", SyntheticSpec(counts={c: 1 for c in CATEGORIES}, n_videos=2, seconds=6.0))
    ckpt = build_glm4v(tmp_path / "glm")
    env = {"NARU_DATA_DIR": str(data), "NARU_RESPONSE_STORE": str(tmp_path / "store.sqlite")}
    whole = len(GLM_SCRIPT) + 2  # the scripted completion fits
    for name, budget in (("whole", whole), ("cut", 2)):
        run = run_lmms_eval(
            "naru_glm4v", f"pretrained={ckpt},num_frames=4,device=cpu,max_new_tokens={budget}", ["naru_mcq"],
            tmp_path / name, env=env, timeout=600,
        )  # fmt: skip
        assert run.ok, (run.stdout + run.stderr)[-6000:]
        verify = subprocess.run(
            [sys.executable, "-m", "naru_eval.cli", "verify-run", str(tmp_path / name)], capture_output=True, text=True
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        samples = [s["overall"] for s in read_jsonl(run.sample_files["naru_mcq"])]
        assert len(samples) == len(CATEGORIES)
        metrics = run.results()["results"]["naru_mcq"]
        if name == "whole":
            assert {s["pred"] for s in samples} == {"C"} and all(s["valid"] for s in samples)
            gold_c = sum(s["gold"] == "C" for s in samples)
            assert metrics["accuracy,none"] == pytest.approx(100 * gold_c / len(samples))
            assert metrics["invalid_rate,none"] == 0
        else:  # the budget ends inside <think>: nothing is read from the reasoning
            assert all(s["pred"] is None and not s["valid"] for s in samples)
            assert metrics["invalid_rate,none"] == 100
