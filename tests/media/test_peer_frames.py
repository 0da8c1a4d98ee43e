"""The sampler on video files nobody on the project made (torchcodec's test videos in
``../shared/peer``: AV1 in Matroska, full-range BT.709, 10-bit H.264, HEVC, a file of two video
streams, variable frame rate): the frames it takes are the ffmpeg CLI's conversion of the same
frames of the same stream, pixel for pixel, at native size and at the default pixel cap."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from naru_eval.media.sampler import sample_frames
from tests.helpers import video_corpus as vc
from tests.helpers.shared_files import PEER

FILES = sorted(p for p in PEER.iterdir() if p.is_file()) if PEER.is_dir() else []

pytestmark = [
    pytest.mark.skipif(not FILES, reason=f"no peer videos at {PEER} (../shared beside the repository)"),
    pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="the ffmpeg CLI is the reference (.ci/run installs it)"),
]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_the_frames_are_the_ffmpeg_clis_conversion(path):
    native = sample_frames(path, num_frames=8, max_pixels=None)
    stream = native.info.stream_index
    want = vc.ffmpeg_rgb(path, stream=stream)
    assert native.info.frame_count == len(want)
    assert np.array_equal(native.frames, want[native.indices]), path.name
    capped = sample_frames(path, num_frames=8)  # the default cap, swscale's bicubic as the CLI's scale
    h, w = capped.frames.shape[1:3]
    scaled = vc.ffmpeg_rgb(path, size=(w, h), stream=stream)
    assert np.array_equal(capped.frames, scaled[capped.indices]), path.name
