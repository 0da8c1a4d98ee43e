"""Exact frames from real-world-like encodings, each frame checked against a full decode.

Classes: variable frame rate (24/30/60 fps segments; phone-like jittered timestamps), MPEG-TS and
M2TS (H.264 and MPEG-2; recordings that start mid-GOP), open GOP (HEVC CRA, H.264) in MP4 and MKV, a stream-copy cut whose edit
list starts mid-GOP, truncated MKV/WebM, a display matrix, an anamorphic sample aspect ratio.
All made with PyAV at test time (under a second in all).
"""

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from naru_eval.core.synthetic import read_frame_index
from naru_eval.media import index, index_moov
from naru_eval.media.frame_cache import FrameCache
from naru_eval.media.plan import uniform_indices
from naru_eval.media.sampler import sample_frames
from naru_eval.media.video import VideoError, probe_video
from tests.helpers import video_corpus as vc


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("corpus")
    out: dict[str, Path] = {}
    pts, tb = vc.vfr_segments()
    out["vfr_segments.mp4"] = vc.encode(d / "vfr.mp4", pts, tb, options=vc.x264(24))
    out["vfr_segments.mkv"] = vc.encode(d / "vfr.mkv", pts, tb, options=vc.x264(24))
    pts, tb = vc.vfr_jittered()
    out["vfr_phone.mp4"] = vc.encode(d / "jit.mp4", pts, tb, options=vc.x264(30))
    out["vfr_phone.mkv"] = vc.encode(d / "jit.mkv", pts, tb, options=vc.x264(30))
    pts, tb = vc.cfr(300, 25)
    m2ts = {"mpegts_m2ts_mode": "1"}
    out["h264.ts"] = vc.encode(d / "a.ts", pts, tb, options=vc.x264(25))
    out["h264.m2ts"] = vc.encode(d / "a.m2ts", pts, tb, options=vc.x264(25), container_options=m2ts)
    out["mpeg2.ts"] = vc.encode(d / "b.ts", pts, tb, codec="mpeg2video", options=vc.mpeg2(12))
    out["mpeg2.m2ts"] = vc.encode(
        d / "b.m2ts", pts, tb, codec="mpeg2video", options=vc.mpeg2(12), container_options=m2ts
    )
    pts, tb = vc.cfr(200, 25)
    src = vc.encode(d / "full_o.ts", pts, tb, options=vc.x264(16, 3, open_gop=True))
    out["midstream_h264.ts"] = vc.recording_from_midstream(src, d / "mid_o.ts")
    src = vc.encode(d / "full_h.ts", pts, tb, codec="libx265", options=vc.x265(16))
    out["midstream_hevc.ts"] = vc.recording_from_midstream(src, d / "mid_h.ts")
    src = vc.encode(d / "full_b.m2ts", pts, tb, codec="mpeg2video", options=vc.mpeg2(12), container_options=m2ts)
    out["midstream_mpeg2.m2ts"] = vc.recording_from_midstream(src, d / "mid_b.m2ts", packet_size=192)
    pts, tb = vc.cfr(120, 25)
    out["hevc_open_gop.mp4"] = vc.encode(d / "h.mp4", pts, tb, codec="libx265", options=vc.x265(16))
    out["hevc_open_gop.mkv"] = vc.encode(d / "h.mkv", pts, tb, codec="libx265", options=vc.x265(16))
    out["h264_open_gop.mp4"] = vc.encode(d / "o.mp4", pts, tb, options=vc.x264(16, 3, open_gop=True))
    out["h264_open_gop.mkv"] = vc.encode(d / "o.mkv", pts, tb, options=vc.x264(16, 3, open_gop=True))
    src = vc.encode(d / "src.mp4", *vc.cfr(200, 25), options=vc.x264(20))
    out["stream_copy_cut.mp4"] = vc.stream_copy_cut(src, d / "cut.mp4", first=47, count=100)
    full_mkv = vc.encode(d / "full.mkv", *vc.cfr(240, 10), options=vc.x264(20))
    out["truncated.mkv"] = vc.truncate(full_mkv, d / "trunc.mkv", 0.5)
    vp8 = {"g": "20", "deadline": "realtime", "cpu-used": "8"}
    full_webm = vc.encode(d / "full.webm", *vc.cfr(240, 10), codec="libvpx", options=vp8)
    out["truncated.webm"] = vc.truncate(full_webm, d / "trunc.webm", 0.5)
    # A phone held upright: the sensor's picture is turned, the display matrix turns it back.
    rot = vc.encode(d / "rot.mp4", *vc.cfr(60, 25), options=vc.x264(10), rotate_content=90)
    out["rotated.mp4"] = vc.set_display_rotation(rot, -90)
    out["anamorphic.mp4"] = vc.encode(d / "sar.mp4", *vc.cfr(60, 25), options=vc.x264(10), sar=Fraction(2, 1))
    out["anamorphic.mkv"] = vc.encode(d / "sar.mkv", *vc.cfr(60, 25), options=vc.x264(10), sar=Fraction(2, 1))
    out["h264.mov"] = vc.encode(d / "q.mov", *vc.cfr(90, 25), options=vc.x264(15))
    faststart = {"movflags": "faststart"}
    out["faststart.mp4"] = vc.encode(d / "fs.mp4", *vc.cfr(90, 25), options=vc.x264(15), container_options=faststart)
    out["mpeg4_part2.mp4"] = vc.encode(d / "m4v.mp4", *vc.cfr(90, 25), codec="mpeg4", options=vc.mpeg2(12))
    # Video starting 1 s in: the muxer writes an empty edit (a presentation delay) before the real one.
    out["delayed_start.mp4"] = vc.encode(
        d / "delay.mp4", [25 + i for i in range(90)], Fraction(1, 25), options=vc.x264(15)
    )
    fragmented = {"movflags": "frag_keyframe+empty_moov"}  # samples described in moof boxes, not the moov
    out["fragmented.mp4"] = vc.encode(
        d / "frag.mp4", *vc.cfr(90, 25), options=vc.x264(15), container_options=fragmented
    )
    return out


EXACT = [
    "vfr_segments.mp4", "vfr_segments.mkv", "vfr_phone.mp4", "vfr_phone.mkv",
    "h264.ts", "h264.m2ts", "mpeg2.ts", "mpeg2.m2ts",
    "midstream_h264.ts", "midstream_hevc.ts", "midstream_mpeg2.m2ts",
    "hevc_open_gop.mp4", "hevc_open_gop.mkv", "h264_open_gop.mp4", "h264_open_gop.mkv",
    "stream_copy_cut.mp4", "h264.mov", "faststart.mp4", "mpeg4_part2.mp4", "fragmented.mp4",
    "delayed_start.mp4",
]  # fmt: skip

#: Every MP4/MOV of the corpus: the frame index comes from its moov box.
MP4 = [n for n in EXACT if n.endswith((".mp4", ".mov")) and n != "fragmented.mp4"] + ["rotated.mp4", "anamorphic.mp4"]


def _shown(s) -> list[int]:
    return [read_frame_index(f) for f in s.frames]


@pytest.fixture(scope="session")
def truth(corpus) -> dict[str, list[int]]:
    """What a full sequential decode shows, frame by frame, in presentation order."""
    return {name: vc.decoded_stamps(corpus[name]) for name in EXACT}


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("n", [1, 8, 32, "all"])
def test_exact_on_every_class(corpus, truth, name, n):
    ref = truth[name]
    n = len(ref) if n == "all" else n  # every frame, leading pictures of open GOPs included
    s = sample_frames(corpus[name], num_frames=n, max_pixels=None)
    want = uniform_indices(len(ref), n)
    assert s.info.frame_count == len(ref)
    assert list(s.indices) == want
    assert _shown(s) == [ref[k] for k in want]


def test_corpus_is_what_it_claims(corpus, truth):
    """The files really have the properties the tests rely on (else the tests would prove nothing)."""
    import av

    with av.open(str(corpus["vfr_segments.mp4"])) as c:
        s = c.streams.video[0]
        gaps = np.diff(sorted(p.pts for p in c.demux(s) if p.size))
    assert len(set(gaps.tolist())) >= 3  # 24, 30 and 60 fps
    with av.open(str(corpus["stream_copy_cut.mp4"])) as c:
        s = c.streams.video[0]
        hidden = [p for p in c.demux(s) if p.size and p.is_discard]
        assert hidden and s.frames > len(truth["stream_copy_cut.mp4"])  # the edit list hides frames
    assert truth["stream_copy_cut.mp4"][0] == 47
    for name in ("hevc_open_gop.mp4", "h264_open_gop.mp4"):
        with av.open(str(corpus[name])) as c:
            s = c.streams.video[0]
            packets = [p for p in c.demux(s) if p.size]
        # A leading picture: decoded after a keyframe that is not the first, shown before it.
        keys = [i for i, p in enumerate(packets) if p.is_keyframe]
        assert any(packets[i + 1].pts < packets[i].pts for i in keys[1:] if i + 1 < len(packets))
    for name in ("midstream_h264.ts", "midstream_hevc.ts", "midstream_mpeg2.m2ts"):
        with av.open(str(corpus[name])) as c:
            assert not next(p for p in c.demux(c.streams.video[0]) if p.size).is_keyframe  # starts mid-GOP
    for name in ("truncated.mkv", "truncated.webm"):
        assert len(vc.decoded_stamps(corpus[name])) < 0.6 * 240
    from naru_eval.media import mp4_index

    table = mp4_index.sample_table(corpus["delayed_start.mp4"])
    assert table is not None and table.empty > 0 and table.edit is not None  # an empty edit, then the video


@pytest.mark.parametrize("name", ["truncated.mkv", "truncated.webm"])
def test_truncated_matroska_fails_in_sampler_and_preflight_alike(corpus, name):
    path = corpus[name]
    with pytest.raises(VideoError, match=r"truncated: the container claims 24\.0 s of video, but the last") as a:
        sample_frames(path, num_frames=8)
    with pytest.raises(VideoError, match=r"truncated: the container claims 24\.0 s of video, but the last") as b:
        probe_video(path)
    assert str(path) in str(a.value) and str(path) in str(b.value)


@pytest.mark.parametrize("name", ["h264.ts", "h264.m2ts", "mpeg2.ts", "mpeg2.m2ts", "stream_copy_cut.mp4"])
def test_preflight_accepts_valid_files(corpus, truth, name):
    info = probe_video(corpus[name])
    assert abs(info.duration_s - len(truth[name]) / 25) < 0.05


def test_display_matrix_is_applied(corpus):
    path = corpus["rotated.mp4"]
    s = sample_frames(path, num_frames=12, max_pixels=None)
    assert s.frames.shape[1:3] == (48, 64)  # coded 48 wide x 64 high, shown 64 x 48
    assert _shown(s) == uniform_indices(60, 12)  # upright: the stamps read as written
    assert (probe_video(path).width, probe_video(path).height) == (64, 48)
    small = sample_frames(path, num_frames=4, max_pixels=32 * 24)
    assert small.frames.shape[1:3] == (24, 32) and _shown(small) == uniform_indices(60, 4)


@pytest.mark.parametrize("name", ["anamorphic.mp4", "anamorphic.mkv"])
def test_sample_aspect_ratio_is_applied_before_the_pixel_budget(corpus, name):
    s = sample_frames(corpus[name], num_frames=6, max_pixels=None)
    assert s.frames.shape[1:3] == (48, 128)  # 64 x 48 coded, pixels twice as wide as high
    assert _shown(s) == uniform_indices(60, 6)
    budget = sample_frames(corpus[name], num_frames=6, max_pixels=64 * 24)
    assert budget.frames.shape[1:3] == (24, 64)  # the budget holds the displayed 8:3 shape
    assert (probe_video(corpus[name]).width, probe_video(corpus[name]).height) == (128, 48)


def test_frame_index_built_once_and_kept_beside_the_frame_cache(corpus, tmp_path, monkeypatch):
    path = corpus["vfr_phone.mkv"]
    index._INDEXES.clear()
    cache = FrameCache(disk_dir=tmp_path / "fc")
    first = cache.get(path, num_frames=8)
    assert list((tmp_path / "fc" / "index").rglob("*.npz"))  # on disk, keyed by the file's identity
    index._INDEXES.clear()  # a later run: nothing in memory

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the frame index was rebuilt")

    monkeypatch.setattr(index, "_build_index", no_rebuild)
    again = FrameCache(disk_dir=tmp_path / "fc").get(path, num_frames=16)  # new params: decodes, same index
    assert _shown(again) == [vc.decoded_stamps(path)[k] for k in again.indices]
    assert list(first.indices) == uniform_indices(240, 8)


def _built(path: Path, tables: bool) -> index.FrameIndex:
    import av

    with av.open(str(path)) as c:
        return index._build_index(path, c, c.streams.video[0], tables=tables).settle()


@pytest.mark.parametrize("name", MP4)
def test_index_from_the_moov_box_is_the_demux_pass(corpus, name):
    """Same frames, same presentation order, same keyframes and offsets; edit lists applied."""
    from_moov, by_demux = _built(corpus[name], True), _built(corpus[name], False)
    assert (from_moov.source, by_demux.source) == ("moov", "demux")
    for field in ("pts", "key_pts", "key_pos"):
        assert np.array_equal(getattr(from_moov, field), getattr(by_demux, field)), field
    assert (from_moov.time_base, from_moov.claimed_s) == (by_demux.time_base, by_demux.claimed_s)


def test_fragmented_mp4_is_indexed_by_the_demux_pass(corpus):
    """A fragmented MP4's moov lists no samples (they are in the moof boxes): the demux pass it is."""
    from naru_eval.media import mp4_index

    assert mp4_index.sample_table(corpus["fragmented.mp4"]) is None
    assert _built(corpus["fragmented.mp4"], True).source == "demux"


def test_moov_index_reads_the_tables_not_the_file(tmp_path):
    """The point of it: the index of a long MP4 costs its moov box and two GOPs, not a pass over the file."""
    lossless = {"x264-params": "keyint=50:min-keyint=50:scenecut=0:bframes=2", "preset": "ultrafast", "qp": "0"}
    path = vc.encode(tmp_path / "long.mp4", *vc.cfr(1500, 25), options=lossless, size=(320, 240))  # 1.3 MB

    def read_bytes(tables: bool) -> int:
        with open("/proc/self/io") as f:
            before = int(next(line for line in f if line.startswith("rchar")).split()[1])
        _built(path, tables)
        with open("/proc/self/io") as f:
            return int(next(line for line in f if line.startswith("rchar")).split()[1]) - before

    size = path.stat().st_size
    assert read_bytes(False) >= size  # the demux pass reads every packet
    assert read_bytes(True) < size / 2


def test_sample_tables_contradicted_by_the_packets_fall_back_to_demuxing(corpus, truth, monkeypatch):
    """Tables read wrongly (here: one frame's time moved, as a parser slip would) are caught."""
    from naru_eval.media import mp4_index

    name = "vfr_phone.mp4"
    real = mp4_index.packet_times

    def slip_at(i):
        def packet_times(table):
            pts, discard = real(table)
            pts = pts.copy()
            pts[i] += 1
            return pts, discard

        return packet_times

    monkeypatch.setattr(mp4_index, "packet_times", slip_at(3))  # in the first GOP: checked when built
    assert _built(corpus[name], True).source == "demux"
    monkeypatch.setattr(mp4_index, "packet_times", slip_at(-1))  # the last frame: checked when built
    assert _built(corpus[name], True).source == "demux"
    monkeypatch.setattr(mp4_index, "packet_times", slip_at(120))  # the middle: the sampler finds out
    index._INDEXES.clear()
    assert _built(corpus[name], True).source == "moov"
    ref = truth[name]
    s = sample_frames(corpus[name], num_frames=len(ref), max_pixels=None)
    assert _shown(s) == ref and s.info.frame_count == len(ref)
    assert index.frame_index(corpus[name]).source == "demux"  # the index kept is the demux pass's


def test_truncated_faststart_mp4_is_not_indexed_from_its_tables(tmp_path):
    """The moov of a cut faststart file still lists every sample: the samples past the end are not trusted."""
    import av

    full = vc.encode(
        tmp_path / "fs.mp4", *vc.cfr(200, 25), options=vc.x264(20), container_options={"movflags": "faststart"}
    )
    cut = vc.truncate(full, tmp_path / "cut.mp4", 0.6)
    with av.open(str(cut)) as c:
        assert index_moov.packets_from_moov(cut, c, c.streams.video[0]) is None
    with pytest.raises(VideoError, match="truncated: the container claims 8.0 s of video"):
        sample_frames(cut, num_frames=8)
