"""Independent readings of subtitle files, the references the subtitle reader is checked against.

- SubRip and ASS/SSA: the ffmpeg CLI, its ``-f ass`` output for ASS/SSA (times in centiseconds,
  as the format has them) and its ``-f srt`` output otherwise (milliseconds). :func:`ass_visible`
  turns an event's text into what a renderer shows, from the ASS format's own rules (override
  blocks hidden, ``\\N``/``\\n``/``\\h`` as spaces, drawings from ``\\p1`` to ``\\p0`` not text),
  and strips the HTML-like tags FFmpeg writes or leaves as text (``<i>``, ``<c.japanese>``).
- WebVTT: the W3C's parser (npm ``webvtt-parser``, by the specification's editor; installed by
  ``.ci/run`` into ``.node/``), run by node: cues as the WebVTT parsing rules read them, and the
  lines its validator flags.

Files and folders come from ``../shared/realav`` beside the repository (MANIFEST.tsv names each
source); every helper says why it cannot run instead of failing.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.shared_files import REALAV, ROOT

NODE_MODULES = ROOT / ".node" / "node_modules"
_WEBVTT_DRIVER = Path(__file__).with_name("webvtt_reference.js")

#: (start s, end s, text) of one cue
RefCue = tuple[float, float, str]


def missing_reference(fmt: str) -> str | None:
    """Why a ``fmt`` file cannot be checked here (no ``../shared``, no ffmpeg, no node or W3C
    parser), or None."""
    if not REALAV.is_dir():
        return f"{REALAV} is absent (the real-file corpus lies beside the clone)"
    if fmt == "vtt":
        if shutil.which("node") is None:
            return "node is absent (the W3C WebVTT parser runs on it)"
        if not (NODE_MODULES / "webvtt-parser").is_dir():
            return f"the W3C WebVTT parser is absent: npm install --prefix {ROOT / '.node'} webvtt-parser@2.2.0"
        return None
    if shutil.which("ffmpeg") is None:
        return "the ffmpeg CLI is absent"
    return None


def manifest() -> dict[str, dict[str, str]]:
    """MANIFEST.tsv's rows by file (``subs/x.srt``)."""
    with (REALAV / "MANIFEST.tsv").open(encoding="utf-8") as f:
        return {row["file"]: row for row in csv.DictReader(f, delimiter="\t")}


# --------------------------------------------------------------------------- text as shown

_BLOCK = re.compile(r"(\{[^}]*\})")
_DRAW = re.compile(r"\\p(\d+)")
_LEFT_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_WS = re.compile(r"\s+")


def shown(text: str) -> str:
    """Whitespace runs as one space, control characters gone, ends trimmed."""
    text = "".join(c for c in text if not (ord(c) < 32 or 127 <= ord(c) < 160) or c.isspace())
    return _WS.sub(" ", text).strip()


def ass_visible(text: str) -> str:
    """What an ASS event's text shows: override blocks hidden, drawings (``\\p1`` … ``\\p0``)
    not text, ``\\N``/``\\n``/``\\h`` spaces; then HTML-like tags FFmpeg left as text removed."""
    out, drawing = [], False
    for part in _BLOCK.split(text):
        if part.startswith("{") and part.endswith("}"):
            for level in _DRAW.findall(part):
                drawing = level != "0"
        elif not drawing:
            out.append(part)
    return shown(_LEFT_TAG.sub("", "".join(out).replace("\\N", " ").replace("\\n", " ").replace("\\h", " ")))


# --------------------------------------------------------------------------- ffmpeg

_SRT_TIMING = re.compile(r"^(\d+):(\d\d):(\d\d),(\d\d\d) --> (\d+):(\d\d):(\d\d),(\d\d\d)")
_DEMUXER = {".srt": "srt", ".ass": "ass", ".ssa": "ass"}


def _ffmpeg(src: Path, out_format: str, charenc: str | None) -> str:
    args = ["ffmpeg", "-v", "error", "-nostdin"]
    if charenc:
        args += ["-sub_charenc", charenc]
    demuxer = _DEMUXER.get(src.suffix.lower())
    args += ["-f", demuxer] if demuxer else []
    args += ["-i", str(src), "-map", "0:s:0", "-f", out_format, "-"]
    run = subprocess.run(args, capture_output=True, timeout=120)
    if run.returncode:
        raise RuntimeError(f"ffmpeg cannot read {src}: {run.stderr.decode(errors='replace')[-500:]}")
    return run.stdout.decode("utf-8", errors="replace").replace("\r\n", "\n")


_SRT_BLOCK = re.compile(r"\n\n(?=\d+\n\d+:\d\d:\d\d,\d\d\d --> )")
_ASS_TIME = re.compile(r"^(\d+):(\d\d):(\d\d)\.(\d\d)$")


def _ass_s(value: str) -> float:
    m = _ASS_TIME.match(value.strip())
    assert m, value
    h, mi, s, cs = (int(x) for x in m.groups())
    return h * 3600 + mi * 60 + s + cs / 100


def ffmpeg_cues(src: Path, charenc: str | None = None) -> list[RefCue]:
    """The cues the ffmpeg CLI reads from ``src``'s first subtitle stream (a subtitle file's
    demuxer chosen by its extension, as the reader's extension says; ``charenc`` for a file that
    is not UTF-8), text as shown, empty ones dropped, sorted. ASS/SSA comes out as ASS (its times
    are centiseconds: exact), anything else as SubRip (milliseconds, and FFmpeg's own tags)."""
    cues: list[RefCue] = []
    if _DEMUXER.get(src.suffix.lower()) == "ass":
        for line in _ffmpeg(src, "ass", charenc).split("\n"):
            if line.startswith("Dialogue:"):
                f = line.split(",", 9)
                cues.append((_ass_s(f[1]), _ass_s(f[2]), ass_visible(f[9])))
    else:
        for block in _SRT_BLOCK.split(_ffmpeg(src, "srt", charenc).strip("\n")):
            _, timing, *text = block.split("\n")
            m = _SRT_TIMING.match(timing)
            assert m, timing
            g = [int(x) for x in m.groups()]
            a = g[0] * 3600 + g[1] * 60 + g[2] + g[3] / 1000
            b = g[4] * 3600 + g[5] * 60 + g[6] + g[7] / 1000
            cues.append((a, b, ass_visible("\\N".join(text))))
    return sorted(c for c in cues if c[2])


# --------------------------------------------------------------------------- the W3C WebVTT parser


@dataclass(frozen=True)
class VttReading:
    cues: list[RefCue]
    #: the lines the W3C validator flags
    flagged: set[int]


def w3c_vtt(src: Path) -> VttReading:
    """The cues of a WebVTT file as the W3C parser reads them (text nodes joined, ruby text
    included, character references decoded), empty ones dropped, sorted."""
    node = shutil.which("node") or "node"
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    run = subprocess.run([node, str(_WEBVTT_DRIVER), str(src)], capture_output=True, timeout=120, env=env)
    if run.returncode:
        raise RuntimeError(f"the W3C parser cannot read {src}: {run.stderr.decode(errors='replace')[-500:]}")
    doc = json.loads(run.stdout)
    cues = [(float(a), float(b), shown(t)) for a, b, t in doc["cues"]]
    return VttReading(sorted(c for c in cues if c[2]), {int(n) for n in doc["errors"]})
