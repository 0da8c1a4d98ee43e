"""The blind and circular task variants through the real ``lmms-eval`` console script.

Two lmms-eval runs into one output directory (one "model", as ``naru-eval diagnose`` pairs
them): ``naru_mcq_500`` + ``naru_mcq_500_circular`` answered from one predictions file, and the
``naru_blind_tasks`` tag (``naru_mcq_blind``, ``naru_mcq_500_blind``) from another. lmms-eval
exits 0 on failures, so every assertion is on the files it wrote.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from naru_eval.cli.main import main as cli_main
from naru_eval.core.data import LETTERS
from naru_eval.core.scoring import METRICS, metrics_from_samples_log
from naru_eval.core.variants import CIRCULAR_METRICS, circular_metrics, rotate_letter, rotated_id
from naru_eval.lmms.run import run_lmms_eval
from naru_eval.report.diagnostics import read_records
from tests.helpers.data import read_jsonl, write_jsonl
from tests.helpers.expected import expected_metrics, make_predictions

pytestmark = pytest.mark.slow

#: Per-question circular patterns: which rotations are answered right (None: invalid answer).
PATTERNS = {
    "all": (True, True, True, True),
    "three": (True, True, True, False),
    "r0_only": (True, False, False, False),
    "none": (False, False, False, False),
    "invalid": (True, None, True, True),
    "late": (False, True, True, True),
}


def wrong(letter: str) -> str:
    return LETTERS[(LETTERS.index(letter) + 2) % 4]


def circular_predictions(annotations: Path) -> tuple[list[dict], dict[str, tuple[str, ...]], dict]:
    """Rows for ``<qid>#r<k>``; the intended (pred letter or None) per rotated doc; patterns."""
    rows, intended, pattern_of = [], {}, {}
    names = list(PATTERNS)
    styles = ["{L}", "({L})", "The answer is {L}.", "答えは{L}です。"]
    for i, rec in enumerate(read_jsonl(annotations)):
        name = names[i % len(names)]
        pattern_of[rec["question_id"]] = name
        for k, ok in enumerate(PATTERNS[name]):
            gold = rotate_letter(rec["answer"], k)
            letter = None if ok is None else (gold if ok else wrong(gold))
            text = "I cannot tell from the video." if letter is None else styles[(i + k) % 4].format(L=letter)
            rid = rotated_id(rec["question_id"], k)
            intended[rid] = letter
            rows.append({"question_id": rid, "response": text})
    return rows, intended, pattern_of


@pytest.fixture(scope="module")
def variant_runs(small_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("variants")
    ann = small_data / "annotations.jsonl"
    env = {"NARU_DATA_DIR": str(small_data)}
    out = tmp / "out"

    video_preds = tmp / "video_preds.jsonl"
    video_intended = make_predictions(ann, video_preds, seed=11)
    circ_rows, circ_intended, patterns = circular_predictions(ann)
    write_jsonl(video_preds, read_jsonl(video_preds) + circ_rows)
    video = run_lmms_eval(
        "naru_replay", f"predictions={video_preds}", ["naru_mcq_500", "naru_mcq_500_circular"], out, env=env
    )
    assert video.ok, video.stderr[-5000:]

    blind_preds = tmp / "blind_preds.jsonl"
    blind_intended = make_predictions(ann, blind_preds, seed=12)
    blind = run_lmms_eval("naru_replay", f"predictions={blind_preds}", ["naru_blind_tasks"], out, env=env)
    assert blind.ok, blind.stderr[-5000:]
    assert blind.results_file.name != video.results_file.name
    return {
        "data": small_data,
        "out": out,
        "video": video,
        "blind": blind,
        "video_intended": video_intended,
        "blind_intended": blind_intended,
        "circ_intended": circ_intended,
        "patterns": patterns,
        "tmp": tmp,
    }


def test_circular_task_metrics_exact(variant_runs):
    ann = variant_runs["data"] / "annotations.jsonl"
    gold = {r["question_id"]: r["answer"] for r in read_jsonl(ann)}
    run = variant_runs["video"]
    intended, patterns = variant_runs["circ_intended"], variant_runs["patterns"]
    n_q = len(gold)  # 36 questions: the subset is all of them
    assert run.results()["n-samples"]["naru_mcq_500_circular"]["effective"] == 4 * n_q

    # the sample log: four rotated docs per question, gold moved with the options
    logged = read_jsonl(run.sample_files["naru_mcq_500_circular"])
    assert Counter(s["accuracy_all"]["base_question_id"] for s in logged) == {q: 4 for q in gold}
    for s in logged:
        p = s["accuracy_all"]
        assert p["question_id"] == rotated_id(p["base_question_id"], p["rotation"])
        assert p["gold"] == s["target"] == rotate_letter(gold[p["base_question_id"]], p["rotation"])
        assert p["base_gold"] == gold[p["base_question_id"]]
        assert p["pred"] == intended[p["question_id"]]
        assert p["duration_s"] == 3.0

    # expected values, computed from the construction alone
    docs = [(rid, letter) for rid, letter in intended.items()]
    right = {rid: letter is not None and letter == rotate_letter(gold[rid.split("#")[0]], int(rid[-1]))
             for rid, letter in docs}  # fmt: skip
    full = sum(p == "all" for p in patterns.values())
    valid = [letter for _, letter in docs if letter is not None]
    want = {
        "accuracy_r0": 100.0 * sum(right[rotated_id(q, 0)] for q in gold) / n_q,
        "accuracy_all": 100.0 * sum(right.values()) / len(docs),
        "circular": 100.0 * full / n_q,
        "invalid_rate": 100.0 * (len(docs) - len(valid)) / len(docs),
        **{f"pick_{x}": 100.0 * valid.count(x) / len(valid) for x in LETTERS},
    }
    # the patterns were built so these are distinct, non-trivial numbers
    assert want["circular"] == 100.0 * 6 / 36 and want["accuracy_r0"] == 100.0 * 24 / 36
    assert want["accuracy_all"] == 100.0 * (6 * (4 + 3 + 1 + 0 + 3 + 3)) / 144
    for m in CIRCULAR_METRICS:
        assert run.metric("naru_mcq_500_circular", m) == pytest.approx(want[m], abs=1e-9), m
    # ... and every one recomputes from the sample log
    records = read_records(run.sample_files["naru_mcq_500_circular"])
    assert circular_metrics(records) == pytest.approx(want, abs=1e-9)
    res = run.results()["results"]["naru_mcq_500_circular"]
    assert res["circular_stderr_clustered,none"] == "N/A"  # no per-item score: nothing misleading
    assert isinstance(res["accuracy_all_stderr_clustered,none"], float)

    # the plain task of the same run is unaffected
    ids = {s["overall"]["question_id"] for s in read_jsonl(run.sample_files["naru_mcq_500"])}
    want_plain = expected_metrics(ann, variant_runs["video_intended"], ids)
    assert metrics_from_samples_log(run.sample_files["naru_mcq_500"]) == pytest.approx(want_plain, abs=1e-9)


def test_blind_tasks_metrics_and_no_video(variant_runs):
    ann = variant_runs["data"] / "annotations.jsonl"
    run = variant_runs["blind"]
    res = run.results()
    assert set(res["results"]) >= {"naru_mcq_blind", "naru_mcq_500_blind"}
    video_dir = str(variant_runs["data"] / "videos")
    plain_prompts = {
        s["overall"]["question_id"]: s["input"] for s in read_jsonl(variant_runs["video"].sample_files["naru_mcq_500"])
    }
    for task in ("naru_mcq_blind", "naru_mcq_500_blind"):
        logged = read_jsonl(run.sample_files[task])
        ids = {s["overall"]["question_id"] for s in logged}
        want = expected_metrics(ann, variant_runs["blind_intended"], ids)
        for m in METRICS:
            assert run.metric(task, m) == pytest.approx(want[m], abs=1e-9), (task, m)
        assert metrics_from_samples_log(run.sample_files[task]) == pytest.approx(want, abs=1e-9)
        assert res["results"][task]["overall_stderr_clustered,none"] == "N/A"  # a macro mean: no per-item SE
        assert isinstance(res["results"][task]["accuracy_stderr_clustered,none"], float)
        for s in logged:
            assert s["overall"]["blind"] is True
            # what lmms-eval logs of the request: the prompt, identical to the video task's,
            # and no media of any kind
            assert s["input"] == plain_prompts[s["overall"]["question_id"]]
            assert "input_media" not in s and video_dir not in str(s) and ".mp4" not in str(s)
        assert "doc_to_visual_blind" in str(res["configs"][task]["doc_to_visual"])


def test_blind_requests_reach_the_adapter_without_video(small_data, tmp_path, monkeypatch):
    """Build the tasks' real requests in-process and turn them into naru_replay's requests."""
    from lmms_eval.tasks import TaskManager, get_task_dict

    from model_adapters.replay import NaruReplay

    monkeypatch.setenv("NARU_DATA_DIR", str(small_data))
    root = Path(__file__).resolve().parents[2]
    tm = TaskManager(include_path=str(root / "tasks" / "naru"), include_defaults=False)
    tasks = get_task_dict(["naru_mcq_500_blind", "naru_mcq_500"], tm)
    preds = tmp_path / "p.jsonl"
    make_predictions(small_data / "annotations.jsonl", preds)
    model = NaruReplay(predictions=str(preds))
    requests = {}
    for name, task in tasks.items():
        task.build_all_requests(limit=None, rank=0, world_size=1)
        model.task_dict[name] = task.dataset
        requests[name] = {r.question_id: r for r in model.to_naru_requests(task.instances)}
        # the doc_to_visual lmms-eval hands the adapter, on every doc
        for inst in task.instances:
            ctx, _gen, doc_to_visual, doc_id, _task, split = inst.args
            visuals = doc_to_visual(task.dataset[split][doc_id])
            assert (visuals == []) if name.endswith("_blind") else (len(visuals) == 1 and os.path.exists(visuals[0]))
    blind, video = requests["naru_mcq_500_blind"], requests["naru_mcq_500"]
    assert blind.keys() == video.keys() and len(blind) == 36
    for qid, r in blind.items():
        assert r.videos == [] and r.video is None and r.doc["video"] is None
        assert r.prompt == video[qid].prompt and video[qid].video is not None
    model.prepare(list(blind.values()))  # every blind doc is answerable from the same predictions


def test_diagnose_on_the_runs(variant_runs):

    out, tmp = variant_runs["out"], variant_runs["tmp"]
    report_path = tmp / "diag" / "report.json"
    assert cli_main(["diagnose", str(out), "-o", str(report_path), "--bootstrap", "200"]) == 0
    import json

    rep = json.loads(report_path.read_text())
    by = {r["task"]: r for r in rep["runs"]}
    assert set(by) == {"naru_mcq_500", "naru_mcq_500_circular", "naru_mcq_blind", "naru_mcq_500_blind"}
    assert all(r["recomputes"] is True for r in rep["runs"])
    assert {r["group"] for r in rep["runs"]} == {"out"}  # one directory, one model
    # synthetic videos are 3 s long: all below the first default edge (30 min)
    for r in rep["runs"]:
        assert [(b["bucket"], b["n"]) for b in r["duration"]["buckets"] if b["n"]] == [("<30 min", 36)]

    ann = variant_runs["data"] / "annotations.jsonl"
    gold = {r["question_id"]: r["answer"] for r in read_jsonl(ann)}
    acc_video = 100.0 * sum(variant_runs["video_intended"][q] == g for q, g in gold.items()) / len(gold)
    acc_blind = 100.0 * sum(variant_runs["blind_intended"][q] == g for q, g in gold.items()) / len(gold)
    gaps = {g["blind_run"]: g for g in rep["blind_vs_video"]}
    assert set(gaps) == {"out:naru_mcq_blind", "out:naru_mcq_500_blind"}
    for g in gaps.values():
        assert g["video_run"] == "out:naru_mcq_500"
        assert g["gap"] == pytest.approx(acc_video - acc_blind)
        assert g["ci95"][0] <= g["gap"] <= g["ci95"][1]
    circ = {g["plain_run"]: g for g in rep["circular_vs_plain"]}
    assert circ["out:naru_mcq_500_circular (rotation 0)"]["gap"] == pytest.approx(100 * 6 / 36 - 100 * 24 / 36)
    assert circ["out:naru_mcq_500"]["gap"] == pytest.approx(100 * 6 / 36 - acc_video)
    assert rep["shortcut_candidates"]["n_models"] == 1
    assert len(rep["plots"]) == 4 and all(Path(p).exists() for p in rep["plots"])
