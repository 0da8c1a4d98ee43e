"""``scripts/gpu_check.sh --dry-run`` (issue 14) passes with no GPU: every real-size config builds
on the meta device with the expected parameter count and the processor's video tokens match it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_dry_run(tmp_path):
    out = tmp_path / "gpu_check.json"
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--dry-run", "--out", str(out), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    result = json.loads(out.read_text())
    assert result["dry_run"] is True
    fams = {f["family"]: f for f in result["families"]}
    assert set(fams) == {"naru_qwen2_5_vl", "naru_qwen3_vl", "naru_internvl3_5"}
    for f in fams.values():
        assert f["ok"] and all(f["checks"].values()), f
    # the real sizes: Qwen2.5-VL-7B 8.29 B, Qwen3-VL-8B 8.77 B, InternVL3.5-8B 8.53 B parameters
    assert round(fams["naru_qwen2_5_vl"]["params_b"], 1) == 8.3
    assert round(fams["naru_qwen3_vl"]["params_b"], 1) == 8.8
    assert round(fams["naru_internvl3_5"]["params_b"], 1) == 8.5


def test_gpu_path_runs_at_toy_size_on_cpu(tmp_path):
    """``--tiny``: the script's GPU path (build, shared vs per question, the JSON) on the CPU."""
    out = tmp_path / "tiny.json"
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--tiny", "--questions", "2", "--families", "qwen2_5_vl"]
        + ["--out", str(out), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    (fam,) = json.loads(out.read_text())["families"]
    assert fam["family"] == "naru_qwen2_5_vl" and fam["identical_answers"] is True
    assert fam["shared"]["prefix_prefills"] == 1 and fam["per_question"]["prefix_prefills"] == 2
    assert fam["shared"]["prefill_tokens"] < fam["per_question"]["prefill_tokens"]
    assert fam["shared"]["frames"] == 8 and fam["shared"]["s_per_question"] > 0
