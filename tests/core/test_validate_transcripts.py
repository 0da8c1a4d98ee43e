"""``validate-data --transcript``: every video without a transcript (or with a bad one) named,
all at once, before a run."""

from __future__ import annotations

import pytest

from naru_eval.cli.main import main
from naru_eval.core.synthetic import SyntheticSpec, dialogue_srt, make_dataset, write_subtitles
from naru_eval.core.transcripts import TranscriptSource
from naru_eval.core.validate import validate
from naru_eval.media.subtitles import read_subtitle_file


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
