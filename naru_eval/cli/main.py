"""``naru-eval``: the project's one console script.

Subcommands: ``validate-data``, ``demo``, ``score``, ``verify-run``, ``make-synthetic``, ``tasks-path``,
``paper-reference``, ``experiment …``, ``sweep submit``, ``sweep-status``, ``diagnose``, ``estimate-cost``,
``judge …``, ``store …``, ``transcribe``: one
parser; each command group registers its subcommands from its own module (naru_eval/cli/<group>.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from naru_eval.cli import adapters, diagnose, experiment, gemini, judge, results, store, sweep, transcribe
from naru_eval.cli.demo import run_demo
from naru_eval.report.summary import metrics_table
from naru_eval.settings import settings


def cmd_validate(args: argparse.Namespace) -> int:
    from naru_eval.core.validate import validate

    data_dir = args.data_dir or settings().data_dir
    if data_dir is None and not settings().hf_dataset:
        print("naru-eval validate-data: give DIR or set NARU_DATA_DIR / NARU_HF_DATASET", file=sys.stderr)
        return 2
    if args.no_videos and args.audio:
        print(
            "naru-eval validate-data: --audio checks each video's soundtrack, so it needs the videos: drop --no-videos",
            file=sys.stderr,
        )
        return 2
    from naru_eval.core.transcripts import TranscriptSource

    try:
        source = TranscriptSource.parse(args.transcript)
    except ValueError as e:
        print(f"naru-eval validate-data: {e}", file=sys.stderr)
        return 2
    report = validate(
        data_dir,
        videos=not args.no_videos,
        audio=args.audio,
        transcript=source,
        asr_model=args.asr_model,
    )
    if report.dataset is not None:
        ds = report.dataset
        print(f"{ds.source}: {len(ds.questions)} questions, {len({q.video_id for q in ds.questions})} videos")
        if report.videos:
            hours = sum(v.duration_s for v in report.videos.values()) / 3600
            print(f"videos readable: {len(report.videos)} ({hours:.2f} h)")
        if report.audio:
            print(f"audio tracks readable: {len(report.audio)}")
        if source.enabled:
            cues = sum(report.transcripts.values())
            print(f"transcripts ({source.label}): {len(report.transcripts)} video(s), {cues} cue(s)")
    for note in report.notes:
        print(f"note: {note}")
    if report.ok:
        print("OK")
        return 0
    from naru_eval.core.data import shown_problems

    print(f"{len(report.problems)} problem(s):", file=sys.stderr)
    for p in shown_problems(report.problems):
        print(f"  - {p}", file=sys.stderr)
    return 1


def cmd_score(args: argparse.Namespace) -> int:
    """Every metric recomputed from each sample log, with the video-clustered 95% bootstrap
    interval (:func:`naru_eval.report.stats.bootstrap_ci`, seeded) of the macro metrics and accuracy."""
    from naru_eval.core.scoring import MCQ, compute_metrics, samples_from_log
    from naru_eval.report.stats import bootstrap_ci

    rows: dict[str, dict[str, float | None]] = {}
    cis: dict[str, dict[str, Sequence[float] | None]] = {}
    for p in args.sample_logs:
        samples = samples_from_log(p)
        rows[Path(p).name] = compute_metrics(samples)
        ci = bootstrap_ci(samples, reps=args.reps, seed=args.seed, metrics=MCQ.headline)
        cis[Path(p).name] = {m: list(v) if v else None for m, v in ci.items()}
    if args.json:
        out = {name: {**rows[name], "ci95": cis[name], "bootstrap": _bootstrap_info(args)} for name in rows}
        print(json.dumps(out, indent=2))
    else:
        print(metrics_table(rows, cis))
        b = _bootstrap_info(args)
        print(
            f"\nbrackets: {', '.join(MCQ.headline)}: 95% percentile bootstrap CI, videos resampled with "
            f"replacement ({b['reps']} reps, seed {b['seed']}); overall/narrative/cultural recomputed as "
            "means of category means on each resample"
        )
    return 0


def _bootstrap_info(args: argparse.Namespace) -> dict[str, object]:
    from naru_eval.core.scoring import MCQ

    return {"cluster": "video_id", "reps": args.reps, "seed": args.seed, "level": 0.95, "metrics": list(MCQ.headline)}


def cmd_make_synthetic(args: argparse.Namespace) -> int:
    from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, make_dataset

    counts = dict(PAPER_COUNTS) if args.paper_counts else {c: args.per_category for c in PAPER_COUNTS}
    make_dataset(args.out_dir, SyntheticSpec(counts=counts, n_videos=args.videos, seed=args.seed, audio=args.audio))
    print(f"wrote {sum(counts.values())} questions over {args.videos} videos to {args.out_dir}")
    return 0


def cmd_tasks_path(args: argparse.Namespace) -> int:
    import importlib.util

    spec = importlib.util.find_spec("lmms_eval.tasks.naru")
    if spec is None or not spec.submodule_search_locations:
        print("lmms_eval.tasks.naru is not installed; use --include_path tasks/naru from a checkout", file=sys.stderr)
        return 1
    print(list(spec.submodule_search_locations)[0])
    return 0


def cmd_verify_run(args: argparse.Namespace) -> int:
    """Exit 0 when the run is complete (results, one parsable sample-log line per question, metrics
    that recompute); else 1, listing why. lmms-eval's own exit status does not tell."""
    from naru_eval.core.runfiles import run_world_size
    from naru_eval.lmms.run import verify_run

    problems = verify_run(args.path, args.since)
    if not problems:
        world = run_world_size(args.path, args.since)
        shown = "" if world is None else f" ({world} process{'es' if world > 1 else ''})"
        print(f"{args.path}: complete{shown}")
        return 0
    print(f"{args.path}: the run is not complete ({len(problems)} problem(s)):", file=sys.stderr)
    for p in problems:
        print(f"  - {p}", file=sys.stderr)
    return 1


def cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(Path(args.out), per_category=args.per_category, videos=args.videos)


def build_parser() -> argparse.ArgumentParser:
    from naru_eval.report.stats import DEFAULT_BOOTSTRAP_REPS, DEFAULT_SEED  # numpy only when the CLI runs

    parser = argparse.ArgumentParser(prog="naru-eval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate-data", help="check annotations and that every video opens; all problems at once")
    p.add_argument("data_dir", nargs="?", help="NARU data directory (default: $NARU_DATA_DIR)")
    p.add_argument("--no-videos", action="store_true", help="check the schema only")
    p.add_argument(
        "--audio",
        action="store_true",
        help="also check that every video has a decodable audio track (for runs with audio=true)",
    )
    p.add_argument(
        "--transcript",
        default="none",
        help="also check every video has a transcript: asr, embedded or a directory of <video_id>.srt/.vtt/.ass",
    )
    p.add_argument("--asr-model", help="with --transcript asr: the ASR model (default kotoba-whisper-v2.0)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("demo", help="build a synthetic NARU sample and score it through the real lmms-eval")
    p.add_argument("--out", default="results/demo", help="output directory (default: results/demo)")
    p.add_argument("--per-category", type=int, default=8, help="questions per category (default: 8)")
    p.add_argument("--videos", type=int, default=12, help="synthetic videos (default: 12)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("score", help="recompute every metric from lmms-eval sample logs")
    p.add_argument("sample_logs", nargs="+", help="*_samples_<task>.jsonl files")
    p.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    p.add_argument("--reps", type=int, default=DEFAULT_BOOTSTRAP_REPS, help="bootstrap replicates (default 2000)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed (default 0)")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser(
        "verify-run",
        help="exit 1 unless an lmms-eval run is complete: its sample logs parse, hold one line per question, "
        "and its metrics recompute from them",
    )
    p.add_argument("path", help="a *_results.json, or a folder (its newest results file)")
    p.add_argument("--since", type=float, help="only a results file written at or after this Unix time")
    p.set_defaults(func=cmd_verify_run)

    p = sub.add_parser("make-synthetic", help="write a synthetic NARU-format data directory")
    p.add_argument("out_dir")
    p.add_argument("--per-category", type=int, default=4)
    p.add_argument("--paper-counts", action="store_true", help="use the paper's 1,481 category counts")
    p.add_argument("--videos", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--audio", action="store_true", help="give each video a soundtrack (each segment its own tone)")
    p.set_defaults(func=cmd_make_synthetic)

    p = sub.add_parser("tasks-path", help="print where the installed NARU task YAMLs live")
    p.set_defaults(func=cmd_tasks_path)

    # the command groups, one module each (none imports anything heavy at top)
    for module in (results, diagnose, gemini, judge, store, adapters, experiment, sweep, transcribe):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from naru_eval.core.data import DataError
    from naru_eval.core.scoring import SampleLogError
    from naru_eval.settings import SettingsError, UserError, check_environment
    from naru_eval.store.db import StoreError

    args = build_parser().parse_args(argv)
    try:
        check_environment()  # every NARU_* variable at once, before any work
    except SettingsError as e:
        print(f"naru-eval {args.command}: {e}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except SampleLogError as e:  # a user's file (truncated, empty, another task's): named, no traceback
        print(f"naru-eval {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except (StoreError, DataError) as e:  # a store that cannot be used, or bad data: named, no traceback
        print(f"naru-eval {args.command}: {e}", file=sys.stderr)
        return 1
    except UserError as e:  # any other mistake of the user's (a setting read late, a file): its message
        print(f"naru-eval {args.command}: {e}", file=sys.stderr)
        return 2
