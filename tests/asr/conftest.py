from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory):
    """A tiny random Whisper checkpoint directory (tests/helpers/tiny_whisper.py)."""
    from tests.helpers.tiny_whisper import build_tiny_whisper

    return build_tiny_whisper(tmp_path_factory.mktemp("whisper") / "tiny-whisper")
