"""The contenders :mod:`bench_frame_sampling` and :mod:`bench_first_touch` time beside ``sample_frames``:
the PyAV seek loop (the floor), a full sequential decode, decord and torchcodec (when importable:
not project dependencies), and the cost of turning a decoded frame into RGB."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from naru_eval.media.plan import uniform_indices


def seek_floor(path: Path, targets: list[int], fps: float, size: tuple[int, int], threads: str) -> list[np.ndarray]:
    """For each target: seek to the keyframe before it, decode forward to it. Nothing else."""
    import av

    w, h = size
    out = []
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = threads
        tb = float(s.time_base)
        start = s.start_time or 0
        for target in targets:
            c.seek(start + int(round(target / fps / tb)), stream=s, backward=True, any_frame=False)
            for f in c.decode(s):
                if round((f.pts - start) * tb * fps) >= target:
                    out.append(f.reformat(width=w, height=h, format="rgb24").to_ndarray())
                    break
    return out


def conversion_cost(path: Path, size: tuple[int, int], frames: int = 24, rounds: int = 7) -> dict[str, float]:
    """Milliseconds per frame to turn a decoded frame into RGB at the output size, interleaved:
    PyAV's plain ``reformat`` (BT.601, bilinear: the sampler before it read the frame's tags) and
    ``pixels.RGBConverter`` (the frame's matrix and range, bicubic); and, at native size then
    ``reference_resize`` to ``size``, what ``size=`` costs."""
    import av

    from naru_eval.media.pixels import RGBConverter, reference_resize

    with av.open(str(path)) as c:
        decoded = [f for f, _ in zip(c.decode(video=0), range(frames), strict=False)]
    w, h = size
    tagged, native = RGBConverter(), RGBConverter()
    contenders: dict[str, Callable[[Any], Any]] = {
        "plain": lambda f: f.reformat(width=w, height=h, format="rgb24").to_ndarray(),
        "tagged": lambda f: tagged(f, w, h),
        "exact": lambda f: reference_resize(native(f, f.width, f.height), h, w),
    }
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for rnd in range(rounds):
        keys = list(contenders)[rnd % 3 :] + list(contenders)[: rnd % 3]
        for key in keys:
            start = time.perf_counter()
            for f in decoded:
                contenders[key](f)
            times[key].append((time.perf_counter() - start) / len(decoded) * 1000)
    return {k: statistics.median(v) for k, v in times.items()}


def full_decode(path: Path, wanted: set[int], fps: float, size: tuple[int, int]) -> dict[int, np.ndarray]:
    """Decode every frame in order, keep the wanted ones (the naive approach)."""
    import av

    w, h = size
    out = {}
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        tb = float(s.time_base)
        start = s.start_time or 0
        for f in c.decode(s):
            idx = round((f.pts - start) * tb * fps)
            if idx in wanted:
                out[idx] = f.reformat(width=w, height=h, format="rgb24").to_ndarray()
    return out


def decord_batch(path: Path, n: int) -> tuple[np.ndarray, list[int]]:
    """decord as lmms-eval's video models use it: open, uniform indices, ``get_batch``."""
    from decord import VideoReader, cpu

    vr = VideoReader(str(path), ctx=cpu(0))
    idx = uniform_indices(len(vr), n)
    return vr.get_batch(idx).asnumpy(), idx


def torchcodec_batch(path: Path, n: int) -> tuple[np.ndarray, list[int]]:
    """torchcodec in exact mode (it scans the file when opened), NHWC uint8."""
    from torchcodec.decoders import VideoDecoder

    dec = VideoDecoder(str(path), seek_mode="exact", dimension_order="NHWC")
    idx = uniform_indices(len(dec), n)
    return dec.get_frames_at(idx).data.numpy(), idx


def available(module: str) -> str | None:
    """The module's version when it imports and loads, else None (with the reason on stderr)."""
    try:
        mod = __import__(module)
        if module == "torchcodec":
            from torchcodec.decoders import VideoDecoder  # noqa: F401  (loads the FFmpeg libraries)
        return getattr(mod, "__version__", "?")
    except Exception as e:
        print(f"{module} not measured: {type(e).__name__}: {str(e).splitlines()[0][:200]}", file=sys.stderr)
        return None
