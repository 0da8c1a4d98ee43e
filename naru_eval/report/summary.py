"""The metrics summary table (``naru-eval score``, ``naru-eval demo``): the paper's table II columns."""

from __future__ import annotations

from collections.abc import Sequence

from naru_eval.core.numbers import fmt_ci, fmt_num
from naru_eval.core.scoring import METRICS


def _fmt(v: float | None, ci: Sequence[float] | None = None) -> str:
    return f"{fmt_num(v)} {fmt_ci(ci)}" if v is not None and ci else fmt_num(v)


def metrics_table(
    rows: dict[str, dict[str, float | None]], cis: dict[str, dict[str, Sequence[float] | None]] | None = None
) -> str:
    """A Markdown table: one row per task/run, the paper's table II columns; with ``cis``, each
    metric's interval in brackets after its value."""
    head = "| run | " + " | ".join(METRICS) + " |"
    sep = "|---|" + "---:|" * len(METRICS)
    lines = [head, sep]
    for name, metrics in rows.items():
        ci = (cis or {}).get(name, {})
        lines.append(f"| {name} | " + " | ".join(_fmt(metrics.get(m), ci.get(m)) for m in METRICS) + " |")
    return "\n".join(lines)
