"""No file crashes the media layer: damaged or hostile MP4 boxes (bounded in time and memory, the
demux pass when the tables cannot be read), a fuzz over mutated moov boxes, caches that cannot be
written, cache entries that are not what they claim, and one duration definition."""

import json
import logging
import shutil
import struct
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from naru_eval.core.synthetic import read_frame_index, write_indexed_video
from naru_eval.core.validate import validate
from naru_eval.media import frame_cache, index, mp4_index
from naru_eval.media.frame_cache import FrameCache, cache_key, sampling_params
from naru_eval.media.plan import uniform_indices
from naru_eval.media.sampler import sample_frames
from naru_eval.media.video import probe_video
from tests.helpers import video_corpus as vc

STBL = [b"trak", b"mdia", b"minf", b"stbl"]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """48 stamped frames, 2 B-frames, GOP 8, the moov after the mdat."""
    return write_indexed_video(tmp_path_factory.mktemp("mp4") / "good.mp4", 48, fps=10, gop=8)


def _shown(s) -> list[int]:
    return [read_frame_index(f) for f in s.frames]


def _bounded(fn, limit_bytes: int, limit_s: float):
    """``fn()``, asserting it allocates at most ``limit_bytes`` (tracemalloc) within ``limit_s``."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    took = time.perf_counter() - start
    assert peak <= limit_bytes, f"{peak / 2**20:.1f} MiB allocated"
    assert took <= limit_s, f"{took:.2f} s"
    return out


def test_an_empty_stss_at_the_end_of_the_moov_falls_back_to_the_demux_pass(good, tmp_path, copy_data):
    """An ``stss`` with no payload as the moov's last bytes raised IndexError out of the parser: a
    video validate-data passed was refused by the sampler."""

    def edit(moov):
        moov = [b for b in moov if b[0] != b"udta"]  # the trak last, its stbl last: stss ends the moov
        stbl = vc.find_box(moov, STBL)
        stbl[:] = [b for b in stbl if b[0] != b"stss"] + [(b"stss", b"")]
        return moov

    d = copy_data()
    bad = vc.with_moov(good, d / "videos" / "vid000.mp4", edit)
    assert bad.read_bytes().endswith(b"\x00\x00\x00\x08stss")
    assert mp4_index.sample_table(bad) is None
    assert validate(d).ok, validate(d).problems
    index._INDEXES.clear()
    s = sample_frames(bad, num_frames=8)
    assert _shown(s) == uniform_indices(48, 8)
    assert index.frame_index(bad).source == "demux"


def test_a_moov_of_a_million_empty_boxes_is_refused_quickly(good, tmp_path):
    """8 MB of empty boxes in the moov: the parser walks a bounded number of boxes, never one
    Python tuple per box (a 64 MB moov of them took 1.5 GB and 22 s)."""
    bad = vc.with_moov(good, tmp_path / "boxes.mp4", lambda moov: [(b"free", b"")] * 1_000_000 + moov)
    size = bad.stat().st_size
    assert size > 8_000_000
    assert _bounded(lambda: mp4_index.sample_table(bad), limit_bytes=2 * size, limit_s=1.0) is None
    s = sample_frames(bad, num_frames=6)
    assert _shown(s) == uniform_indices(48, 6)


def test_an_stsz_claiming_more_samples_than_the_file_holds_allocates_nothing(tmp_path):
    """A fixed sample size times the claimed count must fit the file: a million samples of 100
    bytes in a 2 MB file are not believed (the count alone, under the file's size, was: 8 MB
    allocated here; a 40-million claim in a large file, 320 MB)."""
    lossless = {"x264-params": "keyint=5:min-keyint=5:scenecut=0", "preset": "ultrafast", "qp": "0"}
    src = vc.encode(tmp_path / "big.mp4", *vc.cfr(40, 10), options=lossless, size=(320, 240), image=vc.colour_image)

    def edit(moov):
        stbl = vc.find_box(moov, STBL)
        at = next(i for i, b in enumerate(stbl) if b[0] == b"stsz")
        stbl[at] = (b"stsz", struct.pack(">III", 0, 100, claimed))
        return moov

    claimed = src.stat().st_size // 2
    bad = vc.with_moov(src, tmp_path / "stsz.mp4", edit)
    assert claimed > 500_000 and claimed < bad.stat().st_size < claimed * 100
    table = _bounded(lambda: mp4_index.sample_table(bad), limit_bytes=2**20, limit_s=1.0)
    assert table is None


def test_an_stsz_count_other_than_ffmpegs_is_refused_before_it_is_expanded(good):
    import av

    with av.open(str(good)) as c:
        s = c.streams.video[0]
        track, frames = int(s.id), int(s.frames)
    assert mp4_index.sample_table(good, track_id=track, samples=frames) is not None
    assert mp4_index.sample_table(good, track_id=track, samples=frames + 1) is None
    assert mp4_index.sample_table(good, track_id=track + 1, samples=frames) is None  # no such track


# --------------------------------------------------------------------------- the fuzz

FUZZ_CHILD = r"""
import json, sys, time, tracemalloc
from pathlib import Path
import numpy as np
from naru_eval.media import index, mp4_index
from naru_eval.media.sampler import sample_frames
from naru_eval.media.video import VideoError, video_stream

good, out_dir, count, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = good.read_bytes()
moov = data.rfind(b"moov") - 4
fields = list(range(moov, len(data) - 3))
interesting = [0, 1, 2, 7, 8, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
rng = np.random.default_rng(seed)
summary = {"mutants": 0, "moov": 0, "demux": 0, "refused": 0, "peak": 0, "slowest": 0.0}

def build(path, tables):
    import av
    with av.open(str(path)) as c:
        return index._build_index(path, c, video_stream(path, c), tables).settle()

for i in range(count):
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        at = int(rng.choice(fields))
        if rng.random() < 0.5:
            b[at] = int(rng.integers(0, 256))
        else:
            word = int(rng.choice(interesting)) if rng.random() < 0.7 else int(rng.integers(0, 2**32))
            b[at : at + 4] = word.to_bytes(4, "big")
    path = out_dir / f"m{i}.mp4"
    path.write_bytes(bytes(b))
    print(i, flush=True)  # the last number printed names a mutant that crashed the process
    tracemalloc.start()
    t0 = time.perf_counter()
    mp4_index.sample_table(path)
    summary["slowest"] = max(summary["slowest"], time.perf_counter() - t0)
    summary["peak"] = max(summary["peak"], tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
    summary["mutants"] += 1
    try:
        by_demux = build(path, False)
    except Exception:
        summary["refused"] += 1
        continue
    index._INDEXES.clear()
    try:
        from_tables = build(path, True)
    except VideoError:
        from_tables = None
    if from_tables is not None and from_tables.source == "moov":
        summary["moov"] += 1
        for f in ("pts", "key_pts", "key_pos"):
            assert np.array_equal(getattr(from_tables, f), getattr(by_demux, f)), (i, f)
    else:
        summary["demux"] += 1
    try:
        s = sample_frames(path, num_frames=6, max_pixels=None)
    except VideoError:
        continue
    index._INDEXES.clear()
    index._INDEXES[index._index_key(index._identity(path))] = by_demux
    ref = sample_frames(path, num_frames=6, max_pixels=None)
    assert np.array_equal(s.indices, ref.indices) and np.array_equal(s.frames, ref.frames), i
    path.unlink()
print(json.dumps(summary))
"""


def test_fuzzed_moov_boxes_never_crash_hang_overallocate_or_give_a_wrong_frame(good, tmp_path):
    """150 seeded mutants of the moov (bytes and 32-bit fields set to edge values): the parser
    stays within bounds, an index from the tables is the demux pass's, and the frames sampled
    are those the demux pass's index gives. In a child process: a crash is a failure, not the end
    of the test run."""
    run = subprocess.run(
        [sys.executable, "-c", FUZZ_CHILD, str(good), str(tmp_path), "150", "25"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 0, f"mutant {lines[-1] if lines else '?'}: rc {run.returncode}\n{run.stderr[-3000:]}"
    summary = json.loads(lines[-1])
    assert summary["mutants"] == 150
    assert summary["moov"] > 0 and summary["demux"] + summary["refused"] > 0  # both paths exercised
    assert summary["peak"] < 4 * 2**20, summary
    assert summary["slowest"] < 1.0, summary


# --------------------------------------------------------------------------- caches


@pytest.mark.parametrize("where", ["read-only tmpfs", "below a regular file"])
def test_a_frame_cache_that_cannot_be_written_is_skipped_with_one_warning(good, tmp_path, monkeypatch, caplog, where):
    """``NARU_FRAME_CACHE`` on a read-only file system (a real one, tests/helpers/disk.py) or where
    no folder can be made used to stop the run before its first question."""
    import contextlib

    from tests.helpers.disk import make_read_only, small_disk

    with contextlib.ExitStack() as stack:
        if where == "read-only tmpfs":
            root = stack.enter_context(small_disk(tmp_path / "ro", "1m"))
            make_read_only(root)
            stack.callback(lambda: None)
        else:
            (tmp_path / "not_a_dir").write_text("a file")
            root = tmp_path / "not_a_dir" / "cache"
        monkeypatch.setenv("NARU_FRAME_CACHE", str(root))
        index._INDEXES.clear()
        index._UNWRITABLE.clear()
        cache = FrameCache()
        with caplog.at_level(logging.WARNING, logger="naru_eval.media.index"):
            first = cache.get(good, num_frames=8)
            cache.get(good, num_frames=4)
            FrameCache().get(good, num_frames=6)
        assert _shown(first) == uniform_indices(48, 8)
        warned = [r.getMessage() for r in caplog.records if "cannot write" in r.getMessage()]
        assert len(warned) == 1 and str(root) in warned[0], warned


def test_another_videos_frames_under_this_key_are_a_miss(good, tmp_path):
    other = write_indexed_video(tmp_path / "other.mp4", 30, fps=10, gop=6)
    disk = tmp_path / "fc"
    FrameCache(disk_dir=disk).get(other, num_frames=3)
    (entry,) = [p for p in disk.glob("??/*.npz")]
    key = cache_key(good, sampling_params(num_frames=3))
    (disk / key[:2]).mkdir(exist_ok=True)
    shutil.copy(entry, disk / key[:2] / f"{key}.npz")  # well-formed, of another video
    cache = FrameCache(disk_dir=disk)
    s = cache.get(good, num_frames=3)
    assert cache.stats.disk_hits == 0 and cache.stats.decodes == 1
    assert _shown(s) == uniform_indices(48, 3)


def test_an_entry_whose_frames_disagree_with_its_claims_is_a_miss(good, tmp_path):
    disk = tmp_path / "fc"
    s = FrameCache(disk_dir=disk).get(good, num_frames=4)
    (entry,) = [p for p in disk.glob("??/*.npz")]
    with np.load(entry) as z:
        kept = {k: z[k] for k in z.files}
    for name, forged in {
        "indices": {**kept, "indices": kept["indices"][::-1].copy()},
        "frames": {**kept, "frames": kept["frames"][:3]},
        "info": {**kept, "info": np.array(json.dumps({**s.info._asdict(), "frame_count": 40}))},
    }.items():
        np.savez(entry, **forged)
        cache = FrameCache(disk_dir=disk)
        again = cache.get(good, num_frames=4)
        assert cache.stats.disk_hits == 0, name
        assert np.array_equal(again.frames, s.frames), name
    assert frame_cache.consistent(sampling_params(num_frames=4), s)


def test_another_videos_frame_index_under_this_key_is_a_miss(good, tmp_path):
    other = write_indexed_video(tmp_path / "other.mp4", 30, fps=10, gop=6)
    disk = tmp_path / "fc"
    index._INDEXES.clear()
    index.frame_index(other, cache_dir=disk)
    (entry,) = list((disk / "index").rglob("*.npz"))
    key = index._index_key(index._identity(good))
    target = disk / "index" / key[:2] / f"{key}.npz"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(entry, target)
    index._INDEXES.clear()
    assert len(index.frame_index(good, cache_dir=disk).pts) == 48
    index._INDEXES.clear()
    s = sample_frames(good, num_frames=8, index_dir=disk)
    assert _shown(s) == uniform_indices(48, 8)


# --------------------------------------------------------------------------- one duration


@pytest.mark.parametrize("ext", ["mp4", "mkv", "ts"])
def test_one_duration_for_the_probe_the_sampler_and_validate_data(copy_data, ext):
    """Variable frame rate (24, 30, 60, 24 fps): the three used to give three values."""
    d = copy_data()
    (d / "videos" / "vid000.mp4").unlink()
    pts, tb = vc.vfr_segments()
    path = vc.encode(d / "videos" / f"vid000.{ext}", pts, tb, options=vc.x264(24))
    probed = probe_video(path).duration_s
    sampled = sample_frames(path, fps=1.0).info.duration_s
    report = validate(d)
    assert report.ok, report.problems
    assert probed == sampled == report.videos["vid000"].duration_s
    assert abs(probed - 8.0) < 0.05
