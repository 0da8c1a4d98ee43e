"""The API adapters' typed model args (model_adapters/args.py AdapterArgs): lmms-eval's strings
become typed values, unset spellings mean the default or None, and an unknown or wrong value is
refused naming the adapter, the argument and the valid names."""

from __future__ import annotations

import pytest

from model_adapters.gemini import GeminiArgs
from model_adapters.openai_compat_args import OpenAICompatArgs


def test_strings_from_model_args_become_typed_values():
    args, rest = GeminiArgs.parse(
        "naru_gemini",
        {"fps": "0.5", "audio": "false", "max_concurrency": "3", "seed": "none", "temperature": "AUTO", "store": "0"},
        passthrough=("store",),
    )
    assert (args.fps, args.audio, args.max_concurrency, args.seed, args.temperature) == (0.5, False, 3, None, "auto")
    assert args.media_resolution == "default" and args.downsample_height == 360
    assert rest == {"store": "0"}  # the base's own, passed through untouched
    assert GeminiArgs.parse("naru_gemini", {"media_resolution": "MEDIA_RESOLUTION_LOW"})[0].media_resolution == "low"
    assert GeminiArgs.parse("naru_gemini", {"model": 3})[0].model == "3"  # lmms-eval turns digits into ints


def test_every_field_is_documented():
    for cls in (GeminiArgs, OpenAICompatArgs):
        undocumented = [n for n, f in cls.model_fields.items() if not f.description]
        assert undocumented == [], cls.__name__


@pytest.mark.parametrize(
    "given,message",
    [
        (
            {"max_concurrency": "0"},
            r"naru_gemini: max_concurrency: Input should be greater than or equal to 1, got '0'",
        ),
        ({"audio": "maybe"}, r"naru_gemini: audio: Input should be a valid boolean"),
        ({"thinking_level": "extreme"}, r"naru_gemini: thinking_level must be one of"),
        ({"downsample_factor": "0.5"}, r"naru_gemini: downsample_factor must be >= 1"),
        ({"fps": "30"}, r"naru_gemini: fps must be in \(0, 24\]"),
        ({"fsp": "1"}, r"naru_gemini: unknown model_args \['fsp'\]; known: model, fps, media_resolution, .*store"),
    ],
)
def test_wrong_values_are_refused_by_name(given, message):
    with pytest.raises(ValueError, match=message):
        GeminiArgs.parse("naru_gemini", given, passthrough=("response_store", "store"))


def test_openai_compat_rules():
    with pytest.raises(ValueError, match="naru_openai_compat: jpeg_quality: Input should be less than or equal to 100"):
        OpenAICompatArgs.parse("naru_openai_compat", {"model": "m", "jpeg_quality": "101"})
    with pytest.raises(ValueError, match="video_mode=frames only"):
        OpenAICompatArgs.parse(
            "naru_openai_compat", {"model": "m", "video_mode": "video_url", "max_images_per_prompt": "4"}
        )
    with pytest.raises(ValueError, match="naru_openai_compat: model=<served model name> is required"):
        OpenAICompatArgs.parse("naru_openai_compat", {})
    args, _ = OpenAICompatArgs.parse("naru_openai_compat", {"model": "m", "reasoning": "true", "abort_after": "None"})
    assert args.reasoning is True and args.abort_after is None
