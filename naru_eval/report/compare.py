"""The paired comparison of two runs, task by task: ``naru-eval compare`` and the experiment
driver's comparisons (naru_eval/cli/experiment.py) both call :func:`compare_runs`, over the one
bootstrap and permutation test of :mod:`naru_eval.report.stats`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from naru_eval.core.runfiles import ResultsFile, RunConfig
from naru_eval.report.runs import discover, find_manifest, read_log, read_manifest
from naru_eval.report.stats import CompareReport, compare, format_comparison


@dataclass(frozen=True)
class ResolvedRun:
    """A run given as a sample log, a results file or a folder: its logs, a label, its config."""

    logs: dict[str, Path]
    label: str
    config: RunConfig


def resolve_run(path: str | Path) -> ResolvedRun:
    """A run given as a sample log, a results file or a directory holding one results file.
    FileNotFoundError / ValueError name what is wrong."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if p.is_file() and p.name.endswith(".jsonl"):
        task = p.name.split("_samples_", 1)[1][: -len(".jsonl")] if "_samples_" in p.name else "?"
        return ResolvedRun({task: p}, str(p), RunConfig())
    if p.is_file():
        res = ResultsFile.read(p)
    else:
        found = sorted(discover([p]).results.items())
        if not found:
            raise FileNotFoundError(f"{p}: no *_results.json below it")
        if len(found) > 1:
            listing = "\n  ".join(str(f) for f, _ in found)
            raise ValueError(f"{p} holds {len(found)} runs; give one of them:\n  {listing}")
        _rf, (parsed, _root, why) = found[0]
        if parsed is None:
            raise ValueError(why)
        res = parsed
    mpath = find_manifest(res.path, p if p.is_dir() else res.path.parent.parent)  # an experiment cell's manifest
    manifest = read_manifest(mpath) if mpath else None
    cfg = res.config
    return ResolvedRun(res.sample_logs(), f"{cfg.label(manifest)} {res.path}", cfg)


@dataclass
class Compared:
    """:func:`compare_runs`' result: the JSON report and the printed tables."""

    report: CompareReport
    texts: list[str] = field(default_factory=list)


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    task: str | None = None,
    across_inputs: bool = False,
    reps: int = 2000,
    permutations: int = 10000,
    seed: int = 0,
) -> Compared:
    """B against A, paired per question and per category, for ``task`` (default: the one task
    of each, else every task both have). ValueError / FileNotFoundError name what is wrong."""
    a, b = resolve_run(run_a), resolve_run(run_b)
    logs_a, logs_b = a.logs, b.logs
    if task:
        tasks = [task]
        missing = [x for x, logs in (("A", logs_a), ("B", logs_b)) if task not in logs]
        if missing:
            raise ValueError(f"task {task} is not in run {' and '.join(missing)}")
    elif len(logs_a) == 1 and len(logs_b) == 1:
        tasks = [next(iter(logs_a))]
        logs_b = {tasks[0]: next(iter(logs_b.values()))}
    else:
        tasks = sorted(set(logs_a) & set(logs_b))
        if not tasks:
            raise ValueError(f"no task in common (A: {sorted(logs_a)}, B: {sorted(logs_b)})")
    out = Compared(CompareReport(a=a.label, b=b.label))
    for t in tasks:
        try:
            log_a, log_b = read_log(logs_a[t], t), read_log(logs_b[t], t)
            cmp = compare(
                log_a.samples,
                log_b.samples,
                reps=reps,
                permutation_reps=permutations,
                seed=seed,
                input_modes=(log_a.input_mode, log_b.input_mode),
                across_inputs=across_inputs,
            )
        except ValueError as e:  # a SampleLogError names the file and line
            raise ValueError(f"{t}: {e}") from None
        out.report.tasks[t] = cmp.as_doc()
        named = (f"{a.label} [{log_a.sampling(a.config)}]", f"{b.label} [{log_b.sampling(b.config)}]")
        out.texts.append(f"## {t}\n\n" + format_comparison(cmp, *named))
    return out
