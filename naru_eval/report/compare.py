"""Two runs compared, paired by question: the difference of each metric (B - A, in percentage
points), a paired bootstrap interval over videos and a paired sign-flip permutation test, with
Holm's correction. ``naru-eval compare`` and the experiment driver's comparisons
(naru_eval/cli/experiment.py) both call :func:`compare_runs`, which resolves each run (a sample
log, a results file or a folder) and compares them task by task.

The pairing and the resampling are :mod:`naru_eval.report.stats`' (whole videos, seeded): under
"A and B are exchangeable", swapping A and B within a video leaves the distribution unchanged, so
whole videos are swapped together; exact when few videos differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from naru_eval.core.data import CATEGORIES
from naru_eval.core.numbers import NA, fmt_ci, fmt_num
from naru_eval.core.runfiles import ResultsFile, RunConfig
from naru_eval.core.scoring import MCQ, METRICS, ScoredSample
from naru_eval.report.runs import discover, find_manifest, read_log, read_manifest
from naru_eval.report.stats import (
    DEFAULT_BOOTSTRAP_REPS,
    DEFAULT_PERMUTATION_REPS,
    DEFAULT_SEED,
    EXACT_PERMUTATION_MAX_CLUSTERS,
    category_ratios,
    cluster_weights,
    macro_draws,
    macro_weights,
    percentile_intervals,
    point_estimates,
    ratio,
    score_table,
)


class ComparisonRowDoc(BaseModel):
    """One metric of ``naru-eval compare``'s JSON: B - A with its interval and p-value."""

    metric: str
    n: int
    videos: int
    a: float | None
    b: float | None
    diff: float | None
    ci95: list[float] | None
    p: float | None
    p_exact: bool
    p_holm: float | None
    a_only: int
    b_only: int
    reading: str


class BootstrapSpec(BaseModel):
    reps: int
    seed: int
    level: float
    cluster: str = "video_id"


class PermutationSpec(BaseModel):
    reps: int
    seed: int
    cluster: str = "video_id"


class ComparisonDoc(BaseModel):
    """One task of ``naru-eval compare``'s JSON (:meth:`Comparison.as_doc`)."""

    input_modes: dict[str, str | None] = Field(description="the input mode of each run: `{a, b}`")
    across_inputs: bool = Field(description="the runs differ in input mode: an input ablation (`--across-inputs`)")
    paired_questions: int
    videos: int
    only_in_a: list[str]
    only_in_b: list[str]
    bootstrap: BootstrapSpec
    permutation: PermutationSpec
    rows: list[ComparisonRowDoc]
    notes: list[str]


class CompareReport(BaseModel):
    """``naru-eval compare --json`` / ``-o``: the two runs and each task's comparison."""

    a: str
    b: str
    tasks: dict[str, ComparisonDoc] = Field(default_factory=dict)


@dataclass
class MetricComparison:
    metric: str
    n: int  # paired questions in scope
    videos: int  # videos with at least one such question
    a: float | None
    b: float | None
    diff: float | None  # B - A, percentage points
    ci: tuple[float, float] | None
    p: float | None
    p_exact: bool
    a_only: int  # questions where only A has the event (e.g. A right, B wrong)
    b_only: int
    p_holm: float | None = None  # Holm-adjusted over the nine categories (category rows only)
    reading: str = ""

    def as_row(self) -> ComparisonRowDoc:
        return ComparisonRowDoc(
            metric=self.metric,
            n=self.n,
            videos=self.videos,
            a=self.a,
            b=self.b,
            diff=self.diff,
            ci95=list(self.ci) if self.ci else None,
            p=self.p,
            p_exact=self.p_exact,
            p_holm=self.p_holm,
            a_only=self.a_only,
            b_only=self.b_only,
            reading=self.reading,
        )


@dataclass
class Comparison:
    rows: list[MetricComparison]
    paired: int
    only_a: list[str]
    only_b: list[str]
    videos: int
    reps: int
    permutation_reps: int
    seed: int
    level: float
    notes: list[str] = field(default_factory=list)
    input_modes: tuple[str | None, str | None] = (None, None)

    @property
    def across_inputs(self) -> bool:
        """The two runs gave the model different inputs (an input ablation, asked for explicitly)."""
        a, b = self.input_modes
        return a is not None and b is not None and a != b

    def row(self, metric: str) -> MetricComparison:
        return next(r for r in self.rows if r.metric == metric)

    def as_doc(self) -> ComparisonDoc:
        return ComparisonDoc(
            input_modes={"a": self.input_modes[0], "b": self.input_modes[1]},
            across_inputs=self.across_inputs,
            paired_questions=self.paired,
            videos=self.videos,
            only_in_a=self.only_a,
            only_in_b=self.only_b,
            bootstrap=BootstrapSpec(reps=self.reps, seed=self.seed, level=self.level),
            permutation=PermutationSpec(reps=self.permutation_reps, seed=self.seed),
            rows=[r.as_row() for r in self.rows],
            notes=self.notes,
        )


def _sign_flip_p(d: np.ndarray, reps: int, rng: np.random.Generator) -> tuple[float, bool]:
    """Two-sided p-value of sum(d) under random sign flips of the cluster totals ``d``."""
    d = d[d != 0]
    observed = abs(d.sum())
    k = d.size
    if k == 0:
        return 1.0, True  # every flip gives 0: nothing differs
    tol = 1e-9 * max(1.0, observed)
    if k <= EXACT_PERMUTATION_MAX_CLUSTERS:
        bits = (np.arange(2**k)[:, None] >> np.arange(k)) & 1
        stats = np.abs((1 - 2 * bits) @ d)
        return float(np.mean(stats >= observed - tol)), True
    signs = rng.choice(np.array([-1.0, 1.0]), size=(reps, k))
    stats = np.abs(signs @ d)
    return float((1 + np.sum(stats >= observed - tol)) / (1 + reps)), False


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values (None entries are left out and returned as None)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type,return-value]
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    m = len(order)
    for rank, i in enumerate(order):
        adj = min(1.0, (m - rank) * float(pvalues[i]))  # type: ignore[arg-type]
        running = max(running, adj)
        out[i] = running
    return out


def margin_95(n: int, p: float = 0.5) -> float:
    """Half-width (pp) of a 95% normal interval of one accuracy on n independent questions."""
    return 1.96 * math.sqrt(p * (1 - p) / n) * 100 if n else float("nan")


def _reading(row: MetricComparison, alpha: float = 0.05) -> str:
    if row.diff is None or row.ci is None:
        return "no paired questions"
    if row.a_only == 0 and row.b_only == 0:
        return "no difference: both runs have the same outcome on every question"
    half = (row.ci[1] - row.ci[0]) / 2
    if row.p is not None and row.p < alpha and (row.ci[0] > 0 or row.ci[1] < 0):
        who = "B" if row.diff > 0 else "A"
        return f"{who} higher: the gap is outside the noise (p={row.p:.3g})"
    return f"not distinguishable: with n={row.n} over {row.videos} videos, gaps within about ±{half:.1f} pp are noise"


def compare(
    a: Sequence[ScoredSample],
    b: Sequence[ScoredSample],
    reps: int = DEFAULT_BOOTSTRAP_REPS,
    permutation_reps: int = DEFAULT_PERMUTATION_REPS,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
    metrics: Sequence[str] = METRICS,
    input_modes: tuple[str | None, str | None] | None = None,
    across_inputs: bool = False,
) -> Comparison:
    """Paired comparison of runs ``a`` and ``b`` on the questions both answered (B - A).

    Runs on different data are never compared. Runs that gave the model different inputs
    (``input_modes``, each run's as its log records it: naru_eval.core.runfiles.SampleLog.input_mode;
    by default the samples' ``input_mode``) are refused unless ``across_inputs`` asks for an input
    ablation: then they are paired per question and per category like any two runs, and the
    comparison says which input modes it compares."""
    fa = {s.data_fingerprint for s in a if s.data_fingerprint}
    fb = {s.data_fingerprint for s in b if s.data_fingerprint}
    if fa and fb and fa != fb:
        raise ValueError(
            f"the runs were computed on different data (fingerprints {', '.join(sorted(fa))} vs "
            f"{', '.join(sorted(fb))}); runs on different data are never compared"
        )
    if input_modes is None:
        input_modes = (
            ", ".join(sorted({s.input_mode for s in a if s.input_mode})) or None,
            ", ".join(sorted({s.input_mode for s in b if s.input_mode})) or None,
        )
    mode_a, mode_b = input_modes
    notes = []
    if mode_a and mode_b and mode_a != mode_b:
        if not across_inputs:
            raise ValueError(
                f"the runs gave the model different inputs (input mode {mode_a} vs {mode_b}); runs of different "
                "input modes are never paired unless an input ablation is asked for (--across-inputs)"
            )
        notes.append(
            f"input ablation: A's input mode {mode_a} against B's {mode_b}, paired per question and per category"
        )
    by_a = {s.question_id: s for s in a}
    by_b = {s.question_id: s for s in b}
    common = [q for q in by_a if q in by_b]
    only_a = sorted(set(by_a) - set(by_b))
    only_b = sorted(set(by_b) - set(by_a))
    mismatched = [q for q in common if (by_a[q].video_id, by_a[q].category) != (by_b[q].video_id, by_b[q].category)]
    if mismatched:
        raise ValueError(
            f"{len(mismatched)} question(s) have a different video or category in the two runs "
            f"(different data?): {', '.join(mismatched[:20])}"
        )
    if only_a or only_b:
        notes.append(
            f"{len(only_a)} question(s) only in A and {len(only_b)} only in B are left out; "
            "only questions both runs answered are compared"
        )
    sa = [by_a[q] for q in common]
    sb = [by_b[q] for q in common]
    ta = score_table(sa, metrics)
    tb = score_table(sb, metrics)
    s_a, n = ta.cluster_sums()
    s_b, _ = tb.cluster_sums()
    d = s_b - s_a  # (V, M) per-video difference of score sums
    rng = np.random.default_rng(seed)
    w = cluster_weights(rng, len(ta.cluster_names), reps) if common else np.zeros((0, 0))
    boot = ratio(w @ d, w @ n) if common else np.zeros((0, len(metrics)))
    if common and any(m in MCQ.macro for m in metrics):
        # a macro difference is the difference of the two runs' macro means on the same resample
        ma = macro_draws(category_ratios(sa, "video_id", w))
        mb = macro_draws(category_ratios(sb, "video_id", w))
        cat_a = score_table(sa, CATEGORIES)  # same question order, so the same video indices as ta
        cat_d = score_table(sb, CATEGORIES).cluster_sums()[0] - cat_a.cluster_sums()[0]  # (V, 9)
        n_cat = cat_a.mask.sum(axis=0)
        for j, m in enumerate(metrics):
            if m not in MCQ.macro:
                continue
            boot[:, j] = mb[m] - ma[m]
            # per-video contribution to the macro difference (linear in the category sums)
            coef = np.array([macro_weights(sa, m).get(c, 0.0) / n_cat[k] if n_cat[k] else 0.0
                             for k, c in enumerate(CATEGORIES)])  # fmt: skip
            d[:, j] = cat_d @ coef  # sums to macro(B) - macro(A): the sign-flip test's statistic
    cis = percentile_intervals(boot, level) if common else [None] * len(metrics)
    pa = point_estimates(sa, metrics) if common else {m: None for m in metrics}
    pb = point_estimates(sb, metrics) if common else {m: None for m in metrics}
    perm_rng = np.random.default_rng(seed + 1)
    rows = []
    for j, m in enumerate(metrics):
        nq = int(ta.mask[:, j].sum()) if common else 0
        if nq == 0:
            rows.append(MetricComparison(m, 0, 0, None, None, None, None, None, True, 0, 0))
            continue
        ea = (ta.scores[:, j] > 0) & ta.mask[:, j]
        eb = (tb.scores[:, j] > 0) & tb.mask[:, j]
        p, exact = _sign_flip_p(d[:, j], permutation_reps, perm_rng)
        rows.append(
            MetricComparison(
                metric=m,
                n=nq,
                videos=int((n[:, j] > 0).sum()),
                a=pa[m],
                b=pb[m],
                diff=float(pb[m] - pa[m]),  # type: ignore[operator]
                ci=cis[j],
                p=p,
                p_exact=exact,
                a_only=int((ea & ~eb).sum()),
                b_only=int((eb & ~ea).sum()),
            )
        )
    cat_rows = [r for r in rows if r.metric in CATEGORIES]
    for r, adj in zip(cat_rows, holm([r.p for r in cat_rows]), strict=True):
        r.p_holm = adj
    for r in rows:
        r.reading = _reading(r)
    return Comparison(
        rows=rows,
        paired=len(common),
        only_a=only_a,
        only_b=only_b,
        videos=len(ta.cluster_names),
        reps=reps,
        permutation_reps=permutation_reps,
        seed=seed,
        level=level,
        notes=notes,
        input_modes=(mode_a, mode_b),
    )


def explain(cmp: Comparison) -> str:
    """What a gap means given n: the plain-language notes printed under a comparison table."""
    overall = next((r for r in cmp.rows if r.metric == "overall"), None)
    cats = [r for r in cmp.rows if r.metric in CATEGORIES and r.n]
    lines = [
        "How to read this:",
        "- diff = B - A in percentage points (for invalid_rate, a positive diff means B has more invalid answers).",
        "- 95% CI: paired bootstrap over videos (whole videos resampled, both runs together). "
        "p: paired sign-flip permutation test over videos (A and B swapped per video); "
        "'exact' when few enough videos differ to enumerate every flip.",
        "- A gap is evidence of a real difference only when its CI excludes 0 (and p < 0.05). "
        "A>B / B>A: the questions only A / only B got right; only those move the difference.",
    ]
    if overall and overall.n:
        m = margin_95(overall.n)
        lines.append(
            f"- With n={overall.n} paired questions over {overall.videos} videos, one accuracy near 50% "
            f"has a 95% margin of about ±{m:.1f} pp if questions were independent; questions of one "
            "video are correlated, so the real margin is wider, and the CI above already accounts for it."
        )
        if overall.ci:
            lines.append(
                f"- Overall, differences within about ±{(overall.ci[1] - overall.ci[0]) / 2:.1f} pp "
                "are not distinguishable from noise at this n."
            )
    if cats:
        nmin = min(r.n for r in cats)
        nmax = max(r.n for r in cats)
        ns = f"{nmin}" if nmin == nmax else f"{nmin}-{nmax}"
        ms = f"{margin_95(nmin):.0f}" if nmin == nmax else f"{margin_95(nmax):.0f}-{margin_95(nmin):.0f}"
        lines.append(
            f"- A category has only {ns} questions: its margin is about ±{ms} pp before clustering, so "
            "per-category gaps of a few points mean nothing; with nine categories tested, use p_holm "
            "(Holm-adjusted) before calling one category different."
        )
    if cmp.videos and cmp.videos < 20:
        lines.append(
            f"- Only {cmp.videos} videos: a bootstrap over so few clusters gives intervals that are too narrow, "
            "and the permutation test cannot reach small p-values; trust p, and read the CI as optimistic."
        )
    return "\n".join(lines)


def format_comparison(cmp: Comparison, label_a: str = "A", label_b: str = "B") -> str:
    """A Markdown table plus the notes of :func:`explain`."""

    def fp(p: float | None, exact: bool = False) -> str:
        if p is None:
            return NA
        s = f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"
        return s + (" (exact)" if exact else "")

    mode_a, mode_b = (m or "unknown" for m in cmp.input_modes)
    lines = [
        f"A = {label_a}",
        f"B = {label_b}",
        f"input modes: A {mode_a}, B {mode_b}" + (" (an input ablation)" if cmp.across_inputs else ""),
        f"paired on {cmp.paired} question(s) over {cmp.videos} video(s); bootstrap {cmp.reps} reps, "
        f"permutation {cmp.permutation_reps} reps, seed {cmp.seed}",
        "",
        "| metric | n | A | B | diff (B-A) | 95% CI | p | p_holm | A>B | B>A | reading |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in cmp.rows:
        ci = fmt_ci(r.ci, signed=True) or NA
        lines.append(
            f"| {r.metric} | {r.n} | {fmt_num(r.a)} | {fmt_num(r.b)} | {fmt_num(r.diff, signed=True)} | {ci} | {fp(r.p, r.p_exact)} | "
            f"{fp(r.p_holm) if r.p_holm is not None else '-'} | {r.a_only} | {r.b_only} | {r.reading} |"
        )
    lines += ["", *cmp.notes, explain(cmp)]
    return "\n".join(x for x in lines if x is not None)


# --------------------------------------------------------------------------- runs, resolved and compared


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
