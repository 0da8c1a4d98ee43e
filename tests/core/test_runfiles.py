"""The one check of a run (naru_eval/core/runfiles.py), on run folders written here as lmms-eval
writes them: complete only when every sample log parses, holds one line per question and its
metrics recompute; the runner, verify-run, the sweep and the leaderboard share it. (The same check
on real lmms-eval runs, a full disk included: tests/lmms/test_run_complete.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from naru_eval.core.runfiles import (
    ResultsFile,
    RunConfig,
    read_log,
    run_problems,
    task_problems,
    verify_run,
)
from naru_eval.judge.score import JudgedSample, metrics_from_open_log, open_payloads
from tests.helpers.runs import STAMP, write_run


def problems(rf: Path, **kw) -> list[str]:
    return run_problems(rf, open_metrics=metrics_from_open_log, **kw)


def test_a_complete_run_and_its_results_file(tmp_path):
    rf, log = write_run(tmp_path)
    assert problems(rf) == [] and verify_run(tmp_path, metrics_from_open_log) == []
    res = ResultsFile.read(rf)
    assert res.sample_logs() == {"naru_mcq": log} and res.evaluated == ["naru_mcq"]
    assert res.config == RunConfig("naru_replay", "predictions=p.jsonl,num_frames=8")
    assert res.n_samples("naru_mcq") == (18, 18)
    # the payloads record no sampling: the one fallback, labelled as read from model_args
    assert read_log(log).sampling(res.config) == "8 Frames (model_args)"
    assert "accuracy_stderr_clustered" not in res.reported("naru_mcq")  # standard errors are not metrics
    data = json.loads(rf.read_text())
    data["results"]["naru_mcq"]["overall,none"] = float("nan")  # NaN is no value: the log gives one
    rf.write_text(json.dumps(data))
    assert ResultsFile.read(rf).reported("naru_mcq")["overall"] is None
    assert problems(rf) == [f"{log}: overall do not recompute from the sample log"]


def test_a_cut_a_short_and_an_altered_log_are_named(tmp_path):
    rf, log = write_run(tmp_path)
    data = log.read_bytes()
    log.write_bytes(data[:-50])  # a full disk cuts the last line: the line count still matches
    (cut,) = problems(rf)
    assert cut.startswith(f"{log}:18: not a JSON line (cut short: was the disk full?): ")
    lines = data.decode().splitlines(keepends=True)
    log.write_text("".join(lines[:12]))
    assert problems(rf) == [f"{log}: 12 line(s), expected one per question: 18"]
    recs = [json.loads(line) for line in lines]
    recs[0]["overall"]["correct"] = not recs[0]["overall"]["correct"]  # changed after scoring
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (problem,) = problems(rf)
    assert problem.startswith(f"{log}: ") and "do not recompute from the sample log" in problem
    log.unlink()
    assert problems(rf) == [f"{rf}: naru_mcq: no sample log (run lmms-eval with --log_samples)"]


def test_tasks_asked_for_and_full_runs(tmp_path):
    """The sweep and the leaderboard ask for named tasks and every question of them (no --limit)."""
    rf, _ = write_run(tmp_path, original=20)
    assert problems(rf) == []  # the runner: the run did what it was asked
    (limited,) = problems(rf, tasks=["naru_mcq"], full=True)
    assert limited == f"{rf}: naru_mcq: 18 of the task's 20 questions evaluated (n-samples; --limit?)"
    assert task_problems(ResultsFile.read(rf), "naru_mcq", full=True) == [limited]
    (missing,) = problems(rf, tasks=["naru_open"])
    assert missing == f"{rf}: naru_open: not in the results file's n-samples (lmms-eval did not evaluate it)"
    data = json.loads(rf.read_text())
    data["group_subtasks"] = {"naru": ["naru_mcq"]}
    rf.write_text(json.dumps(data))
    assert problems(rf, tasks=["naru"]) == []  # a group is its tasks


def test_an_open_log_recomputes_with_the_judges_tally_and_a_foreign_log_is_not_checked(tmp_path):
    js = [JudgedSample(f"q{i}", "v1", "N.1", "narrative", "q", "r", "a", "scored", recall=i / 4) for i in range(4)]
    log = tmp_path / f"{STAMP}_samples_naru_open.jsonl"
    log.write_text("".join(json.dumps({"doc_id": i, **open_payloads(s)}) + "\n" for i, s in enumerate(js)))
    rf = tmp_path / f"{STAMP}_results.json"
    results = {"results": {"naru_open": {"overall,none": 0.375}}, "n-samples": {"naru_open": {"effective": 4}}}
    rf.write_text(json.dumps(results))
    assert problems(rf) == []
    with pytest.raises(TypeError, match="judge's tally"):
        read_log(log).metrics()  # core never guesses an open log's metrics without the judge
    results["results"]["naru_open"]["overall,none"] = 0.9
    rf.write_text(json.dumps(results))
    assert problems(rf) == [f"{log}: overall do not recompute from the sample log"]
    # a task of another benchmark in the same run: its lines are checked, its numbers are lmms-eval's
    other = tmp_path / f"{STAMP}_samples_mmmu.jsonl"
    other.write_text('{"doc_id": 0, "acc": 1}\n')
    results["results"] = {"mmmu": {"acc,none": 0.5}}
    results["n-samples"] = {"mmmu": {"effective": 1}}
    rf.write_text(json.dumps(results))
    assert problems(rf) == []


def test_an_unreadable_results_file_and_a_folder_without_one(tmp_path):
    rf = tmp_path / f"{STAMP}_results.json"
    rf.write_text('{"results": ')
    (problem,) = problems(rf)
    assert problem.startswith(f"{rf}: unreadable results file (")
    rf.write_text("[]")
    assert problems(rf) == [f"{rf}: not an lmms-eval results file (a JSON list)"]
    rf.write_text("{}")
    assert problems(rf) == [f"{rf}: no task was evaluated (no n-samples)"]
    assert verify_run(tmp_path / "empty", metrics_from_open_log) == [f"{tmp_path / 'empty'}: no results file"]


def test_the_judge_a_task_config_names():
    """``metadata.judge`` first, then ``metadata.judge_model``, then the config's ``judge``; none: None."""
    configs = {
        "a": {"metadata": {"judge": "gpt-5.5", "judge_model": "x"}, "judge": "y"},
        "b": {"metadata": {"judge_model": "gpt-4.1"}, "judge": "y"},
        "c": {"metadata": {"version": 2}, "judge": "offline:minilm"},
        "d": {"metadata": {"judge": ""}},
    }
    res = ResultsFile(Path("x_results.json"), {"configs": configs})
    assert [res.task_judge(t) for t in ("a", "b", "c", "d", "missing")] == [
        "gpt-5.5",
        "gpt-4.1",
        "offline:minilm",
        None,
        None,
    ]
