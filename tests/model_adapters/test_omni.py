"""The Qwen-Omni adapters with the soundtrack (tiny thinkers, no weights): on a fixture whose audio
starts 0.46 s late, with beeps at 1.5, 5.5 and 9.5 s and colour changes at 4 and 8 s
(tests/helpers/soundtrack.py), each beep reaches the model at its expected time position, frames
are spaced by their true interval, token counts match the audio plan, the two prompt paths give the
same first-step logits, a silent file stops the run, and the control hears another video."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from naru_eval.adapters.request import NaruRequest, RequestFailed
from tests.helpers.families import FirstStep, make, request
from tests.helpers.soundtrack import Soundtrack, silent, write
from tests.helpers.tiny_models import build_qwen2_5_omni, build_qwen3_omni

FAMILIES = {"naru_qwen2_5_omni": build_qwen2_5_omni, "naru_qwen3_omni": build_qwen3_omni}
SPEC = Soundtrack(seconds=12.0, audio_start_s=0.48)
FRAMES = 8


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    root = tmp_path_factory.mktemp("omni_ckpt")
    built: dict[str, object] = {}

    def get(model_id: str):
        if model_id not in built:
            built[model_id] = FAMILIES[model_id](root / model_id)
        return built[model_id]

    return get


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("omni_videos")
    return {
        "late": write(root / "late.mp4", SPEC),
        "other": write(root / "other.mp4", replace(SPEC, beeps=(3.0, 7.0), audio_start_s=0.0, seconds=11.0)),
        "silent": silent(root / "silent.mp4", SPEC),
        "long": write(
            root / "long.mp4", replace(SPEC, seconds=60.0, beeps=(7.0, 31.0, 52.0), colour_changes=(20.0, 40.0))
        ),
    }


def omni(model_id, ckpt, **args):
    return make(model_id, ckpt(model_id), num_frames=FRAMES, audio="true", **args)


def windowed(model_id, ckpt, clip, **args):
    """An adapter whose context (the tiny thinkers' 4,096 tokens) leaves room for 60 % of the
    soundtrack of ``clip`` beside its frames: the plan takes windows."""
    probe = omni(model_id, ckpt)
    probe.ensure_loaded()
    r = request(clip)
    sampled = probe.sampled(r)
    full = probe.encoder.clip_tokens(float(sampled.info.duration_s))
    reserve = probe.context_tokens() - probe.frame_tokens_of(sampled) - int(0.6 * full)
    return omni(model_id, ckpt, audio_reserve_tokens=reserve, **args)


def inputs_of(a, video):
    a.ensure_loaded()
    r = request(video)
    return r, a.builder.build_inputs(r, a.sampled(r))


def beep_frames(features, mask) -> list[int]:
    """Mel frames where a beep starts in the clip (the log-mel energy leaves the silence floor)."""
    n = int(mask.sum())
    energy = features[0, :, :n].float().numpy().max(axis=0)
    loud = energy > energy.min() + 0.5
    return [int(i) for i in np.flatnonzero(loud[1:] & ~loud[:-1]) + 1]


@pytest.mark.parametrize("model_id", list(FAMILIES))
def test_each_beep_lands_at_its_time_position(model_id, ckpt, videos):
    a = omni(model_id, ckpt)
    _, inp = inputs_of(a, videos["late"])
    geo = a.builder.geometry()
    rate = geo.position_id_per_seconds
    starts = beep_frames(inp["input_features"], inp["feature_attention_mask"])
    assert [f / 100 for f in starts] == pytest.approx(list(SPEC.beeps), abs=0.02)  # the late start honoured
    ids = inp["input_ids"][0]
    pos = a.builder.position_ids(inp["input_ids"], inp)[1:, 0].float()
    audio = ids == geo.audio_token_id
    block = int(pos[0, ids == geo.audio_bos_id][0]) + 1  # the block starts after <|audio_bos|>
    audio_t = pos[0, audio] - block
    assert bool((pos[0, audio] == pos[1, audio]).all() and (pos[1, audio] == pos[2, audio]).all())
    for beep, f in zip(SPEC.beeps, starts, strict=True):
        # the token its mel frame becomes: Qwen2.5-Omni 4 mel frames a token; Qwen3-Omni 13 per 100
        j = f // 4 if model_id == "naru_qwen2_5_omni" else (f // 100) * 13 + int((f % 100) * 13 / 100)
        assert abs(float(audio_t[j]) - beep * rate) <= 1.0
        assert abs(float(audio_t[j]) - (beep - 0.458) * rate) > 0.4 * rate - 1  # where a late start lost would put it


@pytest.mark.parametrize("model_id", list(FAMILIES))
def test_frames_are_spaced_by_their_true_interval(model_id, ckpt, videos):
    a = omni(model_id, ckpt)
    r, inp = inputs_of(a, videos["late"])
    geo = a.builder.geometry()
    sampled = a.sampled(r)
    ids = inp["input_ids"][0]
    pos = a.builder.position_ids(inp["input_ids"], inp)[1:, 0].float()
    video = ids == geo.video_token_id
    per = int(video.sum()) // (FRAMES // 2)
    block = int(pos[0, ids == geo.audio_bos_id][0]) + 1  # the block starts after <|audio_bos|>
    grid_t = (pos[0, video][::per] - block).numpy()
    want = sampled.timestamps[::2] * geo.position_id_per_seconds
    assert np.allclose(grid_t, np.floor(want) if geo.floors else want, atol=1e-3)
    # a frame after the colour change at 4.0 s sits after the audio of 4.0 s
    assert np.all((grid_t >= 4.0 * geo.position_id_per_seconds) == (sampled.timestamps[::2] >= 4.0))


@pytest.mark.parametrize("model_id", list(FAMILIES))
def test_token_counts_match_the_plan(model_id, ckpt, videos):
    a = omni(model_id, ckpt)
    r, inp = inputs_of(a, videos["late"])
    plan = a.audio_plan(a.sampled(r), 0)
    ids = inp["input_ids"][0]
    assert int((ids == a.builder.geometry().audio_token_id).sum()) == plan.tokens == a.encoder.clip_tokens(SPEC.seconds)
    t, h, w = (int(x) for x in inp["video_grid_thw"][0])
    assert int((ids == a.builder.geometry().video_token_id).sum()) == t * h * w // 4
    ans = a.respond(r)
    assert ans.usage["audio"]["tokens"] == plan.tokens and ans.usage["audio"]["mode"] == "full"
    assert ans.usage["audio"]["covered_s"] == pytest.approx(SPEC.seconds - 0.458, abs=0.02)


@pytest.mark.parametrize("model_id", list(FAMILIES))
def test_windows_around_the_frames_when_the_track_does_not_fit(model_id, ckpt, videos):
    a = windowed(model_id, ckpt, videos["long"])
    r, inp = inputs_of(a, videos["long"])
    plan = a.audio_plan(a.sampled(r), 0)
    assert not plan.full and plan.window_s is not None and plan.window_s % a.encoder.block_s == 0
    assert int((inp["input_ids"][0] == a.builder.geometry().audio_token_id).sum()) == plan.tokens
    assert len(inp["feature_attention_mask"]) == len(plan.windows)  # one clip per window
    pos = a.builder.position_ids(inp["input_ids"], inp)[1:, 0].float()
    audio_t = pos[0, inp["input_ids"][0] == a.builder.geometry().audio_token_id]
    assert float(audio_t.min()) > 0 or plan.windows[0][0] == 0  # the first window keeps its own start
    rec = a.respond(r).usage["audio"]
    assert rec["mode"] == "windows" and rec["seconds"] == plan.seconds and rec["coverage"] < 1


@pytest.mark.parametrize("model_id", list(FAMILIES))
def test_audio_only_hears_the_frames_windows(model_id, ckpt, videos):
    both = windowed(model_id, ckpt, videos["long"])
    alone = windowed(model_id, ckpt, videos["long"], video="false")
    r, with_frames = inputs_of(both, videos["long"])
    _, audio_only = inputs_of(alone, videos["long"])
    assert alone.provenance()["input_mode"] == "audio" and both.provenance()["input_mode"] == "video+audio"
    assert "pixel_values_videos" not in audio_only
    plan = both.audio_plan(both.sampled(r), 0)
    assert not plan.full and plan.windows == alone.audio_plan(alone.sampled(r), 0).windows
    assert np.array_equal(audio_only["input_features"].numpy(), with_frames["input_features"].numpy())
    assert alone.respond(r).usage["frames"] == 0


@pytest.mark.parametrize("model_id", list(FAMILIES))
def test_shared_prefix_gives_the_per_question_logits(model_id, ckpt, videos):
    """Frames and soundtrack in the prefix: float32 first-step logits and positions equal."""
    runs = []
    for shared in ("true", "false"):
        a = omni(model_id, ckpt, dtype="float32", shared_prefix=shared)
        a.ensure_loaded()
        runs.append((a, FirstStep(a)))
    (shared, s_rec), (alone, a_rec) = runs
    reqs = [
        request(videos["late"], {"max_new_tokens": 4}, qid=f"q{i}")._replace(prompt=f"Question {i}?") for i in range(3)
    ]
    for r in reqs:
        shared.respond(r)
        alone.respond(r)
    assert shared.generator.stats["prefix_prefills"] == 1 and alone.generator.stats["prefix_prefills"] == 3
    for got, want in zip(s_rec.logits, a_rec.logits, strict=True):
        assert float((got - want).abs().max()) <= 1e-5


def test_a_silent_video_stops_the_run_before_any_answer(ckpt, videos):
    a = omni("naru_qwen2_5_omni", ckpt)
    reqs = [request(videos["late"]), request(videos["silent"], qid="q2")]
    with pytest.raises(ValueError, match="1 of the run's 2 videos have no usable audio track") as e:
        a.prepare(reqs)
    assert str(videos["silent"]) in str(e.value) and a.model is None  # nothing was loaded
    make("naru_qwen2_5_omni", ckpt("naru_qwen2_5_omni"), num_frames=FRAMES).prepare(reqs[1:])  # audio=false: fine


def test_the_control_hears_another_video(ckpt, videos):
    a = omni("naru_qwen2_5_omni", ckpt, audio_source="other")
    reqs = [request(videos["late"]), request(videos["other"], qid="q2")]
    a.derange(reqs)  # what generate_until does with every request of the run
    assert a._audio_from == {str(videos["late"]): str(videos["other"]), str(videos["other"]): str(videos["late"])}
    _, inp = inputs_of(a, videos["late"])
    starts = beep_frames(inp["input_features"], inp["feature_attention_mask"])
    assert [f / 100 for f in starts] == pytest.approx([3.0, 7.0], abs=0.02)  # the other video's beeps
    ans = a.respond(reqs[0])
    assert ans.usage["audio"]["from_video"] == str(videos["other"])
    assert a.describe()["hf"]["derangement"] and a.provenance()["variant"] == "audio_source=other"


def test_processor_and_config_must_agree(tmp_path, videos):
    d = build_qwen3_omni(tmp_path / "q3_25", position_id_per_seconds=25)
    a = make("naru_qwen3_omni", d, num_frames=FRAMES, audio="true")
    with pytest.raises(ValueError, match=r"13 positions per second .* config counts 25"):
        a.ensure_loaded()


def test_a_published_checkpoint_loads_its_thinker(tmp_path, ckpt, videos):
    """The published layout (the full model's config, the thinker's weights under ``thinker.``)
    loads the thinker alone, to the same logits as the thinker-only checkpoint."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file
    from transformers import Qwen2_5OmniConfig

    thinker = ckpt("naru_qwen2_5_omni")
    full = tmp_path / "full"
    shutil.copytree(thinker, full)
    config = json.loads((full / "config.json").read_text())
    (full / "config.json").write_text(
        Qwen2_5OmniConfig(thinker_config=config, enable_audio_output=False).to_json_string()
    )
    weights = load_file(str(thinker / "model.safetensors"))
    save_file({f"thinker.{k}": v for k, v in weights.items()}, str(full / "model.safetensors"))
    runs = []
    for path in (thinker, full):
        a = make("naru_qwen2_5_omni", path, num_frames=FRAMES, audio="true", dtype="float32")
        a.ensure_loaded()
        runs.append((a, FirstStep(a)))
    for a, _ in runs:
        a.respond(request(videos["late"]))
    (_, first), (_, second) = runs
    assert float((first.logits[0] - second.logits[0]).abs().max()) == 0.0


def test_video_without_frames_or_audio_is_refused(ckpt):
    with pytest.raises(ValueError, match="leave the model nothing"):
        make("naru_qwen2_5_omni", ckpt("naru_qwen2_5_omni"), audio="false", video="false")


def test_an_unplannable_video_fails_its_request(ckpt, videos):
    a = omni("naru_qwen2_5_omni", ckpt, audio_reserve_tokens=4090)
    r: NaruRequest = request(videos["late"])
    with pytest.raises(RequestFailed, match="even one 2-s window per frame"):
        a.respond(r)
