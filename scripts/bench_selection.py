"""What frame selection (``select=``) costs, measured side by side in one run (docs/performance.md,
"Frame selection").

1. **The pool's decode** of a 1-hour 720p H.264 video: the sampler's frames at 1 fps (what a pool
   decodes, in the pool builder's chunks) against the full-decode floor (PyAV decoding every frame,
   threaded, converting none: with a GOP longer than the pool interval every frame must be decoded
   to reach each pool frame); and a keyframe-only pool (``skip_frame="NONKEY"``: the keyframes alone,
   one a second where the GOP is one second) beside them, on a 1-second-GOP copy.
2. **Embedding throughput** on this machine's CPU of a SigLIP-base-sized encoder (the default's
   geometry, random weights: the arithmetic is the same), images per second at 224 px in the pool's
   chunks; the GPU's from its arithmetic (below).
3. **A question's selection** (``its`` and ``aks``) over a 4-hour video's pool at 1 fps (14,400
   frames, 768-d embeddings): the query's dot products and the selector, per question.
4. **What chosen frames cost the shared prefix**: tokens prefilled per question on a tiny Qwen2.5-VL,
   uniform (one prefix per video) against ``select=its`` (one per question).

Run from the repository root: ``PYTHONPATH=. .venv/bin/python scripts/bench_selection.py``
(``--minutes`` for a shorter video, ``--skip-embed``/``--skip-prefix`` to leave parts out).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from naru_eval.core import selection as sel  # noqa: E402
from naru_eval.select.pool import CHUNK, POOL_MAX_PIXELS, pool_plan  # noqa: E402


def make_video(out: Path, minutes: float, gop_s: float, fps: int = 25) -> Path:
    """A 720p H.264 test video (ffmpeg's testsrc2 with light moving noise, at 2 Mb/s: a broadcast
    episode's rate), encoded once and reused. A 10-minute piece is encoded and joined end to end
    by the concat demuxer without re-encoding (the noise filter encodes at about real time x 4 on
    2 cores: an hour would take a quarter of an hour)."""
    path = out / f"hd_{minutes:g}min_gop{gop_s:g}s.mp4"
    if path.exists():
        return path
    out.mkdir(parents=True, exist_ok=True)
    piece_min = min(minutes, 10.0)
    piece = out / f"piece_{piece_min:g}min_gop{gop_s:g}s.mp4"
    gop = max(1, int(round(gop_s * fps)))
    if not piece.exists():
        cmd = [
            "ffmpeg", "-v", "error", "-y", "-f", "lavfi",
            "-i", f"testsrc2=size=1280x720:rate={fps}:duration={piece_min * 60:g}",
            "-vf", "noise=alls=4:allf=t", "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "2M", "-maxrate", "2M",
            "-bufsize", "4M", "-g", str(gop), "-keyint_min", str(gop), "-sc_threshold", "0", "-pix_fmt", "yuv420p",
            str(piece.with_suffix(".part.mp4")),
        ]  # fmt: skip
        print(f"encoding {piece} ...", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True)
        os.replace(piece.with_suffix(".part.mp4"), piece)
    copies = max(1, int(round(minutes / piece_min)))
    listing = out / f"{path.stem}.txt"
    listing.write_text("".join(f"file '{piece.name}'\n" for _ in range(copies)))
    tmp = path.with_suffix(".part.mp4")
    cmd = ["ffmpeg", "-v", "error", "-y", "-f", "concat", "-safe", "0", "-i", str(listing), "-c", "copy", str(tmp)]
    subprocess.run(cmd, check=True)
    os.replace(tmp, path)
    return path


def full_decode_floor(path: Path) -> float:
    """Seconds to decode every frame (threaded, nothing converted): the floor of any pool whose
    interval is shorter than the GOP."""
    import av

    t0 = time.perf_counter()
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        for _ in c.decode(s):
            pass
    return time.perf_counter() - t0


def keyframe_pool(path: Path) -> tuple[float, int]:
    """Seconds and frames of a keyframe-only pool: the decoder skips every non-key frame, and each
    keyframe is converted at the pool's cap."""
    import av

    from naru_eval.media.plan import target_size

    t0 = time.perf_counter()
    n = 0
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        s.codec_context.skip_frame = "NONKEY"
        w, h = target_size(s.codec_context.width, s.codec_context.height, POOL_MAX_PIXELS)
        for f in c.decode(s):
            f.reformat(width=w, height=h, format="rgb24").to_ndarray()
            n += 1
    return time.perf_counter() - t0, n


def pool_decode(path: Path, pool_fps: float = 1.0) -> tuple[float, int]:
    """Seconds and frames of the pool's decode as the pool builder does it: the sampler's frames at
    ``pool_fps``, in chunks, at the pool's pixel cap (the embedding left out)."""
    from naru_eval.media.sampler import sample_frames

    idx, _, _ = pool_plan(path, pool_fps)  # the frame index (built once, kept in memory)
    t0 = time.perf_counter()
    for at in range(0, len(idx), CHUNK):
        sample_frames(path, indices=[int(i) for i in idx[at : at + CHUNK]], max_pixels=POOL_MAX_PIXELS)
    return time.perf_counter() - t0, len(idx)


def embedding_rate(batches: int = 3) -> dict[str, float]:
    """Images and texts a second of a SigLIP-base-sized encoder on this CPU (224 px, chunks of 64)."""
    import torch
    from transformers import SiglipConfig, SiglipModel

    model = SiglipModel(SiglipConfig()).eval()  # base: 768-d, 12 layers per tower, 16-px patches, 224 px
    params = sum(p.numel() for p in model.vision_model.parameters())
    pixels = torch.randn(CHUNK, 3, 224, 224)
    with torch.inference_mode():
        model.get_image_features(pixel_values=pixels[:2])  # warm up
        t0 = time.perf_counter()
        for _ in range(batches):
            model.get_image_features(pixel_values=pixels)
        img_s = (time.perf_counter() - t0) / (batches * CHUNK)
        ids = torch.randint(0, 1000, (1, 64))
        t0 = time.perf_counter()
        for _ in range(10):
            model.get_text_features(input_ids=ids)
        txt_s = (time.perf_counter() - t0) / 10
    tokens = (224 // 16) ** 2
    return {
        "vision_params_m": params / 1e6,
        "cpu_images_per_s": 1.0 / img_s,
        "cpu_query_ms": txt_s * 1000,
        # 2 FLOPs per parameter per token (the attention's own products are ~5 % more at 196 tokens)
        "gflops_per_image": 2 * params * tokens / 1e9,
    }


def selection_ms(pool: int = 14_400, dim: int = 768, n: int = 32, reps: int = 20) -> dict[str, float]:
    """Milliseconds per question: the scores over a 4-hour pool and each selector."""
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((pool, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    q = emb[123]
    out = {}
    for name, pick in (
        ("its", lambda s: sel.its(s, n, sel.DEFAULT_ALPHA)),
        ("aks", lambda s: sel.aks(s, n, sel.DEFAULT_AKS_THRESHOLD, sel.DEFAULT_AKS_DEPTH)),
        ("random", lambda s: sel.random_subset(pool, n, sel.seeded("v", "q", 0))),
    ):
        t0 = time.perf_counter()
        for _ in range(reps):
            pick(emb @ q)
        out[f"{name}_ms"] = (time.perf_counter() - t0) / reps * 1000
    return out


def prefix_tokens(tmp: Path, questions: int = 4) -> dict[str, float]:
    """Tokens prefilled per question on a tiny Qwen2.5-VL over one video: uniform (the shared prefix)
    against select=its (a prefix per question)."""
    from naru_eval.settings import Settings
    from tests.helpers.colour_encoder import build_colour_encoder, write_colour_video
    from tests.helpers.families import ALL_FAMILIES, make, model_type, request
    from tests.helpers.tiny_models import build_qwen2_5_vl

    os.environ[Settings.variable("select_cache")] = str(tmp / "pools")
    family = next(m for m in ALL_FAMILIES if model_type(m) == "qwen2_5_vl")
    ckpt = build_qwen2_5_vl(tmp / "q25")
    enc = build_colour_encoder(tmp / "enc")
    video = write_colour_video(tmp / "v.mp4")
    out: dict[str, float] = {}
    for name, extra in (("uniform", {}), ("its", {"select": "its", "select_encoder": str(enc)})):
        a = make(family, ckpt, num_frames=16, **extra)
        for k in range(questions):
            doc = {"question_id": f"q{k}", "question": ["When is it blue?", "When is it red?"][k % 2]}
            a.respond(request(video, qid=f"q{k}")._replace(doc=doc))
        st = a.generator.stats
        out[f"{name}_prefill_tokens_per_question"] = st["prefill_tokens"] / questions
        out[f"{name}_prefix_prefills"] = st["prefix_prefills"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--work", type=Path, default=Path("/tmp/naru-bench-selection"))
    ap.add_argument("--skip-embed", action="store_true")
    ap.add_argument("--skip-prefix", action="store_true")
    args = ap.parse_args()
    if shutil.which("ffmpeg") is None:
        raise SystemExit("the ffmpeg CLI makes the test video: install it (apt-get install ffmpeg)")
    result: dict[str, object] = {"load_average": os.getloadavg()[0], "minutes": args.minutes}
    long_gop = make_video(args.work, args.minutes, gop_s=2.0)
    short_gop = make_video(args.work, args.minutes, gop_s=1.0)
    pool_s, pool_n = pool_decode(long_gop)
    floor_s = full_decode_floor(long_gop)
    key_s, key_n = keyframe_pool(short_gop)
    result["decode"] = {
        "pool_frames": pool_n,
        "pool_s": round(pool_s, 2),
        "full_decode_floor_s": round(floor_s, 2),
        "pool_over_floor": round(pool_s / floor_s, 3),
        "keyframe_pool_frames": key_n,
        "keyframe_pool_s": round(key_s, 2),
        "keyframe_over_floor": round(key_s / floor_s, 3),
    }
    if not args.skip_embed:
        result["embedding"] = {k: round(v, 2) for k, v in embedding_rate().items()}
    result["selection"] = {k: round(v, 2) for k, v in selection_ms().items()}
    if not args.skip_prefix:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            result["prefix"] = prefix_tokens(Path(tmp))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
