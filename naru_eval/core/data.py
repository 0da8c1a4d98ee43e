"""The one NARU data loader, used by the lmms-eval tasks and by the ``naru-eval`` tools.

Sources, in order of precedence:

* a local directory (``NARU_DATA_DIR``) with ``annotations.jsonl`` (or ``.json`` list, or
  ``.parquet``) and ``videos/<video_id>.<mp4|mkv|webm|mov|ts|m2ts>``;
* a Hugging Face dataset id (``NARU_HF_DATASET``), columns mapped by ``HF_COLUMN_MAP``. The
  official release is ``infinimind/naru_benchmark`` (:data:`OFFICIAL_HF_DATASET`); its column
  names could not be checked from here, so a schema the mapping does not cover stops the load
  with the columns found and the ``NARU_HF_COLUMNS`` mapping to set (docs/data.md).

Every problem found is collected and raised together in one :class:`DataError`, so a user
fixes the whole file once instead of one error per run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from naru_eval.settings import settings

CATEGORIES: tuple[str, ...] = ("N.1", "N.2", "N.3", "N.4", "C.1", "C.2", "C.3", "C.4", "C.5")
NARRATIVE: tuple[str, ...] = CATEGORIES[:4]
CULTURAL: tuple[str, ...] = CATEGORIES[4:]
LETTERS = "ABCD"
VIDEO_EXTENSIONS: tuple[str, ...] = (".mp4", ".mkv", ".webm", ".mov", ".ts", ".m2ts")  # TS: broadcast recordings
ANNOTATION_FILES: tuple[str, ...] = ("annotations.jsonl", "annotations.json", "annotations.parquet")

#: The NARU authors' official release of the benchmark on the Hugging Face hub.
OFFICIAL_HF_DATASET = "infinimind/naru_benchmark"

#: Hugging Face column -> NARU field. Identity by default; override with
#: ``NARU_HF_COLUMNS='{"qid": "question_id", ...}'`` when a published dataset names them otherwise.
HF_COLUMN_MAP: dict[str, str] = {
    "question_id": "question_id",
    "video_id": "video_id",
    "category": "category",
    "question": "question",
    "options": "options",
    "answer": "answer",
    "subset_500": "subset_500",
    "duration_s": "duration_s",
    "video_path": "video_path",
    "open_question": "open_question",
    "reference_answer": "reference_answer",
}

_REQUIRED = ("question_id", "video_id", "category", "question", "options", "answer")
_OPTIONAL = ("subset_500", "duration_s", "video_path", "open_question", "reference_answer", "synthetic")
#: the fingerprint of data with a ``synthetic: true`` question starts with this (never ranked as NARU)
SYNTHETIC_PREFIX = "synthetic-"


def level_of(category: str) -> str:
    """``narrative`` for N.*, ``cultural`` for C.*."""
    return "narrative" if category.startswith("N") else "cultural"


class DataError(ValueError):
    """Invalid NARU data; ``problems`` lists every problem found, each naming its source."""

    def __init__(self, problems: Sequence[str], header: str = "NARU data is invalid") -> None:
        self.problems = list(problems)
        lines = [f"{header} ({len(self.problems)} problem(s)):"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class NaruQuestion:
    """One multiple-choice question, as in the annotation file."""

    question_id: str
    video_id: str
    category: str
    question: str
    options: tuple[str, str, str, str]
    answer: str
    subset_500: bool | None = None
    duration_s: float | None = None
    video_path: str | None = None
    open_question: str | None = None
    reference_answer: str | None = None
    synthetic: bool | None = None  # made by naru_eval.core.synthetic, not the benchmark

    @property
    def level(self) -> str:
        return level_of(self.category)

    @property
    def answer_text(self) -> str:
        return self.options[LETTERS.index(self.answer)]

    def to_doc(self) -> dict[str, Any]:
        """A flat dict for a ``datasets.Dataset`` row (lmms-eval's doc)."""
        doc = asdict(self)
        doc["options"] = list(self.options)
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> NaruQuestion:
        kwargs: dict[str, Any] = {k: doc.get(k) for k in _REQUIRED + _OPTIONAL}
        kwargs["options"] = tuple(doc["options"])
        return cls(**kwargs)


@dataclass
class Dataset:
    """Questions plus where they came from; videos resolve against ``data_dir``."""

    questions: list[NaruQuestion]
    source: str
    data_dir: Path | None = None
    video_root: Path | None = None
    fingerprint: str = ""
    problems: list[str] = field(default_factory=list)  # schema problems (non-strict loads only)

    def video_file(self, q: NaruQuestion) -> Path | None:
        """The video for ``q``: its ``video_path`` override, else ``videos/<video_id>.<ext>``."""
        root = self.video_root or (self.data_dir / "videos" if self.data_dir else None)
        if q.video_path:
            p = Path(q.video_path)
            if not p.is_absolute() and self.data_dir is not None:
                p = self.data_dir / p
            return p
        if root is None:
            return None
        for ext in VIDEO_EXTENSIONS:
            p = root / f"{q.video_id}{ext}"
            if p.exists():
                return p
        return None


# --------------------------------------------------------------------------- parsing


def read_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of an annotation file (.jsonl, .json list, .parquet), and the problems met reading it.

    A JSONL line that is not valid JSON is a problem naming the file and line, and reading goes
    on, so every other check still runs on the other lines (all problems reported at once). A
    .json file that does not parse has no readable row: DataError.
    """
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # lazy: only parquet users pay for it

        return pq.read_table(path).to_pylist(), []
    text = path.read_text(encoding="utf-8")
    if suffix == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError([f"{path}: not valid JSON ({e})"]) from None
        if not isinstance(rows, list):
            raise DataError([f"{path}: expected a JSON list of records, got {type(rows).__name__}"])
        return rows, []
    rows, problems = [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            problems.append(f"{path}:{lineno}: not valid JSON ({e.msg}); the line is skipped")
    return rows, problems


def parse_rows(rows: Iterable[Mapping[str, Any]], source: str) -> tuple[list[NaruQuestion], list[str]]:
    """Check the schema of every row; return the valid questions and all problems found."""
    questions: list[NaruQuestion] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows, 1):
        where = f"{source} record {i}"
        if not isinstance(row, Mapping):
            problems.append(f"{where}: not an object")
            continue
        qid = row.get("question_id")
        if qid is not None:
            where = f"{source} record {i} (question_id={qid!r})"
        errs: list[str] = []
        for key in _REQUIRED:
            if row.get(key) is None:
                errs.append(f"missing field {key!r}")
        for key in ("question_id", "video_id", "question"):
            val = row.get(key)
            if val is not None and (not isinstance(val, str) or not val.strip()):
                errs.append(f"{key!r} must be a non-empty string, got {val!r}")
        cat = row.get("category")
        if cat is not None and cat not in CATEGORIES:
            errs.append(f"category {cat!r} is not one of {', '.join(CATEGORIES)}")
        opts = row.get("options")
        if opts is not None:
            if not isinstance(opts, (list, tuple)) or len(opts) != 4:
                n = len(opts) if isinstance(opts, (list, tuple)) else type(opts).__name__
                errs.append(f"'options' must be a list of exactly 4 strings, got {n}")
            elif not all(isinstance(o, str) and o.strip() for o in opts):
                errs.append("'options' must all be non-empty strings")
        ans = row.get("answer")
        if ans is not None and ans not in tuple(LETTERS):
            errs.append(f"'answer' must be one of A, B, C, D, got {ans!r}")
        sub = row.get("subset_500")
        if sub is not None and not isinstance(sub, bool):
            errs.append(f"'subset_500' must be a boolean, got {sub!r}")
        dur = row.get("duration_s")
        if dur is not None and (not isinstance(dur, (int, float)) or isinstance(dur, bool) or dur <= 0):
            errs.append(f"'duration_s' must be a positive number, got {dur!r}")
        if row.get("synthetic") is not None and not isinstance(row.get("synthetic"), bool):
            errs.append(f"'synthetic' must be a boolean, got {row.get('synthetic')!r}")
        for key in ("video_path", "open_question", "reference_answer"):
            val = row.get(key)
            if val is not None and not isinstance(val, str):
                errs.append(f"{key!r} must be a string, got {type(val).__name__}")
        if isinstance(qid, str):
            if qid in seen:
                errs.append(f"duplicate question_id (first at record {seen[qid]})")
            else:
                seen[qid] = i
        if errs:
            problems.extend(f"{where}: {e}" for e in errs)
            continue
        questions.append(
            NaruQuestion(
                question_id=row["question_id"],  # validated above: a non-empty string
                video_id=row["video_id"],
                category=row["category"],
                question=row["question"],
                options=tuple(opts),  # type: ignore[arg-type]
                answer=row["answer"],
                subset_500=sub,
                duration_s=float(dur) if dur is not None else None,
                video_path=row.get("video_path"),
                open_question=row.get("open_question"),
                reference_answer=row.get("reference_answer"),
                synthetic=row.get("synthetic"),
            )
        )
    return questions, problems


def find_annotations(data_dir: Path) -> Path:
    for name in ANNOTATION_FILES:
        p = data_dir / name
        if p.exists():
            return p
    raise DataError([f"{data_dir}: no annotation file (expected one of {', '.join(ANNOTATION_FILES)})"])


def fingerprint_questions(questions: Sequence[NaruQuestion]) -> str:
    """A short content hash of the questions, recorded with results to identify the data."""
    import hashlib

    h = hashlib.sha256()
    for q in sorted(questions, key=lambda q: q.question_id):
        doc = {k: v for k, v in q.to_doc().items() if k != "synthetic" or v is not None}  # unchanged for real data
        h.update(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode())
    return (SYNTHETIC_PREFIX if any(q.synthetic for q in questions) else "") + h.hexdigest()[:16]


def load_local(data_dir: str | os.PathLike[str], strict: bool = True) -> Dataset:
    """Load and schema-check ``data_dir``; raise one DataError listing every problem.

    With ``strict=False`` the valid questions are returned and the problems kept in
    ``Dataset.problems``, so the preflight can go on to check videos and report everything.
    """
    data_dir = Path(data_dir).expanduser().resolve()
    if not data_dir.is_dir():
        raise DataError([f"{data_dir}: data directory does not exist"])
    path = find_annotations(data_dir)
    rows, problems = read_rows(path)
    questions, schema_problems = parse_rows(rows, str(path))
    problems += schema_problems
    if not questions and not problems:
        problems.append(f"{path}: no questions")
    if problems and strict:
        raise DataError(problems)
    return Dataset(
        questions, str(path), data_dir=data_dir, fingerprint=fingerprint_questions(questions), problems=problems
    )


def hf_column_map() -> dict[str, str]:
    """``HF_COLUMN_MAP`` updated by ``NARU_HF_COLUMNS`` (JSON: hf column -> NARU field)."""
    mapping = {v: v for v in HF_COLUMN_MAP.values()}
    override = settings().hf_columns
    if override:
        extra = json.loads(override)
        mapping = {k: v for k, v in mapping.items() if k not in extra.values()}
        mapping.update(extra)
    return mapping


def check_hf_columns(columns: Sequence[str], mapping: Mapping[str, str], source: str) -> None:
    """Raise one DataError when the mapped columns lack a required NARU field, listing the
    columns found and the ``NARU_HF_COLUMNS`` mapping that would fix it."""
    have = {mapping[c] for c in columns if c in mapping}
    missing = [f for f in _REQUIRED if f not in have]
    if not missing:
        return
    unused = [c for c in columns if c not in mapping]
    example = json.dumps({(unused[i] if i < len(unused) else f"<column for {f}>"): f for i, f in enumerate(missing)})
    raise DataError(
        [
            f"{source}: unknown schema: no column for the NARU field(s) {', '.join(missing)}. "
            f"Columns found: {', '.join(columns) or '(none)'}. Map dataset columns to NARU fields with "
            f"NARU_HF_COLUMNS (JSON, dataset column -> NARU field), e.g. NARU_HF_COLUMNS='{example}' "
            f"(fields: {', '.join(HF_COLUMN_MAP.values())}; see docs/data.md)"
        ]
    )


def load_hf(
    dataset_id: str,
    split: str = "test",
    column_map: Mapping[str, str] | None = None,
    video_root: str | os.PathLike[str] | None = None,
    strict: bool = True,
    **load_kwargs: Any,
) -> Dataset:
    """Load NARU from a Hugging Face dataset (id or local path) through ``datasets``.

    ``column_map`` maps the dataset's column names to NARU fields. Videos resolve against
    ``video_root`` (``NARU_VIDEO_DIR``), as the hub dataset is expected to hold annotations only.
    """
    import datasets  # lazy: heavy import

    ds = datasets.load_dataset(dataset_id, split=split, **load_kwargs)
    mapping = dict(column_map or hf_column_map())
    check_hf_columns(list(ds.column_names), mapping, f"hf:{dataset_id}[{split}]")
    rows = []
    for row in ds:
        rec = {mapping[k]: v for k, v in row.items() if k in mapping}
        if isinstance(rec.get("options"), str):  # some hubs store options as one JSON string
            try:
                rec["options"] = json.loads(rec["options"])
            except json.JSONDecodeError:
                pass
        rows.append(rec)
    source = f"hf:{dataset_id}[{split}]"
    questions, problems = parse_rows(rows, source)
    if problems and strict:
        raise DataError(problems)
    root = Path(video_root).resolve() if video_root else None
    return Dataset(
        questions,
        source,
        data_dir=root.parent if root else None,
        video_root=root,
        fingerprint=fingerprint_questions(questions),
        problems=problems,
    )


def load_dataset_from_env(strict: bool = True) -> Dataset:
    """The dataset named by the environment: ``NARU_DATA_DIR`` or ``NARU_HF_DATASET``."""
    s = settings()
    if s.data_dir:
        return load_local(s.data_dir, strict=strict)
    if s.hf_dataset:
        return load_hf(
            s.hf_dataset,
            split=s.hf_split,
            video_root=s.video_dir,
            strict=strict,
        )
    raise DataError(
        ["neither NARU_DATA_DIR nor NARU_HF_DATASET is set"],
        header="No NARU data configured: set NARU_DATA_DIR=/path/to/naru (see docs/data.md)",
    )
