"""A NARU MCQ run folder as lmms-eval 0.7.3 writes it (results file and sample log), without
lmms-eval: the fast tests of the one run check (naru_eval/core/runfiles.py) and of its users."""

from __future__ import annotations

import json
import math
from pathlib import Path

from naru_eval.core.data import CATEGORIES, NaruQuestion
from naru_eval.core.scoring import compute_metrics, metric_payloads, score_response

OPTS = ("red", "green", "blue", "white")
QUESTIONS = [NaruQuestion(f"q{i}", f"v{i % 3}", CATEGORIES[i % 9], "?", OPTS, "ABCD"[i % 4]) for i in range(18)]
STAMP = "20260101_000000"
MODEL_ARGS = "predictions=p.jsonl,num_frames=8"


def write_run(
    folder: Path, task: str = "naru_mcq", original: int | None = None, model_args: str = MODEL_ARGS
) -> tuple[Path, Path]:
    """(results file, sample log) of an 18-question run whose every metric recomputes; ``original``:
    the task's size when the run evaluated fewer (``--limit``)."""
    # the provenance naru_replay records (every naru-eval adapter records its id)
    prov = {"adapter": "naru_replay"}
    samples = [score_response(q, q.answer if i % 3 else "A", "fp", provenance=prov) for i, q in enumerate(QUESTIONS)]
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{STAMP}_samples_{task}.jsonl"
    log.write_text("".join(json.dumps({"doc_id": i, **metric_payloads(s)}) + "\n" for i, s in enumerate(samples)))
    reported = {f"{m},none": v for m, v in compute_metrics(samples).items()}
    results = {
        # lmms-eval writes a bare NaN for a standard error it cannot give (too few clusters)
        "results": {task: {**reported, "accuracy_stderr_clustered,none": math.nan}},
        "n-samples": {task: {"original": original or len(samples), "effective": len(samples)}},
        "config": {"model": "naru_replay", "model_args": model_args},
    }
    rf = folder / f"{STAMP}_results.json"
    rf.write_text(json.dumps(results))
    return rf, log
