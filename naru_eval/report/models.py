"""The result documents as Pydantic models: the leaderboard, the sweep manifest, the diagnostics report.

The models are the schema: the builders construct them, files are written with
``model_dump(mode="json", by_alias=True, exclude_unset=True)`` (:func:`dump_json`: a field the
builder did not set, such as an entry's ``conflict``, is left out, as the documents always did),
and every reader validates what it reads (:func:`load_model`: a file that does not match names
itself and the field). ``docs/leaderboard.md``'s schema section is generated from the field
descriptions here (:func:`schema_markdown`; ``naru-eval leaderboard-schema --write``), so the
schema is written once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from naru_eval.report.experiment import ExperimentDoc

#: a metric value: None when no question is in scope; ints stay ints (counts, reported values)
Number = int | float | None
#: a 95% interval ``[low, high]``; None when there is none
Interval = list[float] | None
#: which data a row is on (naru_eval.report.published.data_status)
DataStatus = Literal["official", "counts-match", "synthetic", "other"]

M = TypeVar("M", bound=BaseModel)


class Doc(BaseModel):
    """Every result model: unknown fields are an error (a typo or a newer schema is caught on read)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------------- the leaderboard


class Bootstrap(Doc):
    """How the leaderboard's intervals were computed."""

    method: str = Field(description="the resampling, in words")
    cluster: str = Field(description="the resampled unit: `video_id`")
    reps: int = Field(description="bootstrap replicates (2000)")
    seed: int = Field(description="the seed: the same seed reproduces every interval")
    level: float = Field(description="the interval's level (0.95)")


class Aggregation(Doc):
    """How the metrics are aggregated: the authors' definition."""

    mcq: str = Field(description="multiple choice: category accuracy, levels and overall as means of category means")
    open: str = Field(description="open-ended: category mean recall, overall the mean of the nine categories")


class PaperRef(Doc):
    """The paper, by title and arXiv id."""

    title: str = Field(description="the paper's title")
    arxiv: str = Field(description="its arXiv id (2608.13210)")


class NSamples(Doc):
    """A run's question counts, as lmms-eval records them."""

    original: int | None = Field(description="questions of the task")
    effective: int | None = Field(description="questions lmms-eval ran (less with `--limit`)")


class RunInfo(Doc):
    """Where a run's numbers come from and how it was configured."""

    results_file: str = Field(description="lmms-eval's `*_results.json`, relative to the working directory")
    samples_file: str = Field(description="the sample log the metrics were recomputed from")
    adapter: str | None = Field(description="lmms-eval `--model`")
    model_args: dict[str, str] = Field(description="`--model_args` as a dict, secrets dropped")
    num_frames: int | None = Field(description="the frame count of the entry's `sampling` (null for a rate)")
    fps: float | None = Field(description="the rate of the entry's `sampling` (null for a frame count)")
    task_version: JsonValue = Field(description="the task YAML's `metadata.version`")
    task_hash: str | None = Field(description="lmms-eval's task hash")
    lmms_eval_version: str | None = Field(description="lmms-eval's version")
    date: JsonValue = Field(description="lmms-eval's stamp")
    n_samples: NSamples = Field(description="`{original, effective}` question counts")


class ManifestRef(Doc):
    """What an entry takes from the nearest `manifest.json` (sweep runs)."""

    path: str = Field(description="the manifest's path")
    label: str | None = Field(description="the sweep's model label")
    versions: dict[str, str | None] | None = Field(description="package versions of the run")
    git_revision: str | None = Field(description="the checkout's revision (`-dirty` with local changes)")
    data_fingerprint: str | None = Field(description="the data the sweep ran on")
    launcher: str | None = Field(description="the launcher command (secrets masked)")
    status: str | None = Field(description="`running`, `done`, `failed` or `cancelled`")


class Entry(Doc):
    """One leaderboard row: a run of yours (`published: false`) or a published row of the authors
    (`published: true`). Fields that apply to one kind only are absent from the other."""

    id: str = Field(
        description='`"<model> | <task> | <sampling> | judge=<judge or -> | data=<fingerprint or unknown>"`, '
        'plus `" | input=<input mode>"` when there is one and `" | variant=<variant>"` when there is one: the '
        'key, what makes runs different; `"published | <model> | <task>"` for published rows'
    )
    model: str = Field(
        description="model name (the `--label`, the manifest's label, or `model_args`), then ` (<variant>)` when "
        "the run has one"
    )
    # "from" on the wire; ``from_`` in Python (a keyword), for the constructor and attribute access
    from_: str | None = Field(
        validation_alias=AliasChoices("from", "from_"),
        serialization_alias="from",
        description="who made the model (published rows); null for runs",
    )
    checkpoint: str | None = Field(default=None, description="published rows: the checkpoint the authors name")
    published: bool = Field(description="true: the authors' figure, not a run of ours")
    task: str = Field(description="the lmms-eval task")
    frames: int | None = Field(description="the frame count of `sampling` (null for a rate or another label)")
    fps: float | None = Field(description="the rate of `sampling` (null for a frame count or another label)")
    budget: str | None = Field(description="the sampling label (kept for the figures)")
    sampling: str | None = Field(
        description='the sampling: runs, as the payloads record it ("128 Frames", "0.25 FPS"); `"model\'s own '
        'sampler"` for a model that sampled its frames itself (no naru-eval provenance); payloads that record none '
        '(older logs): `"<F> Frames (model_args)"` from an explicit `num_frames=`/`fps=`, else `"not recorded"`; '
        "published rows: as the authors print it"
    )
    judge: str | None = Field(description="the judge of an open-ended task; null for MCQ")
    data: str | None = Field(description="the annotations' fingerprint; `official` for published rows")
    metrics: dict[str, Number] = Field(
        description="metric → value (MCQ in %, open-ended 0–1), **recomputed from the sample log** "
        "(null: no question in scope)"
    )
    ci95: dict[str, Interval] | None = Field(
        description="metric → `[low, high]`, 95% percentile bootstrap, videos resampled; null for other tasks"
    )
    n: dict[str, int] = Field(description="metric → questions in scope (plus `videos` for MCQ); `overall` otherwise")
    counts: dict[str, int] | None = Field(
        default=None,
        description="published MCQ rows: correct answers per category (null for rows published as accuracies)",
    )
    figures: str | None = Field(default=None, description="published rows: what the authors printed")
    metrics_source: Literal["sample_log", "sample_log_open", "sample_log_circular", "published"] = Field(
        description="`sample_log` (MCQ), `sample_log_open` (naru_open), `sample_log_circular` (the circular "
        "variant) or `published`"
    )
    data_status: DataStatus | None = Field(
        default=None,
        description="which data: `official` (a known fingerprint of the release; published rows), `counts-match` "
        "(question and category counts match Table I, release unverified), `synthetic`, `other`",
    )
    input_mode: str | None = Field(
        default=None,
        description="runs: what the model was given, from the payloads (`video`, `images`, `server-sampled`, "
        "`text`; `model-sampled` for a model that sampled its frames itself); null for older logs",
    )
    selection: str | None = Field(
        default=None,
        description="runs: how the frames were chosen (`select=`: the method, encoder, parameters and pool rate, "
        "from the payloads); null: uniform sampling, the official protocol",
    )
    variant: str | None = Field(
        default=None,
        description='runs: the answer-changing arguments that differ from the adapter\'s defaults (`"k=v,..."`, '
        'e.g. `"audio=false"`; `""` when none), from the payloads',
    )
    reported_matches_log: bool | None = Field(
        default=None,
        description="whether lmms-eval's `results.json` agrees with the recomputation (a mismatch also warns)",
    )
    complete: bool | None = Field(default=None, description="`n-samples` complete")
    run: RunInfo | None = Field(default=None, description="runs: where the numbers come from (below)")
    manifest: ManifestRef | None = Field(
        default=None, description="runs: from the nearest `manifest.json`; null otherwise"
    )
    cost: dict[str, JsonValue] | None = Field(
        default=None,
        description="`usage`/`cost` from the manifest, `lmms_eval_usage` (lmms-eval's `usage`); null when unknown",
    )
    duplicates: list[str] | None = Field(
        default=None, description="present when identical duplicates were absorbed: their files"
    )
    conflict: bool | None = Field(default=None, description="present (true) when the entry is in a conflict")


class Published(Doc):
    """The authors' published leaderboard, aggregated as they do it."""

    paper: PaperRef = Field(description="the paper")
    note: str = Field(description="that these are the authors' figures")
    rows: list[Entry] = Field(description="the published rows (entries with `published: true`)")


class Table(Doc):
    """One table of the page: one per (task, data). Runs sit beside the published rows only on the
    official data (or data whose counts match Table I); every other run has a table of its own."""

    task: str = Field(description="the task")
    data: str | None = Field(description="the runs' data (null: a table of published rows only)")
    status: DataStatus | None = Field(default=None, description="the runs' `data_status` (null: published rows only)")
    rows: list[str] = Field(description="entry and published ids, sorted by overall")
    kind: Literal["mcq", "open", "generic"] = Field(description="which columns the table shows")


class Unverified(Doc):
    """A run that is not ranked: its numbers could not be recomputed from a NARU sample log."""

    model: str = Field(description="the model label")
    task: str = Field(description="the task")
    results_file: str = Field(description="lmms-eval's results file")
    samples_file: str | None = Field(description="the sample log")
    reason: str = Field(description="why it is not ranked")


class Duplicate(Doc):
    """Entries with one key and identical numbers: one kept."""

    id: str = Field(description="the entry key")
    kept: str = Field(description="the results file kept")
    dropped: list[str] = Field(description="the files dropped")
    note: str = Field(description="why")


class Conflict(Doc):
    """Entries with one key and different numbers: all kept, flagged, and the command exits 1."""

    id: str = Field(description="the entry key")
    files: list[str] = Field(description="the results files")
    differences: dict[str, list[Number]] = Field(
        description="metric → the values, one per file; `n` when counts differ"
    )


class ComparisonRow(Doc):
    """One of our entries beside one of the paper's numbers."""

    model: str = Field(description="our model")
    paper_model: str = Field(description="the paper's model (`--paper-name`)")
    source: Literal["table_ii", "frame_sweep", "table_iii"] = Field(description="where the paper's number is")
    task: str = Field(description="the task")
    budget: str | None = Field(description="our sampling")
    metric: str = Field(description="the metric")
    ours: float | None = Field(description="our value")
    ours_ci95: Interval = Field(description="our interval")
    paper: float = Field(description="the paper's value")
    diff: float | None = Field(description="ours − paper")
    paper_in_ci: bool | None = Field(description="whether the paper's value is inside our interval")
    approximate: bool = Field(description="true for the frame-sweep end points (read off Fig. 3)")


class Consistency(Doc):
    """One check of the paper against itself (`naru_eval.report.paper.ConsistencyCheck`)."""

    name: str = Field(description="the check")
    model: str | None = Field(description="the model row checked")
    ok: bool | None = Field(description="null: not checkable")
    stated: float | None = Field(description="what the paper prints")
    implied: float | None = Field(description="what its other numbers imply")
    detail: str = Field(description="the arithmetic")


class PaperSection(Doc):
    """The paper, our runs beside its tables (`--paper-name`), and its consistency check."""

    title: str = Field(description="the paper's title")
    arxiv: str = Field(description="its arXiv id")
    names: dict[str, str] = Field(description="the `--paper-name` mapping")
    comparison: list[ComparisonRow] = Field(description="our entries beside the paper's rows")
    consistency: list[Consistency] = Field(description="the paper's consistency check")
    consistent: bool = Field(description="false if any check failed")


class LeaderboardDocument(Doc):
    """`leaderboard.json`."""

    schema_version: int = Field(
        description="`3` (2 read `frames`/`fps`/`sampling` from `model_args` and had no `variant`; 1 had micro "
        "overall/narrative/cultural and no published rows). Any change to a field's meaning bumps it"
    )
    generated_by: str = Field(description="`naru-eval <version>`")
    generated_at: str = Field(description="UTC ISO time")
    sources: list[str] = Field(description="the directories given")
    bootstrap: Bootstrap = Field(description="how the intervals were computed")
    aggregation: Aggregation = Field(description="how `mcq` and `open` metrics are aggregated")
    data_note: str = Field(description="the sentence the page prints about data")
    metrics: list[str] = Field(description="the metric names of MCQ entries")
    published: Published = Field(description="the authors' published rows")
    entries: list[Entry] = Field(
        description="your runs, one per (model, task, sampling, judge, data, input mode, variant)"
    )
    tables: list[Table] = Field(description="the tables of the page")
    unverified: list[Unverified] = Field(
        default_factory=list,
        description="runs not ranked: the log is not a NARU log, or results.json does not recompute from it",
    )
    duplicates: list[Duplicate] = Field(description="identical entries deduplicated")
    conflicts: list[Conflict] = Field(description="entries with one key and different numbers (exit 1)")
    paper: PaperSection = Field(description="the paper, the comparison with it, its consistency check")
    warnings: list[str] = Field(description="what was skipped, deduplicated, unmatched, on different data")
    errors: list[str] = Field(description="the conflicts and bad `--paper-name`s")


# --------------------------------------------------------------------------- the sweep manifest


class ManifestData(Doc):
    """The data the sweep ran on (the loader's view when the sweep started)."""

    fingerprint: str | None = Field(description="the annotations' fingerprint")
    source: str | None = Field(default=None, description="where the annotations came from")
    questions: int | None = Field(default=None, description="questions loaded")
    error: str | None = Field(default=None, description="why the data could not be loaded (recorded, never fatal)")


class SweepManifest(Doc):
    """`manifest.json` of one cell's run directory (a budget of the frame sweep, an arm of an
    ablation), written by `naru-eval experiment run` (`scripts/frame_sweep.sh`, `scripts/audio_ablation.sh`)."""

    status: Literal["running", "done", "failed", "cancelled"] = Field(
        description="the run's state (`cancelled`: stopped by a signal: scancel, a time limit, preemption, Ctrl-C)"
    )
    updated_at: str = Field(description="UTC ISO time of the last update")
    manifest_version: int | None = Field(default=None, description="`1`")
    tool: str | None = Field(default=None, description="`naru-eval experiment run`")
    label: str | None = Field(default=None, description="the model label of the sweep")
    model: str | None = Field(default=None, description="lmms-eval `--model`")
    model_args: dict[str, str] | None = Field(default=None, description="`--model_args` as a dict, secrets dropped")
    model_args_string: str | None = Field(default=None, description="the same as lmms-eval's `k=v,...` string")
    experiment: ExperimentDoc | None = Field(
        default=None, description="the grid the cell belongs to: model, tasks, axes (variants and the pairs compared)"
    )
    cell: str | None = Field(default=None, description="the cell's folder: its variants' names joined by `-`")
    variants: dict[str, str] | None = Field(default=None, description="axis -> the cell's variant (`{frames: f8}`)")
    budget: dict[str, int | None] | None = Field(default=None, description="`{num_frames}` (a frames axis)")
    sampling: str | None = Field(default=None, description="the sampling label")
    tasks: list[str] | None = Field(default=None, description="the tasks")
    launcher: str | None = Field(default=None, description="the launcher command (secrets masked)")
    lmms_eval_extra_args: list[str] | None = Field(
        default=None, description="extra lmms-eval arguments (secrets masked)"
    )
    versions: dict[str, str | None] | None = Field(
        default=None, description="naru-eval, lmms-eval, torch, transformers"
    )
    python: str | None = Field(default=None, description="the Python version")
    git_revision: str | None = Field(default=None, description="the checkout's revision (`-dirty` with local changes)")
    data: ManifestData | None = Field(default=None, description="the data")
    env: dict[str, str] | None = Field(default=None, description="the NARU_* data/store/cache variables that were set")
    invocations: int | None = Field(default=None, description="how many times the sweep started this budget")
    slurm_job: str | None = Field(
        default=None, description="the SLURM job of the last start (`<array job>_<task>`, else the job id)"
    )
    started_at: str | None = Field(default=None, description="UTC ISO time of the last start")
    started_unix: float | None = Field(default=None, description="the same, in Unix seconds")
    run_keys: list[str] | None = Field(
        default=None, description="the response-store run keys the cell's invocations used (its usage sums them)"
    )
    finished_at: str | None = Field(default=None, description="UTC ISO time of the last finish")
    results_file: str | None = Field(
        default=None, description="the finished run's results file, relative to the directory"
    )
    seconds: float | None = Field(default=None, description="wall time of the last invocation")
    message: str | None = Field(default=None, description="why it failed or was cancelled")
    usage: dict[str, JsonValue] | None = Field(
        default=None,
        description="summed response-store usage of this budget (`UsageTotals`: requests, ok, failed, tokens, cost)",
    )


# --------------------------------------------------------------------------- the diagnostics report


class DiagnoseSettings(Doc):
    paths: list[str] = Field(description="the paths given")
    duration_edges_min: list[float] = Field(description="duration bucket edges (minutes)")
    bootstrap_iters: int = Field(description="bootstrap replicates")
    seed: int = Field(description="the base seed (each interval's seed derives from it and its name)")
    ci: str = Field(description="the interval, in words")
    data_dir: str | None = Field(description="where durations were filled from")
    durations_filled: int = Field(description="video durations filled from the data")


class LetterDistribution(Doc):
    n: int
    n_valid: int
    pred: dict[str, int] = Field(description="predicted letter → count (plus invalid)")
    gold: dict[str, int] = Field(description="gold letter → count")
    pred_pct: dict[str, float | None]
    gold_pct: dict[str, float | None]
    excess_pp: dict[str, float | None] = Field(description="pred_pct − gold_pct")
    tv_distance_pp: float | None = Field(description="total-variation distance of the two distributions")
    most_over_picked: str | None


class InvalidBreakdown(Doc):
    n: int
    n_invalid: int
    rate: float | None = Field(description="invalid answers, % of all")
    kinds: dict[str, int]
    kinds_pct: dict[str, float | None]


class DurationBucket(Doc):
    bucket: str
    n: int
    n_videos: int
    accuracy: float | None
    ci95: Interval


class DurationSection(Doc):
    measure: Literal["accuracy", "circular"]
    n_unknown: int = Field(description="questions without a video duration")
    buckets: list[DurationBucket]


class RunDiagnosis(Doc):
    """One sample log, analysed."""

    label: str
    group: str
    task: str
    kind: str = Field(description="plain, blind or circular")
    samples: str
    results: str | None
    adapter: str | None = Field(description="the adapter id (the payloads' provenance, else lmms-eval `--model`)")
    model_args: str | None
    n_docs: int
    n_questions: int
    n_videos: int
    metrics: dict[str, Number] = Field(description="recomputed from the log")
    reported: dict[str, Number] | None = Field(description="what results.json holds")
    recomputes: bool | None = Field(description="whether the log reproduces the reported metrics")
    letters: LetterDistribution
    invalid: InvalidBreakdown
    duration: DurationSection


class _PairedGap(Doc):
    n: int
    n_videos: int
    gap: float | None
    ci95: Interval


class ScopeGap(_PairedGap):
    """A paired accuracy gap, with its cluster-bootstrap interval; the accuracies are named after
    the comparison (``video_accuracy``/``blind_accuracy``, ``circular_accuracy``/``plain_accuracy``)."""

    video_accuracy: float | None = None
    blind_accuracy: float | None = None
    circular_accuracy: float | None = None
    plain_accuracy: float | None = None


class Gap(_PairedGap):
    """One comparison of two runs (blind vs video, circular vs plain); its accuracies are named as
    :class:`ScopeGap`'s (and written after the runs, as they always were)."""

    group: str
    video_run: str | None = None
    blind_run: str | None = None
    circular_run: str | None = None
    plain_run: str | None = None
    by_scope: dict[str, ScopeGap] | None = None
    video_accuracy: float | None = None
    blind_accuracy: float | None = None
    circular_accuracy: float | None = None
    plain_accuracy: float | None = None


class ShortcutQuestion(Doc):
    question_id: str
    video_id: str
    category: str
    gold: str
    n_correct: int
    n_models: int
    models: list[str]


class ShortcutCandidates(Doc):
    min_correct: int
    n_models: int
    models: list[str]
    n_questions: int
    n_candidates: int
    expected_by_chance: float
    by_category: dict[str, int]
    questions: list[ShortcutQuestion]


class DiagnosticsReport(Doc):
    """The ``naru-eval diagnose`` report (docs/diagnostics.md)."""

    naru_eval_diagnose: int = Field(description="the report's version (1)")
    settings: DiagnoseSettings
    runs: list[RunDiagnosis]
    blind_vs_video: list[Gap]
    circular_vs_plain: list[Gap]
    shortcut_candidates: ShortcutCandidates | None
    skipped: list[dict[str, str]] = Field(description="sample logs left out, and why")
    superseded: list[str] = Field(description="older logs of the same run, left out")
    plots: list[str] | None = Field(default=None, description="the PNGs written beside the report")


# --------------------------------------------------------------------------- reading and writing


def dump_json(model: BaseModel) -> str:
    """The document as JSON text: the fields the builder set (or the file held), in schema order."""
    data = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def validate_doc(cls: type[M], data: object, where: str | Path) -> M:
    """``cls`` from ``data``; a mismatch is a ValueError naming ``where`` and the fields."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(top)'}: {err['msg']}" for err in e.errors()[:10])
        raise ValueError(f"{where}: not a valid {cls.__name__} ({e.error_count()} problem(s): {problems})") from None


def load_model(cls: type[M], path: str | Path) -> M:
    """Read and validate a result file; unreadable JSON or a schema mismatch names the file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not JSON ({e})") from None
    return validate_doc(cls, data, p)
