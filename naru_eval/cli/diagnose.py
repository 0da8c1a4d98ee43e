"""``naru-eval diagnose RUN_DIR…``: letter bias, invalid kinds, duration buckets, blind and
circular gaps and shortcut candidates, from lmms-eval output directories (docs/diagnostics.md).

Wired into ``naru-eval`` by :func:`register`.
"""

from __future__ import annotations

import argparse
import sys


def _edges(text: str) -> list[float]:
    try:
        edges = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated minutes, got {text!r}") from None
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise argparse.ArgumentTypeError(f"expected at least two increasing edges, got {text!r}")
    return edges


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="lmms-eval --output_path directories (searched recursively), sample logs or results files",
    )
    p.add_argument("-o", "--output", help="write the JSON report here, and PNG plots next to it")
    p.add_argument(
        "--duration-edges",
        type=_edges,
        default="30,60,120,240",
        help="duration-bucket edges in minutes (default: 30,60,120,240)",
    )
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap replicates per interval (default: 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument(
        "--leak-min",
        type=int,
        default=None,
        help="list questions right in at least this many models' blind runs (default: all when "
        "there are one or two models, else a strict majority)",
    )
    p.add_argument(
        "--data-dir",
        help="NARU data directory to fill durations the logs lack (annotations' duration_s, else the video's)",
    )
    p.add_argument("--no-plots", action="store_true", help="with -o: write the JSON only")
    p.add_argument("--json", action="store_true", help="print the JSON report instead of the summary")


def cmd_diagnose(args: argparse.Namespace) -> int:
    from naru_eval.report.diagnostics import diagnose
    from naru_eval.report.diagnostics_render import summary_text, write_report
    from naru_eval.report.models import dump_json

    edges = args.duration_edges if isinstance(args.duration_edges, list) else _edges(args.duration_edges)
    try:
        report = diagnose(
            args.run_dirs,
            edges_min=edges,
            iters=args.bootstrap,
            seed=args.seed,
            leak_min=args.leak_min,
            data_dir=args.data_dir,
        )
    except (FileNotFoundError, ValueError) as e:
        print(f"naru-eval diagnose: {e}", file=sys.stderr)
        return 2
    if args.output:
        path = write_report(report, args.output, plots=not args.no_plots)
        print(f"wrote {path}" + (f" and {len(report.plots or [])} plot(s)" if not args.no_plots else ""))
    if args.json:
        print(dump_json(report), end="")
    else:
        print(summary_text(report), end="")
    for r in report.runs:
        if r.recomputes is False:
            print(f"naru-eval diagnose: {r.label}: the log's metrics differ from results.json", file=sys.stderr)
    if not report.runs:
        print("naru-eval diagnose: no NARU sample logs (*_samples_<task>.jsonl) found", file=sys.stderr)
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``diagnose`` subcommand to ``naru-eval``'s subparsers."""
    p = subparsers.add_parser(
        "diagnose",
        help="letter bias, invalid kinds, duration buckets, blind/circular gaps, shortcut candidates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(func=cmd_diagnose)
