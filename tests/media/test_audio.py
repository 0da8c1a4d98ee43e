"""The audio sampler on files whose soundtrack is known to the sample (tests/helpers/soundtrack.py):
beeps land at their true times on the frames' axis, a late audio start is honoured, a silent file
is refused by name, windows are slices of the one decode, and the cache keeps what it was asked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from naru_eval.media.audio import SAMPLE_RATE, normalise_windows, probe_audio, sample_audio, sample_track
from naru_eval.media.audio_cache import AudioCache, audio_cache_key, audio_params
from naru_eval.media.fingerprint import content_fingerprint
from naru_eval.media.sampler import sample_frames
from naru_eval.media.video import VideoError
from tests.helpers.soundtrack import BEEP_AMPLITUDE, Soundtrack, onsets, silent, write

SPEC = Soundtrack()
LATE = replace(SPEC, audio_start_s=0.48)
#: a beep is found within 2 ms of its time (AAC's own smearing is under 1 ms)
TOL = 0.002


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("soundtrack")
    return {
        "mp4": write(root / "on_time.mp4", SPEC),
        "late_mp4": write(root / "late.mp4", LATE),
        "late_mkv": write(root / "late.mkv", replace(LATE, fmt="matroska")),
        "late_ts": write(root / "late.ts", replace(LATE, fmt="mpegts")),
        "late_video": write(root / "late_video.mp4", replace(SPEC, video_start_s=0.3)),
        "short_audio": write(root / "short_audio.mp4", replace(SPEC, audio_seconds=6.0)),
        "mono": write(root / "mono.mp4", replace(SPEC, audio_layout="mono")),
        "two_tracks": write(root / "two.mkv", replace(SPEC, fmt="matroska", extra_audio_streams=1)),
        "silent": silent(root / "silent.mp4", SPEC),
    }


def naive_decode(path: Path) -> np.ndarray:
    """What qwen-omni-utils (audioread -> ffmpeg) does: every decoded sample in a row from the
    first, resampled, starting at 0 whatever the stream's timestamps say."""
    import av

    out = []
    with av.open(str(path)) as c:
        rs = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
        for frame in c.decode(c.streams.audio[0]):
            out += [f.to_ndarray()[0] for f in rs.resample(frame)]
    return np.concatenate(out)


@pytest.mark.parametrize("name", ["mp4", "late_mp4", "late_mkv", "late_ts"])
def test_beeps_land_at_their_times(files, name):
    s = sample_audio(files[name], [(0.0, SPEC.seconds)])
    assert s.rate == SAMPLE_RATE and s.samples.dtype == np.float32
    assert len(s.samples) == SPEC.seconds * SAMPLE_RATE
    assert onsets(s.samples, s.rate) == pytest.approx(list(SPEC.beeps), abs=TOL)


def test_a_late_audio_start_is_honoured(files):
    """The audio track begins 0.46 s in (0.48 s less the encoder's priming): the beep at 5.5 s is at
    5.5 s, with silence before the track; a decode that starts the audio at 0 puts it at 5.04 s."""
    s = sample_audio(files["late_mp4"], [(0.0, SPEC.seconds)])
    assert s.track_start_s == pytest.approx(0.458, abs=0.005)
    assert np.all(s.samples[: int(0.45 * SAMPLE_RATE)] == 0)
    assert s.covered_s[0] == pytest.approx(SPEC.seconds - s.track_start_s, abs=0.01)
    naive = onsets(naive_decode(files["late_mp4"]), SAMPLE_RATE)
    assert naive[1] == pytest.approx(5.5 - s.track_start_s, abs=TOL)  # the naive reader: 0.46 s early
    assert abs(naive[1] - 5.5) > 0.4


def test_time_origin_is_the_first_frame(files):
    """The video starts 0.3 s into the file: frame timestamps count from its first frame, and so
    does the audio; the beep at 5.5 s on the file's timeline is at 5.2 s on the frames' axis, and
    the frame showing the colour change at 4.0 s is at 3.7 s."""
    path = files["late_video"]
    s = sample_audio(path, [(0.0, 11.0)])
    assert onsets(s.samples, s.rate) == pytest.approx([b - 0.3 for b in SPEC.beeps], abs=TOL)
    frames = sample_frames(path, num_frames=int((SPEC.seconds - 0.3) * SPEC.fps), max_pixels=None)
    red = frames.frames[:, 10, 10, 0] > 150
    first_not_red = int(np.argmin(red))
    assert frames.timestamps[first_not_red] == pytest.approx(4.0 - 0.3, abs=1 / SPEC.fps + 1e-6)


def test_windows_are_slices_of_the_whole(files):
    path = files["late_mp4"]
    whole = sample_audio(path, [(0.0, SPEC.seconds)])
    w = sample_audio(path, [(9.0, 10.0), (0.2, 0.7), (5.0, 6.5)])
    assert w.windows == ((0.2, 0.7), (5.0, 6.5), (9.0, 10.0))
    for k, (a, b) in enumerate(w.windows):
        assert np.array_equal(w.window(k), whole.samples[round(a * SAMPLE_RATE) : round(b * SAMPLE_RATE)])
    assert w.covered_s[0] == pytest.approx(0.7 - 0.458, abs=0.002)  # the track starts inside it
    assert w.covered_s[1:] == pytest.approx((1.5, 1.0))


def test_the_whole_track_ends_where_the_frame_sampler_says_the_video_does(files):
    """``sample_track`` is the full-track window, 0 to the duration ``sample_frames`` reports
    (the video's, whatever the audio track claims)."""
    path = files["late_mp4"]
    duration = sample_frames(path, num_frames=2, max_pixels=None).info.duration_s
    whole = sample_track(path)
    assert whole.windows == ((0.0, duration),) and duration == pytest.approx(SPEC.seconds, abs=0.01)
    assert len(whole.samples) == round(duration * SAMPLE_RATE)
    assert np.array_equal(whole.samples, sample_audio(path, [(0.0, duration)]).samples)


def test_window_bounds_are_normalised():
    assert normalise_windows([(3.004, 4.0), (1.0, 2.0), (1.5, 3.0), (5.0, 5.0)]) == ((1.0, 4.0),)
    with pytest.raises(ValueError, match="windows lie within"):
        normalise_windows([(-1.0, 2.0)])


def test_audio_shorter_than_the_video(files):
    s = sample_audio(files["short_audio"], [(0.0, SPEC.seconds)])
    assert s.covered_s[0] == pytest.approx(6.0, abs=0.03)
    assert np.all(s.samples[int(6.1 * SAMPLE_RATE) :] == 0)
    assert onsets(s.samples, s.rate) == pytest.approx([1.5, 5.5], abs=TOL)


def test_downmix_is_the_mean_of_the_channels(files):
    """A beep of amplitude 0.5 in both channels is 0.5 in mono (the mean, as librosa.load gives
    qwen-omni-utils); FFmpeg's default downmix would make it 0.71."""
    for name in ("mp4", "mono"):
        s = sample_audio(files[name], [(1.5, 1.6)])
        assert float(np.abs(s.samples).max()) == pytest.approx(BEEP_AMPLITUDE, abs=0.03)


def test_a_silent_file_is_refused_by_name(files):
    path = files["silent"]
    for call in (lambda: sample_audio(path, [(0.0, 1.0)]), lambda: probe_audio(path)):
        with pytest.raises(VideoError, match="no audio stream") as e:
            call()
        assert str(path) in str(e.value)


def test_probe_reports_the_track(files):
    info = probe_audio(files["late_mkv"])
    assert (info.codec, info.sample_rate, info.channels, info.audio_streams) == ("aac", 48000, 2, 1)
    assert info.start_s == pytest.approx(0.458, abs=0.005)
    assert probe_audio(files["two_tracks"]).audio_streams == 2


def test_the_stream_a_player_plays(files):
    """Two audio streams, the first the soundtrack (the default), the second silent: the default
    is chosen; ``stream=`` takes the other."""
    path = files["two_tracks"]
    s = sample_audio(path, [(0.0, SPEC.seconds)])
    assert onsets(s.samples, s.rate) == pytest.approx(list(SPEC.beeps), abs=TOL)
    other = sample_audio(path, [(0.0, SPEC.seconds)], stream=s.stream_index + 1)
    assert float(np.abs(other.samples).max()) < 0.01
    with pytest.raises(VideoError, match="no audio stream #9"):
        sample_audio(path, [(0.0, 1.0)], stream=9)


def test_cache_decodes_once_and_keeps_what_it_was_asked(files, tmp_path):
    path = files["late_mp4"]
    cache = AudioCache(disk_dir=tmp_path / "audio")
    a = cache.get(path, [(5.0, 6.0)])
    b = cache.get(path, [(5.0, 6.0)])
    assert b is a and cache.stats.decodes == 1 and cache.stats.memory_hits == 1
    fresh = AudioCache(disk_dir=tmp_path / "audio")
    c = fresh.get(path, [(5.0, 6.0)])
    assert fresh.stats.disk_hits == 1 and np.array_equal(c.samples, a.samples) and c.windows == a.windows
    # other windows, another entry; the same content under another name, the same entry
    assert cache.key(path, audio_params([(5.0, 6.0)])) != cache.key(path, audio_params([(5.0, 7.0)]))
    copy = tmp_path / "copy.mp4"
    copy.write_bytes(path.read_bytes())
    assert content_fingerprint(copy) == content_fingerprint(path)
    assert audio_cache_key(copy, audio_params([(5.0, 6.0)])) == audio_cache_key(path, audio_params([(5.0, 6.0)]))
    assert content_fingerprint(files["mp4"]) != content_fingerprint(path)


def test_a_disk_entry_that_is_not_what_it_claims_is_a_miss(files, tmp_path):
    path = files["mp4"]
    cache = AudioCache(disk_dir=tmp_path / "audio")
    cache.get(path, [(1.0, 2.0)])
    key = cache.key(path, audio_params([(1.0, 2.0)]))
    entry = cache._disk.path(key)
    other = cache._disk.path(cache.key(path, audio_params([(2.0, 3.0)])))
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_bytes(entry.read_bytes())  # an entry under the wrong name
    fresh = AudioCache(disk_dir=tmp_path / "audio")
    s = fresh.get(path, [(2.0, 3.0)])
    assert fresh.stats.disk_hits == 0 and fresh.stats.decodes == 1 and s.windows == ((2.0, 3.0),)
    entry.write_bytes(b"not an npz")
    again = AudioCache(disk_dir=tmp_path / "audio")
    assert np.array_equal(again.get(path, [(1.0, 2.0)]).samples, cache.get(path, [(1.0, 2.0)]).samples)
    assert again.stats.decodes == 1


def test_wav_bytes_are_the_samples_bit_for_bit():
    """What the server path sends: a 32-bit float WAV an independent reader (scipy) decodes to
    exactly the samples, at 16 kHz."""
    import io

    from scipy.io import wavfile

    from naru_eval.media.audio import wav_bytes

    x = np.random.default_rng(0).normal(0, 0.3, 16_001).astype(np.float32)
    rate, y = wavfile.read(io.BytesIO(wav_bytes(x)))
    assert rate == SAMPLE_RATE and y.dtype == np.float32 and np.array_equal(x, y)


def _sampled_before(size: int) -> list[tuple[int, int]]:
    """The byte ranges the fingerprint read before issue 33: the first and last MiB and 16 blocks
    of 64 KiB evenly spaced between."""
    edge, block = 1 << 20, 1 << 16
    return [(0, edge), (max(0, size - edge), size)] + [
        (size * (i + 1) // 17, size * (i + 1) // 17 + block) for i in range(16)
    ]


def test_two_videos_the_old_blocks_could_not_tell_apart(tmp_path):
    """Issue 33, finding 5: two real videos of one size whose soundtracks differ only between the
    blocks the fingerprint sampled shared one fingerprint, and the audio cache handed one the
    other's samples. The fingerprint now hashes the whole file: each gets its own."""
    import av

    spec = replace(SPEC, seconds=30.0, fmt="matroska", audio_codec="pcm_s16le")
    a = write(tmp_path / "a.mkv", spec)
    data = bytearray(a.read_bytes())
    sampled = _sampled_before(len(data))
    with av.open(str(a)) as c:  # an audio packet between the sampled blocks
        for p in c.demux(c.streams.audio[0]):
            at = data.find(bytes(p), p.pos or 0) if p.size else -1
            if at > 0 and all(at + p.size <= lo or hi <= at for lo, hi in sampled):
                data[at : at + p.size] = bytes(x ^ 0x5A for x in data[at : at + p.size])  # noise
                break
        else:
            pytest.fail("no audio packet lies between the sampled blocks")
    b = tmp_path / "b.mkv"
    b.write_bytes(bytes(data))
    assert all(a.read_bytes()[lo:hi] == data[lo:hi] for lo, hi in sampled)  # the old fingerprint's view: one file
    assert content_fingerprint(a) != content_fingerprint(b)
    cache = AudioCache(disk_dir=tmp_path / "audio")
    got_a, got_b = cache.get(a, [(0.0, 30.0)]), cache.get(b, [(0.0, 30.0)])
    assert cache.stats.decodes == 2 and not np.array_equal(got_a.samples, got_b.samples)
    assert np.array_equal(got_b.samples, sample_audio(b, [(0.0, 30.0)]).samples)


def test_the_fingerprint_is_hashed_once_per_file(files, tmp_path, monkeypatch):
    """The whole-file hash is paid once: a later process finds it in the memo beside the frame
    index (under the file's stat identity); a file written again (its ctime moves) is hashed again."""
    from naru_eval.media import fingerprint

    monkeypatch.setenv("NARU_FRAME_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "v.mp4"
    path.write_bytes(files["mp4"].read_bytes())
    first = content_fingerprint(path)
    hashed: list[str] = []
    real = fingerprint.hash_file
    monkeypatch.setattr(fingerprint, "hash_file", lambda p: hashed.append(str(p)) or real(p))  # counts, then hashes
    fingerprint._MEMO.clear()  # a new process
    assert content_fingerprint(path) == first and hashed == []
    path.write_bytes(files["late_mp4"].read_bytes())
    fingerprint._MEMO.clear()
    assert content_fingerprint(path) == content_fingerprint(files["late_mp4"]) != first
    assert hashed == [str(path.resolve()), str(files["late_mp4"].resolve())]
