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


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """Tiny checkpoints of the transformers families (tests/helpers/tiny_models.py), built once per
    session: ``tiny_checkpoint(model_id)`` -> the directory of that family's tiny checkpoint;
    ``raw=True``: one whose random weights are intact where the default is scripted."""
    root = tmp_path_factory.mktemp("tiny_ckpt")
    from tests.helpers.tiny_models import BUILDERS, RAW_BUILDERS

    built: dict[tuple[str, bool], Path] = {}

    def get(model_id: str, raw: bool = False) -> Path:
        key = (model_id, raw and BUILDERS[model_id] is not RAW_BUILDERS[model_id])
        if key not in built:
            build = RAW_BUILDERS[model_id] if key[1] else BUILDERS[model_id]
            built[key] = build(root / (model_id + ("_raw" if key[1] else "")))
        return built[key]

    return get


@pytest.fixture(autouse=True)
def _fresh_api_limiters():
    """Each test starts with fresh adaptive limits: a stub's port may be reused by a later test."""
    from naru_eval.api.limiter import clear_limiters

    clear_limiters()
    yield
    clear_limiters()
