"""GPU check of the open-weight path at real model sizes, with nothing downloaded.

Each family in ``scripts/gpu_configs/*.json`` is built at its real size (hidden sizes, layers,
heads, vocabulary and vision tower of the public ``config.json``; random bf16 weights, so the
same compute as the real checkpoint; Nemotron at a quarter of its depth, see its ``_source``)
with the family's real processor classes and a small tokenizer trained here (its token ids fit
the real vocabulary). A config is named after its family's module (``model_adapters/<name>.py``),
whose declaration gives the adapter and the checkpoint ``model_type`` of the class the config
builds (what is built below is keyed by that ``model_type``, so a new family over a known one
needs only its config). A video is generated; a few questions are answered at the family's
official default sampling (its ``Family.default``: Qwen3-VL at 0.25 fps through qwen-vl-utils)
through the adapter's own ``respond`` with the shared video prefix and per question. One JSON
file gets, per family: the attention implementation that ran (flash-attention 2 when installed,
else SDPA), seconds per question (shared and per question), the vision-encoder and prefill work,
peak GPU memory, the largest first-step logit difference between the two paths (random weights
make greedy ids meaningless; logits are not), and whether the greedy answers are identical.

It starts on a bare node: ``scripts/gpu_check_preflight.py`` (standard library only) runs first
and names every missing or too-old package with its fix; a family this transformers cannot build
is skipped and said so. It imports only what answering needs: lmms-eval is not (the adapters'
base class derives from lmms-eval's ``lmms`` only for its registry; :func:`lmms_eval_stand_in`).
The wheels the GPU image lacks: ``bash scripts/gpu_wheels.sh`` (docs/performance.md).

``--tiny`` runs that GPU path on the CPU at toy width and depth (8 frames; Qwen3-VL at 0.25 fps):
a smoke test of this script, run by the tests in a clean environment like the node's. ``--dry-run`` (CI, no GPU): every config builds on the meta device (parameter count within the
expected range, the vision tower's output width equal to the language model's), and the
processor turns a few frames into the video tokens the config expects.

Usage: ``scripts/gpu_check.sh [--dry-run|--tiny|--preflight] [--out gpu_check.json] [--questions 3]
[--families a,b]``
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_check_preflight as preflight  # noqa: E402  (standard library only)

CONFIGS = Path(__file__).resolve().parent / "gpu_configs"
QUESTION = (
    "[N.{i}] What colour fills segment {k}?\nA. red\nB. blue\nC. green\nD. white\nAnswer with the option's letter."
)
GEN = {"max_new_tokens": 16, "temperature": 0, "do_sample": False, "until": ["\n\n"]}
#: bf16 on a GPU: the largest first-step logit difference between the two paths still taken as the
#: same computation, relative to the largest logit (a prefill split in two rounds differently;
#: a wrong position layout moves logits by far more); float32 (--tiny) is held to 1e-4 absolute
LOGIT_TOLERANCE_BF16 = 0.05


def load_spec(name: str) -> dict[str, Any]:
    """The config of ``name``, with its family's adapter id and the checkpoint ``model_type`` of the
    class it builds (from the family's declaration, ``gpu_check_preflight.family_modules``)."""
    spec = dict(json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8")))
    fam = preflight.family_modules()[name]
    return {**spec, "model_id": fam.model_id, "model_type": fam.model_type}


def adapter_class(spec: dict[str, Any]) -> Any:
    from naru_eval.adapters.registry import adapter_class as registered_class

    return registered_class(spec["model_id"])


def lmms_eval_stand_in() -> None:
    """The two names ``naru_eval.adapters.base`` imports from lmms-eval, so that the check never
    imports lmms-eval (the GPU image has none, and it pulls in far more than answering needs):
    the adapters subclass its ``lmms`` only to be found by its registry, and this check calls
    ``respond`` directly. lmms-eval's ``lmms.__init__`` sets the single-process rank and world
    size; so does this one."""
    if "lmms_eval" in sys.modules:  # already imported for real (e.g. a test process)
        return

    class lmms:  # noqa: N801  (lmms-eval's name)
        def __init__(self) -> None:
            self._rank, self._world_size = 0, 1

        @property
        def rank(self) -> int:
            return self._rank

        @property
        def world_size(self) -> int:
            return self._world_size

    names = ("lmms_eval", "lmms_eval.api", "lmms_eval.api.model", "lmms_eval.api.instance")
    mods = {n: types.ModuleType(n) for n in names}
    mods["lmms_eval.api.model"].lmms = lmms  # type: ignore[attr-defined]
    mods["lmms_eval.api.instance"].Instance = object  # type: ignore[attr-defined]
    sys.modules.update(mods)


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def shrink(spec: dict[str, Any]) -> dict[str, Any]:
    """``--tiny``: the same family at toy width and depth (head size, and so M-RoPE sections,
    kept; a config's own ``tiny`` overrides where the family has more to shrink), for running this
    script's GPU path on a CPU."""
    spec = json.loads(json.dumps(spec))
    spec["expect_params_b"] = [0.0, 1.0]
    if "tiny" in spec:
        return merged(spec, spec.pop("tiny"))
    t, v = spec["text_config"], spec["vision_config"]
    t.update(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
    t.setdefault("head_dim", 128)
    if "depth" in v:  # Qwen
        v.update(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=256)
        v.update({k: [0] for k in ("fullatt_block_indexes", "deepstack_visual_indexes") if k in v})
    else:  # InternViT
        v.update(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2)
    return spec


def tokenizer_and_processor(spec: dict[str, Any]) -> tuple[Any, Any, dict[str, int]]:
    """The family's real processor classes (their default sizes) over a tokenizer trained here."""
    import transformers as tf

    from tests.helpers import tiny_models as tm

    kind = spec["model_type"]
    if kind == "internvl":
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
    if kind == "nemotron_h_omni":
        tok = tm.train_tokenizer(tm.NEMOTRON_SPECIAL, extra_special_tokens={"video_token": "<video>"})
        tiny = spec["text_config"]["hidden_size"] < 1024
        return (
            tok,
            tm.nemotron_processor(tok, patches=16 if tiny else 1024),
            tm._ids(tok, [*tm.NEMOTRON_SPECIAL, "<video>"]),
        )
    if kind == "glm4v":
        tok = tm.train_tokenizer(tm.GLM_SPECIAL)
        proc = tf.Glm4vProcessor(
            image_processor=tf.Glm4vImageProcessor(),
            video_processor=tf.Glm4vVideoProcessor(),
            tokenizer=tok,
            chat_template=tm.GLM_TEMPLATE,
        )
        return tok, proc, tm._ids(tok, tm.GLM_SPECIAL)
    tok = tm.train_tokenizer(tm.QWEN_SPECIAL)
    if kind == "qwen2_5_vl":
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
    kind = spec["model_type"]
    if kind == "internvl":
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
    if kind == "glm4v":
        from tests.helpers import tiny_models as tm

        text.update(tm.glm_text_ids(ids))
        return tf.Glm4vConfig(text_config=text, vision_config=spec["vision_config"], **tm.glm_token_ids(ids))
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    text.update(bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    if kind == "nemotron_h_omni":
        return tf.NemotronH_Omni_Reasoning_V3_Config(
            text_config=text,
            vision_config=spec["vision_config"] or None,
            projector_hidden_size=spec["projector_hidden_size"],
            vision_hidden_size=spec["vision_hidden_size"],
            image_token_id=ids["<image>"],
            video_token_id=ids["<video>"],
            video_pruning_rate=spec["video_pruning_rate"],
        )
    return getattr(tf, spec["config_class"])(
        text_config=text,
        vision_config=spec["vision_config"],
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )


def attention(device: str) -> str:
    """flash-attention 2 on a GPU where the package is installed, else PyTorch's SDPA."""
    import importlib.util

    return "flash_attention_2" if device == "cuda" and importlib.util.find_spec("flash_attn") else "sdpa"


def build_model(spec: dict[str, Any], config: Any, device: str, dtype: str = "bfloat16") -> Any:
    import torch
    import transformers as tf

    cls = getattr(tf, spec["class"])
    kw = {} if device == "meta" else {"attn_implementation": attention(device)}
    with torch.device(device):
        model = cls._from_config(config, dtype=getattr(torch, dtype), **kw)
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
    cls = adapter_class(spec)
    a = cls(pretrained=f"gpu_check/{spec['model_id']}", store="false", **{k: str(v) for k, v in args.items()})
    a.model, a.processor = model, processor  # built above: from_pretrained would download
    a.model.generation_config.pad_token_id = processor.tokenizer.pad_token_id
    return a


def requests(video: Path, n: int) -> list[Any]:
    from naru_eval.adapters.request import NaruRequest

    return [
        NaruRequest({"question_id": f"q{i}"}, QUESTION.format(i=i, k=i % 3 + 1), [str(video)], GEN, "naru_mcq", i)
        for i in range(n)
    ]


def dry_run(name: str, video: Path) -> dict[str, Any]:
    """Meta-device build and processor shapes: no GPU, no weights."""
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
    inputs = a.builder.build_inputs(r, a.sampled(r))
    kind = spec["model_type"]
    # GLM-4.1V writes a video's frames as image tokens between its video markers
    token = config.image_token_id if kind in ("internvl", "nemotron_h_omni", "glm4v") else config.video_token_id
    n_video = int((inputs["input_ids"] == token).sum())
    if kind == "internvl":
        want_video = 4 * config.image_seq_length
    elif kind == "nemotron_h_omni":  # 2-frame tubelets of patches / 4 tokens (2x2 pixel shuffle)
        want_video = 4 // 2 * proc.video_processor.video_target_num_patches // 4
    else:
        grid = inputs["video_grid_thw"][0].tolist()
        want_video = grid[0] * grid[1] * grid[2] // vis.spatial_merge_size**2
    checks = {
        "params_in_range": lo <= n_params <= hi,
        "vision_out_matches_text": vis_out is None or vis_out == text_hidden,
        "video_tokens_match": n_video == want_video,
        "split_on_token_boundary": a.generator.split_prompt(r) is not None,
    }
    return {
        "family": spec["model_id"],
        "params_b": round(n_params, 3),
        "video_tokens_4_frames": n_video,
        "official_sampling": official_sampling(spec),
        "checks": checks,
        "ok": all(checks.values()),
    }


def official_sampling(spec: dict[str, Any]) -> dict[str, Any]:
    """The family's declared default sampling (its official row's)."""
    default = adapter_class(spec).family.default.sampling
    return {"frames": default.frames, "fps": default.fps}


def family_args(spec: dict[str, Any], tiny: bool) -> dict[str, Any]:
    """The model args of the run: the official sampling (tiny: 8 frames, or a family sampling by
    rate at its rate, through qwen-vl-utils as at full size), answers without reasoning (the
    questions' budget) where the family reasons."""
    cls = adapter_class(spec)
    rate = cls.family.default.sampling.fps
    out: dict[str, Any] = {}
    if tiny:
        out = {"fps": rate} if rate is not None else {"num_frames": 8}
    if "enable_thinking" in cls.Args.model_fields:
        out["enable_thinking"] = "false"
    return out


def gpu_run(name: str, video: Path, questions: int, tiny: bool = False) -> dict[str, Any]:
    import torch

    from tests.helpers.families import FirstStep

    spec = shrink(load_spec(name)) if tiny else load_spec(name)
    device = "cpu" if tiny else "cuda"
    cuda = device == "cuda"
    args = family_args(spec, tiny)
    _, proc, ids = tokenizer_and_processor(spec)
    config = build_config(spec, ids)
    t0 = time.perf_counter()
    # tiny: float32, so the two paths' logits can be held to float32 rounding
    model = build_model(spec, config, device, dtype="float32" if tiny else "bfloat16")
    if cuda:
        torch.cuda.synchronize()
    out: dict[str, Any] = {
        "family": spec["model_id"],
        "build_s": round(time.perf_counter() - t0, 1),
        "attention": str(model.config._attn_implementation),
        "dtype": str(model.dtype).removeprefix("torch."),
        "sampling": {k: v for k, v in args.items() if k in ("num_frames", "fps")} or "official",
    }
    texts, records = {}, {}
    warm = adapter_for(spec, model, proc, device=device, **args)
    warm.respond(requests(video, 1)[0]._replace(videos=[]))  # CUDA start-up outside the timings
    for mode, shared in (("shared", True), ("per_question", False)):
        a = adapter_for(spec, model, proc, device=device, shared_prefix=shared, **args)
        reqs = requests(video, questions)
        sampled = a.sampled(reqs[0])  # decoded before timing (the frame cache)
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        rec = FirstStep(a)
        start = time.perf_counter()
        answers = [a.respond(r) for r in reqs]
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        rec.restore()
        texts[mode], records[mode] = [x.text for x in answers], rec
        out[mode] = {
            "s_per_question": round(wall / questions, 3),
            "wall_s": round(wall, 3),
            "frames": int(len(sampled.frames)),
            "frame_size": list(sampled.frames.shape[1:3]),
            "input_tokens": answers[0].usage["input_tokens"],
            **a.generator.stats,
            "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        }
        a.finish()
    out["positions"] = warm.provenance()["positions"]
    out["max_abs_logit_diff"] = records["shared"].max_abs_diff(records["per_question"])
    out["identical_answers"] = texts["shared"] == texts["per_question"]
    out["speedup"] = round(out["per_question"]["wall_s"] / out["shared"]["wall_s"], 2)
    out["logit_scale"] = max(float(x.abs().max()) for x in records["per_question"].logits)
    # float32 (tiny): rounding only; bf16: a prefill split in two rounds differently (docs/performance.md)
    limit = 1e-4 if tiny else LOGIT_TOLERANCE_BF16 * out["logit_scale"]
    out["ok"] = out["max_abs_logit_diff"] <= limit
    del model
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return out


def imported_modules() -> dict[str, list[str]]:
    """What this process imported: the top-level third-party modules (what the node must provide,
    directly or as a dependency) and this repository's own modules (whose imports the tests hold
    against the GPU image and the wheel bundle)."""
    root = Path(__file__).resolve().parents[1]
    third, ours = set(), set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if "site-packages" in path or "dist-packages" in path:
            third.add(name.split(".")[0])
        elif path and Path(path).is_absolute() and Path(path).resolve().is_relative_to(root):
            ours.add(str(Path(path).resolve().relative_to(root)))
    return {"third_party": sorted(third), "repo_files": sorted(ours)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="run the GPU path on the CPU at toy size (a smoke test)")
    ap.add_argument("--preflight", action="store_true", help="only check the packages, then stop")
    ap.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--families", default=",".join(sorted(p.stem for p in CONFIGS.glob("*.json"))))
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "naru_gpu_check")
    args = ap.parse_args()
    families = [f for f in args.families.split(",") if f]
    check = preflight.report(families)  # before anything heavy: names what is missing, with the fix
    for line in check["problems"]:  # type: ignore[attr-defined]
        print(f"preflight: {line}", file=sys.stderr)
    skipped: dict[str, str] = check["skipped_families"]  # type: ignore[assignment]
    for fam, why in skipped.items():
        print(f"preflight: {fam} skipped: {why}", file=sys.stderr)
    if check["problems"] or args.preflight:
        raise SystemExit(1 if check["problems"] else 0)
    lmms_eval_stand_in()
    args.workdir.mkdir(parents=True, exist_ok=True)
    video = make_video(args.workdir, args.dry_run or args.tiny)
    result: dict[str, Any] = {"dry_run": args.dry_run, "tiny": args.tiny, "questions": args.questions, "families": []}
    if not args.dry_run and not args.tiny:
        import torch

        result["device"] = torch.cuda.get_device_name(0)
    for name in families:
        start = time.perf_counter()
        if name in skipped:
            r: dict[str, Any] = {"family": load_spec(name)["model_id"], "skipped": skipped[name]}
        else:
            try:
                r = dry_run(name, video) if args.dry_run else gpu_run(name, video, args.questions, args.tiny)
            except Exception as e:  # one family's failure is recorded; the others still run
                r = {"family": name, "ok": False, "error": f"{type(e).__name__}: {e}"}
        r["seconds"] = round(time.perf_counter() - start, 1)
        result["families"].append(r)
        print(json.dumps(r), flush=True)
        result["imported"] = imported_modules()
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")  # after each family
    ok = all(r.get("ok", "skipped" in r) for r in result["families"])
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
