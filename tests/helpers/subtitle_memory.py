"""Large subtitle files, and the peak memory of ``naru-eval validate-data --transcript`` reading
them (issue 33, finding 11; ``scripts/bench_subtitle_memory.py`` prints it, docs/performance.md
records it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

_LINE = "深海へ潜っていきましょう、そこには光の届かない世界が広がっていて、誰も見たことのない生き物たちが静かに暮らしています。"


def _clock(ms: int) -> str:
    s, ms = divmod(ms, 1000)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d},{ms:03d}"


def write_srt(path: Path, megabytes: float, kind: str, max_cues: int) -> int:
    """A SubRip file of about ``megabytes`` MB (``dense``: short cues, many more than
    ``max_cues``; ``long``: ``max_cues`` cues of long Japanese lines); returns its cue count."""
    target = int(megabytes * 1_000_000)
    if kind == "dense":
        per_cue = len(f"1000000\n{_clock(0)} --> {_clock(900)}\nはい、そうです\n\n".encode())
        n, repeat = target // per_cue, 1
    else:
        n = max_cues
        blank = len(f"{n}\n{_clock(0)} --> {_clock(900)}\n\n\n".encode())
        repeat = max(1, (target // n - blank) // len(_LINE.encode()))
    text = "はい、そうです" if kind == "dense" else _LINE * repeat
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(f"{i + 1}\n{_clock(i * 1000)} --> {_clock(i * 1000 + 900)}\n{text}\n\n")
    return n


def measure_validate(megabytes: float, kind: str, workdir: Path) -> dict[str, object]:
    """Two :func:`write_srt` files for a two-video synthetic data set, then ``naru-eval
    validate-data DATA --no-videos --transcript SUBS`` in a child process: its peak resident set
    size (the child's own ``VmHWM``), wall time and exit code."""
    from naru_eval.core.synthetic import SyntheticSpec, make_dataset
    from naru_eval.media.subtitles import MAX_CUES

    data = make_dataset(workdir / "data", SyntheticSpec(counts={"N.1": 2}, n_videos=2, seconds=2.0))
    subs = workdir / "subs"
    subs.mkdir()
    cues = [write_srt(subs / f"vid00{i}.srt", megabytes, kind, MAX_CUES) for i in range(2)]
    sizes = [(subs / f"vid00{i}.srt").stat().st_size for i in range(2)]
    argv = ["naru-eval", "validate-data", str(data), "--no-videos", "--transcript", str(subs)]
    peak_file = workdir / "peak.txt"
    # The child reports its own high-water mark (VmHWM): ``wait4``'s ru_maxrss keeps the parent's
    # resident size across fork and exec, so a test run under a large pytest measured pytest.
    code = (
        "import runpy, sys\n"
        f"sys.argv = {argv!r}\n"
        "try:\n"
        "    runpy.run_module('naru_eval.cli', run_name='__main__')\n"
        "finally:\n"
        "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        f"    open({str(peak_file)!r}, 'w').write(hwm)\n"
    )
    out = workdir / "said.txt"
    t0 = time.monotonic()
    with out.open("w", encoding="utf-8") as f:
        proc = subprocess.run([sys.executable, "-c", code], stdout=f, stderr=subprocess.STDOUT, env={**os.environ})
    wall = time.monotonic() - t0
    peak_kib = int(peak_file.read_text()) if peak_file.exists() else -1
    return {
        "kind": kind,
        "file_bytes": sizes,
        "cues_written": cues,
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "wall_s": round(wall, 1),
        "exit": proc.returncode,
        "said": out.read_text(encoding="utf-8").strip().splitlines()[-3:],
    }
