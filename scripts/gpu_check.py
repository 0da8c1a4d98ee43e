"""GPU check of the open-weight path at real model sizes, with nothing downloaded (issue 14).

Each family in ``scripts/gpu_configs/*.json`` is built at its real size (hidden sizes, layers,
heads, vocabulary and vision tower of the public ``config.json``; random bf16 weights, so the
same compute as the real checkpoint) with the family's real processor classes and a small
tokenizer trained here (its token ids fit the real vocabulary). A video is generated; a few
questions are answered at the official frame budget (``naru_eval.core.budgets.DEFAULT_SAMPLING``)
through the adapter's own ``respond`` with the shared video prefix and per question. One JSON
file gets, per family: seconds per question (shared and per question), the vision-encoder and
prefill work, peak GPU memory, and whether the greedy answers are identical.

``--tiny`` runs that GPU path on the CPU at toy width and depth (8 frames): a smoke test of this
script. ``--dry-run`` (CI, no GPU): every config builds on the meta device (parameter count within the
expected range, the vision tower's output width equal to the language model's), and the
processor turns a few frames into the video tokens the config expects.

Usage: ``scripts/gpu_check.sh [--dry-run] [--out gpu_check.json] [--questions 4] [--families a,b]``
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).resolve().parent / "gpu_configs"
QUESTION = (
    "[N.{i}] What colour fills segment {k}?\nA. red\nB. blue\nC. green\nD. white\nAnswer with the option's letter."
)
GEN = {"max_new_tokens": 16, "temperature": 0, "do_sample": False, "until": ["\n\n"]}


def load_spec(name: str) -> dict[str, Any]:
    return dict(json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8")))


def shrink(spec: dict[str, Any]) -> dict[str, Any]:
    """``--tiny``: the same family at toy width and depth (head size, and so M-RoPE sections,
    kept), for running this script's GPU path on a CPU."""
    spec = json.loads(json.dumps(spec))
    t, v = spec["text_config"], spec["vision_config"]
    t.update(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
    t.setdefault("head_dim", 128)
    if "depth" in v:  # Qwen
        v.update(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=256)
        v.update({k: [0] for k in ("fullatt_block_indexes", "deepstack_visual_indexes") if k in v})
    else:  # InternViT
        v.update(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2)
    spec["expect_params_b"] = [0.0, 1.0]
    return spec


def tokenizer_and_processor(spec: dict[str, Any]) -> tuple[Any, Any, dict[str, int]]:
    """The family's real processor classes (their default sizes) over a tokenizer trained here."""
    import transformers as tf

    from tests.helpers import tiny_models as tm

    mid = spec["model_id"]
    if mid == "naru_internvl3_5":
        tok = tm.train_tokenizer(
            tm.INTERNVL_SPECIAL,
            extra_special_tokens={
                "start_image_token": "<img>",
                "end_image_token": "</img>",
                "context_image_token": "<IMG_CONTEXT>",
                "video_token": "<video>",
            },
        )
        side = int(spec["vision_config"]["image_size"][0])
        proc = tf.InternVLProcessor(
            image_processor=tf.GotOcr2ImageProcessor(size={"height": side, "width": side}, max_patches=1),
            video_processor=tf.InternVLVideoProcessor(size={"height": side, "width": side}),
            tokenizer=tok,
            image_seq_length=int(spec["image_seq_length"]),
            chat_template=tm.INTERNVL_TEMPLATE,
        )
        return tok, proc, tm._ids(tok, tm.INTERNVL_SPECIAL)
    tok = tm.train_tokenizer(tm.QWEN_SPECIAL)
    if mid == "naru_qwen2_5_vl":
        proc = tf.Qwen2_5_VLProcessor(
            image_processor=tf.Qwen2VLImageProcessor(),
            video_processor=tf.Qwen2VLVideoProcessor(),
            tokenizer=tok,
            chat_template=tm.QWEN2_5_TEMPLATE,
        )
    else:
        proc = tf.Qwen3VLProcessor(
            image_processor=tf.Qwen2VLImageProcessor(patch_size=16),
            video_processor=tf.Qwen3VLVideoProcessor(),
            tokenizer=tok,
            chat_template=tm.QWEN3_TEMPLATE,
        )
    return tok, proc, tm._ids(tok, tm.QWEN_SPECIAL)


def build_config(spec: dict[str, Any], ids: dict[str, int]) -> Any:
    import transformers as tf

    text = {**spec["text_config"]}
    if spec["model_id"] == "naru_internvl3_5":
        eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
        text.update(bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
        return tf.InternVLConfig(
            vision_config=spec["vision_config"],
            text_config=text,
            image_token_id=ids["<IMG_CONTEXT>"],
            image_seq_length=spec["image_seq_length"],
            downsample_ratio=spec["downsample_ratio"],
            tie_word_embeddings=False,  # the real checkpoint's lm_head is its own (the top level says so)
        )
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    text.update(bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    return getattr(tf, spec["config_class"])(
        text_config=text,
        vision_config=spec["vision_config"],
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )


def build_model(spec: dict[str, Any], config: Any, device: str) -> Any:
    import torch
    import transformers as tf

    cls = getattr(tf, spec["class"])
    with torch.device(device):
        model = cls._from_config(config, dtype=torch.bfloat16)
    return model.eval()


def make_video(work: Path, dry: bool = False) -> Path:
    """512 s at 2 fps, 448x448: 128 uniform frames and 0.25 fps (128 frames) both fit; the dry
    run's shape check needs only 4 frames (20 s)."""
    from naru_eval.core.synthetic import write_indexed_video

    v = work / ("gpu_check_dry.mp4" if dry else "gpu_check.mp4")
    if not v.exists():
        write_indexed_video(v, n_frames=40 if dry else 1024, fps=2, gop=20, size=(448, 448), preset="ultrafast")
    return v


def adapter_for(spec: dict[str, Any], model: Any, processor: Any, **args: Any) -> Any:
    import importlib

    from model_adapters import ADAPTERS

    module, name = ADAPTERS[spec["model_id"]].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    a = cls(pretrained=f"gpu_check/{spec['model_id']}", store="false", **{k: str(v) for k, v in args.items()})
    a.model, a.processor = model, processor  # built above: from_pretrained would download
    a.model.generation_config.pad_token_id = processor.tokenizer.pad_token_id
    return a


def requests(video: Path, n: int) -> list[Any]:
    from model_adapters.base import NaruRequest

    return [
        NaruRequest({"question_id": f"q{i}"}, QUESTION.format(i=i, k=i % 3 + 1), [str(video)], GEN, "naru_mcq", i)
        for i in range(n)
    ]


def dry_run(name: str, video: Path) -> dict[str, Any]:
    """Meta-device build and processor shapes: no GPU, no weights."""
    from naru_eval.core.budgets import DEFAULT_SAMPLING

    spec = load_spec(name)
    _, proc, ids = tokenizer_and_processor(spec)
    config = build_config(spec, ids)
    model = build_model(spec, config, "meta")
    n_params = sum(p.numel() for p in model.parameters()) / 1e9
    lo, hi = spec["expect_params_b"]
    text_hidden = config.text_config.hidden_size
    vis = config.vision_config
    vis_out = getattr(vis, "out_hidden_size", None)
    a = adapter_for(spec, model, proc, num_frames=4, device="cpu")
    r = requests(video, 1)[0]
    inputs = a.build_inputs(r, a.sampled(r))
    n_video = int(
        (
            inputs["input_ids"]
            == (
                config.video_token_id
                if hasattr(config, "video_token_id") and spec["model_id"] != "naru_internvl3_5"
                else config.image_token_id
            )
        ).sum()
    )
    if spec["model_id"] == "naru_internvl3_5":
        want_video = 4 * config.image_seq_length
    else:
        grid = inputs["video_grid_thw"][0].tolist()
        want_video = grid[0] * grid[1] * grid[2] // vis.spatial_merge_size**2
    checks = {
        "params_in_range": lo <= n_params <= hi,
        "vision_out_matches_text": vis_out is None or vis_out == text_hidden,
        "video_tokens_match": n_video == want_video,
        "split_on_token_boundary": a.split_prompt(r) is not None,
    }
    return {
        "family": spec["model_id"],
        "params_b": round(n_params, 3),
        "video_tokens_4_frames": n_video,
        "official_sampling": DEFAULT_SAMPLING[spec["model_id"]]._asdict(),
        "checks": checks,
        "ok": all(checks.values()),
    }


def gpu_run(name: str, video: Path, questions: int, tiny: bool = False) -> dict[str, Any]:
    import torch

    spec = shrink(load_spec(name)) if tiny else load_spec(name)
    device = "cpu" if tiny else "cuda"
    cuda = device == "cuda"
    sampling = {"num_frames": 8} if tiny else {}  # else the official sampling
    _, proc, ids = tokenizer_and_processor(spec)
    config = build_config(spec, ids)
    t0 = time.perf_counter()
    model = build_model(spec, config, device)
    if cuda:
        torch.cuda.synchronize()
    out: dict[str, Any] = {"family": spec["model_id"], "build_s": round(time.perf_counter() - t0, 1)}
    texts = {}
    warm = adapter_for(spec, model, proc, device=device, **sampling)
    warm.respond(requests(video, 1)[0]._replace(videos=[]))  # CUDA start-up outside the timings
    for mode, shared in (("shared", True), ("per_question", False)):
        a = adapter_for(spec, model, proc, device=device, shared_prefix=shared, **sampling)
        reqs = requests(video, questions)
        sampled = a.sampled(reqs[0])  # decoded before timing (the frame cache)
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        answers = [a.respond(r) for r in reqs]
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        texts[mode] = [x.text for x in answers]
        out[mode] = {
            "s_per_question": round(wall / questions, 3),
            "wall_s": round(wall, 3),
            "frames": int(len(sampled.frames)),
            "input_tokens": answers[0].usage["input_tokens"],
            **a.prefill_stats,
            "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        }
        a.release_prefix()
    out["identical_answers"] = texts["shared"] == texts["per_question"]
    out["speedup"] = round(out["per_question"]["wall_s"] / out["shared"]["wall_s"], 2)
    out["ok"] = True
    del model
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="run the GPU path on the CPU at toy size (a smoke test)")
    ap.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--families", default=",".join(sorted(p.stem for p in CONFIGS.glob("*.json"))))
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "naru_gpu_check")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    video = make_video(args.workdir, args.dry_run or args.tiny)
    result: dict[str, Any] = {"dry_run": args.dry_run, "tiny": args.tiny, "questions": args.questions, "families": []}
    if not args.dry_run and not args.tiny:
        import torch

        result["device"] = torch.cuda.get_device_name(0)
    for name in args.families.split(","):
        start = time.perf_counter()
        try:
            r = dry_run(name, video) if args.dry_run else gpu_run(name, video, args.questions, args.tiny)
        except Exception as e:  # one family's failure is recorded; the others still run
            r = {"family": name, "ok": False, "error": f"{type(e).__name__}: {e}"}
        r["seconds"] = round(time.perf_counter() - start, 1)
        result["families"].append(r)
        print(json.dumps(r), flush=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")  # after each family
    ok = all(r.get("ok", "error" not in r) for r in result["families"])
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
