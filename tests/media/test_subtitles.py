"""naru_eval.media.subtitles and .transcript: subtitle files (SRT, WebVTT, ASS) and a video's own
subtitle stream into the one transcript form; every malformed line named."""

from __future__ import annotations

from pathlib import Path

import pytest

from naru_eval.media.fingerprint import content_fingerprint
from naru_eval.media.subtitles import find_subtitle_file, read_embedded, read_subtitle_file
from naru_eval.media.transcript import Cue, Transcript, TranscriptError
from tests.helpers.speech import mux_subtitles, write_av

# overlaps (cues 1 and 2), a gap (2 -> 3), markup, a two-line cue, a 4-hour timestamp
SRT = (
    "1\n00:00:01,000 --> 00:00:03,500\n<i>こんにちは</i>、元気？\n\n"
    "2\n00:00:02,000 --> 00:00:04,000\n<b>重なる</b>台詞\n二行目\n\n"
    "3\n00:10:00,250 --> 00:10:02,000\n間の後 (10:30 -> 11:00)\n\n"
    "4\n04:00:01,000 --> 04:00:03,000\n四時間後\n"
)
SRT_CUES = [
    Cue(1.0, 3.5, "こんにちは、元気？"),
    Cue(2.0, 4.0, "重なる台詞 二行目"),
    Cue(600.25, 602.0, "間の後 (10:30 -> 11:00)"),
    Cue(14401.0, 14403.0, "四時間後"),
]

ASS = """[Script Info]
ScriptType: v4.00+

[V4+ Styles]
Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding
Style: Default,Arial,20,&H00FFFFFF,&H000000FF,&H00000000,&H00000000,0,0,0,0,100,100,0,0,1,2,2,2,10,10,10,1

[Events]
Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text
Dialogue: 0,0:00:01.00,0:00:03.50,Default,,0,0,0,,{\\an8\\pos(10,10)}{\\b1}こんにちは{\\b0}、元気？
Comment: 0,0:00:01.00,0:00:03.00,Default,,0,0,0,,a translator's note
Dialogue: 0,0:00:02.00,0:00:04.00,Default,,0,0,0,,{\\i1}重なる{\\i0}台詞\\N二行目
Dialogue: 0,0:00:05.00,0:00:06.00,Default,,0,0,0,,{\\p1}m 0 0 l 100 0 100 100{\\p0}
Dialogue: 0,0:10:00.25,0:10:02.00,Default,,0,0,0,,{\\fad(200,200)}間の後 (10:30 -> 11:00)
Dialogue: 0,4:00:01.00,4:00:03.00,Default,,0,0,0,,四時間後
"""


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    "encoding,bom,newline",
    [("utf-8", b"", "\n"), ("utf-8", b"\xef\xbb\xbf", "\r\n"), ("cp932", b"", "\r\n"), ("euc_jp", b"", "\n")],
    ids=["utf8", "utf8-bom-crlf", "shift-jis-crlf", "euc-jp"],
)
def test_srt_in_every_encoding_gives_the_same_cues(tmp_path, encoding, bom, newline):
    p = write(tmp_path, "v1.srt", bom + SRT.replace("\n", newline).encode(encoding))
    t = read_subtitle_file(p)
    assert list(t.cues) == SRT_CUES
    assert t.source.startswith("file:v1.srt")
    if encoding not in ("utf-8",):
        assert encoding.replace("_", "") in t.source.replace("_", "")  # the legacy encoding is recorded


def test_ass_override_tags_drawings_and_comments_are_stripped(tmp_path):
    t = read_subtitle_file(write(tmp_path, "v1.ass", ASS.replace("\n", "\r\n").encode("utf-8-sig")))
    assert list(t.cues) == SRT_CUES  # same speech, same times: the tags, the comment and the drawing are gone


def test_webvtt_notes_ids_settings_and_voice_tags(tmp_path):
    vtt = (
        "WEBVTT\n\nNOTE made by hand\nacross two lines\n\n"
        "intro\n00:01.000 --> 00:03.500 align:start position:10%\n<v 太郎>こんにちは</v>、元気？\n\n"
        "00:02.000 --> 00:04.000\n重なる台詞\n二行目\n\n"
        "04:00:01.000 --> 04:00:03.000\n四時間後\n"
    )
    t = read_subtitle_file(write(tmp_path, "v1.vtt", vtt.encode()))
    assert list(t.cues) == [SRT_CUES[0], SRT_CUES[1], SRT_CUES[3]]


def test_a_malformed_timing_line_is_named_by_file_and_line_every_one_at_once(tmp_path):
    bad = SRT.replace("00:10:00,250 --> 00:10:02,000", "00:10:00,250 -> 00:10:02").replace(
        "04:00:01,000 --> 04:00:03,000", "04:00:01,000 --> 04:00:0x,000"
    )
    p = write(tmp_path, "v1.srt", bad.encode())
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(p)
    assert e.value.line == 11
    assert str(e.value).startswith(f"{p}:11:")
    assert "line 11, 15" in str(e.value)


def test_an_ass_event_with_a_bad_time_is_named(tmp_path):
    p = write(tmp_path, "v1.ass", ASS.replace("0:10:00.25,", "0:10:0x.25,").encode())
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(p)
    assert e.value.line == 14 and "bad start time '0:10:0x.25'" in str(e.value)


def test_a_cue_ending_before_it_starts_is_named(tmp_path):
    p = write(
        tmp_path, "v1.srt", SRT.replace("00:00:02,000 --> 00:00:04,000", "00:00:05,000 --> 00:00:04,000").encode()
    )
    with pytest.raises(TranscriptError) as e:
        read_subtitle_file(p)
    assert e.value.line == 6 and "before it starts" in str(e.value)


def test_bytes_no_encoding_decodes_are_an_error(tmp_path):
    p = write(tmp_path, "v1.srt", b"1\n00:00:01,000 --> 00:00:02,000\n\x81\xff\xfe\x80\x81\xff\n")
    with pytest.raises(TranscriptError, match="save it as UTF-8"):
        read_subtitle_file(p)


def test_find_subtitle_file(tmp_path):
    assert find_subtitle_file(tmp_path, "v1") is None
    write(tmp_path, "v1.srt", SRT.encode())
    assert find_subtitle_file(tmp_path, "v1") == tmp_path / "v1.srt"
    write(tmp_path, "v1.ass", ASS.encode())
    with pytest.raises(TranscriptError, match="2 subtitle files"):
        find_subtitle_file(tmp_path, "v1")


@pytest.fixture(scope="module")
def plain_video(tmp_path_factory) -> Path:
    return write_av(tmp_path_factory.mktemp("av") / "v.mp4", 8.0, None, fps=4)


@pytest.mark.parametrize(
    "suffix,codec,sub", [(".mkv", "srt", ".srt"), (".mkv", "ass", ".ass"), (".mp4", "mov_text", ".srt")]
)
def test_embedded_text_subtitle_streams(tmp_path, plain_video, suffix, codec, sub):
    cues = "1\n00:00:00,500 --> 00:00:02,000\n<i>最初</i>の台詞\n\n2\n00:00:04,000 --> 00:00:05,500\n間の後\n"
    src = tmp_path / f"subs{sub}"
    if sub == ".ass":
        ass = (
            ASS.split("[Events]")[0]
            + "[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
        )
        ass += "Dialogue: 0,0:00:00.50,0:00:02.00,Default,,0,0,0,,{\\b1}最初{\\b0}の台詞\n"
        ass += "Dialogue: 0,0:00:04.00,0:00:05.50,Default,,0,0,0,,{\\pos(1,1)}間の後\n"
        src.write_text(ass, encoding="utf-8")
    else:
        src.write_text(cues, encoding="utf-8")
    out = mux_subtitles(plain_video, src, tmp_path / f"with_subs{suffix}", codec)
    t = read_embedded(out)
    assert list(t.cues) == [Cue(0.5, 2.0, "最初の台詞"), Cue(4.0, 5.5, "間の後")]
    assert t.source == "embedded:0"


def test_embedded_times_are_on_the_frames_clock(tmp_path, plain_video):
    """A file whose streams start at 10 s: the cue times are shifted by the video's start."""
    from tests.helpers.speech import ffmpeg

    src = tmp_path / "s.srt"
    src.write_text("1\n00:00:01,000 --> 00:00:02,000\nはい\n", encoding="utf-8")
    out = mux_subtitles(plain_video, src, tmp_path / "a.mkv", "srt")
    shifted = tmp_path / "shifted.mkv"
    ffmpeg("-i", str(out), "-map", "0", "-c", "copy", "-output_ts_offset", "10", str(shifted))
    assert list(read_embedded(shifted).cues) == [Cue(1.0, 2.0, "はい")]


def test_a_video_without_subtitles_is_named(plain_video):
    with pytest.raises(TranscriptError, match="no subtitle stream") as e:
        read_embedded(plain_video)
    assert str(plain_video) in str(e.value)


def test_transcript_json_round_trip_and_tampering(tmp_path):
    t = Transcript.of(SRT_CUES[::-1] + [Cue(5.0, 6.0, "  ")], "file:v1.srt")
    assert list(t.cues) == SRT_CUES  # sorted, the empty cue dropped
    p = tmp_path / "t.json"
    t.write(p)
    back = Transcript.read(p)
    assert back == t and back.fingerprint == t.fingerprint
    p.write_text(p.read_text(encoding="utf-8").replace("四時間後", "改竄"), encoding="utf-8")
    with pytest.raises(TranscriptError, match="fingerprint"):
        Transcript.read(p)


def test_content_fingerprint_follows_content_not_name(tmp_path, plain_video):
    copy = tmp_path / "renamed.mp4"
    copy.write_bytes(plain_video.read_bytes())
    assert content_fingerprint(copy) == content_fingerprint(plain_video)
    data = bytearray(plain_video.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte in the middle: the sampled blocks do not all cover it...
    other = tmp_path / "other.mp4"
    other.write_bytes(bytes(data[:-1]))  # ...but the size does
    assert content_fingerprint(other) != content_fingerprint(plain_video)
