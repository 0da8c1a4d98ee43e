"""Figures mirroring the NARU paper, drawn from leaderboard entries (matplotlib, Agg backend).

* :func:`plot_frame_sweep`: overall accuracy against the frame budget, one line per model, 95%
  video-clustered bootstrap intervals as error bars, a dotted 25% chance line (the paper's Fig. 3);
  the paper's stated end points (8 and 128 frames) as hollow markers for mapped models.
* :func:`plot_level_change`: narrative and cultural change from 8 to 128 frames (Fig. 4).
* :func:`plot_category_heatmap`: accuracy per category (N.1-C.5) across models.

Each returns a :class:`Plot` holding PNG bytes (or ``None`` with a reason when the entries cannot
support the figure), so the HTML page embeds them as ``data:`` URIs and opens offline.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from naru_eval.core.data import CATEGORIES  # noqa: E402
from naru_eval.report.models import Entry  # noqa: E402

CHANCE = 25.0
MCQ_TASK_PREFERENCE = ("naru_mcq_500", "naru_mcq")


@dataclass(frozen=True)
class Plot:
    name: str  # file stem, e.g. "fig3_frame_sweep_naru_mcq_500"
    title: str
    caption: str
    png: bytes


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def _is_mcq(entry: Entry) -> bool:
    return entry.metrics.get("overall") is not None and "N.1" in entry.metrics


def _frames(e: Entry) -> int:
    return e.frames if e.frames is not None else 0


def _series(entries: Sequence[Entry], task: str) -> dict[str, list[Entry]]:
    """model -> its entries of ``task`` with a frame budget, by budget (judge-less MCQ runs)."""
    out: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        if e.task == task and e.frames is not None and _is_mcq(e) and not e.conflict:
            out[e.model].append(e)
    return {m: sorted(v, key=_frames) for m, v in sorted(out.items())}


def sweep_tasks(entries: Sequence[Entry]) -> list[str]:
    """Tasks in which some model was run at two or more frame budgets, preferred task first."""
    tasks = sorted({e.task for e in entries}, key=lambda t: (t not in MCQ_TASK_PREFERENCE, t))
    return [t for t in tasks if any(len({e.frames for e in s}) >= 2 for s in _series(entries, t).values())]


def plot_frame_sweep(
    entries: Sequence[Entry],
    task: str,
    paper_points: Mapping[str, Mapping[str, float]] | None = None,
) -> Plot | None:
    """Fig. 3: overall accuracy vs frames. ``paper_points``: our model name -> {"8": acc, "128": acc}."""
    series = {m: s for m, s in _series(entries, task).items() if len(s) >= 2}
    if not series:
        return None
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.subplots()
    budgets: set[int] = set()
    k = len(series)
    for i, (model, runs) in enumerate(series.items()):
        colour = f"C{i % 10}"
        dodge = 2 ** (0.04 * (i - (k - 1) / 2))  # keep overlapping error bars apart
        xs = [_frames(e) * dodge for e in runs]
        budgets.update(_frames(e) for e in runs)
        ys = [float(e.metrics.get("overall") or 0.0) for e in runs]
        cis = [(e.ci95 or {}).get("overall") for e in runs]
        lo = [y - (ci[0] if ci else y) for ci, y in zip(cis, ys, strict=True)]
        hi = [(ci[1] if ci else y) - y for ci, y in zip(cis, ys, strict=True)]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, color=colour, label=model)
        for frames, acc in (paper_points or {}).get(model, {}).items():
            budgets.add(int(frames))
            ax.plot([int(frames)], [acc], marker="s", markerfacecolor="none", color=colour, markersize=9, linestyle="")
    ax.axhline(CHANCE, linestyle=":", color="grey", linewidth=1.5, label="chance (25%)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(budgets))
    ax.set_xticklabels([str(b) for b in sorted(budgets)])
    ax.set_xlabel("frames per video")
    ax.set_ylabel("overall accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.set_title(f"Accuracy vs frame budget ({task})")
    if paper_points:
        ax.plot([], [], marker="s", markerfacecolor="none", color="black", linestyle="", label="paper (approx.)")
    ax.legend(fontsize=8, loc="best")
    caption = (
        f"Overall accuracy on {task} against the frame budget; error bars are 95% bootstrap intervals "
        "clustered by video; the dotted line is chance (25%)."
        + (" Hollow squares: the paper's stated end points (approximate, read off its Fig. 3)." if paper_points else "")
    )
    return Plot(f"fig3_frame_sweep_{task}", f"Accuracy vs frame budget ({task})", caption, _png(fig))


class LevelChange(TypedDict):
    """One model's change between two budgets (percentage points)."""

    model: str
    start: int
    end: int
    narrative: float | None
    cultural: float | None
    overall: float | None


def level_changes(entries: Sequence[Entry], task: str, lo: int = 8, hi: int = 128) -> list[LevelChange]:
    """Per model: narrative/cultural change from ``lo`` to ``hi`` frames (else its smallest to largest)."""
    out: list[LevelChange] = []
    for model, runs in _series(entries, task).items():
        by_f = {_frames(e): e for e in runs}
        a, b = (lo, hi) if lo in by_f and hi in by_f else (min(by_f), max(by_f))
        if a == b:
            continue
        first, last = by_f[a], by_f[b]
        out.append(
            LevelChange(
                model=model,
                start=a,
                end=b,
                narrative=_change(first, last, "narrative"),
                cultural=_change(first, last, "cultural"),
                overall=_change(first, last, "overall"),
            )
        )
    return out


def _change(first: Entry, last: Entry, level: str) -> float | None:
    x, y = first.metrics.get(level), last.metrics.get(level)
    return None if x is None or y is None else float(y) - float(x)


def plot_level_change(entries: Sequence[Entry], task: str, lo: int = 8, hi: int = 128) -> Plot | None:
    """Fig. 4: narrative and cultural change (pp) from ``lo`` to ``hi`` frames, per model."""
    rows = [r for r in level_changes(entries, task, lo, hi) if r["narrative"] is not None or r["cultural"] is not None]
    if not rows:
        return None
    fig = Figure(figsize=(max(6.0, 1.3 * len(rows) + 2), 4.2))
    ax = fig.subplots()
    width = 0.38
    xs = list(range(len(rows)))
    nar = [r["narrative"] or 0.0 for r in rows]
    cul = [r["cultural"] or 0.0 for r in rows]
    ax.bar([x - width / 2 for x in xs], nar, width, label="narrative", color="#4c72b0")
    ax.bar([x + width / 2 for x in xs], cul, width, label="cultural", color="#dd8452")
    for x, v in zip(xs, nar, strict=True):
        ax.annotate(f"{v:+.1f}", (x - width / 2, v), ha="center", va="bottom" if v >= 0 else "top", fontsize=8)
    for x, v in zip(xs, cul, strict=True):
        ax.annotate(f"{v:+.1f}", (x + width / 2, v), ha="center", va="bottom" if v >= 0 else "top", fontsize=8)
    ax.axhline(0, color="black", linewidth=0.8)
    vals = [*nar, *cul, 0.0]
    pad = max(1.0, 0.15 * (max(vals) - min(vals)))
    ax.set_ylim(min(vals) - pad, max(vals) + pad)
    standard = all((r["start"], r["end"]) == (lo, hi) for r in rows)
    span = f"{lo} → {hi} frames" if standard else "smallest → largest budget"
    labels = [
        r["model"] if (r["start"], r["end"]) == (lo, hi) else f"{r['model']}\n({r['start']}→{r['end']})" for r in rows
    ]
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=8, rotation=15 if len(rows) > 4 else 0)
    ax.set_ylabel("change in accuracy (pp)")
    ax.set_title(f"Narrative / cultural change, {span}\n({task})", fontsize=11)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    caption = f"Change in narrative and cultural accuracy (percentage points) from {lo} to {hi} frames on {task}" + (
        "." if standard else "; models without both budgets use their smallest and largest budget (under the name)."
    )
    return Plot(f"fig4_level_change_{task}", f"Narrative and cultural change ({task})", caption, _png(fig))


def heatmap_rows(entries: Sequence[Entry]) -> list[Entry]:
    rows = [e for e in entries if _is_mcq(e) and not e.conflict]
    return sorted(rows, key=lambda e: (e.task, -(e.metrics.get("overall") or 0), e.model))


def plot_category_heatmap(entries: Sequence[Entry]) -> Plot | None:
    """Accuracy per category (columns N.1-C.5) for every MCQ entry (rows)."""
    rows = heatmap_rows(entries)
    if not rows:
        return None
    import numpy as np

    values = np.array([[np.nan if (v := e.metrics.get(c)) is None else v for c in CATEGORIES] for e in rows])
    fig = Figure(figsize=(8.0, 1.2 + 0.42 * len(rows)))
    ax = fig.subplots()
    im = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0, vmax=100, aspect="auto")
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[i, j]
            if not np.isnan(v):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=8, color="white" if v < 60 else "black")
    ax.set_xticks(range(len(CATEGORIES)))
    ax.set_xticklabels(CATEGORIES)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{e.model} · {e.task} · {e.budget}" for e in rows], fontsize=8)
    ax.axvline(3.5, color="white", linewidth=2)
    ax.set_title("Accuracy per category (%)")
    fig.colorbar(im, ax=ax, fraction=0.03, pad=0.02)
    caption = "Accuracy per category; N.1-N.4 narrative, C.1-C.5 cultural; blank cells: no question of that category."
    return Plot("category_heatmap", "Accuracy per category", caption, _png(fig))


def make_plots(
    entries: Sequence[Entry],
    paper_points: Mapping[str, Mapping[str, float]] | None = None,
) -> tuple[list[Plot], list[str]]:
    """Every figure the entries support, and why the others were left out."""
    plots: list[Plot] = []
    skipped: list[str] = []
    tasks = sweep_tasks(entries)
    if not tasks:
        skipped.append("frame-budget figures (Fig. 3, Fig. 4): no model was run at two or more frame budgets")
    for task in tasks:
        for p in (
            plot_frame_sweep(entries, task, paper_points if task == "naru_mcq_500" else None),
            plot_level_change(entries, task),
        ):
            if p is not None:
                plots.append(p)
    heat = plot_category_heatmap(entries)
    if heat is None:
        skipped.append("category heat map: no multiple-choice entry")
    else:
        plots.append(heat)
    return plots, skipped
