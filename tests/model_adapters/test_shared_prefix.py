"""The shared video prefix: the questions of one video are answered from a copy of one
prefilled prefix, and the greedy tokens equal those of the per-question path on every family's
tiny checkpoint (Qwen's M-RoPE deltas, Qwen3.5's linear-attention state, Nemotron's Mamba state
and its video-token pruning included).

Greedy ids of random weights cannot show a small numerical difference, so at long-video geometry
(a 20-minute video, the real ``tokens_per_second`` and merge sizes, a time axis far
longer than the spatial grid) the two paths are compared by their first-step float32 logits, and
the Qwen families by the position ids their language model receives."""

from __future__ import annotations

import numpy as np
import pytest

from naru_eval.adapters.hf.positions import QWEN_REFERENCE
from naru_eval.media.sampler import sample_frames
from tests.helpers.families import HF_FAMILIES, FirstStep, N, Spy, adapter_class, expected, make, reasoning_off, request

QUESTIONS = 3
#: the families whose positions are Qwen's reference M-RoPE, computed by naru-eval in both paths
QWEN_FAMILIES = [m for m in HF_FAMILIES if adapter_class(m).family.positions == QWEN_REFERENCE]
#: frames of the long video (the tiny checkpoints' frames are 56-128 px: a 2x2 to 4x4 merged grid)
LONG_FRAMES = 16


def questions(video):
    return [
        request(video, {"max_new_tokens": 10}, qid=f"q{i}")._replace(
            prompt=f"[N.{i}] What colour fills segment {i + 1}?\nA. red\nB. blue\nAnswer with the option's letter."
        )
        for i in range(QUESTIONS)
    ]


def answer_ids(adapter, reqs) -> list[list[int]]:
    """The generated token ids of each request (what decode() receives)."""
    seen: list[list[int]] = []
    decode = adapter.builder.decode

    def record(r, new_ids):
        seen.append(list(new_ids))
        return decode(r, new_ids)

    adapter.builder.decode = record
    for r in reqs:
        adapter.respond(r)
    return seen


@pytest.mark.parametrize("model_id", HF_FAMILIES)
def test_shared_prefix_equals_per_question(model_id, tiny_checkpoint, indexed_video):
    ckpt = tiny_checkpoint(model_id, raw=True)  # a scripted checkpoint's answer cannot depend on the cache
    extra = reasoning_off(model_id)
    shared = make(model_id, ckpt, **extra)
    alone = make(model_id, ckpt, shared_prefix="false", **extra)
    reqs = questions(indexed_video)
    shared.ensure_loaded()
    generate_calls = Spy(shared.model.generate)
    shared.model.generate = generate_calls

    got, want = answer_ids(shared, reqs), answer_ids(alone, reqs)

    assert got == want and all(len(g) == 10 for g in got)
    # one vision-encoder + prefix prefill for the video; each question prefilled only its suffix
    assert shared.generator.stats["prefix_prefills"] == 1 and alone.generator.stats["prefix_prefills"] == QUESTIONS
    assert shared.generator.stats["prefill_tokens"] < alone.generator.stats["prefill_tokens"]
    for _, kw, _ in generate_calls.calls:  # no pixels reach generate: the video is in the cache
        assert not any(k.startswith("pixel_values") for k in kw) and kw["cache"] is not shared.generator.prefix.cache
    if getattr(shared.model.config, "video_pruning_rate", 0):  # pruning dropped video tokens inside forward
        assert shared.generator.prefix.ids.shape[1] < shared.generator.prefix.tokens


@pytest.mark.parametrize("model_id", HF_FAMILIES)
def test_prefix_prefill_gets_exactly_the_sampled_frames(model_id, tiny_checkpoint, indexed_video):
    """The one processor call of a video holds the sampled frames and the text before the question."""
    a = make(model_id, tiny_checkpoint(model_id))
    a.ensure_loaded()
    a.processor = Spy(a.processor)
    reqs = questions(indexed_video)
    for r in reqs:
        a.respond(r)
    ((args, kw, _),) = a.processor.calls
    frames, _ = expected(indexed_video, a)
    (video,) = kw["videos"]
    assert np.array_equal(video, frames) and kw["do_sample_frames"] is False
    sampled = sample_frames(indexed_video, num_frames=N)
    meta = kw["video_metadata"][0]  # its clock gives each frame its true time (Nemotron: milliseconds)
    assert [i / meta["fps"] for i in meta["frames_indices"]] == pytest.approx([float(t) for t in sampled.timestamps])
    (text,) = kw["text"]
    full = a.builder.chat_text(reqs[0])
    assert full.startswith(text) and reqs[0].prompt not in text and full[len(text) :].startswith(reqs[0].prompt)


def test_prefix_is_built_once_per_video_and_released(tiny_checkpoint, indexed_video, tmp_path):
    from naru_eval.core.synthetic import write_indexed_video

    other = write_indexed_video(tmp_path / "w.mp4", n_frames=40, fps=10, gop=10)
    a = make("naru_qwen2_5_vl", tiny_checkpoint("naru_qwen2_5_vl"))
    for r in [*questions(indexed_video), *questions(other)]:
        a.respond(r)
    assert a.generator.stats["prefix_prefills"] == 2 and a.generator.prefix.key[0] == str(other)
    a.finish()
    assert a.generator.prefix is None


def test_video_after_the_question_falls_back(tiny_checkpoint, indexed_video):
    """A chat with the question before the video cannot share a prefix holding the video."""
    a = make("naru_qwen2_5_vl", tiny_checkpoint("naru_qwen2_5_vl"))
    a.ensure_loaded()
    r = request(indexed_video)
    assert a.generator.split_prompt(r) is not None
    video_last = a.builder.messages

    def question_first(req, with_video=True):
        msgs = video_last(req, with_video)
        msgs[-1]["content"].reverse()
        return msgs

    a.builder.messages = question_first
    assert a.generator.split_prompt(r) is None
    a.respond(r)
    assert a.generator.prefix is None and a.generator.stats["prefix_prefills"] == 1  # the per-question path


def test_shared_prefix_off_and_minicpm_never(tiny_checkpoint):
    assert make("naru_qwen3_vl", "x", shared_prefix="false").generator.shared_prefix is False
    assert make("naru_qwen3_vl", "x").generator.shared_prefix is True
    assert make("naru_minicpm_o", "x").generator.shared_prefix is False


# ------------------------------------------------------------------ long-video geometry


@pytest.fixture(scope="module")
def long_video(tmp_path_factory):
    """A 20-minute video (1,200 frames at 1 fps, 64x64): 16 frames are 75 s apart, so Qwen2.5-VL's
    time axis (2 positions a second) spans 2,100 positions against a 2x2 merged spatial grid."""
    from naru_eval.core.synthetic import write_indexed_video

    return write_indexed_video(tmp_path_factory.mktemp("long") / "20min.mp4", n_frames=1200, fps=1, gop=60)


def long_adapters(model_id, ckpt):
    extra = reasoning_off(model_id)
    out = []
    for shared in ("true", "false"):
        a = make(model_id, ckpt, num_frames=LONG_FRAMES, dtype="float32", shared_prefix=shared, **extra)
        a.ensure_loaded()
        out.append((a, FirstStep(a)))
    return out


@pytest.mark.parametrize("model_id", HF_FAMILIES)
def test_first_step_logits_equal_at_long_video_geometry(model_id, tiny_checkpoint, long_video):
    ckpt = tiny_checkpoint(model_id, raw=True)
    (shared, s_rec), (alone, a_rec) = long_adapters(model_id, ckpt)
    reqs = questions(long_video)
    for r in reqs:
        shared.respond(r)
        alone.respond(r)
    assert shared.generator.stats["prefix_prefills"] == 1 and alone.generator.stats["prefix_prefills"] == QUESTIONS
    assert len(s_rec.logits) == len(a_rec.logits) == QUESTIONS
    for got, want in zip(s_rec.logits, a_rec.logits, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert float((got - want).abs().max()) <= 1e-5


def prompt_positions(rec: FirstStep, shared: bool) -> list:
    """The M-RoPE positions (3 x L) the model got for the prompt: per question, the first forward;
    shared, the prefix prefill's then the question's (the first forward of generate)."""
    import torch

    rows = [p[1:, 0, :] for p in rec.positions if p is not None]
    return torch.cat(rows[:2], dim=1) if shared else rows[0]


@pytest.mark.parametrize("model_id", QWEN_FAMILIES)
def test_qwen_positions_are_the_reference_in_both_paths(model_id, tiny_checkpoint, long_video):
    """Both paths give the language model the same positions; the text after the video starts one
    above the largest position the video used (all three axes), and decoding continues from there."""
    import torch

    (shared, s_rec), (alone, a_rec) = long_adapters(model_id, tiny_checkpoint(model_id))
    r = questions(long_video)[0]
    shared.respond(r)
    alone.respond(r)
    got, want = prompt_positions(s_rec, True), prompt_positions(a_rec, False)
    assert torch.equal(got, want)
    ids = alone.builder.build_inputs(r, alone.sampled(r))["input_ids"][0]
    video = ids == alone.model.config.video_token_id
    last_video = int(torch.nonzero(video)[-1])
    assert int(want[:, last_video + 1].min()) == int(want[:, video].max()) + 1
    # decoding: the first new token sits one past the prompt's last position, on every axis
    first_new = a_rec.positions[1][1:, 0, 0]
    assert first_new.tolist() == [int(want[0, -1]) + 1] * 3
    if alone.family.times == "m-rope-spacing":  # seconds on the time axis: far beyond the spatial grid
        span = int(want[0, video].max() - want[0, video].min())
        assert span >= 2000 and span > 50 * int(want[1, video].max() - want[1, video].min())
