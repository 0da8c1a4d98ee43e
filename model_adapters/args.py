"""Parsing lmms-eval ``--model_args`` values the same way in every adapter.

lmms-eval hands model args over as strings. An adapter declares its args as a pydantic model
(a subclass of :class:`AdapterArgs`: ``extra="forbid"``) and :func:`parse_model_args` turns the
keyword arguments into it, with one error that names the adapter, every bad argument and, for an
unknown one, the valid names. Values that mean "unset" (``none``, ``null``, empty) fall back to the
field's default; flags take ``1/true/yes/on`` / ``0/false/no/off`` (``naru_eval.settings.parse_flag``,
the same parser as the environment's). :class:`ArgParser` refuses secrets: lmms-eval records
``model_args`` in ``results.json``, so an API key must come from the environment only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, TypedDict, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from naru_eval.settings import parse_flag
from naru_eval.store.responses import is_secret


def is_none(value: Any) -> bool:
    """None, or a string lmms-eval users write for "unset"."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))


def _flag(value: Any) -> bool:
    try:
        return parse_flag(value, "it")
    except ValueError as e:  # "it must be one of 1/true/yes/on or 0/false/no/off, got ..."
        raise ValueError(f"must be true or false: {e}") from None


#: a boolean model arg (``enable_thinking=true``), parsed with ``naru_eval.settings.parse_flag``
Flag = Annotated[bool, BeforeValidator(_flag)]


class AdapterArgs(BaseModel):
    """Base of every adapter's model args: unknown args are refused, values are frozen.

    The HF families and replay go through :func:`parse_model_args`; the API adapters, whose
    frame/store args pass on to the base untyped, through :meth:`parse`."""

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    @classmethod
    def parse(
        cls: type[ArgsT], adapter: str, args: Mapping[str, Any], passthrough: Iterable[str] = ()
    ) -> tuple[ArgsT, dict[str, Any]]:
        """``(typed args, the passthrough ones)``: ``passthrough`` names go on to the base
        (frame budget, store); any other unknown name is refused, listing the valid ones;
        ``none``/``null``/``""`` mean unset (None)."""
        through = set(passthrough)
        own = {k: (None if is_none(v) else v) for k, v in args.items() if k in cls.model_fields}
        rest = {k: v for k, v in args.items() if k not in cls.model_fields and k in through}
        unknown = sorted(set(args) - set(own) - set(rest))
        if unknown:
            known = [*cls.names(), *sorted(through - set(cls.model_fields))]
            raise ValueError(f"{adapter}: unknown model_args {unknown}; known: {', '.join(known)}")
        try:
            return cls.model_validate(own), rest
        except ValidationError as e:
            first = e.errors()[0]
            name = ".".join(str(x) for x in first.get("loc", ())) or "model_args"
            msg = str(first.get("msg", e)).removeprefix("Value error, ")
            if first.get("type") == "value_error":  # our validators' messages name the argument and value
                raise ValueError(f"{adapter}: {msg}") from None
            got = f", got {first['input']!r}" if "input" in first else ""
            raise ValueError(f"{adapter}: {name}: {msg}{got}") from None

    @classmethod
    def names(cls) -> list[str]:
        """The field names, the class's own first, then those of its mixins (e.g. RetryArgs)."""
        own = [n for n in cls.model_fields if n in vars(cls).get("__annotations__", {})]
        return own + [n for n in cls.model_fields if n not in own]


ArgsT = TypeVar("ArgsT", bound=AdapterArgs)
A = TypeVar("A", bound=AdapterArgs)


def parse_model_args(model: type[A], kwargs: Mapping[str, Any], adapter: str | None = None) -> A:
    """``kwargs`` (lmms-eval's ``--model_args``, strings or typed values) as ``model``.

    Unset-looking values (``none``, ``null``, empty) are dropped so the default applies. A bad
    value or an unknown name raises one ValueError naming ``adapter`` and every problem; an
    unknown name lists the valid ones (``model``'s fields: a family's own args are fields of its
    ``Args`` subclass, so they are listed too)."""
    who = adapter or model.__name__
    data = {k: v for k, v in kwargs.items() if not is_none(v)}
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems, unknown = [], []
        for err in e.errors():
            name = ".".join(str(p) for p in err["loc"]) or "model_args"
            if err["type"] == "extra_forbidden":
                unknown.append(name)
                continue
            value = "<hidden>" if is_secret(name) else repr(data.get(name.split(".")[0]))
            problems.append(f"{name}={value}: {str(err['msg']).removeprefix('Value error, ')}")
        if unknown:
            valid = ", ".join(sorted(model.model_fields))
            problems.insert(0, f"unknown model_args {sorted(unknown)}; valid: {valid}")
        raise ValueError(f"{who}: " + "; ".join(problems)) from None


class BaseKwargs(TypedDict):
    """The typed args ``NaruModel.__init__`` takes (:meth:`SamplingArgs.base_kwargs`)."""

    num_frames: int | None
    fps: float | None
    max_frames: int | None
    max_pixels: int | None
    response_store: str | None
    store: bool | None
    batch_size: int


class SamplingArgs(AdapterArgs):
    """The base's args (``model_adapters.base.NaruModel``): frames, store, batch size; and the two
    lmms-eval passes to every model from its own flags (``--device``, ``--max_batch_size``)."""

    num_frames: int | None = Field(None, ge=1, description="frames per video (else the adapter's default)")
    fps: float | None = Field(None, gt=0, description="sample by rate instead of a frame count")
    max_frames: int | None = Field(None, ge=1, description="cap on the frames an fps sampling takes")
    max_pixels: int | None = Field(None, ge=1, description="pixels per frame (frames are resized below it)")
    response_store: str | None = Field(None, description="the response store (else NARU_RESPONSE_STORE)")
    store: Flag | None = Field(None, description="use the response store (else the adapter's default)")
    batch_size: int = Field(1, ge=1, description="lmms-eval's batch size (requests are answered one by one)")
    device: str | None = Field(
        None, description="lmms-eval's --device (the HF families: cuda when available, else cpu)"
    )
    max_batch_size: int | None = Field(None, description="lmms-eval's --max_batch_size (not used)")

    def base_kwargs(self) -> BaseKwargs:
        """The keyword arguments of ``NaruModel.__init__`` (the other fields are the adapter's)."""
        return {
            "num_frames": self.num_frames,
            "fps": self.fps,
            "max_frames": self.max_frames,
            "max_pixels": self.max_pixels,
            "response_store": self.response_store,
            "store": self.store,
            "batch_size": self.batch_size,
        }


class HFArgs(SamplingArgs):
    """Args of the transformers families (``model_adapters.hf_base.HFVideoModel``)."""

    pretrained: str = Field(description="hub id or checkpoint directory")
    dtype: str = Field("auto", description="auto (the checkpoint's), bfloat16, float16, float32")
    device_map: str | None = Field(None, description="e.g. auto: shard a large checkpoint over the visible GPUs")
    attn_implementation: str | None = Field(None, description="e.g. flash_attention_2, sdpa")
    max_new_tokens: int | None = Field(None, ge=1, description="else a reasoning budget, else the task's, else 16")
    system_prompt: str | None = Field(None, description="a system message before the video and prompt")
    trust_remote_code: Flag = Field(False, description="run the checkpoint's own code")
    revision: str | None = Field(None, description="the hub revision")
    cap_pixels_per_frame: Flag = Field(True, description="cap each frame's pixels at the family's official size")
    shared_prefix: Flag = Field(
        True, description="prefill each video once and answer its questions from a copy of the cache"
    )
    decode_workers: int = Field(0, ge=0, description="processes decoding the next videos ahead (0: decode inline)")
    decode_budget_mb: int = Field(4096, ge=1, description="decoded frames held ahead, in MiB")


class ReplayArgs(SamplingArgs):
    """Args of ``naru_replay``."""

    predictions: str = Field(description='a JSONL of {"question_id", "response"}')
    pretrained: str | None = Field(None, description="the model that made the predictions (the leaderboard's label)")


class ArgParser:
    """The secrets check of one adapter's model args; errors start with the adapter's id."""

    def __init__(self, adapter: str) -> None:
        self.adapter = adapter

    def refuse_secrets(self, args: Mapping[str, Any], key_env: Iterable[str], not_secret: Iterable[str] = ()) -> None:
        """Refuse secret-named args and any arg whose value contains a key from ``key_env``."""
        allowed = set(not_secret)
        named = {k for k, v in args.items() if is_secret(k) and k not in allowed and not is_none(v)}
        keys = [v.strip() for v in (os.environ.get(n) for n in key_env) if v and len(v.strip()) >= 8]
        leaked = {k for k, v in args.items() if v is not None and any(key in str(v) for key in keys)}
        bad = sorted(named | leaked)
        if bad:
            raise ValueError(
                f"{self.adapter}: refusing model_args {bad}: an API key must not be passed in model_args "
                f"(lmms-eval records model_args in results.json). Set {' or '.join(key_env)} in the environment."
            )


#: the markers around docs/adapters.md's generated table of the families' own args
FAMILY_ARGS_BEGIN = "<!-- family-args:begin (generated from the adapters' Args models; do not edit) -->"
FAMILY_ARGS_END = "<!-- family-args:end -->"


#: the modules of the transformers families (the API adapters document their args elsewhere)
_HF_FAMILY_MODULES = (".qwen", ".internvl", ".minicpm", ".nemotron")


def family_args_markdown() -> str:
    """The HF families' own args as a Markdown table: each field an ``Args`` subclass adds to
    :class:`HFArgs` or whose default it changes, with the adapters that take it (one row per
    field, default and description)."""
    import importlib

    from model_adapters import ADAPTERS

    rows: dict[tuple[str, str, str], list[str]] = {}
    for model_id, path in ADAPTERS.items():
        module, _, name = path.rpartition(".")
        if not module.endswith(_HF_FAMILY_MODULES):
            continue
        args = getattr(importlib.import_module(module), name).Args
        if not issubclass(args, HFArgs) or args is HFArgs:
            continue
        for field, info in args.model_fields.items():
            base = HFArgs.model_fields.get(field)
            if base is not None and base.default == info.default and base.description == info.description:
                continue
            default = "required" if info.is_required() else f"`{info.default}`"
            rows.setdefault((field, default, info.description or ""), []).append(f"`{model_id}`")
    out = ["| arg | adapters | default | meaning |", "|---|---|---|---|"]
    for (field, default, meaning), ids in rows.items():
        out.append(f"| `{field}` | {', '.join(ids)} | {default} | {meaning.replace('|', chr(92) + '|')} |")
    return "\n".join(out) + "\n"


def with_family_args(doc_text: str) -> str:
    """``doc_text`` with the part between the family-args markers replaced by the generated table."""
    head, sep, rest = doc_text.partition(FAMILY_ARGS_BEGIN)
    _, sep2, tail = rest.partition(FAMILY_ARGS_END)
    if not sep or not sep2:
        raise ValueError(f"the document has no {FAMILY_ARGS_BEGIN!r} ... {FAMILY_ARGS_END!r} markers")
    return f"{head}{FAMILY_ARGS_BEGIN}\n\n{family_args_markdown()}\n{FAMILY_ARGS_END}{tail}"
