"""A video's content fingerprint: the one identity every per-video cache keys on.

The audio cache and the ASR cache (and anything else that caches by video) name a file by what it
holds, not by its path or mtime, so a copied, renamed or re-mounted video (another data directory,
another node) finds its entries.

The fingerprint is a hash of the whole file: two real files cannot share it. (It hashed the size
and 3 MiB of sampled blocks before; two files that differ only between the blocks, e.g. a re-cut
soundtrack in a file of the same size, shared one, and each cache handed one the other's
entries.) Reading every byte costs what reading the file costs: SHA-256 runs at about 1.4 GB/s
on one core here, so a 4-GB video is about 3 s from the page cache and its disk's read time
cold (docs/performance.md). It is paid once per file: remembered in the process, and on disk
beside the frame index (``<NARU_FRAME_CACHE>/fingerprint/``) under the file's stat identity
(resolved path, size, mtime, ctime, inode: any write to the file changes its ctime, so a memo of
a changed file is never read), so later runs and the other processes of a run read it back.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from naru_eval.settings import settings

#: part of every memo's key: a change to how the fingerprint is made makes older memos misses
FINGERPRINT_FORMAT = 2
_CHUNK = 8 << 20

_MEMO: dict[str, str] = {}
_LOCK = threading.Lock()


def _stat_identity(p: Path) -> dict[str, object]:
    """What says the file has not changed since it was hashed (ctime: any write, or a restored
    mtime, moves it)."""
    st = p.stat()
    return {
        "path": str(p),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "inode": st.st_ino,
        "format": FINGERPRINT_FORMAT,
    }


def _memo_file(key: str) -> Path | None:
    root = settings().frame_cache
    return Path(root) / "fingerprint" / key[:2] / f"{key}.json" if root else None


def _read_memo(key: str, ident: dict[str, object]) -> str | None:
    path = _memo_file(key)
    if path is None or not path.is_file():
        return None
    try:
        memo = json.loads(path.read_text(encoding="utf-8"))
        content = memo["content"]
    except (OSError, ValueError, KeyError, TypeError):  # a damaged memo is a miss
        return None
    return content if memo.get("stat") == ident and isinstance(content, str) and len(content) == 32 else None


def _write_memo(key: str, ident: dict[str, object], content: str) -> None:
    from naru_eval.media.index import unwritable

    path = _memo_file(key)
    if path is None:
        return
    tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"stat": ident, "content": content}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        unwritable(path.parent.parent.parent, e)
        tmp.unlink(missing_ok=True)


def hash_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of the file's size and every byte, 32 hex digits (128 bits)."""
    p = Path(path)
    h = hashlib.sha256(f"{p.stat().st_size}:".encode())
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with p.open("rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()[:32]


def content_fingerprint(path: str | os.PathLike[str]) -> str:
    """The file's content fingerprint (:func:`hash_file`), read once per file: from this process's
    memo, else the disk memo of its stat identity, else hashed (and remembered in both)."""
    p = Path(path).resolve()
    ident = _stat_identity(p)
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    with _LOCK:
        if key in _MEMO:
            return _MEMO[key]
    digest = _read_memo(key, ident)
    if digest is None:
        digest = hash_file(p)
        if _stat_identity(p) == ident:  # not changed while it was read
            _write_memo(key, ident, digest)
    with _LOCK:
        _MEMO[key] = digest
    return digest
