"""The audio plan: token counts are the processors' own, the full track when it fits, windows around
the frames when it does not (the longest that fit), and a refusal with the numbers, never a cut."""

from __future__ import annotations

import numpy as np
import pytest

from naru_eval.media.audio_plan import (
    MINICPM_O,
    NEMOTRON_OMNI,
    QWEN2_5_OMNI,
    QWEN3_OMNI,
    AudioPlanError,
    frame_windows,
    parakeet_tokens,
    plan_audio,
    qwen2_5_omni_tokens,
    qwen3_omni_tokens,
    window_tokens,
)

SECONDS = (1.0, 2.0, 2.5, 16.0, 61.3, 400.0)


@pytest.mark.parametrize("seconds", SECONDS)
def test_qwen_token_counts_are_the_processors(seconds):
    """The Whisper features of a clip (truncation off), through each processor's own length formula."""
    from transformers import WhisperFeatureExtractor
    from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import (
        _get_feat_extract_output_lengths as qwen2_5,
    )
    from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import (
        _get_feat_extract_output_lengths as qwen3,
    )

    n = round(seconds * 16000)
    fe = WhisperFeatureExtractor(feature_size=128)
    feats = fe(
        [np.zeros(n, np.float32)], sampling_rate=16000, truncation=False, padding=True, return_attention_mask=True
    )
    frames = int(feats["attention_mask"].sum())
    assert qwen2_5_omni_tokens(n) == int(qwen2_5(np.array(frames)))
    assert qwen3_omni_tokens(n) == int(qwen3(np.array(frames), 50))


@pytest.mark.parametrize("seconds", SECONDS)
def test_parakeet_token_count_is_the_processors(seconds):
    from tests.helpers.tiny_models import nemotron_processor, train_tokenizer

    proc = nemotron_processor(train_tokenizer(["<|endoftext|>", "<|im_end|>", "<so_embedding>"]), patches=16)
    assert parakeet_tokens(round(seconds * 16000)) == proc._estimate_audio_num_embeddings(round(seconds * 16000))


def test_qwen2_5_omni_processor_truncates_at_300_s_by_default():
    """The processor's default cuts audio at 30,000 mel frames (300 s) with no warning: 400 s give
    7,500 tokens, not 10,000. The plan counts 10,000 and the adapters pass truncation off."""
    from transformers import WhisperFeatureExtractor
    from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import Qwen2_5OmniProcessor

    fe = WhisperFeatureExtractor(feature_size=128, chunk_length=300, n_samples=300 * 16000, nb_max_frames=30000)
    n = 400 * 16000
    kwargs = {**Qwen2_5OmniProcessor.audio_kwargs, "padding": "max_length"}
    default = fe([np.zeros(n, np.float32)], **kwargs)
    untruncated = fe([np.zeros(n, np.float32)], **kwargs, truncation=False)
    assert int(qwen2_5_omni_tokens(int(default["attention_mask"].sum()) * 160)) == 7500
    assert qwen2_5_omni_tokens(n) == 10_000 == qwen2_5_omni_tokens(int(untruncated["attention_mask"].sum()) * 160)


@pytest.mark.parametrize(
    ("encoder", "want"),
    [
        (QWEN2_5_OMNI, (45_000, 180_000, 360_000)),
        (QWEN3_OMNI, (23_400, 93_600, 187_200)),
        (NEMOTRON_OMNI, (22_502, 90_006, 180_012)),  # in 1,200-s clips: 15,001 tokens a clip
        (MINICPM_O, (48_600, 194_400, 388_800)),
    ],
)
def test_whole_soundtracks_at_naru_lengths(encoder, want):
    assert tuple(window_tokens(encoder, [(0.0, m * 60.0)]) for m in (30, 120, 240)) == want


def test_the_full_track_when_it_fits():
    plan = plan_audio(NEMOTRON_OMNI, 1800.0, [10.0, 900.0], budget_tokens=200_000)
    assert plan.full and plan.windows == ((0.0, 1800.0),) and plan.coverage == 1.0
    assert plan.record() == {"mode": "full", "seconds": 1800.0, "tokens": 22_502, "coverage": 1.0,
                             "window_s": None, "windows": 1}  # fmt: skip


@pytest.mark.parametrize("minutes", (30, 120, 240))
def test_windows_around_the_frames_when_it_does_not(minutes):
    """Qwen2.5-Omni, 32,768-token context, 128 frames of 128 tokens and a 2,048-token reserve: the
    longest whole-block window per frame whose tokens fit, centred on each frame."""
    duration = minutes * 60.0
    times = (np.arange(128) + 0.5) * duration / 128
    budget = 32_768 - 128 * 128 - 2048
    plan = plan_audio(QWEN2_5_OMNI, duration, times.tolist(), budget)
    assert not plan.full and plan.tokens <= budget
    longer = frame_windows(times, plan.window_s + QWEN2_5_OMNI.block_s, duration, QWEN2_5_OMNI.block_s)
    assert window_tokens(QWEN2_5_OMNI, longer) > budget  # one block more would not fit
    assert plan.window_s == 4.0 and len(plan.windows) == 128 and plan.seconds == 512.0
    assert plan.tokens == 128 * 100 and plan.coverage == pytest.approx(512.0 / duration)
    for (a, b), t in zip(plan.windows, times, strict=True):
        assert a <= t < b and a % 2 == 0 and abs((a + b) / 2 - t) <= QWEN2_5_OMNI.block_s / 2


def test_windows_that_meet_are_merged_and_stay_inside_the_video():
    plan = plan_audio(QWEN3_OMNI, 60.0, [0.5, 3.0, 59.5], budget_tokens=300)
    assert plan.windows[0][0] == 0.0 and plan.windows[-1][1] == 60.0
    assert all(b1 < a2 for (_, b1), (a2, _) in zip(plan.windows, plan.windows[1:], strict=False))
    assert plan.tokens == window_tokens(QWEN3_OMNI, plan.windows) <= 300


def test_refused_with_the_numbers_when_nothing_fits():
    with pytest.raises(AudioPlanError) as e:
        plan_audio(QWEN2_5_OMNI, 7200.0, list(range(0, 7200, 56)), budget_tokens=1_000, video="v017")
    msg = str(e.value)
    assert "v017" in msg and "180,000 tokens" in msg and "1,000" in msg and "2-s window per frame" in msg
    with pytest.raises(AudioPlanError, match="without frames"):
        plan_audio(QWEN2_5_OMNI, 7200.0, [], budget_tokens=1_000)


def test_a_fixed_window_is_checked_too():
    plan = plan_audio(QWEN2_5_OMNI, 600.0, [100.0, 300.0], budget_tokens=10_000, window_s=10.0)
    assert plan.window_s == 10.0 and plan.seconds == 20.0 and plan.tokens == 500
    with pytest.raises(AudioPlanError, match="audio_window_s=100"):
        plan_audio(QWEN2_5_OMNI, 600.0, [100.0, 300.0], budget_tokens=1_000, window_s=100.0)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 155])
def test_the_control_is_a_derangement_of_similar_lengths(n):
    from naru_eval.media.audio_plan import derangement, derangement_key

    rng = np.random.default_rng(n)
    durations = {f"v{i:03d}": float(rng.uniform(1800, 14400)) for i in range(n)}
    m = derangement(durations)
    assert sorted(m) == sorted(m.values()) == sorted(durations)  # a permutation
    assert all(k != v for k, v in m.items())  # nobody hears their own video
    assert derangement(dict(reversed(list(durations.items())))) == m  # order of the input does not matter
    assert derangement_key(m) == derangement_key(dict(m))
    ranks = {v: i for i, v in enumerate(sorted(durations, key=durations.get))}
    assert all(abs(ranks[k] - ranks[v]) <= 2 for k, v in m.items())  # a neighbour in length
    with pytest.raises(ValueError, match="at least two"):
        derangement({"v0": 1.0})
