"""Decode each (video, sampling) once per run, not once per question.

An in-process LRU bounded in bytes, plus an optional on-disk cache (``NARU_FRAME_CACHE`` or
``disk_dir``) keyed by file identity (resolved path, size, mtime) and every sampling parameter,
so other models and later runs reuse the frames. Disk entries are written atomically. The
sampler's per-file frame index lives beside them (``<dir>/index/``, same identity key).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from naru_eval.media.plan import DEFAULT_MAX_PIXELS
from naru_eval.media.sampler import SampledFrames, sample_frames
from naru_eval.media.video import VideoInfo, file_identity
from naru_eval.settings import settings

#: 2: frames as displayed (rotation, sample aspect ratio), frame numbers from the frame index.
CACHE_FORMAT = 2


@dataclass
class FrameCacheStats:
    memory_hits: int = 0
    disk_hits: int = 0
    decodes: int = 0
    #: entries decoded ahead by a prefetcher (naru_eval.media.prefetch) and taken from it
    prefetched: int = 0
    #: seconds get() spent waiting for frames not yet in memory (decoding inline, or a prefetch
    #: still running): the time a model waits for the sampler
    wait_s: float = 0.0
    #: seconds worker processes spent decoding ahead (the decode time that overlapped the model)
    ahead_decode_s: float = 0.0


class SamplingParams(TypedDict):
    """Every sampling parameter of ``sample_frames`` (and the frame cache's key)."""

    num_frames: int | None
    fps: float | None
    max_frames: int | None
    max_pixels: int | None
    approximate: bool


def sampling_params(
    num_frames: int | None = None,
    fps: float | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    approximate: bool = False,
) -> SamplingParams:
    """Every sampling parameter of :meth:`FrameCache.get`, as its key and ``sample_frames`` take them."""
    return {
        "num_frames": num_frames,
        "fps": fps,
        "max_frames": max_frames,
        "max_pixels": max_pixels,
        "approximate": approximate,
    }


def cache_key(path: str | os.PathLike[str], params: SamplingParams) -> str:
    """Hash of the file's identity and the sampling parameters."""
    ident = {**file_identity(path), "format": CACHE_FORMAT, **params}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


class FrameCache:
    """``get(path, num_frames=…)`` returns the same frames as ``sample_frames``, decoding once."""

    def __init__(self, max_bytes: int = 2 << 30, disk_dir: str | os.PathLike[str] | None = None) -> None:
        self.max_bytes = max_bytes
        env_dir = settings().frame_cache
        self.disk_dir = Path(disk_dir) if disk_dir else (Path(env_dir) if env_dir else None)
        self._items: OrderedDict[str, SampledFrames] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        #: key -> frames being decoded ahead, and who to tell when get() takes them
        self._pending: dict[str, tuple[Future[SampledFrames], Callable[[str], None]]] = {}
        self.stats = FrameCacheStats()

    def expect(self, key: str, future: Future[SampledFrames], taken: Callable[[str], None]) -> None:
        """Register frames a prefetcher is decoding: the next ``get`` of ``key`` takes them
        (``taken(key)`` is then called) instead of decoding again."""
        with self._lock:
            self._pending[key] = (future, taken)

    def forget(self, key: str) -> None:
        """Drop a registered prefetch that will not be taken (the prefetcher closes)."""
        with self._lock:
            self._pending.pop(key, None)

    def has(self, key: str) -> bool:
        """Whether ``key`` is in memory or on disk (a prefetcher skips those)."""
        with self._lock:
            if key in self._items:
                return True
        path = self._disk_path(key)
        return path is not None and path.exists()

    def get(
        self,
        path: str | os.PathLike[str],
        num_frames: int | None = None,
        fps: float | None = None,
        max_frames: int | None = None,
        max_pixels: int | None = DEFAULT_MAX_PIXELS,
        approximate: bool = False,
    ) -> SampledFrames:
        params = sampling_params(num_frames, fps, max_frames, max_pixels, approximate)
        key = cache_key(path, params)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        # One decode per key even when several threads ask for the same video at once.
        with key_lock:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    self.stats.memory_hits += 1
                    return self._items[key]
                pending = self._pending.pop(key, None)
            start = time.perf_counter()
            try:
                sampled = self._take(key, pending) if pending else None
                if sampled is None:
                    sampled = self._load_disk(key)
                    if sampled is not None:
                        self.stats.disk_hits += 1
                if sampled is None:
                    sampled = sample_frames(path, **params, index_dir=self.disk_dir)
                    self.stats.decodes += 1
                    self._save_disk(key, sampled)
            finally:
                self.stats.wait_s += time.perf_counter() - start
            self._remember(key, sampled)
            return sampled

    def _take(self, key: str, pending: tuple[Future[SampledFrames], Callable[[str], None]]) -> SampledFrames | None:
        """The prefetched frames, or None when the worker failed or was cancelled: the caller then
        decodes inline, so an unreadable video raises the same error as without a prefetcher."""
        future, taken = pending
        try:
            if future.cancel():  # not submitted yet (asked before its turn): decode it here
                return None
            sampled = future.result()
        except BaseException as e:  # the worker's error (or a cancel): decode inline instead
            if not isinstance(e, Exception | CancelledError):
                raise
            return None
        finally:
            taken(key)
        self.stats.prefetched += 1
        self._save_disk(key, sampled)
        return sampled

    def _remember(self, key: str, sampled: SampledFrames) -> None:
        size = sampled.frames.nbytes
        with self._lock:
            if size > self.max_bytes:
                return
            self._items[key] = sampled
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.frames.nbytes

    def _disk_path(self, key: str) -> Path | None:
        return self.disk_dir / key[:2] / f"{key}.npz" if self.disk_dir else None

    def _load_disk(self, key: str) -> SampledFrames | None:
        import numpy as np

        path = self._disk_path(key)
        if path is None or not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                info = VideoInfo(**json.loads(str(z["info"])))
                return SampledFrames(
                    frames=z["frames"],
                    indices=z["indices"],
                    timestamps=z["timestamps"],
                    info=info,
                    exact=bool(z["exact"]),
                    timestamp_error_s=z["timestamp_error_s"],
                )
        except Exception:  # a damaged entry is a miss, never an error
            return None

    def _save_disk(self, key: str, s: SampledFrames) -> None:
        import numpy as np

        path = self._disk_path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}.npz")
        np.savez(
            tmp,
            frames=s.frames,
            indices=s.indices,
            timestamps=s.timestamps,
            info=np.array(json.dumps(s.info._asdict())),
            exact=np.array(s.exact),
            timestamp_error_s=s.timestamp_error_s,
        )
        os.replace(tmp, path)


_DEFAULT: FrameCache | None = None
_DEFAULT_LOCK = threading.Lock()


def default_cache() -> FrameCache:
    """The process-wide cache, built on first use (not at import)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = FrameCache()
        return _DEFAULT
