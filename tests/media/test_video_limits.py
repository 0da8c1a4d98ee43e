"""Memory bounded by what is asked (a header claiming hours for two frames), and a transport
stream cut mid-frame (issue 21, items 2 and 3)."""

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from naru_eval.core.synthetic import read_frame_index, write_indexed_video
from naru_eval.core.validate import validate
from naru_eval.media import decode, index, sampler
from naru_eval.media.plan import frames_for_fps, uniform_indices
from naru_eval.media.sampler import MAX_FRAMES, sample_frames
from naru_eval.media.video import VideoError, probe_video
from tests.helpers import video_corpus as vc


@pytest.fixture(scope="module")
def sparse(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("sparse")
    return {ext: vc.sparse(d / f"two_frames_10h.{ext}") for ext in ("mp4", "mkv")}


def test_frames_for_fps_is_capped_by_the_frames_that_exist():
    assert frames_for_fps(36_000, 0.25) == 9000
    assert frames_for_fps(36_000, 0.25, total_frames=2) == 2
    assert frames_for_fps(36_000, 0.25, max_frames=5, total_frames=2) == 2
    assert frames_for_fps(36_000, 0.25, max_frames=5, total_frames=100) == 5
    assert frames_for_fps(1.0, 0.25, total_frames=100) == 1


@pytest.mark.parametrize("ext", ["mp4", "mkv"])
def test_two_frames_ten_hours_apart_allocate_two_frames(sparse, ext):
    path = sparse[ext]
    assert path.stat().st_size < 4096 and probe_video(path).duration_s >= 36_000  # tiny, claims 10 h
    tracemalloc.start()
    try:
        s = sample_frames(path, fps=0.25)  # 18,000 frames by the header: 10.1 GiB at 448x448
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert list(s.indices) == [0, 1] and [read_frame_index(f) for f in s.frames] == [0, 1]
    assert s.frames.shape == (2, 48, 64, 3)
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB for two 64x48 frames"


def test_an_explicit_maximum_with_a_clear_error(tmp_path, monkeypatch):
    path = write_indexed_video(tmp_path / "a.mp4", 120, fps=10, gop=10)
    with pytest.raises(ValueError, match=rf"num_frames={MAX_FRAMES + 1}: the sampler takes at most {MAX_FRAMES}"):
        sample_frames(path, num_frames=MAX_FRAMES + 1)
    assert len(sample_frames(path, num_frames=MAX_FRAMES + 1, max_frames=8).indices) == 8  # capped below it
    monkeypatch.setattr(sampler, "MAX_FRAMES", 10)  # 12 s at 1 fps = 12 frames, of 120 that exist
    with pytest.raises(VideoError, match=r"fps=1\.0 over 12 s asks for 12 frames, more than .* maximum of 10") as e:
        sample_frames(path, fps=1.0)
    assert str(path) in str(e.value) and "max_frames" in str(e.value)
    assert len(sample_frames(path, fps=1.0, max_frames=10).indices) == 10


def test_validate_flags_a_duration_out_of_proportion_to_the_frames(copy_data, sparse):
    d = copy_data()
    (d / "videos" / "vid000.mp4").write_bytes(sparse["mp4"].read_bytes())
    (d / "videos" / "vid001.mp4").unlink()
    (d / "videos" / "vid001.mkv").write_bytes(sparse["mkv"].read_bytes())  # no frame count: the measured rate
    report = validate(d)
    assert len(report.problems) == 2, report.problems
    mp4, mkv = sorted(report.problems)
    assert "video 'vid000'" in mp4 and "vid000.mp4" in mp4
    assert "claims 10.28 h of video for 2 frame(s)" in mp4 and "out of proportion" in mp4
    assert "video 'vid001'" in mkv and "vid001.mkv" in mkv
    assert "claims 10.28 h of video at 0.001 frames per second" in mkv and "out of proportion" in mkv


@pytest.fixture(scope="module")
def cut_ts(tmp_path_factory) -> dict[str, Path]:
    """H.264 in MPEG-TS, 640x360 (pictures span several TS packets), cut inside a picture."""
    d = tmp_path_factory.mktemp("cut_ts")
    src = write_indexed_video(d / "full.ts", 150, fps=25, gop=25, size=(640, 360), preset="ultrafast")
    return {"full": src, **{f"{f}": vc.cut_mid_frame(src, d / f"cut{f}.ts", f) for f in (0.4, 0.7, 0.85)}}


def _packet_sizes(path: Path) -> dict[int, int]:
    import av

    with av.open(str(path)) as c:
        return {p.pts: p.size for p in c.demux(c.streams.video[0]) if p.size}


@pytest.mark.parametrize("fraction", ["0.4", "0.7", "0.85"])
@pytest.mark.parametrize("busy", [False, True], ids=["frame-threads-allowed", "busy"])
def test_ts_cut_mid_frame_gives_what_a_sequential_decode_gives(cut_ts, fraction, busy, monkeypatch):
    """Every frame, the partial last one included, is the sequential decode's, whatever the load."""
    path = cut_ts[fraction]
    ref = vc.decoded(path)
    cut, full = _packet_sizes(path), _packet_sizes(cut_ts["full"])
    last = list(cut)[-1]
    assert cut[last] < full[last]  # the file ends inside a picture: its packet is partial
    monkeypatch.setattr(decode, "machine_busy", lambda: busy)
    index._INDEXES.clear()
    for n in (8, 128, len(ref)):
        s = sample_frames(path, num_frames=n, max_pixels=None)
        want = uniform_indices(len(ref), n)
        assert s.info.frame_count == len(ref) and list(s.indices) == want
        wrong = [k for i, k in enumerate(want) if not np.array_equal(s.frames[i], ref[k])]
        assert not wrong, f"frames {wrong} differ from a sequential decode"


def test_a_damaged_sample_table_allocates_nothing_big(tmp_path):
    """An stts claiming 2 billion samples is not believed (the moov parser returns None, not 16 GB)."""
    import struct

    from naru_eval.media import mp4_index

    good = write_indexed_video(tmp_path / "good.mp4", 48, fps=10, gop=8)
    assert mp4_index.sample_table(good) is not None
    data = bytearray(good.read_bytes())
    at = data.find(b"stts")
    struct.pack_into(">I", data, at + 12, 0x7FFFFFFF)  # the first entry's sample count
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    tracemalloc.start()
    try:
        assert mp4_index.sample_table(bad) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20
