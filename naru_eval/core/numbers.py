"""The one number formatter of every table and report: missing values read ``N/A``.

A metric is missing (None, or NaN from an empty scope) when no question is in its scope; every
table prints that the same way, so one function writes them all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

NA = "N/A"


def fmt_num(v: float | None, digits: int = 1, signed: bool = False, scale: float = 1.0, suffix: str = "") -> str:
    """``v * scale`` with ``digits`` decimals (``+`` sign when ``signed``) and ``suffix``; ``N/A``
    for None or NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return NA
    return f"{float(v) * scale:{'+' if signed else ''}.{digits}f}{suffix}"


def fmt_ci(ci: Sequence[float] | None, digits: int = 1, signed: bool = False) -> str:
    """``[lo, hi]``, or the empty string when there is no interval."""
    if not ci:
        return ""
    return f"[{fmt_num(ci[0], digits, signed)}, {fmt_num(ci[1], digits, signed)}]"
