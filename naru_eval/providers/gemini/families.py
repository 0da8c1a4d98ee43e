"""What each Gemini model takes: its row of the model tables, its context window, its thinking
settings and its media resolutions.

A model id is looked up by family (:func:`canonical_model`: the longest table key prefixing it),
so a dated preview of a known model is checked like the model itself. Prices never go through
this: a model's price is its own entry's (naru_eval.providers.gemini.pricing, exact matching).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: input-token limit (context window) per model, from the ai.google.dev model pages
CONTEXT_WINDOWS: dict[str, int] = {
    "gemini-3-pro": 1_048_576,
    "gemini-3-flash": 1_048_576,
    "gemini-3.1-pro": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
}
DEFAULT_CONTEXT_WINDOW = 1_048_576

MEDIA_RESOLUTIONS = ("default", "low", "medium", "high")
#: the API enum value of each media resolution ("default" is not sent)
MEDIA_RESOLUTION_ENUM = {
    "low": "MEDIA_RESOLUTION_LOW",
    "medium": "MEDIA_RESOLUTION_MEDIUM",
    "high": "MEDIA_RESOLUTION_HIGH",
}


@dataclass(frozen=True)
class ThinkingRule:
    """The thinking setting one model takes: ``levels`` (Gemini 3: ``thinkingLevel`` only), or an
    explicit ``budget`` range (Gemini 2.5: ``thinkingBudget`` only; ``-1``, dynamic, is always
    allowed, ``0``, off, only where ``off``)."""

    levels: tuple[str, ...] | None = None
    budget: tuple[int, int] | None = None
    off: bool = False


#: the thinking settings each model takes (ai.google.dev "Gemini thinking" and Gemini 3 guide,
#: read 2026-12): Gemini 2.5 takes ``thinkingBudget`` only, Gemini 3 ``thinkingLevel`` only; the
#: other one, or a value outside these, is a 400 on every request.
THINKING: dict[str, ThinkingRule] = {
    "gemini-2.5-pro": ThinkingRule(budget=(128, 32_768), off=False),
    "gemini-2.5-flash": ThinkingRule(budget=(1, 24_576), off=True),
    "gemini-2.5-flash-lite": ThinkingRule(budget=(512, 24_576), off=True),
    "gemini-3-pro": ThinkingRule(levels=("low", "high")),
    "gemini-3.1-pro": ThinkingRule(levels=("low", "medium", "high")),
    "gemini-3-flash": ThinkingRule(levels=("minimal", "low", "medium", "high")),
}
#: every level the SDK's ``ThinkingLevel`` enum has (3.6.1), minus UNSPECIFIED; a test checks it
THINKING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")
#: families without thinking: any thinking setting is refused
_NO_THINKING = re.compile(r"gemini-(1\.|2\.0)")


def bare_model(model: str) -> str:
    """A model id as the tables spell it: lower case, without the API's ``models/`` prefix."""
    name = model.strip().lower()
    return name.split("/", 1)[1] if name.startswith("models/") else name


def canonical_model(model: str) -> str:
    """The row of the model tables (context windows, thinking) a model id falls under:
    ``models/gemini-3-flash-preview`` -> ``gemini-3-flash``.

    A family rule: the longest key of :data:`CONTEXT_WINDOWS` / :data:`THINKING` that prefixes
    the id wins, so ``gemini-2.5-flash-lite-preview-09-2025`` is ``gemini-2.5-flash-lite``; an id
    matching no key is returned bare. Prices never go through this: a model's price is its own
    entry's (:meth:`~naru_eval.providers.gemini.pricing.PriceTable.for_model`, exact matching).
    """
    name = bare_model(model)
    for key in sorted(set(CONTEXT_WINDOWS) | set(THINKING), key=len, reverse=True):
        if name == key or name.startswith(key + "-"):
            return key
    return name


def family(model: str) -> str:
    """``gemini-3`` for Gemini 3.x (and later), ``gemini-2`` otherwise (the token table's rows)."""
    m = re.match(r"gemini-(\d+)", canonical_model(model))
    return "gemini-3" if m and int(m.group(1)) >= 3 else "gemini-2"


def context_window(model: str) -> tuple[int, bool]:
    """(input-token limit, whether the model is in the table)."""
    key = canonical_model(model)
    if key in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[key], True
    return DEFAULT_CONTEXT_WINDOW, False


def check_thinking(model: str, budget: int | None, level: str | None) -> str | None:
    """Refuse a thinking setting ``model`` does not take (ValueError naming what it takes).

    Returns a warning for a model not in :data:`THINKING` (a newer family): its setting is sent
    as given, since refusing would block every model released after this table.
    """
    if budget is None and level is None:
        return None
    key = canonical_model(model)
    given = f"thinking_budget={budget}" if budget is not None else f"thinking_level={level}"
    if _NO_THINKING.match(key):
        raise ValueError(f"naru_gemini: {model} has no thinking; drop {given}")
    rule = THINKING.get(key)
    if rule is None:
        return (
            f"naru_gemini: {model} is not in the thinking table (Gemini 2.5: thinking_budget, Gemini 3: "
            f"thinking_level); {given} is sent as given, and the API answers 400 if the model does not take it"
        )
    if rule.levels is not None:
        allowed = ", ".join(rule.levels)
        if level is None:
            raise ValueError(
                f"naru_gemini: {model} takes thinking_level ({allowed}), not thinking_budget; thinking cannot be "
                "turned off with a budget (the API answers 400 on every request)"
            )
        if level not in rule.levels:
            raise ValueError(f"naru_gemini: {model} takes thinking_level in ({allowed}), got {level!r}")
        return None
    assert rule.budget is not None  # a rule has levels or a budget
    lo, hi = rule.budget
    allowed = f"-1 (dynamic){', 0 (off)' if rule.off else ''} or {lo}..{hi}"
    if budget is None:
        raise ValueError(f"naru_gemini: {model} takes thinking_budget ({allowed}), not thinking_level")
    if budget == -1 or (budget == 0 and rule.off) or lo <= budget <= hi:
        return None
    off = "" if rule.off else f" ({model} cannot turn thinking off)"
    raise ValueError(f"naru_gemini: {model} takes thinking_budget {allowed}, got {budget}{off}")


def normalise_resolution(value: object) -> str:
    """A media resolution as the tables spell it (``MEDIA_RESOLUTION_LOW``, ``Low`` -> ``low``;
    unset or ``unspecified`` -> ``default``); ValueError for anything else."""
    text = "default" if value in (None, "", "none", "None") else str(value).strip().lower()
    text = text.removeprefix("media_resolution_")
    if text == "unspecified":
        text = "default"
    if text not in MEDIA_RESOLUTIONS:
        raise ValueError(f"media_resolution must be one of {MEDIA_RESOLUTIONS}, got {value!r}")
    return text
