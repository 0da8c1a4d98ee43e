"""The OpenAI-compatible adapter's typed ``--model_args`` (:class:`OpenAICompatArgs`;
docs/openai_compat.md explains each): one pydantic model over the base's sampling and store args,
``extra="forbid"``, its retry args from :class:`naru_eval.api.retry.RetryArgs`, parsed by the one
parser (``naru_eval.adapters.args.parse_model_args``). The adapter (model_adapters/openai_compat.py)
keeps it whole on ``self.args``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from naru_eval.adapters.args import ANSWERS, AudioFields, Flag, SamplingArgs, SelectionFields, TranscriptFields
from naru_eval.api.retry import RetryArgs
from naru_eval.api.urls import check_endpoint
from naru_eval.providers.openai_compat.served import is_qwen_video_family

#: ``auto``: ``video`` for a Qwen-family served model, else ``frames`` (:func:`resolve_video_mode`)
VIDEO_MODES = ("auto", "video", "frames", "video_url")


def resolve_video_mode(mode: str, model: str | None) -> str:
    """``auto`` -> ``video`` for a Qwen-family served model, else ``frames``; others as given."""
    if mode != "auto":
        return mode
    return "video" if model and is_qwen_video_family(model) else "frames"


#: where the server's key comes from (never the model args, never the URL)
KEY_ENV = ("OPENAI_API_KEY",)


def check_server_url(url: str) -> str:
    """An http(s) URL without credentials (lmms-eval writes model_args into results.json)."""
    return check_endpoint(url, key_env=KEY_ENV)


class OpenAICompatArgs(RetryArgs, SelectionFields, TranscriptFields, SamplingArgs, AudioFields):
    """The OpenAI-compatible adapter's ``--model_args``; docs/openai_compat.md explains each."""

    select_refusal: ClassVar[str | None] = (
        "the server is sent one video whose frames it times by one rate (vLLM's video input), which frames chosen "
        "for the question do not have; run select= with an open-weight adapter (docs/selection.md)"
    )

    audio: Flag = Field(
        False,
        description="send the video's soundtrack as audio parts after the frames (an omni model)",
        json_schema_extra=ANSWERS,
    )
    audio_encoder: Literal["auto", "qwen2_5_omni", "qwen3_omni"] = Field(
        "auto",
        description="whose audio front end counts the audio tokens (auto: by the served name)",
        json_schema_extra=ANSWERS,
    )
    max_model_len: int | None = Field(
        None, ge=1, description="the served context the audio plan fills (else GET /models' max_model_len)"
    )

    key_env: ClassVar[tuple[str, ...]] = KEY_ENV

    model: str | None = Field(None, validate_default=True, description="the served model name (required)")
    base_url: str | None = Field(None, description="http(s)://HOST:PORT/v1 (else $OPENAI_BASE_URL)")
    video_mode: Literal["auto", "video", "frames", "video_url"] = Field(
        "auto",
        description="video: our frames as one video part; frames: JPEG image parts; video_url: one URL the "
        "server samples (auto: video for Qwen-family models, else frames)",
        json_schema_extra=ANSWERS,
    )
    video_url_prefix: str | None = Field(None, description="video_url mode: an http(s) prefix + the file's name")
    video_root: str | None = Field(None, description="video_url mode: URLs keep the path under this folder")
    jpeg_quality: int = Field(
        85, ge=1, le=100, description="JPEG quality of the frames sent", json_schema_extra=ANSWERS
    )
    max_concurrency: int = Field(8, ge=1, description="the ceiling of requests in flight (AIMD below it)")
    timeout: float = Field(300.0, ge=0, description="seconds per HTTP request")
    abort_after: int | None = Field(None, ge=1, description="stop after this many unreachable requests in a row")
    check_model: Flag = Field(True, description="check GET /models serves model before asking")
    max_images_per_prompt: int | None = Field(None, ge=1, description="the server's image limit (frames mode)")
    reasoning: Literal["auto"] | Flag = Field(
        "auto", description="a reasoning model (auto: gpt-5*, o-series)", json_schema_extra=ANSWERS
    )
    max_completion_tokens: int | None = Field(
        None, ge=1, description="reasoning models' output budget", json_schema_extra=ANSWERS
    )
    decode_workers: int = Field(0, ge=0, description="processes decoding the next videos ahead (0: decode inline)")
    decode_budget_mb: int = Field(4096, ge=1, description="decoded frames held ahead, in MiB")
    prefix_first: Flag = Field(
        True, description="ask a video's first question alone, its others once it is answered (prefix cache)"
    )

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: object) -> str:
        if v is None or not str(v).strip():
            raise ValueError("model=<served model name> is required")
        return str(v)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return None if v is None else check_server_url(v)

    @property
    def checkpoint(self) -> str | None:
        return self.model

    @field_validator("video_mode", mode="before")
    @classmethod
    def _mode(cls, v: object) -> object:
        if v is not None and v not in VIDEO_MODES:
            raise ValueError(f"must be one of {VIDEO_MODES}")
        return v

    @field_validator("reasoning", mode="before")
    @classmethod
    def _auto(cls, v: object) -> object:
        return "auto" if v is None or (isinstance(v, str) and v.strip().lower() == "auto") else v

    @model_validator(mode="after")
    def _modes(self) -> OpenAICompatArgs:
        prefix = self.video_url_prefix
        if self.video_mode == "video_url" and prefix and not prefix.startswith(("http://", "https://")):
            raise ValueError(f"video_url_prefix must be an http(s) URL, got {prefix!r}")
        if self.audio and self.video and resolve_video_mode(self.video_mode, self.model) == "video_url":
            raise ValueError(
                "audio with video_mode=video_url: the server would sample frames whose times the audio windows "
                "cannot follow; use video_mode=video (our frames as one video) or frames"
            )
        if self.max_images_per_prompt is not None and resolve_video_mode(self.video_mode, self.model) != "frames":
            raise ValueError(
                "max_images_per_prompt applies to video_mode=frames only "
                "(video mode sends one video part; in video_url mode the server samples the frames itself)"
            )
        return self
