"""A file's first touch made cheaper without changing a pixel (issue 35, item 7): non-reference
pictures no target needs are left undecoded, the decoder is drained instead of fed pictures that
only push a target out, frames are converted on threads, and an MP4's last GOP is decoded after
the frames (the sampler samples again where it ends early). Each is held to the plain path's
frames, on made and on real files."""

from pathlib import Path

import numpy as np
import pytest

from naru_eval.core.synthetic import read_frame_index, write_indexed_video
from naru_eval.media import decode, index, mp4_index, sampler, video
from naru_eval.media.sampler import sample_frames
from tests.helpers import video_corpus as vc
from tests.helpers.shared_files import PEER, REALAV


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler as it was: every picture decoded, no drain, frames converted inline."""
    monkeypatch.setattr(video, "SKIPS_UNWANTED", frozenset())
    monkeypatch.setattr(decode.Decoder, "_drain_point", lambda self, k, want: None)
    monkeypatch.setattr(decode, "conversion_threads", lambda: 0)


def _sampled(path: Path, budgets: tuple[int, ...]) -> list[tuple[list[int], np.ndarray]]:
    index._INDEXES.clear()  # a first touch each time
    return [(s.indices.tolist(), s.frames) for s in (sample_frames(path, num_frames=n) for n in budgets)]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """H.264 with B-frames (x264's pyramid: some are references) in MP4, Matroska (drained too) and
    MPEG-TS (not drained: a picture may span packets there); HEVC (nothing skipped, drained)."""
    d = tmp_path_factory.mktemp("first_touch")
    out = {
        ext: write_indexed_video(d / f"h264.{ext}", 150, fps=25, gop=25, size=(320, 192))
        for ext in ("mp4", "mkv", "ts")
    }
    out["hevc.mp4"] = vc.encode(d / "hevc.mp4", *vc.cfr(120, 25), codec="libx265", options=vc.x265(24), size=(320, 192))
    return out


REAL = [
    PEER / n
    for n in (
        "nasa_13013.mp4",
        "h264_10bits.mp4",
        "bt709_full_range.mp4",
        "var_fps_video.mp4",
        "h265_video.mp4",
        "av1_video.mkv",
    )
]
REAL += [REALAV / "audio" / n for n in ("mp_chaplin.mp4", "mp_smpte-2997.mp4")]


@pytest.mark.parametrize("name", ["mp4", "mkv", "ts", "hevc.mp4"])
def test_the_shortcuts_change_no_frame_of_made_files(made, name, monkeypatch):
    path = made[name]
    fast = _sampled(path, (8, 32, 150))
    assert all([read_frame_index(f) for f in frames] == idx for idx, frames in fast)
    _plain(monkeypatch)
    for (idx, frames), (plain_idx, plain) in zip(fast, _sampled(path, (8, 32, 150)), strict=True):
        assert idx == plain_idx and np.array_equal(frames, plain)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_the_shortcuts_change_no_frame_of_real_files(path, monkeypatch):
    if not path.is_file():
        pytest.skip(f"{path} is absent (../shared beside the repository)")
    fast = _sampled(path, (8, 32, 128))
    _plain(monkeypatch)
    for (idx, frames), (plain_idx, plain) in zip(fast, _sampled(path, (8, 32, 128)), strict=True):
        assert idx == plain_idx and np.array_equal(frames, plain), path.name


def test_the_shortcuts_do_leave_work_out(made, monkeypatch):
    """On the MP4 at N = 8 (GOPs of 25 frames): non-reference pictures are skipped, and the decoder
    is drained after each target whose successor lies in a later GOP (a seek follows), not where
    decoding goes on to it; the frames are the targets."""
    modes: list[str] = []
    drains: list[int] = []
    skip_call, drain_point = video.PictureSkipper.__call__, decode.Decoder._drain_point

    def counting_skip(self, packet):
        skip_call(self, packet)
        modes.append(self.mode)

    def counting_drain(self, k, want):
        at = drain_point(self, k, want)
        drains.extend([] if at is None else [k])
        return at

    monkeypatch.setattr(video.PictureSkipper, "__call__", counting_skip)
    monkeypatch.setattr(decode.Decoder, "_drain_point", counting_drain)
    ((idx, frames),) = _sampled(made["mp4"], (8,))
    assert [read_frame_index(f) for f in frames] == idx
    later_gop = [k for k, after in zip(idx, [*idx[1:], None], strict=True) if after is None or after // 25 > k // 25]
    assert "NONREF" in modes and drains == later_gop and len(later_gop) < len(idx)


def test_an_mp4_whose_last_pictures_do_not_decode(tmp_path, monkeypatch):
    """The tables list pictures the decoder cannot give (the last three samples zeroed): the index
    sampled with at once is the tables', the last GOP's check says where decoding really ends, and
    the sampler samples again with that index, which is the demux pass's and the sequential decode's."""
    good = write_indexed_video(tmp_path / "good.mp4", 120, fps=10, gop=30, size=(320, 192))
    table = mp4_index.sample_table(good)
    assert table is not None
    data = bytearray(good.read_bytes())
    for at, size in zip(table.offset[-3:].tolist(), table.size[-3:].tolist(), strict=True):
        data[at : at + size] = bytes(size)
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    seen = vc.decoded_by_pts(bad, "none")
    assert 100 < len(seen) < 120
    draws: list[int] = []
    draw = sampler._draw

    def counting_draw(p, container, stream, ix, *args):
        draws.append(len(ix.pts))
        return draw(p, container, stream, ix, *args)

    monkeypatch.setattr(sampler, "_draw", counting_draw)
    index._INDEXES.clear()
    s = sample_frames(bad, num_frames=len(seen))
    assert draws == [120, len(seen)]  # the tables' index first, then the one the last GOP's decode gives
    assert s.info.frame_count == len(seen) and [read_frame_index(f) for f in s.frames] == list(range(len(seen)))
    ix = index.frame_index(bad)
    with __import__("av").open(str(bad)) as c:
        by_demux = index._build_index(bad, c, c.streams.video[0], tables=False).settle()
    assert ix.source == "moov" and ix.pts.tolist() == by_demux.pts.tolist() == sorted(seen)
