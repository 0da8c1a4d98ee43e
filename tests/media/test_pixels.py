"""Pixels as the file means them: every frame equals the ffmpeg CLI's own conversion (the frame's
colour matrix and range, 8- and 10-bit) at native size and at the default pixel budget, and the
exact-size resize is qwen-vl-utils' own resize step on the same frames."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from naru_eval.media import frame_cache, index, pixels
from naru_eval.media.frame_cache import FrameCache, sampling_params
from naru_eval.media.plan import DEFAULT_MAX_PIXELS, target_size
from naru_eval.media.sampler import sample_frames
from tests.helpers import video_corpus as vc

needs_ffmpeg = pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="the ffmpeg CLI (Debian's ffmpeg package) is the reference and is absent"
)

#: name -> (size, codec, pix_fmt, (matrix, range) or None: untagged)
CORPUS = {
    "bt709_limited": ((1280, 720), "libx264", "yuv420p", (vc.BT709, vc.LIMITED)),
    "bt709_full": ((1280, 720), "libx264", "yuv420p", (vc.BT709, vc.FULL)),
    "bt601_smpte170m": ((720, 480), "libx264", "yuv420p", (vc.SMPTE170M, vc.LIMITED)),
    "bt601_bt470bg": ((720, 576), "libx264", "yuv420p", (vc.BT470BG, vc.LIMITED)),
    "smpte240m": ((640, 360), "libx264", "yuv420p", (vc.SMPTE240M, vc.LIMITED)),
    "fcc": ((640, 360), "libx264", "yuv420p", (vc.FCC, vc.LIMITED)),
    "bt2020_10bit": ((1280, 720), "libx265", "yuv420p10le", (vc.BT2020_NCL, vc.LIMITED)),
    "bt2020_10bit_full": ((640, 360), "libx265", "yuv420p10le", (vc.BT2020_NCL, vc.FULL)),
    "untagged_sd": ((720, 480), "libx264", "yuv420p", None),
    "untagged_hd": ((1280, 720), "libx264", "yuv420p", None),
}
FRAMES = 4


@pytest.fixture(scope="module")
def colour(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("colour")
    out = {}
    for name, (size, codec, pix_fmt, tags) in CORPUS.items():
        opts = vc.x264(2) if codec == "libx264" else vc.x265_fast(2)
        out[name] = vc.encode(
            d / f"{name}.mkv" if codec == "libx265" else d / f"{name}.mp4",
            *vc.cfr(FRAMES, 25),
            codec=codec,
            options=opts,
            size=size,
            colour=tags,
            pix_fmt=pix_fmt,
            image=vc.colour_image,
        )
    return out


def _diff(a: np.ndarray, b: np.ndarray) -> str:
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return f"max {int(d.max())}, mean {float(d.mean()):.3f}, {float(np.mean(d > 0)):.1%} of values differ"


def test_the_corpus_is_tagged_as_it_claims(colour):
    import av

    for name, (_size, _codec, pix_fmt, tags) in CORPUS.items():
        with av.open(str(colour[name])) as c:
            f = next(c.decode(video=0))
        want = tags or (vc.UNSPECIFIED, 0)
        assert (int(f.colorspace), int(f.color_range)) == want, name
        assert ("10" in f.format.name) == ("10" in pix_fmt), name


@needs_ffmpeg
@pytest.mark.parametrize("name", list(CORPUS))
def test_native_size_equals_ffmpeg_pixel_for_pixel(colour, name):
    s = sample_frames(colour[name], num_frames=FRAMES, max_pixels=None)
    ref = vc.ffmpeg_rgb(colour[name])
    assert s.frames.shape == ref.shape
    assert np.array_equal(s.frames, ref), f"{name}: {_diff(s.frames, ref)}"


@needs_ffmpeg
@pytest.mark.parametrize("name", list(CORPUS))
def test_default_pixel_budget_equals_ffmpeg_scale(colour, name):
    """At the default max_pixels the conversion and the scale are one swscale pass, as the CLI's
    ``-vf scale=W:H`` (bicubic, its default) does them."""
    s = sample_frames(colour[name], num_frames=FRAMES)
    w, h = target_size(*CORPUS[name][0], DEFAULT_MAX_PIXELS)
    ref = vc.ffmpeg_rgb(colour[name], size=(w, h))
    assert s.frames.shape == ref.shape == (FRAMES, h, w, 3)
    assert np.array_equal(s.frames, ref), f"{name}: {_diff(s.frames, ref)}"


@pytest.mark.parametrize("name", ["untagged_sd", "untagged_hd", "bt601_smpte170m"])
def test_untagged_and_bt601_frames_are_unchanged_at_native_size(colour, name):
    """Frames FFmpeg reads as BT.601 come out as PyAV's plain conversion always gave them."""
    import av

    with av.open(str(colour[name])) as c:
        plain = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    assert np.array_equal(sample_frames(colour[name], num_frames=FRAMES, max_pixels=None).frames, plain)


@pytest.mark.parametrize("name", ["bt709_limited", "bt709_full", "bt2020_10bit"])
def test_tagged_frames_are_not_read_as_bt601(colour, name):
    """The error the frame's own tags prevent (PyAV's default reads every frame as BT.601)."""
    import av

    with av.open(str(colour[name])) as c:
        plain = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    ours = sample_frames(colour[name], num_frames=FRAMES, max_pixels=None).frames
    assert int(np.abs(ours.astype(np.int16) - plain).max()) >= 10


def test_one_converter_does_not_carry_a_matrix_from_frame_to_frame(colour):
    """swscale keeps colour settings on its cached context: a BT.601 frame after a BT.709 one must
    still be read as BT.601 (PyAV skips setting coefficients for BT.601, its default)."""
    import av

    with av.open(str(colour["bt709_limited"])) as c:
        frame = next(c.decode(video=0))
    w, h = frame.width, frame.height
    alone = pixels.RGBConverter()
    frame.colorspace = vc.BT470BG
    want_601 = alone(frame, w, h)
    shared = pixels.RGBConverter()
    frame.colorspace = vc.BT709
    got_709 = shared(frame, w, h)
    frame.colorspace = vc.BT470BG
    got_601 = shared(frame, w, h)
    assert np.array_equal(got_601, want_601)
    assert not np.array_equal(got_709, got_601)


def test_info_names_the_colour_used(colour):
    assert sample_frames(colour["bt709_full"], num_frames=1).info.colour == "bt709/pc"
    assert sample_frames(colour["untagged_sd"], num_frames=1).info.colour == "unknown/unknown"


def test_frames_cached_before_the_colour_fix_are_not_reused(colour, tmp_path):
    """An entry the sampler wrote before it read the frame's tags (cache format 2, no conversion in
    its key; its frames read as BT.601) is never served: the frames are decoded again."""
    import hashlib

    from naru_eval.media.video import file_identity

    path = colour["bt709_limited"]
    stale = sample_frames(path, num_frames=2)
    bt601 = stale.frames // 2  # stands for the old pixels: any others than today's
    old = {**file_identity(path), "format": 2, "num_frames": 2, "fps": None, "max_frames": None,
           "max_pixels": DEFAULT_MAX_PIXELS, "approximate": False}  # fmt: skip
    key = hashlib.sha256(json.dumps(old, sort_keys=True, default=str).encode()).hexdigest()
    (tmp_path / key[:2]).mkdir()
    info = {k: v for k, v in stale.info._asdict().items() if k not in ("stream_index", "video_streams", "colour")}
    np.savez(tmp_path / key[:2] / f"{key}.npz", frames=bt601, indices=stale.indices, timestamps=stale.timestamps,
             info=np.array(json.dumps(info)), exact=np.array(True), timestamp_error_s=np.zeros(2))  # fmt: skip
    cache = FrameCache(disk_dir=tmp_path)
    got = cache.get(path, num_frames=2)
    assert cache.stats.decodes == 1 and cache.stats.disk_hits == 0
    assert np.array_equal(got.frames, stale.frames)
    assert pixels.CONVERSION in frame_cache._identity(path, sampling_params(num_frames=2))


@pytest.fixture(scope="module")
def hd(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hd")
    return vc.encode(
        d / "hd.mp4", *vc.cfr(6, 25), options=vc.x264(3), size=(1280, 720), colour=(1, 1), image=vc.colour_image
    )


def test_exact_size_is_qwen_vl_utils_resize_of_the_native_frames(hd, monkeypatch):
    """qwen-vl-utils' ``fetch_video`` (its sizing and its resize call) on the same native frames
    the sampler decodes: equal, pixel for pixel. Its video reader (torchvision.io, gone from
    torchvision 0.29) is given the sampler's native-size frames."""
    import torch
    from qwen_vl_utils import vision_process as vp

    native = sample_frames(hd, num_frames=4, max_pixels=None)

    def reader(ele):
        video = torch.from_numpy(native.frames).permute(0, 3, 1, 2).contiguous()
        return video, {"fps": 25.0, "frames_indices": native.indices.tolist(), "total_num_frames": 6}, 25.0

    monkeypatch.setitem(vp.VIDEO_READER_BACKENDS, "torchvision", reader)
    monkeypatch.setattr(vp, "get_video_reader_backend", lambda: "torchvision")
    ref = vp.fetch_video({"video": str(hd), "max_pixels": 320 * 28 * 28}, image_patch_size=14)
    h, w = int(ref.shape[2]), int(ref.shape[3])
    assert (h, w) != (720, 1280) and h % 28 == 0 and w % 28 == 0
    ours = sample_frames(hd, num_frames=4, size=(h, w))
    assert ours.frames.shape == (4, h, w, 3)
    want = ref.permute(0, 2, 3, 1).to(torch.uint8).numpy()
    assert np.array_equal(ours.frames, want), _diff(ours.frames, want)


def test_exact_size_is_a_cache_parameter(hd, tmp_path):
    cache = FrameCache(disk_dir=tmp_path)
    a = cache.get(hd, num_frames=2, size=(252, 448))
    b = cache.get(hd, num_frames=2)
    assert a.frames.shape[1:3] == (252, 448) and b.frames.shape[1:3] == target_size(1280, 720, DEFAULT_MAX_PIXELS)[::-1]
    assert cache.stats.decodes == 2
    index._INDEXES.clear()
    again = FrameCache(disk_dir=tmp_path).get(hd, num_frames=2, size=(252, 448))
    assert np.array_equal(again.frames, a.frames)
    with pytest.raises(ValueError, match="size"):
        sample_frames(hd, num_frames=2, size=(0, 448))


def test_exact_size_in_uint8_arithmetic_is_what_internvls_processor_makes_of_native_frames(hd):
    """transformers' InternVL video processor resizes the frames it gets (uint8, torchvision v2's
    fixed-point kernel on the CPU); given frames already at 448x448 it leaves them: the model then
    sees exactly what it would from the native frames."""
    from transformers import InternVLVideoProcessor

    proc = InternVLVideoProcessor(size={"height": 448, "width": 448})

    def pixels_of(frames):
        return proc(videos=[frames], return_tensors="pt", do_sample_frames=False)["pixel_values_videos"].numpy()

    native = sample_frames(hd, num_frames=3, max_pixels=None).frames
    ours = sample_frames(hd, num_frames=3, size=(448, 448), resize="uint8").frames
    assert np.array_equal(pixels_of(ours), pixels_of(native))
    with pytest.raises(ValueError, match="resize"):
        sample_frames(hd, num_frames=3, resize="uint8")
