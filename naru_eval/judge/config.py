"""Judge configuration: which judge, where, with which sampling settings, at what price.

Everything is read from the environment (``JudgeConfig.from_env``) so that the same judge runs
inside ``lmms-eval --tasks naru_open`` (``process_results`` has no other channel) and in
``naru-eval judge ...`` (where flags override the environment). The ``NARU_JUDGE_*`` variables
are fields of ``naru_eval.settings.Settings``, read and validated there; their table, with the
defaults applied here, is docs/settings.md (generated from those fields).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from naru_eval.settings import Settings, settings

DEFAULT_MODEL = "gpt-5.5"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
BACKENDS = ("openai", "offline", "offline-minilm", "offline-lexical")
#: The gpt-5 / o-series reasoning effort when none is set (``high`` for ``-pro`` models).
DEFAULT_REASONING_EFFORT = "medium"

_REASONING_FAMILY = re.compile(r"^(?:[\w.-]+/)?(?:gpt-5|gpt-[6-9]|o\d)(?:[.\-_]|$)", re.I)
_GPT_VERSION = re.compile(r"^(?:[\w.-]+/)?gpt-(\d+)(?:\.(\d+))?", re.I)


def is_reasoning_family(model: str) -> bool:
    """gpt-5* (and later) and o-series models: they reject a non-default ``temperature``."""
    return bool(_REASONING_FAMILY.match(model.strip()))


def sdk_reasoning_efforts() -> tuple[str, ...]:
    """The values the installed openai SDK's ``ReasoningEffort`` type allows."""
    import typing

    from openai.types.shared.reasoning_effort import ReasoningEffort

    values: list[str] = []
    for arg in typing.get_args(ReasoningEffort):  # Optional[Literal[...]]
        values += [v for v in typing.get_args(arg) if isinstance(v, str)]
    return tuple(values)


def allowed_reasoning_efforts(model: str) -> tuple[str, ...]:
    """The reasoning efforts ``model`` takes, as far as they are known: the SDK's values, minus
    ``minimal`` from gpt-5.1 on; ``-pro`` models take ``high`` only. Any other refusal comes from
    the API, and the run stops on it once (naru_eval.api.retry.ConfigErrorBreaker)."""
    name = model.strip().lower()
    values = sdk_reasoning_efforts()
    if re.search(r"-pro(?:-\d{4}-\d{2}-\d{2})?$", name):
        return tuple(v for v in values if v == "high")
    m = _GPT_VERSION.match(name)
    if m and (int(m.group(1)), int(m.group(2) or 0)) >= (5, 1):
        values = tuple(v for v in values if v != "minimal")
    return values


def default_reasoning_effort(model: str) -> str:
    """``medium``, or ``high`` for a model that takes nothing else (``-pro``)."""
    allowed = allowed_reasoning_efforts(model)
    return DEFAULT_REASONING_EFFORT if DEFAULT_REASONING_EFFORT in allowed or not allowed else allowed[0]


def default_prices() -> dict[str, dict[str, float]]:
    """The judge's built-in prices (USD per 1M tokens), from naru_eval/data_files/prices.json."""
    from naru_eval.api.prices import price_table

    return price_table("openai")


def price_for(model: str, prices: Mapping[str, Mapping[str, float]]) -> Mapping[str, float] | None:
    """The price entry of ``model``: its exact name (an alias is a name of its own), or a dated
    snapshot ``<name>-YYYY-MM-DD`` of a priced name; else None (the cost is unknown). Never a
    prefix: ``gpt-5.5-pro`` does not take ``gpt-5.5``'s price."""
    from naru_eval.api.prices import match

    key = match(model, prices)
    return prices[key] if key is not None else None


def batch_factor(price: Mapping[str, float]) -> float | None:
    """What the Batch API charges per standard dollar (``batch_discount`` of the price entry,
    0.5 for OpenAI's models); None when the entry has none (the batch cost is unknown)."""
    value = price.get("batch_discount")
    return None if value is None else float(value)


def cost_usd(model: str, usage: Mapping[str, Any], prices: Mapping[str, Mapping[str, float]]) -> float | None:
    """Cost of one call's usage; None when the model has no price (never a silent 0). A call
    answered by the Batch API (``usage["batch"]``) costs the standard price times the entry's
    ``batch_discount``, and is unknown without one."""
    if model.startswith("offline"):
        return 0.0
    p = price_for(model, prices)
    if p is None:
        return None
    factor = 1.0
    if usage.get("batch"):
        batch = batch_factor(p)
        if batch is None:
            return None
        factor = batch
    prompt = int(usage.get("prompt_tokens") or 0)
    cached = int(usage.get("cached_tokens") or 0)
    out = int(usage.get("completion_tokens") or 0)  # includes reasoning tokens
    return (
        factor
        * (
            (prompt - cached) * float(p["input"])
            + cached * float(p.get("cached_input", p["input"]))
            + out * float(p["output"])
        )
        / 1e6
    )


def load_prices(spec: str | None) -> dict[str, dict[str, float]]:
    """The built-in prices updated by ``spec`` (a JSON object or a path to one): ``{model: {input,
    cached_input, output[, as_of, source]}}`` in USD per 1M tokens."""
    from naru_eval.api.prices import numbers

    prices = default_prices()
    if not spec:
        return prices
    text = Path(spec).read_text(encoding="utf-8") if not spec.lstrip().startswith("{") else spec
    extra = json.loads(text)
    if not isinstance(extra, dict):
        raise ValueError("judge prices must be a JSON object {model: {input, cached_input, output}}")
    for model, entry in extra.items():
        if not isinstance(entry, dict) or "input" not in entry or "output" not in entry:
            raise ValueError(f"judge prices: {model!r} needs 'input' and 'output' (USD per 1M tokens)")
        prices[model] = numbers(entry)
    return prices


@dataclass(frozen=True)
class JudgeConfig:
    """One judge. ``settings()`` is exactly what is sent besides the messages."""

    backend: str = "openai"
    model: str = DEFAULT_MODEL
    facts_model: str | None = None
    base_url: str = DEFAULT_BASE_URL
    temperature: float | None = None
    reasoning_effort: str | None = None
    max_completion_tokens: int = 8192
    seed: int | None = None
    concurrency: int = 16
    max_retries: int = 5
    retry_base_delay: float = 1.0
    retry_max_delay: float = 60.0
    parse_attempts: int = 3
    timeout: float = 180.0
    cache_path: str | None = None
    prices: dict[str, dict[str, float]] = field(default_factory=default_prices, compare=False)
    #: re-ask even when a cached output exists (the new output replaces it)
    refresh: bool = False
    #: ``judge_many`` sends the verification calls as OpenAI Batch API jobs (naru_eval.judge.batch)
    batch: bool = False
    #: the wait between two polls of a batch: base doubling up to max, seconds
    batch_poll_base: float = 10.0
    batch_poll_max: float = 300.0
    #: stop waiting for a batch after this many seconds (None: until it ends; a rerun resumes it)
    batch_wait: float | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"judge backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.batch_poll_base <= 0 or self.batch_poll_max < self.batch_poll_base:
            raise ValueError("judge batch polling needs 0 < batch_poll_base <= batch_poll_max")
        if self.concurrency < 1 or self.parse_attempts < 1 or self.max_retries < 0:
            raise ValueError("judge concurrency and parse_attempts must be >= 1, max_retries >= 0")
        if self.reasoning_effort is not None and self.backend == "openai":
            allowed = allowed_reasoning_efforts(self.model)
            if self.reasoning_effort not in allowed:
                raise ValueError(
                    f"judge reasoning_effort {self.reasoning_effort!r} is not one {self.model} takes; "
                    f"allowed: {', '.join(allowed) or 'none known'} (NARU_JUDGE_REASONING_EFFORT)"
                )
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"judge base_url must be an http(s) URL, got {self.base_url!r}")
        if parts.username or parts.password:
            raise ValueError("judge base_url must not carry credentials; set NARU_JUDGE_API_KEY / OPENAI_API_KEY")

    # -- derived ------------------------------------------------------------------------------
    @property
    def reasoning(self) -> bool:
        return is_reasoning_family(self.model)

    @property
    def fact_model(self) -> str:
        """The model whose frozen facts are the denominator."""
        if self.backend != "openai":
            return self.offline_name
        return self.facts_model or self.model

    @property
    def offline_name(self) -> str:
        return {"offline-minilm": "offline:minilm", "offline-lexical": "offline:lexical"}.get(
            self.backend, "offline:auto"
        )

    def settings(self, *, temperature: float | None = None) -> dict[str, Any]:
        """The sampling settings sent with every request (explicit; nothing left to a default
        except what the gpt-5 / o-series families refuse to change)."""
        out: dict[str, Any] = {"max_completion_tokens": self.max_completion_tokens}
        temp = self.temperature if temperature is None else temperature
        if self.reasoning:
            out["reasoning_effort"] = self.reasoning_effort or default_reasoning_effort(self.model)
        else:
            out["temperature"] = 0.0 if temp is None else float(temp)
            if self.reasoning_effort is not None:
                out["reasoning_effort"] = self.reasoning_effort
        if self.seed is not None:
            out["seed"] = self.seed
        return out

    def describe(self) -> dict[str, Any]:
        """For logs and reports (no secrets: the key is never part of the config)."""
        d = asdict(self)
        d.pop("prices")
        d["fact_model"] = self.fact_model
        d["settings"] = self.settings() if self.backend == "openai" else {}
        d["temperature_note"] = (
            "not sent: the gpt-5 / o-series families reject a non-default temperature" if self.reasoning else None
        )
        return d

    def with_overrides(self, **kw: Any) -> JudgeConfig:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> JudgeConfig:
        """The judge of ``env`` (default: the process's), read through ``naru_eval.settings``."""
        s = settings() if env is None else Settings.from_env(env)
        openai_url = (os.environ if env is None else env).get("OPENAI_BASE_URL")

        def pick(value: Any, default: Any) -> Any:
            return default if value is None else value

        kw: dict[str, Any] = dict(
            backend=s.judge_backend or "openai",
            model=s.judge_model or DEFAULT_MODEL,
            facts_model=s.judge_facts_model,
            base_url=(s.judge_base_url or openai_url or DEFAULT_BASE_URL).rstrip("/"),
            temperature=s.judge_temperature,
            reasoning_effort=s.judge_reasoning_effort,
            max_completion_tokens=pick(s.judge_max_tokens, 8192),
            seed=s.judge_seed,
            concurrency=pick(s.judge_concurrency, 16),
            max_retries=pick(s.judge_max_retries, 5),
            retry_base_delay=pick(s.judge_retry_base_delay, 1.0),
            retry_max_delay=pick(s.judge_retry_max_delay, 60.0),
            parse_attempts=pick(s.judge_parse_attempts, 3),
            timeout=pick(s.judge_timeout, 180.0),
            cache_path=s.judge_cache,
            prices=load_prices(s.judge_prices),
            batch=s.judge_batch,
        )
        kw.update({k: v for k, v in overrides.items() if v is not None})
        if isinstance(kw.get("base_url"), str):
            kw["base_url"] = kw["base_url"].rstrip("/")
        return cls(**kw)


def env_fingerprint(env: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """The judge-relevant environment, as a hashable key (for per-process singletons)."""
    env = os.environ if env is None else env
    names = sorted(k for k in env if k.startswith("NARU_JUDGE_")) + ["OPENAI_BASE_URL", "NARU_CACHE_DIR"]
    return tuple((k, env.get(k, "")) for k in names if "KEY" not in k)
