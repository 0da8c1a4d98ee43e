"""Shared fixtures: synthetic NARU-format data sets made on the fly (real H.264 files)."""

from __future__ import annotations

import json
from pathlib import Path

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
