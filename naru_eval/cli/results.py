"""The results subcommands of ``naru-eval``: ``leaderboard``, ``compare``, ``paper-reference``,
and the frame sweep's ``sweep-status`` / ``sweep-manifest`` (scripts/frame_sweep.sh).

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
from naru_eval.core.runfiles import RunConfig

if TYPE_CHECKING:
    from naru_eval.providers.gemini.usage import UsageTotals
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


def resolve_run(path: str | Path) -> tuple[dict[str, Path], str, RunConfig]:
    """A run given as a sample log, a results file or a directory holding one results file:
    (task -> sample log, a label, its configuration)."""
    from naru_eval.core.runfiles import ResultsFile
    from naru_eval.report.runs import discover, find_manifest, read_manifest

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if p.is_file() and p.name.endswith(".jsonl"):
        task = p.name.split("_samples_", 1)[1][: -len(".jsonl")] if "_samples_" in p.name else "?"
        return {task: p}, str(p), RunConfig()
    if p.is_file():
        res = ResultsFile.read(p)
    else:
        found = sorted(discover([p]).results.items())
        if not found:
            raise FileNotFoundError(f"{p}: no *_results.json below it")
        if len(found) > 1:
            listing = "\n  ".join(str(f) for f, _ in found)
            raise ValueError(f"{p} holds {len(found)} runs; give one of them:\n  {listing}")
        rf, (parsed, _root, why) = found[0]
        if parsed is None:
            raise ValueError(why)
        res = parsed
    mpath = find_manifest(res.path, p if p.is_dir() else res.path.parent.parent)  # a sweep's OUT/fF/manifest.json
    manifest = read_manifest(mpath) if mpath else None
    cfg = res.config
    return res.sample_logs(), f"{cfg.label(manifest)} {res.path}", cfg


def cmd_compare(args: argparse.Namespace) -> int:
    from naru_eval.report.compare import CompareReport, compare, format_comparison
    from naru_eval.report.runs import read_log

    try:
        logs_a, label_a, cfg_a = resolve_run(args.run_a)
        logs_b, label_b, cfg_b = resolve_run(args.run_b)
    except (FileNotFoundError, ValueError) as e:
        print(f"naru-eval compare: {e}", file=sys.stderr)
        return 2
    if args.task:
        tasks = [args.task]
        missing = [x for x, logs in (("A", logs_a), ("B", logs_b)) if args.task not in logs]
        if missing:
            print(f"naru-eval compare: task {args.task} is not in run {' and '.join(missing)}", file=sys.stderr)
            return 2
    elif len(logs_a) == 1 and len(logs_b) == 1:
        tasks = [next(iter(logs_a))]
        logs_b = {tasks[0]: next(iter(logs_b.values()))}
    else:
        tasks = sorted(set(logs_a) & set(logs_b))
        if not tasks:
            print(f"naru-eval compare: no task in common (A: {sorted(logs_a)}, B: {sorted(logs_b)})", file=sys.stderr)
            return 2
    report = CompareReport(a=label_a, b=label_b)
    texts = []
    for task in tasks:
        try:
            log_a, log_b = read_log(logs_a[task], task), read_log(logs_b[task], task)
            cmp = compare(
                log_a.samples,
                log_b.samples,
                reps=args.reps,
                permutation_reps=args.permutations,
                seed=args.seed,
                input_modes=(log_a.input_mode, log_b.input_mode),
                across_inputs=args.across_inputs,
            )
        except ValueError as e:  # a SampleLogError names the file and line
            print(f"naru-eval compare: {task}: {e}", file=sys.stderr)
            return 2
        report.tasks[task] = cmp.as_doc()
        named = (f"{label_a} [{log_a.sampling(cfg_a)}]", f"{label_b} [{log_b.sampling(cfg_b)}]")
        texts.append(f"## {task}\n\n" + format_comparison(cmp, *named))
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(report.model_dump(), indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report.model_dump(), indent=2) if args.json else "\n\n".join(texts))
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


def cmd_sweep_status(args: argparse.Namespace) -> int:
    from naru_eval.report.sweep import sweep_status

    try:
        code, msg = sweep_status(args.dir, args.since)
    except ValueError as e:  # a manifest that cannot be read: named, no traceback
        print(f"naru-eval sweep-status: {e}", file=sys.stderr)
        return 2
    print(msg, file=sys.stderr if code == 2 else sys.stdout)
    return code


def store_usage(store: str | Path, adapter: str, num_frames: int | None) -> UsageTotals | None:
    """The response store's summed usage (tokens, cost) of this adapter and budget, over every run
    key it registered; None when there is nothing. The one sum (``usage_from_store``), combined
    over the run keys; here, not in report/, because report never imports providers."""
    import sqlite3

    from naru_eval.providers.gemini.usage import UsageTotals, usage_from_store  # the one usage sum
    from naru_eval.store.responses import RANK_FIELD, runs

    # a per-rank store (``{rank}`` in its name): every rank's file
    pattern = Path(store)
    files = (
        sorted(pattern.parent.glob(pattern.name.replace(RANK_FIELD, "*"))) if RANK_FIELD in str(store) else [pattern]
    )
    totals: list[UsageTotals] = []
    for p in files:
        if not p.is_file():
            continue
        try:
            keys = [k for k, d in runs(p).items() if d.get("model") == adapter and d.get("num_frames") == num_frames]
            per_key = usage_from_store(p, keys) if keys else {}
        except (sqlite3.Error, json.JSONDecodeError):
            continue
        totals += list(per_key.values())
    return UsageTotals.combined(totals) if totals else None


def cmd_sweep_manifest(args: argparse.Namespace) -> int:
    from naru_eval.report.sweep import SweepConfig, sweep_manifest
    from naru_eval.settings import settings

    try:
        usage = None
        store = settings().response_store
        if args.status != "running" and store:
            cfg = SweepConfig.from_env()
            totals = store_usage(store, cfg.adapter, cfg.budget)
            usage = totals.model_dump() if totals else None
        sweep_manifest(args.dir, args.status, args.seconds, args.message, args.if_not_done, usage=usage)
    except ValueError as e:  # run by hand, or a manifest that cannot be read: named, no traceback
        print(f"naru-eval sweep-manifest: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_leaderboard_schema(args: argparse.Namespace) -> int:
    """Print the result schema (Markdown, from the models), or write it into a doc between its markers."""
    from naru_eval.report.models import schema_markdown, with_schema

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

    # The frame sweep's bookkeeping. Its configuration (SWEEP_MODEL, SWEEP_MODEL_ARGS, ...) comes
    # from the environment, not arguments: model args may hold a key, and arguments show in `ps`.
    p = subparsers.add_parser(
        "sweep-status", help="(scripts/frame_sweep.sh) exit 0: finished; 3: to run; 4: a different configuration"
    )
    p.add_argument("dir")
    p.add_argument("--since", type=float, help="ignore results files older than this epoch time")
    p.set_defaults(func=cmd_sweep_status)
    p = subparsers.add_parser("sweep-manifest", help="(scripts/frame_sweep.sh) write/update DIR/manifest.json")
    p.add_argument("dir")
    p.add_argument("--status", required=True, choices=("running", "done", "failed", "cancelled"))
    p.add_argument("--seconds", type=float)
    p.add_argument("--message")
    p.add_argument("--if-not-done", action="store_true", help="leave a manifest that already says done alone")
    p.set_defaults(func=cmd_sweep_manifest)
