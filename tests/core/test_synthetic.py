"""Synthetic videos for the tests themselves."""

from __future__ import annotations

from fractions import Fraction

import av

from naru_eval.core.synthetic import read_frame_index, write_indexed_video


def test_an_indexed_video_at_a_fractional_frame_rate(tmp_path):
    """A non-integer fps reaches PyAV as a Fraction (a float rate has no numerator: it failed)."""
    path = write_indexed_video(tmp_path / "v.mp4", n_frames=5, fps=2.5)
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        assert stream.average_rate == Fraction(5, 2)
        indices = [read_frame_index(f.to_ndarray(format="rgb24")) for f in c.decode(stream)]
    assert indices == [0, 1, 2, 3, 4]
