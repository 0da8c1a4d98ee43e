"""The API adapters' typed model args (naru_eval/adapters/args.py, the one parser
``parse_model_args``): lmms-eval's strings become typed values, unset spellings mean the default
or None, and an unknown or wrong value is refused naming the adapter, the argument and the valid
names."""

from __future__ import annotations

import pytest

from model_adapters.gemini import GeminiArgs
from naru_eval.adapters.args import parse_model_args
from naru_eval.providers.openai_compat.args import OpenAICompatArgs


def test_strings_from_model_args_become_typed_values():
    args = parse_model_args(
        GeminiArgs,
        {"fps": "0.5", "audio": "false", "max_concurrency": "3", "seed": "none", "temperature": "AUTO", "store": "0"},
        "naru_gemini",
    )
    assert (args.fps, args.audio, args.max_concurrency, args.seed, args.temperature) == (0.5, False, 3, None, "auto")
    assert args.media_resolution == "default" and args.downsample_height == 360
    assert args.store is False  # the base's own, typed by the same model
    assert parse_model_args(GeminiArgs, {"media_resolution": "MEDIA_RESOLUTION_LOW"}).media_resolution == "low"
    assert parse_model_args(GeminiArgs, {"model": 3}).model == "3"  # lmms-eval turns digits into ints


def test_every_field_is_documented():
    for cls in (GeminiArgs, OpenAICompatArgs):
        undocumented = [n for n, f in cls.model_fields.items() if not f.description]
        assert undocumented == [], cls.__name__


@pytest.mark.parametrize(
    "given,message",
    [
        (
            {"max_concurrency": "0"},
            r"naru_gemini: max_concurrency='0': Input should be greater than or equal to 1",
        ),
        ({"audio": "maybe"}, r"naru_gemini: audio='maybe': must be true or false"),
        ({"thinking_level": "extreme"}, r"naru_gemini: thinking_level='extreme': must be one of"),
        ({"downsample_factor": "0.5"}, r"naru_gemini: downsample_factor='0.5': must be >= 1"),
        ({"fps": "30"}, r"naru_gemini: fps='30': must be in \(0, 24\]"),
        ({"fsp": "1"}, r"naru_gemini: unknown model_args \['fsp'\]; valid: model, fps, media_resolution, .*store"),
    ],
)
def test_wrong_values_are_refused_by_name(given, message):
    with pytest.raises(ValueError, match=message):
        parse_model_args(GeminiArgs, given, "naru_gemini")


def test_every_problem_is_named_at_once():
    with pytest.raises(ValueError) as e:
        parse_model_args(GeminiArgs, {"fsp": "1", "fps": "30", "audio": "maybe", "num_frames": "8"}, "naru_gemini")
    msg = str(e.value)
    assert msg.startswith("naru_gemini: unknown model_args ['fsp', 'num_frames']")
    for part in ("Gemini samples the uploaded video itself", "fps='30'", "audio='maybe'"):
        assert part in msg, (part, msg)


def test_openai_compat_rules():
    with pytest.raises(
        ValueError, match="naru_openai_compat: jpeg_quality='101': Input should be less than or equal to 100"
    ):
        parse_model_args(OpenAICompatArgs, {"model": "m", "jpeg_quality": "101"}, "naru_openai_compat")
    with pytest.raises(ValueError, match="video_mode=frames only"):
        parse_model_args(
            OpenAICompatArgs,
            {"model": "m", "video_mode": "video_url", "max_images_per_prompt": "4"},
            "naru_openai_compat",
        )
    with pytest.raises(ValueError, match="naru_openai_compat: model=<served model name> is required"):
        parse_model_args(OpenAICompatArgs, {}, "naru_openai_compat")
    args = parse_model_args(OpenAICompatArgs, {"model": "m", "reasoning": "true", "abort_after": "None"})
    assert args.reasoning is True and args.abort_after is None
