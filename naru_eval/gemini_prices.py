"""Gemini API prices, in US dollars per 1 million tokens: CONFIGURATION, dated, TO BE CHECKED.

This table is data, kept as a Python module so it ships with the package (the wheel carries no
package data for ``naru_eval``). Override it without editing code: point ``NARU_GEMINI_PRICES``
(or ``naru-eval estimate-cost --prices``, or the adapter's ``prices=`` model arg) at a JSON file
with the same shape, ``{"as_of": "...", "source": "...", "models": {name: {field: $/1M}}}``.

Fields (per 1M tokens; a missing field falls back as noted):

* ``input``: prompt tokens (text, image, video frames);
* ``input_audio``: prompt audio tokens (else ``input``);
* ``output``: response tokens, **thinking tokens included** (Google bills thoughts as output);
* ``cached_input`` / ``cached_input_audio``: prompt tokens served from a context cache,
  implicit or explicit (else ``input`` / ``input_audio``);
* ``long_context_threshold``: prompts above this many tokens use the ``*_long`` prices
  (``input_long``, ``output_long``, ``cached_input_long``); absent: one price at any length.

The figures are the paid tier's standard (non-batch) prices as listed on
https://ai.google.dev/gemini-api/docs/pricing around the date below. Prices change (preview models
especially); check them before budgeting a run. Batch mode, about half price, is not used here.
"""

from __future__ import annotations

PRICES_AS_OF = "2025-12-15"
PRICES_SOURCE = "https://ai.google.dev/gemini-api/docs/pricing (paid tier, standard) -- TO BE CHECKED before budgeting"

#: model (as :func:`naru_eval.gemini_cost.canonical_model` names it) -> $ per 1M tokens
PRICES: dict[str, dict[str, float]] = {
    "gemini-3-pro": {
        "input": 2.00,
        "output": 12.00,
        "cached_input": 0.20,
        "long_context_threshold": 200_000,
        "input_long": 4.00,
        "output_long": 18.00,
        "cached_input_long": 0.40,
    },
    "gemini-3-flash": {
        "input": 0.50,
        "input_audio": 1.00,
        "output": 3.00,
        "cached_input": 0.05,
        "cached_input_audio": 0.10,
    },
    "gemini-2.5-pro": {
        "input": 1.25,
        "output": 10.00,
        "cached_input": 0.125,
        "long_context_threshold": 200_000,
        "input_long": 2.50,
        "output_long": 15.00,
        "cached_input_long": 0.25,
    },
    "gemini-2.5-flash": {
        "input": 0.30,
        "input_audio": 1.00,
        "output": 2.50,
        "cached_input": 0.03,
        "cached_input_audio": 0.10,
    },
    "gemini-2.5-flash-lite": {
        "input": 0.10,
        "input_audio": 0.30,
        "output": 0.40,
        "cached_input": 0.01,
        "cached_input_audio": 0.03,
    },
}
