"""A value built once, on first use, even when several threads ask for it at once.

The API clients (the OpenAI-compatible adapter's, Gemini's, the judge's) are built lazily: no
key is read and no SDK imported until a request needs one, and a run served from the response
store never builds one. Their upload registry and job store are opened the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    """``get()`` builds the value with ``build`` the first time (under a lock), then returns it."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._value: T | None = None
        self._built = False
        self._lock = threading.Lock()

    def get(self) -> T:
        if not self._built:
            with self._lock:
                if not self._built:
                    self._value = self._build()
                    self._built = True
        return self._value  # type: ignore[return-value]

    @property
    def built(self) -> bool:
        """Whether the value has been built (nothing is built by asking this)."""
        return self._built
