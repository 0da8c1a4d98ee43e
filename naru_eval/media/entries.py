"""What the frame cache and the audio cache share: an in-process LRU bounded in bytes and a
folder of ``.npz`` entries written atomically.

Each cache keeps its own keys and its own check that an entry holds what its key claims; how
entries are held in memory, where they lie on disk, how they are written and what an unwritable
folder does are the same for both, so they are here once.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from naru_eval.media.index import unwritable

V = TypeVar("V")


class MemoryLRU(Generic[V]):
    """Values by key, least recently used dropped first once their ``size`` passes ``max_bytes``
    (a value larger than the bound is not kept). Thread-safe."""

    def __init__(self, max_bytes: int, size: Callable[[V], int]) -> None:
        self.max_bytes = max_bytes
        self._size = size
        self._items: OrderedDict[str, V] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._items

    def get(self, key: str) -> V | None:
        """The value (now the most recently used), or None."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: str, value: V) -> None:
        size = self._size(value)
        with self._lock:
            if size > self.max_bytes:
                return
            if key in self._items:
                self._bytes -= self._size(self._items.pop(key))
            self._items[key] = value
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= self._size(old)


class NpzFolder:
    """Entries as ``<root>/<key[:2]>/<key>.npz`` (no root: nothing is kept). A write goes to a
    temporary name and is renamed into place; a folder that refuses one is skipped from then on,
    with one warning."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._unwritable = False

    def path(self, key: str) -> Path | None:
        return self.root / key[:2] / f"{key}.npz" if self.root else None

    def has(self, key: str) -> bool:
        path = self.path(key)
        return path is not None and path.is_file()

    def save(self, key: str, **arrays: Any) -> None:
        import numpy as np

        path = self.path(key)
        if path is None or self._unwritable:
            return
        tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}.npz")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(tmp, **arrays)
            os.replace(tmp, path)
        except OSError as e:
            self._unwritable = True
            assert self.root is not None
            unwritable(self.root, e)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
