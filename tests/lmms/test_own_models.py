"""lmms-eval's own models on the NARU tasks, from a plain install: ``lmms-eval --model qwen2_5_vl``
(lmms-eval's Qwen2.5-VL, its own frame sampler through qwen-vl-utils and decord) on a tiny
checkpoint. The run is complete (``naru-eval verify-run``), and the leaderboard marks it as
sampled by the model itself, apart from every run of naru-eval's exact sampler."""

from __future__ import annotations

import json
import platform

import pytest

from naru_eval.cli.main import main
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.lmms.run import run_lmms_eval
from naru_eval.report.leaderboard import build_leaderboard
from tests.helpers.data import read_jsonl
from tests.helpers.tiny_models import build_qwen2_5_vl

pytestmark = pytest.mark.slow


def test_lmms_evals_own_qwen2_5_vl_runs_and_is_marked_as_its_own_sampler(tmp_path, capsys):
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.importorskip("decord", reason="decord 0.6.0 has wheels for x86-64 only (pyproject.toml)")
    import decord  # noqa: F401  (a plain install has it: lmms-eval's video models import it)

    ckpt = build_qwen2_5_vl(tmp_path / "qwen")
    # decord 0.6.0 reads frames whose width is a multiple of 32 only (48 px: "size must exactly match")
    data = make_dataset(tmp_path / "data", SyntheticSpec(counts={"N.1": 1, "C.1": 1}, n_videos=1, size=(64, 64)))
    out = tmp_path / "out"
    run = run_lmms_eval(
        "qwen2_5_vl", f"pretrained={ckpt},device=cpu,device_map=cpu,max_num_frames=4", ["naru_mcq"], out,
        env={"NARU_DATA_DIR": str(data)}, timeout=900,
    )  # fmt: skip
    assert run.ok, run.stderr[-5000:]
    assert main(["verify-run", str(out)]) == 0 and "complete" in capsys.readouterr().out
    # no naru-eval adapter ran: the payloads carry the provenance fields, all null
    for line in read_jsonl(run.sample_files["naru_mcq"]):
        p = line["overall"]
        assert all(p[k] is None for k in ("adapter", "input_mode", "positions", "sampling", "variant")), p

    # a run of ours on the same data and checkpoint name (replayed answers): never one entry with it
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"question_id": r["question_id"], "response": "A"}) + "\n"
                             for r in read_jsonl(data / "annotations.jsonl")))  # fmt: skip
    ours = run_lmms_eval(
        "naru_replay", f"predictions={preds},pretrained={ckpt}", ["naru_mcq"], tmp_path / "ours",
        env={"NARU_DATA_DIR": str(data)},
    )  # fmt: skip
    assert ours.ok, ours.stderr[-5000:]
    lb = build_leaderboard([out, tmp_path / "ours"], reps=20)
    assert not lb.errors and not lb.data["conflicts"] and not lb.data["duplicates"], lb.errors
    own = next(e for e in lb.data["entries"] if e["run"]["adapter"] == "qwen2_5_vl")
    mine = next(e for e in lb.data["entries"] if e["run"]["adapter"] == "naru_replay")
    assert (own["sampling"], own["input_mode"]) == ("model's own sampler", "model-sampled")
    assert own["id"] != mine["id"] and mine["sampling"] != own["sampling"]
    assert any("sampled its frames itself" in w for w in lb.warnings)
