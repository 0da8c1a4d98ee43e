"""Where each decoded audio frame goes (issue 33, findings 1-3), on media made here.

The timeline's rule on frames whose timestamps we choose: a container's rounding and one-frame
jitter continue the run, a jump the next frame confirms is real (a gap filled with silence, an
overlap dropped). Then the rule on files: a Matroska stream copy of an MP4 is the MP4's
soundtrack sample for sample; a damaged packet is decoded past and its time is silence, named
and not counted as covered; a format change mid-stream is decoded past, each run with its own
layout and rate; Matroska streams that start late are not "truncated".
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from naru_eval.media.audio import SAMPLE_RATE, audio_note, probe_audio, sample_track
from naru_eval.media.audio_decode import Timeline
from naru_eval.media.index import frame_index
from naru_eval.media.video import probe_video
from tests.helpers.audio_reference import compare, ffmpeg, reference
from tests.helpers.soundtrack import Soundtrack, audio_packet_at, onsets, remux, write

SPEC = replace(Soundtrack(), audio_start_s=0.48)
#: an AAC frame at 48 kHz
FRAME = 1024


@pytest.fixture(scope="module")
def mp4(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("timeline") / "late.mp4", SPEC)


def frames(stamps_ms: list[float], samples: list[int] | int = FRAME, rate: int = 48_000) -> list[av.AudioFrame]:
    """Real decoded-frame objects (stereo, float) stamped in milliseconds, as Matroska stamps them."""
    sizes = samples if isinstance(samples, list) else [samples] * len(stamps_ms)
    out = []
    for ms, n in zip(stamps_ms, sizes, strict=True):
        f = av.AudioFrame.from_ndarray(np.ones((2, n), np.float32), format="fltp", layout="stereo")
        f.sample_rate, f.pts, f.time_base = rate, round(ms), Fraction(1, 1000)
        out.append(f)
    return out


def placed(stamps_ms: list[float], samples: list[int] | int = FRAME, rate: int = 48_000) -> list[tuple[int, int, bool]]:
    """(first sample, samples, silence) of what the timeline gives out, at ``rate``."""
    t = Timeline()
    out = [p for f in frames(stamps_ms, samples, rate) for p in t.feed(f)] + t.close()
    return [(int(p.frame.pts), int(p.frame.samples), p.silence) for p in out]


def true_ms(k: int, n: int = FRAME, rate: int = 48_000) -> float:
    return k * n * 1000 / rate


def test_millisecond_stamps_continue_the_run():
    """AAC frames of 21.33 ms stamped to the millisecond: every frame follows the one before,
    sample for sample (each at its own rounded stamp overlapped or holed the waveform)."""
    out = placed([round(true_ms(k)) for k in range(50)])
    assert [s for s, _, _ in out] == [k * FRAME for k in range(50)]


def test_one_frame_off_is_jitter():
    """Vorbis in WebM: the frame at a block switch stamped 10 ms late, the next 10 ms early; and
    a stream whose rate changed, its stamps interpolated at the old rate (1.9 ms a frame off,
    back at the next packet's own stamp): the run goes on."""
    stamps = [round(true_ms(k)) for k in range(8)]
    stamps[3] += 10
    assert [s for s, _, _ in placed(stamps)] == [k * FRAME for k in range(8)]
    stale = [true_ms(k, FRAME, 44_100) - (k % 5) * 1.9 for k in range(15)]  # 48-kHz spacing, resynced
    out = placed([round(t, 3) for t in stale], FRAME, 44_100)
    assert [s for s, _, _ in out] == [k * FRAME for k in range(15)] and not any(s for *_, s in out)


def test_a_real_jump_is_kept():
    """A lost frame (the stamps after it follow on from each other): its time is silence, the
    frames after it at their place, exactly a frame later even on a millisecond clock; a gap of
    155 ms likewise; an overlap keeps what came first."""
    lost = [round(true_ms(k)) for k in range(10) if k != 4]
    out = placed(lost)
    assert out[4] == (4 * FRAME, FRAME, True) and [s for s, _, sil in out if not sil] == [
        k * FRAME for k in range(10) if k != 4
    ]
    gap = [0, round(true_ms(1)), 176.0, 176.0 + round(true_ms(1))]
    starts = [(s, sil) for s, _, sil in placed(gap)]
    assert starts[-2:] == [(176 * 48, False), (176 * 48 + FRAME, False)] and starts[2] == (2 * FRAME, True)
    back = placed([0, 21, 43, 54, 75])  # the fourth frame 10 ms early, and the fifth follows it
    assert back[3:] == [(3 * FRAME, 54 * 48 + FRAME - 3 * FRAME, False), (54 * 48 + FRAME, FRAME, False)]


def test_a_matroska_copy_is_the_mp4s_soundtrack(mp4, tmp_path):
    """Finding 1: the same AAC packets in Matroska (millisecond stamps) give the MP4's samples,
    not a waveform overlapped or holed at every frame (SNR -1 to 6 dB before)."""
    mkv = remux(mp4, tmp_path / "copy.mkv")
    want, got = sample_track(mp4), sample_track(mkv)
    m = compare(got.samples, want.samples)
    assert m.lag == 0 and m.snr_db >= 60, m
    assert onsets(got.samples, SAMPLE_RATE) == pytest.approx(list(SPEC.beeps), abs=0.002)


def test_a_damaged_packet_is_decoded_past(mp4, tmp_path, caplog):
    """Finding 2: the AAC packet playing at 5.52 s (inside a beep) zeroed. The track is decoded
    past it as the ffmpeg CLI does (the whole file was refused before): its 21.3 ms are silence
    and out of ``covered_s``, everything before is the clean decode, everything from the next
    frames on too (at its place: nothing spliced), and the skipped packet is said."""
    bad = remux(mp4, tmp_path / "bad.mkv", damage=audio_packet_at(mp4, 5.52))
    clean, got = sample_track(mp4), sample_track(bad)
    assert got.covered_s[0] == pytest.approx(clean.covered_s[0] - FRAME / 48_000, abs=1e-3)
    hole = np.flatnonzero(np.abs(got.samples - clean.samples) > 1e-4) / SAMPLE_RATE
    assert 5.49 < hole.min() and hole.max() < 5.52 + 3 * FRAME / 48_000  # the frame, and the decoder's overlap
    assert np.count_nonzero(got.samples[int(5.52 * SAMPLE_RATE) : int(5.53 * SAMPLE_RATE)]) == 0
    assert "1 packet(s) the decoder refused were skipped" in caplog.text
    info = probe_audio(bad, whole=True)  # what validate-data --audio decodes: the run's pass
    assert info.skipped_packets == 1 and info.decoded_s == pytest.approx(got.covered_s[0], abs=0.01)
    assert "1 packet(s) the decoder refused are skipped" in (audio_note(info) or "")


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="the ffmpeg CLI makes the broadcast-style file")
def test_a_format_change_mid_stream_is_decoded_past(tmp_path):
    """Finding 2: an MPEG-TS whose audio goes from 48 kHz stereo to 44.1 kHz 5.1 two seconds in
    (two recordings one after the other, as a TV recording switches) is decoded whole (refused
    before), each run downmixed to the mean of its own channels and resampled from its own rate:
    each equals the ffmpeg CLI's decode of that recording alone, at its place; validate-data
    --audio names the change."""
    src = "testsrc=s=64x48:r=10:d=2"
    ffmpeg("-f", "lavfi", "-i", src, "-f", "lavfi", "-i", "sine=frequency=997:sample_rate=48000:duration=2",
           "-ac", "2", "-c:v", "libx264", "-g", "10", "-c:a", "aac", str(tmp_path / "a.ts"))  # fmt: skip
    ffmpeg("-f", "lavfi", "-i", src, "-f", "lavfi", "-i", "sine=frequency=331:sample_rate=44100:duration=2",
           "-ac", "6", "-c:v", "libx264", "-g", "10", "-c:a", "aac", "-output_ts_offset", "2", str(tmp_path / "b.ts"))  # fmt: skip
    both = tmp_path / "ab.ts"
    both.write_bytes((tmp_path / "a.ts").read_bytes() + (tmp_path / "b.ts").read_bytes())
    got = sample_track(both)
    assert got.covered_s[0] == pytest.approx(got.seconds, abs=0.01)  # nothing dropped at the change
    index = frame_index(both)
    origin = float(int(index.pts[0]) * index.time_base)
    for part, channels, (lo, hi), snr in (("a.ts", 2, (0.1, 1.9), 60), ("b.ts", 6, (2.1, 3.8), 20)):
        ref = reference(tmp_path / part, 1, channels, origin, len(got.samples))
        i, j = int(lo * SAMPLE_RATE), int(hi * SAMPLE_RATE)
        m = compare(got.samples[i:j], ref[i:j])
        # the second run starts on the output sample nearest its first input sample: within half
        # a sample of the reference's own rounding, so its SNR is that of a 31-us phase at 331 Hz
        assert abs(m.lag) <= 1 and m.snr_db >= snr, (part, m)
        assert np.sqrt(np.mean(got.samples[i:j] ** 2)) == pytest.approx(np.sqrt(np.mean(ref[i:j] ** 2)), rel=0.01)
    info = probe_audio(both, whole=True)
    assert [f.split(" (")[0] for f in info.formats] == ["48000 Hz stereo", "44100 Hz 5.1"]
    assert "the format changes mid-stream" in (audio_note(info) or "")


@pytest.mark.parametrize(
    ("name", "shift", "start"),
    [("all_late", {"video": 10.0, "audio": 10.0}, 0.458), ("audio_leads", {"video": 2.0}, -1.542)],
)
def test_matroska_streams_that_start_late_are_not_truncated(mp4, tmp_path, name, shift, start):
    """Finding 3: FFmpeg's Matroska muxer writes each track's DURATION tag as an end time. Streams
    that start at 10 s, or audio 2 s before its video, were refused as "truncated" (20 s and 14 s
    claimed of 12 s); the duration is the video's own, and the soundtrack is where it belongs."""
    mkv = remux(mp4, tmp_path / f"{name}.mkv", shift_s=shift)
    info = probe_video(mkv)
    assert info.duration_s == pytest.approx(SPEC.seconds, abs=0.05)
    s = sample_track(mkv)
    assert s.track_start_s == pytest.approx(start, abs=0.002)
    want = [b + (0.0 if name == "all_late" else -2.0) for b in SPEC.beeps]
    assert onsets(s.samples, SAMPLE_RATE) == pytest.approx([b for b in want if b >= 0], abs=0.002)
