"""The selection ablation through the one experiment driver: uniform, random and a selector at the
same budget on ``naru_mcq_500``, each selector paired with uniform question by question and per
category (the narrative and cultural categories apart), with no driver code of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from tests.helpers.colour_encoder import build_colour_encoder
from tests.helpers.tiny_models import build_qwen3_vl

pytestmark = pytest.mark.slow


def test_uniform_random_and_its_are_paired_per_category(tmp_path):
    spec = SyntheticSpec(counts={c: 2 for c in CATEGORIES}, n_videos=2, seconds=24.0, subset_flags=True)
    data = make_dataset(tmp_path / "data", spec)
    ckpt = build_qwen3_vl(tmp_path / "ckpt")
    encoder = build_colour_encoder(tmp_path / "colour-siglip")
    out = tmp_path / "ablation"
    cmd = [
        sys.executable, "-m", "naru_eval.cli", "experiment", "run", "--model", "naru_qwen3_vl",
        "--model_args", f"pretrained={ckpt},device=cpu,max_new_tokens=4", "--budgets", "8",
        "--variant", "uniform:select=uniform", "--variant", "random:select=random",
        "--variant", f"its:select=its,select_encoder={encoder}", "--out", str(out),
    ]  # fmt: skip
    env = {
        **os.environ,
        "NARU_DATA_DIR": str(data),
        "NARU_RESPONSE_STORE": str(tmp_path / "store.sqlite"),
        "NARU_SELECT_CACHE": str(tmp_path / "pools"),
    }
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    for cell in ("f8-uniform", "f8-random", "f8-its"):
        manifest = json.loads((out / cell / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["status"] == "done", manifest
    compared = sorted(p.name for p in (out / "compare").glob("*.json"))
    assert compared == ["naru_mcq_500_f8-uniform_vs_f8-its.json", "naru_mcq_500_f8-uniform_vs_f8-random.json"]
    report = json.loads((out / "compare" / compared[0]).read_text(encoding="utf-8"))
    (task,) = report["tasks"].values()
    rows = {r["metric"]: r for r in task["rows"]}
    subset = [json.loads(line) for line in (data / "annotations.jsonl").read_text(encoding="utf-8").splitlines()]
    subset = [q for q in subset if q.get("subset_500")]
    assert task["paired_questions"] == len(subset) > 0 and not task["across_inputs"]  # a frames ablation
    assert {*NARRATIVE, *CULTURAL, "narrative", "cultural", "overall"} <= set(rows)
    for c in (*NARRATIVE, *CULTURAL):  # each category paired on its own questions
        assert rows[c]["n"] == sum(q["category"] == c for q in subset), c
