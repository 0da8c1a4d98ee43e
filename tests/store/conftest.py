"""The store tests' file systems (tests/helpers/disk.py): a 2 MiB tmpfs of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.disk import small_disk


@pytest.fixture
def small_fs(tmp_path) -> Iterator[Path]:
    """A 2 MiB tmpfs, so a test can fill the disk (or make it read-only) for real."""
    with small_disk(tmp_path / "small_fs", "2m") as fs:
        yield fs
