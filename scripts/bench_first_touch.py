"""A file's first touch in a fresh process: ``bench_frame_sampling.py --fresh`` (issue 35, item 7).

Every measurement is one new Python process that imports its contender's libraries (untimed: numpy
for all, 0.1-0.2 s; PyAV for ``sample_frames`` and the loop, 0.25 s; torch and torchcodec; decord), then
times one call on a file it has never seen: no frame index in memory, none on disk
(``NARU_FRAME_CACHE`` unset), what a decode-ahead worker or a new run pays per video. The page
cache is warm (the file was read by the process before); bytecode is written (an untimed first
child per contender), as an installed package has it, although this machine sets
``PYTHONDONTWRITEBYTECODE``. Contenders, interleaved (each round starts with another one):

* ``sample_frames``: ``sample_frames(path, num_frames=N)`` of this tree (and with ``--baseline SRC``
  of another checkout, side by side);
* the PyAV seek loop (``frame_contenders.seek_floor``: seek to the keyframe before each target,
  decode forward to it, ``reformat`` to the same output size), with frame and with slice threads;
  the faster is "the loop";
* torchcodec ``VideoDecoder(path, seek_mode="exact").get_frames_at(uniform_indices(len, N))`` and
  decord ``VideoReader(path).get_batch(...)`` (native size), where importable.

Every child checks its frames after the clock stops (each shows the index it claims, the indices
are the segment centres); the table reports the least and the median of the repeats and the
ratios of the least times, with the 1-minute load average.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: contender: (label, the import a child makes before the clock starts)
CONTENDERS = {
    "sf": "sample_frames",
    "base": "sample_frames (baseline)",
    "loopAUTO": "PyAV seek loop, frame threads",
    "loopSLICE": "PyAV seek loop, slice threads",
    "tc": "torchcodec exact",
    "decord": "decord",
}


def child(kind: str, n: int, path: str, src: str, want: list[int], fps: float, out_w: int, out_h: int) -> None:
    """One measurement, in its own process (``src`` first on ``PYTHONPATH``): imports first, then
    the clock around one call. ``want``: the segment centres (the parent's ``uniform_indices``)."""
    import numpy  # noqa: F401  (every contender's process has it before the clock)

    from naru_eval.core.synthetic import read_frame_index

    if kind in ("sf", "base"):
        import av  # noqa: F401  (the sampler imports it on first use; the loop before its clock, so here too)

        try:
            from naru_eval.media.sampler import sample_frames
        except ImportError:  # a baseline from before media/ was split (sampler in media/video.py)
            from naru_eval.media.video import sample_frames  # type: ignore[attr-defined,no-redef]

        assert sys.modules["naru_eval"].__file__.startswith(src), "another tree's naru_eval was imported"
        t0, c0 = time.perf_counter(), time.process_time()
        s = sample_frames(path, num_frames=n)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        frames, idx = s.frames, list(s.indices)
    elif kind.startswith("loop"):
        import av  # noqa: F401
        from frame_contenders import seek_floor

        t0, c0 = time.perf_counter(), time.process_time()
        frames = seek_floor(Path(path), want, fps, (out_w, out_h), kind[4:])
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        idx = want
    elif kind == "tc":
        from frame_contenders import torchcodec_batch
        from torchcodec.decoders import VideoDecoder  # noqa: F401

        t0, c0 = time.perf_counter(), time.process_time()
        frames, idx = torchcodec_batch(Path(path), n)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
    else:
        from decord import VideoReader  # noqa: F401
        from frame_contenders import decord_batch

        t0, c0 = time.perf_counter(), time.process_time()
        frames, idx = decord_batch(Path(path), n)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
    ok = list(idx) == want and [read_frame_index(f) for f in frames] == want
    print(json.dumps({"s": took, "cpu": cpu, "ok": ok}))


def _spawn(kind: str, n: int, path: Path, src: str, total: int, fps: float, out: tuple[int, int]) -> dict[str, object]:
    from naru_eval.media.plan import uniform_indices

    env = {k: v for k, v in os.environ.items() if k not in ("NARU_FRAME_CACHE", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = os.pathsep.join([src, str(Path(__file__).resolve().parent)])  # the tree, then the scripts
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        json.dumps([kind, n, str(path), src, uniform_indices(total, n), fps, *out]),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=src)
    if r.returncode != 0:
        raise SystemExit(f"{kind} N={n} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(
    path: Path, sizes: list[int], repeat: int, kinds: list[str], src: str, base: str | None, total: int, fps: float,
    out: tuple[int, int],
) -> None:  # fmt: skip
    """Interleaved rounds of fresh children; prints the table."""
    trees = {k: (base if k == "base" else src) for k in kinds}
    for k in kinds:  # untimed: bytecode written, the file in the page cache
        _spawn(k, sizes[0], path, str(trees[k]), total, fps, out)
    runs: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    wrong: list[str] = []
    loads = [os.getloadavg()[0]]
    for rnd in range(repeat):
        jobs = [(k, n) for n in sizes for k in kinds]
        at = rnd * len(kinds) % len(jobs) + rnd % len(kinds)
        for k, n in jobs[at:] + jobs[:at]:
            r = _spawn(k, n, path, str(trees[k]), total, fps, out)
            runs.setdefault((k, n), []).append(float(r["s"]))  # type: ignore[arg-type]
            cpu.setdefault((k, n), []).append(float(r["cpu"]))  # type: ignore[arg-type]
            if not r["ok"]:
                wrong.append(f"{CONTENDERS[k]} N={n}")
        loads.append(os.getloadavg()[0])
        print(f"round {rnd + 1}/{repeat} done", file=sys.stderr, flush=True)
    report(runs, cpu, sizes, kinds, repeat, loads, wrong)


def report(
    runs: dict[tuple[str, int], list[float]], cpu: dict[tuple[str, int], list[float]], sizes: list[int],
    kinds: list[str], repeat: int, loads: list[float], wrong: list[str],
) -> None:  # fmt: skip
    def least(k: str, n: int) -> float:
        return min(runs[(k, n)])

    def cell(k: str, n: int) -> str:
        return f"{least(k, n):.3f} s ({statistics.median(runs[(k, n)]):.3f} s)"

    print()
    print(
        f"A file's first touch, one fresh process per measurement: least of {repeat} interleaved rounds (median in"
        f" brackets); ratios of the least times. 1-minute load average at the start and after each round:"
        f" {', '.join(f'{x:.1f}' for x in loads)}."
    )
    print()
    cols = ["sample_frames", "PyAV seek loop (frame / slice threads)", "sample_frames / loop"]
    extra = [k for k in ("tc", "decord", "base") if k in kinds]
    cols += [f"{CONTENDERS[k]} | sample_frames / {CONTENDERS[k]}" for k in extra]
    print("| N | " + " | ".join(cols) + " |")
    print("|---:|" + "---:|" * (3 + 2 * len(extra)))
    for n in sizes:
        loop = min(least("loopAUTO", n), least("loopSLICE", n))
        line = f"| {n} | {cell('sf', n)} | {least('loopAUTO', n):.3f} s / {least('loopSLICE', n):.3f} s |"
        line += f" {least('sf', n) / loop:.2f}x |"
        for k in extra:
            line += f" {cell(k, n)} | {least('sf', n) / least(k, n):.2f}x |"
        print(line)
    print()
    print("CPU seconds of the call (least of the rounds; frame threads count every thread): " + "; ".join(
        f"N={n}: " + ", ".join(f"{CONTENDERS[k]} {min(cpu[(k, n)]):.3f}" for k in kinds) for n in sizes))  # fmt: skip
    print()
    print(
        "frames: " + ("every child's frames show the indices they claim" if not wrong else "WRONG: " + ", ".join(wrong))
    )
    if wrong:
        raise SystemExit(1)


if __name__ == "__main__":
    child(*json.loads(sys.argv[1]))
