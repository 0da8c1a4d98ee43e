"""What a Gemini run used and cost: per-request sums (:class:`UsageTotals`), the store's totals
per run key (:func:`usage_from_store`), and the run's usage summary (:class:`UsageSummary`,
written to ``gemini_usage_<timestamp>.json`` by :class:`UsageReporter`).

Every answer the adapter stores carries its tokens and cost in the response store's ``usage``
column (providers/gemini/request.py ``usage_of``), so a run's totals survive crashes and reruns;
the summary file is the human-readable account of one ``generate_until`` pass.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from loguru import logger
from pydantic import BaseModel, Field, field_serializer

from naru_eval.core.json_types import JSONObject
from naru_eval.providers.gemini.batch import BatchStats
from naru_eval.providers.gemini.caching import ContextCacheStats
from naru_eval.providers.gemini.preflight import Calibration, PreflightReport
from naru_eval.providers.gemini.pricing import cache_storage_cost
from naru_eval.redaction import redact_data
from naru_eval.store.gemini_jobs import CacheRecord
from naru_eval.store.responses import Usage, usage_by_run

USAGE_FIELDS = ("input_tokens", "output_tokens", "thinking_tokens", "cached_tokens", "total_tokens")


class UsageTotals(BaseModel):
    """Summed usage of a set of requests (answers and failures that came back with usage)."""

    requests: int = 0
    ok: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0  # requests with tokens but no price
    by_modality: dict[str, int] = Field(default_factory=dict)

    def add(self, usage: Usage | None, ok: bool) -> None:
        """Count one request and its ``usage`` (an answer's :class:`GeminiUsage`, or as stored;
        None: a failure without a reply)."""
        self.requests += 1
        self.ok += int(ok)
        self.failed += int(not ok)
        if not usage:
            return
        for name in USAGE_FIELDS:
            setattr(self, name, getattr(self, name) + _count(usage.get(name)))
        by = usage.get("input_by_modality")
        for modality, n in by.items() if isinstance(by, Mapping) else ():
            self.by_modality[modality] = self.by_modality.get(modality, 0) + _count(n)
        cost = usage.get("cost_usd")
        if cost is not None:
            self.cost_usd += float(cost) if isinstance(cost, (int, float, str)) else 0.0
        elif usage.get("input_tokens"):
            self.cost_unknown += 1

    @classmethod
    def combined(cls, parts: Iterable[UsageTotals]) -> UsageTotals:
        """The sum of several totals (one run key's each): one budget over every run key."""
        out = cls()
        for part in parts:
            for name in ("requests", "ok", "failed", *USAGE_FIELDS, "cost_usd", "cost_unknown"):
                setattr(out, name, getattr(out, name) + getattr(part, name))
            for modality, n in part.by_modality.items():
                out.by_modality[modality] = out.by_modality.get(modality, 0) + n
        return out

    @field_serializer("cost_usd")
    def _round(self, v: float) -> float:
        """As written to JSON (``model_dump``): rounded to a micro-dollar."""
        return round(v, 6)


def _count(value: object) -> int:
    """A token count of a usage record (0 when absent)."""
    return int(value) if isinstance(value, (int, float, str)) and value else 0


def usage_from_store(
    path: str | os.PathLike[str], run_keys: str | Iterable[str] | None = None
) -> dict[str, UsageTotals]:
    """Usage summed per run key from a response store (``responses.usage``), read-only;
    ``run_keys``: one run key or several (None: every run key of the store).

    A run's totals survive crashes and reruns: a resumed run's answers from earlier runs count.
    """
    keys = None if run_keys is None else [run_keys] if isinstance(run_keys, str) else list(run_keys)
    out: dict[str, UsageTotals] = {}
    for rk, rows in usage_by_run(path, keys).items():
        totals = out[rk] = UsageTotals()
        for row in rows:
            totals.add(row.usage, row.status == "ok")
    return out


class CacheStorage(BaseModel):
    """The explicit caches one run key made (earlier runs' too): count, token-hours and storage
    cost (None where the model has no storage price)."""

    caches: int = 0
    token_hours: float = 0.0
    storage_cost_usd: float | None = 0.0


def cache_storage_by_run_key(
    records: Iterable[CacheRecord], run_keys: Sequence[str], price: Mapping[str, float] | None
) -> dict[str, CacheStorage]:
    """Per run key of ``run_keys``, what its cache records cost to store."""
    out: dict[str, CacheStorage] = {}
    for rec in records:
        if rec.run_key not in run_keys:
            continue
        row = out.setdefault(rec.run_key, CacheStorage())
        hours = rec.stored_hours()
        cost = cache_storage_cost(price, rec.tokens, hours)
        row.caches += 1
        row.token_hours = round(row.token_hours + rec.tokens * hours, 6)
        row.storage_cost_usd = (
            None if cost is None or row.storage_cost_usd is None else round(row.storage_cost_usd + cost, 6)
        )
    return out


def cost_with_caches(totals: UsageTotals, caches: ContextCacheStats) -> float | None:
    """The answers' cost plus the caches' creation and storage (None where one is unknown)."""
    if totals.cost_unknown or caches.creation_cost_usd is None or caches.storage_cost_usd is None:
        return None
    return round(totals.cost_usd + caches.creation_cost_usd + caches.storage_cost_usd, 6)


class PriceSource(BaseModel):
    as_of: str
    source: str
    model: dict[str, float] | None = Field(description="the model's price entry (None: unknown cost)")


class UsageSummary(BaseModel):
    """``gemini_usage_<timestamp>.json``: one ``generate_until`` pass of ``naru_gemini``."""

    model: str
    adapter: str
    config: JSONObject = Field(description="the adapter's describe(): what changes the answers")
    run_keys: list[str]
    store: str | None
    started: str
    finished: str
    requests_sent: int
    answers_reused_from_store: int
    this_run: UsageTotals
    store_totals_by_run_key: dict[str, UsageTotals] = Field(default_factory=dict)
    store_totals_error: str | None = None
    failures: dict[str, str]
    uploads: dict[str, int]
    upload_registry: str | None
    preflight: PreflightReport | None
    calibration: Calibration | None
    adaptive_concurrency: dict[str, float | int]
    prices: PriceSource
    context_caches: ContextCacheStats
    context_cache_storage_by_run_key: dict[str, CacheStorage] = Field(default_factory=dict)
    context_cache_storage_error: str | None = None
    cost_usd_with_caches: float | None
    batch: BatchStats | None


@dataclass
class RunState:
    """What one ``generate_until`` pass accumulates for its usage summary."""

    started: float = field(default_factory=time.time)
    pending: int = 0
    remaining: int = 0
    run_keys: list[str] = field(default_factory=list)
    totals: UsageTotals = field(default_factory=UsageTotals)
    failures: dict[str, str] = field(default_factory=dict)
    preflight: PreflightReport | None = None
    calibration: Calibration | None = None
    estimates: dict[tuple[str, str], int] = field(default_factory=dict)  # (task, question id)
    durations: dict[str, float] = field(default_factory=dict)  # video -> seconds
    written: Path | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answered(self, usage: Usage | None) -> None:
        with self.lock:
            self.totals.add(usage, ok=True)

    def failed(self, question_id: str, reason: str, usage: Usage | None) -> None:
        with self.lock:
            self.failures[question_id] = reason
            self.totals.add(usage, ok=False)

    def one_done(self) -> bool:
        """Count one question done; True for the pass's last one."""
        with self.lock:
            self.remaining -= 1
            return self.remaining == 0


def usage_path(usage_dir: Path | None, cache_dir: str | None, store_dir: Path) -> Path:
    """Where the summary goes: ``usage_dir``, else ``$NARU_CACHE_DIR``, else beside the store."""
    base = usage_dir if usage_dir is not None else Path(cache_dir) if cache_dir else store_dir
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    return base / f"gemini_usage_{stamp}.json"


def write_summary(path: Path, summary: UsageSummary) -> bool:
    """Write ``summary`` as JSON; False (a warning) when the file cannot be written: the summary
    must never break a run."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = redact_data(summary.model_dump(mode="json"))  # its failures quote the API, which may echo the key
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    except OSError as e:
        logger.warning(f"naru_gemini: could not write the usage summary to {path}: {e}")
        return False
    return True


def log_summary(summary: UsageSummary, path: Path) -> None:
    """One line in the run's log: requests, tokens, cost, caches and uploads."""
    t, up = summary.this_run, summary.uploads
    cost = f"${t.cost_usd:,.4f}" if t.cost_unknown == 0 else f"${t.cost_usd:,.4f} (+{t.cost_unknown} unpriced)"
    logger.info(
        f"naru_gemini: {t.requests} request(s) ({t.ok} answered, {t.failed} failed): "
        f"{t.input_tokens:,} input tokens {t.by_modality}, {t.output_tokens:,} output, "
        f"{t.thinking_tokens:,} thinking, {t.cached_tokens:,} cached (the API's count; "
        f"{summary.context_caches.created} explicit cache(s)); cost {cost} at prices as of "
        f"{summary.prices.as_of} (to be checked); uploads: {up.get('uploaded', 0)} new "
        f"({up.get('bytes_sent', 0):,} bytes), {up.get('reused', 0)} reused. Usage: {path}"
    )


class UsageReporter:
    """Writes a pass's :class:`UsageSummary` once its last question is done, refreshes it with
    the store's final totals, and writes an unfinished pass's at exit (a crash, a stop).

    ``build`` makes the summary of a :class:`RunState` (the adapter knows its parts); ``path``
    says where a new summary goes; ``on_last`` runs when the pass's last question is done,
    before the summary is written (batch mode marks its jobs consumed)."""

    def __init__(
        self,
        build: Callable[[RunState], UsageSummary],
        path: Callable[[], Path],
        on_last: Callable[[], None] = lambda: None,
    ) -> None:
        self.build = build
        self.path = path
        self.on_last = on_last
        self.run: RunState | None = None

    def start(self, pending: int) -> RunState:
        """A new pass of ``pending`` questions (an unfinished earlier pass is written first)."""
        self.write_if_pending()
        self.run = RunState(pending=pending, remaining=pending)
        return self.run

    def one_done(self) -> None:
        if self.run is not None and self.run.one_done():
            self.on_last()
            self.write()

    def write(self) -> Path | None:
        run = self.run
        if run is None or run.written is not None or run.pending == 0:
            return None
        summary = self.build(run)
        path = self.path()
        if not write_summary(path, summary):
            return None
        run.written = path
        log_summary(summary, path)
        return path

    def refresh(self) -> None:
        """Rewrite the written summary with the store's totals as they are now (the last answer
        is stored just after the summary was first written)."""
        run = self.run
        if run is None or run.written is None:
            return
        write_summary(run.written, self.build(run))

    def write_if_pending(self) -> None:
        """At exit and before the next pass: write the summary of an unfinished pass, or refresh
        a written one with the store's final totals."""
        run = self.run
        if run is None or not run.pending:
            return
        if run.written is not None:
            self.refresh()
        elif run.remaining < run.pending:
            self.write()


__all__ = [
    "CacheStorage",
    "PriceSource",
    "RunState",
    "UsageReporter",
    "UsageSummary",
    "UsageTotals",
    "cache_storage_by_run_key",
    "cost_with_caches",
    "usage_from_store",
]
