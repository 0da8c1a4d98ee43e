"""Every soundtrack of ``../shared/realav/audio`` (files nobody on the project made, MANIFEST.tsv
naming each source), and its stream-copy remuxes, equals the ffmpeg CLI's decode with the same
stream, downmix and swr resampler (tests/helpers/audio_reference.py), placed on the frames'
clock: lag within a millisecond, SNR 40 dB or more over the whole track.

The cases: each file as it is (a file without video, MP3 or WAV, beside a small picture: the
sampler reads soundtracks of videos, and refuses a file without one); its Matroska remux (the
container that rounds timestamps to the millisecond); its MPEG-TS remux where TS carries its
codecs; and streams moved by ``-itsoffset``: all of them 10 s late (Matroska, MPEG-TS), the audio
0.5 s late (MP4), the video 0.3 s or 2 s late (Matroska: the audio starts first).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from naru_eval.media.audio import probe_audio, sample_track
from naru_eval.media.index import frame_index
from naru_eval.media.video import VideoError
from tests.helpers.audio_reference import (
    AUDIO,
    compare,
    corpus,
    first_frame_s,
    has_video,
    missing,
    reference,
    remux,
    with_video,
)

SKIP = missing()
FILES = corpus()
#: where MPEG-TS carries the codecs (H.264 with AAC or MP3; not VP8/VP9, Vorbis, Opus or PCM)
TS_OK = (".mp4", ".mp3")
#: (corpus file, container, -itsoffset shift): Vorbis in WebM, AAC and MP3 in MP4
SHIFTED = {
    "all+10s": ("mp_big_buck_bunny_0_30.webm", ".mkv", {"shift_all": 10.0}),
    "all+10s_aac": ("mp_smpte-2997.mp4", ".mkv", {"shift_all": 10.0}),
    "all+10s_ts": ("mp_smpte-2997.mp4", ".ts", {"shift_all": 10.0}),
    "audio+0.5s": ("mp_smpte-2997.mp4", ".mp4", {"shift_audio": 0.5}),
    "video+0.3s": ("mp_chaplin.mp4", ".mkv", {"shift_video": 0.3}),
    "video+2s": ("mp_big_buck_bunny_0_30.webm", ".mkv", {"shift_video": 2.0}),
}


def cases() -> list[str]:
    """Each file; its Matroska remux unless it is Matroska already (WebM, and the files given a
    picture, which are made as Matroska); its MPEG-TS remux where TS carries its codecs; the
    shifted ones."""
    out = []
    for name in FILES:
        out.append(name)
        if name.endswith(".mp4"):
            out.append(f"{name} -> mkv")
        if name.endswith(TS_OK):
            out.append(f"{name} -> ts")
    return out + [f"{SHIFTED[k][0]} {k}" for k in SHIFTED]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Builds a case's file on first use (into one folder for the module)."""
    root = tmp_path_factory.mktemp("realav")
    built: dict[str, Path] = {}

    def build(case: str) -> Path:
        if case in built:
            return built[case]
        name, _, how = case.partition(" ")
        src = AUDIO / name
        if not has_video(src):
            src = build_video(name)
        if not how:
            path = src
        elif how.startswith("-> "):
            path = remux(src, root / f"{name}.{how[3:]}")
        else:
            _, ext, shift = SHIFTED[how]
            path = remux(src, root / f"{name}.{how}{ext}", **shift)
        built[case] = path
        return path

    def build_video(name: str) -> Path:
        key = f"{name} +video"
        if key not in built:
            built[key] = with_video(AUDIO / name, root / f"{name}+video.mkv")
        return built[key]

    return build


@pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
@pytest.mark.parametrize("case", cases())
def test_the_soundtrack_is_the_ffmpeg_clis(made, case):
    path = made(case)
    got = sample_track(path)
    info = probe_audio(path)
    assert got.stream_index == info.stream_index
    origin = first_frame_s(path, frame_index(path).stream)  # the frames' clock, as ffprobe decodes it
    ref = reference(path, got.stream_index, info.channels, origin, len(got.samples))
    m = compare(got.samples, ref)
    assert abs(m.lag) <= 16 and m.snr_db >= 40, m


@pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
def test_a_file_without_video_is_refused_by_name():
    """The sampler reads the soundtrack of a video; an MP3 or a WAV alone is named, not guessed at."""
    for name in ("mp_crunching.mp3", "tc_sine_mono_s16.wav"):
        assert not has_video(AUDIO / name)
        with pytest.raises(VideoError, match="no video stream") as e:
            sample_track(AUDIO / name)
        assert name in str(e.value)
