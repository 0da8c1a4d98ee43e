"""The judge client: the openai SDK with structured outputs, bounded, retried, cached, costed.

* Requests go through ``client.chat.completions.with_raw_response.parse(response_format=Model)``:
  the SDK sends the strict JSON schema of the Pydantic model, and the raw completion is kept so
  that an unparseable output is cached and reported, not lost in an exception.
* Every OpenAI-compatible ``base_url`` works; the key comes from ``NARU_JUDGE_API_KEY`` or
  ``OPENAI_API_KEY`` only, and never enters a cache key, a log or a report: an error a server
  answers with is redacted (naru_eval.redaction) before any message is made of it.
* The SDK's own retries are off; transport failures (408/409/429/5xx, timeouts, connection
  errors, a 200 whose body is not JSON) are retried by :mod:`naru_eval.api.retry`, honouring
  ``Retry-After``. Failing for good raises :class:`JudgeUnavailable` (the item is unscored),
  except when the first answered requests all fail with the same client error (a wrong key,
  model or setting): then :class:`~naru_eval.api.retry.ConfigurationError` stops the judging with
  the API's message, and nothing more is sent.
* At most ``concurrency`` requests are in flight per client (a semaphore held per attempt).
* Every output is cached under :func:`request_key`; a cached output is replayed for free.
* Usage (tokens, cached tokens, reasoning tokens), ``system_fingerprint`` and cost are recorded
  per call and summed in a thread-safe :class:`UsageLedger`.
* Batch mode (:class:`BatchMode`, driven by :mod:`naru_eval.judge.batch`): a cache miss of a
  batched purpose is not sent; it is collected (:class:`Deferred`) for a Batch API job whose
  results fill the cache, after which the same code replays them. Nothing else differs: the
  same keys, the same request body, the same parsing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypeVar, cast

from pydantic import BaseModel, Field
from typing_extensions import Required

from naru_eval.api.caller import ApiCaller
from naru_eval.api.lazy import Lazy
from naru_eval.api.limiter import limiter_for
from naru_eval.api.openai_client import TokenUsage, make_openai_client, openai_errors, usage_of
from naru_eval.api.retry import ConfigErrorBreaker, RetryError, is_retryable
from naru_eval.core.json_types import JSON, JSONMapping, JSONObject, as_str, member
from naru_eval.judge.config import JudgeConfig, RequestParams, cost_usd
from naru_eval.judge.schemas import response_format, schema_hash
from naru_eval.redaction import redact
from naru_eval.store.judge_cache import CallRecord, JudgeStore

#: the structured output a call was asked for
SchemaT = TypeVar("SchemaT", bound=BaseModel)

log = logging.getLogger("naru_eval.judge")

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam


class JudgeUnavailable(RuntimeError):
    """The judge could not be reached / kept failing (not cached; the item is unscored)."""


class Deferred(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Batch mode's collecting pass: the request was held for a Batch API job, not sent."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class ChatBody(RequestParams, total=False):
    """The JSON body of a judge request, as ``chat.completions.parse`` sends it (a Batch API
    line's ``body``): the model, the messages, the strict output schema, and the parameters."""

    model: Required[str]
    messages: Required[list[dict[str, str]]]
    response_format: Required[JSONObject]  # the strict JSON schema (judge/schemas.py)


class PendingRequest(NamedTuple):
    """A request held for a Batch API job: its purpose and its body."""

    purpose: str
    body: ChatBody


@dataclass
class BatchMode:
    """The state of batch mode on a client (thread-safe).

    ``collecting``: a cache miss of one of ``purposes`` is recorded in ``pending`` (its key ->
    (purpose, request body)) and raises :class:`Deferred`; otherwise (the final pass) it raises
    :class:`JudgeUnavailable` with the batch's reason (``failures``): nothing is sent live.
    ``fresh``: keys answered by this run's jobs; their first replay after collecting counts as
    the call that was paid for (``cached=False``), not as a free replay.
    """

    purposes: frozenset[str] = frozenset({"verify"})
    collecting: bool = True
    pending: dict[str, PendingRequest] = field(default_factory=dict)
    fresh: set[str] = field(default_factory=set)
    failures: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def is_fresh(self, key: str) -> bool:
        """Whether ``key`` was answered by this run's job; the final pass consumes the mark."""
        with self._lock:
            if key not in self.fresh:
                return False
            if not self.collecting:
                self.fresh.discard(key)
            return True

    def defer(self, key: str, purpose: str, body: ChatBody) -> Deferred:
        with self._lock:
            self.pending.setdefault(key, PendingRequest(purpose, body))
        return Deferred(key)

    def failure(self, key: str) -> str:
        with self._lock:
            return self.failures.get(key, "no Batch API result for this request")


@dataclass
class CallResult:
    """One judge output (fresh or replayed from the cache)."""

    purpose: str
    key: str
    model: str
    content: str | None
    refusal: str | None
    finish_reason: str | None
    usage: TokenUsage
    system_fingerprint: str | None
    response_model: str | None
    cached: bool
    cost_usd: float | None

    def parse(self, schema: type[SchemaT]) -> tuple[SchemaT | None, str | None]:
        """(parsed, None) or (None, why it is unusable)."""
        if self.refusal:
            return None, f"refusal: {self.refusal[:200]}"
        if self.finish_reason == "length":
            return None, "length: the output hit max_completion_tokens"
        if self.finish_reason == "content_filter":
            return None, "content_filter"
        if not self.content or not self.content.strip():
            return None, "empty output"
        try:
            return schema.model_validate_json(self.content), None
        except ValueError as e:  # pydantic.ValidationError and json.JSONDecodeError are ValueErrors
            errors = getattr(e, "errors", None)
            detail = str(e).splitlines()[0]
            if callable(errors):
                first = errors()[0] if errors() else {}
                loc = ".".join(str(x) for x in first.get("loc", ()))
                detail = f"{first.get('msg', detail)}" + (f" at {loc}" if loc else "")
            return None, f"malformed: {detail[:300]}"


class UsageBucket(BaseModel):
    """One purpose's judge calls: how many, their tokens and their cost."""

    calls: int = 0  # requests actually sent and answered
    cached: int = 0  # outputs replayed from the cache
    failed: int = 0  # requests that failed for good (transport)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0  # spent now (fresh calls)
    nominal_cost_usd: float = 0.0  # fresh + replayed: what the judging costs from scratch
    unpriced: int = 0  # calls of a model without a price entry


class LedgerTotal(BaseModel):
    """Every purpose's buckets summed; the costs are None (unknown) when a call had no price."""

    calls: int
    cached: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    # an empty ledger sums to the int 0 (``sum([])``), written as ``0`` as it always was
    cost_usd: float | int | None
    nominal_cost_usd: float | int | None
    unpriced: int


class LedgerSummary(BaseModel):
    """:meth:`UsageLedger.summary`: the totals, per purpose, and the backend fingerprints seen
    (``naru-eval judge score --json`` writes it as ``usage``)."""

    total: LedgerTotal
    by_purpose: dict[str, UsageBucket] = Field(default_factory=dict)
    system_fingerprints: dict[str, int] = Field(default_factory=dict)


@dataclass
class UsageLedger:
    """Thread-safe usage and cost, per purpose (facts, verify, minerva, mcq_fallback)."""

    buckets: dict[str, UsageBucket] = field(default_factory=dict)
    fingerprints: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, r: CallResult) -> None:
        with self._lock:
            b = self.buckets.setdefault(r.purpose, UsageBucket())
            if r.cached:
                b.cached += 1
            else:
                b.calls += 1
                b.prompt_tokens += int(r.usage.get("prompt_tokens") or 0)
                b.completion_tokens += int(r.usage.get("completion_tokens") or 0)
                b.cached_tokens += int(r.usage.get("cached_tokens") or 0)
                b.reasoning_tokens += int(r.usage.get("reasoning_tokens") or 0)
            if r.cost_usd is None:
                b.unpriced += 1
            else:
                b.nominal_cost_usd += r.cost_usd
                if not r.cached:
                    b.cost_usd += r.cost_usd
            if r.system_fingerprint:
                self.fingerprints[r.system_fingerprint] += 1

    def add_failure(self, purpose: str) -> None:
        with self._lock:
            self.buckets.setdefault(purpose, UsageBucket()).failed += 1

    def calls(self, purpose: str | None = None) -> int:
        with self._lock:
            if purpose is not None:
                return self.buckets[purpose].calls if purpose in self.buckets else 0
            return sum(b.calls for b in self.buckets.values())

    def summary(self) -> LedgerSummary:
        with self._lock:
            per = {k: v.model_copy() for k, v in sorted(self.buckets.items())}
            total = LedgerTotal(
                **{name: sum(getattr(b, name) for b in per.values()) for name in UsageBucket.model_fields}
            )
            if total.unpriced:  # part of the cost is unknown: the sums would understate it
                total.cost_usd = total.nominal_cost_usd = None
            return LedgerSummary(total=total, by_purpose=per, system_fingerprints=dict(self.fingerprints))


def request_key(config: JudgeConfig, purpose: str, payload: Mapping[str, JSON | RequestParams]) -> str:
    """Hash of everything that changes a judge output (no secrets: the key is not in config)."""
    desc = {"purpose": purpose, "model": config.model, "base_url": config.base_url, **payload}
    return hashlib.sha256(json.dumps(desc, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def sdk_messages(messages: Sequence[Mapping[str, str]]) -> list[ChatCompletionMessageParam]:
    """The judge's messages as the SDK types them: each a system or a user turn (judge/prompts.py)."""
    return [
        {"role": "system", "content": m["content"]}
        if m["role"] == "system"
        else {"role": "user", "content": m["content"]}
        for m in messages
    ]


def _retryable(exc: BaseException) -> bool:
    return is_retryable(exc) or isinstance(exc, json.JSONDecodeError)


class JudgeClient:
    """One judge model behind one base URL; share it between threads."""

    def __init__(
        self,
        config: JudgeConfig,
        store: JudgeStore,
        *,
        ledger: UsageLedger | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.store = store
        self.ledger = ledger or UsageLedger()
        self.sleep = sleep
        self.policy = config.retry_policy()
        self._client: Lazy[OpenAI] = Lazy(self._make_client)
        self._inflight: dict[str, threading.Lock] = {}  # single flight: one request per key at a time
        self._inflight_lock = threading.Lock()
        #: batch mode (naru_eval.judge.batch sets it for the duration of a batched judging)
        self.batch: BatchMode | None = None
        #: a wrong key, model or setting stops the judging with the API's message (once)
        self.breaker = ConfigErrorBreaker(f"judge {config.model} at {config.base_url}")
        #: the one API path: retries, the endpoint+model's adaptive limit (``concurrency`` its cap), the breaker
        self.caller = ApiCaller(
            "naru judge",
            self.policy,
            catch=openai_errors,
            retryable=_retryable,
            limiter=limiter_for(config.base_url, config.model, config.concurrency),
            breaker=self.breaker,
            warn=log.warning,
            sleep=lambda s: self.sleep(s),
        )

    @property
    def client(self) -> OpenAI:
        """The ``openai.OpenAI`` client, built on first use (SDK retries off)."""
        return self._client.get()

    def _make_client(self) -> OpenAI:
        return make_openai_client(
            self.config.base_url,
            timeout=self.config.timeout,
            key_env=("NARU_JUDGE_API_KEY", "OPENAI_API_KEY"),
            who="naru judge",
            info=log.info,
        )

    def key_for(
        self,
        purpose: str,
        messages: Sequence[Mapping[str, str]],
        schema: type[BaseModel],
        *,
        prompt_version: str,
        params: RequestParams,
        extra: JSONMapping | None = None,
    ) -> str:
        return request_key(
            self.config,
            purpose,
            {
                "settings": params,  # the key's field name is kept: cached outputs stay valid
                "messages": [dict(m) for m in messages],
                "schema": schema.__name__,
                "schema_hash": schema_hash(schema),
                "prompt_version": prompt_version,
                **(dict(extra) if extra else {}),
            },
        )

    def request_body(
        self, messages: Sequence[Mapping[str, str]], schema: type[BaseModel], params: RequestParams
    ) -> ChatBody:
        """The JSON body of the request, as ``chat.completions.parse`` sends it (a Batch API line)."""
        return {
            "model": self.config.model,
            "messages": [dict(m) for m in messages],
            "response_format": response_format(schema),
            **params,
        }

    def call(
        self,
        purpose: str,
        messages: Sequence[Mapping[str, str]],
        schema: type[BaseModel],
        *,
        prompt_version: str,
        temperature: float | None = None,
        extra_key: JSONMapping | None = None,
    ) -> CallResult:
        """One structured-output request (or its cached output). Raises JudgeUnavailable."""
        params = self.config.request_params(temperature=temperature)
        key = self.key_for(purpose, messages, schema, prompt_version=prompt_version, params=params, extra=extra_key)
        with self._inflight_lock:
            gate = self._inflight.setdefault(key, threading.Lock())
        with gate:  # an identical request already in flight is waited for, then replayed from the cache
            try:
                return self._call(purpose, key, messages, schema, params)
            finally:
                with self._inflight_lock:
                    self._inflight.pop(key, None)

    def _call(
        self,
        purpose: str,
        key: str,
        messages: Sequence[Mapping[str, str]],
        schema: type[BaseModel],
        params: RequestParams,
    ) -> CallResult:
        batch = self.batch if self.batch is not None and purpose in self.batch.purposes else None
        fresh = batch is not None and batch.is_fresh(key)
        quiet = batch is not None and batch.collecting  # a collecting pass is not the run's usage
        if fresh or not self.config.refresh:
            hit = self.store.get_call(key)
            if hit is not None:
                result = self._result(purpose, key, hit, cached=not fresh)
                if not quiet:
                    self.ledger.add(result)
                return result
        if batch is not None:  # batch mode sends nothing live
            if batch.collecting:
                raise batch.defer(key, purpose, self.request_body(messages, schema, params))
            raise JudgeUnavailable(f"judge {self.config.model} (Batch API): {batch.failure(key)}")

        def attempt() -> JSONObject:
            raw = self.client.chat.completions.with_raw_response.parse(
                model=self.config.model,
                messages=sdk_messages(messages),
                response_format=schema,
                **params,  # type: ignore[arg-type]  # reasoning_effort: an SDK value (JudgeConfig checks it)
            )
            return raw.http_response.json()

        try:
            body = self.caller.call(attempt, purpose, on_failure=lambda e: self.ledger.add_failure(purpose)).value
        except RetryError as e:  # the caller's breaker raised ConfigurationError if the configuration is wrong
            raise JudgeUnavailable(redact(f"judge {self.config.model} at {self.config.base_url}: {e}")) from e
        record = self.record_of(body)
        self.store.put_call(key, purpose, self.config.model, record)
        result = self._result(purpose, key, record, cached=False)
        self.ledger.add(result)
        return result

    @staticmethod
    def record_of(body: JSONMapping) -> CallRecord:
        """What is kept of a raw chat.completion body (live, or one line of a batch's output)."""
        choices = body.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = member(choice, "message")
        return {
            "content": as_str(member(message, "content")),
            "refusal": as_str(member(message, "refusal")),
            "finish_reason": as_str(member(choice, "finish_reason")) if choices else "no_choices",
            "usage": usage_of(body.get("usage")),
            "system_fingerprint": as_str(body.get("system_fingerprint")),
            "response_model": as_str(body.get("model")),
        }

    def _result(self, purpose: str, key: str, rec: CallRecord, *, cached: bool) -> CallResult:
        usage = cast(TokenUsage, dict(rec.get("usage") or {}))  # the cache's JSON, as usage_of wrote it
        return CallResult(
            purpose=purpose,
            key=key,
            model=self.config.model,
            content=rec.get("content"),
            refusal=rec.get("refusal"),
            finish_reason=rec.get("finish_reason"),
            usage=usage,
            system_fingerprint=rec.get("system_fingerprint"),
            response_model=rec.get("response_model"),
            cached=cached,
            cost_usd=cost_usd(self.config.model, usage, self.config.prices),
        )
