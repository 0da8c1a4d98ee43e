"""Real file-system conditions for the tests: a tiny tmpfs a test can fill (a full disk), and a
read-only one. Mounting needs root (CAP_SYS_ADMIN); where it is refused the test skips."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(target: Path, size: str) -> Iterator[Path]:
    """``target`` as a tmpfs of ``size`` (e.g. ``"128k"``, ``"2m"``) for the ``with`` block."""
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.decode(errors='replace').strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


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


def make_read_only(mount_point: Path) -> None:
    """Remount a :func:`small_disk` read-only."""
    proc = subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot remount read-only: {proc.stderr.strip()}")
