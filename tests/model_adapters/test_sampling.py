"""Each adapter's default sampling is its official NARU leaderboard row, and Qwen sampling by
rate follows qwen-vl-utils (frame count and frame size). No weights are loaded here, except one
tiny checkpoint to prove the rate path's wiring."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from naru_eval.adapters.family import Official
from naru_eval.adapters.qwen_sampling import qwen_video_plan
from naru_eval.adapters.registry import adapter_class, registered
from naru_eval.adapters.request import NaruRequest
from naru_eval.core.budgets import Sampling
from naru_eval.report.paper import official_results

#: the authors' published rows (package data: official_results.json, the project page's
#: results_RQ1.json; the same sampling strings in results_RQ3.json), name -> "sampling"
PUBLISHED = {name: row["sampling"] for name, row in official_results()["mcq_rq1"]["rows"].items()}


def declared_defaults() -> list[tuple[str, str | None, Official]]:
    """(adapter, checkpoint or None, declared default) of every registered family."""
    out = []
    for model_id in registered():
        fam = adapter_class(model_id).family
        if fam.default is not None:
            out.append((model_id, None, fam.default))
        out += [(model_id, name, d) for name, d in fam.by_checkpoint.items()]
    return out


def label(num_frames: int | None, fps: float | None) -> str:
    """The official table's form, written independently of budgets.Sampling.label."""
    return f"{fps:g} FPS" if fps is not None else f"{num_frames} Frames"


@pytest.mark.parametrize(("model_id", "checkpoint", "default"), declared_defaults())
def test_each_declared_default_is_its_published_rows_sampling(model_id, checkpoint, default, monkeypatch):
    """A default names the published rows it reproduces, and each row's sampling is the default's;
    an adapter without an official row says why (its model is the user's). An adapter made
    without num_frames=/fps= samples at it (lazily: nothing is loaded), in its run key and in
    every payload."""
    want = label(default.sampling.frames, default.sampling.fps)
    for row in default.rows:
        assert PUBLISHED.get(row) == want, (model_id, row)
    assert default.rows or default.note
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    cls = adapter_class(model_id)
    checkpoint_arg = next(n for n in ("pretrained", "model") if n in cls.Args.model_fields)
    a = cls(**{checkpoint_arg: f"org/{checkpoint or 'gemini-2.5-flash'}", "store": "false"})
    assert (a.num_frames, a.fps) == (default.sampling.frames, default.sampling.fps)
    assert a.describe()["num_frames"] == a.num_frames and a.describe()["fps"] == a.fps  # in the run key
    assert a.provenance()["sampling"] == want  # in every payload


def test_every_published_model_row_has_a_family_that_reproduces_it():
    """The rows of models an adapter runs are each named by one declared default (the others are
    a platform and a model no adapter here loads)."""
    named = {row for _, _, d in declared_defaults() for row in d.rows}
    assert named <= set(PUBLISHED)
    assert named >= {r for r in PUBLISHED if r.startswith(("Gemini", "Qwen", "InternVL", "MiniCPM", "Nemotron"))}


def test_an_hf_default_is_lazy_and_the_official_row():
    a = adapter_class("naru_qwen2_5_vl")(pretrained="Qwen/Qwen2.5-VL-7B-Instruct", store="false")
    assert a.model is None  # lazy: nothing is loaded
    assert label(a.num_frames, a.fps) == PUBLISHED["Qwen2.5-VL-7B"]


def test_gemini_default_is_the_official_sampling(monkeypatch):
    from model_adapters.gemini import Gemini
    from naru_eval.cli import gemini as cli_gemini

    monkeypatch.setenv("GOOGLE_API_KEY", "test-key-not-real")
    g = Gemini(model="gemini-2.5-flash", store="false")
    assert label(None, g.fps) == PUBLISHED["Gemini-2.5-Flash"] == Gemini.family.default.sampling.label
    assert g.describe()["fps"] == g.fps  # in the run key
    assert Gemini(model="gemini-2.5-flash", fps="1", store="false").fps == 1.0
    # the default is read from the one declaration, not written again in the adapter or estimate-cost
    declared = dataclasses.replace(Gemini.family, default=Official(Sampling(fps=0.5), rows=("Gemini-2.5-Flash",)))
    monkeypatch.setattr(Gemini, "family", declared)
    assert Gemini(model="gemini-2.5-flash", store="false").fps == 0.5
    import argparse

    parser = argparse.ArgumentParser()
    cli_gemini.add_arguments(parser)
    args = parser.parse_args(["--model", "gemini-2.5-flash"])
    assert args.fps is None and cli_gemini.default_fps() == 0.5


def test_adapters_without_a_fixed_default():
    assert adapter_class("naru_replay").family.default is None
    compat = adapter_class("naru_openai_compat").family.default
    assert compat is not None and not compat.rows and compat.note  # the served model is the user's
    # the leaderboard's interface: the sampling label every payload records
    assert adapter_class("naru_nemotron_omni").family.default.sampling.label == "128 Frames"
    assert adapter_class("naru_qwen3_vl").family.default.sampling.label == "0.25 FPS"


def test_explicit_sampling_overrides_the_official_default():
    cls = adapter_class("naru_qwen3_vl")
    a = cls(pretrained="Qwen/Qwen3-VL-8B-Instruct", num_frames="128", store="false")
    assert (a.num_frames, a.fps) == (128, None)
    b = adapter_class("naru_internvl3_5")(pretrained="x", num_frames="128", store="false")
    assert (b.num_frames, b.fps) == (128, None)
    n = adapter_class("naru_nemotron_omni")(pretrained="x/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4", fps="1")
    assert (n.num_frames, n.fps) == (None, 1.0)


# --------------------------------------------------------------------------- qwen-vl-utils rule
# 1920x1080 at 30 fps, Qwen3-VL (16-px patches, factor 32), 0.25 fps, MODEL_SEQ_LEN 128000:
# total pixel budget 128000 x 32^2 x 0.9 = 117,964,800; per frame min(768 x 32^2, total / n x 2).
# Computed by hand from qwen-vl-utils 0.0.14 vision_process.py (smart_nframes, fetch_video,
# smart_resize); tokens per frame = h/32 x w/32 / 2 (a merged 32x32 patch, 2 frames per patch).
QWEN3_1080P = [
    # minutes, frames, per-frame pixel limit, (height, width)
    (30, 450, 524_288, (512, 960)),  # 450 = 1800 s x 0.25, below FPS_MAX_FRAMES
    (120, 768, 307_200, (384, 736)),  # 1800 asked, FPS_MAX_FRAMES = 768
    (240, 768, 307_200, (384, 736)),  # 3600 asked, 768
]


@pytest.mark.parametrize(("minutes", "frames", "limit", "size"), QWEN3_1080P)
def test_qwen3_vl_plan_long_videos(minutes, frames, limit, size):
    fps_video = 30.0
    plan = qwen_video_plan(int(minutes * 60 * fps_video), fps_video, 1080, 1920, fps=0.25, patch_size=16)
    assert (plan.nframes, plan.max_pixels, (plan.height, plan.width)) == (frames, limit, size)
    assert plan.height % 32 == 0 and plan.width % 32 == 0 and plan.height * plan.width <= plan.max_pixels
    tokens = plan.nframes * (plan.height // 32) * (plan.width // 32) // 2
    assert tokens <= 128_000 * 0.9  # the budget the per-frame split keeps the video within


def test_qwen_plan_rules():
    # an odd count floors to FRAME_FACTOR (2): 0.25 fps x 30 s = 7.5 -> 6
    assert qwen_video_plan(900, 30.0, 360, 640, fps=0.25, patch_size=16).nframes == 6
    # FPS_MIN_FRAMES = 4 for a short clip: 10 s x 0.25 = 2.5 -> 4
    assert qwen_video_plan(300, 30.0, 360, 640, fps=0.25, patch_size=16).nframes == 4
    # max_frames caps (and floors to even): 31 -> 30
    assert qwen_video_plan(54_000, 30.0, 1080, 1920, fps=0.25, patch_size=16, max_frames=31).nframes == 30
    # a small frame is enlarged to VIDEO_MIN_TOKEN_NUM (128) merged patches: 360x640 -> >= 131,072 px
    p = qwen_video_plan(900, 30.0, 360, 640, fps=0.25, patch_size=16)
    assert p.height * p.width >= 128 * 32 * 32 and p.min_pixels == 128 * 32 * 32
    # Qwen2.5-VL's 14-px patches: factor 28; 30 min at 1080p -> 128000 x 28^2 x 0.9 / 450 x 2 per frame
    q = qwen_video_plan(54_000, 30.0, 1080, 1920, fps=0.25, patch_size=14)
    assert (q.nframes, q.max_pixels, q.height, q.width) == (450, 401_408, 448, 840)
    # a given max_pixels lowers the limit, never raises it
    assert qwen_video_plan(54_000, 30.0, 1080, 1920, fps=0.25, patch_size=16, max_pixels=200_704).max_pixels == 200_704
    with pytest.raises(ValueError):  # fewer frames than FRAME_FACTOR
        qwen_video_plan(1, 30.0, 360, 640, fps=0.25, patch_size=16)


@pytest.mark.parametrize("total_pixels", [None, 6 * 300_000])
@pytest.mark.parametrize(("height", "width"), [(128, 192), (704, 1280)])
def test_qwen_plan_matches_qwen_vl_utils_fetch_video(height, width, total_pixels):
    """The plan's frame size is the one qwen-vl-utils' own fetch_video gives the same frames:
    enlarged to the per-frame floor, or shrunk by the total budget's split. (Given a frame list,
    fetch_video first resizes each frame as an image with twice the factor, 64 px, so the sides
    here are multiples of 64 and that step keeps them; a video file skips that step.)"""
    from PIL import Image
    from qwen_vl_utils import vision_process as vp

    images = [Image.fromarray(np.full((height, width, 3), 100 + i, np.uint8)) for i in range(6)]
    ele = {"video": images} if total_pixels is None else {"video": images, "total_pixels": total_pixels}
    video = vp.fetch_video(ele, image_patch_size=16)
    plan = qwen_video_plan(6, 1.0, height, width, fps=6.0, patch_size=16, total_pixels=total_pixels)
    assert plan.nframes == video.shape[0] == 6
    assert (plan.height, plan.width) == tuple(video.shape[-2:])


def test_qwen3_vl_rate_path_wiring(tiny_checkpoint, tmp_path):
    """0.25 fps through the adapter: qwen-vl-utils' count and size reach the processor unchanged."""
    from naru_eval.core.synthetic import write_indexed_video

    video = write_indexed_video(tmp_path / "v.mp4", n_frames=300, fps=10, gop=10)  # 30 s, 64x64
    a = adapter_class("naru_qwen3_vl")(pretrained=str(tiny_checkpoint("naru_qwen3_vl")), device="cpu", store="false")
    assert a.fps == 0.25 and a.num_frames is None  # the official default
    plan = a.builder.video_plan(str(video))
    assert plan.nframes == 6  # 30 s x 0.25 = 7.5 -> 6
    a.ensure_loaded()
    calls = []
    real = a.processor

    def spy(*args, **kw):
        out = real(*args, **kw)
        calls.append((kw, out))
        return out

    a.processor = type("P", (), {"__call__": staticmethod(spy), "__getattr__": lambda s, n: getattr(real, n)})()
    req = NaruRequest({"question_id": "q"}, "Which?\nA. x\nB. y", [str(video)], {"max_new_tokens": 3}, "naru_mcq", 0)
    ans = a.respond(req)
    assert ans.usage["frames"] == 6
    ((kw, out),) = calls
    (frames,) = kw["videos"]
    assert frames.shape == (6, plan.height, plan.width, 3) and frames.dtype == np.uint8
    assert kw["do_resize"] is False and kw["do_sample_frames"] is False
    t, gh, gw = (int(x) for x in out["video_grid_thw"][0])
    assert (t, gh * 16, gw * 16) == (3, plan.height, plan.width)  # the processor kept the size
    assert kw["video_metadata"][0]["frames_indices"] == [25, 75, 125, 175, 225, 275]  # the one sampler's picks


def test_rate_sizing_is_in_the_run_key():
    cls = adapter_class("naru_qwen3_vl")
    req = NaruRequest({"question_id": "q"}, "p", ["v.mp4"], {}, "naru_mcq", 0)
    a, b = cls(pretrained="x", store="false"), cls(pretrained="x", min_frames="8", store="false")
    assert a.describe()["hf"]["qwen_vl_utils_sizing"]["model_seq_len"] == 128_000
    assert a.request_key(req)[0] != b.request_key(req)[0]
    assert "qwen_vl_utils_sizing" not in cls(pretrained="x", num_frames="8", store="false").describe()["hf"]
