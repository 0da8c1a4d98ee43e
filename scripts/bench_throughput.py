"""Throughput of the open-weight path on CPU: the shared video prefix and decode-ahead.

1. Shared prefix: 10 questions on one video at 32 and 128 frames, answered from one prefilled
   prefix (``shared_prefix=true``, the default) and per question (``shared_prefix=false``), on
   the tiny Qwen2.5-VL at benchmark scale (tests/helpers/tiny_models.py ``BENCH_QWEN2_5_VL``: a
   vision tower and frame size big enough that the video dominates, as for the real models).
   Frames are decoded before timing (the frame cache), so the two modes differ only in the
   model. Reported: wall time, vision-encoder calls, prefill tokens (total and per question),
   and whether the generated answers are identical.
2. Decode-ahead: ``--videos`` videos x 10 questions through the adapter's own loop
   (``generate_until``), frames decoded inline (``decode_workers=0``) vs by worker processes
   (``decode_workers=2``), the latter with the processor inline (as it used to run) and one video
   ahead in its own thread (``processor_ahead``, the default), a fresh frame cache each: wall time
   against decode time + model time, and what the model waited for per video: frames (the frame
   cache's wait) and the processor (``prefill_stats["processor_wait_s"]``).

Run from the repository root: ``PYTHONPATH=. .venv/bin/python scripts/bench_throughput.py``
(``--out results.json`` writes the numbers).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

QUESTION = (
    "[N.{i}] What colour fills segment {k}?\nA. red\nB. blue\nC. green\nD. white\nAnswer with the option's letter."
)
GEN = {"max_new_tokens": 8, "temperature": 0, "do_sample": False, "until": ["\n\n"]}


def build(work: Path) -> tuple[Path, list[Path]]:
    from naru_eval.core.synthetic import write_indexed_video
    from tests.helpers.tiny_models import BENCH_QWEN2_5_VL, build_qwen2_5_vl

    ckpt = work / "qwen2_5_vl_bench"
    if not (ckpt / "config.json").exists():
        build_qwen2_5_vl(ckpt, **BENCH_QWEN2_5_VL)
    videos = []
    for j in range(3):
        v = work / f"video{j}.mp4"
        if not v.exists():  # 1280x720, 60 s at 10 fps, GOP 5 s: decoding 128 frames costs real time
            write_indexed_video(v, n_frames=600 + 10 * j, fps=10, gop=50, size=(1280, 720), preset="ultrafast")
        videos.append(v)
    return ckpt, videos


def adapter(ckpt: Path, frames: int, **args: Any) -> Any:
    from model_adapters.qwen2_5_vl import Qwen2_5_VL

    kw = {"num_frames": frames, "device": "cpu", "store": "false", "dtype": "float32", **args}
    return Qwen2_5_VL(pretrained=str(ckpt), **{k: str(v) for k, v in kw.items()})


def requests(video: Path, n: int) -> list[Any]:
    from naru_eval.adapters.request import NaruRequest

    return [
        NaruRequest(
            {"question_id": f"{video.stem}-q{i}"}, QUESTION.format(i=i, k=i % 3 + 1), [str(video)], GEN, "naru_mcq", i
        )
        for i in range(n)
    ]


def shared_vs_per_question(ckpt: Path, video: Path, frames: int, questions: int) -> dict[str, Any]:
    out: dict[str, Any] = {"frames": frames, "questions": questions}
    texts = {}
    for mode, shared in (("shared", True), ("per_question", False)):
        a = adapter(ckpt, frames, shared_prefix=shared)
        a.ensure_loaded()
        calls = [0]
        a.model.model.visual.register_forward_hook(lambda *_, c=calls: c.__setitem__(0, c[0] + 1))
        reqs = requests(video, questions)
        a.frames(reqs[0])  # decoded once before timing: both modes read the frame cache
        start = time.perf_counter()
        texts[mode] = [a.respond(r).text for r in reqs]
        wall = time.perf_counter() - start
        st = a.generator.stats
        out[mode] = {
            "wall_s": round(wall, 3),
            "s_per_question": round(wall / questions, 3),
            "vision_encoder_calls": calls[0],
            "prefill_tokens": st["prefill_tokens"],
            "prefill_tokens_per_question": round(st["prefill_tokens"] / questions, 1),
        }
    s, p = out["shared"], out["per_question"]
    out["prefill_ratio"] = round(p["prefill_tokens"] / s["prefill_tokens"], 2)
    out["wall_ratio"] = round(p["wall_s"] / s["wall_s"], 2)
    out["identical_answers"] = texts["shared"] == texts["per_question"]
    return out


def overlap(ckpt: Path, videos: list[Path], frames: int, questions: int, workers: int) -> dict[str, Any]:
    from lmms_eval.api.instance import Instance

    from naru_eval.media import frame_cache

    docs = [
        {"question_id": r.question_id, "video": r.video, "prompt": r.prompt}
        for v in videos
        for r in requests(v, questions)
    ]
    insts = [
        Instance(
            "generate_until",
            (d["prompt"], dict(GEN), lambda d: [d["video"]], i, "naru_mcq", "test"),
            idx=0,
            metadata={"task": "naru_mcq", "doc_id": i, "repeats": 1},
        )
        for i, d in enumerate(docs)
    ]
    out: dict[str, Any] = {"frames": frames, "videos": len(videos), "questions_per_video": questions}
    answers = {}
    modes = (("inline", 0, False), ("ahead_frames", workers, False), ("ahead", workers, True))
    for mode, n, processor_ahead in modes:
        frame_cache._DEFAULT = frame_cache.FrameCache(disk_dir=None)
        frame_cache._DEFAULT.disk_dir = None  # no on-disk frames: every video is decoded
        a = adapter(ckpt, frames, decode_workers=n)
        a.generator.processor_ahead = processor_ahead
        a.ensure_loaded()
        frame_waits: dict[str, float] = {}  # video -> seconds the model waited in frames()
        frames_of = a.frames

        def timed(r: Any, frames_of: Any = frames_of, waits: dict[str, float] = frame_waits) -> Any:
            t = time.perf_counter()
            try:
                return frames_of(r)
            finally:
                if threading.current_thread() is threading.main_thread():  # the model's own waits
                    waits[r.video] = waits.get(r.video, 0.0) + time.perf_counter() - t

        a.frames = timed
        a.task_dict = {"naru_mcq": {"test": docs}}
        start = time.perf_counter()
        answers[mode] = a.generate_until(insts)
        wall = time.perf_counter() - start
        st = frame_cache._DEFAULT.stats
        decode = st.wait_s if n == 0 else st.ahead_decode_s
        out[mode] = {
            "wall_s": round(wall, 3),
            "decode_s": round(decode, 3),
            "model_s": round(wall - st.wait_s, 3),  # everything but waiting for frames
            "waited_for_frames_s": round(st.wait_s, 3),
            "decode_plus_model_s": round(decode + wall - st.wait_s, 3),
            "prefetched": st.prefetched,
            "decoded_inline": st.decodes,
            "processor_ahead": a.generator.stats["processor_ahead"],
            # what the model waited for, per video: frames, and the processor (inline or not yet done)
            "wait_frames_per_video_s": round(st.wait_s / len(videos), 3),
            "wait_processor_per_video_s": round(a.generator.stats["processor_wait_s"] / len(videos), 3),
            "wait_per_video_s": round((st.wait_s + a.generator.stats["processor_wait_s"]) / len(videos), 3),
            # per video in answer order (the first is decoded and processed inline on purpose)
            "wait_frames_each_s": [round(frame_waits.get(str(v), 0.0), 3) for v in videos],
            "wait_processor_each_s": [round(x, 3) for x in a.generator.processor_waits],
        }
    out["identical_answers"] = answers["inline"] == answers["ahead"] == answers["ahead_frames"]
    out["wall_ratio"] = round(out["inline"]["wall_s"] / out["ahead"]["wall_s"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--videos", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "naru_bench_throughput")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only-decode-ahead", action="store_true", help="skip the shared-prefix comparison")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    ckpt, videos = build(args.workdir)
    result: dict[str, Any] = {"shared_prefix": [], "decode_ahead": None}
    for n in [] if args.only_decode_ahead else args.frames:
        r = shared_vs_per_question(ckpt, videos[0], n, args.questions)
        result["shared_prefix"].append(r)
        print(json.dumps(r), flush=True)
    r = overlap(ckpt, videos[: args.videos], max(args.frames), args.questions, args.workers)
    result["decode_ahead"] = r
    print(json.dumps(r), flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
