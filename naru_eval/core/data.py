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

A data set is untrusted input (it may come from a hub): a ``video_id`` must be a plain file
name, no path may hold a control character, and every video (``video_path`` or
``videos/<video_id>.<ext>``), symlinks resolved, must lie in the data folder or the configured
video folder (``NARU_VIDEO_DIR``) themselves: a link the data set ships (``videos -> /``) never
widens them. So no annotation can make the harness open, or upload to an API, a file elsewhere
(``NARU_ALLOW_EXTERNAL_VIDEOS=1`` lifts this for data one trusts). Annotation files are
read as bytes: invalid UTF-8 is a problem naming the file, line and byte offset, and a
non-finite number (``NaN``, ``Infinity``, which are not JSON) is refused wherever it appears.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple, NoReturn

from naru_eval.core.json_types import JSON, JSONMapping, JSONObject
from naru_eval.settings import UserError, settings

CATEGORIES: tuple[str, ...] = ("N.1", "N.2", "N.3", "N.4", "C.1", "C.2", "C.3", "C.4", "C.5")
NARRATIVE: tuple[str, ...] = CATEGORIES[:4]
CULTURAL: tuple[str, ...] = CATEGORIES[4:]
LETTERS = "ABCD"
VIDEO_EXTENSIONS: tuple[str, ...] = (".mp4", ".mkv", ".webm", ".mov", ".ts", ".m2ts")  # TS: broadcast recordings
ANNOTATION_FILES: tuple[str, ...] = ("annotations.jsonl", "annotations.json", "annotations.parquet")

#: The NARU authors' official release of the benchmark on the Hugging Face hub.
OFFICIAL_HF_DATASET = "infinimind/naru_benchmark"

#: the fingerprint of data with a ``synthetic: true`` question starts with this (never ranked as NARU)
SYNTHETIC_PREFIX = "synthetic-"


def level_of(category: str) -> str:
    """``narrative`` for N.*, ``cultural`` for C.*."""
    return "narrative" if category.startswith("N") else "cultural"


#: how a refused path tells the user about the opt-in
ALLOW_HINT = "If you trust this data, set NARU_ALLOW_EXTERNAL_VIDEOS=1 (docs/data.md)."


def control_problem(key: str, value: str) -> str | None:
    """Why ``value`` may not be a path (a NUL, a newline or another control character: a file
    name no data set needs, and a way to forge a line in a report), or None."""
    bad = sorted({c for c in value if ord(c) < 32 or ord(c) == 127})
    if bad:
        return f"{key!r} holds control characters ({', '.join(repr(c) for c in bad)}), got {value[:200]!r}"
    return None


#: the longest file name the file systems videos live on take (ext4, XFS, Btrfs, NTFS: 255 bytes)
NAME_MAX = 255


def name_length_problem(video_id: str) -> str | None:
    """Why ``video_id`` cannot name a file (``<video_id>.<ext>``, a video's or a subtitle's: a
    part over :data:`NAME_MAX` bytes with its longest extension), or None."""
    from naru_eval.media.subtitles import SUBTITLE_EXTENSIONS

    longest = max((*VIDEO_EXTENSIONS, *SUBTITLE_EXTENSIONS), key=len)
    *dirs, name = video_id.split("/")
    size = max([len(d.encode()) for d in dirs] + [len(f"{name}{longest}".encode())])
    if size > NAME_MAX:
        return (
            f"'video_id' is {len(video_id.encode())} bytes: `<video_id>{longest}` would be a file name of {size} "
            f"bytes, over the {NAME_MAX} a file system takes"
        )
    return None


def plain_name_problem(video_id: str) -> str | None:
    """Why ``video_id`` is not a plain file name (it names ``videos/<video_id>.<ext>``), or None."""
    if video_id in (".", "..") or any(c in video_id for c in "/\\") or any(ord(c) < 32 for c in video_id):
        return f"'video_id' must be a plain file name (no '/', '\\', '..' or control characters), got {video_id!r}"
    return None


def relative_path_problem(video_path: str) -> str | None:
    """Why ``video_path`` is not a relative path inside the data folder (lexically), or None."""
    if (
        video_path.startswith(("/", "\\", "~"))
        or Path(video_path).is_absolute()
        or ".." in PurePosixPath(video_path.replace("\\", "/")).parts
    ):
        return f"'video_path' must be relative to the data folder, without '..', got {video_path!r}"
    return None


#: how many problems a message shows (a hostile file can hold a million; the rest are counted)
MAX_SHOWN_PROBLEMS = 100
#: how long one problem line may be when shown
MAX_PROBLEM_CHARS = 1000


def shown_problems(problems: Sequence[str], limit: int = MAX_SHOWN_PROBLEMS) -> list[str]:
    """The first ``limit`` problems, each cut to :data:`MAX_PROBLEM_CHARS`, then one line counting
    the rest: every problem is found, but 50 MB of garbage does not print 37 MB of them."""
    shown = [p if len(p) <= MAX_PROBLEM_CHARS else p[: MAX_PROBLEM_CHARS - 3] + "..." for p in problems[:limit]]
    if len(problems) > limit:
        shown.append(f"... and {len(problems) - limit} more problem(s) of the same file(s) (fix the ones above first)")
    return shown


class DataError(UserError):
    """Invalid NARU data; ``problems`` lists every problem found, each naming its source (the
    message shows the first :data:`MAX_SHOWN_PROBLEMS`)."""

    def __init__(self, problems: Sequence[str], header: str = "NARU data is invalid") -> None:
        self.problems = list(problems)
        lines = [f"{header} ({len(self.problems)} problem(s)):"]
        lines += [f"  - {p}" for p in shown_problems(self.problems)]
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

    def to_doc(self) -> JSONObject:
        """The fields as a flat JSON row, in their order (a ``datasets.Dataset`` row: lmms-eval's doc)."""
        doc: JSONObject = asdict(self)
        doc["options"] = list(self.options)
        return doc

    @classmethod
    def from_doc(cls, doc: JSONMapping) -> NaruQuestion:
        """The question :meth:`to_doc` wrote (its fields by name, each written from this class)."""
        kwargs: dict[str, Any] = {k: doc.get(k) for k in QUESTION_FIELDS}
        kwargs["options"] = tuple(kwargs["options"])
        return cls(**kwargs)


#: a question's fields, in order (the annotation file's, a doc's and the Hugging Face columns')
QUESTION_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(NaruQuestion))
REQUIRED_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(NaruQuestion) if f.default is MISSING)
#: Hugging Face column -> NARU field. Identity by default; override with
#: ``NARU_HF_COLUMNS='{"qid": "question_id", ...}'`` when a published dataset names them otherwise.
HF_COLUMN_MAP: dict[str, str] = {name: name for name in QUESTION_FIELDS}


def resolved(path: Path) -> tuple[Path | None, str | None]:
    """(``path`` with every symlink resolved, None) or (None, why it cannot be): a symlink loop,
    a name the file system refuses."""
    try:
        return path.resolve(), None
    except (OSError, RuntimeError, ValueError) as e:  # RuntimeError: a symlink loop (Python < 3.13)
        return None, f"{str(path)!r} cannot be resolved ({type(e).__name__}: {e}); a symlink loop?"


@dataclass
class Dataset:
    """Questions plus where they came from.

    ``data_dir`` is the data folder and ``video_root`` the configured video folder
    (``NARU_VIDEO_DIR``), each as the user gave it, resolved once: the only folders a video may
    lie in (:meth:`roots`). Videos are looked up as ``<video_id>.<ext>`` in ``video_root``, else in
    ``data_dir/videos``; a ``video_path`` is relative to ``path_base`` (the data folder; for a
    Hugging Face data set the video folder, else the data set's own folder)."""

    questions: list[NaruQuestion]
    source: str
    data_dir: Path | None = None
    video_root: Path | None = None
    fingerprint: str = ""
    problems: list[str] = field(default_factory=list)  # schema problems (non-strict loads only)
    #: the folder a ``video_path`` is relative to (default: ``data_dir``)
    path_base: Path | None = None

    def video_file(self, q: NaruQuestion) -> Path | None:
        """The video for ``q``: its ``video_path`` override, else ``<video_id>.<ext>`` in the
        video folder.

        A path leading outside the data and video folders raises DataError (unless
        ``NARU_ALLOW_EXTERNAL_VIDEOS``): the loader already refused such questions, and this
        keeps any other caller from opening the file."""
        p = self._locate(q)
        if p is not None and not settings().allow_external_videos:
            problem = self.outside_problem(p)
            if problem:
                raise DataError([f"question {q.question_id!r}: {problem}"])
        return p

    @property
    def videos_dir(self) -> Path | None:
        """Where ``<video_id>.<ext>`` is looked up."""
        return self.video_root or (self.data_dir / "videos" if self.data_dir else None)

    def _locate(self, q: NaruQuestion) -> Path | None:
        if q.video_path:
            p = Path(q.video_path)
            if p.is_absolute():  # refused by the loader unless NARU_ALLOW_EXTERNAL_VIDEOS
                return p
            base = self.path_base or self.data_dir
            return base / p if base is not None else None  # never the current directory
        root = self.videos_dir
        if root is None:
            return None
        for ext in VIDEO_EXTENSIONS:
            p = root / f"{q.video_id}{ext}"
            if p.exists():
                return p
        return None

    def roots(self) -> list[Path]:
        """The folders a video may lie in: the data folder and the configured video folder
        themselves (resolved as the user gave them). A link inside them (``videos -> /``) is
        followed for the file, never taken as a folder of its own."""
        return [r for r in (self.data_dir, self.video_root) if r is not None]

    def outside_problem(self, path: Path) -> str | None:
        """Why ``path`` may not be opened (it resolves outside every root, or not at all), or None."""
        roots = self.roots()
        real, why = resolved(path)
        if real is None:
            return why
        if any(real == r or real.is_relative_to(r) for r in roots):
            return None
        where = " or ".join(str(r) for r in roots) or "no data or video folder (set NARU_VIDEO_DIR)"
        return (
            f"{path} leads outside the data folder {where} (to {real}); refused, so that a data set "
            f"cannot make the harness open or upload a file elsewhere. {ALLOW_HINT}"
        )

    def linked_videos_problem(self) -> str | None:
        """Why the ``videos`` folder may not be used: it is a link leading out of the data folder
        (an archive's ``videos -> /``, or the user's own link to a larger disk, which
        ``NARU_VIDEO_DIR`` names), or None."""
        link = self.videos_dir
        if self.video_root is not None or link is None or not link.is_symlink():
            return None
        target, why = resolved(link)
        if target is None:
            return why
        if any(target == r or target.is_relative_to(r) for r in self.roots()):
            return None
        return (
            f"the videos folder {link} is a link to {target}, outside the data folder {self.data_dir}: a link "
            "never widens the folders videos may come from. If that is your own set-up (videos kept on another "
            f"disk), set NARU_VIDEO_DIR={target}. {ALLOW_HINT}"
        )

    def path_problems(self) -> list[str]:
        """One problem per video that resolves outside the data and video folders (or cannot be
        resolved); the questions on it are dropped from ``questions`` (nothing will open it).
        Empty with NARU_ALLOW_EXTERNAL_VIDEOS."""
        if settings().allow_external_videos:
            return []
        bad: dict[str, tuple[str, list[str]]] = {}
        link, linked = self.videos_dir, self.linked_videos_problem()
        for q in self.questions:
            p = self._locate(q)
            if p is None:
                continue
            if linked and link is not None and p.is_relative_to(link):  # one problem for the folder
                bad.setdefault(str(link), (linked, []))[1].append(q.question_id)
                continue
            problem = self.outside_problem(p)
            if problem:
                bad.setdefault(str(p), (problem, []))[1].append(q.question_id)
        if not bad:
            return []
        dropped = {qid for _, qids in bad.values() for qid in qids}
        self.questions = [q for q in self.questions if q.question_id not in dropped]
        return [
            f"{self.source}: video {path!r} ({len(qids)} question(s), e.g. {qids[0]!r}): {problem}"
            for path, (problem, qids) in bad.items()
        ]


# --------------------------------------------------------------------------- parsing


class NonFiniteNumber(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a JSON text (Python's json accepts them; JSON does not)."""


def _no_constant(token: str) -> NoReturn:
    raise NonFiniteNumber(f"non-finite number {token} (not JSON; write a finite number or null)")


def loads_strict(text: str) -> JSON:
    """``json.loads`` refusing ``NaN`` / ``Infinity`` (a NonFiniteNumber naming the token)."""
    return json.loads(text, parse_constant=_no_constant)


def _decode_problem(path: Path, data: bytes, e: UnicodeDecodeError, start: int = 0, lineno: int | None = None) -> str:
    """``FILE:LINE: not valid UTF-8 at byte …``: the line and the offset in the file of the bad byte."""
    offset = start + e.start
    if lineno is None:
        lineno = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1)
    return (
        f"{path}:{lineno}: not valid UTF-8 at byte offset {offset} of the file (byte {col + 1} of the line, "
        f"{data[offset : offset + 1]!r}); save the file as UTF-8"
    )


class Rows(NamedTuple):
    """An annotation file's rows, the problems met reading it, and each row's line in the file
    (JSONL; None for .json and .parquet, whose rows are named by record number)."""

    rows: Sequence[object]  # a user's file: parse_rows checks every value
    problems: list[str]
    lines: list[int] | None = None


def read_rows(path: Path) -> Rows:
    """Rows of an annotation file (.jsonl, .json list, .parquet), and the problems met reading it.

    A JSONL line that is not valid UTF-8 or not valid JSON (``NaN`` and ``Infinity`` included) is
    a problem naming the file and line, and reading goes on, so every other check still runs on
    the other lines (all problems reported at once); each row keeps its line number, so a schema
    problem after a skipped line names the line it is on. A .json file that does not decode or
    parse has no readable row: DataError.
    """
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq  # lazy: only parquet users pay for it

        try:
            return Rows(pq.read_table(path).to_pylist(), [])
        except (OSError, pa.ArrowException) as e:  # not Parquet, truncated, invalid UTF-8 in a string column
            raise DataError([f"{path}: not a readable Parquet file ({e})"]) from None
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DataError([f"{path}: cannot read the annotation file ({e.strerror or e})"]) from None
    bom = len(b"\xef\xbb\xbf") if data.startswith(b"\xef\xbb\xbf") else 0  # a BOM some editors write
    if suffix == ".json":
        try:
            text = data[bom:].decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError([_decode_problem(path, data, e, bom)]) from None
        try:
            rows = loads_strict(text)
        except json.JSONDecodeError as e:
            raise DataError([f"{path}:{e.lineno}: not valid JSON ({e.msg})"]) from None
        except NonFiniteNumber as e:
            raise DataError([f"{path}: not valid JSON: {e}"]) from None
        if not isinstance(rows, list):
            raise DataError([f"{path}: expected a JSON list of records, got {type(rows).__name__}"])
        return Rows(rows, [])
    rows, problems, lines = [], [], []
    start = bom
    for lineno, raw in enumerate(data[bom:].split(b"\n"), 1):
        line_start, start = start, start + len(raw) + 1
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            problems.append(_decode_problem(path, data, e, line_start, lineno) + "; the line is skipped")
            continue
        try:
            rows.append(loads_strict(line))
            lines.append(lineno)
        except json.JSONDecodeError as e:
            problems.append(f"{path}:{lineno}: not valid JSON ({e.msg}); the line is skipped")
        except NonFiniteNumber as e:
            problems.append(f"{path}:{lineno}: not valid JSON: {e}; the line is skipped")
    return Rows(rows, problems, lines)


def _short(value: object, limit: int = 120) -> str:
    """``repr(value)``, cut to ``limit`` characters: a hostile file's 10 MB id stays one line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _same_options(options: Sequence[str]) -> str:
    """``"A and C"`` / ``"A, B, C and D"`` for options whose texts are the same (spaces and case
    aside), else the empty string."""
    groups: dict[str, list[str]] = {}
    for letter, text in zip(LETTERS, options, strict=False):
        groups.setdefault(" ".join(text.split()).casefold(), []).append(letter)
    dup = [g for g in groups.values() if len(g) > 1]
    return "; ".join(", ".join(g[:-1]) + f" and {g[-1]}" for g in dup)


def parse_rows(
    rows: Iterable[object],
    source: str,
    allow_external: bool | None = None,
    lines: Sequence[int] | None = None,
) -> tuple[list[NaruQuestion], list[str]]:
    """Check the schema of every row; return the valid questions and all problems found.

    A problem names ``source:LINE`` when ``lines`` gives each row's line in the file (JSONL),
    else ``source record N``. ``allow_external`` (default: ``NARU_ALLOW_EXTERNAL_VIDEOS``)
    accepts video ids that are not plain names and ``video_path`` values that are absolute or
    climb with ``..``; a control character in either is refused whatever it says."""
    if allow_external is None:
        allow_external = settings().allow_external_videos
    questions: list[NaruQuestion] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    for i, row in enumerate(rows, 1):
        at = f"{source}:{lines[i - 1]}" if lines is not None else f"{source} record {i}"
        where = at
        if not isinstance(row, Mapping):
            problems.append(f"{where}: not an object")
            continue
        qid = row.get("question_id")
        if qid is not None:
            where = f"{at} (question_id={_short(qid)})"
        errs: list[str] = []
        for key in REQUIRED_FIELDS:
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
            else:
                same = _same_options(opts)
                if same:
                    errs.append(f"'options' {same} are the same text: the question has no single answer")
        ans = row.get("answer")
        if ans is not None and ans not in tuple(LETTERS):
            errs.append(f"'answer' must be one of A, B, C, D, got {ans!r}")
        sub = row.get("subset_500")
        if sub is not None and not isinstance(sub, bool):
            errs.append(f"'subset_500' must be a boolean, got {sub!r}")
        dur = row.get("duration_s")
        if dur is not None and (
            not isinstance(dur, (int, float)) or isinstance(dur, bool) or not math.isfinite(dur) or dur <= 0
        ):
            errs.append(f"'duration_s' must be a positive finite number, got {dur!r}")
        if row.get("synthetic") is not None and not isinstance(row.get("synthetic"), bool):
            errs.append(f"'synthetic' must be a boolean, got {row.get('synthetic')!r}")
        for key in ("video_path", "open_question", "reference_answer"):
            val = row.get(key)
            if val is not None and not isinstance(val, str):
                errs.append(f"{key!r} must be a string, got {type(val).__name__}")
        vid, vpath = row.get("video_id"), row.get("video_path")
        errs += [
            f"{e}; refused whatever NARU_ALLOW_EXTERNAL_VIDEOS says"
            for e in (
                control_problem("video_id", vid) if isinstance(vid, str) else None,
                name_length_problem(vid) if isinstance(vid, str) else None,
                control_problem("video_path", vpath) if isinstance(vpath, str) else None,
            )
            if e
        ]
        if not allow_external:
            path_errs = [
                plain_name_problem(vid) if isinstance(vid, str) and vid.strip() else None,
                relative_path_problem(vpath) if isinstance(vpath, str) and vpath else None,
            ]
            errs += [
                f"{e}; refused, so that a data set cannot name a file elsewhere. {ALLOW_HINT}" for e in path_errs if e
            ]
        if isinstance(qid, str):
            if qid in seen:
                errs.append(f"duplicate question_id (first at {seen[qid]})")
            else:
                seen[qid] = f"line {lines[i - 1]}" if lines is not None else f"record {i}"
        if errs:
            problems.extend(f"{where}: {e}" for e in errs)
            continue
        # every field validated above; options as a tuple, the duration as a float
        values: dict[str, Any] = {k: row.get(k) for k in QUESTION_FIELDS}
        values.update(options=tuple(opts or ()), duration_s=float(dur) if dur is not None else None)
        questions.append(NaruQuestion(**values))
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
    given = Path(data_dir).expanduser()
    problem = control_problem("NARU_DATA_DIR", str(given))
    if problem:
        raise DataError([problem])
    folder, why = resolved(given)
    if folder is None or not folder.is_dir():
        raise DataError([why or f"{folder}: data directory does not exist"])
    path = find_annotations(folder)
    rows, problems, lines = read_rows(path)
    questions, schema_problems = parse_rows(rows, str(path), lines=lines)
    problems += schema_problems
    ds = Dataset(questions, str(path), data_dir=folder, video_root=configured_video_dir())
    problems += ds.path_problems()
    if not ds.questions and not problems:
        problems.append(f"{path}: no questions")
    if problems and strict:
        raise DataError(problems)
    ds.fingerprint, ds.problems = fingerprint_questions(ds.questions), problems
    return ds


def configured_video_dir() -> Path | None:
    """``NARU_VIDEO_DIR`` resolved (the user's folder; DataError when it is not a folder)."""
    given = settings().video_dir
    if not given:
        return None
    root, why = resolved(Path(given).expanduser())
    if root is None or not root.is_dir():
        raise DataError([f"NARU_VIDEO_DIR={given!r}: {why or 'not a folder'}"])
    return root
