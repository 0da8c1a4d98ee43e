"""Videos on the Gemini Files API: reused from the upload registry when still live, else
(optionally pre-processed and) uploaded, then polled until ACTIVE; once per video per run.

:class:`Uploader` owns the per-video futures, so a question waits for its video's upload
whether the upload pool started it or the question did.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from naru_eval.api.retry import RetryError
from naru_eval.providers.gemini.client import Call, TransientUpload
from naru_eval.providers.gemini.request import enum_value
from naru_eval.providers.gemini.video import PreparedUpload, PrepSpec, prepare_video
from naru_eval.redaction import redact
from naru_eval.store.uploads import UploadRecord, UploadRegistry

if TYPE_CHECKING:
    from google import genai
    from google.genai import types


class UploadFailed(RuntimeError):
    """A video could not be uploaded or never became ACTIVE."""


@dataclass(frozen=True)
class Uploaded:
    """A video ready to be asked about."""

    video: str
    name: str
    uri: str
    mime_type: str
    sha256: str
    reused: bool
    prepared: PreparedUpload


@dataclass
class UploadPolicy:
    """How uploads are made and reused (from the adapter's typed args)."""

    prep_spec: PrepSpec
    reuse: bool = True
    reuse_margin_s: float = 6 * 3600.0
    active_timeout: float = 1800.0
    poll_interval: float = 5.0


def epoch(value: datetime | str | None) -> float | None:
    """Seconds since the epoch of an SDK timestamp (a datetime or an ISO string), else None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Uploader:
    """Uploads of one adapter. The client, account, registry and waits are looked up at use (the
    client is built on first use; tests replace the waits)."""

    def __init__(
        self,
        policy: UploadPolicy,
        *,
        client: Callable[[], genai.Client],
        account: Callable[[], str],
        registry: Callable[[], UploadRegistry],
        call: Call,
        cache_dir: Callable[[], Path],
        clock: Callable[[], float],
        poll_sleep: Callable[[float], None],
    ) -> None:
        self.policy = policy
        self._client, self._account, self._registry, self._call = client, account, registry, call
        self._cache_dir, self._clock, self._poll_sleep = cache_dir, clock, poll_sleep
        self.stats = {"uploaded": 0, "reused": 0, "bytes_sent": 0, "bytes_saved": 0, "preprocessed": 0}
        self._stats_lock = threading.Lock()
        self._futures: dict[str, Future] = {}
        self._futures_lock = threading.Lock()
        self.pool: ThreadPoolExecutor | None = None

    def wait_active(self, name: str, video: str) -> types.File:
        """``files.get`` until the file is ACTIVE (UploadFailed: FAILED, or ``active_timeout``)."""
        from google.genai import types

        client = self._client()
        deadline = self._clock() + self.policy.active_timeout
        while True:
            f = self._call(lambda: client.files.get(name=name), f"files.get {name}")
            state = enum_value(getattr(f, "state", None))
            if state == types.FileState.ACTIVE.value:
                return f
            if state == types.FileState.FAILED.value:
                err = getattr(f, "error", None)
                msg = getattr(err, "message", None) or err
                raise UploadFailed(redact(f"{Path(video).name}: Gemini could not process {name} (state FAILED: {msg})"))
            if self._clock() >= deadline:
                raise UploadFailed(
                    f"{Path(video).name}: {name} is still {state or 'unknown'} after {self.policy.active_timeout:g} s "
                    "(active_timeout); the file stays on the server for 48 h and a rerun reuses it once ACTIVE"
                )
            self._poll_sleep(self.policy.poll_interval)

    def _reuse(self, sha: str, video: str, prepared: PreparedUpload) -> Uploaded | None:
        registry, account = self._registry(), self._account()
        rec = registry.get(sha, account)
        if rec is None:
            return None
        margin = self.policy.reuse_margin_s
        if not rec.live(margin):
            registry.forget(sha, account)
            return None
        try:
            f = self.wait_active(rec.name, video)
        except RetryError as e:
            if e.status not in (403, 404):
                logger.warning(f"naru_gemini: could not check upload {rec.name} ({e}); uploading again")
            registry.forget(sha, account)
            return None
        except UploadFailed as e:
            logger.warning(f"naru_gemini: upload {rec.name} is not usable ({e}); uploading again")
            registry.forget(sha, account)
            return None
        expires = epoch(getattr(f, "expiration_time", None)) or rec.expires
        if expires is not None and expires <= time.time() + margin:
            registry.forget(sha, account)
            return None
        registry.put(dataclasses.replace(rec, state="ACTIVE", expires=expires))
        return Uploaded(video, rec.name, f.uri or rec.uri, rec.mime_type, sha, True, prepared)

    def upload(self, video: str) -> Uploaded:
        """The video on the Files API and ACTIVE: reused from the registry, or uploaded now."""
        from google.genai import types

        registry, spec = self._registry(), self.policy.prep_spec
        source_sha = registry.sha256(video) if spec.needed(video) else None
        prepared = prepare_video(video, spec, self._cache_dir(), source_sha)
        if prepared.transformed and not prepared.cached:
            logger.info(
                f"naru_gemini: {Path(video).name}: pre-processed in {prepared.seconds:.1f}s, "
                f"{prepared.source_bytes:,} -> {prepared.sent_bytes:,} bytes"
            )
        sha = registry.sha256(prepared.path)
        if self.policy.reuse:
            reused = self._reuse(sha, video, prepared)
            if reused is not None:
                with self._stats_lock:
                    self.stats["reused"] += 1
                return reused
        client = self._client()

        def upload() -> types.File:
            try:
                return client.files.upload(
                    file=str(prepared.path),
                    config=types.UploadFileConfig(mime_type=prepared.mime_type, display_name=f"naru-{sha[:16]}"),
                )
            except (KeyError, ValueError) as e:  # no upload URL / not finalized: no HTTP status
                raise TransientUpload(f"upload interrupted: {e}") from e

        f = self._call(upload, f"upload {Path(video).name}")
        name, uri = f.name, f.uri
        if name is None or uri is None:  # nothing to refer to the file by
            raise UploadFailed(f"{Path(video).name}: the upload's reply names no file (name {name!r}, uri {uri!r})")
        record = UploadRecord(
            sha256=sha,
            account=self._account(),
            name=name,
            uri=uri,
            mime_type=prepared.mime_type,
            size_bytes=prepared.sent_bytes,
            state="PROCESSING",
            expires=epoch(getattr(f, "expiration_time", None)),
            uploaded=time.time(),
            source_path=str(video),
        )
        registry.put(record)  # at once: a crash while polling still leaves it reusable
        with self._stats_lock:
            self.stats["uploaded"] += 1
            self.stats["bytes_sent"] += prepared.sent_bytes
            self.stats["bytes_saved"] += prepared.bytes_saved
            self.stats["preprocessed"] += int(prepared.transformed)
        active = self.wait_active(name, video)
        expires = epoch(getattr(active, "expiration_time", None)) or record.expires
        registry.put(dataclasses.replace(record, state="ACTIVE", expires=expires))
        return Uploaded(video, name, active.uri or uri, prepared.mime_type, sha, False, prepared)

    def uploaded(self, video: str) -> Uploaded:
        """The upload of ``video``: started by :meth:`start`'s pool, or done here, once."""
        with self._futures_lock:
            fut = self._futures.get(video)
            owner = fut is None
            if owner:
                fut = self._futures[video] = Future()
        assert fut is not None
        if owner:
            try:
                fut.set_result(self.upload(video))
            except BaseException as e:  # noqa: BLE001 - handed to every waiter
                fut.set_exception(e)
        return fut.result()

    def start(self, videos: Sequence[str], concurrency: int) -> ThreadPoolExecutor:
        """Start the uploads of ``videos`` in this order, ``concurrency`` at a time; a failed
        upload of an earlier pass is tried again."""
        with self._futures_lock:
            for v in [v for v, f in self._futures.items() if f.done() and f.exception() is not None]:
                del self._futures[v]
        pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="naru_gemini_upload")
        with self._futures_lock:
            for video in videos:
                if video not in self._futures:
                    self._futures[video] = pool.submit(self.upload, video)
        pool.shutdown(wait=False)
        self.pool = pool
        return pool

    def result(self, video: str) -> Uploaded:
        """The started upload of ``video`` (raises its error)."""
        with self._futures_lock:
            fut = self._futures[video]
        return fut.result()
