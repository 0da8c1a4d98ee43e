"""What a Gemini request costs: the price table and the dollar arithmetic of a request, an
explicit context cache and the Batch API.

Prices are data (naru_eval/data_files/prices.json, the ``gemini`` entries; fields documented in
naru_eval.api.prices); an override (``prices=``, ``$NARU_GEMINI_PRICES``, ``estimate-cost
--prices``) takes the one format of :class:`naru_eval.api.prices.PriceTable`. A model without
an entry has an unknown cost (None), never another model's.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from naru_eval.api.prices import PriceTable
from naru_eval.providers.gemini.families import bare_model
from naru_eval.settings import UserError, settings


class GeminiPrices(PriceTable):
    """The Gemini price table: ids matched without case and without the API's ``models/``."""

    fold_case = True

    def key(self, model: str) -> str:
        return bare_model(model)


def load_prices(path: str | os.PathLike[str] | None = None) -> GeminiPrices:
    """The Gemini price table, with ``path`` (else ``$NARU_GEMINI_PRICES``) over the built-in one;
    a bad override is a UserError naming where it came from."""
    spec = path or settings().gemini_prices
    try:
        return GeminiPrices.load("gemini", spec)
    except ValueError as e:
        where = "prices=" if path else "NARU_GEMINI_PRICES"
        raise UserError(f"{where}: {e}") from None


def request_cost(
    prices: Mapping[str, float] | None,
    *,
    prompt_tokens: int,
    output_tokens: int = 0,
    thinking_tokens: int = 0,
    cached_tokens: int = 0,
    audio_tokens: int = 0,
    batch: bool = False,
) -> float | None:
    """Dollars for one request (None without a price). Thinking tokens are billed as output;
    cached tokens at the cached price, split between audio and the rest in proportion.

    ``batch``: the Batch API's prices (``batch_*`` fields; cached tokens without a
    ``batch_cached_input`` price at the batch input price). A model without ``batch_input`` has
    an unknown batch cost (None), never the standard one."""
    if not prices:
        return None
    pre = "batch_" if batch else ""
    if batch and "batch_input" not in prices:
        return None
    long = prompt_tokens > prices.get("long_context_threshold", math.inf)

    def price(name: str, fallback: str | None = None) -> float:
        for key in ([f"{name}_long"] if long else []) + [name] + ([fallback] if fallback else []):
            if pre + key in prices:
                return float(prices[pre + key])
        return price(fallback) if fallback else 0.0

    cached = min(max(0, cached_tokens), prompt_tokens)
    frac = cached / prompt_tokens if prompt_tokens else 0.0
    audio = min(max(0, audio_tokens), prompt_tokens)
    other = prompt_tokens - audio
    dollars = (
        other * (1 - frac) * price("input")
        + audio * (1 - frac) * price("input_audio", "input")
        + other * frac * price("cached_input", "input")
        + audio * frac * price("cached_input_audio", "input_audio")
        + (output_tokens + thinking_tokens) * price("output")
    )
    return dollars / 1_000_000


def cache_storage_cost(prices: Mapping[str, float] | None, tokens: int, hours: float) -> float | None:
    """Dollars for keeping ``tokens`` in an explicit context cache for ``hours`` (None: no
    ``cache_storage_per_hour`` price, an unknown cost)."""
    if not prices or "cache_storage_per_hour" not in prices:
        return None
    return float(prices["cache_storage_per_hour"]) * max(0, tokens) * max(0.0, hours) / 1_000_000


def cache_ttl(
    n_questions: int, latency_s: float, concurrency: int, ttl_min_s: float = 300.0, ttl_max_s: float = 6 * 3600.0
) -> float:
    """Seconds an explicit cache of a video must live to serve its ``n_questions``: the questions
    in rounds of ``concurrency`` at twice ``latency_s`` each (retries, queueing), plus the
    minimum as a margin, at most ``ttl_max_s``. Storage is billed by the hour, so the cache is
    deleted after the last question anyway; the TTL only bounds what a crash leaves behind."""
    rounds = math.ceil(max(1, n_questions) / max(1, concurrency))
    return float(min(ttl_max_s, max(ttl_min_s, ttl_min_s + rounds * 2 * max(0.0, latency_s))))


def cache_min_tokens(prices: Mapping[str, float] | None) -> int | None:
    """The smallest explicit context cache the API accepts for the model (``cache_min_tokens``
    of its price entry); None when the table does not say (the API's 400 then decides)."""
    if not prices or "cache_min_tokens" not in prices:
        return None
    return int(prices["cache_min_tokens"])
