"""Decode each (video, audio windows) once: an in-process LRU bounded in bytes, plus an optional
on-disk cache (``<NARU_FRAME_CACHE>/audio/``, or ``disk_dir``).

Entries are keyed by the file's *content* fingerprint
(:func:`naru_eval.media.fingerprint.content_fingerprint`, a hash of the whole file), not its path
or mtime, so the same video under another data directory or copied to another node is the same
entry, and by every parameter of :func:`naru_eval.media.audio.sample_audio` (windows on the 10-ms
grid, rate, stream) and how the samples are made (:data:`naru_eval.media.audio.CONVERSION`).
Disk entries are written atomically and carry that identity, as frame cache entries carry
theirs: one whose identity (its video's fingerprint and size, the parameters), windows or length
disagree with what it is asked for is a miss, never an answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from naru_eval.media.audio import CONVERSION, SAMPLE_RATE, SampledAudio, normalise_windows, sample_audio
from naru_eval.media.entries import MemoryLRU, NpzFolder
from naru_eval.media.fingerprint import content_fingerprint
from naru_eval.settings import settings

#: part of every key: a change to what an entry holds makes older entries misses (2: Matroska
#: frames placed within their timestamps' rounding, gaps filled before the resampler)
AUDIO_CACHE_FORMAT = 2


class AudioParams(TypedDict):
    """Every parameter of ``sample_audio`` (and the cache's key)."""

    windows: list[tuple[float, float]]
    rate: int
    stream: int | None


def audio_params(
    windows: Sequence[tuple[float, float]], rate: int = SAMPLE_RATE, stream: int | None = None
) -> AudioParams:
    """The parameters as the cache keys them: windows normalised (10-ms grid, sorted, merged)."""
    return {"windows": [(s, e) for s, e in normalise_windows(windows)], "rate": int(rate), "stream": stream}


def audio_identity(path: str | os.PathLike[str], params: AudioParams) -> str:
    """What an entry is: its video's content fingerprint and size, the parameters and how samples
    are made (JSON, the text an entry carries)."""
    ident = {
        "content": content_fingerprint(path),
        "size": Path(path).stat().st_size,
        "format": AUDIO_CACHE_FORMAT,
        "conversion": CONVERSION,
        **params,
    }
    return json.dumps(ident, sort_keys=True)


def audio_cache_key(path: str | os.PathLike[str], params: AudioParams) -> str:
    """Hash of :func:`audio_identity`."""
    return hashlib.sha256(audio_identity(path, params).encode()).hexdigest()


@dataclass
class AudioCacheStats:
    memory_hits: int = 0
    disk_hits: int = 0
    decodes: int = 0
    #: seconds ``get`` waited for audio not yet in memory (decoding it, or another thread's decode
    #: of it): in the model's thread, what the model waited for audio
    wait_s: float = 0.0


class AudioCache:
    """``get(path, windows)`` returns what ``sample_audio`` returns, decoding once."""

    def __init__(self, max_bytes: int = 2 << 30, disk_dir: str | os.PathLike[str] | None = None) -> None:
        env_dir = settings().frame_cache
        self.disk_dir = Path(disk_dir) if disk_dir else (Path(env_dir) / "audio" if env_dir else None)
        self._memory: MemoryLRU[SampledAudio] = MemoryLRU(max_bytes, lambda a: a.samples.nbytes)
        self._disk = NpzFolder(self.disk_dir)
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self.stats = AudioCacheStats()

    def key(self, path: str | os.PathLike[str], params: AudioParams) -> str:
        return audio_cache_key(path, params)

    def get(
        self,
        path: str | os.PathLike[str],
        windows: Sequence[tuple[float, float]],
        rate: int = SAMPLE_RATE,
        stream: int | None = None,
    ) -> SampledAudio:
        import time

        params = audio_params(windows, rate, stream)
        ident = audio_identity(path, params)
        key = hashlib.sha256(ident.encode()).hexdigest()
        held = self._memory.get(key)
        if held is not None:
            self.stats.memory_hits += 1
            return held
        start = time.perf_counter()
        try:
            return self._fetch(key, ident, params, path)
        finally:
            self.stats.wait_s += time.perf_counter() - start

    def _fetch(self, key: str, ident: str, params: AudioParams, path: str | os.PathLike[str]) -> SampledAudio:
        """From memory, disk or one decode (one per key, however many threads ask)."""
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            held = self._memory.get(key)
            if held is not None:
                return held
            sampled = self._load_disk(key, ident, params, str(path))
            if sampled is not None:
                self.stats.disk_hits += 1
            else:
                sampled = sample_audio(path, params["windows"], rate=params["rate"], stream=params["stream"])
                self.stats.decodes += 1
                self._save_disk(key, ident, sampled)
            self._memory.put(key, sampled)
            return sampled

    def _load_disk(self, key: str, ident: str, params: AudioParams, path: str) -> SampledAudio | None:
        import numpy as np

        file = self._disk.path(key)
        if file is None or not file.is_file():
            return None
        try:
            with np.load(file, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                samples = z["samples"]
            windows = tuple((float(s), float(e)) for s, e in meta["windows"])
            offsets = tuple(int(o) for o in meta["offsets"])
            expected = [(s, e) for s, e in params["windows"]]
            if (
                meta["identity"] != ident
                or [tuple(w) for w in windows] != [tuple(w) for w in expected]
                or samples.dtype != np.float32
                or len(samples) != offsets[-1]
                or int(meta["rate"]) != params["rate"]
            ):
                return None
            return SampledAudio(
                samples=samples,
                rate=int(meta["rate"]),
                windows=windows,
                offsets=offsets,
                covered_s=tuple(float(c) for c in meta["covered_s"]),
                stream_index=int(meta["stream_index"]),
                track_start_s=float(meta["track_start_s"]),
                track_end_s=float(meta["track_end_s"]),
                path=path,
            )
        except Exception:  # a damaged entry is a miss, never an error
            return None

    def _save_disk(self, key: str, ident: str, s: SampledAudio) -> None:
        import numpy as np

        meta = {
            "identity": ident,
            "rate": s.rate,
            "windows": [list(w) for w in s.windows],
            "offsets": list(s.offsets),
            "covered_s": list(s.covered_s),
            "stream_index": s.stream_index,
            "track_start_s": s.track_start_s,
            "track_end_s": s.track_end_s,
        }
        self._disk.save(key, samples=s.samples, meta=np.array(json.dumps(meta)))


_DEFAULT: AudioCache | None = None
_DEFAULT_LOCK = threading.Lock()


def default_audio_cache() -> AudioCache:
    """The process-wide audio cache, built on first use (not at import)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = AudioCache()
        return _DEFAULT
