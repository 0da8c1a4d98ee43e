"""GLM-4.1V / GLM-4.5V: its input is its processor's own video path (the native frames resized by
its video processor, timestamps from the frames' true times), and a Thinking checkpoint's output
is read as its reference reads it: the answer inside ``<answer>``, never the reasoning; a reasoning
the budget cut is invalid. On the tiny GLM-4.1V (tests/helpers/tiny_models.py), scripted to write
``<think>A</think><answer>C</answer>``."""

from __future__ import annotations

import re

import numpy as np
import pytest

from naru_eval.core.extract import extract_answer
from naru_eval.media.sampler import sample_frames
from tests.helpers import video_corpus as vc
from tests.helpers.families import make, request

GLM = "naru_glm4v"


@pytest.fixture(scope="module")
def hd_video(tmp_path_factory):
    """A 720p-shaped (16:9) 12-s video at 10 fps: the processor's size differs from the 448 cap's."""
    return vc.encode(
        tmp_path_factory.mktemp("glm") / "hd.mp4", *vc.cfr(120, 10), options=vc.x264(10), size=(320, 180),
        colour=(vc.BT709, vc.LIMITED), image=vc.colour_image,
    )  # fmt: skip


@pytest.mark.parametrize("frames", [4, 8])
def test_its_input_is_its_processors_own_video_path(tiny_checkpoint, hd_video, frames):
    """The model's inputs equal what its processor makes of the native frames with their
    metadata: the same pixels (its smart_resize size, its arithmetic), the same token sequence
    (a ``<|end_of_image|>t`` timestamp per temporal patch), the same grid."""
    a = make(GLM, tiny_checkpoint(GLM), num_frames=frames)
    a.ensure_loaded()
    r = request(hd_video)
    ours = a.builder.build_inputs(r, a.sampled(r))
    native = sample_frames(hd_video, num_frames=frames, max_pixels=None)  # the file's own frames
    assert native.frames.shape[1:3] == (180, 320)
    text = a.builder.chat_text(r)
    theirs = a.processor(
        text=[text], videos=[native.frames], video_metadata=[a.builder.video_metadata(native)],
        do_sample_frames=False, return_tensors="pt",
    )  # fmt: skip
    assert ours["video_grid_thw"].tolist() == theirs["video_grid_thw"].tolist()
    assert ours["input_ids"].tolist() == theirs["input_ids"].tolist()
    assert np.array_equal(ours["pixel_values_videos"].numpy(), theirs["pixel_values_videos"].numpy())
    size = a.frame_params(str(hd_video))["size"]
    assert size is not None and size != (180, 320)  # delivered at the processor's size, not the cap's
    stamps = [int(t) for t in native.timestamps[::2]]
    decoded = a.processor.tokenizer.decode(ours["input_ids"][0])
    assert [int(x) for x in re.findall(r"<\|end_of_image\|>(\d+)", decoded)] == stamps


def test_the_answer_is_read_inside_answer_never_from_the_reasoning(tiny_checkpoint, indexed_video):
    a = make(GLM, tiny_checkpoint(GLM))
    text = a.respond(request(indexed_video)).text
    assert text == "<think>\nA\n</think>\n\nC"  # the scripted "A" is reasoning, "C" the answer
    assert extract_answer(text).letter == "C"
    assert a.builder.reasoning_max_new_tokens == 8192  # the reasoning's budget, not the task's 6


def test_a_reasoning_cut_by_the_budget_is_invalid(tiny_checkpoint, indexed_video):
    a = make(GLM, tiny_checkpoint(GLM), max_new_tokens=2)  # "<think>", "A": the budget ends inside
    text = a.respond(request(indexed_video)).text
    assert text == "<think>\nA"
    got = extract_answer(text)
    assert not got.valid and got.method == "invalid:unfinished_reasoning"


def test_reasoning_off_and_a_response_without_reasoning(tiny_checkpoint, indexed_video):
    """``enable_thinking=false``: GLM-4.5V's template closes an empty reasoning in the prompt and the
    task's budget applies; a response that opens no ``<think>`` is read as it is (its answer tag)."""
    off = make(GLM, tiny_checkpoint(GLM), enable_thinking="false", shared_prefix="false")
    off.ensure_loaded()
    r = request(indexed_video)
    assert off.builder.chat_text(r).endswith("<|assistant|>\n<think></think>")
    assert off.generator.generation_kwargs(r)["max_new_tokens"] == 6
    tok = off.processor.tokenizer
    ids = tok("<answer>B</answer>", add_special_tokens=False)["input_ids"]
    assert off.builder.decode(r, ids) == "B"
    plain = tok("The answer is D.", add_special_tokens=False)["input_ids"]
    assert off.builder.decode(r, plain) == "The answer is D."
    assert make(GLM, "x").request_key(r)[0] != off.request_key(r)[0]  # the switch is in the run key


def test_answer_tags_that_are_plain_text():
    """A tokenizer without ``<answer>`` as a token of its own: the tag is read in the text."""
    from naru_eval.adapters.hf.reasoning import answer_tag

    assert answer_tag("so <answer> B </answer> done") == "B"
    assert answer_tag("<answer>C") == "C"  # cut inside the answer: what it wrote
    assert answer_tag("no tag: D") == "no tag: D"
