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
:func:`naru_eval.providers.gemini.pricing.request_cost`:

* ``input``: prompt tokens (text, image, video frames); ``input_audio``: prompt audio tokens
  (else ``input``);
* ``output``: response tokens, **thinking tokens included** (Google bills thoughts as output);
* ``cached_input`` / ``cached_input_audio``: prompt tokens served from a context cache,
  implicit or explicit (else ``input`` / ``input_audio``);
* ``long_context_threshold``: prompts above this many tokens use the ``*_long`` prices
  (``input_long``, ``output_long``, ``cached_input_long``); absent: one price at any length.

The Gemini figures are the paid tier's standard (non-batch) prices. The file is read on first
use, not at import.

One override format serves both providers (``NARU_JUDGE_PRICES`` / ``naru-eval judge --prices``
and ``NARU_GEMINI_PRICES`` / ``prices=`` / ``estimate-cost --prices``): a JSON object, inline or
in a file, shaped like one provider's table of this file, ``{model: {field: USD per 1M tokens,
"aliases": [...], "as_of": ..., "source": ...}}``. Its entries replace the built-in entries of
the same name; every other built-in entry stays (:meth:`PriceTable.load`).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Container, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import ClassVar, TypeVar

from naru_eval.core.json_types import JSONMapping, JSONObject, number

#: fields of an entry that are not prices
META_FIELDS = frozenset({"as_of", "source", "aliases", "note"})
_SNAPSHOT = re.compile(r"^(?P<base>.+)-\d{4}-\d{2}-\d{2}$")


@functools.lru_cache(maxsize=1)
def _raw() -> JSONObject:
    text = resources.files("naru_eval").joinpath("data_files/prices.json").read_text(encoding="utf-8")
    return json.loads(text)


def entries(provider: str) -> dict[str, JSONObject]:
    """``model -> entry`` (prices, ``as_of``, ``source``, ``aliases``) of one provider; a copy."""
    table = _raw().get(provider)
    if not isinstance(table, Mapping):
        raise KeyError(f"no price table for provider {provider!r} in naru_eval/data_files/prices.json")
    return {k: dict(v) for k, v in table.items() if isinstance(v, Mapping)}


def numbers(entry: JSONMapping) -> dict[str, float]:
    """The price fields of an entry (USD per 1M tokens; thresholds in tokens)."""
    return {k: number(v) for k, v in entry.items() if k not in META_FIELDS}


def price_table(provider: str) -> dict[str, dict[str, float]]:
    """``model -> prices`` of one provider, aliases included as keys of their own."""
    return expand(entries(provider))


def expand(table: Mapping[str, JSONMapping]) -> dict[str, dict[str, float]]:
    """``model -> prices`` of entries as the file holds them: each alias a key of its own, so
    :func:`match` sees them (the built-in table and a user's override file alike)."""
    out: dict[str, dict[str, float]] = {}
    for key, entry in table.items():
        out[str(key)] = numbers(entry)
        aliases = entry.get("aliases")
        for alias in aliases if isinstance(aliases, list) else ():
            out[str(alias)] = out[str(key)]
    return out


def match(model: str, keys: Container[str]) -> str | None:
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


PriceTableT = TypeVar("PriceTableT", bound="PriceTable")


@dataclass(frozen=True)
class PriceTable:
    """``model -> prices`` of one provider (aliases as keys of their own), with the date and
    source they came from."""

    models: dict[str, dict[str, float]]
    as_of: str
    source: str
    #: whether model ids are matched case-insensitively (keys are stored lower-cased)
    fold_case: ClassVar[bool] = False

    def key(self, model: str) -> str:
        """``model`` as the table's keys spell it."""
        return model.strip().lower() if self.fold_case else model.strip()

    def for_model(self, model: str) -> dict[str, float] | None:
        """The model's own prices (:func:`match`: its id, an alias, or a dated snapshot of
        either); None, an unknown cost, for a model without an entry."""
        key = match(self.key(model), self.models)
        return self.models[key] if key is not None else None

    @classmethod
    def load(cls: type[PriceTableT], provider: str, override: str | os.PathLike[str] | None = None) -> PriceTableT:
        """The built-in table of ``provider``, with ``override`` (inline JSON or a file, the one
        format of this module's docstring) replacing the entries it names."""
        table = entries(provider)
        as_of, source = provenance(provider)
        source += " -- TO BE CHECKED before budgeting"
        if override:
            extra = read_override(override)
            table.update(extra)
            dates = sorted(str(e["as_of"]) for e in extra.values() if "as_of" in e)
            as_of = dates[0] if dates else as_of
            where = "inline prices" if str(override).lstrip().startswith("{") else str(override)
            source = f"{where} over {source}"
        models = expand(table)
        if cls.fold_case:
            models = {k.lower(): v for k, v in models.items()}
        return cls(models, as_of, source)


def read_override(spec: str | os.PathLike[str]) -> dict[str, JSONObject]:
    """A price override (inline JSON or a path to a JSON file), checked: every entry is an object
    with ``input`` and ``output`` prices. ValueError naming what is wrong and the format."""
    text = str(spec)
    shape = '{model: {"input": ..., "output": ..., "aliases": [...]}} (USD per 1M tokens)'
    inline = text.lstrip().startswith(("{", "["))
    try:
        raw = json.loads(text if inline else Path(spec).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"prices {text[:200]}: not JSON ({e.msg} at line {e.lineno}); {shape}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"prices {text}: neither inline JSON nor a readable JSON file ({e}); {shape}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"prices {text}: must be a JSON object {shape}")
    if isinstance(raw.get("models"), dict) and all(isinstance(v, dict) for v in raw["models"].values()):
        raise ValueError(
            f'prices {text}: the {{"as_of", "source", "models": {{...}}}} envelope is no longer read; write the '
            f'entries at the top level, {shape}, each with its own "as_of" and "source"'
        )
    for model, entry in raw.items():
        if not isinstance(entry, dict) or "input" not in entry or "output" not in entry:
            raise ValueError(f"prices {text}: {model!r} needs 'input' and 'output' (USD per 1M tokens); {shape}")
        for name in ("input", "cached_input", "output", "batch_discount"):
            value = entry.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0
            ):
                raise ValueError(f"prices {text}: {model!r} {name} must be a finite number >= 0, got {value!r}")
    return {str(k): dict(v) for k, v in raw.items()}
