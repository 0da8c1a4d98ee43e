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
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from naru_eval.core.synthetic import read_frame_index, write_indexed_video
from naru_eval.media.frame_cache import FrameCache
from naru_eval.media.video import (
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


class Times:
    """Seconds per measurement name. Repeats are interleaved (every contender once per round),
    so a load change on the machine hits all contenders alike."""

    def __init__(self) -> None:
        self.runs: dict[str, list[float]] = {}
        self.last: dict[str, Any] = {}

    def __call__(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        result = fn()
        self.runs.setdefault(name, []).append(time.perf_counter() - t0)
        self.last[name] = result
        return result

    def med(self, name: str) -> float:
        return statistics.median(self.runs[name])

    def best(self, name: str) -> float:
        return min(self.runs[name])


def shown(frames: Any) -> list[int]:
    return [read_frame_index(f) for f in frames]


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def mem_child(spec: str, path: str) -> None:
    """Run in a fresh process: peak RSS growth of one call, printed as JSON.

    Peak = VmHWM, reset just before the call (``/proc/self/clear_refs``); growth = peak minus
    the RSS before the call. (``ru_maxrss`` is no use here: Linux carries the parent's value
    into a forked child.)
    """
    import av  # noqa: F401  (imports are part of the baseline, not the growth)

    info = probe_video(path)
    kind, n = spec.split(":")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak-RSS counter
    except OSError:
        pass
    before = _status_kib("VmRSS")
    if kind == "sample_frames":
        res = sample_frames(path, num_frames=int(n)).frames
    elif kind == "sample_frames_fullres":
        res = sample_frames(path, num_frames=int(n), max_pixels=None).frames
    elif kind == "decord":
        res, _ = decord_batch(Path(path), int(n), None)
    else:
        raise SystemExit(f"unknown {kind}")
    peak = _status_kib("VmHWM")
    print(json.dumps({"growth_mib": (peak - before) / 1024, "baseline_mib": before / 1024,
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
    problems: list[str] = []
    T = Times()
    claimed = info.frame_count if info.frame_count_exact else count_frames(path)

    def one_get() -> FrameCache:
        c = FrameCache()
        c.get(path, num_frames=32)
        return c

    def ten_gets() -> FrameCache:
        c = FrameCache()
        first = c.get(path, num_frames=32)
        for _ in range(9):  # ten questions on one video
            assert c.get(path, num_frames=32) is first
        return c

    for rnd in range(args.repeat):
        for n in sizes:
            want = uniform_indices(total, n)
            s = T(f"sf{n}", lambda n=n: sample_frames(path, num_frames=n))
            if rnd == 0 and not (list(s.indices) == want and shown(s.frames) == want and s.exact):
                problems.append(f"sample_frames N={n}: indices/pixels do not match the segment centres")
            fl = T(f"floor{n}", lambda want=want: seek_floor(path, want, info.fps, out_size))
            if rnd == 0 and shown(fl) != want:
                problems.append(f"seek floor N={n}: wrong frames")
            T(f"sfinfo{n}", lambda n=n: sample_frames(path, num_frames=n, info=info))
            if dec_ver:
                for tag, size in (("decord", None), ("decordrs", out_size)):
                    arr, idx = T(f"{tag}{n}", lambda n=n, size=size: decord_batch(path, n, size))
                    if rnd == 0 and not (idx == want and shown(arr) == want):
                        problems.append(f"{tag} N={n}: wrong frames")
        a = T("approx", lambda: sample_frames(path, num_frames=n_big, approximate=True))
        if rnd == 0 and shown(a.frames) != list(a.indices):
            problems.append("approximate: frames do not show the indices reported")
        T("probe", lambda: probe_video(path, check_end=False))
        T("count", lambda: _verified_count(path, claimed, info))
        T("cache1", one_get)
        c10 = T("cache10", ten_gets)
        print(f"round {rnd + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    approx_err = float(T.last["approx"].timestamp_error_s.max())

    # The naive approach, once: decode everything, keep every N's targets.
    wanted = set().union(*(uniform_indices(total, n) for n in sizes))
    full = T("full", lambda: full_decode(path, wanted, info.fps, out_size))
    full_s = T.med("full")
    if len(full) != len(wanted) or any(read_frame_index(full[i]) != i for i in sorted(wanted)):
        problems.append("full decode: wrong frames")

    mem = run_mem(f"sample_frames:{n_big}", path)
    mem_full = run_mem(f"sample_frames_fullres:{n_big}", path)
    mem_dec = run_mem(f"decord:{n_big}", path) if dec_ver else None

    # ---------------------------------------------------------------- report
    m = T.med
    yes = {True: "yes", False: "**no**"}
    print()
    print(
        f"Video: {args.minutes:g} min, {WIDTH}x{HEIGHT}, {args.fps} fps, H.264 (libx264 ultrafast, crf 18, 2 B-frames),"
        f" GOP {GOP_SECONDS * args.fps} frames ({GOP_SECONDS} s), {total} frames, {size_mb:.1f} MB."
        f" Output frames {out_size[0]}x{out_size[1]} (default max_pixels). Median of {args.repeat} interleaved rounds"
        f" (full decode: once); 'best runs' = ratio of the fastest runs. {os.cpu_count()} CPUs, Python {platform.python_version()},"
        f" PyAV {av_version()}, decord " + (dec_ver or "not installed") + "."
    )
    print()
    head = "| N | sample_frames (exact) | seek floor | sample_frames / floor | full decode | full / sample_frames |"
    sep = "|---:|---:|---:|---:|---:|---:|"
    if dec_ver:
        head += " decord (1280x720) | decord (resized at load) | decord (faster) / sample_frames |"
        sep += "---:|---:|---:|"
    print(head + " frames correct |")
    print(sep + "---|")
    bad = " ".join(problems)
    for n in sizes:
        line = (
            f"| {n} | {fmt_s(m(f'sf{n}'))} | {fmt_s(m(f'floor{n}'))} | {m(f'sf{n}') / m(f'floor{n}'):.2f}x |"
            f" {fmt_s(full_s)} | {full_s / m(f'sf{n}'):.0f}x |"
        )
        if dec_ver:
            best = min(m(f"decord{n}"), m(f"decordrs{n}"))
            line += f" {fmt_s(m(f'decord{n}'))} | {fmt_s(m(f'decordrs{n}'))} | {best / m(f'sf{n}'):.2f}x |"
        print(line + f" {'NO' if f'N={n}' in bad else 'yes'} |")
    print()
    print("| target (issue #3) | measured | met |")
    print("|---|---:|---|")
    b = T.best
    for n in sizes:
        v, vb = m(f"sf{n}") / m(f"floor{n}"), b(f"sf{n}") / b(f"floor{n}")
        print(
            f"| sample_frames within 1.2x of the seek floor, N={n} | {v:.2f}x (best runs: {vb:.2f}x) | {yes[v <= 1.2]} |"
        )
    if dec_ver:
        sp = min(m(f"decord{n_big}"), m(f"decordrs{n_big}")) / m(f"sf{n_big}")
        spb = min(b(f"decord{n_big}"), b(f"decordrs{n_big}")) / b(f"sf{n_big}")
        print(f"| >= 1.5x faster than decord (its faster variant), N={n_big} | {sp:.2f}x (best runs: {spb:.2f}x)"
              f" | {yes[sp >= 1.5]} |")  # fmt: skip
    else:
        print(f"| >= 1.5x faster than decord, N={n_big} | decord not installed | not measured |")
    print(
        f"| peak memory < 1 GB, sample_frames N={n_big} (peak RSS growth) | {mem['growth_mib']:.0f} MiB"
        f" (the frames: {mem['result_mib']:.0f} MiB) | {yes[mem['growth_mib'] * 2**20 < 1e9]} |"
    )
    sp, spb = m(f"sf{n_big}") / m("approx"), b(f"sf{n_big}") / b("approx")
    print(
        f"| approximate >= 10x faster than exact, N={n_big} | {fmt_s(m('approx'))} vs {fmt_s(m(f'sf{n_big}'))}:"
        f" {sp:.1f}x (best runs: {spb:.1f}x; max timestamp error {approx_err:.2f} s) | {yes[sp >= 10]} |"
    )
    print(
        f"| 10 questions on one video cost one decode (FrameCache, N=32) | 10 gets {fmt_s(m('cache10'))} vs 1 get"
        f" {fmt_s(m('cache1'))}; decodes={c10.stats.decodes}, memory hits={c10.stats.memory_hits}"
        f" | {yes[c10.stats.decodes == 1]} |"
    )
    print()
    print("| context | measured |")
    print("|---|---:|")
    print(f"| sample_frames N={n_big}, max_pixels=None: peak RSS growth | {mem_full['growth_mib']:.0f} MiB"
          f" (the frames: {mem_full['result_mib']:.0f} MiB) |")  # fmt: skip
    if mem_dec:
        print(f"| decord get_batch N={n_big} (1280x720): peak RSS growth | {mem_dec['growth_mib']:.0f} MiB"
              f" (the frames: {mem_dec['result_mib']:.0f} MiB) |")  # fmt: skip
    print(f"| sample_frames fixed costs: probe_video (no end check) / frame-count check | {fmt_s(m('probe'))} /"
          f" {fmt_s(m('count'))} |")  # fmt: skip
    for n in sizes:
        print(f"| sample_frames N={n} with info= given (no probe) / seek floor | {fmt_s(m(f'sfinfo{n}'))}:"
              f" {m(f'sfinfo{n}') / m(f'floor{n}'):.2f}x |")  # fmt: skip
    print()
    print("correctness: " + ("every frame returned by sample_frames (exact and approximate), the seek floor, the"
                             " full decode and decord shows the index it claims; exact indices = segment centres"
                             if not problems else "; ".join(problems)))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({
            "runs": T.runs, "approx_err_s": approx_err, "mem": mem, "mem_fullres": mem_full, "mem_decord": mem_dec,
            "cache_stats": vars(c10.stats), "problems": problems, "video": str(path), "decord": dec_ver,
        }, indent=2))  # fmt: skip
    if problems:
        raise SystemExit(1)


def av_version() -> str:
    import av

    return av.__version__


if __name__ == "__main__":
    main()
