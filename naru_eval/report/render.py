"""The leaderboard document as Markdown and as a self-contained HTML page, and the files written.

Rendering reads the typed document only (:class:`~naru_eval.report.models.LeaderboardDocument`;
a ``leaderboard.json`` read back is validated into it first), so the page shows exactly what the
JSON holds. Every value that comes from a run (a model name, model args, a path, a warning) is
escaped: in HTML by Jinja2's autoescape, in Markdown by :func:`md` (pipes, newlines, HTML), so
no run can break a table or add a row.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from typing_extensions import Never

from naru_eval.core.json_types import JSONMapping
from naru_eval.core.metrics import MetricTable
from naru_eval.core.numbers import fmt_ci, fmt_num
from naru_eval.core.scoring import MCQ
from naru_eval.core.variants import CIRCULAR
from naru_eval.report.models import ComparisonRow, Entry, LeaderboardDocument, ManifestRef, Table, dump_json
from naru_eval.report.published import STATUS_NOTES

if TYPE_CHECKING:
    from naru_eval.report.leaderboard import Leaderboard
    from naru_eval.report.plots import Plot

_MD_ESCAPES = str.maketrans(
    {
        "\\": "&#92;",
        "|": "\\|",
        "[": "&#91;",  # no [text](https://…) link or ![image](…) from a run's text
        "]": "&#93;",
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\r": " ",
        "\n": " ",
        "\u2028": " ",
        "\u2029": " ",
        "\x85": " ",
        "`": "&#96;",
    }
)


def md(value: object) -> str:
    """A value from a run as Markdown text: pipes escaped, newlines made spaces, HTML and link
    brackets as entities, and the ``://`` / ``www.`` a renderer would turn into a link broken by
    an entity, so it stays inside its cell (or line) and never becomes markup or a live link."""
    return str(value).translate(_MD_ESCAPES).replace("://", "&#58;//").replace("www.", "www&#46;")


def as_document(data: LeaderboardDocument | JSONMapping) -> LeaderboardDocument:
    """The typed document (a ``leaderboard.json`` read back is validated: a bad one names the field)."""
    return data if isinstance(data, LeaderboardDocument) else LeaderboardDocument.model_validate(data)


def comparison_digits(r: ComparisonRow) -> int:
    """Decimals of a paper-comparison row: 2 for table III recalls (0-1), 1 for percentages."""
    return 2 if r.source == "table_iii" else 1


def paper_line(doc: LeaderboardDocument) -> str:
    p = doc.published.paper
    return f"{p.title} (arXiv {p.arxiv})"


@dataclass
class TableView:
    """One table as the page shows it."""

    title: str
    note: str | None
    cols: list[str]
    digits: int
    rows: list[Entry]
    published: bool  # it holds published rows: the "from" column


def table_title(table: Table) -> str:
    if table.data is None:
        return f"{table.task}: published figures (the official data)"
    note = STATUS_NOTES.get(table.status or "other", "")
    return f"{table.task}: runs on data {table.data} ({note})"


def _metric_table(table: Table, rows: Sequence[Entry]) -> MetricTable[Never] | None:
    """The metric table whose columns a table shows (None: a table of mixed kinds)."""
    from naru_eval.judge.score import OPEN

    if table.kind == "mcq":
        return MCQ
    if table.kind == "open":
        return OPEN
    if rows and all(e.metrics_source == "sample_log_circular" for e in rows):
        return CIRCULAR
    return None


def _spec(table: Table, rows: Sequence[Entry]) -> tuple[list[str], int]:
    """(metric columns, decimals) of one table: its metric table's columns and decimals, or
    every metric its rows have (a table of mixed kinds)."""
    metrics = _metric_table(table, rows)
    if metrics is None:
        return sorted({k for e in rows for k in e.metrics}), 3
    return list(metrics.columns), metrics.digits


def table_views(doc: LeaderboardDocument) -> list[TableView]:
    by_id = {e.id: e for e in [*doc.published.rows, *doc.entries]}
    out = []
    for t in doc.tables:
        rows = [by_id[i] for i in t.rows]
        cols, digits = _spec(t, rows)
        cols = [c for c in cols if any(e.metrics.get(c) is not None for e in rows)]  # no all-N/A column
        note = None
        if t.data is not None and t.status not in ("official", "counts-match") and doc.published.rows:
            note = (
                "These runs are not on the official data: the published rows are not in this table. "
                "The table of published figures above is the reference."
            )
        elif t.status == "counts-match":
            note = "The runs' data has Table I's counts but an unknown fingerprint: counts match, release unverified."
        out.append(
            TableView(
                title=table_title(t),
                note=note,
                cols=cols,
                digits=digits,
                rows=rows,
                published=any(e.published for e in rows),
            )
        )
    return out


def _who(e: Entry) -> str:
    return "published" if e.published else "run"


def input_cell(e: Entry) -> str:
    """The input column: a run's input mode (``unknown`` for a log that records none); ``-`` for a
    published row (the authors do not say)."""
    return e.input_mode or ("-" if e.published else "unknown")


def sampling_cell(e: Entry) -> str:
    """The sampling column: the budget, then how the frames were chosen when they were
    (``select=``: ``128 Frames, its(...)``); the budget alone for uniform sampling (the official
    protocol, the authors' rows included)."""
    return ", ".join(x for x in (e.sampling or "-", e.selection) if x)


def markdown(data: LeaderboardDocument | JSONMapping) -> str:
    """The leaderboard as Markdown: one table per (task, data), the paper comparison and check."""
    from naru_eval.report.paper import ConsistencyCheck, format_checks

    doc = as_document(data)
    lines = [
        "# NARU leaderboard",
        "",
        f"Paper: {paper_line(doc)}.",
        "",
        f"schema_version {doc.schema_version}; generated {doc.generated_at} by {doc.generated_by}. "
        "Multiple choice in %, open-ended as recall (0-1). overall/narrative/cultural follow the authors' "
        "aggregation (means of category means); `accuracy`/`recall` are over all questions. Rows marked "
        "*published* are the authors' figures, not runs of ours; runs are recomputed from their lmms-eval "
        "sample logs, brackets: 95% bootstrap CI clustered by video "
        f"({doc.bootstrap.reps} reps, seed {doc.bootstrap.seed}).",
        "",
        f"**Data.** {doc.data_note}",
        "",
    ]
    if doc.errors:
        lines += ["**Errors:**", "", *[f"- {md(e)}" for e in doc.errors], ""]
    if doc.warnings:
        lines += ["Warnings:", "", *[f"- {md(w)}" for w in doc.warnings], ""]
    for view in table_views(doc):
        lines += [f"## {md(view.title)}", ""]
        if view.note:
            lines += [view.note, ""]
        lines.append("| model | | from | sampling | input | data | " + " | ".join(view.cols) + " | n |")
        lines.append("|---|---|---|---|---|---|" + "---:|" * len(view.cols) + "---:|")
        for e in view.rows:
            ci = e.ci95 or {}
            flag = " (CONFLICT)" if e.conflict else ""
            cells = [
                f"{fmt_num(e.metrics.get(c), view.digits)} {fmt_ci(ci.get(c), view.digits)}".strip() for c in view.cols
            ]
            mode = f"{md(input_cell(e))} | "
            lines.append(
                f"| {md(e.model)}{flag} | {_who(e)} | {md(e.from_ or '-')} | {md(sampling_cell(e))} | {mode}"
                f"{md(e.data or 'unknown')} | " + " | ".join(cells) + f" | {e.n.get('overall')} |"
            )
        lines.append("")
    if doc.unverified:
        lines += ["## Unverified runs (not ranked)", ""]
        lines += ["| model | task | results file | why |", "|---|---|---|---|"]
        for u in doc.unverified:
            lines.append(f"| {md(u.model)} | {md(u.task)} | {md(u.results_file)} | {md(u.reason)} |")
        lines.append("")
    if doc.paper.comparison or doc.entries:
        lines += ["## Runs beside the paper's tables", ""]
    if doc.paper.comparison:
        lines += [
            "| our model | paper model | source | task | sampling | metric | ours [95% CI] | paper | diff | paper in CI |",
            "|---|---|---|---|---|---|---|---:|---:|---|",
        ]
        for r in doc.paper.comparison:
            src = r.source + (" (approx.)" if r.approximate else "")
            inci = "-" if r.paper_in_ci is None else ("yes" if r.paper_in_ci else "no")
            d = comparison_digits(r)
            lines.append(
                f"| {md(r.model)} | {r.paper_model} | {src} | {md(r.task)} | {md(r.budget)} | {r.metric} | "
                f"{fmt_num(r.ours, d)} {fmt_ci(r.ours_ci95, d)} | {r.paper:g} | {fmt_num(r.diff, d, signed=True)} | {inci} |"
            )
    elif doc.entries:
        lines.append("No run is mapped to a paper model (pass `--paper-name MODEL=PAPER_MODEL`).")
    lines += ["", "## Paper consistency check", ""]
    lines.append(format_checks([ConsistencyCheck(**c.model_dump()) for c in doc.paper.consistency]))
    lines += ["", f"Paper: {paper_line(doc)}", ""]
    return "\n".join(lines)


def _versions(man: ManifestRef | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in ((man.versions if man else None) or {}).items() if v)


def render_html(
    data: LeaderboardDocument | JSONMapping, plots: Sequence[Plot] = (), skipped: Sequence[str] = ()
) -> str:
    """A self-contained page (inline CSS, figures as data: URIs, no external reference), from
    ``templates/leaderboard.html.j2`` with autoescape: every value from a run is escaped. Columns
    that hold nothing (no cost, no git revision, no versions) are left out."""
    import jinja2

    from naru_eval.report.paper import not_checkable

    doc = as_document(data)
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("naru_eval.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    figures = [{"title": p.title, "caption": p.caption, "b64": base64.b64encode(p.png).decode("ascii")} for p in plots]
    show = {
        "versions": any(_versions(e.manifest) for e in doc.entries),
        "git": any(e.manifest and e.manifest.git_revision for e in doc.entries),
        "cost": any(e.cost for e in doc.entries),
    }
    return env.get_template("leaderboard.html.j2").render(
        d=doc,
        tables=table_views(doc),
        plots=figures,
        skipped=list(skipped),
        paper_line=paper_line(doc),
        fmt_num=fmt_num,
        fmt_ci=fmt_ci,
        input_cell=input_cell,
        sampling_cell=sampling_cell,
        comparison_digits=comparison_digits,
        versions=_versions,
        dumps=json.dumps,
        show=show,
        checks=[c for c in doc.paper.consistency if c.ok is not None],
        unchecked=not_checkable(doc.paper.consistency),  # type: ignore[arg-type]
    )


def write_outputs(lb: Leaderboard, json_path: str | Path, plots: bool = True) -> dict[str, Path]:
    """Write ``.json``, ``.md``, ``.html`` (same stem) and ``<stem>_plots/*.png``."""
    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    figs: list[Plot] = []
    skipped: list[str] = []
    if plots:
        from naru_eval.report.paper import load_reference, paper_points
        from naru_eval.report.plots import make_plots

        if lb.document.entries:
            ranked = [e for e in lb.document.entries if e.reported_matches_log is not False]
            figs, skipped = make_plots(ranked, paper_points(lb.document.paper.names, load_reference()))
    paths = {"json": json_path, "md": json_path.with_suffix(".md"), "html": json_path.with_suffix(".html")}
    texts = {
        "json": dump_json(lb.document),
        "md": markdown(lb.document),
        "html": render_html(lb.document, figs, skipped),
    }
    pdir = json_path.with_name(json_path.stem + "_plots")
    with _output_lock(json_path):  # another build writing the same files waits: the set is never mixed
        staged = [(_staged(paths[k], texts[k].encode("utf-8")), paths[k]) for k in ("json", "md", "html")]
        if pdir.is_dir():  # figures of an earlier build that this one may not draw again
            for old in [
                *pdir.glob("fig3_frame_sweep_*.png"),
                *pdir.glob("fig4_level_change_*.png"),
                pdir / "category_heatmap.png",
            ]:
                old.unlink(missing_ok=True)
        if figs:
            pdir.mkdir(exist_ok=True)
            for p in figs:
                staged.append((_staged(pdir / f"{p.name}.png", p.png), pdir / f"{p.name}.png"))
                paths[p.name] = pdir / f"{p.name}.png"
        for tmp, final in staged:  # every file written in full first, then each renamed into place
            os.replace(tmp, final)
    return paths


def _staged(path: Path, data: bytes) -> Path:
    """``data`` written to a temporary file beside ``path`` (renamed into place by the caller)."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(name, 0o666 & ~mask)  # as a plain write would make it (mkstemp makes 0600)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


@contextmanager
def _output_lock(json_path: Path) -> Iterator[None]:
    """An exclusive lock on ``.<name>.lock`` beside the outputs (POSIX ``flock``; none elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: the renames alone
        yield
        return
    with open(json_path.with_name(f".{json_path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
