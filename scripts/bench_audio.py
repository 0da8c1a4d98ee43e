"""Audio extraction of an hours-long video: wall time and peak memory of the audio sampler
(``naru_eval.media.audio.sample_audio``), the full track and 128 windows, beside a naive decode
that keeps the whole decoded track (48 kHz stereo float) in memory, each in its own process so its
peak resident memory is its own.

The test file is built once with the ffmpeg CLI (a 10-minute piece, AAC 48 kHz stereo at 128 kb/s
beside a 64x48 1-fps H.264 picture, stream-copied end to end to ``--hours``), under the system
temp directory unless ``--video`` names one.

    PYTHONPATH=. .venv/bin/python scripts/bench_audio.py --hours 4 --out audio_bench.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PIECE_S = 600


def build(path: Path, hours: float) -> Path:
    """A ``hours``-long MP4 (AAC 48 kHz stereo, 128 kb/s; tiny H.264 at 1 fps), by stream copy."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    piece = path.with_name("piece.mp4")
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y",
         "-f", "lavfi", "-i", f"testsrc=size=64x48:rate=1:duration={PIECE_S}",
         "-f", "lavfi", "-i", f"sine=frequency=440:beep_factor=4:sample_rate=48000:duration={PIECE_S}",
         "-ac", "2", "-c:a", "aac", "-b:a", "128k", "-c:v", "libx264", "-preset", "ultrafast", "-g", "10",
         "-pix_fmt", "yuv420p", str(piece)],
        check=True,
    )  # fmt: skip
    n = max(1, round(hours * 3600 / PIECE_S))
    listing = path.with_name("pieces.txt")
    listing.write_text("".join(f"file '{piece.name}'\n" for _ in range(n)))
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-f", "concat", "-safe", "0", "-i", str(listing), "-c", "copy", str(path)],
        check=True,
    )
    return path


CHILD = r"""
import json, resource, sys, time
import numpy as np
mode, path, duration = sys.argv[1], sys.argv[2], float(sys.argv[3])
def cpu_now():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
t, cpu0 = time.perf_counter(), cpu_now()
if mode == "naive":
    import av
    chunks = []
    with av.open(path) as c:
        for f in c.decode(c.streams.audio[0]):
            chunks.append(f.to_ndarray())
    track = np.concatenate(chunks, axis=1)
    n = track.shape[1]
else:
    from naru_eval.media.audio import sample_audio
    from naru_eval.media.index import frame_index
    frame_index(path)  # the frame index is the frame sampler's (built once per file, shared): not timed
    t, cpu0 = time.perf_counter(), cpu_now()
    if mode == "full":
        windows = [(0.0, duration)]
    else:
        step = duration / 128
        windows = [((i + 0.5) * step - 2.0, (i + 0.5) * step + 2.0) for i in range(128)]
    s = sample_audio(path, windows)
    n = len(s.samples)
wall = time.perf_counter() - t
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu = usage.ru_utime + usage.ru_stime - cpu0
peak = usage.ru_maxrss * 1024
print(json.dumps({"mode": mode, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                  "peak_rss_mb": round(peak / 2**20, 1), "samples": n}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=4.0)
    ap.add_argument("--video", type=Path, help="an existing long video instead of the built one")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--modes", default="full,windows,naive")
    args = ap.parse_args()
    video = args.video or build(
        Path(tempfile.gettempdir()) / f"naru_bench_audio_{args.hours:g}h" / "long.mp4", args.hours
    )
    import av

    with av.open(str(video)) as c:
        duration = float(c.duration / 1_000_000)
        a = c.streams.audio[0]
        track = f"{a.codec_context.name} {a.rate} Hz {a.layout.name}"
    rows = []
    for mode in args.modes.split(","):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(video), str(duration)], check=True, capture_output=True, text=True
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    result = {
        "video": str(video),
        "duration_s": duration,
        "size_mb": round(video.stat().st_size / 2**20, 1),
        "track": track,
        "measured": time.strftime("%Y-%m-%d"),
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
