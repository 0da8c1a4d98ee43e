"""Every subtitle file of ``../shared/realav/subs`` (real files nobody on the project made,
MANIFEST.tsv naming each source) reads as its reference reads it, or is refused by file and line
for a reason the reference confirms.

References (``tests/helpers/subtitle_reference.py``): the ffmpeg CLI for SubRip and ASS/SSA, the
W3C's WebVTT parser for WebVTT. Cue times agree within 1 ms, texts as a renderer shows them. A
file the manifest marks as derived (re-encoded) must read as the reference reads its original.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from naru_eval.media.subtitles import EXTENSION_FORMATS, read_embedded, read_subtitle_file
from naru_eval.media.transcript import TranscriptError
from tests.helpers.speech import mux_subtitles
from tests.helpers.subtitle_reference import (
    REALAV,
    RefCue,
    ffmpeg_cues,
    manifest,
    missing_reference,
    w3c_vtt,
)

SUBS = REALAV / "subs"
FILES = sorted(p.name for p in SUBS.iterdir() if p.suffix.lower() in EXTENSION_FORMATS) if SUBS.is_dir() else []
_UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")


def _ffmpeg_reading(src: Path, tmp_path: Path) -> list[RefCue]:
    """ffmpeg's reading; a UTF-32 file (which FFmpeg's text reader does not take) is handed to
    it as UTF-8, decoded by its byte-order mark."""
    data = src.read_bytes()
    if data.startswith(_UTF32_BOMS):
        src = tmp_path / src.name
        src.write_bytes(data.decode("utf-32").encode("utf-8"))
    return ffmpeg_cues(src)


def _raw_line(path: Path, n: int) -> bytes:
    return path.read_bytes().replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")[n - 1]


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _same(got: list[RefCue], want: list[RefCue], name: str) -> None:
    assert len(got) == len(want), f"{name}: {len(got)} cues, the reference reads {len(want)}"
    for g, w in zip(got, want, strict=True):
        assert abs(g[0] - w[0]) <= 0.001 and abs(g[1] - w[1]) <= 0.001 and g[2] == w[2], f"{name}: {g} != {w}"


@pytest.mark.parametrize(
    "name", FILES or [pytest.param("", marks=pytest.mark.skip(reason=f"{SUBS} is absent (the real-file corpus)"))]
)
def test_a_real_subtitle_file_reads_as_its_reference(name, tmp_path):
    path = SUBS / name
    fmt = EXTENSION_FORMATS[path.suffix.lower()]
    why = missing_reference(fmt)
    if why:
        pytest.skip(why)
    row = manifest().get(f"subs/{name}", {})
    original = REALAV / row["path"] if row.get("repo") == "derived" else path
    vtt = w3c_vtt(original) if fmt == "vtt" else None
    want = vtt.cues if vtt is not None else _ffmpeg_reading(original, tmp_path)
    try:
        got = read_subtitle_file(path)
    except TranscriptError as e:
        # refused: by file, and by a line the reference agrees is bad, or because there is no cue
        assert e.path == str(path)
        if not want:
            assert "no cues" in e.reason
            return
        assert e.line is not None and str(e).startswith(f"{path}:{e.line}:"), str(e)
        flagged = vtt is not None and e.line in vtt.flagged
        assert flagged or ("not UTF-8" in e.reason and not _utf8(_raw_line(path, e.line))), (
            f"refused at a good line: {e}"
        )
        return
    _same([(c.start, c.end, c.text) for c in got.cues], want, name)
    for c in got.cues:  # no markup reaches the model
        assert "{\\" not in c.text and not any(ord(ch) < 32 for ch in c.text), c


def test_the_embedded_pair_reads_as_ffmpeg_and_as_its_file(tmp_path):
    """pysubs2's 23.976-fps frame-timestamp pair: the SRT muxed into its MKV reads, through the
    video's own stream, as ffmpeg reads that stream and as the file itself reads."""
    video, srt = REALAV / "embed" / "pysubs2_test_video.mkv", REALAV / "embed" / "pysubs2_test_video.srt"
    why = missing_reference("srt")
    if why or not video.is_file():
        pytest.skip(why or f"{video} is absent")
    muxed = mux_subtitles(video, srt, tmp_path / "with_subs.mkv", "srt")
    embedded = [(c.start, c.end, c.text) for c in read_embedded(muxed).cues]
    _same(embedded, ffmpeg_cues(muxed), "embedded stream")
    _same(embedded, [(c.start, c.end, c.text) for c in read_subtitle_file(srt).cues], "the pair's file")
    assert len(embedded) == 500
