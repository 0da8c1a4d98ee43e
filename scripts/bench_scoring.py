"""Benchmark: scoring all 1,481 replayed answers through the real lmms-eval pipeline.

Measured side by side in one run, on a synthetic data set with the paper's category counts
(155 videos):

* ``full``: ``lmms-eval --model naru_replay --tasks naru_mcq`` over 1,481 answers;
* ``floor``: the same command with ``--limit 1`` (lmms-eval start-up, task load, preflight);
* ``preflight``: probing the 155 videos alone, in-process;
* ``extract``: the extractor + metrics over the 1,481 answers, in-process.

Target: ``full`` under 60 s on the 2-core CI machine, nearly all of it start-up,
i.e. ``full / floor`` close to 1.

    python scripts/bench_scoring.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from naru_eval.adapters.registry import id_of
from naru_eval.core.data import load_local
from naru_eval.core.scoring import compute_metrics, score_response
from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, demo_responses, make_dataset
from naru_eval.core.validate import check_videos
from naru_eval.lmms.run import run_lmms_eval


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    replay = id_of("replay")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        data = make_dataset(tmp_path / "data", SyntheticSpec(counts=dict(PAPER_COUNTS), n_videos=155))
        preds = tmp_path / "preds.jsonl"
        responses = demo_responses(data / "annotations.jsonl")
        preds.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in responses), encoding="utf-8")
        env = {"NARU_DATA_DIR": str(data)}
        full, floor, pre, ext = [], [], [], []
        for i in range(args.repeat):
            r = run_lmms_eval(replay, f"predictions={preds}", ["naru_mcq"], tmp_path / f"full{i}", env=env)
            assert r.ok and r.results()["n-samples"]["naru_mcq"]["effective"] == 1481, r.stderr[-3000:]
            full.append(r.seconds)
            r = run_lmms_eval(
                replay, f"predictions={preds}", ["naru_mcq"], tmp_path / f"floor{i}", env=env,
                extra_args=["--limit", "1"],
            )  # fmt: skip
            assert r.ok, r.stderr[-3000:]
            floor.append(r.seconds)
            ds = load_local(data)
            t0 = time.perf_counter()
            infos, problems = check_videos(ds)
            pre.append(time.perf_counter() - t0)
            assert len(infos) == 155 and not problems
            by_id = {x["question_id"]: x["response"] for x in responses}
            t0 = time.perf_counter()
            compute_metrics([score_response(q, by_id[q.question_id]) for q in ds.questions])
            ext.append(time.perf_counter() - t0)
    med = statistics.median
    print(f"full (1,481 answers)      : median {med(full):6.2f} s  runs {[round(x, 2) for x in full]}")
    print(f"floor (--limit 1)         : median {med(floor):6.2f} s  runs {[round(x, 2) for x in floor]}")
    print(f"ratio full/floor          : {med(full) / med(floor):.2f}")
    print(f"preflight, 155 videos     : median {med(pre):6.3f} s")
    print(f"extract+metrics, 1,481    : median {med(ext):6.3f} s")


if __name__ == "__main__":
    main()
