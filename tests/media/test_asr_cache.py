"""The ASR cache's key and look-up: how the samples are made is part of the key, and an entry made
from other samples is never what a run reads."""

from __future__ import annotations

import json

import pytest

from naru_eval.media import asr_cache
from naru_eval.media.asr_cache import AsrSettings, entry, find
from naru_eval.media.audio import CONVERSION
from naru_eval.media.transcript import Cue, Transcript


def _finish(video, asr: AsrSettings, root) -> None:
    """A finished entry, written as ``naru-eval transcribe`` writes one."""
    e = entry(video, asr, root)
    e.directory.mkdir(parents=True, exist_ok=True)
    e.settings_file.write_text(json.dumps(e.record(asr)), encoding="utf-8")
    Transcript.of([Cue(1.0, 2.0, "こんにちは")], asr.label).write(e.transcript)


def test_the_key_includes_how_the_samples_are_made(monkeypatch):
    asr = AsrSettings()
    assert asr.record()["samples"] == {"rate": 16_000, "conversion": CONVERSION}
    before = asr.key()
    monkeypatch.setattr(asr_cache, "SAMPLES", {"rate": 16_000, "conversion": "mono-ffmpeg-default/swr/f32"})
    assert asr.key() != before


def test_an_entry_made_from_other_samples_is_passed_over(tmp_path, monkeypatch):
    video = tmp_path / "ep01.mp4"
    video.write_bytes(b"not decoded here" * 1000)
    asr = AsrSettings()
    with monkeypatch.context() as m:  # an entry from a decoder that made other samples
        m.setattr(asr_cache, "SAMPLES", {"rate": 16_000, "conversion": "mono-ffmpeg-default/swr/f32"})
        _finish(video, asr, tmp_path)
        assert find(video, root=tmp_path) is not None  # found while it is this version's
    assert not entry(video, asr, tmp_path).done
    assert find(video, root=tmp_path) is None  # not now: a run reports no transcript instead
    _finish(video, asr, tmp_path)
    assert find(video, root=tmp_path) == entry(video, asr, tmp_path).transcript  # and no "keep one" error


def test_two_current_entries_of_one_model_are_an_error(tmp_path):
    video = tmp_path / "ep01.mp4"
    video.write_bytes(b"x" * 5000)
    _finish(video, AsrSettings(), tmp_path)
    _finish(video, AsrSettings(window_s=20.0), tmp_path)
    with pytest.raises(ValueError, match="keep one"):
        find(video, root=tmp_path)
