"""Every API price naru-eval knows, read from one data file shipped with the package.

``naru_eval/data_files/prices.json`` holds, per provider (``openai`` for the judge, ``gemini``
for ``naru_gemini``), one entry per model: USD per 1M tokens, the date the price was read
(``as_of``) and the page it was read from (``source``), plus optional ``aliases``. Prices are
data, not code: change the file (or override it, see docs/judge.md and docs/gemini.md), never a
number in a module.

Matching is exact (:func:`match`): a model id takes an entry's price when it is the entry's key,
one of its aliases, or the key followed by a dated snapshot suffix ``-YYYY-MM-DD`` (OpenAI's
``gpt-4o-2024-08-06``). Nothing else matches, so ``gpt-5.5-pro`` never takes ``gpt-5.5``'s price
and a model without an entry has an *unknown* cost (None), never another model's.

Fields of a ``gemini`` entry (per 1M tokens; a missing field falls back as noted), read by
:func:`naru_eval.providers.gemini.cost.request_cost`:

* ``input``: prompt tokens (text, image, video frames); ``input_audio``: prompt audio tokens
  (else ``input``);
* ``output``: response tokens, **thinking tokens included** (Google bills thoughts as output);
* ``cached_input`` / ``cached_input_audio``: prompt tokens served from a context cache,
  implicit or explicit (else ``input`` / ``input_audio``);
* ``long_context_threshold``: prompts above this many tokens use the ``*_long`` prices
  (``input_long``, ``output_long``, ``cached_input_long``); absent: one price at any length.

The Gemini figures are the paid tier's standard (non-batch) prices. The file is read on first
use, not at import.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

#: fields of an entry that are not prices
META_FIELDS = frozenset({"as_of", "source", "aliases", "note"})
_SNAPSHOT = re.compile(r"^(?P<base>.+)-\d{4}-\d{2}-\d{2}$")


@functools.lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    text = resources.files("naru_eval").joinpath("data_files/prices.json").read_text(encoding="utf-8")
    return json.loads(text)


def entries(provider: str) -> dict[str, dict[str, Any]]:
    """``model -> entry`` (prices, ``as_of``, ``source``, ``aliases``) of one provider; a copy."""
    table = _raw().get(provider)
    if not isinstance(table, Mapping):
        raise KeyError(f"no price table for provider {provider!r} in naru_eval/data_files/prices.json")
    return {k: dict(v) for k, v in table.items()}


def numbers(entry: Mapping[str, Any]) -> dict[str, float]:
    """The price fields of an entry (USD per 1M tokens; thresholds in tokens)."""
    return {k: float(v) for k, v in entry.items() if k not in META_FIELDS}


def price_table(provider: str) -> dict[str, dict[str, float]]:
    """``model -> prices`` of one provider, aliases included as keys of their own."""
    return expand(entries(provider))


def expand(table: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``model -> prices`` of entries as the file holds them: each alias a key of its own, so
    :func:`match` sees them (the built-in table and a user's override file alike)."""
    out: dict[str, dict[str, float]] = {}
    for key, entry in table.items():
        out[str(key)] = numbers(entry)
        for alias in entry.get("aliases") or ():
            out[str(alias)] = out[str(key)]
    return out


def match(model: str, keys: Any) -> str | None:
    """The key of ``keys`` whose price ``model`` takes: exact, else ``key-YYYY-MM-DD``; else None."""
    name = model.strip()
    if name in keys:
        return name
    m = _SNAPSHOT.match(name)
    if m and m.group("base") in keys:
        return m.group("base")
    return None


def provenance(provider: str) -> tuple[str, str]:
    """(oldest ``as_of``, the distinct sources joined): one line for a report."""
    rows = entries(provider).values()
    dates = sorted(str(e.get("as_of", "?")) for e in rows)
    sources = sorted({str(e.get("source", "?")) for e in rows})
    return (dates[0] if dates else "?"), "; ".join(sources)
