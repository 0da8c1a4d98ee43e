"""``naru-eval demo``: the embedded default job, fully offline.

Builds a synthetic NARU-format sample (real H.264 videos, questions in all nine categories),
writes replayed answers in the response styles models really produce, scores them through the
real ``lmms-eval`` console pipeline (``naru_mcq`` and ``naru_mcq_500``), and checks that every
metric recomputes from the sample log. It ends by building the leaderboard with the demo run
beside the NARU authors' published rows (``results/demo/leaderboard.html``). Results land in
``results/demo/``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from naru_eval.core.scoring import METRICS, close, metrics_from_samples_log
from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, demo_responses, make_dataset
from naru_eval.lmms.run import run_lmms_eval
from naru_eval.report.leaderboard import build_leaderboard
from naru_eval.report.render import write_outputs
from naru_eval.report.summary import metrics_table

TASKS = ("naru_mcq", "naru_mcq_500")


def run_demo(out: Path, per_category: int = 8, videos: int = 12) -> int:
    """0 when the demo run is complete and every metric recomputes; 1 otherwise (a full disk
    included: lmms-eval's exit status does not tell, the files do)."""
    try:
        return _run_demo(out.resolve(), per_category, videos)
    except OSError as e:  # the output disk is full or read-only: say which file, no traceback
        print(f"demo: FAILED: cannot write {e.filename or out}: {e.strerror or e}", file=sys.stderr)
        return 1


def _run_demo(out: Path, per_category: int, videos: int) -> int:
    if out.exists():
        shutil.rmtree(out)
    data_dir = make_dataset(
        out / "data", SyntheticSpec(counts={c: per_category for c in PAPER_COUNTS}, n_videos=videos)
    )
    preds = out / "predictions.jsonl"
    with open(preds, "w", encoding="utf-8") as f:
        for rec in demo_responses(data_dir / "annotations.jsonl"):
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"demo: {9 * per_category} synthetic questions over {videos} videos in {data_dir}")
    print("demo: running lmms-eval --model naru_replay --tasks naru_mcq,naru_mcq_500 ...", flush=True)
    run = run_lmms_eval(
        "naru_replay", f"predictions={preds}", TASKS, out / "lmms_eval", env={"NARU_DATA_DIR": str(data_dir)}
    )
    if not run.ok:  # no results, or a sample log that is cut, short or does not recompute (a full disk)
        print(f"demo: FAILED: {run.failure()}", file=sys.stderr)
        return 1
    (out / "lmms_eval.log").write_text(run.stdout + "\n" + run.stderr, encoding="utf-8")
    results = run.results()["results"]
    summary: dict[str, dict[str, float | None]] = {}
    mismatches = []
    for task in TASKS:
        reported = {m: results[task].get(f"{m},none") for m in METRICS}
        recomputed = metrics_from_samples_log(run.sample_files[task])
        mismatches += [f"{task}/{m}" for m in METRICS if not close(reported[m], recomputed[m])]
        summary[task] = reported
    table = metrics_table(summary)
    (out / "summary.json").write_text(
        json.dumps({"results_file": str(run.results_file), "metrics": summary}, indent=2), encoding="utf-8"
    )
    (out / "summary.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    print(f"demo: lmms-eval took {run.seconds:.1f} s; results in {run.results_file}")
    if mismatches:
        print(f"demo: metrics do not recompute from the sample log: {mismatches}", file=sys.stderr)
        return 1
    print("demo: every metric recomputes from the sample log")
    return _leaderboard(out)


def _leaderboard(out: Path) -> int:
    """The leaderboard of the demo run beside the published rows; prints where the page is."""
    lb = build_leaderboard([out / "lmms_eval"], labels={str(out / "lmms_eval"): "demo (replayed answers)"})
    paths = write_outputs(lb, out / "leaderboard.json", plots=False)
    for err in lb.errors:
        print(f"demo: leaderboard: {err}", file=sys.stderr)
    n_pub = len(lb.data["published"]["rows"])
    print(
        f"demo: leaderboard with the demo run beside {n_pub} published rows (the demo's synthetic data is not "
        "the official data: its tables say so)"
    )
    print(f"demo: leaderboard page: {paths['html']}")
    return 1 if lb.errors else 0
