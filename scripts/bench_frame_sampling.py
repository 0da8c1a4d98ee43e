"""Benchmark: exact frame sampling on a long 720p video (issue #3).

Measured side by side in one process, on a synthetic H.264 video (1280x720, 5-second GOPs,
B-frames) whose frames show their own index, generated once into ``--cache-dir``:

* ``sample_frames``: ``naru_eval.video.sample_frames(path, num_frames=N)``, exact mode, as the
  model adapters call it (probe + frame-count check + decoding, default ``max_pixels``);
* ``seek floor``: minimal PyAV code that, for each of the N targets, seeks to the keyframe before
  it and decodes forward to it (about N x half a GOP of decoded frames), same output size;
* ``full decode``: one sequential decode of the whole video keeping the target frames (naive);
* ``decord``: ``VideoReader(path).get_batch(targets)``, native size and resized at load, when
  decord is importable (not a project dependency: ``pip install decord`` to include it);
* approximate mode (``approximate=True``) vs exact at the largest N;
* ``FrameCache``: ten questions on one video vs one;
* peak RSS growth of one ``sample_frames`` call at the largest N, in a fresh child process (so
  earlier measurements in this process cannot mask it).

Every returned frame is checked: it must show the index it claims (``read_frame_index``), and
the indices must be the uniform segment centres.

Targets (issue #3): sample_frames <= 1.2x the seek floor; >= 1.5x faster than decord at N=128;
peak memory < 1 GB at N=128; approximate >= 10x faster than exact at N=128; ten questions on
one video cost one decode.

    PYTHONPATH=. .venv/bin/python scripts/bench_frame_sampling.py [--minutes 30] [--fps 24] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from naru_eval.frame_cache import FrameCache
from naru_eval.synthetic import read_frame_index, write_indexed_video
from naru_eval.video import (
    DEFAULT_MAX_PIXELS,
    _verified_count,
    count_frames,
    probe_video,
    sample_frames,
    target_size,
    uniform_indices,
)

WIDTH, HEIGHT = 1280, 720
GOP_SECONDS = 5


# --------------------------------------------------------------------------- the test video


def video_path(cache_dir: Path, minutes: float, fps: int) -> Path:
    return cache_dir / f"indexed_{minutes:g}min_{fps}fps_gop{GOP_SECONDS * fps}_{WIDTH}x{HEIGHT}.mp4"


def ensure_video(cache_dir: Path, minutes: float, fps: int) -> tuple[Path, float | None]:
    """The test video, encoded once (atomically) and reused; returns (path, encode seconds or None)."""
    path = video_path(cache_dir, minutes, fps)
    if path.exists():
        return path, None
    n_frames = int(round(minutes * 60 * fps))
    if n_frames > 65536:
        raise SystemExit(f"{n_frames} frames: the index code holds 16 bits (65,536 frames); lower --minutes/--fps")
    tmp = path.with_name(path.stem + f".part{os.getpid()}.mp4")
    print(f"encoding {path} ({n_frames} frames) ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    write_indexed_video(tmp, n_frames, fps=fps, gop=GOP_SECONDS * fps, size=(WIDTH, HEIGHT))
    os.replace(tmp, path)
    return path, time.perf_counter() - t0


# --------------------------------------------------------------------------- the contenders


def seek_floor(path: Path, targets: list[int], fps: float, size: tuple[int, int]) -> list[np.ndarray]:
    """For each target: seek to the keyframe before it, decode forward to it. Nothing else."""
    import av

    w, h = size
    out = []
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        tb = float(s.time_base)
        start = s.start_time or 0
        for target in targets:
            c.seek(start + int(round(target / fps / tb)), stream=s, backward=True, any_frame=False)
            for f in c.decode(s):
                if round((f.pts - start) * tb * fps) >= target:
                    out.append(f.reformat(width=w, height=h, format="rgb24").to_ndarray())
                    break
    return out


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


def decord_batch(path: Path, n: int, size: tuple[int, int] | None) -> tuple[np.ndarray, list[int]]:
    """decord as lmms-eval's video models use it: open, uniform indices, ``get_batch``."""
    from decord import VideoReader, cpu

    kw = {"width": size[0], "height": size[1]} if size else {}
    vr = VideoReader(str(path), ctx=cpu(0), **kw)
    idx = uniform_indices(len(vr), n)
    return vr.get_batch(idx).asnumpy(), idx


def decord_available() -> str | None:
    try:
        import decord

        return getattr(decord, "__version__", "?")
    except Exception:
        return None


# --------------------------------------------------------------------------- measuring


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median seconds over ``repeat`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def shown(frames: Any) -> list[int]:
    return [read_frame_index(f) for f in frames]


def mem_child(spec: str, path: str) -> None:
    """Run in a fresh process: peak RSS growth (ru_maxrss) of one call, printed as JSON."""
    import av  # noqa: F401  (imports are part of the baseline, not the growth)

    info = probe_video(path)
    kind, n = spec.split(":")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    if kind == "sample_frames":
        res = sample_frames(path, num_frames=int(n)).frames
    elif kind == "sample_frames_fullres":
        res = sample_frames(path, num_frames=int(n), max_pixels=None).frames
    elif kind == "decord":
        res, _ = decord_batch(Path(path), int(n), None)
    else:
        raise SystemExit(f"unknown {kind}")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"growth_mib": (after - before) / 1024, "baseline_mib": before / 1024,
                      "result_mib": res.nbytes / 2**20, "w": info.width}))  # fmt: skip


def run_mem(spec: str, path: Path) -> dict[str, float]:
    r = subprocess.run(
        [sys.executable, __file__, "--_mem-child", spec, "--_video", str(path)],
        capture_output=True, text=True, check=True, env=os.environ.copy(),
    )  # fmt: skip
    return json.loads(r.stdout.strip().splitlines()[-1])


def fmt_s(x: float) -> str:
    return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--fps", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="8,32,128", help="comma-separated N")
    ap.add_argument("--cache-dir", default="/tmp/naru_bench")
    ap.add_argument("--no-decord", action="store_true")
    ap.add_argument("--json", help="also write the raw numbers here")
    ap.add_argument("--_mem-child", dest="mem_child", help=argparse.SUPPRESS)
    ap.add_argument("--_video", dest="video", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mem_child:
        mem_child(args.mem_child, args.video)
        return
    os.environ.pop("NARU_FRAME_CACHE", None)  # the cache measurement is in-memory only

    sizes = [int(x) for x in args.sizes.split(",")]
    n_big = max(sizes)
    path, enc_s = ensure_video(Path(args.cache_dir), args.minutes, args.fps)
    size_mb = path.stat().st_size / 1e6
    info = probe_video(path)
    total = int(round(args.minutes * 60 * args.fps))
    out_size = target_size(info.width, info.height, DEFAULT_MAX_PIXELS)
    dec_ver = None if args.no_decord else decord_available()
    print(
        f"video: {path} ({size_mb:.1f} MB, {info.width}x{info.height}, {args.fps} fps, GOP {GOP_SECONDS * args.fps}"
        f" frames = {GOP_SECONDS} s, {total} frames, {info.duration_s:.0f} s)"
        + (f"; encoded in {enc_s:.0f} s" if enc_s else "; reused"),
        file=sys.stderr,
        flush=True,
    )
    assert (info.width, info.height) == (WIDTH, HEIGHT)

    sample_frames(path, num_frames=8)  # warm: imports, page cache
    rows: dict[int, dict[str, Any]] = {}
    problems: list[str] = []

    for n in sizes:
        want = uniform_indices(total, n)
        r: dict[str, Any] = {"n": n}
        r["sf"], s = timed(lambda n=n: sample_frames(path, num_frames=n), args.repeat)
        ok = list(s.indices) == want and shown(s.frames) == want and s.exact and s.info.frame_count == total
        r["sf_ok"] = ok
        if not ok:
            problems.append(f"sample_frames N={n}: indices/pixels do not match the segment centres")
        r["floor"], fl = timed(lambda n=n, want=want: seek_floor(path, want, info.fps, out_size), args.repeat)
        if shown(fl) != want:
            problems.append(f"seek floor N={n}: wrong frames")
        if dec_ver:
            r["decord"], (arr, idx) = timed(lambda n=n: decord_batch(path, n, None), args.repeat)
            r["decord_ok"] = idx == want and shown(arr) == want
            r["decord_rs"], (arr, idx) = timed(lambda n=n: decord_batch(path, n, out_size), args.repeat)
            r["decord_rs_ok"] = idx == want and shown(arr) == want
        rows[n] = r
        print(f"N={n}: {r}", file=sys.stderr, flush=True)

    # Where sample_frames' time goes beyond the targets' decoding (largest N).
    over: dict[str, float] = {}
    over["probe"], _ = timed(lambda: probe_video(path), args.repeat)
    over["count"], _ = timed(
        lambda: _verified_count(path, info.frame_count if info.frame_count_exact else count_frames(path), info),
        args.repeat,
    )
    over["sf_info"], _ = timed(lambda: sample_frames(path, num_frames=n_big, info=info), args.repeat)

    # Approximate vs exact at the largest N.
    approx_s, a = timed(lambda: sample_frames(path, num_frames=n_big, approximate=True), args.repeat)
    if shown(a.frames) != list(a.indices):
        problems.append("approximate: frames do not show the indices reported")
    approx_err = float(a.timestamp_error_s.max())

    # Ten questions on one video: one decode.
    def one_get() -> FrameCache:
        c = FrameCache()
        c.get(path, num_frames=32)
        return c

    def ten_gets() -> FrameCache:
        c = FrameCache()
        first = c.get(path, num_frames=32)
        for _ in range(9):
            assert c.get(path, num_frames=32) is first
        return c

    cache1_s, _ = timed(one_get, args.repeat)
    cache10_s, c10 = timed(ten_gets, args.repeat)

    # The naive approach: decode everything once, keep every N's targets.
    wanted = set().union(*(uniform_indices(total, n) for n in sizes))
    t0 = time.perf_counter()
    full = full_decode(path, wanted, info.fps, out_size)
    full_s = time.perf_counter() - t0
    if any(read_frame_index(full[i]) != i for i in sorted(wanted)) or len(full) != len(wanted):
        problems.append("full decode: wrong frames")

    mem = run_mem(f"sample_frames:{n_big}", path)
    mem_full = run_mem(f"sample_frames_fullres:{n_big}", path)
    mem_dec = run_mem(f"decord:{n_big}", path) if dec_ver else None

    # ---------------------------------------------------------------- report
    print()
    print(
        f"Video: {args.minutes:g} min, {WIDTH}x{HEIGHT}, {args.fps} fps, H.264 (libx264 ultrafast, crf 18, 2 B-frames),"
        f" GOP {GOP_SECONDS * args.fps} frames ({GOP_SECONDS} s), {total} frames, {size_mb:.1f} MB."
        f" Output frames {out_size[0]}x{out_size[1]} (default max_pixels). Median of {args.repeat}"
        f" (full decode: once). {os.cpu_count()} CPUs, Python {platform.python_version()}, decord: "
        + (dec_ver or "not installed")
        + "."
    )
    print()
    head = "| N | sample_frames (exact) | seek floor | sample_frames / floor | full decode | full / sample_frames |"
    sep = "|---:|---:|---:|---:|---:|---:|"
    if dec_ver:
        head += " decord native | decord resized | decord (faster) / sample_frames |"
        sep += "---:|---:|---:|"
    head += " frames correct |"
    sep += "---|"
    print(head)
    print(sep)
    for n in sizes:
        r = rows[n]
        line = (
            f"| {n} | {fmt_s(r['sf'])} | {fmt_s(r['floor'])} | {r['sf'] / r['floor']:.2f}x | {fmt_s(full_s)} |"
            f" {full_s / r['sf']:.1f}x |"
        )
        if dec_ver:
            best = min(r["decord"], r["decord_rs"])
            line += f" {fmt_s(r['decord'])} | {fmt_s(r['decord_rs'])} | {best / r['sf']:.2f}x |"
        ok = "yes" if r["sf_ok"] else "NO"
        if dec_ver:
            ok += f" (decord: {'yes' if r['decord_ok'] and r['decord_rs_ok'] else 'NO'})"
        line += f" {ok} |"
        print(line)
    print()
    rb = rows[n_big]
    print("| measurement | value | target | met |")
    print("|---|---:|---|---|")
    print(f"| sample_frames / seek floor, N={n_big} | {rb['sf'] / rb['floor']:.2f}x | <= 1.2x |"
          f" {'yes' if rb['sf'] / rb['floor'] <= 1.2 else 'no'} |")  # fmt: skip
    for n in sizes:
        if n != n_big:
            v = rows[n]["sf"] / rows[n]["floor"]
            print(f"| sample_frames / seek floor, N={n} | {v:.2f}x | <= 1.2x | {'yes' if v <= 1.2 else 'no'} |")
    if dec_ver:
        sp = min(rb["decord"], rb["decord_rs"]) / rb["sf"]
        print(f"| speed-up over decord (faster variant), N={n_big} | {sp:.2f}x | >= 1.5x | {'yes' if sp >= 1.5 else 'no'} |")
    else:
        print(f"| speed-up over decord, N={n_big} | decord not installed | >= 1.5x | not measured |")
    print(
        f"| peak RSS growth, sample_frames N={n_big}, default max_pixels | {mem['growth_mib']:.0f} MiB"
        f" (frames: {mem['result_mib']:.0f} MiB) | < 1 GB | {'yes' if mem['growth_mib'] < 1000 else 'no'} |"
    )
    print(f"| peak RSS growth, sample_frames N={n_big}, max_pixels=None (1280x720) | {mem_full['growth_mib']:.0f} MiB"
          f" (frames: {mem_full['result_mib']:.0f} MiB) | (context) | |")  # fmt: skip
    if mem_dec:
        print(f"| peak RSS growth, decord get_batch N={n_big} (1280x720) | {mem_dec['growth_mib']:.0f} MiB"
              f" (frames: {mem_dec['result_mib']:.0f} MiB) | (context) | |")  # fmt: skip
    sp = rb["sf"] / approx_s
    print(f"| approximate vs exact, N={n_big} | {fmt_s(approx_s)} vs {fmt_s(rb['sf'])} = {sp:.1f}x faster"
          f" (max timestamp error {approx_err:.2f} s) | >= 10x | {'yes' if sp >= 10 else 'no'} |")  # fmt: skip
    print(f"| FrameCache: 10 gets vs 1 (N=32) | {fmt_s(cache10_s)} vs {fmt_s(cache1_s)};"
          f" decodes={c10.stats.decodes}, memory hits={c10.stats.memory_hits} | 1 decode |"
          f" {'yes' if c10.stats.decodes == 1 else 'no'} |")  # fmt: skip
    print()
    print(f"sample_frames N={n_big} breakdown: probe_video {fmt_s(over['probe'])}, frame-count check"
          f" {fmt_s(over['count'])}, sample_frames with info= given {fmt_s(over['sf_info'])}"
          f" (vs {fmt_s(rb['sf'])} without).")  # fmt: skip
    print("correctness: " + ("every sample_frames frame shows the index it claims; indices = segment centres"
                             if not problems else "; ".join(problems)))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({
            "rows": rows, "full_decode_s": full_s, "approx_s": approx_s, "approx_err_s": approx_err,
            "cache1_s": cache1_s, "cache10_s": cache10_s, "mem": mem, "mem_fullres": mem_full, "mem_decord": mem_dec,
            "overheads": over, "problems": problems, "video": str(path), "decord": dec_ver,
        }, indent=2, default=str))  # fmt: skip
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
