"""``naru-eval judge``: the open-ended judge outside lmms-eval.

    naru-eval judge facts [--all] [--out FILE]        decompose and freeze the reference facts, export JSONL
    naru-eval judge score RUN_DIR... [--judge-model M] re-judge saved naru_open sample logs (no model re-run)
                              [--batch]            ... with the verification calls as Batch API jobs
    naru-eval judge audit export SOURCE... --out F     a stratified, seeded sheet of verdicts for annotators
    naru-eval judge audit report SHEET                 acceptance, agreement, Cohen's kappa, Krippendorff's alpha
    naru-eval judge mcq-fallback LOG...                how many MCQ answers the LLM fallback read
    naru-eval judge cost [--questions 500 --models 8]  the cost estimate (assumed token counts)
    naru-eval judge schemas                            the JSON schemas of the judge's outputs

The judge is configured by NARU_JUDGE_* / OPENAI_API_KEY (see docs/judge.md); flags override.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from naru_eval.core.json_types import JSONObject, as_int, as_str
from naru_eval.core.metrics import Metric
from naru_eval.core.numbers import fmt_num

if TYPE_CHECKING:
    from naru_eval.judge.client import LedgerSummary
    from naru_eval.judge.config import JudgeConfig
    from naru_eval.judge.protocols import MinervaReport
    from naru_eval.judge.score import JudgedSample, OpenReport

OPEN_LOG_GLOB = "*_samples_naru_open*.jsonl"


# ------------------------------------------------------------------------------- helpers


def add_judge_args(p: argparse.ArgumentParser) -> None:
    from naru_eval.judge.config import BACKENDS

    g = p.add_argument_group("judge (defaults from NARU_JUDGE_* environment variables)")
    g.add_argument("--judge-model", help="judge model (default $NARU_JUDGE_MODEL or gpt-5.5)")
    g.add_argument("--facts-model", help="use the facts frozen by this model (default: the judge model)")
    g.add_argument("--base-url", help="OpenAI-compatible /v1 URL (default $NARU_JUDGE_BASE_URL, $OPENAI_BASE_URL)")
    g.add_argument("--backend", choices=BACKENDS)
    g.add_argument("--reasoning-effort", choices=("minimal", "low", "medium", "high"))
    g.add_argument("--concurrency", type=int, help="requests in flight (default 16)")
    g.add_argument("--cache", help="judge SQLite cache (default $NARU_CACHE_DIR/judge.sqlite)")
    g.add_argument(
        "--prices",
        help="JSON or JSON file over the built-in prices: {model: {input, cached_input, output}}, USD per 1M",
    )
    g.add_argument("--refresh", action="store_true", help="ask again even when an output is cached")


def config_from_args(args: argparse.Namespace) -> JudgeConfig:
    """The judge: an option given overrides its variable; one not given (None) leaves the
    environment's value (docs/judge.md, "Configuration and precedence")."""
    from naru_eval.judge.config import JudgeConfig, prices_of

    return JudgeConfig.from_env(
        model=args.judge_model,
        facts_model=args.facts_model,
        base_url=args.base_url,
        backend=args.backend,
        reasoning_effort=args.reasoning_effort,
        concurrency=args.concurrency,
        cache_path=args.cache,
        prices=prices_of(args.prices, "--prices") if args.prices else None,
        refresh=True if args.refresh else None,
        batch=True if getattr(args, "batch", False) else None,
        batch_wait=getattr(args, "batch_wait", None),
    )


def find_open_logs(paths: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            # not our own outputs (<log stem>.scores.jsonl under judge/)
            out.extend(q for q in p.rglob(OPEN_LOG_GLOB) if not q.name.endswith(".scores.jsonl"))
        elif p.exists():
            out.append(p)
    return sorted(set(out))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "judge"


def _label(log: Path) -> str:
    parent = log.parent.name
    return f"{parent}/{log.stem}" if parent else log.stem


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None or isinstance(v, float):
        return fmt_num(v, 1, scale=100, suffix="%") if pct else fmt_num(v, 3)
    return str(v)


def recall_table(rows: Mapping[str, Mapping[str, float | None]]) -> str:
    """Every per-response mean of the task (the table OPEN): overall/narrative/cultural (the
    authors' macro means), recall (per response) beside them, the categories and the other means;
    then the counts and the unscored share."""
    from naru_eval.judge.score import OPEN

    def place(m: Metric[JudgedSample]) -> int:
        return 0 if m.aggregation == "macro" else 1 if m.shown and m.scope == "all" else 2 if m.shown else 3

    cols = [m.name for m in sorted((m for m in OPEN if m.per_item and m.higher_is_better), key=place)]
    counts = [m.name for m in OPEN if m.aggregation == "sum"]
    rates = [m.name for m in OPEN if m.per_item and not m.higher_is_better]
    head = "| run | " + " | ".join([*cols, *counts, *rates]) + " |"
    lines = [head, "|---|" + "---:|" * (len(cols) + len(counts) + len(rates))]
    for name, m in rows.items():
        cells = [_fmt(m.get(c)) for c in cols] + [str(int(m.get(c) or 0)) for c in counts]
        lines.append(f"| {name} | " + " | ".join([*cells, *(_fmt(m.get(c), True) for c in rates)]) + " |")
    return "\n".join(lines)


def _usage_line(summary: LedgerSummary) -> str:
    t = summary.total
    unpriced = f", {t.unpriced} unpriced" if t.unpriced else ""
    return (
        f"judge calls: {t.calls} made, {t.cached} replayed from the cache, {t.failed} failed; "
        f"tokens in/out {t.prompt_tokens}/{t.completion_tokens}; "
        f"cost now {_usd(t.cost_usd, 4)}, from scratch {_usd(t.nominal_cost_usd, 4)}{unpriced}"
    )


# ------------------------------------------------------------------------------ commands


def _stops_on_config_error(cmd: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A judge refused for its configuration (naru_eval.api.retry.ConfigurationError): the API's
    message and exit status 2, not a traceback."""

    @functools.wraps(cmd)
    def run(args: argparse.Namespace) -> int:
        from naru_eval.api.retry import ConfigurationError

        try:
            return cmd(args)
        except ConfigurationError as e:
            print(f"naru-eval judge: {e}", file=sys.stderr)
            return 2

    return run


@_stops_on_config_error
def cmd_facts(args: argparse.Namespace) -> int:
    from naru_eval.core.data import load_local
    from naru_eval.core.hub import load_dataset_from_env
    from naru_eval.core.subset import select_subset
    from naru_eval.judge.facts import export_facts
    from naru_eval.judge.items import JudgeItem
    from naru_eval.judge.pipeline import Judge

    ds = load_local(args.data_dir) if args.data_dir else load_dataset_from_env()
    questions = ds.questions if args.all else select_subset(ds.questions)
    items = [JudgeItem.from_question(q) for q in questions]
    judge = Judge(config_from_args(args))
    sets = judge.prefetch_facts(items)
    failed = {qid: fs.reason for qid, fs in sets.items() if not fs.ok}
    out = Path(args.out or f"naru_facts_{_slug(judge.fact_model)}.jsonl")
    n = export_facts(
        judge.store, out, judge_model=judge.fact_model, prompt_version=judge.decomposer.prompt_version, items=items
    )
    n_facts = sum(len(fs.facts) for fs in sets.values())
    print(f"{n} questions, {n_facts} facts ({judge.fact_model}, {judge.decomposer.prompt_version}) -> {out}")
    print(_usage_line(judge.ledger.summary()))
    shown = sorted(failed.items())
    for qid, why in shown[:20]:
        print(f"  no facts for {qid}: {why}", file=sys.stderr)
    if len(shown) > 20:
        print(f"  ... and {len(shown) - 20} more", file=sys.stderr)
    if failed:
        where = (
            judge.fact_model if judge.config.backend != "openai" else f"{judge.fact_model} at {judge.config.base_url}"
        )
        print(
            f"naru-eval judge facts: {len(failed)} of {len(items)} question(s) have no facts from the judge {where}",
            file=sys.stderr,
        )
    return 1 if failed else 0


@_stops_on_config_error
def cmd_score(args: argparse.Namespace) -> int:
    from naru_eval.judge.items import JudgeItem
    from naru_eval.judge.pipeline import Judge, JudgeReportFile
    from naru_eval.judge.score import responses_from_open_log, summarize, unreached_problem

    logs = find_open_logs(args.run_dirs)
    if not logs:
        print(
            f"naru-eval judge score: no naru_open sample logs ({OPEN_LOG_GLOB}) under {args.run_dirs}", file=sys.stderr
        )
        return 1
    config = config_from_args(args)
    if config.batch and (args.protocol != "facts" or config.backend != "openai"):
        print(
            "naru-eval judge score: --batch / NARU_JUDGE_BATCH batches the facts protocol's verification "
            "calls of the openai backend only",
            file=sys.stderr,
        )
        return 2
    judge = Judge(config)
    loaded = {log: responses_from_open_log(log) for log in logs}
    if args.protocol == "facts":  # one decomposition per question, for every log at once
        all_items = [JudgeItem.from_payload(p) for rows in loaded.values() for p, _ in rows]
        judge.prefetch_facts(list({(i.question_id, i.ref_hash): i for i in all_items}.values()))
    tag = _slug(f"{args.protocol}_{config.model if config.backend == 'openai' else judge.fact_model}")
    table: dict[str, dict[str, float | None]] = {}
    reports: dict[str, JudgeReportFile] = {}
    unreached_logs: list[str] = []
    for log, rows in loaded.items():
        pairs = [(JudgeItem.from_payload(p), resp) for p, resp in rows]
        out_dir = Path(args.out) if args.out else log.parent / "judge" / tag
        label = _label(log)
        if args.protocol == "minerva":
            from naru_eval.judge.protocols import MinervaProtocol, summarize_minerva

            if judge.client is None:
                print("naru-eval judge score: --protocol minerva needs the openai backend", file=sys.stderr)
                return 2
            results = MinervaProtocol(judge.client, k=args.k).grade_many(pairs)
            rows_out = [r.to_dict() | {"model": label} for r in results]
            minerva = summarize_minerva(results)
            table[label] = {
                **{k: v.normalized for k, v in minerva.table.items()},
                "n_scored": minerva.n_scored,
                "n_unscored": minerva.n_unscored,
                "unscored_rate": minerva.unscored_rate,
            }
            report: OpenReport | MinervaReport = minerva
        else:
            from naru_eval.judge.batch import BatchNotReady

            try:
                samples = judge.judge_many(pairs)
            except BatchNotReady as e:
                print(f"naru-eval judge score: {e}", file=sys.stderr)
                return 3
            problem = unreached_problem(samples, f"{config.model} at {config.base_url}")
            if problem is not None:  # nothing that looks like a score is written for this log
                print(f"naru-eval judge score: {label}: {problem}", file=sys.stderr)
                unreached_logs.append(label)
                continue
            # the data the logged run was on and what its model was given
            samples = [
                s.with_provenance(as_str(p.get("data_fingerprint")) or None, p, as_int(p.get("world_size")))
                for s, (p, _) in zip(samples, rows, strict=True)
            ]
            rows_out = [s.to_dict() | {"model": label} for s in samples]
            report = summarize(samples)
            table[label] = report.metrics
        out_dir.mkdir(parents=True, exist_ok=True)
        scores_path = out_dir / f"{log.stem}.scores.jsonl"
        with open(scores_path, "w", encoding="utf-8") as f:
            for r in rows_out:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        doc = JudgeReportFile(log=str(log), scores=str(scores_path), judge=judge.describe(), report=report)
        (out_dir / f"{log.stem}.report.json").write_text(
            json.dumps(doc.model_dump(), indent=2, ensure_ascii=False), encoding="utf-8"
        )
        reports[label] = doc
    usage = judge.ledger.summary()
    if args.json:
        out: JSONObject = {"reports": {k: v.model_dump() for k, v in reports.items()}, "usage": usage.model_dump()}
        if unreached_logs:
            out["not_scored"] = [*unreached_logs]
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        if table:
            print(recall_table(table))
        print(_usage_line(usage))
        jobs = judge.batch_jobs
        if config.batch:
            print(f"Batch API jobs: submitted {jobs['submitted'] or 'none'}, resumed {jobs['resumed'] or 'none'}")
        if usage.system_fingerprints:
            print(f"system_fingerprint: {usage.system_fingerprints}")
    return 1 if unreached_logs else 0


def _load_judged(paths: Sequence[str]) -> list[tuple[str, JudgedSample]]:
    from naru_eval.judge.score import JudgedSample

    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files.extend(sorted(p.rglob("*.scores.jsonl")) or find_open_logs([str(p)]))
        else:
            files.append(p)
    out = []
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            if "overall" in rec and isinstance(rec["overall"], dict):
                out.append((_label(f), JudgedSample.from_dict(rec["overall"])))
            elif "status" in rec and "facts" in rec:
                out.append((str(rec.get("model") or _label(f)), JudgedSample.from_dict(rec)))
    return out


def cmd_audit_export(args: argparse.Namespace) -> int:
    from naru_eval.judge.audit import export_audit

    samples = _load_judged(args.sources)
    if not samples:
        print("naru-eval judge audit export: no judged responses found", file=sys.stderr)
        return 1
    path, n = export_audit(samples, args.out, n=args.n, annotators=args.annotators, seed=args.seed, unit=args.unit)
    print(f"{n} row(s) ({args.unit}s, {args.annotators} annotator columns, seed {args.seed}) -> {path}")
    return 0


def cmd_audit_report(args: argparse.Namespace) -> int:
    from naru_eval.judge.audit import audit_report, format_report, read_sheet

    try:
        rep = audit_report(read_sheet(args.sheet))
    except ValueError as e:
        print(f"naru-eval judge audit report: {e}", file=sys.stderr)
        return 1
    print(json.dumps(rep.model_dump(), indent=2) if args.json else format_report(rep))
    return 0


def cmd_mcq_fallback(args: argparse.Namespace) -> int:
    from naru_eval.core.scoring import samples_from_log
    from naru_eval.judge.mcq_fallback import fallback_rate

    rows = {Path(p).name: fallback_rate(samples_from_log(p)) for p in args.sample_logs}
    if args.json:
        print(json.dumps({name: r.model_dump() for name, r in rows.items()}, indent=2))
    else:
        for name, r in rows.items():
            print(
                f"{name}: {r.llm_fallback} of {r.n} answers read by the LLM fallback "
                f"({_fmt(r.fallback_rate, True)}; {r.fallback_correct} correct); still invalid: {r.still_invalid}"
            )
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    from naru_eval.judge.config import load_prices
    from naru_eval.judge.cost import estimate_cost

    est = estimate_cost(
        args.questions, args.models, args.judge_model, load_prices(args.prices), minerva_k=args.minerva_k
    )
    if args.json:
        print(est.to_json())
        return 0
    p = est.price_per_1M
    if p is None:
        print(
            f"judge {est.model}: no price in the table (naru_eval/data_files/prices.json); cost unknown. "
            "Give one with --prices / NARU_JUDGE_PRICES."
        )
    else:
        print(f"judge {est.model} at ${p['input']}/M input, ${p['output']}/M output (dated table; check it)")
    for part, e in (("facts", est.facts), ("verify", est.verify), ("minerva", est.minerva)):
        if e is not None:
            print(
                f"  {part}: {e.calls} calls, {e.input_tokens:,} in + {e.output_tokens:,} out tokens "
                f"= {_usd(e.usd, 2)} live, {_usd(e.batch_usd, 2)} batch"
            )
    print(
        f"  total {_usd(est.total_usd, 2)} for {args.questions} questions x {args.models} models "
        f"({_usd(est.per_model_usd, 2)} per extra model; {_usd(est.without_frozen_facts_usd, 2)} "
        "without frozen facts)"
    )
    print(
        f"  total with the verifications as Batch API jobs (--batch; facts stay live): "
        f"{_usd(est.total_batch_usd, 2)} ({_usd(est.per_model_batch_usd, 2)} per extra model; "
        f"batch price = live x {fmt_num(est.batch_factor, 2)})"
    )
    return 0


def _usd(value: float | None, digits: int) -> str:
    """Dollars, or ``unknown`` (a model without a price is never shown as $0)."""
    return "unknown" if value is None else f"${value:.{digits}f}"


def cmd_schemas(args: argparse.Namespace) -> int:
    from naru_eval.judge.schemas import json_schemas

    print(json.dumps(json_schemas(), indent=2))
    return 0


# ---------------------------------------------------------------------------- the parser


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``judge`` (facts / score / audit export / audit report / ...) to ``naru-eval``."""
    judge = subparsers.add_parser(
        "judge",
        help="the open-ended (naru_open) judge: facts, re-scoring, audits",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = judge.add_subparsers(dest="judge_command", required=True)

    p = sub.add_parser("facts", help="decompose the references into atomic facts (frozen) and export them as JSONL")
    p.add_argument("--data-dir", help="NARU data directory (default: $NARU_DATA_DIR / $NARU_HF_DATASET)")
    p.add_argument("--all", action="store_true", help="every question, not only the 500-question subset")
    p.add_argument("--out", help="JSONL to write (default naru_facts_<model>.jsonl)")
    add_judge_args(p)
    p.set_defaults(func=cmd_facts)

    p = sub.add_parser("score", help="judge saved naru_open sample logs again (no model re-run)")
    p.add_argument("run_dirs", nargs="+", help="lmms-eval output dirs or *_samples_naru_open*.jsonl files")
    p.add_argument("--protocol", choices=("facts", "minerva"), default="facts", help="atomic facts (default) or 0-2")
    p.add_argument("--k", type=int, default=3, help="minerva: judge samples per response (majority vote)")
    p.add_argument("--out", help="output dir (default: <log dir>/judge/<protocol>_<model>/)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--batch",
        action="store_true",
        help="send the verification calls as OpenAI Batch API jobs (half price, within 24 h; resumable: "
        "a rerun picks up the recorded job). Default: $NARU_JUDGE_BATCH",
    )
    p.add_argument(
        "--batch-wait", type=float, help="with --batch: stop waiting after this many seconds (rerun to resume)"
    )
    add_judge_args(p)
    p.set_defaults(func=cmd_score)

    audit = sub.add_parser("audit", help="validate the judge against annotators")
    asub = audit.add_subparsers(dest="audit_command", required=True)
    p = asub.add_parser("export", help="a stratified, seeded sheet of judged responses with annotator columns")
    p.add_argument("sources", nargs="+", help="*.scores.jsonl from 'judge score', sample logs, or dirs")
    p.add_argument("--out", required=True, help="sheet to write (.csv or .jsonl)")
    p.add_argument("--n", type=int, default=50, help="responses to sample (default 50)")
    p.add_argument("--annotators", type=int, default=3)
    p.add_argument("--seed", default="0")
    p.add_argument("--unit", choices=("response", "fact"), default="response")
    p.set_defaults(func=cmd_audit_export)
    p = asub.add_parser("report", help="acceptance, agreement, kappa and alpha of a filled sheet")
    p.add_argument("sheet")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit_report)

    p = sub.add_parser("mcq-fallback", help="the LLM-fallback rate of MCQ sample logs (NARU_MCQ_LLM_FALLBACK=1)")
    p.add_argument("sample_logs", nargs="+")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_mcq_fallback)

    p = sub.add_parser("cost", help="estimated judging cost (assumed token counts; see docs/judge.md)")
    p.add_argument("--questions", type=int, default=500)
    p.add_argument("--models", type=int, default=8)
    p.add_argument("--judge-model", default="gpt-5.5")
    p.add_argument("--prices")
    p.add_argument("--minerva-k", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_cost)

    p = sub.add_parser("schemas", help="print the JSON schemas of the judge's structured outputs")
    p.set_defaults(func=cmd_schemas)
