"""What each family's model receives from our frames against its reference pipeline (native-size
decode, then the family's own resize), measured on the same frames, in 0-255 levels.

For each family: the reference is the family's resize applied to the native-size frames (decoded
with the frame's own colour, as ffmpeg converts them); "ours now" is what the adapter hands the
model before the sampler's exact size (the sampler's frames at its pixel budget, then the
adapter's or the processor's resize); "size=" is what the adapters ask for now, the family's exact frame size
(``sample_frames(..., size=(h, w))``: torchvision's antialiased bicubic from the native frame),
then the same processor (``resize="uint8"`` for InternVL, whose processor resizes uint8 frames
with torchvision v2's fixed-point kernel). Qwen: qwen-vl-utils' ``fetch_video`` resize
(``torchvision.transforms.functional.resize(BICUBIC, antialias=True)``) to the plan's size.
InternVL3.5: ``InternVLVideoProcessor`` at 448x448. Nemotron-Omni: its video processor (1024
16-px patches, an aspect-preserving tile; float antialiased bicubic, not rounded to uint8).

    PYTHONPATH=. .venv/bin/python scripts/compare_resize.py
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from naru_eval.media.plan import DEFAULT_MAX_PIXELS
from naru_eval.media.sampler import sample_frames
from tests.helpers import video_corpus as vc

MEAN = np.array([0.48145466, 0.4578275, 0.40821073])  # Nemotron's (CLIP's) normalisation
STD = np.array([0.26862954, 0.26130258, 0.27577711])


def levels(pixel_values: Any, mean: Any, std: Any) -> np.ndarray:
    """A processor's normalised (..., 3, H, W) output back in 0-255 levels."""
    x = pixel_values.float().numpy() if hasattr(pixel_values, "numpy") else np.asarray(pixel_values)
    x = np.moveaxis(x.reshape(-1, *x.shape[-3:]), 1, -1)
    return (x * np.asarray(std) + np.asarray(mean)) * 255.0


def diff(a: np.ndarray, b: np.ndarray) -> str:
    if a.shape != b.shape:
        return f"shapes differ: {a.shape} vs {b.shape}"
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return f"max {d.max():.2f}, mean {d.mean():.3f}"


def qwen(path: Path, n: int) -> None:
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as tvf

    from naru_eval.adapters.qwen_sampling import qwen_video_plan
    from naru_eval.media.video import probe_video

    def resize_frames(frames: np.ndarray, height: int, width: int) -> np.ndarray:
        """The adapters' resize before the sampler's ``size=``: torch's antialiased bicubic on the
        frames decoded to the plan's pixel limit (two resizes)."""
        x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float()
        y = torch.nn.functional.interpolate(
            x, size=(height, width), mode="bicubic", align_corners=False, antialias=True
        )
        return y.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()

    info = probe_video(path)
    plan = qwen_video_plan(info.frame_count, info.fps, info.height, info.width, fps=2.0, patch_size=16, max_frames=n)
    native = sample_frames(path, num_frames=plan.nframes, max_pixels=None).frames
    video = torch.from_numpy(native).permute(0, 3, 1, 2).contiguous()
    ref = tvf.resize(video, [plan.height, plan.width], interpolation=InterpolationMode.BICUBIC, antialias=True)
    ref_np = ref.permute(0, 2, 3, 1).numpy()
    now = resize_frames(
        sample_frames(path, num_frames=plan.nframes, max_pixels=plan.max_pixels).frames, plan.height, plan.width
    )
    new = sample_frames(path, num_frames=plan.nframes, size=(plan.height, plan.width)).frames
    print(
        f"  Qwen ({plan.nframes} frames, {plan.width}x{plan.height}): ours now {diff(now, ref_np)}; size= {diff(new, ref_np)}"
    )


def internvl(path: Path, n: int) -> None:
    from transformers import InternVLVideoProcessor

    proc = InternVLVideoProcessor(size={"height": 448, "width": 448})
    mean, std = proc.image_mean, proc.image_std

    def run(frames: np.ndarray) -> np.ndarray:
        out = proc(videos=[frames], return_tensors="pt", do_sample_frames=False)
        return levels(out["pixel_values_videos"], mean, std)

    ref = run(sample_frames(path, num_frames=n, max_pixels=None).frames)
    now = run(sample_frames(path, num_frames=n, max_pixels=DEFAULT_MAX_PIXELS).frames)
    new = run(sample_frames(path, num_frames=n, size=(448, 448), resize="uint8").frames)
    print(f"  InternVL3.5 (448x448): ours now {diff(now, ref)}; size= (resize=uint8) {diff(new, ref)}")


def nemotron(path: Path, n: int) -> None:
    from transformers import NemotronH_Omni_Reasoning_V3VideoProcessor

    proc = NemotronH_Omni_Reasoning_V3VideoProcessor(
        norm_mean=MEAN.tolist(), norm_std=STD.tolist(), video_target_num_patches=1024
    )

    def run(frames: np.ndarray) -> np.ndarray:
        out = proc(videos=[frames], return_tensors="pt", do_sample_frames=False)
        return np.asarray(out["pixel_values_videos"].float().numpy())

    native = sample_frames(path, num_frames=n, max_pixels=None).frames
    h, w = native.shape[1:3]
    pw, ph = proc._compute_target_patches(h, w)
    tile = (ph * proc.patch_size, pw * proc.patch_size)
    ref = run(native)
    now = run(sample_frames(path, num_frames=n, max_pixels=512 * 512).frames)
    new = run(sample_frames(path, num_frames=n, size=tile).frames)
    scale = float(STD.max()) * 255.0  # a normalised unit in levels, at most
    for name, got in (("ours now", now), ("size=", new)):
        d = np.abs(got - ref) * scale if got.shape == ref.shape else None
        print(
            f"  Nemotron ({tile[1]}x{tile[0]} tile) {name}: "
            + (f"max {d.max():.2f}, mean {d.mean():.3f}" if d is not None else "shapes differ")
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for width, height in ((1280, 720), (1920, 1080)):
            path = vc.encode(
                Path(d) / f"{width}x{height}.mp4",
                *vc.cfr(24, 24),
                options=vc.x264(12),
                size=(width, height),
                colour=(vc.BT709, vc.LIMITED),
                image=vc.colour_image,
            )
            print(f"{width}x{height}, BT.709, {args.frames} frames:")
            qwen(path, args.frames)
            internvl(path, args.frames)
            nemotron(path, args.frames)


if __name__ == "__main__":
    main()
