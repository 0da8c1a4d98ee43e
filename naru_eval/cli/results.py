"""The results subcommands of ``naru-eval``: ``leaderboard``, ``compare``, ``paper-reference``,
``leaderboard-schema``, ``metric-table``.

:func:`register` adds them to the one ``naru-eval`` parser (``naru_eval/cli/main.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from naru_eval.core.numbers import fmt_ci, fmt_num

if TYPE_CHECKING:
    from naru_eval.report.models import LeaderboardDocument


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for v in values:
        k, sep, name = v.partition("=")
        if not sep or not k or not name:
            raise SystemExit(f"naru-eval: {flag} expects KEY=VALUE, got {v!r}")
        out[k] = name
    return out


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from naru_eval.report.leaderboard import build_leaderboard
    from naru_eval.report.paper import ConsistencyCheck, format_checks, load_reference
    from naru_eval.report.render import write_outputs

    ref = load_reference(args.paper_reference)
    try:
        lb = build_leaderboard(
            args.run_dirs,
            paper_names=_pairs(args.paper_name, "--paper-name"),
            reference=ref,
            labels=_pairs(args.label, "--label"),
            reps=args.reps,
            seed=args.seed,
            include_incomplete=args.include_incomplete,
            published=not args.no_published,
        )
    except FileNotFoundError as e:
        print(f"naru-eval leaderboard: {e}", file=sys.stderr)
        return 2
    paths = write_outputs(lb, args.output, plots=not args.no_plots)
    doc = lb.document
    print(f"{len(doc.published.rows)} published row(s) of the NARU authors ({_paper(doc)})")
    if args.run_dirs:
        print(f"{len(doc.entries)} entr{'y' if len(doc.entries) == 1 else 'ies'} from {args.run_dirs}")
    for entry in doc.entries:
        ci = entry.ci95.get("overall") if entry.ci95 else None
        d = 2 if entry.task.startswith("naru_open") else 1  # open-ended recall is 0-1
        ci_s = f" {fmt_ci(ci, d)}" if ci else ""
        print(
            f"  {entry.id}: overall {fmt_num(entry.metrics.get('overall'), d)}{ci_s} (n={entry.n.get('overall')})"
            + (" CONFLICT" if entry.conflict else "")
        )
    for t in doc.tables:
        print(f"  table {t.task} (data {t.data or 'official, published only'}): {len(t.rows)} rows")
    for u in doc.unverified:
        print(f"  not ranked: {u.model} {u.task} ({u.results_file}): {u.reason}")
    for r in doc.paper.comparison:
        diff = fmt_num(r.diff, signed=True)
        print(f"  vs paper {r.paper_model} ({r.source}, {r.metric}): paper {r.paper:g}, diff {diff}")
    print("paper consistency check:")
    print(format_checks([ConsistencyCheck(**c.model_dump()) for c in doc.paper.consistency]))
    for w in lb.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for err in lb.errors:
        print(f"error: {err}", file=sys.stderr)
    print("wrote " + ", ".join(str(p) for k, p in paths.items() if k in ("json", "md", "html")))
    print(f"leaderboard page: {paths['html'].resolve()}")
    return 1 if lb.errors else 0


def _paper(doc: LeaderboardDocument) -> str:
    p = doc.published.paper
    return f"{p.title}, arXiv {p.arxiv}"


def cmd_compare(args: argparse.Namespace) -> int:
    from naru_eval.report.compare import compare_runs

    try:
        done = compare_runs(
            args.run_a,
            args.run_b,
            task=args.task,
            across_inputs=args.across_inputs,
            reps=args.reps,
            permutations=args.permutations,
            seed=args.seed,
        )
    except (FileNotFoundError, ValueError) as e:
        print(f"naru-eval compare: {e}", file=sys.stderr)
        return 2
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(done.report.model_dump(), indent=2) + "\n", encoding="utf-8")
    print(json.dumps(done.report.model_dump(), indent=2) if args.json else "\n\n".join(done.texts))
    return 0


def cmd_paper_reference(args: argparse.Namespace) -> int:
    """Build the normalised paper reference from the package's figures (or ``--source``) and run
    the paper's consistency checks; exit 1 on a mismatch."""
    from naru_eval.report.paper import consistency_checks, format_checks, paper_source, reference_from_source

    if args.source:
        ref = reference_from_source(json.loads(Path(args.source).read_text(encoding="utf-8")), args.source)
    else:
        ref = reference_from_source(paper_source())
    text = json.dumps(ref.model_dump(), indent=2, ensure_ascii=False) + "\n"
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    checks = consistency_checks(ref)
    print(format_checks(checks), file=sys.stderr)
    return 0 if all(c.ok is not False for c in checks) else 1


def cmd_leaderboard_schema(args: argparse.Namespace) -> int:
    """Print the result schema (Markdown, from the models), or write it into a doc between its markers."""
    from naru_eval.report.schema_doc import schema_markdown, with_schema

    if not args.write:
        print(schema_markdown(), end="")
        return 0
    doc = Path(args.write)
    old = doc.read_text(encoding="utf-8")
    new = with_schema(old)
    if args.check:
        if new != old:
            print(f"{doc}: the schema section is out of date; run naru-eval leaderboard-schema --write {doc}")
            return 1
        return 0
    doc.write_text(new, encoding="utf-8")
    print(f"wrote the schema into {doc}")
    return 0


def cmd_metric_table(args: argparse.Namespace) -> int:
    """Print the metric table (docs/metrics.md's, from the tables of naru_eval.core.metrics), or
    write it: into a doc between its markers, or as the ``metric_list`` of a task folder's YAMLs."""
    from naru_eval.core.metrics import metrics_markdown
    from naru_eval.lmms.metric_lists import regenerate, stale, tables

    if not args.write:
        print(metrics_markdown(tables()), end="")
        return 0
    paths = [Path(p) for p in args.write]
    try:
        if args.check:
            old = stale(paths)
            for f in old:
                print(f"{f}: the generated metric table is out of date; run naru-eval metric-table --write {f}")
            return 1 if old else 0
        for p in paths:
            for f, text in regenerate(p).items():
                f.write_text(text, encoding="utf-8")
                print(f"wrote the metric table into {f}")
    except (OSError, ValueError) as e:
        print(f"naru-eval metric-table: {e}", file=sys.stderr)
        return 2
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the results subcommands to the ``naru-eval`` subparsers object."""
    p = subparsers.add_parser(
        "leaderboard",
        help="the published NARU leaderboard, with your runs beside it (JSON/Markdown/HTML)",
        description="Build results/leaderboard.json (+ .md, .html, _plots/): the NARU authors' published rows "
        "(13 multiple-choice and 8 open-ended configurations, aggregated as the authors do) and every "
        "*_results.json below RUN_DIR…, metrics recomputed from the sample logs with 95%% bootstrap CIs "
        "clustered by video, one table per task and data fingerprint, sorted by overall; the paper's own "
        "consistency check. Without RUN_DIR: the published rows only. Exit 1 on conflicting entries.",
    )
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="lmms-eval output directories (searched recursively)")
    p.add_argument("--no-published", action="store_true", help="leave the authors' published rows out")
    p.add_argument("-o", "--output", default="results/leaderboard.json", help="JSON path; .md/.html go beside it")
    p.add_argument(
        "--paper-name",
        action="append",
        default=[],
        metavar="MODEL=PAPER_MODEL",
        help="compare our MODEL with the paper's row, e.g. --paper-name gemini-3-flash=Gemini-3-Flash (repeatable)",
    )
    p.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="DIR=NAME",
        help="name the model of the runs below DIR (default: manifest label, pretrained=/model= arg, adapter)",
    )
    p.add_argument(
        "--paper-reference",
        metavar="FILE",
        help="paper figures (default: the embedded copy of results/paper_reference.json)",
    )
    p.add_argument("--reps", type=int, default=2000, help="bootstrap replicates (default: 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--no-plots", action="store_true", help="skip the figures")
    p.add_argument("--include-incomplete", action="store_true", help="keep runs whose n-samples are incomplete")
    p.set_defaults(func=cmd_leaderboard)

    p = subparsers.add_parser(
        "compare",
        help="paired comparison of two runs: differences, bootstrap CIs and permutation p-values by video",
        description="Pair RUN_A's and RUN_B's sample logs by question_id and report, per category and for "
        "narrative/cultural/overall, B - A with a paired bootstrap CI and a sign-flip permutation p-value, "
        "both clustered by video and seeded. RUN is a sample log, a results file or a directory with one run.",
    )
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--task", help="the task to compare (default: every task both runs have)")
    p.add_argument("--reps", type=int, default=2000, help="bootstrap replicates (default: 2000)")
    p.add_argument("--permutations", type=int, default=10000, help="sign-flip permutations (default: 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    p.add_argument(
        "--across-inputs",
        action="store_true",
        help="an input ablation: pair runs that gave the model different inputs (input modes), per question and "
        "per category (refused otherwise)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON report here")
    p.set_defaults(func=cmd_compare)

    p = subparsers.add_parser(
        "paper-reference",
        help="build results/paper_reference.json from the package's paper figures and check their consistency",
    )
    p.add_argument("--source", help="a figures JSON (default: the package's naru_eval/data_files/naru_paper.json)")
    p.add_argument("-o", "--out", help="write the reference here (e.g. results/paper_reference.json)")
    p.set_defaults(func=cmd_paper_reference)

    p = subparsers.add_parser(
        "leaderboard-schema",
        help="the leaderboard.json and manifest.json schema as Markdown, generated from the result models",
    )
    p.add_argument("--write", metavar="DOC", help="replace the schema section of DOC (e.g. docs/leaderboard.md)")
    p.add_argument("--check", action="store_true", help="with --write: exit 1 if DOC's section is out of date")
    p.set_defaults(func=cmd_leaderboard_schema)

    p = subparsers.add_parser(
        "metric-table",
        help="the metrics of every task as one table (name, scope, aggregation, ...), generated from the metric "
        "tables; --write a task folder's metric_list or docs/metrics.md's table",
    )
    p.add_argument(
        "--write",
        action="append",
        metavar="PATH",
        help="a task folder (tasks/naru: the YAMLs' metric_list) or a doc (docs/metrics.md); repeatable",
    )
    p.add_argument("--check", action="store_true", help="with --write: exit 1 if a generated part is out of date")
    p.set_defaults(func=cmd_metric_table)
