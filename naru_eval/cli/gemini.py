"""``naru-eval estimate-cost``: expected tokens and dollars of a Gemini run, before it is launched.

    naru-eval estimate-cost --model gemini-3-flash --task naru_mcq --fps 0.25 \\
        --media-resolution low --no-audio [--data-dir DIR]

With a data directory (``--data-dir`` or ``$NARU_DATA_DIR``) every question is counted on its
own video's duration (``duration_s`` from the annotations, else read from the file).
Three prices side by side: uncached (``context_cache=false``), with one explicit context cache
per video (the default; creation, cached reads and storage for ``--latency`` seconds per
question at ``--concurrency``), and through the Batch API (``batch=true``). Without
one, the paper's totals stand in: 146.8 h over 155 videos, 1,481 questions (500 for
``naru_mcq_500``), every video at the mean duration, and the context check on a 4 h video. Each
question re-sends its video, so a video's tokens are paid once per question on it.

Token constants, context windows and prices: naru_eval/providers/gemini/tokens.py, families.py and
naru_eval/data_files/prices.json (dated; check them before budgeting). Wired into ``naru-eval`` by
:func:`register`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from naru_eval.providers.gemini.estimate import QuestionSpec, RunEstimate, estimate_run, paper_questions
from naru_eval.providers.gemini.families import MEDIA_RESOLUTIONS, family
from naru_eval.providers.gemini.pricing import load_prices
from naru_eval.providers.gemini.tokens import AUDIO_TOKENS_PER_S, FRAME_OVERHEAD_TOKENS, FRAME_TOKENS
from naru_eval.settings import settings

if TYPE_CHECKING:
    from model_adapters.gemini import Gemini

#: the task template that holds every prompt variant (tasks/naru/_default_template_yaml, shipped
#: as lmms_eval/tasks/naru/): the one copy of naru_gemini's instruction
TASK_TEMPLATE = ("tasks", "naru", "_default_template_yaml")


def gemini_prompt_kwargs() -> dict[str, str]:
    """``naru_gemini``'s ``lmms_eval_specific_kwargs`` as lmms-eval reads them from the task
    template, so the estimate prices the prompt a run sends (never a copy of it)."""
    import importlib.util
    from pathlib import Path

    import yaml

    spec = importlib.util.find_spec("lmms_eval")  # its location only: lmms_eval is not imported
    roots = list(spec.submodule_search_locations or []) if spec else []
    paths = [Path(root).joinpath(*TASK_TEMPLATE) for root in roots]
    path = next((p for p in paths if p.is_file()), None)
    if path is None:
        raise FileNotFoundError("the NARU task template is not installed under lmms_eval/tasks/naru/ (run make env)")

    class _Loader(yaml.SafeLoader):
        """The template's ``!function`` tags are lmms-eval's; only the prompt kwargs are read."""

    _Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    template = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a SafeLoader
    kwargs = template["lmms_eval_specific_kwargs"][gemini_adapter().family.id]
    return {"pre_prompt": str(kwargs.get("pre_prompt", "")), "post_prompt": str(kwargs["post_prompt"])}


def gemini_adapter() -> type[Gemini]:
    """The Gemini adapter class (imported on use: it loads lmms-eval), whose family declares the
    default sampling and the id the task template keys its prompt by."""
    from model_adapters.gemini import Gemini

    return Gemini


def default_fps() -> float:
    """The Gemini adapter's default rate: its family's declared default (the official rows')."""
    default = gemini_adapter().family.default
    if default is None or default.sampling.fps is None:
        raise RuntimeError("the Gemini family declares no default rate (Family.default)")
    return float(default.sampling.fps)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="Gemini model id, e.g. gemini-3-flash-preview or gemini-2.5-flash")
    p.add_argument("--task", default="naru_mcq", help="naru_mcq (1,481 questions) or naru_mcq_500 (default: naru_mcq)")
    p.add_argument(
        "--fps",
        type=float,
        default=None,
        help="videoMetadata.fps, frames sampled per second (default: the Gemini adapter's, the official leaderboard's rate)",
    )
    p.add_argument(
        "--media-resolution",
        choices=MEDIA_RESOLUTIONS,
        default="default",
        help="generationConfig.mediaResolution (default: not sent, the model's default)",
    )
    p.add_argument(
        "--audio",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="whether the videos are sent with their audio track (default: --audio)",
    )
    p.add_argument("--data-dir", help="NARU data directory (default: $NARU_DATA_DIR, else the paper's totals)")
    p.add_argument("--output-tokens", type=int, default=2, help="answer tokens per question (default 2)")
    p.add_argument(
        "--thinking-tokens", type=int, default=0, help="thinking tokens per question, billed as output (default 0)"
    )
    p.add_argument(
        "--prices", help="a price-table JSON (default: $NARU_GEMINI_PRICES, else naru_eval/data_files/prices.json)"
    )
    p.add_argument("--max-input-tokens", type=int, help="override the model's context window")
    p.add_argument(
        "--latency",
        type=float,
        default=60.0,
        help="seconds per question, for how long an explicit cache is stored (default 60)",
    )
    p.add_argument(
        "--concurrency", type=int, default=8, help="questions at a time, as naru_gemini's max_concurrency (default 8)"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def data_questions(data_dir: str | os.PathLike[str], task: str) -> tuple[list[QuestionSpec], str]:
    """One :class:`QuestionSpec` per question of ``task`` in ``data_dir`` (durations probed if absent)."""
    from naru_eval.core.data import load_local
    from naru_eval.core.prompts import mcq_prompt
    from naru_eval.core.subset import select_subset
    from naru_eval.media.video import probe_video

    ds = load_local(data_dir)
    questions = select_subset(ds.questions) if task.endswith("_500") else ds.questions
    durations: dict[str, float] = {}
    prompt_kwargs = gemini_prompt_kwargs()
    out = []
    for q in questions:
        if q.video_id not in durations:
            if q.duration_s:
                durations[q.video_id] = float(q.duration_s)
            else:
                path = ds.video_file(q)
                if path is None:
                    raise FileNotFoundError(f"{q.video_id}: no duration_s and no video file under {data_dir}")
                durations[q.video_id] = probe_video(path, check_end=False).duration_s
        prompt = mcq_prompt(q.question, q.options, prompt_kwargs)
        out.append(QuestionSpec(q.video_id, durations[q.video_id], prompt))
    return out, f"data: {data_dir}"


def estimate(args: argparse.Namespace) -> RunEstimate:
    prices = load_prices(args.prices)
    data_dir = args.data_dir or settings().data_dir
    longest = None
    if data_dir:
        questions, source = data_questions(data_dir, args.task)
    else:
        questions, longest, source = paper_questions(args.task)
    est = estimate_run(
        questions,
        model=args.model,
        task=args.task,
        fps=args.fps if args.fps is not None else default_fps(),
        media_resolution=args.media_resolution,
        audio=args.audio,
        output_tokens=args.output_tokens,
        thinking_tokens=args.thinking_tokens,
        prices=prices,
        source=source,
        longest=longest,
        latency_s=args.latency,
        concurrency=args.concurrency,
    )
    if args.max_input_tokens:
        est.context_window, est.context_known = args.max_input_tokens, True
    price = prices.for_model(args.model)
    if not data_dir and price and "long_context_threshold" in price:
        est.notes.append(
            f"{args.model} has a higher price above {int(price['long_context_threshold']):,} prompt tokens; with "
            "every video at the mean duration no request reaches it, so this underestimates: use --data-dir"
        )
    return est


def _money(x: float | None) -> str:
    return "n/a (model not in the price table)" if x is None else f"${x:,.2f}"


def report(est: RunEstimate) -> str:
    per_frame = FRAME_TOKENS[family(est.model)][est.media_resolution]
    lines = [
        f"Gemini cost estimate: {est.model} on {est.task}",
        f"  source          : {est.source}",
        f"  questions       : {est.questions:,} over {est.videos:,} videos ({est.hours:,.1f} h)",
        f"  sampling        : fps={est.fps:g}, media_resolution={est.media_resolution} "
        f"({per_frame} + {FRAME_OVERHEAD_TOKENS} tokens per frame), "
        f"audio {f'on ({AUDIO_TOKENS_PER_S} tokens/s)' if est.audio else 'off'}",
        f"  frames per pass : {est.frames_per_pass:,} (every video once)",
        f"  input tokens    : {est.input_tokens:,} = video {est.video_tokens:,} + audio {est.audio_tokens:,} + text {est.text_tokens:,} (each question re-sends its video)",
        f"  output tokens   : {est.output_tokens:,} answer + {est.thinking_tokens:,} thinking",
        f"  longest request : {est.longest_video} ({est.longest_s / 3600:.2f} h): {est.longest_request_tokens:,} "
        f"tokens vs context {est.context_window:,}: "
        + ("fits" if est.fits else "WOULD BE REFUSED by the naru_gemini preflight"),
        f"  cost uncached   : {_money(est.cost_usd)} (context_cache=false; {_money(est.cost_usd_cached)} if every "
        "repeat of a video hit the implicit cache, a lower bound)",
        f"  cost cached     : {_money(est.cost_usd_explicit_cache)} with one explicit cache per video "
        f"(the default; {est.cache_videos:,} of {est.videos:,} videos cached, storage {_money(est.cache_storage_usd)})",
        f"  cost batch      : {_money(est.cost_usd_batch)} through the Batch API (batch=true)",
        f"  prices          : as of {est.price_as_of}, {est.price_source}",
    ]
    lines += [f"  note            : {n}" for n in est.notes]
    return "\n".join(lines)


def cmd_estimate_cost(args: argparse.Namespace) -> int:
    try:
        est = estimate(args)
    except (OSError, ValueError) as e:
        print(f"naru-eval estimate-cost: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(est.model_dump(), indent=2))
    else:
        print(report(est))
    return 0 if est.fits else 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``estimate-cost`` subcommand to ``naru-eval``'s subparsers."""
    p = subparsers.add_parser(
        "estimate-cost",
        help="expected tokens and cost of a Gemini run (naru_gemini), before it is launched",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(func=cmd_estimate_cost)
