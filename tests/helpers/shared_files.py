"""Where the real-world files of peer projects are: ``../shared`` beside the repository (never
copied into it; ``MANIFEST.tsv`` names each file's source). Tests read them from here and skip with
a reason where the folder is absent."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = (ROOT / ".." / "shared").resolve()
#: videos with sound, audio, real subtitle files (``realav/MANIFEST.tsv``)
REALAV = SHARED / "realav"
#: torchcodec's test videos
PEER = SHARED / "peer"
