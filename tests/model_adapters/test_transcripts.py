"""Transcripts reach every adapter kind: the HF families (interleaved between the frames by time,
or a block), the OpenAI-compatible server (through the loopback stub) and Gemini (its stub); the
default ``transcript=none`` leaves the run key and the input mode as they were; a missing
transcript stops the run before anything is computed, naming every video."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from naru_eval.adapters.args import ModelArgsError
from naru_eval.core import provenance
from naru_eval.core.transcripts import BLOCK_HEADER
from naru_eval.media.subtitles import read_subtitle_file
from naru_eval.settings import UserError
from tests.helpers.families import make, request
from tests.helpers.transcripts import check_interleaved

SRT = (
    "1\n00:00:00,100 --> 00:00:00,500\nはじめ\n\n"
    "2\n00:00:02,000 --> 00:00:02,500\nまんなか\n\n"
    "3\n00:00:03,050 --> 00:00:03,900\nつぎ\n\n"
    "4\n00:00:05,900 --> 00:00:06,000\nおわり\n"
)


@pytest.fixture
def subs(tmp_path) -> Path:
    d = tmp_path / "subs"
    d.mkdir()
    (d / "v1.srt").write_text(SRT, encoding="utf-8")
    return d


def req(video, qid="q1", prompt=None):
    r = request(video, qid=qid)._replace(doc={"question_id": qid, "video_id": "v1"})
    return r._replace(prompt=prompt) if prompt else r


def loaded(model_id, ckpt, **args):
    a = make(model_id, ckpt, **args)
    a.ensure_loaded()
    return a


@pytest.mark.parametrize("model_id", ["naru_qwen2_5_vl", "naru_qwen3_vl"])
def test_hf_interleaved_every_cue_between_its_frames(model_id, tiny_checkpoint, indexed_video, subs):
    ckpt = tiny_checkpoint(model_id)
    a = loaded(model_id, ckpt, transcript=str(subs))
    b = loaded(model_id, ckpt)
    r = req(indexed_video)
    a.transcripts.check([r])
    sampled = a.sampled(r)
    got = a.builder.build_inputs(r, sampled)
    want = b.builder.build_inputs(r, b.sampled(r))
    text = a.processor.tokenizer.decode(got["input_ids"][0])
    grid = got["video_grid_thw"]
    per_group = int(grid[0][1] * grid[0][2]) // 4
    cues = read_subtitle_file(subs / "v1.srt").cues
    slots = check_interleaved(text, cues, list(sampled.timestamps), 2, "<|video_pad|>", per_group)
    assert slots == [0, 1, 2, 3]  # before the first frame, after patch 0, after patch 1 (3.0 s), after the last
    # the frames themselves are the frames-only run's: the same pixels, patches and video tokens
    assert got["pixel_values_videos"].equal(want["pixel_values_videos"])
    assert int(grid[:, 0].sum()) == int(want["video_grid_thw"][0][0])
    pad = a.processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    assert int((got["input_ids"] == pad).sum()) == int((want["input_ids"] == pad).sum())
    if model_id == "naru_qwen3_vl":  # the timestamps written before each patch are the frames-only run's
        stamps = re.findall(r"<[\d.]+ seconds>", text)
        assert stamps == re.findall(r"<[\d.]+ seconds>", b.processor.tokenizer.decode(want["input_ids"][0]))
    else:  # Qwen2.5-VL: each chunk keeps the whole video's seconds per temporal patch
        assert got["second_per_grid_ts"].tolist() == [float(want["second_per_grid_ts"][0])] * len(grid)
    # the prefix is byte-identical across the video's questions (the shared prefix hits)
    other = req(indexed_video, "q2", "[C.1] Who speaks first?\nA. x\nB. y\nAnswer with the option's letter.")
    split1, split2 = a.generator.split_prompt(r), a.generator.split_prompt(other)
    assert split1 is not None and split2 is not None and split1[0] == split2[0]
    assert "おわり" in split1[0]
    ans = a.respond(r)
    assert ans.usage["shared_prefix_tokens"] > 0
    assert a.transcripts.usage(r)["transcript"]["cues"] == 4
    assert a.inputs.mode == "video+transcript"
    assert provenance.current("v1")["transcript"].startswith("file:v1.srt ")


def test_hf_block_before_the_question_and_transcript_only(tiny_checkpoint, indexed_video, subs):
    ckpt = tiny_checkpoint("naru_qwen2_5_vl")
    a = loaded("naru_qwen2_5_vl", ckpt, transcript=str(subs), transcript_layout="block")
    r = req(indexed_video)
    a.transcripts.check([r])
    text = a.builder.chat_text(r)
    assert (
        text.index("<|video_pad|>") < text.index(BLOCK_HEADER) < text.index("[5.9–6.0] おわり") < text.index(r.prompt)
    )
    only = loaded("naru_qwen2_5_vl", ckpt, transcript=str(subs), video="false")
    assert only.inputs.mode == "transcript"
    only.transcripts.check([r])
    inputs = only.builder.build_inputs(r, only.sampled(r))
    decoded = only.processor.tokenizer.decode(inputs["input_ids"][0])
    assert "<|video_pad|>" not in decoded and "[0.1–0.5] はじめ" in decoded and r.prompt in decoded
    assert only.respond(r).text is not None


def test_budget_cuts_cues_and_says_so(tiny_checkpoint, indexed_video, subs):
    a = loaded("naru_qwen2_5_vl", tiny_checkpoint("naru_qwen2_5_vl"), transcript=str(subs))
    a.checkpoint.context_tokens = lambda: 2048 + 12 * 3 + 20  # the frames and a cue or two
    r = req(indexed_video)
    a.transcripts.check([r])
    view = a.builder.transcript_view(r)
    record = view.record
    assert 0 < record["cues"] < 4 and record["cut"].startswith("cut to fit")
    assert record["cut"] in provenance.current("v1")["transcript"]


def test_missing_transcripts_stop_the_run_naming_every_video(tiny_checkpoint, indexed_video, subs):
    a = make("naru_qwen2_5_vl", tiny_checkpoint("naru_qwen2_5_vl"), transcript=str(subs))
    reqs = [req(indexed_video)] + [
        request(indexed_video, qid=f"x{i}")._replace(doc={"question_id": f"x{i}", "video_id": f"w{i}"})
        for i in range(2)
    ]
    with pytest.raises(UserError) as e:
        a.transcripts.check(reqs)
    assert "2 of the run's 3 videos" in str(e.value) and "'w0'" in str(e.value) and "'w1'" in str(e.value)


def test_args_are_checked_before_anything(tiny_checkpoint, subs, tmp_path):
    ckpt = tiny_checkpoint("naru_qwen2_5_vl")
    with pytest.raises(ModelArgsError, match="transcript='/no/such'"):
        make("naru_qwen2_5_vl", ckpt, transcript="/no/such")
    with pytest.raises(ModelArgsError, match="transcript_layout='zigzag'"):
        make("naru_qwen2_5_vl", ckpt, transcript=str(subs), transcript_layout="zigzag")
    with pytest.raises(ModelArgsError, match="transcript_source need transcript="):
        make("naru_qwen2_5_vl", ckpt, transcript_source="other")
    with pytest.raises(UserError, match="video=false with nothing else"):
        make("naru_qwen2_5_vl", ckpt, video="false")


def test_internvl_interleaved_every_cue_between_its_frame_lines(tiny_checkpoint, indexed_video, subs):
    ckpt = tiny_checkpoint("naru_internvl3_5")
    a = loaded("naru_internvl3_5", ckpt, transcript=str(subs))
    b = loaded("naru_internvl3_5", ckpt)
    r = req(indexed_video)
    a.transcripts.check([r])
    sampled = a.sampled(r)
    got = a.builder.build_inputs(r, sampled)
    want = b.builder.build_inputs(r, b.sampled(r))
    tok = a.processor.tokenizer
    text, plain = tok.decode(got["input_ids"][0]), tok.decode(want["input_ids"][0])
    cues = read_subtitle_file(subs / "v1.srt").cues
    per_frame = a.processor.image_seq_length
    slots = check_interleaved(text, cues, list(sampled.timestamps), 1, "<IMG_CONTEXT>", per_frame)
    times = [float(t) for t in sampled.timestamps]
    # each cue after the last frame at or before its start (none before the first frame or after the last dropped)
    assert slots == [sum(t <= c.start for t in times) for c in sorted(cues)]
    assert slots[0] == 0 and slots[-1] == len(times)
    for line in ("[0.1–0.5] はじめ", "[5.9–6.0] おわり"):
        assert f"\n{line}\n" in text  # a line of its own
    # the frames are the frames-only run's: the same pixels, count, image tokens and labels
    assert got["pixel_values"].equal(want["pixel_values"])
    assert got["pixel_values"].shape[0] == len(sampled.frames)
    ctx = a.processor.image_token_id
    assert int((got["input_ids"] == ctx).sum()) == int((want["input_ids"] == ctx).sum())
    labels = re.findall(r"Frame\d+: ", text)
    assert labels == re.findall(r"Frame\d+: ", plain) == [f"Frame{i + 1}: " for i in range(len(sampled.frames))]
    # without its cue lines the prompt is the frames-only run's
    bare = re.sub(r"\[\d+\.\d–\d+\.\d\] [^\n]*\n", "", text)
    assert bare == plain
    # the frames' budget is the processor's own expansion, counted with its tokenizer
    n = len(sampled.frames)
    assert a.builder.frame_tokens(sampled, n) == int((want["input_ids"] != -1).sum()) - len(
        tok(b.builder.chat_text(r).replace("<video>", ""), add_special_tokens=False)["input_ids"]
    )
    # the prefix is byte-identical across the video's questions (the shared prefix hits)
    other = req(indexed_video, "q2", "[C.1] Who speaks first?\nA. x\nB. y\nAnswer with the option's letter.")
    split1, split2 = a.generator.split_prompt(r), a.generator.split_prompt(other)
    assert split1 is not None and split2 is not None and split1[0] == split2[0]
    first = a.builder.processor_inputs(split1[0], sampled)
    second = a.builder.processor_inputs(split2[0], a.sampled(other))
    assert first["input_ids"].equal(second["input_ids"]) and "おわり" in tok.decode(first["input_ids"][0])
    ans = a.respond(r)
    assert ans.usage["shared_prefix_tokens"] > 0
    assert a.transcripts.usage(r)["transcript"]["layout"] == "interleaved"
    assert a.transcripts.usage(r)["transcript"]["cues"] == 4


def test_internvl_block_after_the_frames(tiny_checkpoint, indexed_video, subs):
    ckpt = tiny_checkpoint("naru_internvl3_5")
    a = loaded("naru_internvl3_5", ckpt, transcript=str(subs), transcript_layout="block")
    r = req(indexed_video)
    a.transcripts.check([r])
    text = a.processor.tokenizer.decode(a.builder.build_inputs(r, a.sampled(r))["input_ids"][0])
    assert text.rindex("</img>") < text.index(BLOCK_HEADER) < text.index("[5.9–6.0] おわり") < text.index(r.prompt)


def test_a_family_that_cannot_interleave_refuses_it(tiny_checkpoint, subs):
    ckpt = tiny_checkpoint("naru_qwen2_5_omni")
    with pytest.raises(UserError, match="transcript_layout=interleaved is not available"):
        make("naru_qwen2_5_omni", ckpt, transcript=str(subs))
    ok = make("naru_qwen2_5_omni", ckpt, transcript=str(subs), transcript_layout="block")
    assert ok.inputs.mode.endswith("+transcript")


def test_none_leaves_the_run_key_and_a_transcript_changes_it(tiny_checkpoint, subs):
    ckpt = tiny_checkpoint("naru_qwen2_5_vl")
    plain, given = make("naru_qwen2_5_vl", ckpt), make("naru_qwen2_5_vl", ckpt, transcript=str(subs))
    assert "transcript" not in plain.describe() and plain.args.variant() == "" and plain.inputs.mode == "video"
    assert given.describe()["transcript"]["layout"] == "interleaved"
    assert given.args.variant().startswith("transcript=")
    control = make("naru_qwen2_5_vl", ckpt, transcript=str(subs), transcript_source="other")
    assert control.describe()["transcript"]["control"] is True
