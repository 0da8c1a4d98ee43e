"""The frame sampler on videos whose frames show their own index."""

from pathlib import Path

import numpy as np
import pytest

from naru_eval.core.synthetic import read_frame_index, write_indexed_video
from naru_eval.media.frame_cache import FrameCache
from naru_eval.media.plan import frames_for_fps, target_size, uniform_indices
from naru_eval.media.sampler import sample_frames
from naru_eval.media.video import VideoError, probe_video


@pytest.fixture(scope="module")
def vids(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("idx")
    out = {
        "mp4": write_indexed_video(d / "a.mp4", 237, gop=12, bframes=3),
        "mkv": write_indexed_video(d / "b.mkv", 101, gop=7),
        "webm": write_indexed_video(d / "c.webm", 55, codec="libvpx-vp9", gop=9),
        "one_gop": write_indexed_video(d / "d.mp4", 40, gop=250),
        "faststart": write_indexed_video(d / "e.mp4", 200, gop=10, container_options={"movflags": "faststart"}),
    }
    data = out["faststart"].read_bytes()
    (d / "trunc.mp4").write_bytes(data[: int(len(data) * 0.6)])
    out["trunc"] = d / "trunc.mp4"
    return out


def _shown(s):
    return [read_frame_index(f) for f in s.frames]


def test_uniform_indices_are_segment_centres():
    assert uniform_indices(100, 4) == [12, 37, 62, 87]
    assert uniform_indices(10, 10) == list(range(10))
    assert uniform_indices(3, 6) == [0, 0, 1, 1, 2, 2]
    assert uniform_indices(0, 8) == [] and uniform_indices(10, 0) == []
    assert frames_for_fps(3600 * 4, 0.25) == 3600
    assert frames_for_fps(3600 * 4, 1.0, max_frames=128) == 128


@pytest.mark.parametrize("kind", ["mp4", "mkv", "webm", "one_gop"])
@pytest.mark.parametrize("n", [1, 7, 8, 32, 64])
def test_exact_frames(vids, kind, n):
    s = sample_frames(vids[kind], num_frames=n)
    total = s.info.frame_count
    assert list(s.indices) == uniform_indices(total, n)
    assert _shown(s) == list(s.indices)  # the pixels are the frames claimed
    assert s.frames.dtype == np.uint8 and s.frames.shape[0] == n and s.frames.shape[-1] == 3
    assert np.allclose(s.timestamps, s.indices / s.info.fps)


def test_more_frames_than_video(vids):
    s = sample_frames(vids["webm"], num_frames=80)
    assert len(s.indices) == 80 and _shown(s) == list(s.indices)


def test_fps_sampling_capped(vids):
    s = sample_frames(vids["mp4"], fps=1.0)  # 23.7 s -> 23 frames
    assert len(s.indices) == 23 and _shown(s) == list(s.indices)
    assert len(sample_frames(vids["mp4"], fps=1.0, max_frames=5).indices) == 5
    with pytest.raises(ValueError):
        sample_frames(vids["mp4"])


def test_container_without_frame_count(vids):
    info = probe_video(vids["mkv"])
    assert not info.frame_count_exact  # mkv stores none: the sampler counts packets
    s = sample_frames(vids["mkv"], num_frames=10)
    assert s.info.frame_count == 101 and _shown(s) == uniform_indices(101, 10)


def test_truncated_and_corrupt_files_name_the_file(vids, tmp_path):
    with pytest.raises(VideoError, match="truncated") as err:
        probe_video(vids["trunc"])
    assert str(vids["trunc"]) in str(err.value)
    with pytest.raises(VideoError, match="truncated"):
        sample_frames(vids["trunc"], num_frames=8)
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 1000)
    with pytest.raises(VideoError, match="bad.mp4"):
        sample_frames(bad, num_frames=4)


def test_resize_to_pixel_budget(vids):
    assert target_size(1280, 720, 448 * 448) == (596, 336)
    assert target_size(64, 64, None) == (64, 64)
    s = sample_frames(vids["mp4"], num_frames=4, max_pixels=32 * 32)
    assert s.frames.shape[1:3] == (32, 32)
    assert _shown(s) == list(s.indices)


def test_frame_cache_decodes_once(vids, tmp_path):
    cache = FrameCache(disk_dir=tmp_path / "fc")
    first = cache.get(vids["mp4"], num_frames=8)
    for _ in range(9):  # ten questions on one video
        again = cache.get(vids["mp4"], num_frames=8)
        assert again is first
    assert (cache.stats.decodes, cache.stats.memory_hits) == (1, 9)
    other = FrameCache(disk_dir=tmp_path / "fc")  # a later run
    from_disk = other.get(vids["mp4"], num_frames=8)
    assert other.stats.decodes == 0 and other.stats.disk_hits == 1
    assert np.array_equal(from_disk.frames, first.frames) and np.array_equal(from_disk.indices, first.indices)
    assert other.get(vids["mp4"], num_frames=16).indices.shape == (16,)  # other params: new decode
    assert other.stats.decodes == 1


def test_frame_cache_is_bounded(vids):
    cache = FrameCache(max_bytes=64 * 64 * 3 * 10)
    cache.get(vids["mp4"], num_frames=8)
    cache.get(vids["mkv"], num_frames=8)  # evicts the first
    cache.get(vids["mp4"], num_frames=8)
    assert cache.stats.decodes == 3


def test_frame_cache_one_decode_under_concurrency(vids):
    from concurrent.futures import ThreadPoolExecutor

    cache = FrameCache()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: cache.get(vids["mkv"], num_frames=8), range(16)))
    assert cache.stats.decodes == 1 and cache.stats.memory_hits == 15
    assert all(r is results[0] for r in results)
