"""Fixtures for the adapter tests: tiny checkpoints (built once per session) and a video whose
frames show their own index, so a test can tell exactly which frames reached a processor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from tests.helpers.data import docs_of
from tests.helpers.gemini import FAKE_KEY


@pytest.fixture(scope="session")
def indexed_video(tmp_path_factory) -> Path:
    """60 frames at 10 fps (6 s), 64x64, frame i showing i in binary."""
    from naru_eval.core.synthetic import write_indexed_video

    return write_indexed_video(tmp_path_factory.mktemp("idxvid") / "v.mp4", n_frames=60, fps=10, gop=10)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """The Gemini tests' data: 18 questions (2 per category) over 4 short H.264 videos."""
    return make_dataset(
        tmp_path_factory.mktemp("gem18"), SyntheticSpec(counts={c: 2 for c in CATEGORIES}, n_videos=4, seed=5)
    )


@pytest.fixture(scope="module")
def docs(data) -> list[dict[str, Any]]:
    """The docs of the module's ``data`` (a module overrides ``data`` for data of its own)."""
    return docs_of(data)


@pytest.fixture
def gemini_env(monkeypatch, tmp_path):
    """The Gemini tests' environment: the fake key, no real URL, registry or prices, a private cache
    (``pytestmark = pytest.mark.usefixtures("gemini_env")`` in test_gemini*)."""
    monkeypatch.setenv("GOOGLE_API_KEY", FAKE_KEY)
    for name in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "NARU_GEMINI_UPLOAD_REGISTRY", "NARU_GEMINI_PRICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NARU_CACHE_DIR", str(tmp_path / "cache"))
