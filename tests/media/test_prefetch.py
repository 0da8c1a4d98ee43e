"""Decode-ahead: frames decoded by worker processes are exactly the sampler's, taken
through the one frame cache, in the order asked, within the memory budget; a bad video fails
exactly as when decoded inline."""

from __future__ import annotations

import numpy as np
import pytest

from naru_eval.core.synthetic import write_indexed_video
from naru_eval.media.frame_cache import FrameCache, cache_key, sampling_params
from naru_eval.media.prefetch import FramePrefetcher
from naru_eval.media.sampler import sample_frames
from naru_eval.media.video import VideoError


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("prefetch")
    return [str(write_indexed_video(root / f"v{i}.mp4", n_frames=30 + 10 * i, fps=10, gop=10)) for i in range(3)]


def plan(video: str) -> dict:
    return sampling_params(num_frames=6, max_pixels=64 * 64)


def same(a, b) -> bool:
    return np.array_equal(a.frames, b.frames) and np.array_equal(a.indices, b.indices) and a.info == b.info


def test_prefetched_frames_equal_inline(videos):
    cache = FrameCache()
    with FramePrefetcher(cache, videos, plan, workers=2, budget_bytes=1 << 30) as pf:
        got = [cache.get(v, **plan(v)) for v in videos]
    assert all(same(g, sample_frames(v, **plan(v))) for g, v in zip(got, videos, strict=True))
    # the first video inline (needed at once), the others from the workers
    assert (cache.stats.prefetched, cache.stats.decodes, pf.submitted) == (2, 1, 2)
    assert pf.decode_s > 0
    # taken entries are in the cache's memory: asked again, no wait, no decode
    assert same(cache.get(videos[0], **plan(videos[0])), got[0]) and cache.stats.memory_hits == 1


def test_budget_bounds_what_is_held(videos):
    cache = FrameCache()
    one = sample_frames(videos[-1], **plan(videos[-1])).frames.nbytes
    with FramePrefetcher(cache, videos, plan, workers=2, budget_bytes=1) as pf:
        for v in videos:
            cache.get(v, **plan(v))
    # a budget below one video: one decode in flight at a time, never two held
    assert pf.peak_bytes <= one and cache.stats.prefetched == 2


def test_already_cached_video_is_not_decoded_again(videos):
    cache = FrameCache()
    cache.get(videos[1], **plan(videos[1]))
    with FramePrefetcher(cache, videos, plan, workers=1, budget_bytes=1 << 30) as pf:
        for v in videos:
            cache.get(v, **plan(v))
    assert pf.submitted == 1 and cache.stats.decodes == 2 and cache.stats.prefetched == 1


def test_bad_video_fails_as_inline(videos, tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video" * 100)
    cache = FrameCache()
    with FramePrefetcher(cache, [videos[0], str(bad), *videos[1:]], plan, workers=1, budget_bytes=1 << 30):
        cache.get(videos[0], **plan(videos[0]))
        with pytest.raises(VideoError, match="bad.mp4"):
            cache.get(bad, **plan(str(bad)))
        assert same(cache.get(videos[1], **plan(videos[1])), sample_frames(videos[1], **plan(videos[1])))
    assert cache.stats.prefetched == 1


def test_close_unregisters_what_was_not_taken(videos):
    cache = FrameCache()
    with FramePrefetcher(cache, videos, plan, workers=1, budget_bytes=1 << 30):
        cache.get(videos[0], **plan(videos[0]))
    assert not cache._pending  # nothing left for a later get() to wait on
    key = cache_key(videos[2], plan(videos[2]))
    assert not cache.has(key) or cache.stats.prefetched >= 1


def test_zero_workers_is_refused(videos):
    with pytest.raises(ValueError, match="workers=0"):
        FramePrefetcher(FrameCache(), videos, plan, workers=0, budget_bytes=1)
