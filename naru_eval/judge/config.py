"""Judge configuration: which judge, where, with which sampling settings, at what price.

Everything is read from the environment (``JudgeConfig.from_env``) so that the same judge runs
inside ``lmms-eval --tasks naru_open`` (``process_results`` has no other channel) and in
``naru-eval judge ...`` (where flags override the environment). The ``NARU_JUDGE_*`` variables
are fields of ``naru_eval.settings.Settings``, read and validated there; their table is
docs/settings.md (generated from those fields). :class:`JudgeConfig` is a pydantic model whose
fields hold every default once; an unset variable takes it (a test checks the defaults the
settings' docs state against them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from typing_extensions import TypedDict

from naru_eval.api.openai_client import TokenUsage, is_reasoning_family
from naru_eval.api.retry import RetryArgs
from naru_eval.api.urls import check_endpoint
from naru_eval.settings import OPENAI_BASE_URL, Settings, UserError, openai_base_url, settings, snapshot

DEFAULT_MODEL = "gpt-5.5"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
BACKENDS = ("openai", "offline", "offline-minilm", "offline-lexical")
#: The gpt-5 / o-series reasoning effort when none is set (``high`` for ``-pro`` models).
DEFAULT_REASONING_EFFORT = "medium"

_GPT_VERSION = re.compile(r"^(?:[\w.-]+/)?gpt-(\d+)(?:\.(\d+))?", re.I)


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
    ``minimal`` from gpt-5.1 on; ``-pro`` models take ``high`` only. Every other refusal comes from
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


def cost_usd(model: str, usage: TokenUsage, prices: Mapping[str, Mapping[str, float]]) -> float | None:
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


def prices_of(spec: str | None, where: str) -> dict[str, dict[str, float]]:
    """:func:`load_prices`, its error naming ``where`` (the variable or the option)."""
    try:
        return load_prices(spec)
    except ValueError as e:
        raise JudgeConfigError(f"{where}: {e}") from None


def load_prices(spec: str | None) -> dict[str, dict[str, float]]:
    """The built-in prices with ``spec`` (a JSON object or a path to one, the one override format
    of naru_eval.api.prices) over them: ``{model: {input, cached_input, output[, batch_discount,
    aliases, as_of, source]}}`` in USD per 1M tokens."""
    from naru_eval.api.prices import PriceTable

    return PriceTable.load("openai", spec).models


#: old spellings of the offline backends, refused with the one spelling (``offline-minilm``)
_OFFLINE_SPELLINGS = {
    "minilm": "offline-minilm",
    "offline:minilm": "offline-minilm",
    "offline_minilm": "offline-minilm",
    "lexical": "offline-lexical",
    "offline:lexical": "offline-lexical",
    "offline_lexical": "offline-lexical",
    "offline:auto": "offline",
}


class JudgeConfigError(UserError):
    """A judge setting that cannot be used (a variable or an option): its message names it."""


class RequestParams(TypedDict, total=False):
    """The sampling parameters of every judge request (:meth:`JudgeConfig.request_params`), sent
    as the SDK's keyword arguments and part of each request's cache key. Declared in the order
    :meth:`JudgeConfig.request_params` sets them: :class:`JudgeConfigDescription` writes them in
    this order."""

    max_completion_tokens: int
    temperature: float
    reasoning_effort: str
    seed: int


class JudgeConfigDescription(BaseModel):
    """What a judge is, for logs and report files (:meth:`JudgeConfig.describe`): its settings
    without the price table (no secrets: the key is never part of the config), and what they
    make of it. The fields are in the order the report files have always written them (the
    settings as ``JudgeConfig.model_dump`` lists them, then the derived ones); ``extra="forbid"``
    makes a new JudgeConfig field fail here until it is added."""

    model_config = ConfigDict(extra="forbid")

    max_retries: int
    retry_base_delay: float
    retry_max_delay: float
    backend: str
    model: str
    facts_model: str | None
    base_url: str | None  # None in a Judge's description of an offline backend (no endpoint)
    temperature: float | None
    reasoning_effort: str | None
    max_completion_tokens: int
    seed: int | None
    concurrency: int
    parse_attempts: int
    timeout: float
    cache_path: str | None
    refresh: bool
    batch: bool
    batch_poll_base: float
    batch_poll_max: float
    batch_wait: float | None
    fact_model: str
    #: the sampling parameters sent (the openai backend; empty for the offline ones)
    settings: RequestParams
    temperature_note: str | None


class JudgeDescription(JudgeConfigDescription):
    """A :class:`naru_eval.judge.pipeline.Judge`'s description: its config's, with the model
    that wrote the facts and the two prompts' versions (they change the scores)."""

    facts_prompt_version: str
    verify_prompt_version: str


class JudgeConfig(RetryArgs):
    """One judge; every default is written here once. ``request_params()`` is exactly what is
    sent besides the messages. Retries: :class:`naru_eval.api.retry.RetryArgs` (the same three
    settings and defaults as the API adapters')."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = "openai"
    model: str = DEFAULT_MODEL
    facts_model: str | None = None
    base_url: str = DEFAULT_BASE_URL
    temperature: float | None = Field(None, ge=0, le=2, allow_inf_nan=False)
    reasoning_effort: str | None = None
    max_completion_tokens: int = Field(8192, ge=1)
    seed: int | None = None
    concurrency: int = Field(16, ge=1)
    parse_attempts: int = Field(3, ge=1)
    timeout: float = Field(180.0, gt=0, allow_inf_nan=False)
    cache_path: str | None = None
    prices: dict[str, dict[str, float]] = Field(default_factory=default_prices)
    #: re-ask even when a cached output exists (the new output replaces it)
    refresh: bool = False
    #: ``judge_many`` sends the verification calls as OpenAI Batch API jobs (naru_eval.judge.batch)
    batch: bool = False
    #: the wait between two polls of a batch: base doubling up to max, seconds
    batch_poll_base: float = 10.0
    batch_poll_max: float = 300.0
    #: stop waiting for a batch after this many seconds (None: until it ends; a rerun resumes it)
    batch_wait: float | None = None

    @field_validator("backend")
    @classmethod
    def _backend(cls, v: str) -> str:
        if v in _OFFLINE_SPELLINGS:
            raise ValueError(
                f"judge backend {v!r} is spelled {_OFFLINE_SPELLINGS[v]!r} (NARU_JUDGE_BACKEND, --backend)"
            )
        if v not in BACKENDS:
            raise ValueError(f"judge backend must be one of {BACKENDS}, got {v!r}")
        return v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return check_endpoint(v, what="judge base_url", key_env=("NARU_JUDGE_API_KEY", "OPENAI_API_KEY")).rstrip("/")

    @model_validator(mode="after")
    def _check(self) -> JudgeConfig:
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
        return self

    def __eq__(self, other: object) -> bool:
        """Equal judges: the same settings (the price table is not part of a judge's identity)."""
        if not isinstance(other, JudgeConfig):
            return NotImplemented
        return self.model_dump(exclude={"prices"}) == other.model_dump(exclude={"prices"})

    def __hash__(self) -> int:
        return hash(json.dumps(self.model_dump(exclude={"prices"}), sort_keys=True, default=str))

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
        """The id the offline backends record as the facts' model (judge cache, payloads):
        ``offline:minilm``, ``offline:lexical`` or ``offline:auto``; kept as it was so stored
        facts and logs stay valid. It names a model, not a backend: the backend is
        ``offline-minilm`` / ``offline-lexical`` / ``offline``."""
        return {"offline-minilm": "offline:minilm", "offline-lexical": "offline:lexical"}.get(
            self.backend, "offline:auto"
        )

    def request_params(self, *, temperature: float | None = None) -> RequestParams:
        """The sampling parameters sent with every request (explicit; nothing left to a default
        except what the gpt-5 / o-series families refuse to change)."""
        out: RequestParams = {"max_completion_tokens": self.max_completion_tokens}
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

    def describe(self) -> JudgeConfigDescription:
        """For logs and reports (no secrets: the key is never part of the config)."""
        return JudgeConfigDescription(
            **self.model_dump(exclude={"prices"}),
            fact_model=self.fact_model,
            settings=self.request_params() if self.backend == "openai" else {},
            temperature_note=(
                "not sent: the gpt-5 / o-series families reject a non-default temperature" if self.reasoning else None
            ),
        )

    def with_overrides(self, **kw: object) -> JudgeConfig:
        """A copy with the given values (None: keep), validated like a new one."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**data, **{k: v for k, v in kw.items() if v is not None}})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> JudgeConfig:
        """The judge of ``env`` (default: the process's), read through ``naru_eval.settings``.

        Precedence, per setting: an override that is given (a CLI option; None means not given),
        then the ``NARU_JUDGE_*`` variable (the base URL: ``NARU_JUDGE_BASE_URL``, then
        ``OPENAI_BASE_URL``), then the field's default. A configured endpoint is never replaced
        by the default one."""
        s = settings() if env is None else Settings.from_env(env)
        openai_url = (openai_base_url(env) or "").strip() or None
        given: dict[str, object] = dict(
            backend=s.judge_backend,
            model=s.judge_model,
            facts_model=s.judge_facts_model,
            base_url=s.judge_base_url or openai_url,
            temperature=s.judge_temperature,
            reasoning_effort=s.judge_reasoning_effort,
            max_completion_tokens=s.judge_max_tokens,
            seed=s.judge_seed,
            concurrency=s.judge_concurrency,
            max_retries=s.judge_max_retries,
            retry_base_delay=s.judge_retry_base_delay,
            retry_max_delay=s.judge_retry_max_delay,
            parse_attempts=s.judge_parse_attempts,
            timeout=s.judge_timeout,
            cache_path=s.judge_cache,
            prices=prices_of(s.judge_prices, "NARU_JUDGE_PRICES") if overrides.get("prices") is None else None,
            batch=s.judge_batch,
        )
        given.update({k: v for k, v in overrides.items() if v is not None})  # an option not given keeps the variable
        try:
            return cls.model_validate({k: v for k, v in given.items() if v is not None})
        except ValidationError as e:  # one line per bad setting, naming it, not pydantic's report
            lines = []
            for err in e.errors():
                msg = str(err.get("msg", e)).removeprefix("Value error, ")
                field = ".".join(str(x) for x in err.get("loc", ()))
                lines.append(f"judge {field}={err.get('input')!r}: {msg}" if field else msg)
            raise JudgeConfigError("; ".join(lines)) from None


def env_fingerprint(env: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """The judge-relevant environment, as a hashable key (for per-process singletons): the
    ``NARU_JUDGE_*`` variables but the key, ``OPENAI_BASE_URL`` and ``NARU_CACHE_DIR``."""
    values = dict(snapshot(env))
    values[OPENAI_BASE_URL] = openai_base_url(env) or ""
    names = sorted(k for k in values if k.startswith("NARU_JUDGE_")) + [OPENAI_BASE_URL, "NARU_CACHE_DIR"]
    return tuple((k, values.get(k, "")) for k in names if "KEY" not in k)
