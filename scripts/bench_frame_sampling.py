"""Benchmark: exact frame sampling against the seek floor, decord and torchcodec.

Measured side by side in one process, on a synthetic H.264 video (libx264 ultrafast, crf 18,
2 B-frames, ``--gop-seconds`` GOPs) whose frames show their own index, encoded once into
``--cache-dir`` and reused:

* ``sample_frames``: ``naru_eval.media.sampler.sample_frames(path, num_frames=N)``, exact mode, as the
  model adapters call it, with the file's frame index already built (in memory or on disk
  beside the frame cache: every call after the first on a file);
* ``first call``: the same, with the frame index dropped first (an MP4's sample tables, or one
  demux pass over the file), the file still in the page cache;
* ``seek floor``: minimal PyAV code that, for each target, seeks to the keyframe before it and
  decodes forward to it, same output size; run with frame threads (``AUTO``) and with slice
  threads (``SLICE``): the floor is the faster of the two;
* ``sample_frames`` forced to frame / slice threads (how the threading rule was chosen);
* ``decord``: ``VideoReader(path).get_batch(uniform_indices(len(vr), N))`` (native size);
* ``torchcodec``: ``VideoDecoder(path, seek_mode="exact").get_frames_at(indices)`` (native size);
  decord and torchcodec are measured when importable (not project dependencies);
* with ``--cold``: a file's first touch, cold: before each run the file is evicted from the page
  cache (``posix_fadvise(DONTNEED)``, checked with ``fincore`` where installed), the in-memory
  frame index dropped and no disk index or frame cache used. Measured cold: ``sample_frames``
  (index from the moov box), ``sample_frames`` with the index by the demux pass (how the first
  touch cost before the moov index), and the seek floor (frame and slice threads; the faster is the cold
  floor). The warm rows above are the warm ratios;
* with ``--baseline SRC``: ``sample_frames`` of another checkout's source tree (e.g. ``git archive
  main | tar -x -C /tmp/main``), in a child process kept for the run and called in the same
  interleaved rounds, so a change to the sampler is measured side by side with the code before it
  (the child checks its frames too);
* with ``--fresh``: only a file's first touch, one fresh process per measurement (no frame index in
  memory or on disk), ``sample_frames`` beside the PyAV seek loop, torchcodec and decord
  (``scripts/bench_first_touch.py``);
* with ``--extras``: ``FrameCache`` (ten questions on one video), peak RSS of
  one call at the largest N in a fresh process, and one full sequential decode.

Every returned frame is checked: it must show the index it claims (``read_frame_index``), and
the indices must be the uniform segment centres.

    PYTHONPATH=. .venv/bin/python scripts/bench_frame_sampling.py --width 1280 --height 720 --minutes 10
    PYTHONPATH=. .venv/bin/python scripts/bench_frame_sampling.py --width 640 --height 360 --minutes 120 --fps 8 --cold
    PYTHONPATH=. .venv/bin/python scripts/bench_frame_sampling.py --minutes 60 --fps 8 --fresh --repeat 5
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frame_contenders import available, conversion_cost, decord_batch, full_decode, seek_floor, torchcodec_batch

from naru_eval.core.synthetic import read_frame_index, write_indexed_video
from naru_eval.media import decode, index
from naru_eval.media.frame_cache import FrameCache
from naru_eval.media.plan import DEFAULT_MAX_PIXELS, target_size, uniform_indices
from naru_eval.media.sampler import sample_frames
from naru_eval.media.video import probe_video

# --------------------------------------------------------------------------- the test video


def ensure_video(
    cache_dir: Path, width: int, height: int, minutes: float, fps: int, gop_s: int
) -> tuple[Path, float | None]:
    """The test video, encoded once (atomically) and reused; returns (path, encode seconds or None)."""
    path = cache_dir / f"indexed_{minutes:g}min_{fps}fps_gop{gop_s * fps}_{width}x{height}.mp4"
    if path.exists():
        return path, None
    n_frames = int(round(minutes * 60 * fps))
    if n_frames > 65536:
        raise SystemExit(f"{n_frames} frames: the index code holds 16 bits (65,536 frames); lower --minutes/--fps")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + f".part{os.getpid()}.mp4")
    print(f"encoding {path} ({n_frames} frames) ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    write_indexed_video(tmp, n_frames, fps=fps, gop=gop_s * fps, size=(width, height), preset="ultrafast")
    os.replace(tmp, path)
    return path, time.perf_counter() - t0


# --------------------------------------------------------------------------- the contenders


def sample_with_threads(path: Path, n: int, threads: str) -> Any:
    """sample_frames with its threading rule overridden (slice threads always, or frame threads always)."""
    keep = decode.machine_busy
    decode.machine_busy = lambda: threads == "SLICE"  # type: ignore[assignment]
    try:
        return sample_frames(path, num_frames=n)
    finally:
        decode.machine_busy = keep  # type: ignore[assignment]


def first_call(path: Path, n: int) -> Any:
    index._INDEXES.clear()  # what a new file costs: the frame index is built
    return sample_frames(path, num_frames=n)


def evict(path: Path) -> None:
    """Drop the file's pages from the page cache (this file only: the machine is shared)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_bytes(path: Path) -> int | None:
    """Bytes of the file in the page cache (``fincore``), None where it is not installed."""
    try:
        r = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                           capture_output=True, text=True, check=True)  # fmt: skip
        return int(r.stdout.split()[0])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


class PageCache:
    """Untimed set-up of each run: cold (evicted, no frame index) or warm (the file read once more
    after a cold run, so a warm run never pays for the eviction before it)."""

    def __init__(self, path: Path) -> None:
        self.path, self.evicted = path, False

    def cold(self) -> None:
        index._INDEXES.clear()
        evict(self.path)
        self.evicted = True

    def warm(self) -> None:
        if self.evicted:
            with open(self.path, "rb") as f:
                while f.read(1 << 24):
                    pass
            index.frame_index(self.path)
            self.evicted = False


def sample_demux_index(path: Path, n: int) -> Any:
    """sample_frames with the frame index built by the demux pass (the first touch before the moov index)."""
    keep = index._is_mp4
    index._is_mp4 = lambda container: False  # type: ignore[assignment]
    try:
        return sample_frames(path, num_frames=n)
    finally:
        index._is_mp4 = keep  # type: ignore[assignment]


# --------------------------------------------------------------------------- measuring


class Times:
    """Seconds per measurement name. Repeats are interleaved (every contender once per round),
    so a load change on the machine hits all contenders alike."""

    def __init__(self) -> None:
        self.runs: dict[str, list[float]] = {}
        self.last: dict[str, Any] = {}

    def __call__(self, name: str, fn: Callable[[], Any], pre: Callable[[], None] | None = None) -> Any:
        self.last.pop(name, None)  # the previous result's frames are freed before, not during, the run
        gc.collect()
        if pre is not None:
            pre()  # untimed set-up (a cold run's eviction)
        t0 = time.perf_counter()
        result = fn()
        self.runs.setdefault(name, []).append(time.perf_counter() - t0)
        self.last[name] = result
        return result

    def med(self, name: str) -> float:
        return statistics.median(self.runs[name])

    def best(self, name: str) -> float:
        return min(self.runs[name])

    def paired(self, name: str, floor: str, n: int) -> str:
        """'(median, least)' of the per-round ratios of ``name`` to the faster floor of that round."""
        floors = [min(a, b) for a, b in zip(self.runs[f"{floor}AUTO{n}"], self.runs[f"{floor}SLICE{n}"], strict=True)]
        r = [x / f for x, f in zip(self.runs[name], floors, strict=True)]
        return f"({statistics.median(r):.2f}x, {min(r):.2f}x)"


def shown(frames: Any) -> list[int]:
    return [read_frame_index(f) for f in frames]


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def mem_child(spec: str, path: str) -> None:
    """Run in a fresh process: peak RSS growth of one call (VmHWM reset before it), printed as JSON."""
    import av  # noqa: F401  (imports are part of the baseline, not the growth)

    index.frame_index(path)  # the index is built beforehand, as for every call but a file's first
    kind, n = spec.split(":")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak-RSS counter
    except OSError:
        pass
    before = _status_kib("VmRSS")
    if kind == "sample_frames":
        res = sample_frames(path, num_frames=int(n)).frames
    elif kind == "decord":
        res, _ = decord_batch(Path(path), int(n))
    else:
        raise SystemExit(f"unknown {kind}")
    peak = _status_kib("VmHWM")
    print(json.dumps({"growth_mib": (peak - before) / 1024, "result_mib": res.nbytes / 2**20}))


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
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--fps", type=int, default=24)
    ap.add_argument("--gop-seconds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="8,32,128", help="comma-separated N")
    ap.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "naru_bench"))
    ap.add_argument("--no-decord", action="store_true")
    ap.add_argument("--no-torchcodec", action="store_true")
    ap.add_argument("--extras", action="store_true", help="FrameCache, memory, full decode")
    ap.add_argument("--baseline", help="also time sample_frames of this source tree (another checkout), side by side")
    ap.add_argument("--cold", action="store_true", help="also a file's first touch, page cache dropped")
    ap.add_argument(
        "--fresh", action="store_true", help="only a file's first touch, a fresh process each (bench_first_touch.py)"
    )
    ap.add_argument("--json", help="also write the raw numbers here")
    ap.add_argument("--_mem-child", dest="mem_child", help=argparse.SUPPRESS)
    ap.add_argument("--_video", dest="video", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mem_child:
        mem_child(args.mem_child, args.video)
        return
    os.environ.pop("NARU_FRAME_CACHE", None)  # in-memory only: the index is dropped explicitly where timed

    sizes = [int(x) for x in args.sizes.split(",")]
    n_big = max(sizes)
    path, enc_s = ensure_video(Path(args.cache_dir), args.width, args.height, args.minutes, args.fps, args.gop_seconds)
    size_mb = path.stat().st_size / 1e6
    info = probe_video(path)
    total = int(round(args.minutes * 60 * args.fps))
    out_size = target_size(info.width, info.height, DEFAULT_MAX_PIXELS)
    dec_ver = None if args.no_decord else available("decord")
    tc_ver = None if args.no_torchcodec else available("torchcodec")
    gop = args.gop_seconds * args.fps
    print(
        f"video: {path} ({size_mb:.1f} MB, {info.width}x{info.height}, {args.fps} fps, GOP {gop} frames, {total} frames)"
        + (f"; encoded in {enc_s:.0f} s" if enc_s else "; reused"),
        file=sys.stderr,
        flush=True,
    )
    if args.fresh:
        import bench_first_touch

        kinds = (
            ["sf", "loopAUTO", "loopSLICE"]
            + ["tc"] * bool(tc_ver)
            + ["decord"] * bool(dec_ver)
            + ["base"] * bool(args.baseline)
        )
        root = str(Path(__file__).resolve().parents[1])
        base = str(Path(args.baseline).resolve()) if args.baseline else None
        return bench_first_touch.run(path, sizes, args.repeat, kinds, root, base, total, info.fps, out_size)
    sample_frames(path, num_frames=8)  # warm: imports, page cache, the frame index
    problems: list[str] = []
    T = Times()
    pages = PageCache(path)
    resident_after_evict: int | None = None
    loads = [os.getloadavg()[0]]

    base = Baseline(args.baseline, path) if args.baseline else None

    def check(name: str, frames: Any, idx: list[int], want: list[int]) -> None:
        seen = frames if isinstance(frames, Seen) else shown(frames)  # the baseline sends what it saw
        if list(idx) != want or seen != want:
            problems.append(f"{name}: indices/pixels do not match the segment centres")

    for rnd in range(args.repeat):
        for n in sizes:
            want = uniform_indices(total, n)
            jobs: list[tuple[str, str, Callable[[], Any]]] = [
                (f"sf{n}", f"sample_frames N={n}", lambda n=n: _as_pair(sample_frames(path, num_frames=n))),
                (f"cold{n}", f"sample_frames first call N={n}", lambda n=n: _as_pair(first_call(path, n))),
            ]
            for th in ("AUTO", "SLICE"):
                jobs.append((f"floor{th}{n}", f"seek floor {th} N={n}",
                             lambda want=want, th=th: (seek_floor(path, want, info.fps, out_size, th), want)))  # fmt: skip
                jobs.append((f"sf{th}{n}", f"sample_frames {th} N={n}",
                             lambda n=n, th=th: _as_pair(sample_with_threads(path, n, th))))  # fmt: skip
            if base is not None:
                jobs.append((f"base{n}", f"baseline sample_frames N={n}", lambda n=n: base(n)))
            if dec_ver:
                jobs.append((f"decord{n}", f"decord N={n}", lambda n=n: decord_batch(path, n)))
            if tc_ver:
                jobs.append((f"tc{n}", f"torchcodec N={n}", lambda n=n: torchcodec_batch(path, n)))
            if args.cold:
                jobs.append(
                    (f"c_sf{n}", f"cold sample_frames N={n}", lambda n=n: _as_pair(sample_frames(path, num_frames=n)))
                )
                jobs.append((f"c_demux{n}", f"cold sample_frames, demux index N={n}",
                             lambda n=n: _as_pair(sample_demux_index(path, n))))  # fmt: skip
                for th in ("AUTO", "SLICE"):
                    jobs.append((f"c_floor{th}{n}", f"cold seek floor {th} N={n}",
                                 lambda want=want, th=th: (seek_floor(path, want, info.fps, out_size, th), want)))  # fmt: skip
            # Each round starts with a different contender: no one always runs first (or after the same one).
            k = rnd % len(jobs)
            for key, label, fn in jobs[k:] + jobs[:k]:
                frames, idx = T(key, fn, pre=pages.cold if key.startswith("c_") else pages.warm)
                if rnd == 0:
                    check(label, frames, idx, want)
                    if key.startswith("c_") and resident_after_evict is None:
                        pages.cold()
                        resident_after_evict = resident_bytes(path)
        loads.append(os.getloadavg()[0])
        pages.warm()
        T("index", lambda: _index_once(path))
        T("index_demux", lambda: _index_once(path, tables=False))
        if args.extras:
            T("cache10", lambda: _ten_gets(path))
        print(f"round {rnd + 1}/{args.repeat} done", file=sys.stderr, flush=True)

    if base is not None:
        base.close()
    m = T.med
    print()
    print(
        f"Video: {args.minutes:g} min, {info.width}x{info.height}, {args.fps} fps, H.264 (libx264 ultrafast, crf 18,"
        f" 2 B-frames), GOP {gop} frames ({args.gop_seconds} s), {total} frames, {size_mb:.1f} MB. Output frames"
        f" {out_size[0]}x{out_size[1]}. Median of {args.repeat} interleaved rounds. {os.cpu_count()} CPUs, Python"
        f" {platform.python_version()}, PyAV {_av_version()}, decord {dec_ver or 'not measured'}, torchcodec"
        f" {tc_ver or 'not measured'}. Frame index build (warm page cache): {fmt_s(m('index'))} from the moov box,"
        f" {fmt_s(m('index_demux'))} by the demux pass. 1-minute load average at the start and after each round:"
        f" {', '.join(f'{x:.1f}' for x in loads)}."
    )
    print()
    head = ("| N | sample_frames | / floor (best runs) | first call on the file | seek floor (frame threads) |"
            " seek floor (slice threads) | sample_frames forced frame / slice threads |")  # fmt: skip
    sep = "|---:|---:|---:|---:|---:|---:|---:|"
    if dec_ver:
        head, sep = head + " decord | decord / sample_frames |", sep + "---:|---:|"
    if tc_ver:
        head, sep = head + " torchcodec exact | torchcodec / sample_frames |", sep + "---:|---:|"
    print(head + " frames correct |")
    print(sep + "---|")
    bad = " ".join(problems)
    for n in sizes:
        floor = min(m(f"floorAUTO{n}"), m(f"floorSLICE{n}"))
        best = T.best(f"sf{n}") / min(T.best(f"floorAUTO{n}"), T.best(f"floorSLICE{n}"))
        line = (
            f"| {n} | {fmt_s(m(f'sf{n}'))} | {m(f'sf{n}') / floor:.2f}x ({best:.2f}x) | {fmt_s(m(f'cold{n}'))} |"
            f" {fmt_s(m(f'floorAUTO{n}'))} | {fmt_s(m(f'floorSLICE{n}'))} |"
            f" {fmt_s(m(f'sfAUTO{n}'))} / {fmt_s(m(f'sfSLICE{n}'))} |"
        )
        if dec_ver:
            line += f" {fmt_s(m(f'decord{n}'))} | {m(f'decord{n}') / m(f'sf{n}'):.2f}x |"
        if tc_ver:
            line += f" {fmt_s(m(f'tc{n}'))} | {m(f'tc{n}') / m(f'sf{n}'):.2f}x |"
        print(line + f" {'NO' if f'N={n}' in bad else 'yes'} |")
    if base is not None:
        print()
        print(f"Side by side with the baseline ({args.baseline}), same rounds: sample_frames / baseline")
        print()
        print("| N | sample_frames | baseline | ratio (medians) | ratio (best runs) |")
        print("|---:|---:|---:|---:|---:|")
        for n in sizes:
            print(
                f"| {n} | {fmt_s(m(f'sf{n}'))} | {fmt_s(m(f'base{n}'))} | {m(f'sf{n}') / m(f'base{n}'):.2f}x |"
                f" {T.best(f'sf{n}') / T.best(f'base{n}'):.2f}x |"
            )
    if args.cold:
        res = "not checked (no fincore)" if resident_after_evict is None else f"{resident_after_evict} bytes"
        print()
        print(
            f"Cold (a file's first touch; page cache after eviction: {res}). Ratios: median times over"
            " rounds / the floor's (the faster threading); in brackets the median and the least of the"
            " per-round ratios (each round's run against the same round's floor: a load change between"
            " rounds cancels)."
        )
        print()
        print("| N | cold sample_frames | cold / cold floor | cold, index by demux pass | its ratio |"
              " cold floor (frame / slice threads) | warm sample_frames / warm floor | warm / cold floor |")  # fmt: skip
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            c_floor = min(m(f"c_floorAUTO{n}"), m(f"c_floorSLICE{n}"))
            w_floor = min(m(f"floorAUTO{n}"), m(f"floorSLICE{n}"))
            print(
                f"| {n} | {fmt_s(m(f'c_sf{n}'))} | {m(f'c_sf{n}') / c_floor:.2f}x {T.paired(f'c_sf{n}', 'c_floor', n)} |"
                f" {fmt_s(m(f'c_demux{n}'))} | {m(f'c_demux{n}') / c_floor:.2f}x {T.paired(f'c_demux{n}', 'c_floor', n)} |"
                f" {fmt_s(m(f'c_floorAUTO{n}'))} / {fmt_s(m(f'c_floorSLICE{n}'))} |"
                f" {m(f'sf{n}') / w_floor:.2f}x {T.paired(f'sf{n}', 'floor', n)} |"
                f" {m(f'sf{n}') / c_floor:.2f}x {T.paired(f'sf{n}', 'c_floor', n)} |"
            )
    if args.extras:
        wanted = set().union(*(uniform_indices(total, n) for n in sizes))
        full = T("full", lambda: full_decode(path, wanted, info.fps, out_size))
        if any(read_frame_index(full[i]) != i for i in sorted(wanted)):
            problems.append("full decode: wrong frames")
        mem = run_mem(f"sample_frames:{n_big}", path)
        print()
        print(f"- FrameCache, ten gets of N=32 on one video: {fmt_s(m('cache10'))}")
        print(f"- full sequential decode: {fmt_s(m('full'))}")
        conv = conversion_cost(path, out_size)
        print(
            f"- a decoded frame to RGB {out_size[0]}x{out_size[1]}, ms per frame (median of 7 interleaved rounds):"
            f" plain reformat (BT.601, bilinear) {conv['plain']:.2f}, the frame's own matrix and range (bicubic)"
            f" {conv['tagged']:.2f} ({conv['tagged'] / conv['plain']:.2f}x); native-size conversion then"
            f" reference_resize (size=) {conv['exact']:.2f}"
        )
        print(
            f"- peak RSS growth, sample_frames N={n_big}: {mem['growth_mib']:.0f} MiB (frames {mem['result_mib']:.0f} MiB)"
        )
    print()
    print("correctness: " + ("every frame returned shows the index it claims; indices = segment centres"
                             if not problems else "; ".join(problems)))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": T.runs, "problems": problems, "video": str(path)}, indent=2))
    if problems:
        raise SystemExit(1)


def _as_pair(s: Any) -> tuple[Any, list[int]]:
    return s.frames, list(s.indices)


BASELINE_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from naru_eval.core.synthetic import read_frame_index
from naru_eval.media.sampler import sample_frames
assert sys.modules["naru_eval"].__file__.startswith(sys.argv[1]), "the baseline's naru_eval was not imported"
sample_frames(sys.argv[2], num_frames=8)  # warm, as the parent: imports, page cache, the frame index
print("ready", flush=True)
for line in sys.stdin:
    s = sample_frames(sys.argv[2], num_frames=int(line))
    print(json.dumps({"indices": [int(i) for i in s.indices], "shown": [read_frame_index(f) for f in s.frames]}), flush=True)
"""


class Seen(list[int]):
    """What the baseline's frames show (it checks them in its own process)."""


class Baseline:
    """``sample_frames`` of the checkout at ``src``, in a child process kept for the run."""

    def __init__(self, src: str, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BASELINE_CHILD, str(Path(src).resolve()), str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ""},
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def __call__(self, n: int) -> tuple[Seen, list[int]]:
        """(what the frames show, the indices): the parent checks them as its own."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        out = json.loads(self.proc.stdout.readline())
        return Seen(out["shown"]), out["indices"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _index_once(path: Path, tables: bool = True) -> Any:
    import av

    with av.open(str(path)) as c:
        return index._build_index(path, c, c.streams.video[0], tables).settle()


def _ten_gets(path: Path) -> FrameCache:
    c = FrameCache()
    first = c.get(path, num_frames=32)
    for _ in range(9):  # ten questions on one video
        assert c.get(path, num_frames=32) is first
    return c


def _av_version() -> str:
    import av

    return av.__version__


if __name__ == "__main__":
    main()
