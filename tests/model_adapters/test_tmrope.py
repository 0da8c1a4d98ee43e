"""TMRoPE (Qwen2.5-Omni, Qwen3-Omni) at NARU's real geometry: 30-, 120- and 240-minute videos at
128 frames of 448x448 px with their whole soundtrack (25 or 13 audio tokens a second).

``naru_eval.adapters.hf.tmrope`` is checked against :func:`reference`, a separate transcription of the
reference layout (transformers 5.24: the processors' ``replace_video_with_audio_token`` and the
models' ``get_rope_index``, with ``get_chunked_index``'s pairing of the i-th video chunk with the
i-th audio chunk), in numpy, for one unpadded sequence; and, on small geometry, against the
installed transformers itself (the tiny thinkers' processors and ``get_rope_index``)."""

from __future__ import annotations

import numpy as np
import pytest

from naru_eval.adapters.hf.tmrope import (
    OmniGeometry,
    audio_time_positions,
    chunk_order,
    grid_time_positions,
    omni_block_tokens,
    omni_positions,
    reference_grid_positions,
)

TEXT, VBOS, VEOS, ABOS, AEOS, IMAGE, VIDEO, AUDIO = 7, 100, 101, 102, 103, 104, 105, 106
GEOS = {
    "qwen2_5_omni": OmniGeometry("qwen2_5_omni", IMAGE, VIDEO, AUDIO, VBOS, VEOS, ABOS, AEOS, 2, 25.0),
    "qwen3_omni": OmniGeometry("qwen3_omni", IMAGE, VIDEO, AUDIO, VBOS, VEOS, ABOS, AEOS, 2, 13.0),
}
#: (patch size) of each family's vision tower: a 448x448 frame is a 32x32 or 28x28 patch grid
PATCH = {"qwen2_5_omni": 14, "qwen3_omni": 16}


def audio_tokens(layout: str, seconds: float) -> int:
    from naru_eval.media.audio_plan import qwen2_5_omni_tokens, qwen3_omni_tokens

    f = qwen2_5_omni_tokens if layout == "qwen2_5_omni" else qwen3_omni_tokens
    return f(round(seconds * 16000))


# --------------------------------------------------------------------------- the reference


def _chunked(values: np.ndarray, per: int) -> list[tuple[int, int]]:
    """``get_chunked_index``: a chunk ends where a value passes the next multiple of ``per``
    (one multiple at a time, so a value far past it starts a one-token chunk)."""
    out, start, current = [], 0, 1
    for i, v in enumerate(values):
        if v >= current * per:
            out.append((start, i))
            start = i
            current += 1
    out.append((start, len(values)))
    return out


def reference(layout: str, thw, spg: float, n_audio: int, before: int = 21, after: int = 69):
    """(ids, 3 x L positions) of text, one video with its audio, text, as transformers 5.24 lays it."""
    geo = GEOS[layout]
    t, h, w = thw
    hh, ww = h // 2, w // 2
    rate = np.float32(geo.position_id_per_seconds)
    t_val = np.arange(t, dtype=np.float32) * np.float32(spg) * rate
    if layout == "qwen2_5_omni":
        t_val = t_val.astype(np.int64).astype(np.float64)
    v_t = np.repeat(t_val.astype(np.float64), hh * ww)
    v_h = np.tile(np.repeat(np.arange(hh), ww), t).astype(np.float64)
    v_w = np.tile(np.arange(ww), t * hh).astype(np.float64)
    a_t = np.arange(n_audio, dtype=np.float64)
    ids = [TEXT] * before
    pos = [np.tile(np.arange(before, dtype=np.float64), (3, 1))]
    st = float(before)
    if layout == "qwen2_5_omni":
        ids += [VBOS, ABOS]
        pos.append(np.full((3, 2), st))
        st += 1
        per = int(geo.position_id_per_seconds * geo.seconds_per_chunk)
        vc, ac = _chunked(v_t, per), _chunked(a_t, per)
        pieces = []
        for j in range(max(len(vc), len(ac))):
            if j < len(vc):
                a, b = vc[j]
                pieces.append(("v", np.stack([v_t[a:b], v_h[a:b], v_w[a:b]]) + st))
            if j < len(ac):
                a, b = ac[j]
                pieces.append(("a", np.tile(a_t[a:b], (3, 1)) + st))
        pieces = [(k, p) for k, p in pieces if p.shape[1]]
        for k, p in pieces:
            ids += [VIDEO if k == "v" else AUDIO] * p.shape[1]
            pos.append(p)
        eos = pieces[-1][1].max() + 1
        ids += [AEOS, VEOS]
        pos.append(np.full((3, 2), eos))
        st = eos + 1
    else:
        ids += [VBOS, ABOS]
        pos.append(np.tile(np.array([st, st + 1]), (3, 1)))
        st += 2
        vp = np.stack([v_t, v_h, v_w]) + st
        ap = np.tile(a_t, (3, 1)) + st
        i = j = 0
        last = None
        while i < vp.shape[1] and j < ap.shape[1]:
            if vp[0, i] <= ap[0, j]:
                ids.append(VIDEO)
                last = vp[:, i : i + 1]
                i += 1
            else:
                ids.append(AUDIO)
                last = ap[:, j : j + 1]
                j += 1
            pos.append(last)
        if i < vp.shape[1]:
            last = vp[:, i:]
            ids += [VIDEO] * last.shape[1]
            pos.append(last)
        if j < ap.shape[1]:
            last = ap[:, j:]
            ids += [AUDIO] * last.shape[1]
            pos.append(last)
        eos = last.max() + 1
        ids += [AEOS, VEOS]
        pos.append(np.tile(np.array([eos, eos + 1]), (3, 1)))
        st = eos + 2
    ids += [TEXT] * after
    pos.append(np.tile(np.arange(after, dtype=np.float64), (3, 1)) + st)
    return ids, np.concatenate(pos, axis=1)


def ours(layout: str, thw, grid_t, audio_windows, before: int = 21, after: int = 69):
    geo = GEOS[layout]
    a_t = audio_time_positions(geo, audio_windows)
    ids = [TEXT] * before + [VBOS] + omni_block_tokens(geo, thw, grid_t, a_t) + [VEOS] + [TEXT] * after
    pos, delta = omni_positions(ids, geo, [thw], [grid_t], [a_t])
    return ids, pos.numpy().astype(np.float64), delta


def naru_geometry(layout: str, minutes: int, frames: int = 128):
    """128 frames of 448x448 px and the whole soundtrack; fps as the adapters pass it (N / duration)."""
    seconds = minutes * 60.0
    side = 448 // PATCH[layout]
    thw = [frames // 2, side, side]
    spg = 2 * seconds / frames
    return thw, spg, audio_tokens(layout, seconds), seconds


# --------------------------------------------------------------------------- tests

CASES = [(layout, m) for layout in GEOS for m in (30, 120, 240)]


@pytest.mark.parametrize(("layout", "minutes"), CASES)
def test_each_token_gets_the_reference_position(layout, minutes):
    """At NARU's geometry, with the reference's own patch times, every video token (in video order)
    and every audio token (in audio order) gets the reference's position, and the block holds the
    reference's token counts."""
    geo = GEOS[layout]
    thw, spg, n_audio, seconds = naru_geometry(layout, minutes)
    assert n_audio == {"qwen2_5_omni": 25, "qwen3_omni": 13}[layout] * seconds
    want_ids, want = reference(layout, thw, spg, n_audio)
    got_ids, got, delta = ours(layout, thw, reference_grid_positions(geo, thw[0], spg), [(0.0, n_audio)])
    assert len(got_ids) == len(want_ids) and got_ids.count(AUDIO) == want_ids.count(AUDIO) == n_audio
    for tok in (VIDEO, AUDIO):
        g, w = np.asarray(got_ids) == tok, np.asarray(want_ids) == tok
        assert np.array_equal(got[:, g], want[:, w])
    assert delta == got.max() + 1 - len(got_ids)
    if layout == "qwen3_omni":  # merged by time position: the reference's order and closing too
        assert got_ids == want_ids and np.array_equal(got, want)


@pytest.mark.parametrize("minutes", (30, 120, 240))
def test_qwen2_5_reference_order_is_not_time_order_with_sparse_frames(minutes):
    """The reference pairs the i-th video chunk with the i-th audio chunk: with one temporal patch
    per 56+ s, it writes patches beside audio from other minutes. Ours writes 2-s chunks in time
    order (the Qwen2.5-Omni report's layout)."""
    layout = "qwen2_5_omni"
    geo = GEOS[layout]
    thw, spg, n_audio, _ = naru_geometry(layout, minutes)
    want_ids, want = reference(layout, thw, spg, n_audio)
    got_ids, got, _ = ours(layout, thw, reference_grid_positions(geo, thw[0], spg), [(0.0, n_audio)])

    def chunk_of(ids, pos):
        block = np.isin(np.asarray(ids), (VIDEO, AUDIO))
        start = pos[0, np.asarray(ids) == ABOS][0] + 1
        return ((pos[0, block] - start) // 50).astype(int)

    assert np.all(np.diff(chunk_of(got_ids, got)) >= 0)  # ours: chunks never go back in time
    ref_chunks = chunk_of(want_ids, want)
    assert np.sum(np.diff(ref_chunks) < 0) > thw[0]  # the reference goes back in time, over and over


@pytest.mark.parametrize("layout", list(GEOS))
def test_dense_geometry_is_the_reference_exactly(layout):
    """Frames at 2 fps from time 0 and audio from 0 (what the models were trained on: every 2-s chunk
    holds video): the same tokens in the same order, the same positions, the text after included."""
    geo = GEOS[layout]
    seconds, frames = 30.0, 60
    thw, spg = [frames // 2, 8, 8], 2 * seconds / frames
    n_audio = audio_tokens(layout, seconds)
    want_ids, want = reference(layout, thw, spg, n_audio)
    got_ids, got, _ = ours(layout, thw, reference_grid_positions(geo, thw[0], spg), [(0.0, n_audio)])
    assert got_ids == want_ids
    assert np.array_equal(got, want)


@pytest.mark.parametrize(("layout", "minutes"), CASES)
def test_true_times_place_each_patch_at_its_first_frame(layout, minutes):
    """Segment-centre frames: patch k's time position is its first frame's time x the rate, so the
    spacing is the true interval and the first patch is not at 0 (the reference's: 0, one interval
    per patch early at the centre of the pair)."""
    geo = GEOS[layout]
    thw, spg, n_audio, seconds = naru_geometry(layout, minutes)
    n = thw[0] * 2
    times = (np.arange(n) + 0.5) * seconds / n  # the sampler's segment centres
    grid_t = grid_time_positions(geo, times[::2])
    rate = geo.position_id_per_seconds
    assert grid_t[0] == pytest.approx(np.floor(times[0] * rate) if geo.floors else times[0] * rate, abs=1e-3)
    spacing = np.diff(grid_t)
    assert np.all(np.abs(spacing - 2 * seconds / n * rate) <= 1.0)  # the true interval (floored: within 1)
    ref = reference_grid_positions(geo, thw[0], spg)
    early = (np.asarray(grid_t) - np.asarray(ref)) / rate  # seconds the reference puts each patch early
    assert np.all(np.abs(early - times[0]) <= 1 / rate + 1e-6)
    # a sound at the first frame of patch k and that patch share their time position
    a_t = audio_time_positions(geo, [(0.0, n_audio)])
    ids, pos, _ = ours(layout, thw, grid_t, [(0.0, n_audio)])
    audio_pos = pos[0, np.asarray(ids) == AUDIO]
    video_pos = pos[0, np.asarray(ids) == VIDEO][:: thw[1] * thw[2] // 4]
    for k in (0, thw[0] // 2, thw[0] - 1):
        j = int(times[2 * k] * rate)  # the audio token playing at that frame
        assert abs(audio_pos[j] - video_pos[k]) <= 1.0
        assert a_t[j] == j


def test_windows_keep_their_place_in_time():
    """Audio windows around sparse frames: each window's tokens start at the window's own time
    position; chunks stay in time order, with each window after its frame's patch."""
    layout = "qwen2_5_omni"
    geo = GEOS[layout]
    thw = [4, 8, 8]
    times = np.array([100.0, 110.0, 700.0, 710.0, 1500.0, 1510.0, 2900.0, 2910.0])
    grid_t = grid_time_positions(geo, times[::2])
    windows = [(98.0, 100), (698.0, 100), (1498.0, 100), (2898.0, 100)]  # 4 s each: 100 tokens
    ids, pos, _ = ours(layout, thw, grid_t, windows)
    a = np.asarray(ids) == AUDIO
    starts = pos[0, a][::100] - pos[0, np.asarray(ids) == ABOS][0] - 1
    assert starts.tolist() == [98 * 25, 698 * 25, 1498 * 25, 2898 * 25]
    order = chunk_order(geo, [t for t in grid_t for _ in range(16)], audio_time_positions(geo, windows))
    kinds = "".join(k for k, _ in order)
    assert kinds == ("a" * 50 + "v" * 16 + "a" * 50) * 4


def test_a_block_must_hold_its_tokens():
    geo = GEOS["qwen2_5_omni"]
    ids = [TEXT, VBOS, ABOS] + [VIDEO] * 15 + [AUDIO] * 3 + [AEOS, VEOS]
    with pytest.raises(ValueError, match="holds 15 of 16 video"):
        omni_positions(ids, geo, [[1, 8, 8]], [[0.0]], [[0.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match="no audio positions left"):
        omni_positions(ids, geo, [[1, 8, 8]], [[0.0]], [])


# --------------------------------------------------------------------------- the installed reference


@pytest.fixture(scope="module")
def thinkers(tmp_path_factory):
    """The tiny Qwen2.5-Omni and Qwen3-Omni thinkers (processor + model), loaded from disk."""
    from transformers import (
        AutoProcessor,
        Qwen2_5OmniThinkerForConditionalGeneration,
        Qwen3OmniMoeThinkerForConditionalGeneration,
    )

    from tests.helpers.tiny_models import build_qwen2_5_omni, build_qwen3_omni

    root = tmp_path_factory.mktemp("omni")
    out = {}
    for layout, build, cls in (
        ("qwen2_5_omni", build_qwen2_5_omni, Qwen2_5OmniThinkerForConditionalGeneration),
        ("qwen3_omni", build_qwen3_omni, Qwen3OmniMoeThinkerForConditionalGeneration),
    ):
        d = build(root / layout)
        out[layout] = (AutoProcessor.from_pretrained(d), cls.from_pretrained(d))
    return out


def processor_inputs(processor, frames, wave, fps):
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What colour?"}]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    return processor(
        text=[text],
        videos=[frames],
        audio=[wave],
        audio_from_video_indices=[0],
        load_audio_from_video=True,
        videos_kwargs={"fps": fps, "do_sample_frames": False},
        audio_kwargs={"truncation": False},
        return_tensors="pt",
    )


@pytest.mark.parametrize("layout", list(GEOS))
def test_installed_processor_and_model_agree_with_ours(thinkers, layout):
    """Dense geometry on the installed transformers: the processor's tokens are our block's, and the
    model's own ``get_rope_index`` gives our positions, token for token."""
    from naru_eval.adapters.hf.tmrope import geometry_of

    processor, model = thinkers[layout]
    geo = geometry_of(model.config, layout)
    fps, seconds = 2.0, 6.0
    frames = np.random.default_rng(0).integers(0, 255, (int(fps * seconds), 56, 56, 3), dtype=np.uint8)
    wave = np.random.default_rng(1).normal(0, 0.1, int(seconds * 16000)).astype(np.float32)
    inp = processor_inputs(processor, frames, wave, fps)
    ids = inp["input_ids"][0].tolist()
    thw = inp["video_grid_thw"][0].tolist()
    n_audio = ids.count(geo.audio_token_id)
    assert n_audio == audio_tokens(layout, seconds)
    grid_t = reference_grid_positions(geo, thw[0], float(inp["video_second_per_grid"][0]))
    a_t = audio_time_positions(geo, [(0.0, n_audio)])
    lo, hi = ids.index(geo.vision_bos_id), ids.index(geo.vision_eos_id)
    assert ids[lo + 1 : hi] == omni_block_tokens(geo, thw, grid_t, a_t)
    want, want_delta = model.get_rope_index(
        inp["input_ids"],
        video_grid_thw=inp["video_grid_thw"],
        attention_mask=inp["attention_mask"],
        use_audio_in_video=True,
        audio_seqlens=inp["feature_attention_mask"].sum(-1),
        second_per_grids=inp["video_second_per_grid"],
    )
    got, delta = omni_positions(ids, geo, [thw], [grid_t], [a_t])
    assert np.array_equal(got.numpy().astype(np.float64), want[:, 0].numpy().astype(np.float64))
    assert delta == pytest.approx(float(want_delta.reshape(-1)[0]))


def test_processor_and_config_must_agree_on_positions_per_second(tmp_path):
    """Qwen3-Omni with 25 positions a second in the config (the class's default) and 13 in the
    processor: the model's ``get_rope_index`` lays out its own interleave, so some of the
    processor's audio slots get a video token's position and video slots an audio token's, and
    the forward pass is still finite. The check refuses the pair with both numbers."""
    import torch
    from transformers import AutoConfig, AutoProcessor, Qwen3OmniMoeThinkerForConditionalGeneration

    from naru_eval.adapters.hf.tmrope import check_position_rate, geometry_of
    from tests.helpers.tiny_models import build_qwen3_omni

    d = build_qwen3_omni(tmp_path / "q3", position_id_per_seconds=25)
    processor = AutoProcessor.from_pretrained(d)
    model = Qwen3OmniMoeThinkerForConditionalGeneration.from_pretrained(d)
    with pytest.raises(ValueError, match=r"processor lays out 13 positions .* config counts 25"):
        check_position_rate(processor, model.config)
    fps, seconds = 2.0, 8.0
    frames = np.random.default_rng(0).integers(0, 255, (int(fps * seconds), 64, 64, 3), dtype=np.uint8)
    wave = np.random.default_rng(1).normal(0, 0.1, int(seconds * 16000)).astype(np.float32)
    inp = processor_inputs(processor, frames, wave, fps)
    pos, _ = model.get_rope_index(
        inp["input_ids"],
        video_grid_thw=inp["video_grid_thw"],
        attention_mask=inp["attention_mask"],
        use_audio_in_video=True,
        audio_seqlens=inp["feature_attention_mask"].sum(-1),
        second_per_grids=inp["video_second_per_grid"],
    )
    pos = pos[:, 0].numpy()
    ids = inp["input_ids"][0].numpy()
    geo = geometry_of(model.config, "qwen3_omni")
    # a slot holds an audio token's position when its three axes agree, a video token's (off the
    # first row and column of its frame) when they do not
    audio_like = (pos[0] == pos[1]) & (pos[1] == pos[2])
    video = ids == geo.video_token_id
    wrong = int(np.sum(audio_like[ids == geo.audio_token_id] == 0)) + int(
        np.sum(audio_like[video] & (pos[1][video] != pos[1][video].min()))
    )
    assert wrong > 0
    with torch.no_grad():
        assert np.isfinite(model(**inp, use_audio_in_video=True).logits.float().numpy()).all()
    agreeing = AutoConfig.from_pretrained(d)
    agreeing.position_id_per_seconds = 13
    assert check_position_rate(processor, agreeing) == 13.0
