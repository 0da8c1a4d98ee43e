"""The metrics summary table (``naru-eval score``, ``naru-eval demo``): the paper's table II columns."""

from __future__ import annotations

from collections.abc import Sequence

from naru_eval.core.scoring import METRICS


def _fmt(v: float | None, ci: Sequence[float] | None = None) -> str:
    if v is None:
        return "N/A"
    return f"{v:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else f"{v:.1f}"


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
