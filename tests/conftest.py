"""Shared fixtures: synthetic NARU-format data sets made on the fly (real H.264 files)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from naru_eval.synthetic import PAPER_COUNTS, SyntheticSpec, make_dataset


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def docs_of(data_dir: Path) -> list[dict]:
    """lmms-eval docs of a data directory as the tasks build them (question fields + video path)."""
    from naru_eval.data import load_local

    ds = load_local(data_dir)
    return [{**q.to_doc(), "video": str(ds.video_file(q))} for q in ds.questions]


def lmms_instances(
    docs: Sequence[Mapping[str, Any]],
    task: str = "naru_mcq",
    split: str = "test",
    *,
    visual: Callable[..., Any] | None = None,
    gen_kwargs: Mapping[str, Any] | None = None,
    order: Sequence[int] | None = None,
) -> list[Any]:
    """The ``generate_until`` requests lmms-eval hands an adapter for ``docs`` of ``task``
    (``visual``: the task's ``doc_to_visual``, the video one by default)."""
    from lmms_eval.api.instance import Instance

    from naru_eval.lmms_tasks import doc_to_text, doc_to_visual

    gk = {"max_new_tokens": 32, "temperature": 0} if gen_kwargs is None else gen_kwargs
    return [
        Instance(
            "generate_until",
            (doc_to_text(docs[i]), dict(gk), visual or doc_to_visual, i, task, split),
            idx=0,
            metadata={"task": task, "doc_id": i, "repeats": 1},
        )
        for i in (order if order is not None else range(len(docs)))
    ]


@pytest.fixture(scope="session")
def small_data(tmp_path_factory) -> Path:
    """36 questions (4 per category) over 6 videos."""
    return make_dataset(tmp_path_factory.mktemp("small"), SyntheticSpec(counts={c: 4 for c in PAPER_COUNTS}))


@pytest.fixture(scope="session")
def paper_data(tmp_path_factory) -> Path:
    """1,481 questions with the paper's category counts over 155 videos."""
    return make_dataset(tmp_path_factory.mktemp("paper"), SyntheticSpec(counts=dict(PAPER_COUNTS), n_videos=155))


@pytest.fixture
def copy_data(tmp_path, small_data):
    """A private, editable copy of the small data set."""
    import shutil

    def _copy() -> Path:
        dst = tmp_path / "data"
        shutil.copytree(small_data, dst)
        return dst

    return _copy
