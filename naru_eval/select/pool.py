"""A video's candidate pool, paid once: the frames at ``pool_fps`` over the whole video, taken by the
one sampler (the same pixels and colour as every frame a model gets) and embedded by the encoder.

The pool's frames are the sampler's plan at that rate (``frames_for_fps`` frames, the centres of
equal stretches of the frame index: at 1 fps, one a second); they are decoded and embedded in
chunks, so a 4-hour video's 14,400 frames are never held at once, and the embeddings are written
to the pool cache (``NARU_SELECT_CACHE``, else ``NARU_CACHE_DIR/pools``) every 16 chunks (1,024
frames): a run killed halfway resumes from the last chunk written. The next chunk is decoded in a
thread while the encoder embeds this one (on a GPU node the encoder runs on the GPU), so the pool
costs about its decode. The entry's key is the video's content
fingerprint, the encoder and its weights' fingerprint, the pool rate, how the frames are decoded
(their size cap and ``naru_eval.media.pixels.CONVERSION``) and the pool format; the entry records
the video it is for, so an entry copied beside another video is not served.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from naru_eval.media.entries import NpzFolder
from naru_eval.settings import settings

if TYPE_CHECKING:
    from naru_eval.select.encoder import Encoder

#: the pool entries' format (part of the key: another format is another entry)
POOL_FORMAT = 1
#: the pool's frames are decoded at most this many pixels (the encoder's processor resizes them to
#: its own input: 224-384 px a side for the CLIP/SigLIP family)
POOL_MAX_PIXELS = 448 * 448
#: frames decoded and embedded at a time
CHUNK = 64
#: the entry is written after every this many chunks (and at the end): what a killed run redoes
SAVE_EVERY = 16


class Pool(NamedTuple):
    """One video's candidate pool: frame numbers (in the frame index), their times (seconds on the
    frames' axis) and their L2-normalised embeddings (float32, N x D)."""

    indices: np.ndarray
    times: np.ndarray
    embeddings: np.ndarray
    #: seconds spent building it now (0: read from the cache)
    build_s: float = 0.0


def pool_plan(video: str | os.PathLike[str], pool_fps: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(frame numbers, their times, the video's duration) of the pool at ``pool_fps``: the
    sampler's own plan at that rate, from the frame index (nothing decoded)."""
    from naru_eval.media.index import frame_index, index_duration
    from naru_eval.media.plan import frames_for_fps, uniform_indices

    index = frame_index(Path(video))
    total = len(index.pts)
    duration = index_duration(Path(video), index)
    n = frames_for_fps(duration, float(pool_fps), None, total)
    idx = np.asarray(uniform_indices(total, n), dtype=np.int64)
    pts = np.asarray(index.pts, dtype=np.int64)
    times = (pts[idx] - int(pts[0])).astype(np.float64) * float(index.time_base)
    return idx, times, float(duration)


def pool_root() -> Path:
    s = settings()
    if s.select_cache:
        return Path(s.select_cache).expanduser()
    return Path(s.cache_dir or "~/.cache/naru-eval").expanduser() / "pools"


def pool_key(fingerprint: str, encoder: str, pool_fps: float) -> str:
    """The cache key of a pool: what its frames and embeddings depend on (the module docstring)."""
    from naru_eval.media.pixels import CONVERSION

    what = {
        "video": fingerprint,
        "encoder": encoder,
        "pool_fps": float(pool_fps),
        "max_pixels": POOL_MAX_PIXELS,
        "pixels": CONVERSION,
        "format": POOL_FORMAT,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def build_pool(
    video: str | os.PathLike[str],
    encoder: Encoder,
    pool_fps: float,
    root: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Pool:
    """The pool of ``video`` (the module docstring): read from the cache, resumed from a partial
    entry, or built; ``progress(done, total)`` after each chunk."""
    from naru_eval.media.fingerprint import content_fingerprint
    from naru_eval.media.sampler import sample_frames

    path = Path(video)
    indices, times, _ = pool_plan(path, pool_fps)
    fingerprint = content_fingerprint(path)
    folder = NpzFolder(root if root is not None else pool_root())
    key = pool_key(fingerprint, encoder.describe(), pool_fps)
    done, parts = _resume(folder, key, fingerprint, indices)
    if done == len(indices):
        return Pool(indices, times, np.concatenate(parts) if parts else np.zeros((0, 0), np.float32))
    start = time.perf_counter()
    chunks = [[int(i) for i in indices[at : at + CHUNK]] for at in range(done, len(indices), CHUNK)]

    def decode(chunk: list[int]) -> np.ndarray:
        return sample_frames(path, indices=chunk, max_pixels=POOL_MAX_PIXELS).frames

    def save(done: int) -> None:
        folder.save(
            key, embeddings=np.concatenate(parts), indices=indices, done=np.asarray(done), video=np.asarray(fingerprint)
        )

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pool-decode") as ahead:
        pending = ahead.submit(decode, chunks[0]) if chunks else None
        for k, chunk in enumerate(chunks):
            assert pending is not None
            frames = pending.result()
            pending = ahead.submit(decode, chunks[k + 1]) if k + 1 < len(chunks) else None
            parts.append(encoder.images(frames))
            done += len(chunk)
            if (k + 1) % SAVE_EVERY == 0 or k + 1 == len(chunks):
                save(done)
            if progress is not None:
                progress(done, len(indices))
    return Pool(indices, times, np.concatenate(parts), time.perf_counter() - start)


def _resume(folder: NpzFolder, key: str, fingerprint: str, indices: np.ndarray) -> tuple[int, list[np.ndarray]]:
    """(frames already embedded, their embeddings) of a cached entry that is this video's pool;
    (0, []) for none, another video's, or a damaged one."""
    where = folder.path(key)
    if where is None or not where.is_file():
        return 0, []
    try:
        with np.load(where, allow_pickle=False) as z:
            if str(z["video"]) != fingerprint or not np.array_equal(z["indices"], indices):
                return 0, []
            done = int(z["done"])
            emb = np.asarray(z["embeddings"], dtype=np.float32)
    except (OSError, KeyError, ValueError):
        return 0, []
    if done <= 0 or done > len(indices) or len(emb) != done:
        return 0, []
    return done, [emb]
