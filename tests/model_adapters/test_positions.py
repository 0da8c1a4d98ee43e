"""Qwen's reference M-RoPE positions at NARU's real geometry: 30-, 120- and 240-minute
1080p videos, at 128 frames and at 0.25 fps (the frame count and size through qwen-vl-utils),
with the real checkpoints' merge size and ``tokens_per_second`` (scripts/gpu_configs).

``model_adapters.positions`` is checked against :func:`reference_positions`, a separate
transcription of Qwen's original ``get_rope_index`` (it walks the sequence by its
``<|vision_start|>`` tokens, in numpy), not against the installed transformers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from naru_eval.adapters.hf.positions import MRopeGeometry, mrope_positions
from naru_eval.adapters.qwen_sampling import qwen_video_plan
from tests.helpers.families import HF_FAMILIES, make

CONFIGS = Path(__file__).resolve().parents[2] / "scripts" / "gpu_configs"
# token ids of the layout (any distinct ids do: positions depend on where the blocks are)
TEXT, START, END, IMAGE, VIDEO = 7, 100, 101, 102, 103
FPS = 30.0  # the source video's frame rate
#: family -> (real config file, patch size, one block per temporal patch)
FAMILIES = {
    "naru_qwen2_5_vl": ("qwen2_5_vl", 14, False),
    "naru_qwen3_vl": ("qwen3_vl", 16, True),
}


def real_geometry(model_id: str) -> MRopeGeometry:
    """The layout-relevant values of the public config.json (merge size, tokens_per_second)."""
    name, _, split = FAMILIES[model_id]
    vision = json.loads((CONFIGS / f"{name}.json").read_text())["vision_config"]
    tps = vision.get("tokens_per_second")
    return MRopeGeometry(IMAGE, VIDEO, int(vision["spatial_merge_size"]), tps, split)


def grid(model_id: str, minutes: int, sampling: str) -> tuple[list[int], float]:
    """(video_grid_thw, second_per_grid_t) for a 1080p video: 128 frames at the video processor's
    default size, or qwen-vl-utils' frame count and size at 0.25 fps."""
    from qwen_vl_utils.vision_process import smart_resize

    _, patch, _ = FAMILIES[model_id]
    seconds = minutes * 60.0
    if sampling == "128":
        n = 128
        # the processors' default video pixel range (Qwen2VLVideoProcessor / Qwen3VLVideoProcessor)
        lo, hi = (100352, 602112) if patch == 14 else (131072, 786432)
        h, w = smart_resize(1080, 1920, factor=patch * 2, min_pixels=lo, max_pixels=hi)
    else:
        plan = qwen_video_plan(int(seconds * FPS), FPS, 1080, 1920, fps=0.25, patch_size=patch)
        n, h, w = plan.nframes, plan.height, plan.width
    # the processor: two frames per temporal patch; sampled fps = N / duration
    return [n // 2, h // patch, w // patch], float(np.float32(2 * seconds / n))


def layout(model_id: str, thw: list[int]) -> list[int]:
    """A chat as the processor writes it: system text, the video, the question, the reply's start.
    Qwen3-VL / Qwen3.5 put a timestamp (here 6 text tokens) before each temporal patch."""
    t, h, w = thw
    per_patch = h * w // 4
    ids = [TEXT] * 21
    if FAMILIES[model_id][2]:
        for _ in range(t):
            ids += [TEXT] * 6 + [START] + [VIDEO] * per_patch + [END]
    else:
        ids += [START] + [VIDEO] * (t * per_patch) + [END]
    return ids + [TEXT] * 64 + [TEXT] * 5


def reference_positions(ids, video_grids, seconds, geo: MRopeGeometry) -> tuple[np.ndarray, int]:
    """Qwen's original get_rope_index, transcribed for one unpadded sequence (numpy)."""
    m = geo.spatial_merge_size
    if geo.split_video_frames:  # Qwen3-VL: a timestamp separates each temporal patch
        video_grids = [[1, h, w] for t, h, w in video_grids for _ in range(t)]
        seconds = None
    starts = [i for i, x in enumerate(ids) if x == START]
    n_videos = sum(1 for i in starts if ids[i + 1] == VIDEO)
    chunks: list[np.ndarray] = []
    st = 0
    for v in range(n_videos):
        ed = ids.index(VIDEO, st)
        t, h, w = video_grids[v][0], video_grids[v][1] // m, video_grids[v][2] // m
        text_len = ed - st
        st_idx = int(chunks[-1].max()) + 1 if chunks else 0
        chunks.append(np.tile(np.arange(text_len), (3, 1)) + st_idx)
        if seconds is not None and geo.tokens_per_second is not None:
            sec = np.float32(seconds[v])
            t_index = (np.arange(t, dtype=np.float32) * sec * np.float32(geo.tokens_per_second)).astype(np.int64)
        else:
            t_index = np.arange(t)
        t_idx = np.repeat(t_index, h * w)
        h_idx = np.tile(np.repeat(np.arange(h), w), t)
        w_idx = np.tile(np.arange(w), t * h)
        chunks.append(np.stack([t_idx, h_idx, w_idx]) + text_len + st_idx)
        st = ed + t * h * w
    if st < len(ids):
        st_idx = int(chunks[-1].max()) + 1 if chunks else 0
        chunks.append(np.tile(np.arange(len(ids) - st), (3, 1)) + st_idx)
    pos = np.concatenate(chunks, axis=1)
    return pos, int(pos.max()) + 1 - len(ids)


CASES = [(mid, minutes, s) for mid in FAMILIES for minutes in (30, 120, 240) for s in ("128", "0.25fps")]


@pytest.mark.parametrize(("model_id", "minutes", "sampling"), CASES)
def test_positions_follow_the_reference(model_id, minutes, sampling):
    geo = real_geometry(model_id)
    thw, sec = grid(model_id, minutes, sampling)
    ids = layout(model_id, thw)
    got, delta = mrope_positions(ids, geo, video_grid_thw=[thw], second_per_grid_ts=[sec])
    want, want_delta = reference_positions(ids, [thw], [sec], geo)
    assert got.shape == want.shape == (3, len(ids))
    assert np.array_equal(got.numpy(), want) and delta == want_delta
    video = np.asarray(ids) == VIDEO
    after = int(np.nonzero(video)[0][-1]) + 2  # past <|vision_end|>: the question
    assert int(got[:, after].min()) == int(want[:, video].max()) + 2
    # a prefix's positions are the whole prompt's first ones (what the shared prefix relies on)
    cut = after - 1
    head, _ = mrope_positions(ids[:cut], geo, video_grid_thw=[thw], second_per_grid_ts=[sec])
    assert np.array_equal(head.numpy(), want[:, :cut])
    if geo.tokens_per_second is not None:  # the time axis counts seconds (x 2), far beyond the spatial grid
        assert int(want[0, video].max() - want[0, video].min()) >= 2 * minutes * 60 * 0.95
        assert int(want[0, video].max() - want[0, video].min()) > 20 * max(thw[1:])


def test_qwen_vl_utils_geometry_at_240_minutes():
    """0.25 fps over 4 hours asks for 3,600 frames: qwen-vl-utils caps them at 768 (384 patches)."""
    thw, sec = grid("naru_qwen3_vl", 240, "0.25fps")
    assert thw[0] == 384 and sec == pytest.approx(2 * 14400 / 768)


def test_a_block_must_hold_its_grid():
    geo = real_geometry("naru_qwen2_5_vl")
    ids = [TEXT, START] + [VIDEO] * 7 + [END]
    with pytest.raises(ValueError, match="does not hold"):
        mrope_positions(ids, geo, video_grid_thw=[[2, 4, 4]], second_per_grid_ts=[1.0])
    with pytest.raises(ValueError, match="no grid left"):
        mrope_positions(ids, geo, video_grid_thw=[], second_per_grid_ts=[])


@pytest.mark.parametrize("model_id", HF_FAMILIES)
def test_layout_in_provenance_and_run_key(model_id):
    """Runs with another position layout are neither mixed in a report nor served from the store."""
    a = make(model_id, "x")
    want = a.family.positions  # declared once, in the family's module
    assert a.provenance()["positions"] == want
    assert a.describe()["hf"]["positions"] == want
