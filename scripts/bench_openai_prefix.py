"""The server path's prefix cache: video prefills per video through ``naru_openai_compat``.

The real adapter and ``openai`` SDK ask the loopback stub (tests/helpers/stubs/openai_server.py)
with its prefix-cache model on: everything before the question costs ``--tokens-per-frame`` x
frames tokens (default: 16 frames x 1008 = 16,128 tokens, what 128 frames of a 1080p video cost
Qwen2.5-VL as one video, docs/openai_compat.md), a request whose prefix is not cached when it
arrives computes it (one *video prefill*), and computing takes ``--s-per-token`` on one shared
"GPU". ``--videos`` videos x about 10 questions each (NARU's shape), ``max_concurrency`` requests
at most in flight, with ``prefix_first`` on (a video's first question alone, its others after
it) and off (every question as soon as a slot is free). Reported per setting: video prefills
per video, prompt tokens computed and served from the cache, wall time.

Run from the repository root: ``PYTHONPATH=. .venv/bin/python scripts/bench_openai_prefix.py``
(``--out results.json`` writes the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"


def run(docs: list[dict[str, Any]], work: Path, prefix_first: bool, args: argparse.Namespace) -> dict[str, Any]:
    from model_adapters.openai_compat import OpenAICompat
    from naru_eval.lmms.tasks import doc_to_text
    from tests.helpers.data import lmms_instances
    from tests.helpers.stubs import OpenAIStub

    with OpenAIStub(
        models=(MODEL,), prefix_cache=True, tokens_per_frame=args.tokens_per_frame, prefill_s_per_token=args.s_per_token
    ) as stub:
        model = OpenAICompat(
            model=MODEL,
            base_url=stub.base_url,
            num_frames=args.frames,
            max_concurrency=args.concurrency,
            prefix_first=prefix_first,
            store="false",
        )
        model.task_dict = {"naru_mcq": {"test": docs}}
        for d in docs:  # decode and encode every video first: the run times the server side only
            model.video_parts(model.to_naru_requests(lmms_instances([d]))[0])
        model.task_dict = {"naru_mcq": {"test": docs}}
        t0 = time.perf_counter()
        out = model.generate_until(lmms_instances(docs))
        wall = time.perf_counter() - t0
        video_of = {doc_to_text(d): d["video_id"] for d in docs}
        key_video = {r.prefix_key: video_of[r.text] for r in stub.chat_requests()}
        per_video = Counter({key_video[k]: n for k, n in stub.prefills.items()})
    assert not any(o.startswith("[NARU") for o in out)
    n_videos = len({d["video_id"] for d in docs})
    return {
        "prefix_first": prefix_first,
        "questions": len(docs),
        "videos": n_videos,
        "video_prefills": sum(per_video.values()),
        "video_prefills_per_video": round(sum(per_video.values()) / n_videos, 2),
        "most_prefills_of_one_video": max(per_video.values()),
        "prompt_tokens_computed": stub.computed_tokens,
        "prompt_tokens_cached": stub.cached_tokens,
        "max_in_flight": stub.max_in_flight,
        "wall_s": round(wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--videos", type=int, default=8)
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--tokens-per-frame", type=int, default=1008)
    ap.add_argument("--s-per-token", type=float, default=1e-5)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "EMPTY")

    from naru_eval.core.data import CATEGORIES
    from naru_eval.core.synthetic import SyntheticSpec, make_dataset
    from tests.helpers.data import docs_of

    with tempfile.TemporaryDirectory() as tmp:
        per_cat = max(1, round(10 * args.videos / len(CATEGORIES)))  # about 10 questions per video
        data = make_dataset(Path(tmp) / "data", SyntheticSpec(counts=dict.fromkeys(CATEGORIES, per_cat),
                                                              n_videos=args.videos, seed=1))  # fmt: skip
        docs = docs_of(data)
        results = [run(docs, Path(tmp), on, args) for on in (True, False)]
    for r in results:
        print(json.dumps(r))
    if args.out:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": results}, indent=2))


if __name__ == "__main__":
    main()
