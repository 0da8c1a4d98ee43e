"""``naru-eval demo``: the embedded default job, fully offline.

Builds a synthetic NARU-format sample (real H.264 videos, questions in all nine categories),
writes replayed answers in the response styles models really produce, scores them through the
real ``lmms-eval`` console pipeline (``naru_mcq`` and ``naru_mcq_500``), and checks the run with
the one check of a run (:mod:`naru_eval.core.runfiles`: every sample log parses, holds one line
per question, and every metric recomputes from it). It ends by building the leaderboard
(``results/demo/leaderboard.html``): the NARU authors' published table as the reference, and the
demo run in a table of its own, since its data is synthetic, not the official release. Results
land in ``results/demo/``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from naru_eval.adapters.registry import id_of
from naru_eval.core.scoring import METRICS
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
    replay = id_of("replay")  # the replay adapter: answers made elsewhere, here the demo's
    print(f"demo: running lmms-eval --model {replay} --tasks naru_mcq,naru_mcq_500 ...", flush=True)
    run = run_lmms_eval(replay, f"predictions={preds}", TASKS, out / "lmms_eval", env={"NARU_DATA_DIR": str(data_dir)})
    if not run.ok:  # no results, or a sample log that is cut, short or does not recompute (a full disk)
        print(f"demo: FAILED: {run.failure()}", file=sys.stderr)
        return 1
    (out / "lmms_eval.log").write_text(run.stdout + "\n" + run.stderr, encoding="utf-8")
    reported = {task: run.reported(task) for task in TASKS}
    summary = {task: {m: reported[task].get(m) for m in METRICS} for task in TASKS}
    table = metrics_table(summary)
    (out / "summary.json").write_text(
        json.dumps({"results_file": str(run.results_file), "metrics": summary}, indent=2), encoding="utf-8"
    )
    (out / "summary.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    print(f"demo: lmms-eval took {run.seconds:.1f} s; results in {run.results_file}")
    print("demo: every metric recomputes from the sample log")  # run.ok: the one check said so
    return _leaderboard(out)


def _leaderboard(out: Path) -> int:
    """The leaderboard: the published table as the reference and the demo run's table apart (its
    data is synthetic); prints what the page holds, from the page's own tables, and where it is."""
    lb = build_leaderboard([out / "lmms_eval"], labels={str(out / "lmms_eval"): "demo (replayed answers)"})
    paths = write_outputs(lb, out / "leaderboard.json", plots=False)
    for err in lb.errors:
        print(f"demo: leaderboard: {err}", file=sys.stderr)
    tables = lb.document.tables
    published = sum(1 for t in tables if t.data is None)
    own = [t for t in tables if t.data is not None]
    status = ", ".join(sorted({str(t.status) for t in own})) or "none"
    print(
        f"demo: leaderboard with {published} published table(s) as the reference and the demo run in "
        f"{len(own)} table(s) of its own (data: {status}; never ranked among the published rows)"
    )
    print(f"demo: leaderboard page: {paths['html']}")
    return 1 if lb.errors else 0
