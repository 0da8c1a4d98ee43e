"""Shared fixtures: synthetic NARU-format data sets made on the fly (real H.264 files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, make_dataset

#: the judge fixtures (stub, fake judge, judges on a private cache), shared by tests/judge, tests/lmms and tests/cli
pytest_plugins = ("tests.helpers.judge",)


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


@pytest.fixture(autouse=True)
def _fresh_api_limiters():
    """Each test starts with fresh adaptive limits: a stub's port may be reused by a later test."""
    from naru_eval.api.limiter import clear_limiters

    clear_limiters()
    yield
    clear_limiters()
