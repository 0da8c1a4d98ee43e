"""``naru-eval experiment run|status|compare|submit``: one model over a grid of model-argument
variants (naru_eval/report/experiment.py), resumably, each cell verified by its files, then the
paired comparisons the grid asks for.

    naru-eval experiment run --model M --model_args A --out OUT                      # the frame sweep
    naru-eval experiment run --model M --model_args A --out OUT --ablation audio      # what audio is worth
    naru-eval experiment run ... --ablation transcript=/data/subs                     # what the dialogue is worth
    naru-eval experiment run ... --budgets 8,16,32 --axis select=uniform,random,its   # budgets x selectors

``scripts/frame_sweep.sh`` and ``scripts/audio_ablation.sh`` are entry points of ``run``; ``submit``
is ``naru-eval sweep submit`` (a SLURM array, one task per cell). docs/cluster.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from naru_eval.cli.grid import (
    GridError,
    GridOptions,
    adapter_args,
    add_grid_options,
    build,
    check_cells,
    launcher_problem,
)
from naru_eval.cli.sweep import add_submit_parser
from naru_eval.redaction import redact


def cmd_run(args: argparse.Namespace) -> int:
    from naru_eval.cli.runner import Runner, RunOptions

    model_args = args.model_args or ""
    problems: list[str] = []
    exp = None
    try:
        args_model = adapter_args(args.model) if args.model else None
        exp = build(args.model or "", model_args, GridOptions.of(args), args_model.model_fields if args_model else None)
        problems += check_cells(exp, args_model)
    except GridError as e:
        problems += str(e).splitlines()
    cells = exp.cells() if exp is not None else []
    if exp is not None and args.index is not None and not 0 <= args.index < len(cells):
        problems.append(
            f"--index {args.index} is outside the {len(cells)} {exp.unit}(s) {exp.listing()} (a SLURM array larger "
            "than the grid: naru-eval sweep submit derives --array from it)"
        )
    if not args.out:
        problems.append("--out is required")
    launcher = shlex.split(args.launcher) if args.launcher else [sys.executable, "-m", "lmms_eval"]
    problem = launcher_problem(launcher)
    if problem:
        problems.append(f"--launcher: {problem}")
    if problems or exp is None:
        print(f"naru-eval experiment: error: {redact(chr(10).join(problems))}", file=sys.stderr)
        return 2
    extra = args.lmms_eval_args[1:] if args.lmms_eval_args[:1] == ["--"] else args.lmms_eval_args
    opts = RunOptions(
        out=Path(args.out).absolute(),
        launcher=launcher,
        extra=list(extra),
        label=args.label,
        store_per_cell=args.store_per_budget,
        quiet=args.quiet,
        dry_run=args.dry_run,
        leaderboard=args.leaderboard,
        compare=not args.no_compare,
    )
    runner = Runner(exp, opts)
    return runner.run(cells if args.index is None else [cells[args.index]], whole=args.index is None)


def cmd_status(args: argparse.Namespace) -> int:
    from naru_eval.report.sweep import experiment_status

    try:
        code, msg = experiment_status(args.dir, args.since)
    except ValueError as e:  # a manifest that cannot be read: named, no traceback
        print(f"naru-eval experiment status: {e}", file=sys.stderr)
        return 2
    print(msg, file=sys.stderr if code == 2 else sys.stdout)
    return code


def cmd_compare(args: argparse.Namespace) -> int:
    """The comparisons an experiment's manifests declare, again (e.g. after its SLURM array)."""
    from naru_eval.cli.runner import compare_cells
    from naru_eval.report.experiment import Experiment
    from naru_eval.report.runs import MANIFEST_NAME, read_manifest

    root = Path(args.dir)
    docs = [m.experiment for m in map(read_manifest, sorted(root.glob(f"*/{MANIFEST_NAME}"))) if m.experiment]
    if not docs:
        print(f"naru-eval experiment compare: {root}: no cell manifest declares an experiment", file=sys.stderr)
        return 2
    doc = docs[0]
    exp = Experiment(model=doc.model, model_args="", tasks=tuple(doc.tasks), axes=tuple(doc.axes))
    return compare_cells(root, exp)


def add_run_options(r: argparse.ArgumentParser) -> None:
    r.add_argument("--model", help="lmms-eval --model (any adapter; `naru-eval adapters` lists them)")
    r.add_argument(
        "--model_args", "--model-args", dest="model_args", help="the base args; {F}: the budget, {cell}: the cell"
    )
    r.add_argument("--out", "--output_path", dest="out", help="output root: OUT/<cell>/ per cell (required)")
    r.add_argument("--label", help="the model's name on the leaderboard (default: pretrained=/model= of the args)")
    add_grid_options(r)
    r.add_argument("--index", type=int, help="run only the I-th (0-based) cell; SLURM arrays pass $SLURM_ARRAY_TASK_ID")
    r.add_argument("--launcher", help='e.g. "accelerate launch --multi_gpu --num_processes 4 -m lmms_eval"')
    r.add_argument(
        "--store-per-budget",
        "--store-per-cell",
        dest="store_per_budget",
        action="store_true",
        help="one response store per cell, OUT/<cell>/responses.sqlite (SLURM arrays; wins over an exported "
        "NARU_RESPONSE_STORE unless that names one per cell with {F} or {cell})",
    )
    r.add_argument("--quiet", action="store_true", help="lmms-eval's output to OUT/<cell>/lmms_eval.log only")
    r.add_argument("--dry-run", action="store_true", help="print what would run (secrets masked); run nothing")
    r.add_argument("--leaderboard", action="store_true", help="at the end, OUT/leaderboard.json over every cell")
    r.add_argument("--no-compare", action="store_true", help="skip the paired comparisons at the end")
    r.add_argument("lmms_eval_args", nargs=argparse.REMAINDER, help="after --: passed to lmms-eval")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("experiment", help="one model over a grid of model-arg variants: run, status, compare")
    sub = p.add_subparsers(dest="experiment_command", required=True)
    r = sub.add_parser(
        "run",
        help="run every cell here (skipping complete ones), then the paired comparisons",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(r)
    r.set_defaults(func=cmd_run)
    s = sub.add_parser("status", help="one line per cell; exit 0 when every cell is complete, 3 when some is not")
    s.add_argument("dir", help="an experiment's output root, or one cell's folder")
    s.add_argument("--since", type=float, help="ignore results files older than this Unix time")
    s.set_defaults(func=cmd_status)
    c = sub.add_parser("compare", help="the paired comparisons the experiment declares: OUT/compare/*.json")
    c.add_argument("dir", help="an experiment's output root")
    c.set_defaults(func=cmd_compare)
    add_submit_parser(sub)  # the one submission, also `naru-eval sweep submit`
    # the same frame sweep status under its old name (docs, habits)
    s = subparsers.add_parser("sweep-status", help="= naru-eval experiment status")
    s.add_argument("dir")
    s.add_argument("--since", type=float, help="ignore results files older than this Unix time")
    s.set_defaults(func=cmd_status)
