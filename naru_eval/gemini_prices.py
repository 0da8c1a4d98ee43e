"""Gemini API prices, in US dollars per 1 million tokens: read from the package's price data.

The numbers live in ``naru_eval/data_files/prices.json`` (provider ``gemini``), each with the
date it was read and its source page (see :mod:`naru_eval.prices`); this module keeps the names
``naru_eval.gemini_cost`` reads (``PRICES``, ``PRICES_AS_OF``, ``PRICES_SOURCE``), loaded on first
use. Override the table without editing anything: point ``NARU_GEMINI_PRICES`` (or
``naru-eval estimate-cost --prices``, or the adapter's ``prices=`` model arg) at a JSON file
``{"as_of": "...", "source": "...", "models": {name: {field: $/1M}}}``.

Fields (per 1M tokens; a missing field falls back as noted):

* ``input``: prompt tokens (text, image, video frames);
* ``input_audio``: prompt audio tokens (else ``input``);
* ``output``: response tokens, **thinking tokens included** (Google bills thoughts as output);
* ``cached_input`` / ``cached_input_audio``: prompt tokens served from a context cache,
  implicit or explicit (else ``input`` / ``input_audio``);
* ``long_context_threshold``: prompts above this many tokens use the ``*_long`` prices
  (``input_long``, ``output_long``, ``cached_input_long``); absent: one price at any length.

The figures are the paid tier's standard (non-batch) prices; check them before budgeting a run.
Batch mode, about half price, is not used here.
"""

from __future__ import annotations

from typing import Any

from naru_eval import prices as _prices


def __getattr__(name: str) -> Any:
    """``PRICES``, ``PRICES_AS_OF`` and ``PRICES_SOURCE``, read from the data file on first use."""
    if name == "PRICES":
        return _prices.price_table("gemini")
    if name == "PRICES_AS_OF":
        return _prices.provenance("gemini")[0]
    if name == "PRICES_SOURCE":
        return _prices.provenance("gemini")[1] + " -- TO BE CHECKED before budgeting"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
