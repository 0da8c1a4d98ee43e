"""Each family's adapter on a tiny random checkpoint, in process: the frames the processor (or
MiniCPM-o's chat) receives are exactly the sampled ones, decoding is greedy, and a string comes
back. The answers themselves are nonsense (random weights)."""

from __future__ import annotations

import numpy as np
import pytest

from naru_eval.adapters.family import PROCESSOR
from naru_eval.adapters.hf.loading import REMOTE_CODE_CLASS
from naru_eval.adapters.request import Answer, RequestFailed
from naru_eval.core.synthetic import read_frame_index
from tests.helpers.families import ALL_FAMILIES, HF_FAMILIES, N, Spy, adapter_class, expected, make, request
from tests.helpers.times import assert_told_truly


@pytest.mark.parametrize("model_id", HF_FAMILIES)
def test_processor_gets_exactly_the_sampled_frames(model_id, tiny_checkpoint, indexed_video):
    # the per-question path (the whole prompt in one processor call); the shared prefix's own
    # processor call is checked in test_shared_prefix.py
    a = make(model_id, tiny_checkpoint(model_id), shared_prefix="false")
    assert a.model is None and a.processor is None  # nothing loads before the first request
    a.ensure_loaded()
    a.processor = Spy(a.processor)
    a.model.generate = generate = Spy(a.model.generate)

    ans = a.respond(request(indexed_video))

    assert isinstance(ans, Answer) and isinstance(ans.text, str)
    assert ans.usage["frames"] == N and ans.usage["output_tokens"] <= (a.builder.reasoning_max_new_tokens or 6)
    (args, kw, out), *more = a.processor.calls
    assert not more and not args
    a.processor = a.processor._target  # the spy's one call is the answer's
    frames, want = expected(indexed_video, a)
    (video,) = kw["videos"]
    size = a.frame_params(str(indexed_video))["size"] or (64, 64)  # the family's size, else the video's own
    assert isinstance(video, np.ndarray) and video.dtype == np.uint8 and video.shape == (N, *size, 3)
    assert np.array_equal(video, frames)
    assert [read_frame_index(f) for f in video] == want
    (meta,) = kw["video_metadata"]
    # the metadata's clock gives each frame its true time (Nemotron labels on a millisecond one)
    assert [i / meta["fps"] for i in meta["frames_indices"]] == pytest.approx([k / 10.0 for k in want])
    assert meta["duration"] == pytest.approx(6.0)
    assert kw["do_sample_frames"] is False  # the processor never re-samples
    valid = getattr(getattr(a.processor.video_processor, "valid_kwargs", None), "__annotations__", {})
    if "cap_pixels_per_frame" in valid:  # qwen-vl-utils' per-frame cap, where the processor takes it
        assert kw["cap_pixels_per_frame"] is True
    (text,) = kw["text"]
    assert "Answer with the option's letter." in text
    # the model is told each frame's (or temporal patch's) true time, as its family declares (read
    # off the model's whole inputs: the processor's and the builder's own, e.g. TMRoPE's times)
    given = a.builder.build_inputs(request(indexed_video), a.sampled(request(indexed_video)))
    assert_told_truly(a, given, np.array([k / 10.0 for k in want]), fps=10.0)

    # greedy: do_sample=False, no temperature, the task's max_new_tokens (a reasoning model: its
    # reasoning budget)
    ((), gkw, _) = generate.calls[0]
    budget = a.builder.reasoning_max_new_tokens or 6  # a reasoning family: its reasoning budget
    assert gkw["do_sample"] is False and gkw["max_new_tokens"] == budget
    assert not {"temperature", "top_p", "top_k"} & set(gkw)


def test_greedy_despite_sampling_generation_config(tiny_checkpoint, indexed_video):
    """The tiny Qwen2.5-VL checkpoint samples at temperature 2 by default: answers must not vary."""
    a = make("naru_qwen2_5_vl", tiny_checkpoint("naru_qwen2_5_vl"))
    assert a.respond(request(indexed_video)).text  # loads
    assert a.model.generation_config.do_sample is True
    texts = {a.respond(request(indexed_video, {"max_new_tokens": 12})).text for _ in range(3)}
    assert len(texts) == 1


def test_max_new_tokens_default_and_override(tiny_checkpoint, indexed_video):
    a = make("naru_qwen2_5_vl", tiny_checkpoint("naru_qwen2_5_vl"))
    r = request(indexed_video)
    assert a.generator.generation_kwargs(r._replace(gen_kwargs={}))["max_new_tokens"] == 16
    assert a.generator.generation_kwargs(r)["max_new_tokens"] == 6
    b = make("naru_qwen2_5_vl", tiny_checkpoint("naru_qwen2_5_vl"), max_new_tokens=3)
    assert b.generator.generation_kwargs(r)["max_new_tokens"] == 3
    assert b.request_key(r)[0] != a.request_key(r)[0]  # part of the run key


def test_qwen3_5_thinking_off_by_default(tiny_checkpoint, indexed_video):
    a = make("naru_qwen3_5", tiny_checkpoint("naru_qwen3_5"), shared_prefix="false")  # the whole prompt
    a.ensure_loaded()
    a.processor = Spy(a.processor)
    a.respond(request(indexed_video))
    (text,) = a.processor.calls[0][1]["text"]
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    on = make("naru_qwen3_5", tiny_checkpoint("naru_qwen3_5"), enable_thinking="true")
    assert on.builder.template_kwargs == {"enable_thinking": True}
    assert on.request_key(request(indexed_video))[0] != a.request_key(request(indexed_video))[0]


def test_minicpm_o_chat_gets_the_frames_as_pil(tiny_checkpoint, indexed_video):
    """Against the stand-in remote-code checkpoint (MiniCPM-o's chat interface, not its network)."""
    a = make("naru_minicpm_o", tiny_checkpoint("naru_minicpm_o"))
    assert a.model is None
    a.ensure_loaded()
    a.model.chat = chat = Spy(a.model.chat)
    ans = a.respond(request(indexed_video))
    assert ans.text.startswith(f"{N} frames 64x64")
    ((), kw, _) = chat.calls[0]
    (msg,) = kw["msgs"]
    *pil, prompt = msg["content"]
    frames, want = expected(indexed_video)
    assert len(pil) == N and all(p.mode == "RGB" and p.size == (64, 64) for p in pil)
    assert np.array_equal(np.stack([np.asarray(p) for p in pil]), frames)
    assert [read_frame_index(np.asarray(p)) for p in pil] == want
    assert prompt.endswith("Answer with the option's letter.")
    assert kw["tokenizer"] is a.processor
    assert kw["sampling"] is False and kw["num_beams"] == 1 and kw["repetition_penalty"] == 1.0
    assert kw["use_image_id"] is False and kw["max_slice_nums"] == 2 and kw["max_new_tokens"] == 6
    native = make("naru_minicpm_o", tiny_checkpoint("naru_minicpm_o"), native_decoding="true")
    assert not {"num_beams", "repetition_penalty"} & set(native.generator.chat_kwargs(request(indexed_video)))


@pytest.mark.parametrize("model_id", ALL_FAMILIES)
def test_blind_request_is_text_only(model_id, tiny_checkpoint, indexed_video):
    """A request with no video (the blind tasks) is answered from the text alone."""
    a = make(model_id, tiny_checkpoint(model_id))
    blind = request(indexed_video)._replace(videos=[])
    a.ensure_loaded()
    if REMOTE_CODE_CLASS in adapter_class(model_id).family.checkpoints.values():  # its own chat() builds inputs
        a.model.chat = Spy(a.model.chat)
        out = a.respond(blind)
        ((_, kwargs, _),) = a.model.chat.calls
        assert kwargs["msgs"][-1]["content"] == [blind.prompt]
    else:
        a.processor = Spy(a.processor)
        out = a.respond(blind)
        ((_, kwargs, _),) = a.processor.calls
        assert "videos" not in kwargs
    assert isinstance(out, Answer) and isinstance(out.text, str) and out.usage["frames"] == 0


@pytest.mark.parametrize("model_id", ALL_FAMILIES)
def test_unreadable_video_fails_the_request_without_loading(model_id, tiny_checkpoint, tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video" * 100)
    a = make(model_id, tiny_checkpoint(model_id))
    with pytest.raises(RequestFailed, match="bad.mp4"):
        a.respond(request(bad))
    assert a.model is None


def test_wrong_checkpoint_type_is_named(tiny_checkpoint):
    a = make("naru_qwen3_vl", tiny_checkpoint("naru_qwen2_5_vl"))
    with pytest.raises(ValueError, match="'qwen2_5_vl' checkpoint"):
        a.ensure_loaded()


@pytest.mark.parametrize("model_id", ALL_FAMILIES)
def test_frame_budgets(model_id):
    """The context-maximal budgets are documented arithmetic; num_frames= overrides the default."""
    cls = adapter_class(model_id)
    b = cls.family.budget
    assert b is not None and 64 <= b.frames <= 128
    assert b.frames * b.tokens_per_frame < b.context_tokens and b.source
    a = cls(pretrained="x", num_frames="32", store="false")
    assert (a.num_frames, a.fps) == (32, None)
    assert (b2 := cls(pretrained="x", fps="0.5", store="false")).fps == 0.5 and b2.num_frames is None


def test_every_transformers_family_has_a_tiny_checkpoint():
    """A family over a ``model_type`` tests/helpers/tiny_models.py builds gets its tiny checkpoint
    with no edit there; one over a new ``model_type`` needs its builder (else it is not tested)."""
    from naru_eval.adapters.registry import registered
    from tests.helpers.tiny_models import BUILDERS

    assert {m for m, e in registered().items() if e.checkpoints} == set(BUILDERS) == set(ALL_FAMILIES)


def test_run_key_tracks_the_checkpoint(tiny_checkpoint, indexed_video):
    a = make("naru_qwen2_5_vl", "/ckpt/a")
    b = make("naru_qwen2_5_vl", "/ckpt/b")
    r = request(indexed_video)
    assert a.request_key(r)[0] != b.request_key(r)[0]
    assert a.describe()["hf"]["pretrained"] == "/ckpt/a"
    assert a.request_key(r) == make("naru_qwen2_5_vl", "/ckpt/a", device="cuda:3").request_key(r)


HF_KEY = ["pretrained", "revision", "dtype", "max_new_tokens", "system_prompt", "template_kwargs"]
HF_KEY += ["cap_pixels_per_frame", "positions"]


@pytest.mark.parametrize(
    "model_id,args,family_keys",
    [
        ("naru_qwen2_5_vl", {}, []),
        ("naru_qwen3_vl", {"fps": "0.25", "num_frames": "none"}, ["qwen_vl_utils_sizing"]),
        ("naru_internvl3_5", {}, []),
        ("naru_nemotron_omni", {}, ["video_pruning_rate", "reasoning_budget", "frame_labels"]),
        (
            "naru_nemotron_omni",
            {"audio": "true"},
            [
                "video_pruning_rate",
                "reasoning_budget",
                "frame_labels",
                "audio",
                "video",
                "audio_sampler",
                "audio_plan",
                "audio_source",
                "derangement",
            ],
        ),  # fmt: skip
        ("naru_minicpm_o", {}, ["max_slice_nums", "use_image_id", "native_decoding"]),
    ],
)
def test_run_key_hf_part_keeps_its_fields_in_order(model_id, args, family_keys):
    """The run key is the JSON of describe(): stored answers match only while its ``hf`` part
    keeps the base's fields, then the family's, in this order."""
    desc = make(model_id, "/ckpt/a", **args).describe()
    assert list(desc) == ["model", "args", "num_frames", "fps", "max_frames", "max_pixels", "pixels", "hf"]
    assert list(desc["hf"]) == [*HF_KEY, *family_keys]


@pytest.mark.parametrize("model_id", [m for m in HF_FAMILIES if adapter_class(m).family.frames == PROCESSOR])
def test_the_processor_gets_its_reference_pixels(model_id, tiny_checkpoint, tmp_path):
    """InternVL3.5 and Nemotron-Omni resize the native frames themselves: the adapter hands their
    processor frames already at its own size, resized with its kernel, so what the model gets is
    what the processor makes of the native frames (InternVL: exactly; Nemotron: its float result
    rounded to uint8 levels, at most a few levels at hard edges). Before, the frames went through
    the sampler's pixel cap first and were resized twice."""
    from naru_eval.media.sampler import sample_frames
    from tests.helpers import video_corpus as vc

    video = vc.encode(
        tmp_path / "hd.mp4", *vc.cfr(8, 8), options=vc.x264(8), size=(320, 180), colour=(vc.BT709, vc.LIMITED),
        image=vc.colour_image,
    )  # fmt: skip
    a = make(model_id, tiny_checkpoint(model_id), num_frames=4)
    a.ensure_loaded()
    params = a.frame_params(str(video))
    assert params["max_pixels"] is None  # the family's exact size (or the native frames), never the cap

    def pixels(frames: np.ndarray) -> np.ndarray:
        out = a.processor.video_processor(videos=[frames], return_tensors="pt", do_sample_frames=False)
        return out["pixel_values_videos"].float().numpy()

    ours = pixels(sample_frames(video, **params).frames)
    reference = pixels(sample_frames(video, num_frames=4, max_pixels=None).frames)  # native size
    before = pixels(sample_frames(video, num_frames=4).frames)  # the sampler's <=448x448 cap first
    assert ours.shape == reference.shape
    err, err_before = np.abs(ours - reference).max(), np.abs(before - reference).max()
    if a.builder.resize == "uint8" or params["size"] is None:  # its processor's own uint8 arithmetic: exact
        assert err == 0, err
    else:
        # one uint8 level is 1/255 / std (~0.015 here); rounding stays within a few levels at edges
        assert err < err_before / 4, (err, err_before)


def test_nemotron_tiles_of_common_sizes_are_the_processors_fixed_points(monkeypatch):
    """At the published geometry (1024 16-px patches) the tile of every common frame size is one the
    processor keeps (it picks the same tile for a frame already at that size), so the sampler's
    frames at that tile are resized once, from the native frames."""
    from tests.helpers.families import processors_without_checkpoint

    processors_without_checkpoint(monkeypatch)
    a = make("naru_nemotron_omni", "/ckpt/none")
    for h, w in ((1080, 1920), (720, 1280), (480, 640), (480, 854), (1080, 1440), (2160, 3840), (1920, 1080)):
        tile = a.builder.tile(h, w)
        assert a.builder.tile(*tile) == tile, (h, w, tile)
    assert a.builder.tile(1080, 1920) == (384, 672)
