"""The stream a player shows (cover art first is not the film), several real video streams named
by validate-data, and a stream that cannot be decoded refused before anything decodes it."""

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from naru_eval.core.synthetic import read_frame_index, write_indexed_video
from naru_eval.core.validate import validate
from naru_eval.media.plan import uniform_indices
from naru_eval.media.sampler import sample_frames
from naru_eval.media.video import VideoError, probe_video
from tests.helpers import video_corpus as vc


def _shown(s) -> list[int]:
    return [read_frame_index(f) for f in s.frames]


def test_matroska_with_cover_art_first_gives_the_films_frames(tmp_path):
    import av

    path = vc.cover_art_first_mkv(tmp_path / "release.mkv", film_frames=50)
    with av.open(str(path)) as c:
        kinds = [(s.index, s.codec_context.name) for s in c.streams.video]
    assert kinds == [(0, "mjpeg"), (1, "h264")]  # the picture is the first video stream
    s = sample_frames(path, num_frames=8)
    assert _shown(s) == uniform_indices(50, 8)  # the film, not eight copies of the cover
    assert s.info.stream_index == 1 and s.info.frame_count == 50 and s.info.video_streams == 2
    info = probe_video(path)
    assert (info.stream_index, info.width, info.height) == (1, 320, 240)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="the ffmpeg CLI (Debian's ffmpeg) writes the cover art")
def test_mp4_with_an_attached_picture_first_gives_the_films_frames(tmp_path):
    import av

    film = write_indexed_video(tmp_path / "film.mp4", 60, fps=25, gop=10)
    png = tmp_path / "cover.png"
    av.VideoFrame.from_ndarray(vc.colour_image(0, 64, 48), format="rgb24").to_image().save(png)
    path = vc.cover_art_first_mp4(film, tmp_path / "with_cover.mp4", png)
    with av.open(str(path)) as c:
        first = c.streams.video[0]
        assert first.codec_context.name == "png" and first.disposition & av.stream.Disposition.attached_pic
    s = sample_frames(path, num_frames=6)
    assert _shown(s) == uniform_indices(60, 6)
    assert s.info.stream_index == 1 and s.info.video_streams == 1  # the picture is not a video stream
    from naru_eval.media import index

    assert index.frame_index(path).source == "moov"  # the film's track, found by its track ID


def test_validate_data_names_files_with_several_real_video_streams(copy_data, tmp_path):
    d = copy_data()
    vc.two_angles_mkv(tmp_path / "angles.mkv")
    (d / "videos" / "vid000.mp4").unlink()
    shutil.copy(tmp_path / "angles.mkv", d / "videos" / "vid000.mkv")
    report = validate(d)
    assert report.ok, report.problems
    assert len(report.notes) == 1
    assert "video 'vid000'" in report.notes[0] and "vid000.mkv" in report.notes[0]
    assert "2 video streams; stream #0 is used" in report.notes[0]
    s = sample_frames(d / "videos" / "vid000.mkv", num_frames=4)
    assert s.frames.shape[1:3] == (240, 320) and _shown(s) == uniform_indices(30, 4)


def _damaged_stsd(src: Path, dst: Path) -> Path:
    """The sample description's codec tag overwritten: FFmpeg opens the file, but the video
    stream has no codec parameters PyAV can use (its codec context is None)."""
    data = bytearray(src.read_bytes())
    at = data.find(b"stsd")
    assert struct.unpack_from(">I", data, at + 8)[0] == 1  # one sample entry
    data[at + 16 : at + 20] = b"zzzz"
    dst.write_bytes(bytes(data))
    return dst


def test_a_damaged_sample_description_is_a_clear_error_not_a_crash(copy_data):
    """validate-data used to die of SIGSEGV (rc 139, no report): it decoded a stream whose codec
    context is None. Run in a child process, so a crash shows as one."""
    d = copy_data()
    bad = d / "videos" / "vid000.mp4"
    _damaged_stsd(write_indexed_video(d / "src.mp4", 20, fps=10, gop=5), bad)
    (d / "src.mp4").unlink()
    code = (
        "import sys\n"
        "from naru_eval.cli.main import main\n"
        "from naru_eval.media.sampler import sample_frames\n"
        "from naru_eval.media.video import VideoError\n"
        f"rc = main(['validate-data', {str(d)!r}])\n"
        "try:\n"
        f"    sample_frames({str(bad)!r}, num_frames=4)\n"
        "except VideoError as e:\n"
        "    print('sampler:', e)\n"
        "sys.exit(rc)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, (run.returncode, run.stderr[-2000:])
    assert "video 'vid000'" in run.stderr and "vid000.mp4" in run.stderr
    assert "codec parameters are unreadable" in run.stderr
    assert "sampler:" in run.stdout and "codec parameters are unreadable" in run.stdout


def test_only_cover_art_is_no_video(tmp_path):
    png = tmp_path / "cover.png"
    import av

    av.VideoFrame.from_ndarray(vc.colour_image(0, 64, 48), format="rgb24").to_image().save(png)
    if shutil.which("ffmpeg") is None:
        pytest.skip("the ffmpeg CLI (Debian's ffmpeg) writes the cover art")
    audio = tmp_path / "only_cover.m4a"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-nostdin", "-y", "-f", "lavfi", "-i", "sine=d=1", "-i", str(png), "-map", "0",
         "-map", "1", "-c:a", "aac", "-c:v", "copy", "-disposition:v:0", "attached_pic", str(audio)],
        check=True,
    )  # fmt: skip
    with pytest.raises(VideoError, match=r"no video stream \(only cover art\)"):
        probe_video(audio)
