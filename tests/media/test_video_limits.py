"""Memory bounded by what is asked (a header claiming hours for two frames), and a transport
stream cut mid-frame."""

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
def full_ts(tmp_path_factory) -> dict[str, Path]:
    """Transport streams whose pictures span several TS packets: H.264 (closed GOPs) and HEVC
    (open GOPs, whose leading pictures reference the GOP before)."""
    d = tmp_path_factory.mktemp("cut_ts")
    return {
        "h264": write_indexed_video(d / "h264.ts", 80, fps=25, gop=25, size=(640, 360), preset="ultrafast"),
        "hevc": vc.encode(d / "hevc.ts", *vc.cfr(80, 25), codec="libx265", options=vc.x265(16), size=(640, 360)),
    }


def _cuts(path: Path, count: int, seed: int) -> list[int]:
    """Seeded cut points anywhere in the last two thirds of the file (mid TS packet, mid picture)."""
    size = path.stat().st_size
    return sorted(np.random.default_rng(seed).integers(size // 3, size, count).tolist())


@pytest.mark.parametrize("busy", [False, True], ids=["frame-threads-allowed", "busy"])
def test_ts_cut_anywhere_gives_a_sequential_decode_or_leaves_the_picture_out(full_ts, busy, tmp_path, monkeypatch):
    """A recording stopped mid-frame at any of 12 seeded points per codec: every frame the sampler
    gives is the one a sequential decode shows at that timestamp, and the only frame it may lack
    is the picture the file ends inside (reported as cut), never a different picture."""
    import av

    monkeypatch.setattr(decode, "machine_busy", lambda: busy)
    cut_found = 0
    for codec, at in [(c, at) for c in full_ts for at in _cuts(full_ts[c], 12, seed=1)]:
        data = full_ts[codec].read_bytes()
        path = tmp_path / f"{codec}{at}.ts"
        path.write_bytes(data[:at])
        ref = vc.decoded_by_pts(path)
        with av.open(str(path)) as c:
            last = [p.pts for p in c.demux(c.streams.video[0]) if p.size][-1]  # decode order
        index._INDEXES.clear()
        for n in (8, 128, len(ref)):
            s = sample_frames(path, num_frames=n, max_pixels=None)
            ix = index.frame_index(path)
            pts = [int(ix.pts[k]) for k in s.indices]
            wrong = [t for i, t in enumerate(pts) if not np.array_equal(s.frames[i], ref[t])]
            assert not wrong, f"{codec} cut at byte {at}: frames at {wrong} differ from a sequential decode"
            assert ix.cut_pts in (-1, last) and ix.cut_pts not in ix.pts
            assert set(ref) - set(ix.pts.tolist()) <= {ix.cut_pts}, f"{codec} cut at byte {at}: frames lost"
            assert list(s.indices) == uniform_indices(len(ix.pts), n)
        cut_found += ix.cut_pts >= 0
    assert cut_found, "no cut point left a picture out: the sweep proves nothing"


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
