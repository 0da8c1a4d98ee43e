"""Real file-system conditions for the store tests: a tiny tmpfs that a test can fill, and a
read-only one. Mounting needs root (CAP_SYS_ADMIN); elsewhere the tests that need it skip."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(target: Path, size: str) -> bool:
    target.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)], capture_output=True)
    return proc.returncode == 0


def _umount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], capture_output=True)


@pytest.fixture
def small_fs(tmp_path) -> Iterator[Path]:
    """A 2 MiB tmpfs of its own, so a test can fill the disk for real."""
    target = tmp_path / "small_fs"
    if os.geteuid() != 0 or not _mount(target, "2m"):
        pytest.skip("mounting a tmpfs needs root")
    yield target
    _umount(target)


def fill_disk(directory: Path) -> Path:
    """Write a filler file in ``directory`` until its file system has no byte left (ENOSPC)."""
    filler = directory / "filler.bin"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    return filler


@pytest.fixture
def make_read_only():
    """``make_read_only(folder)``: the folder (a small_fs mount) becomes a read-only file system."""

    def _ro(folder: Path) -> None:
        proc = subprocess.run(["mount", "-o", "remount,ro", str(folder)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot remount read-only: {proc.stderr}")

    return _ro
