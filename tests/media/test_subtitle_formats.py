"""Issue 33's subtitle findings, each on a file made for it: no cue glued into another, every
timing-like line parsed or named, format and encoding told by the bytes, hours unlimited, signs
refused, control characters stripped, caps on size and cues, bitmap streams refused with the
OCR hint."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from naru_eval.media import subtitles
from naru_eval.media.subtitles import read_embedded, read_subtitle_file
from naru_eval.media.transcript import Cue, TranscriptError
from tests.helpers.speech import ffmpeg, write_av


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    p = tmp_path / name
    p.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return p


def cues(p: Path) -> list[tuple[float, float, str]]:
    return [(c.start, c.end, c.text) for c in read_subtitle_file(p).cues]


SRT_ONE = "1\n00:00:01,000 --> 00:00:02,000\n最初\n\n"

# --------------------------------------------------------------------------- finding 6: no gluing


def test_a_malformed_and_an_hourless_srt_timing_are_each_named(tmp_path):
    text = (
        SRT_ONE
        + "2\n00:00:0x,000 --> 00:00:04,000\n二番目\n\n"  # line 6
        + "3\n00:05,000 --> 00:06,000\n三番目\n\n"  # line 10
        + "4\n00:00:07,000 --> 00:00:08,000\n四番目\n"
    )
    p = write(tmp_path, "v.srt", text)
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(p)
    assert e.value.line == 6 and str(e.value).startswith(f"{p}:6:")
    assert "2 bad lines at line 6, 10" in e.value.reason
    assert "'00:05,000 --> 00:06,000': SRT times are HH:MM:SS,mmm" in e.value.reason


def test_a_webvtt_note_of_several_lines_and_named_cues_glue_nothing(tmp_path):
    vtt = (
        "WEBVTT\n\n00:01.000 --> 00:02.000\n最初\n\n"
        "NOTE a comment\nover two lines\nand a third\n\n"
        "scene-2\n00:03.000 --> 00:04.000\n二番目\n\n"
        "intro two\n00:05.000 --> 00:06.000\n三番目\n"
        "00:07.000 --> 00:08.000\n四番目\n"  # no blank line before it: the rules start a new cue
    )
    got = cues(write(tmp_path, "v.vtt", vtt))
    assert got == [(1.0, 2.0, "最初"), (3.0, 4.0, "二番目"), (5.0, 6.0, "三番目"), (7.0, 8.0, "四番目")]


def test_a_webvtt_timing_that_does_not_parse_is_named(tmp_path):
    text = "WEBVTT\n\n00:01.000 --> 00:02.000\na\n\n00:03.000 --> 00:0x.000\nb\n\n00:05.000 -> 00:06.000\nc\n"
    p = write(tmp_path, "v.vtt", text)
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(p)
    assert e.value.line == 6 and "2 bad lines at line 6, 9" in e.value.reason
    assert "malformed timing line '00:05.000 -> 00:06.000'" in e.value.reason


# --------------------------------------------------------------------------- finding 7: format by content

ASS_EVENTS = (
    "[Script Info]\nScriptType: v4.00+\n\n[Events]\n"
    "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
    "Dialogue: 0,0:00:01.00,0:00:02.00,Default,,0,0,0,,{\\b1}最初{\\b0}\n"
    "Dialogue: 0,0:00:03.00,0:00:04.00,Default,,0,0,0,,二番目\n"
)


@pytest.mark.parametrize(
    "name,data,note",
    [
        ("v.srt", ASS_EVENTS.encode(), "read as ASS/SSA"),
        ("v.ass", (SRT_ONE + "2\n00:00:03,000 --> 00:00:04,000\n二番目\n").encode(), "read as SubRip"),
        ("v.srt", (SRT_ONE + "2\n00:00:03,000 --> 00:00:04,000\n二番目\n").encode("utf-16-be"), "utf-16-be"),
        ("v.srt", (SRT_ONE + "2\n00:00:03,000 --> 00:00:04,000\n二番目\n").encode("utf-16-le"), "utf-16-le"),
    ],
    ids=["ass-named-srt", "srt-named-ass", "utf16be-no-bom", "utf16le-no-bom"],
)
def test_the_format_and_encoding_are_read_from_the_bytes(tmp_path, name, data, note):
    t = read_subtitle_file(write(tmp_path, name, data))
    assert [(c.start, c.end, c.text) for c in t.cues] == [(1.0, 2.0, "最初"), (3.0, 4.0, "二番目")]
    assert note in t.source


@pytest.mark.parametrize(
    "name,text",
    [("v.vtt", "WEBVTT\n\nNOTE nothing here\n"), ("v.ass", "[Script Info]\nTitle: x\n"), ("v.srt", "\n\n")],
)
def test_a_file_with_no_cue_is_an_error(tmp_path, name, text):
    with pytest.raises(TranscriptError, match="no cues"):
        read_subtitle_file(write(tmp_path, name, text))


# --------------------------------------------------------------------------- finding 8: encodings


def test_iso_2022_jp_is_told_by_its_escapes(tmp_path):
    p = write(tmp_path, "v.srt", (SRT_ONE + "2\n00:00:03,000 --> 00:00:04,000\n深海へ潜って\n").encode("iso2022_jp"))
    t = read_subtitle_file(p)
    assert [c.text for c in t.cues] == ["最初", "深海へ潜って"] and "(iso2022_jp)" in t.source


def test_a_file_of_utf8_and_cp932_lines_is_refused(tmp_path):
    data = SRT_ONE.encode("utf-8") + "2\n00:00:03,000 --> 00:00:04,000\n二番目\n".encode("cp932")
    p = write(tmp_path, "v.srt", data)
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(p)
    assert e.value.line == 7 and "mixes encodings: line 3 is UTF-8" in e.value.reason


def test_a_byte_order_mark_the_bytes_then_break_is_named_by_line(tmp_path):
    p = write(tmp_path, "v.srt", b"\xef\xbb\xbf" + SRT_ONE.encode() + b"2\n00:00:03,000 --> 00:00:04,000\n\xff\xfe\n")
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(p)
    assert e.value.line == 7 and "does not decode as utf-8-sig" in e.value.reason


# --------------------------------------------------------------------------- finding 9: times, signs, controls


@pytest.mark.parametrize(
    "name,text",
    [
        ("v.srt", "1\n100:00:00,000 --> 100:00:01,500\n百時間後\n"),
        ("v.vtt", "WEBVTT\n\n100:00:00.000 --> 100:00:01.500\n百時間後\n"),
        ("v.ass", "[Events]\nDialogue: 0,100:00:00.00,100:00:01.50,Default,,0,0,0,,百時間後\n"),
    ],
)
def test_hours_are_unlimited(tmp_path, name, text):
    assert cues(write(tmp_path, name, text)) == [(360000.0, 360001.5, "百時間後")]


@pytest.mark.parametrize(
    "name,text,line",
    [
        ("v.srt", SRT_ONE + "2\n-00:00:01,000 --> 00:00:02,000\n負\n", 6),
        ("v.vtt", "WEBVTT\n\n-00:01.000 --> 00:02.000\n負\n", 3),
        ("v.ass", "[Events]\nDialogue: 0,-0:00:01.00,0:00:02.00,Default,,0,0,0,,負\n", 2),
    ],
)
def test_a_signed_time_is_refused(tmp_path, name, text, line):
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(write(tmp_path, name, text))
    assert e.value.line == line and "signed time" in e.value.reason


def test_control_characters_never_reach_the_text(tmp_path):
    p = write(tmp_path, "v.srt", "1\n00:00:01,000 --> 00:00:02,000\nNUL\x00 ESC\x1b[31m BEL\x07 DEL\x7f C1\x85 ok\n")
    assert cues(p) == [(1.0, 2.0, "NUL ESC[31m BEL DEL C1 ok")]


# --------------------------------------------------------------------------- finding 11: caps


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(subtitles, "MAX_SUBTITLE_BYTES", 1000)
    p = write(tmp_path, "v.srt", SRT_ONE * 100)
    with pytest.raises(TranscriptError, match="over the 1,000-byte cap on a subtitle file"):
        read_subtitle_file(p)


def test_a_file_over_the_cue_cap_is_refused_where_it_passes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(subtitles, "MAX_CUES", 3)
    text = "".join(f"{i}\n00:00:{i:02d},000 --> 00:00:{i:02d},500\n台詞{i}\n\n" for i in range(1, 6))
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(write(tmp_path, "v.srt", text))
    assert e.value.line == 14 and "more than 3 cues" in e.value.reason


# --------------------------------------------------------------------------- finding 12: bitmap streams


def _pgs(path: Path) -> Path:
    """A two-display-set PGS (Blu-ray bitmap subtitle) stream: composition and end segments."""

    def seg(pts: int, kind: int, payload: bytes) -> bytes:
        return b"PG" + struct.pack(">IIBH", pts, 0, kind, len(payload)) + payload

    def pcs(number: int, state: int) -> bytes:
        return struct.pack(">HHBHBBBB", 64, 32, 0x10, number, state, 0, 0, 0)

    path.write_bytes(seg(90000, 0x16, pcs(0, 0x80)) + seg(90000, 0x80, b"") + seg(180000, 0x16, pcs(1, 0)))
    return path


def test_a_bitmap_only_file_is_refused_with_the_ocr_hint(tmp_path):
    video = write_av(tmp_path / "v.mp4", 2.0, None, fps=4)
    out = tmp_path / "pgs.mkv"
    ffmpeg(
        "-i",
        str(video),
        "-f",
        "sup",
        "-i",
        str(_pgs(tmp_path / "s.sup")),
        "-map",
        "0",
        "-map",
        "1",
        "-c",
        "copy",
        str(out),
    )
    with pytest.raises(TranscriptError) as e:
        read_embedded(out)
    assert "only hdmv_pgs_subtitle" in e.value.reason and "need OCR" in e.value.reason
    with pytest.raises(TranscriptError, match="need OCR"):
        read_embedded(out, 0)


def test_every_cue_of_a_made_file_is_kept_in_order(tmp_path):
    """Overlaps, a zero-length cue, a cue whose text is only markup (dropped: no text), an index
    line missing: none glued, none lost."""
    text = (
        "00:00:01,000 --> 00:00:03,000\n<i>重なる</i>\n\n"
        "00:00:02,000 --> 00:00:02,000\n零\n\n"
        "7\n00:00:04,000 --> 00:00:05,000\n{\\an8}<b></b>\n\n"
        "00:00:06,000 --> 00:00:07,000\n2 人\n12\n"
    )
    assert cues(write(tmp_path, "v.srt", text)) == [(1.0, 3.0, "重なる"), (2.0, 2.0, "零"), (6.0, 7.0, "2 人 12")]
    assert Cue(6.0, 7.0, "x").__slots__  # a cue is slotted: 200,000 of them are small
