"""Every adapter's ``--model_args``: one typed model per adapter and the one parser.

lmms-eval hands model args over as strings. An adapter declares its args as a pydantic model (a
subclass of :class:`AdapterArgs`: ``extra="forbid"``, frozen, no inf or nan) and the base
(``naru_eval.adapters.base.NaruModel``) turns the keyword arguments into it with
:func:`parse_model_args`: one error that names the adapter and every problem at once (an unknown
name lists the valid ones; a bad value names the argument and the value). Values that mean
"unset" (``none``, ``null``, empty) fall back to the field's default; flags are :data:`Flag`
(``1/true/yes/on`` / ``0/false/no/off``, ``naru_eval.settings.parse_flag``, the same parser as the
environment's). Secrets are refused: lmms-eval records ``model_args`` in ``results.json``, so a
key must come from the environment (:attr:`AdapterArgs.key_env` names where).

The sampling args (:class:`SamplingArgs`) become one frozen
:class:`naru_eval.core.budgets.Sampling` (:attr:`SamplingArgs.sampling`), the value the sampler and
the provenance get. A field that changes the model's answers carries the :data:`ANSWERS` marker:
a run that sets it away from its default is a *variant* of the default run
(:meth:`AdapterArgs.variant`, recorded in every sample payload), so the leaderboard tells such
runs apart. Operational args (URLs, concurrency, timeouts, retries, the store, decode workers,
the device, the shared prefix) carry no marker and never appear in the variant.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.json_schema import JsonDict

from naru_eval.core.budgets import Sampling
from naru_eval.core.provenance import variant_string
from naru_eval.core.selection import (
    DEFAULT_AKS_DEPTH,
    DEFAULT_AKS_THRESHOLD,
    DEFAULT_ALPHA,
    DEFAULT_POOL_FPS,
    DEFAULT_SELECT_ENCODER,
    Selection,
)
from naru_eval.settings import UserError, parse_flag
from naru_eval.store.responses import is_secret

#: the field marker of an argument that changes the model's answers (``json_schema_extra``)
ANSWERS: JsonDict = {"naru_answers": True}
#: the field marker of the arguments the sampling label already names (``num_frames``, ``fps``)
IN_SAMPLING: JsonDict = {"naru_answers": "sampling"}


def is_none(value: object) -> bool:
    """None, or a string lmms-eval users write for "unset"."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))


def _flag(value: object) -> bool:
    try:
        return parse_flag(value, "it")
    except ValueError as e:  # "it must be one of 1/true/yes/on or 0/false/no/off, got ..."
        raise ValueError(f"must be true or false: {e}") from None


#: the one flag type of every adapter's args (``enable_thinking=true``), parsed with
#: ``naru_eval.settings.parse_flag``
Flag = Annotated[bool, BeforeValidator(_flag)]


class ModelArgsError(UserError):
    """Bad ``--model_args`` (unknown, invalid or secret): one message naming the adapter and every
    problem; lmms-eval's constructor prints it and exits 2, no traceback (``NaruModel``)."""


class AdapterArgs(BaseModel):
    """Base of every adapter's model args: unknown args are refused, values are frozen, floats
    are finite.

    A subclass names where its secrets come from (:attr:`key_env`) and, for a name it does not
    take but a user may try, why not (:attr:`not_taken`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True, allow_inf_nan=False)

    #: the environment variables this adapter's key comes from (named when a secret is refused)
    key_env: ClassVar[tuple[str, ...]] = ()
    #: name -> why this adapter does not take it (appended to the unknown-name error)
    not_taken: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def names(cls) -> list[str]:
        """The field names, the class's own first, then those of its bases (e.g. RetryArgs)."""
        own = [n for n in cls.model_fields if n in vars(cls).get("__annotations__", {})]
        return own + [n for n in cls.model_fields if n not in own]

    @property
    def sampling(self) -> Sampling:
        """The sampling the args ask for (nothing set: the family's default applies)."""
        return Sampling()

    @property
    def checkpoint(self) -> str | None:
        """The checkpoint or served model, whose official row may set its own default sampling."""
        return None

    def variant(self) -> str:
        """The answer-changing args (:data:`ANSWERS`) that differ from their defaults, as sorted
        ``k=v`` joined by ``,``; empty when none do."""
        changed: dict[str, object] = {}
        for name, info in type(self).model_fields.items():
            extra = info.json_schema_extra
            if not isinstance(extra, dict) or extra.get("naru_answers") is not True:
                continue
            value = getattr(self, name)
            if value != info.default:
                changed[name] = value
        return variant_string(changed)


A = TypeVar("A", bound=AdapterArgs)


def _refused_secrets(model: type[AdapterArgs], args: Mapping[str, object]) -> list[str]:
    """Secret-named args, and args whose value holds a key from the adapter's ``key_env``."""
    named = {k for k, v in args.items() if is_secret(k) and not is_none(v)}
    keys = [v.strip() for v in (os.environ.get(n) for n in model.key_env) if v and len(v.strip()) >= 8]
    leaked = {k for k, v in args.items() if v is not None and any(key in str(v) for key in keys)}
    return sorted(named | leaked)


def parse_model_args(model: type[A], kwargs: Mapping[str, object], adapter: str | None = None) -> A:
    """``kwargs`` (lmms-eval's ``--model_args``, strings or typed values) as ``model``.

    Unset-looking values (``none``, ``null``, empty) are dropped so the default applies. Every
    problem goes into one ValueError that starts with ``adapter``: unknown names first (with the
    valid ones and the reason a known misuse is refused), then secrets (never echoed: nothing
    else is checked then), then each bad value as ``name='value': why``."""
    who = adapter or model.__name__
    data = {k: v for k, v in kwargs.items() if not is_none(v)}
    problems: list[str] = []
    unknown = sorted(k for k in kwargs if k not in model.model_fields)
    if unknown:
        hints = [f"{k}: {model.not_taken[k]}" for k in unknown if k in model.not_taken]
        problems.append(
            f"unknown model_args {unknown}; valid: {', '.join(model.names())}" + "".join(f" ({h})" for h in hints)
        )
    secrets = _refused_secrets(model, kwargs)
    if secrets:
        where = (
            f"set {' or '.join(model.key_env)} in the environment" if model.key_env else "keep it in the environment"
        )
        problems.append(
            f"refusing model_args {secrets}: an API key must not be passed in model_args (lmms-eval records "
            f"model_args in results.json); {where}"
        )
        raise ModelArgsError(f"{who}: " + "; ".join(problems))
    try:
        parsed = model.model_validate({k: v for k, v in data.items() if k in model.model_fields})
    except ValidationError as e:
        by_arg: dict[str, list[str]] = {}  # an arg's messages (one per branch of a union type)
        for err in e.errors():
            msg = str(err["msg"]).removeprefix("Value error, ")
            name = str(err["loc"][0]) if err["loc"] else ""
            if msg not in by_arg.setdefault(name, []):
                by_arg[name].append(msg)
        for name, msgs in by_arg.items():
            msg = ", or ".join(msgs)
            if not name:  # a check across args (a model validator): its message names them
                problems.append(msg)
            elif name in data:
                problems.append(f"{name}={data[name]!r}: {msg}")
            else:  # not given (a required arg): the message alone when it names the arg
                problems.append(msg if msg.startswith(name) else f"{name}: {msg}")
        raise ModelArgsError(f"{who}: " + "; ".join(problems)) from None
    if problems:
        raise ModelArgsError(f"{who}: " + "; ".join(problems))
    return parsed


class RunArgs(AdapterArgs):
    """The args every adapter takes (the base's, ``naru_eval.adapters.base.NaruModel``): the
    response store, lmms-eval's batch size, and what lmms-eval passes every model from its own
    flags (``--device``, ``--max_batch_size``)."""

    response_store: str | None = Field(None, description="the response store (else NARU_RESPONSE_STORE)")
    store: Flag | None = Field(None, description="use the response store (else the adapter's default)")
    batch_size: int = Field(1, ge=1, description="lmms-eval's batch size (requests are answered one by one)")
    device: str | None = Field(
        None, description="lmms-eval's --device (the HF families: cuda when available, else cpu)"
    )
    max_batch_size: int | None = Field(None, description="lmms-eval's --max_batch_size (not used)")


class SamplingArgs(RunArgs):
    """The frame sampling of the adapters whose frames come from naru-eval's sampler."""

    num_frames: int | None = Field(
        None, ge=1, description="frames per video (else the adapter's default)", json_schema_extra=IN_SAMPLING
    )
    fps: float | None = Field(
        None, gt=0, description="sample by rate instead of a frame count", json_schema_extra=IN_SAMPLING
    )
    max_frames: int | None = Field(
        None, ge=1, description="cap on the frames an fps sampling takes", json_schema_extra=ANSWERS
    )
    max_pixels: int | None = Field(
        None, ge=1, description="pixels per frame (frames are resized below it)", json_schema_extra=ANSWERS
    )

    @property
    def sampling(self) -> Sampling:
        """The one sampling value (a rate wins over a count, as it always has)."""
        return Sampling(
            frames=self.num_frames if self.fps is None else None,
            fps=self.fps,
            max_frames=self.max_frames,
            max_pixels=self.max_pixels,
        )


class VideoField(BaseModel):
    """``video``: whether the frames are given (off: the soundtrack or the transcript alone)."""

    video: Flag = Field(
        True,
        description="give the model the frames (video=false: the audio or the transcript alone)",
        json_schema_extra=ANSWERS,
    )


#: the tokens a transcript plan keeps free beside the frames and the transcript: the system turn,
#: the question with its options, and the answer
TRANSCRIPT_RESERVE_TOKENS = 2048


class TranscriptFields(VideoField):
    """The transcript's args, taken by every adapter that gives a model a video (the HF families,
    the OpenAI-compatible server, Gemini): where the transcript comes from, its layout, the
    control, and whose ASR. ``transcript=none`` (the default) gives exactly the input of a run
    before transcripts existed: no variant, the same run key (``naru_eval.adapters.transcript``)."""

    transcript: str = Field(
        "none",
        description="none, asr, embedded, embedded:N or a directory of <video_id>.srt/.vtt/.ass files",
        json_schema_extra=ANSWERS,
    )
    transcript_layout: Literal["interleaved", "block"] = Field(
        "interleaved",
        description="interleaved: each line between the frames by its time; block: all before the question",
        json_schema_extra=ANSWERS,
    )
    transcript_source: Literal["own", "other"] = Field(
        "own",
        description="own: the video's transcript; other: another video's (the control, a fixed derangement)",
        json_schema_extra=ANSWERS,
    )
    asr_model: str | None = Field(
        None,
        description="with transcript=asr: whose cached ASR (else the default ASR model)",
        json_schema_extra=ANSWERS,
    )
    transcript_reserve_tokens: int = Field(
        TRANSCRIPT_RESERVE_TOKENS,
        ge=0,
        description="tokens the transcript's budget leaves for the prompt and the answer",
        json_schema_extra=ANSWERS,
    )

    @field_validator("transcript")
    @classmethod
    def _source(cls, v: str) -> str:
        from naru_eval.core.transcripts import TranscriptSource

        try:  # a bad value is this arg's error, before anything runs
            TranscriptSource.parse(v)
        except ValueError as e:
            raise ValueError(str(e).removeprefix(f"transcript={v.strip()!r}: ")) from None
        return v.strip()

    @model_validator(mode="after")
    def _transcript_args(self) -> TranscriptFields:
        if self.transcript.strip() == "none":
            given = [
                n for n in ("transcript_source", "asr_model") if getattr(self, n) != type(self).model_fields[n].default
            ]
            if given:
                raise ValueError(f"{', '.join(given)} need transcript= (asr, embedded or a directory)")
        elif self.asr_model is not None and self.transcript.strip() != "asr":
            raise ValueError("asr_model is for transcript=asr")
        return self


class SelectionFields(BaseModel):
    """How the frames are chosen (``naru_eval.core.selection``): ``select=uniform`` (the default,
    the official protocol: no variant, the same run key as before selection existed) or a selector
    over a candidate pool at ``select_pool_fps``, scored against the question by ``select_encoder``.
    A parameter is refused where its method does not use it."""

    select: Literal["uniform", "its", "aks", "dialogue", "random"] = Field(
        "uniform",
        description="uniform (the official protocol), its, aks, dialogue (needs transcript=) or random (the control)",
        json_schema_extra=ANSWERS,
    )
    select_encoder: str | None = Field(
        None,
        description=f"its/aks/dialogue: a CLIP/SigLIP/SigLIP2 checkpoint (default {DEFAULT_SELECT_ENCODER})",
        json_schema_extra=ANSWERS,
    )
    select_alpha: float | None = Field(
        None, ge=0, description=f"its: the similarity's power (default {DEFAULT_ALPHA:g}; 0: uniform over the pool)",
        json_schema_extra=ANSWERS,
    )  # fmt: skip
    select_pool_fps: float | None = Field(
        None, gt=0, description=f"the candidate pool's frames per second (default {DEFAULT_POOL_FPS:g})",
        json_schema_extra=ANSWERS,
    )  # fmt: skip
    select_query: Literal["question", "question+options"] | None = Field(
        None, description="what the frames are scored against (default the question text)", json_schema_extra=ANSWERS
    )
    select_aks_threshold: float | None = Field(
        None, description=f"aks: how far a stretch's top frames must stand out (default {DEFAULT_AKS_THRESHOLD:g})",
        json_schema_extra=ANSWERS,
    )  # fmt: skip
    select_aks_depth: int | None = Field(
        None, ge=0, description=f"aks: how many times a stretch may be halved (default {DEFAULT_AKS_DEPTH})",
        json_schema_extra=ANSWERS,
    )  # fmt: skip
    select_seed: int | None = Field(None, ge=0, description="random: the seed (default 0)", json_schema_extra=ANSWERS)

    #: why an adapter cannot give a model chosen frames with their times (None: it can)
    select_refusal: ClassVar[str | None] = None

    @model_validator(mode="after")
    def _select_args(self) -> SelectionFields:
        if self.select != "uniform" and self.select_refusal:
            raise ValueError(f"select={self.select} is not available here: {self.select_refusal}")
        used = {
            "uniform": (),
            "its": ("select_encoder", "select_alpha", "select_pool_fps", "select_query"),
            "aks": ("select_encoder", "select_pool_fps", "select_query", "select_aks_threshold", "select_aks_depth"),
            "dialogue": ("select_encoder", "select_pool_fps", "select_query"),
            "random": ("select_pool_fps", "select_seed"),
        }[self.select]
        names = [n for n in SelectionFields.model_fields if n != "select"]
        stray = [n for n in names if getattr(self, n) is not None and n not in used]
        if stray:
            raise ValueError(f"{', '.join(stray)} do(es) not apply to select={self.select}")
        if self.select == "dialogue" and str(getattr(self, "transcript", "none")).strip() == "none":
            raise ValueError("select=dialogue chooses frames by the transcript's lines: give transcript=")
        return self

    @property
    def selection(self) -> Selection:
        """The one value of how the frames are chosen (the defaults filled in)."""
        if self.select == "uniform":
            return Selection()
        return Selection(
            method=self.select,
            pool_fps=self.select_pool_fps or DEFAULT_POOL_FPS,
            encoder=(self.select_encoder or DEFAULT_SELECT_ENCODER)
            if self.select in ("its", "aks", "dialogue")
            else None,
            alpha=DEFAULT_ALPHA if self.select_alpha is None else self.select_alpha,
            aks_threshold=DEFAULT_AKS_THRESHOLD if self.select_aks_threshold is None else self.select_aks_threshold,
            aks_depth=DEFAULT_AKS_DEPTH if self.select_aks_depth is None else self.select_aks_depth,
            query=self.select_query or "question",
            seed=self.select_seed or 0,
        )


class HFArgs(SelectionFields, TranscriptFields, SamplingArgs):
    """Args of the transformers families (``naru_eval.adapters.hf.base.HFVideoModel``)."""

    key_env: ClassVar[tuple[str, ...]] = ("HF_TOKEN",)

    pretrained: str = Field(description="hub id or checkpoint directory")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto", description="auto (the checkpoint's), bfloat16, float16, float32", json_schema_extra=ANSWERS
    )
    device_map: str | None = Field(None, description="e.g. auto: shard a large checkpoint over the visible GPUs")
    attn_implementation: str | None = Field(None, description="e.g. flash_attention_2, sdpa")
    max_new_tokens: int | None = Field(
        None, ge=1, description="else a reasoning budget, else the task's, else 16", json_schema_extra=ANSWERS
    )
    system_prompt: str | None = Field(
        None, description="a system message before the video and prompt", json_schema_extra=ANSWERS
    )
    trust_remote_code: Flag = Field(False, description="run the checkpoint's own code")
    revision: str | None = Field(None, description="the hub revision", json_schema_extra=ANSWERS)
    cap_pixels_per_frame: Flag = Field(
        True, description="cap each frame's pixels at the family's official size", json_schema_extra=ANSWERS
    )
    shared_prefix: Flag = Field(
        True, description="prefill each video once and answer its questions from a copy of the cache"
    )
    decode_workers: int = Field(0, ge=0, description="processes decoding the next videos ahead (0: decode inline)")
    decode_budget_mb: int = Field(4096, ge=1, description="decoded frames held ahead, in MiB")

    @property
    def checkpoint(self) -> str | None:
        return self.pretrained


#: the tokens an audio plan keeps free beside the video and the audio: the system turn, the
#: question with its options, and the answer (a reasoning family adds its budget)
AUDIO_RESERVE_TOKENS = 2048


class AudioFields(VideoField):
    """The soundtrack's args, shared by the omni families (:class:`AudioArgs`) and the
    OpenAI-compatible adapter: ``audio``, the frames (``video``), the ablation's control
    (``audio_source``) and the plan's knobs."""

    audio: Flag = Field(True, description="give the model the video's soundtrack", json_schema_extra=ANSWERS)
    audio_source: Literal["own", "other"] = Field(
        "own",
        description="own: the video's soundtrack; other: another video's, of about its length (the control)",
        json_schema_extra=ANSWERS,
    )
    audio_window_s: float | None = Field(
        None,
        gt=0,
        description="seconds of audio around each frame (else the longest that fits)",
        json_schema_extra=ANSWERS,
    )
    audio_stream: int | None = Field(
        None, ge=0, description="the container's audio stream (else the one a player plays)", json_schema_extra=ANSWERS
    )
    audio_reserve_tokens: int = Field(
        AUDIO_RESERVE_TOKENS,
        ge=0,
        description="tokens the audio plan leaves for the prompt and the answer",
        json_schema_extra=ANSWERS,
    )

    @field_validator("audio_window_s")
    @classmethod
    def _window(cls, v: float | None) -> float | None:
        if v is not None and abs(round(v * 100) - v * 100) > 1e-6:
            raise ValueError("must be a whole number of hundredths of a second (the 10-ms grid)")
        return v
