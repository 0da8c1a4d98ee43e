"""The ``naru-eval diagnose`` report as text and as PNG plots, and the file written: rendering,
kept apart from the analyses (:mod:`naru_eval.report.diagnostics`). Every function reads the
typed report (:class:`~naru_eval.report.models.DiagnosticsReport`), whose JSON ``--json`` prints."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from naru_eval.core.data import LETTERS
from naru_eval.core.extract import INVALID_KINDS
from naru_eval.core.json_types import JSONMapping
from naru_eval.core.numbers import fmt_ci, fmt_num
from naru_eval.report.models import DiagnosticsReport, dump_json, validate_doc

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _ci(ci: Sequence[float] | None) -> str:
    return f" {fmt_ci(ci)}" if ci else ""


def summary_text(report: DiagnosticsReport) -> str:
    """A short human-readable summary (Markdown) of a report."""
    lines = ["# NARU diagnostics", ""]
    if not report.runs:
        lines.append("No NARU sample logs found.")
    for r in report.runs:
        m, lt, inv = r.metrics, r.letters, r.invalid
        head = "circular" if r.kind == "circular" else "overall"
        lines.append(f"## {r.label} ({r.kind}, {r.n_questions} questions, {r.n_videos} videos)")
        extra = (
            ""
            if r.recomputes is None
            else ("; matches results.json" if r.recomputes else "; DIFFERS from results.json")
        )
        if r.kind == "circular":
            lines.append(
                f"- circular {fmt_num(m['circular'])}, accuracy_r0 {fmt_num(m['accuracy_r0'])}, "
                f"accuracy_all {fmt_num(m['accuracy_all'])}{extra}"
            )
        else:
            lines.append(
                f"- {head} {fmt_num(m['overall'])}, narrative {fmt_num(m['narrative'])}, cultural {fmt_num(m['cultural'])}{extra}"
            )
        lines.append(
            "- letters picked / gold (%): "
            + ", ".join(f"{x} {fmt_num(lt.pred_pct[x], 0)}/{fmt_num(lt.gold_pct[x], 0)}" for x in LETTERS)
            + f"; TV distance {fmt_num(lt.tv_distance_pp)} pp"
        )
        kinds = ", ".join(f"{k} {n}" for k, n in inv.kinds.items() if n)
        lines.append(f"- invalid {fmt_num(inv.rate)} %" + (f" ({kinds})" if kinds else ""))
        buckets = "; ".join(f"{b.bucket}: {fmt_num(b.accuracy)}{_ci(b.ci95)} (n={b.n})" for b in r.duration.buckets)
        lines.append(f"- {r.duration.measure} by duration: {buckets}")
        lines.append("")
    if report.blind_vs_video:
        lines.append("## Blind vs video (video minus blind, pp, 95% CI)")
        for g in report.blind_vs_video:
            lines.append(
                f"- {g.video_run} vs {g.blind_run}: {fmt_num(g.video_accuracy)} vs {fmt_num(g.blind_accuracy)}, "
                f"gap {fmt_num(g.gap)}{_ci(g.ci95)} (n={g.n})"
            )
        lines.append("")
    if report.circular_vs_plain:
        lines.append("## Circular vs plain (circular minus plain, pp, 95% CI)")
        for g in report.circular_vs_plain:
            lines.append(
                f"- {g.circular_run} vs {g.plain_run}: {fmt_num(g.circular_accuracy)} vs "
                f"{fmt_num(g.plain_accuracy)}, gap {fmt_num(g.gap)}{_ci(g.ci95)} (n={g.n})"
            )
        lines.append("")
    sc = report.shortcut_candidates
    if sc:
        lines.append(
            f"## Shortcut candidates: {sc.n_candidates} question(s) right in >= {sc.min_correct} of "
            f"{sc.n_models} blind run(s) (expected by chance: {sc.expected_by_chance:.1f})"
        )
        for q in sc.questions[:20]:
            lines.append(f"- {q.question_id} ({q.category}, {q.video_id}): {q.n_correct}/{q.n_models}")
        if sc.n_candidates > 20:
            lines.append(f"- ... {sc.n_candidates - 20} more in the JSON")
        lines.append("")
    if report.plots:
        lines.append("Plots: " + ", ".join(report.plots))
    return "\n".join(lines).rstrip() + "\n"


def write_plots(report: DiagnosticsReport, out_dir: str | Path, stem: str) -> list[str]:
    """PNG plots of a report under ``out_dir`` (``<stem>_letters.png`` …); returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = report.runs
    paths: list[str] = []
    if not runs:
        return paths

    def save(fig: Figure, name: str) -> None:
        p = out_dir / f"{stem}_{name}.png"
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(str(p))

    # letters: picked (share of valid answers) against gold, per run
    ncols = min(3, len(runs))
    nrows = math.ceil(len(runs) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False)
    x = np.arange(len(LETTERS))
    for ax, r in zip(axes.flat, runs, strict=False):
        lt = r.letters
        ax.bar(x - 0.2, [lt.pred_pct[k] or 0 for k in LETTERS], 0.4, label="picked (% of valid)")
        ax.bar(x + 0.2, [lt.gold_pct[k] or 0 for k in LETTERS], 0.4, label="gold (%)", alpha=0.7)
        ax.set_xticks(x, list(LETTERS))
        ax.set_title(f"{r.label}\ninvalid {fmt_num(r.invalid.rate)} %", fontsize=8)
        ax.set_ylim(0, 100)
    for ax in list(axes.flat)[len(runs) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    save(fig, "letters")

    # invalid kinds: stacked, percent of all answers
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(runs) + 1.5))
    left = np.zeros(len(runs))
    kinds = list(INVALID_KINDS)
    for k in kinds:
        shares = np.array([r.invalid.kinds_pct.get(k) or 0.0 for r in runs])
        ax.barh(range(len(runs)), shares, left=left, label=k)
        left += shares
    ax.set_yticks(range(len(runs)), [r.label for r in runs], fontsize=7)
    ax.set_xlim(0, max(1.0, float(left.max()) * 1.15))
    ax.set_xlabel("invalid answers (% of all answers)")
    ax.legend(fontsize=7, ncol=4)
    save(fig, "invalid")

    # accuracy by duration bucket, with CIs
    labels = list(dict.fromkeys(b.bucket for r in runs for b in r.duration.buckets))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(labels) * max(1, len(runs)) / 2), 4))
    width = 0.8 / len(runs)
    for i, r in enumerate(runs):
        by = {b.bucket: b for b in r.duration.buckets}
        vals: list[float] = []
        errs: list[list[float]] = [[], []]
        for lab in labels:
            b = by.get(lab)
            v = b.accuracy if b and b.accuracy is not None else np.nan
            vals.append(v)
            ci = b.ci95 if b and b.ci95 else None
            errs[0].append(v - ci[0] if ci else 0)
            errs[1].append(ci[1] - v if ci else 0)
        ax.bar(np.arange(len(labels)) + i * width, vals, width, yerr=errs, capsize=2, label=r.label)
    ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels, fontsize=8)
    ax.set_xlim(-0.3, len(labels) - 0.1)
    ax.set_ylabel("accuracy (%; circular runs: circular)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=6)
    save(fig, "duration")

    # gaps with CIs
    gaps = [(f"{g.video_run} - blind", g) for g in report.blind_vs_video]
    gaps += [(f"{g.circular_run} - {g.plain_run}", g) for g in report.circular_vs_plain]
    if gaps:
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(gaps) + 1.5))
        for i, (_name, g) in enumerate(gaps):
            v = g.gap if g.gap is not None else np.nan
            ci = g.ci95
            err = [[v - ci[0]], [ci[1] - v]] if ci else None
            ax.errorbar([v], [i], xerr=err, fmt="o", capsize=3)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(range(len(gaps)), [n for n, _ in gaps], fontsize=7)
        ax.set_xlabel("gap (percentage points, 95% CI)")
        save(fig, "gaps")
    return paths


def write_report(report: DiagnosticsReport | JSONMapping, output: str | Path, plots: bool = True) -> Path:
    """Write the JSON (and, with ``plots``, the PNGs next to it, named in ``report.plots``);
    return the JSON path. A report given as JSON (a mapping) is validated first: a bad one is an
    error naming ``output``, and nothing is written."""
    out = Path(output)
    doc = report if isinstance(report, DiagnosticsReport) else validate_doc(DiagnosticsReport, report, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if plots:
        doc.plots = write_plots(doc, out.parent, out.stem)
    out.write_text(dump_json(doc), encoding="utf-8")
    return out
