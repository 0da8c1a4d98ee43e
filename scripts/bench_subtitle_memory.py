"""Peak memory of ``naru-eval validate-data --transcript`` on large subtitle files.

Writes a two-video synthetic data set and, for each video, a SubRip file of ``--mb`` megabytes:

- ``dense``: short cues back to back (about 60 bytes each: far more than the cue cap, so the
  reader stops at the cap and names the line);
- ``long``: cues of long Japanese lines, as many as the cue cap allows, filling the size (every
  cue is read and kept: the worst case under the caps).

Then runs ``naru-eval validate-data DATA --no-videos --transcript SUBS`` in a child process and
reports its peak resident set size (the child's own ``VmHWM``), its wall time and
its exit code. Run from the repository root:
``PYTHONPATH=. .venv/bin/python scripts/bench_subtitle_memory.py --mb 80 --kind long``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tests.helpers.subtitle_memory import measure_validate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=80.0, help="megabytes of each of the two subtitle files")
    ap.add_argument("--kind", choices=["dense", "long"], default="long")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(measure_validate(args.mb, args.kind, Path(tmp)), ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
