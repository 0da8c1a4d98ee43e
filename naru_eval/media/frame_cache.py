"""Decode each (video, sampling) once per run, not once per question.

An in-process LRU bounded in bytes, plus an optional on-disk cache (``NARU_FRAME_CACHE`` or
``disk_dir``) keyed by file identity (resolved path, size, mtime), every sampling parameter and
how pixels are made (``pixels.CONVERSION``), so other models and later runs reuse the frames.
Disk entries are written atomically and say what they are: an entry whose file identity,
parameters, frame numbers or shape disagree with what its key claims is a miss. A directory that
cannot be written is skipped with one warning. The sampler's per-file frame index lives beside
them (``<dir>/index/``, same identity key).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from naru_eval.media.entries import MemoryLRU, NpzFolder
from naru_eval.media.pixels import CONVERSION
from naru_eval.media.plan import DEFAULT_MAX_PIXELS, frames_for_fps, uniform_indices
from naru_eval.media.sampler import SampledFrames, sample_frames
from naru_eval.media.video import VideoInfo, file_identity
from naru_eval.settings import settings

#: 3: the stream a player shows, the frame's own colour matrix and range (``CONVERSION``).
CACHE_FORMAT = 3


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
    size: tuple[int, int] | None
    resize: str | None
    #: exactly these frame numbers (the frames a selector chose), instead of a count or a rate
    indices: tuple[int, ...] | None


def sampling_params(
    num_frames: int | None = None,
    fps: float | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    size: tuple[int, int] | None = None,
    resize: str | None = None,
    indices: Sequence[int] | None = None,
) -> SamplingParams:
    """Every sampling parameter of :meth:`FrameCache.get`, as its key and ``sample_frames`` take
    them. ``size`` (height, width): exactly that size, by the reference resize in the arithmetic
    ``resize`` names (then ``max_pixels`` plays no part and is left out of the key). ``indices``:
    exactly those frames (the count and the rate then play no part)."""
    exact = size is not None
    chosen = tuple(int(i) for i in indices) if indices is not None else None
    return {
        "num_frames": None if chosen is not None else num_frames,
        "fps": None if chosen is not None else fps,
        "max_frames": None if chosen is not None else max_frames,
        "max_pixels": None if exact else max_pixels,
        "size": (int(size[0]), int(size[1])) if size is not None else None,
        "resize": (resize or "float") if exact else resize,
        "indices": chosen,
    }


def chosen_params(params: SamplingParams, indices: Sequence[int]) -> SamplingParams:
    """``params`` (a family's sizing) for exactly the frames ``indices`` instead of its count or rate."""
    return sampling_params(
        max_pixels=params["max_pixels"], size=params["size"], resize=params["resize"], indices=indices
    )


def _identity(path: str | os.PathLike[str], params: SamplingParams) -> str:
    """What an entry is: the file's identity, the sampling parameters and how pixels are made
    (chosen frame numbers only when given: the keys of a count or a rate are as before them)."""
    given = {k: v for k, v in params.items() if not (k == "indices" and v is None)}
    ident = {**file_identity(path), "format": CACHE_FORMAT, "conversion": CONVERSION, **given}
    return json.dumps(ident, sort_keys=True, default=str)


def cache_key(path: str | os.PathLike[str], params: SamplingParams) -> str:
    """Hash of the file's identity, the sampling parameters and how pixels are made."""
    return hashlib.sha256(_identity(path, params).encode()).hexdigest()


def consistent(params: SamplingParams, s: SampledFrames) -> bool:
    """The frames are what ``params`` ask of the video ``s.info`` describes: the frame numbers the
    plan gives (segment centres of the frame count) and one frame of the planned size per number."""
    info = s.info
    total = int(info.frame_count)
    if params["indices"] is not None:
        n = len(params["indices"])
    elif params["num_frames"] is not None:
        n = min(params["num_frames"], params["max_frames"]) if params["max_frames"] else params["num_frames"]
    else:
        n = frames_for_fps(info.duration_s, float(params["fps"] or 0.0), params["max_frames"], total)
    w, h = int(info.width), int(info.height)  # the size the frames were kept at
    if params["size"] is not None:
        fits = (h, w) == tuple(params["size"])
    else:
        fits = not params["max_pixels"] or w * h <= params["max_pixels"]
    return (
        fits
        and s.frames.dtype.name == "uint8"
        and s.frames.shape == (n, h, w, 3)
        and s.indices.shape == (n,)
        and s.timestamps.shape == (n,)
        and s.indices.tolist()
        == (list(params["indices"]) if params["indices"] is not None else uniform_indices(total, n))
    )


class FrameCache:
    """``get(path, num_frames=…)`` returns the same frames as ``sample_frames``, decoding once."""

    def __init__(self, max_bytes: int = 2 << 30, disk_dir: str | os.PathLike[str] | None = None) -> None:
        env_dir = settings().frame_cache
        self.disk_dir = Path(disk_dir) if disk_dir else (Path(env_dir) if env_dir else None)
        self._memory: MemoryLRU[SampledFrames] = MemoryLRU(max_bytes, lambda s: s.frames.nbytes)
        self._disk = NpzFolder(self.disk_dir)
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
        return key in self._memory or self._disk.has(key)

    def get(
        self,
        path: str | os.PathLike[str],
        num_frames: int | None = None,
        fps: float | None = None,
        max_frames: int | None = None,
        max_pixels: int | None = DEFAULT_MAX_PIXELS,
        size: tuple[int, int] | None = None,
        resize: str | None = None,
        indices: Sequence[int] | None = None,
    ) -> SampledFrames:
        params = sampling_params(num_frames, fps, max_frames, max_pixels, size, resize, indices)
        ident = _identity(path, params)
        key = hashlib.sha256(ident.encode()).hexdigest()
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        # One decode per key even when several threads ask for the same video at once.
        with key_lock:
            held = self._memory.get(key)
            if held is not None:
                self.stats.memory_hits += 1
                return held
            with self._lock:
                pending = self._pending.pop(key, None)
            start = time.perf_counter()
            try:
                sampled = self._take(key, ident, pending) if pending else None
                if sampled is None:
                    sampled = self._load_disk(key, ident, params)
                    if sampled is not None:
                        self.stats.disk_hits += 1
                if sampled is None:
                    sampled = sample_frames(path, **params, index_dir=self.disk_dir)
                    self.stats.decodes += 1
                    self._save_disk(key, ident, sampled)
            finally:
                self.stats.wait_s += time.perf_counter() - start
            self._memory.put(key, sampled)
            return sampled

    def _take(
        self, key: str, ident: str, pending: tuple[Future[SampledFrames], Callable[[str], None]]
    ) -> SampledFrames | None:
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
        self._save_disk(key, ident, sampled)
        return sampled

    def _load_disk(self, key: str, ident: str, params: SamplingParams) -> SampledFrames | None:
        """The entry under ``key``, if it is what the key claims (file, parameters, conversion)
        and its frames are what those parameters give; else a miss."""
        import numpy as np

        path = self._disk.path(key)
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["identity"]) != ident:
                    return None  # another video's (or another sampling's) frames under this name
                sampled = SampledFrames(
                    frames=z["frames"],
                    indices=z["indices"],
                    timestamps=z["timestamps"],
                    info=VideoInfo(**json.loads(str(z["info"]))),
                )
        except Exception:  # a damaged entry is a miss, never an error
            return None
        return sampled if consistent(params, sampled) else None

    def _save_disk(self, key: str, ident: str, s: SampledFrames) -> None:
        """Write the entry (atomically; a folder that cannot be written is skipped, one warning)."""
        import numpy as np

        self._disk.save(
            key,
            frames=s.frames,
            indices=s.indices,
            timestamps=s.timestamps,
            info=np.array(json.dumps(s.info._asdict())),
            identity=np.array(ident),
        )


_DEFAULT: FrameCache | None = None
_DEFAULT_LOCK = threading.Lock()


def default_cache() -> FrameCache:
    """The process-wide cache, built on first use (not at import)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = FrameCache()
        return _DEFAULT
