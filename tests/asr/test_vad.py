"""naru_eval.asr.vad, and the soundtrack ASR takes from the one audio sampler (what the sampler
itself guarantees, placement on the frames' clock included, is tests/media/test_audio.py's):
speech found, music and silence not; windows of at most 30 s."""

from __future__ import annotations

import numpy as np
import pytest

from naru_eval.asr.run import soundtrack_of
from naru_eval.asr.vad import clip, plan_windows, speech_probs, windows
from naru_eval.media.asr_cache import AsrSettings
from naru_eval.media.audio import SAMPLE_RATE, sample_audio
from naru_eval.media.transcript import TranscriptError
from tests.helpers.speech import soundtrack, write_av

SPEECH = [(2.0, 5.0), (8.0, 10.0)]


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    """60 s: speech at 2-5 s and 8-10 s, music at 15-30 s, the rest silence; the audio stream
    starts 0.5 s after the first frame."""
    audio = soundtrack(60.0, SPEECH, music_at=[(15.0, 30.0)])
    return write_av(tmp_path_factory.mktemp("av") / "speech.mp4", 60.0, audio, audio_start_s=0.5)


def test_the_soundtrack_is_the_samplers_full_track(video):
    """ASR hears what an omni model given the full track hears: the same samples, 0 to the video's
    duration; the audio stream starting 0.5 s late is silence before it."""
    x = soundtrack_of(video)
    assert x.dtype == np.float32 and len(x) == 60 * SAMPLE_RATE
    assert np.array_equal(x, sample_audio(video, [(0.0, 60.0)]).samples)
    loud = np.nonzero(np.abs(x) > 0.05)[0] / SAMPLE_RATE
    assert loud[0] == pytest.approx(2.5, abs=0.05)  # speech at 2 s of audio that starts at 0.5 s


def test_no_audio_stream_is_a_transcript_error_naming_the_file(tmp_path):
    silent = write_av(tmp_path / "silent.mp4", 2.0, None)
    with pytest.raises(TranscriptError, match="no audio stream") as e:
        soundtrack_of(silent)
    assert str(silent) in str(e.value)


def test_vad_finds_the_speech_and_not_the_music_or_silence(video):
    x = soundtrack_of(video)
    ws = plan_windows(x, AsrSettings())
    speech = [seg for w in ws for seg in w.speech]
    assert speech, "no speech found"
    for a, b in speech:  # every segment lies in a spoken stretch (shifted by the 0.5-s audio start)
        assert any(s + 0.5 - 0.3 <= a and b <= e + 0.5 + 0.3 for s, e in SPEECH), (a, b)
    covered = sum(b - a for a, b in speech)
    assert covered > 0.8 * sum(e - s for s, e in SPEECH)
    assert all(b <= 12.0 for _, b in speech)  # nothing in the music (15-30 s) or the silence after


def test_batched_rows_equal_a_sequential_pass_of_each_row():
    x = np.tile(soundtrack(70.0, [(3.0, 6.0), (40.0, 45.0), (65.0, 69.0)]), 2)
    rows = speech_probs(x, min_row_s=60.0, warm_s=2.0)
    warm = int(2.0 * SAMPLE_RATE / 512)
    per = len(rows) // 2 + (len(rows) % 2)
    second = x[(per - warm) * 512 :]
    alone = speech_probs(second, rows=1)[warm : warm + per]
    np.testing.assert_allclose(rows[per : per + len(alone)], alone[: len(rows) - per], atol=1e-4)


def test_windows_merge_up_to_the_limit_and_split_long_speech():
    ws = windows([(0.0, 5.0), (10.0, 20.0), (25.0, 31.0), (40.0, 105.0)], window_s=30.0)
    assert [(w.start, w.end) for w in ws] == [(0.0, 20.0), (25.0, 31.0), (40.0, 70.0), (70.0, 100.0), (100.0, 105.0)]
    assert all(w.end - w.start <= 30.0 for w in ws)


def test_clip_silences_what_is_not_speech():
    audio = np.ones(10 * SAMPLE_RATE, np.float32)
    w = windows([(1.0, 2.0), (3.0, 4.0)], 30.0)[0]
    c = clip(audio, w)
    assert len(c) == 3 * SAMPLE_RATE
    assert c[:SAMPLE_RATE].all() and not c[SAMPLE_RATE : 2 * SAMPLE_RATE].any() and c[2 * SAMPLE_RATE :].all()
