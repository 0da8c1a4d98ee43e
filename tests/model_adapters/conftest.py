"""Fixtures for the adapter tests: tiny checkpoints (built once per session) and a video whose
frames show their own index, so a test can tell exactly which frames reached a processor."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_models import BUILDERS


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """``tiny_checkpoint(model_id)`` -> the directory of that family's tiny checkpoint."""
    root = tmp_path_factory.mktemp("tiny_ckpt")
    built: dict[str, Path] = {}

    def get(model_id: str) -> Path:
        if model_id not in built:
            built[model_id] = BUILDERS[model_id](root / model_id)
        return built[model_id]

    return get


@pytest.fixture(scope="session")
def indexed_video(tmp_path_factory) -> Path:
    """60 frames at 10 fps (6 s), 64x64, frame i showing i in binary."""
    from naru_eval.synthetic import write_indexed_video

    return write_indexed_video(tmp_path_factory.mktemp("idxvid") / "v.mp4", n_frames=60, fps=10, gop=10)
