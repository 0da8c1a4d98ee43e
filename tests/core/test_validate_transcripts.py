"""``validate-data --transcript``: every video without a transcript (or with a bad one) named,
all at once, before a run."""

from __future__ import annotations

import pytest

from naru_eval.cli.main import main
from naru_eval.core.synthetic import SyntheticSpec, dialogue_srt, make_dataset, write_subtitles
from naru_eval.core.transcripts import TranscriptBook, TranscriptInput, TranscriptSource
from naru_eval.core.validate import validate
from naru_eval.media.subtitles import read_subtitle_file
from naru_eval.media.transcript import TranscriptError
from tests.helpers.data import read_jsonl, write_jsonl


@pytest.fixture()
def data(tmp_path):
    return make_dataset(tmp_path / "data", SyntheticSpec(counts={"N.1": 3}, n_videos=3, seconds=12.0))


def test_reports_the_videos_that_lack_a_transcript(tmp_path, data):
    subs = write_subtitles(data, tmp_path / "subs")
    (subs / "vid001.srt").unlink()
    (subs / "vid002.srt").write_text("1\n00:00:01,000 -> 00:00:02,000\nbad\n", encoding="utf-8")
    report = validate(data, videos=False, transcript=TranscriptSource.parse(str(subs)))
    assert set(report.transcripts) == {"vid000"}
    problems = "\n".join(report.problems)
    assert "'vid001'" in problems and "lacks a transcript: no vid001.{srt,vtt,ass,ssa}" in problems
    assert "'vid002'" in problems and "vid002.srt:2: malformed timing" in problems
    assert main(["validate-data", str(data), "--no-videos", "--transcript", str(subs)]) == 1


def test_asr_and_embedded_sources_name_what_is_missing(tmp_path, data, monkeypatch):
    monkeypatch.setenv("NARU_TRANSCRIPT_CACHE", str(tmp_path / "empty-cache"))
    report = validate(data, videos=False, transcript=TranscriptSource.parse("asr"))
    assert len(report.problems) == 3 and all("run `naru-eval transcribe`" in p for p in report.problems)
    report = validate(data, videos=False, transcript=TranscriptSource.parse("embedded"))
    assert len(report.problems) == 3 and all("no subtitle stream" in p for p in report.problems)


def test_complete_transcripts_pass(tmp_path, data, capsys):
    subs = write_subtitles(data, tmp_path / "subs")
    assert main(["validate-data", str(data), "--no-videos", "--transcript", str(subs)]) == 0
    assert "transcripts (dir:" in capsys.readouterr().out


def test_synthetic_dialogue_speaks_at_the_given_rate(tmp_path):
    p = tmp_path / "d.srt"
    p.write_text(dialogue_srt(3600.0), encoding="utf-8")
    t = read_subtitle_file(p)
    chars = sum(len(c.text) for c in t.cues)
    speaking = sum(c.end - c.start for c in t.cues)
    assert chars / speaking == pytest.approx(3.7, rel=0.01)
    assert t.cues[-1].end <= 3600.0 and len(t.cues) > 300


def test_a_subtitle_file_with_no_cue_is_a_problem(tmp_path, data):
    subs = write_subtitles(data, tmp_path / "subs")
    (subs / "vid001.vtt").write_text("WEBVTT\n\nNOTE nothing was said\n", encoding="utf-8")
    (subs / "vid001.srt").unlink()
    report = validate(data, videos=False, transcript=TranscriptSource.parse(str(subs)))
    assert set(report.transcripts) == {"vid000", "vid002"}
    assert any("'vid001'" in p and "vid001.vtt: has no cues" in p for p in report.problems)


def test_a_subtitle_link_leading_out_of_the_folder_is_refused_unless_allowed(tmp_path, data, monkeypatch):
    subs = write_subtitles(data, tmp_path / "subs")
    secret = tmp_path / "elsewhere" / "notes.srt"
    secret.parent.mkdir()
    secret.write_text("1\n00:00:01,000 --> 00:00:02,000\nsecret text\n", encoding="utf-8")
    (subs / "vid000.srt").unlink()
    (subs / "vid000.srt").symlink_to(secret)
    (subs / "inner").mkdir()
    (subs / "vid001.srt").rename(subs / "inner" / "vid001.srt")
    (subs / "vid001.srt").symlink_to(subs / "inner" / "vid001.srt")  # a link inside the folder is fine
    source = TranscriptSource.parse(str(subs))
    report = validate(data, videos=False, transcript=source)
    assert set(report.transcripts) == {"vid001", "vid002"}
    (problem,) = report.problems
    assert "'vid000'" in problem and "leads outside the transcript folder" in problem
    assert "NARU_ALLOW_EXTERNAL_VIDEOS=1" in problem
    book = TranscriptBook(TranscriptInput(source), {"vid000": None})
    with pytest.raises(TranscriptError, match="leads outside"):
        book.get("vid000")  # a run's own loading refuses it too
    monkeypatch.setenv("NARU_ALLOW_EXTERNAL_VIDEOS", "1")
    assert validate(data, videos=False, transcript=source).ok


def test_a_video_id_too_long_for_a_file_name_is_a_schema_problem(tmp_path, data, capsys):
    subs = write_subtitles(data, tmp_path / "subs")
    rows = read_jsonl(data / "annotations.jsonl")
    rows[0]["video_id"] = "v" * 252
    write_jsonl(data / "annotations.jsonl", rows)
    assert main(["validate-data", str(data), "--transcript", str(subs)]) == 1
    err = capsys.readouterr().err
    assert "'video_id' is 252 bytes" in err and "over the 255 a file system takes" in err


def test_no_videos_with_audio_is_refused_not_dropped(data, capsys):
    assert main(["validate-data", str(data), "--no-videos", "--audio"]) == 2
    assert "--audio checks each video's soundtrack" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dense", "long"])
def test_two_80_mb_subtitle_files_stay_under_1_gb(tmp_path, kind):
    """Issue 33's finding 11: two 80-MB subtitle files took validate-data to 3.5 GB. ``dense``
    (1.3 M short cues each) is refused at the cue cap, naming the line; ``long`` (200,000 cues of
    long lines each, under the caps) is read whole, one file at a time."""
    from tests.helpers.subtitle_memory import measure_validate

    got = measure_validate(80.0, kind, tmp_path)
    assert got["peak_rss_mib"] < 1024, got
    if kind == "dense":
        assert got["exit"] == 1 and "holds more than 200000 cues" in "\n".join(got["said"])
    else:
        assert got["exit"] == 0 and got["said"][-1] == "OK"
