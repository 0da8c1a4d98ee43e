"""naru_nemotron_omni on a tiny nemotron_h_omni checkpoint: the reasoning model's answer is read
after its reasoning, the generation budget covers the reasoning, Efficient Video Sampling is the
checkpoint's (or the model arg's), and the NVFP4 checkpoint is refused with the way to run it.

The tiny checkpoint is scripted (tests/tiny_models.py): greedy decoding writes "A", "</think>",
"C", end of turn. So the reasoning holds a letter (A) and the answer another (C)."""

from __future__ import annotations

import json
import shutil

import pytest

from model_adapters.nemotron_omni import NATIVE_FRAME_PIXELS, REASONING_MAX_NEW_TOKENS, NemotronOmni
from naru_eval.adapters.hf.builder import InputBuilder
from naru_eval.adapters.request import NaruRequest
from naru_eval.core.extract import extract_answer

MODEL = "naru_nemotron_omni"


def make(path, **args) -> NemotronOmni:
    args = {"num_frames": 4, "device": "cpu", "store": "false", **args}
    return NemotronOmni(pretrained=str(path), **{k: str(v) for k, v in args.items()})


def request(video, **gen) -> NaruRequest:
    prompt = "[N.1] What colour fills segment 1?\nA. red\nB. blue\nC. green\nD. white\nAnswer with the letter."
    gk = {"max_new_tokens": 6, "until": ["\n\n"], **gen}
    return NaruRequest({"question_id": "q1"}, prompt, [str(video)], gk, "naru_mcq", 0)


def test_letter_is_read_after_the_reasoning(tiny_checkpoint, indexed_video):
    a = make(tiny_checkpoint(MODEL))
    ans = a.respond(request(indexed_video))
    # the task's "\n\n" stop cuts the answer only, never the reasoning before it
    assert ans.text == "<think>\nA\n</think>\n\nC"
    got = extract_answer(ans.text)
    assert (got.letter, got.method) == ("C", "bare")  # the A inside the reasoning never counts
    assert ans.usage["output_tokens"] == 4 and ans.usage["frames"] == 4


def test_think_is_split_on_the_token_not_the_text(tiny_checkpoint, indexed_video):
    """</think> is a special token: plain decoding (the base's) drops it and glues the reasoning's
    letter to the answer's."""
    a = make(tiny_checkpoint(MODEL))
    a.ensure_loaded()
    tok = a.processor.tokenizer
    ids = [tok.convert_tokens_to_ids(t) for t in ("A", "</think>", "C")]
    assert InputBuilder.decode(a.builder, request(indexed_video), ids) == "AC"
    assert a.builder.decode(request(indexed_video), ids).endswith("</think>\n\nC")
    # a completion that re-opens <think> itself is handled the same way
    assert a.builder.decode(request(indexed_video), [tok.convert_tokens_to_ids("<think>"), *ids]) == a.builder.decode(
        request(indexed_video), ids
    )


def test_unfinished_reasoning_is_invalid(tiny_checkpoint, indexed_video):
    a = make(tiny_checkpoint(MODEL), max_new_tokens=1)  # the budget runs out inside the reasoning
    ans = a.respond(request(indexed_video))
    assert ans.text == "<think>\nA"
    got = extract_answer(ans.text)
    assert (got.letter, got.method) == (None, "invalid:unfinished_reasoning")


def test_reasoning_budget_default_and_override(tiny_checkpoint, indexed_video):
    r = request(indexed_video)  # the task asks for 6 tokens: an answer budget
    assert make("x").generator.generation_kwargs(r)["max_new_tokens"] == REASONING_MAX_NEW_TOKENS
    assert make("x", max_new_tokens=64).generator.generation_kwargs(r)["max_new_tokens"] == 64
    off = make("x", enable_thinking="false")
    assert off.generator.generation_kwargs(r)["max_new_tokens"] == 6 and off.builder.template_kwargs == {
        "enable_thinking": False
    }
    assert off.request_key(r)[0] != make("x").request_key(r)[0]


def test_thinking_off_prompt_and_plain_answer(tiny_checkpoint, indexed_video):
    a = make(tiny_checkpoint(MODEL), enable_thinking="false")
    a.ensure_loaded()
    text = a.processor.apply_chat_template(
        a.builder.messages(request(indexed_video)),
        tokenize=False,
        add_generation_prompt=True,
        **a.builder.template_kwargs,
    )
    assert text.endswith("<|im_start|>assistant\n<think></think>")
    on = make(tiny_checkpoint(MODEL))
    on.processor = a.processor
    text_on = on.processor.apply_chat_template(
        on.builder.messages(request(indexed_video)),
        tokenize=False,
        add_generation_prompt=True,
        **on.builder.template_kwargs,
    )
    assert text_on.endswith("<|im_start|>assistant\n<think>\n")


def test_efficient_video_sampling_rate(tiny_checkpoint, indexed_video):
    a = make(tiny_checkpoint(MODEL))
    a.ensure_loaded()
    assert a.model.config.video_pruning_rate == 0.5  # the checkpoint's own setting
    b = make(tiny_checkpoint(MODEL), video_pruning_rate=0)
    b.ensure_loaded()
    assert b.model.config.video_pruning_rate == 0.0 and b.model.video_pruning_rate == 0.0
    assert b.respond(request(indexed_video)).text.endswith("C")
    assert a.request_key(request(indexed_video))[0] != b.request_key(request(indexed_video))[0]
    with pytest.raises(ValueError, match="video_pruning_rate"):
        make("x", video_pruning_rate=1.5)


def test_frames_at_the_video_tile_size():
    a = make("x")
    assert a.max_pixels == NATIVE_FRAME_PIXELS == 512 * 512
    assert make("x", max_pixels=448 * 448).max_pixels == 448 * 448


def test_nvfp4_checkpoint_is_refused_with_the_way_to_run_it(tiny_checkpoint, tmp_path):
    src = tiny_checkpoint(MODEL)
    q = tmp_path / "Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4"
    shutil.copytree(src, q)
    cfg = json.loads((q / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    (q / "config.json").write_text(json.dumps(cfg))
    a = make(q, num_frames="")  # the official NVFP4 row's sampling is the default for this name
    assert a.num_frames == 2048
    with pytest.raises(ValueError, match="naru_openai_compat") as e:
        a.ensure_loaded()
    assert "NVFP4" in str(e.value) and a.model is None


def test_wrong_checkpoint_is_named(tiny_checkpoint):
    with pytest.raises(ValueError, match="'qwen2_5_vl' checkpoint"):
        make(tiny_checkpoint("naru_qwen2_5_vl")).ensure_loaded()


@pytest.mark.parametrize(("fps", "early_s"), [(29.97, 158), (23.976, 244), (59.94, 588), (25.0, 0)])
def test_frame_labels_are_the_true_times(tiny_checkpoint, fps, early_s):
    """A 4-hour video's 128 segment-centre frames through the real processor: with the video's own
    fps in the metadata (the naive call) the processor's ``int(1000 / fps)``-ms frame duration puts
    the last label minutes early; on the adapter's millisecond clock every label is the frame's
    true time (to 1 ms, then the label's two decimals): far within one frame."""
    import re

    import numpy as np

    from naru_eval.media.plan import uniform_indices
    from naru_eval.media.sampler import SampledFrames
    from naru_eval.media.video import VideoInfo

    a = make(tiny_checkpoint(MODEL), num_frames=128)
    a.ensure_loaded()
    total = int(4 * 3600 * fps)
    idx = np.array(uniform_indices(total, 128), np.int64)
    times = idx / fps
    frames = np.zeros((128, 64, 64, 3), np.uint8)
    info = VideoInfo("v.mp4", total / fps, fps, total, 64, 64, True)
    fields = {"frames": frames, "indices": idx, "timestamps": times, "info": info, "exact": True,
              "timestamp_error_s": np.zeros(128)}  # fmt: skip
    sampled = SampledFrames(**{k: v for k, v in fields.items() if k in SampledFrames._fields})

    def labels(meta) -> np.ndarray:
        out = a.processor(text=["<video>"], videos=[frames], video_metadata=[meta], return_tensors="pt")
        text = a.processor.tokenizer.decode(out["input_ids"][0])
        return np.array([float(t) for t in re.findall(r"sampled at ([\d.]+) seconds", text)])

    naive = labels(InputBuilder.video_metadata(a.builder, sampled))
    ours = labels(a.builder.video_metadata(sampled))
    assert len(ours) == len(naive) == 128
    assert np.abs(ours - times).max() <= 0.006  # the ms clock, then the label's two decimals
    # the last frame (at 14,344 s): the naive label early by t x (1 - int(1000 / fps) x fps / 1000)
    assert times[-1] - naive[-1] == pytest.approx(times[-1] * (1 - int(1000 / fps) * fps / 1000), abs=0.01)
    assert round(times[-1] - naive[-1]) == early_s
