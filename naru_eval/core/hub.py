"""The data set named by the environment, and NARU from a Hugging Face dataset.

:func:`load_dataset_from_env` is what the tasks and the tools call: ``NARU_DATA_DIR`` (a local
folder, :func:`naru_eval.core.data.load_local`) or ``NARU_HF_DATASET`` (:func:`load_hf`, columns
mapped by ``HF_COLUMN_MAP`` and ``NARU_HF_COLUMNS``). A hub data set is parsed, checked and
contained exactly as a local one (:mod:`naru_eval.core.data`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from naru_eval.core.data import (
    HF_COLUMN_MAP,
    REQUIRED_FIELDS,
    DataError,
    Dataset,
    configured_video_dir,
    fingerprint_questions,
    load_local,
    parse_rows,
    resolved,
)
from naru_eval.settings import settings


def hf_column_map() -> dict[str, str]:
    """``HF_COLUMN_MAP`` updated by ``NARU_HF_COLUMNS`` (a JSON object, hf column -> NARU field,
    checked by the settings)."""
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
    missing = [f for f in REQUIRED_FIELDS if f not in have]
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
    **load_kwargs: object,  # passed on to datasets.load_dataset
) -> Dataset:
    """Load NARU from a Hugging Face dataset (id or local path) through ``datasets``.

    ``column_map`` maps the dataset's column names to NARU fields. Videos resolve against
    ``video_root`` (``NARU_VIDEO_DIR``), as the hub dataset is expected to hold annotations only;
    without one, against a local data set's own folder (never the current directory). Only
    those folders may hold the videos (:meth:`Dataset.roots`). A data set that cannot be loaded
    (no such folder, an unknown split, no network) is a DataError naming the setting.
    """
    import datasets  # lazy: heavy import

    try:
        ds = datasets.load_dataset(dataset_id, split=split, **load_kwargs)
    except ValueError as e:
        if "split" in str(e).lower():
            raise DataError([f"NARU_HF_SPLIT={split!r}: not a split of {dataset_id!r} ({e})"]) from None
        raise DataError([f"NARU_HF_DATASET={dataset_id!r}: could not be loaded ({type(e).__name__}: {e})"]) from None
    except Exception as e:  # noqa: BLE001 - no folder, no network, a broken file: one message, no traceback
        raise DataError(
            [
                f"NARU_HF_DATASET={dataset_id!r}: could not be loaded ({type(e).__name__}: {str(e)[:500]}); give a "
                "local dataset folder that exists, or a hub id (with the network, or cached and HF_DATASETS_OFFLINE=1)"
            ]
        ) from None
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
    root = resolved(Path(video_root).expanduser())[0] if video_root else None
    local = Path(dataset_id).expanduser()
    own = resolved(local)[0] if local.is_dir() else None  # a local dataset folder: the data folder
    ds = Dataset(questions, source, data_dir=own, video_root=root, path_base=root or own)
    problems += ds.path_problems()
    if problems and strict:
        raise DataError(problems)
    ds.fingerprint, ds.problems = fingerprint_questions(ds.questions), problems
    return ds


def load_dataset_from_env(strict: bool = True) -> Dataset:
    """The dataset named by the environment: ``NARU_DATA_DIR`` or ``NARU_HF_DATASET``."""
    s = settings()
    if s.data_dir:
        return load_local(s.data_dir, strict=strict)
    if s.hf_dataset:
        return load_hf(
            s.hf_dataset,
            split=s.hf_split,
            video_root=configured_video_dir(),
            strict=strict,
        )
    raise DataError(
        ["neither NARU_DATA_DIR nor NARU_HF_DATASET is set"],
        header="No NARU data configured: set NARU_DATA_DIR=/path/to/naru (see docs/data.md)",
    )
