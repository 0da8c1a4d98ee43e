"""Parsing lmms-eval ``--model_args`` values the same way in every adapter.

lmms-eval hands model args over as strings; these helpers convert them with errors that name
the adapter and the argument, and refuse secrets: lmms-eval records ``model_args`` in
``results.json``, so an API key must come from the environment only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from naru_eval.api.retry import RetryPolicy
from naru_eval.store.responses import is_secret


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
