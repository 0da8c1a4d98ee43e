"""Parsing lmms-eval ``--model_args`` values the same way in every adapter.

lmms-eval hands model args over as strings; these helpers convert them with errors that name
the adapter and the argument, and refuse secrets: lmms-eval records ``model_args`` in
``results.json``, so an API key must come from the environment only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from naru_eval.api.retry import RetryPolicy
from naru_eval.store.responses import is_secret

ArgsT = TypeVar("ArgsT", bound="AdapterArgs")


def is_none(value: Any) -> bool:
    """None, or a string lmms-eval users write for "unset"."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))


class ArgParser:
    """Typed conversion of one adapter's model args; errors start with the adapter's id."""

    def __init__(self, adapter: str) -> None:
        self.adapter = adapter

    def int(self, name: str, value: Any, minimum: int | None = None) -> int:
        try:
            out = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{self.adapter}: {name} must be an integer, got {value!r}") from None
        if minimum is not None and out < minimum:
            raise ValueError(f"{self.adapter}: {name} must be >= {minimum}, got {out}")
        return out

    def float(self, name: str, value: Any, minimum: float = 0.0) -> float:
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{self.adapter}: {name} must be a number, got {value!r}") from None
        if out < minimum:
            raise ValueError(f"{self.adapter}: {name} must be >= {minimum}, got {out}")
        return out

    def flag(self, name: str, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{self.adapter}: {name} must be true or false, got {value!r}")

    def retry_policy(self, max_retries: Any, base_delay: Any, max_delay: Any) -> RetryPolicy:
        """The bounded retry policy of an API adapter: ``max_retries`` retries after the first try."""
        return RetryPolicy(
            max_attempts=self.int("max_retries", max_retries, 0) + 1,
            base_delay=self.float("retry_base_delay", base_delay),
            max_delay=self.float("retry_max_delay", max_delay),
        )

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


# ----------------------------------------------------------------- typed model args (pydantic)
# The API adapters (naru_gemini, naru_openai_compat) declare their arguments as one pydantic
# model each, parsed here: unknown names are refused naming the valid ones, "none"/"" mean unset,
# and every error names the adapter and the argument.


class AdapterArgs(BaseModel):
    """The typed ``--model_args`` of one adapter (subclass it; ``extra="forbid"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    @model_validator(mode="before")
    @classmethod
    def _unset(cls, data: Any) -> Any:
        """lmms-eval hands every value over as a string: ``none``, ``null`` and ``""`` mean unset."""
        if isinstance(data, Mapping):
            return {k: (None if is_none(v) else v) for k, v in data.items()}
        return data

    @classmethod
    def parse(
        cls: type[ArgsT], adapter: str, args: Mapping[str, Any], passthrough: Iterable[str] = ()
    ) -> tuple[ArgsT, dict[str, Any]]:
        """``(typed args, the passthrough ones)``: ``passthrough`` names go on to the base
        (frame budget, store); any other unknown name is refused, listing the valid ones."""
        through = set(passthrough)
        own = {k: v for k, v in args.items() if k in cls.model_fields}
        rest = {k: v for k, v in args.items() if k not in cls.model_fields and k in through}
        unknown = sorted(set(args) - set(own) - set(rest))
        if unknown:
            known = [*cls.model_fields, *sorted(through - set(cls.model_fields))]
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
        return list(cls.model_fields)
