"""The one run reader (naru_eval/report/runs.py): discovery, the typed RunLog, every NARU log kind
read through the one strict payload reader, and the provenance the payloads carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from naru_eval.core.data import CATEGORIES, NaruQuestion
from naru_eval.core.runfiles import RunConfig
from naru_eval.core.scoring import ForeignLogError, SampleLogError, compute_metrics, metric_payloads, score_response
from naru_eval.core.variants import blind_payloads, circular_payloads, rotate_question
from naru_eval.report.runs import discover, latest, read_log

OPTS = ("red", "green", "blue", "white")
QS = [NaruQuestion(f"q{i}", f"v{i % 3}", CATEGORIES[i % 9], "?", OPTS, "ABCD"[i % 4]) for i in range(12)]
PROV = {
    "adapter": "naru_qwen2_5_vl", "input_mode": "video", "positions": "qwen-reference", "sampling": "32 Frames",
    "variant": "",
}  # fmt: skip


def write(folder: Path, stamp: str, task: str, lines: list[dict], config: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{stamp}_samples_{task}.jsonl"
    log.write_text("".join(json.dumps({"doc_id": i, **x}) + "\n" for i, x in enumerate(lines)), encoding="utf-8")
    if config is not None:
        results = {"results": {task: {"overall,none": 1.0}}, "config": config}
        (folder / f"{stamp}_results.json").write_text(json.dumps(results), encoding="utf-8")
    return log


def test_discovery_pairs_logs_with_results_and_keeps_the_latest(tmp_path):
    samples = [score_response(q, q.answer, "fp1", provenance=PROV) for q in QS]
    cfg = {"model": "naru_qwen2_5_vl", "model_args": "pretrained=Qwen/Qwen2.5-VL-7B-Instruct,num_frames=32"}
    write(tmp_path / "m", "20260102_000000", "naru_mcq", [metric_payloads(s) for s in samples], cfg)
    write(tmp_path / "m", "20260101_000000", "naru_mcq", [metric_payloads(s) for s in samples], cfg)
    write(tmp_path / "m", "20260103_000000", "naru_mcq_blind", [blind_payloads(s) for s in samples])
    found = discover([tmp_path])
    assert [(r.task, r.stamp) for r in found.runs] == [  # by results file (else by the log itself)
        ("naru_mcq", "20260101_000000"),
        ("naru_mcq", "20260102_000000"),
        ("naru_mcq_blind", "20260103_000000"),
    ]
    assert [r.results is None for r in found.runs] == [False, False, True]
    assert len(found.results) == 2 and all(res is not None for res, _, _ in found.results.values())
    kept, superseded = latest(found.runs)
    assert sorted((r.task, r.stamp) for r in kept) == [
        ("naru_mcq", "20260102_000000"),
        ("naru_mcq_blind", "20260103_000000"),
    ]
    assert len(superseded) == 1 and "20260101_000000" in superseded[0]
    run = next(r for r in kept if r.task == "naru_mcq")
    assert run.config == RunConfig("naru_qwen2_5_vl", cfg["model_args"])
    assert run.config.label() == "Qwen/Qwen2.5-VL-7B-Instruct" and (run.sampling, run.variant) == ("32 Frames", "")
    assert (run.data_fingerprint, run.adapter, run.input_mode, run.positions) == (
        "fp1", "naru_qwen2_5_vl", "video", "qwen-reference",
    )  # fmt: skip
    assert run.reported == {"overall": 1.0}
    log = run.read()
    assert log.kind == "plain" and log.metrics() == compute_metrics(samples)
    assert next(r for r in kept if r.task == "naru_mcq_blind").read().kind == "blind"
    with pytest.raises(FileNotFoundError, match="no such file"):
        discover([tmp_path / "missing"])


def test_every_log_kind_reads_through_the_one_strict_reader(tmp_path):
    circ = []
    for q in QS[:3]:
        for k in range(4):
            rq = rotate_question(q, k)
            circ.append(circular_payloads(score_response(rq, rq.answer), q.question_id, k))
    log = read_log(write(tmp_path, "s", "naru_mcq_500_circular", circ))
    assert log.kind == "circular" and log.metrics()["circular"] == 100.0 and len(log.records) == 12

    from naru_eval.judge.score import JudgedSample, open_payloads

    js = [JudgedSample(f"q{i}", "v1", "N.1", "narrative", "q", "r", "a", "scored", recall=0.5) for i in range(2)]
    log = read_log(write(tmp_path, "s", "naru_open", [open_payloads(s) for s in js]))
    assert log.kind == "open" and log.metrics()["overall"] == 0.5
    with pytest.raises(SampleLogError, match="not a NARU MCQ sample log"):
        _ = log.samples
    with pytest.raises(ForeignLogError, match=r"mmmu\.jsonl:1: no NARU 'overall' payload"):
        read_log(write(tmp_path, "s", "mmmu", [{"acc": 1}]))


def test_the_sampling_variant_and_input_mode_come_from_the_payloads(tmp_path):
    """What a run did is read from its payloads (what the adapter recorded), never re-guessed from
    ``model_args``: the recorded sampling and variant; a log with the provenance fields but no
    adapter is a model that sampled its frames itself; a log whose payloads record no sampling
    falls back once to an explicit num_frames= of model_args, labelled as such, else says so."""
    from naru_eval.core import provenance

    cfg = RunConfig("naru_gemini", "model=gemini-3-flash,num_frames=64")  # its args never decide the label
    provenance.clear()
    try:
        provenance.record(
            adapter="naru_gemini",
            input_mode="video",
            sampling="0.25 FPS",
            variant=provenance.variant_string({"audio": False}),
        )
        recorded = [score_response(q, q.answer, "fp", provenance=provenance.current()) for q in QS]
    finally:
        provenance.clear()
    log = read_log(write(tmp_path / "a", "s", "naru_mcq", [metric_payloads(s) for s in recorded]))
    assert (log.sampling(cfg), log.variant, log.input_mode, log.own_sampler) == (
        "0.25 FPS",
        "audio=false",
        "video",
        False,
    )

    # lmms-eval's own model: the payloads carry the provenance fields, all null
    own = [score_response(q, q.answer, "fp") for q in QS]
    log = read_log(write(tmp_path / "b", "s", "naru_mcq", [metric_payloads(s) for s in own]))
    assert (log.sampling(RunConfig("qwen2_5_vl", "pretrained=x")), log.input_mode) == (
        "model's own sampler", "model-sampled",
    )  # fmt: skip
    assert log.own_sampler and log.variant == ""

    # a log written before the sampling was recorded (no provenance keys at all)
    old = [
        {k: v for k, v in metric_payloads(s)["overall"].items() if k not in ("sampling", "variant")} for s in recorded
    ]
    log = read_log(write(tmp_path / "c", "s", "naru_mcq", [{"overall": p} for p in old]))
    assert not log.records_provenance and not log.own_sampler and log.input_mode == "video"
    assert log.sampling(cfg) == "64 Frames (model_args)"
    assert log.sampling(RunConfig("naru_gemini", "model=gemini-3-flash")) == "not recorded"
