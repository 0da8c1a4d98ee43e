"""A local stub of the Gemini Developer API (REST, ``v1beta``), for tests.

    with GeminiStub(api_key=KEY, responder=lambda req: "B") as stub:
        client = genai.Client(api_key=KEY, http_options=HttpOptions(base_url=stub.base_url))
        ...
        stub.uploads_started, stub.generate_requests()[0].body

It speaks the wire protocol the real ``google-genai`` client uses (read off the SDK 3.6 source):

* resumable upload: ``POST /upload/{ver}/files`` with ``X-Goog-Upload-Protocol: resumable`` and
  ``X-Goog-Upload-Command: start`` (body ``{"file": {...}}``) answers an ``X-Goog-Upload-URL``;
  the bytes then go to that URL in chunks with ``X-Goog-Upload-Command: upload`` /
  ``upload, finalize`` and ``X-Goog-Upload-Offset``; each chunk is answered with
  ``X-Goog-Upload-Status: active``, the last with ``final`` and ``{"file": {...}}``. Chunk
  requests carry no API key (the SDK sends them on its raw HTTP client).
* ``GET /{ver}/files/{id}``: the file resource, ``PROCESSING`` for the first
  ``processing_polls`` reads after its upload, then ``ACTIVE`` (or ``FAILED``); 404 for a file
  it does not hold (deleted, expired, another project). ``DELETE`` removes it.
* ``POST /{ver}/models/{model}:generateContent``: a ``GenerateContentResponse`` (candidates,
  ``promptFeedback``, ``usageMetadata`` with per-modality ``promptTokensDetails`` and
  ``thoughtsTokenCount``). A ``fileData`` whose file is not ACTIVE is a 400, as on the real API.
* ``POST /{ver}/models/{model}:countTokens``: ``{"totalTokens"}``, all the SDK keeps of the
  reply (its ``CountTokensResponse`` drops per-modality details); no ``generationConfig``.
* Context caching: ``POST /{ver}/cachedContents`` (``model``, ``contents``, ``ttl``,
  ``displayName``) answers a ``CachedContent`` (``name`` ``cachedContents/…``, ``expireTime``,
  ``usageMetadata.totalTokenCount``); a cache below ``min_cache_tokens`` is a 400 as on the real
  API ("Cached content is too small"). ``GET``/``DELETE /{ver}/cachedContents/{id}`` and the list.
  A ``generateContent`` with ``cachedContent`` counts the cache's contents before its own, reports
  them as ``cachedContentTokenCount`` (and ``cacheTokensDetails``), and is a 403 for a cache it
  does not hold (deleted, expired) or a 400 for another model. ``implicit_cache=True`` plays the
  implicit cache: a request whose first part repeats an earlier request's first part reports that
  part's tokens as cached.
* Batch mode: ``POST /{ver}/models/{model}:batchGenerateContent`` with
  ``{"batch": {"displayName", "inputConfig": {"requests": {"requests": [{"request", "metadata"}]}}}}``
  answers the job (an operation: ``name`` ``batches/…``, ``metadata.state`` ``BATCH_STATE_PENDING``);
  ``GET /{ver}/batches/{id}`` shows it ``BATCH_STATE_RUNNING`` for ``batch_polls`` reads, then
  ``BATCH_STATE_SUCCEEDED`` (or ``batch_final_state``) with ``metadata.output.inlinedResponses
  .inlinedResponses``: per request its ``response`` (a GenerateContentResponse made as for a direct
  request) or its ``error``, and its ``metadata``. ``GET /{ver}/batches`` lists the jobs,
  ``POST …:cancel`` cancels one, ``DELETE`` removes it.
* Checks the real API makes on every request: a part's own ``mediaResolution`` only on Gemini 3
  models; ``videoMetadata.contentLayers`` only FRAMES/AUDIO/TRANSCRIPT; ``thinkingConfig`` with
  ``thinkingBudget`` only on Gemini 2.5 and ``thinkingLevel`` only on Gemini 3 (else 400).
* A scripted 429 carries ``retry_delay`` as Gemini sends its wait: a ``google.rpc.RetryInfo``
  ``retryDelay`` in ``error.details`` (and no ``Retry-After`` header unless ``retry_after``).

Token counts are the stub's own "truth", computed from what was really uploaded (the duration
and audio track read with PyAV from the uploaded bytes) and what was really asked
(``videoMetadata.fps``, default 1 fps; the part's ``mediaResolution``, else
``generationConfig.mediaResolution``; ``videoMetadata.contentLayers``, default frames and audio):
frames = ``max(1, floor(duration * fps))`` at ``frame_tokens[resolution]`` each (times
``token_scale``), plus ``audio_tokens_per_s`` per second when the file has an audio track and
the AUDIO layer is asked, plus ~1 token per 3 characters of text. Tests compare the adapter's estimates and stored usage against these.

Binds 127.0.0.1 only, on a free port. Every request is recorded (lower-cased headers, parsed
JSON body or the byte count of an upload chunk, arrival time, status sent). Behaviour is set per
test and may change between requests: ``statuses`` (a script of generateContent statuses),
``upload_statuses`` (a script for upload starts), ``responder(req) -> str | GReply``,
``latency``, ``upload_delay`` (per upload chunk; ``max_uploads_in_flight`` records the
overlap), ``processing_polls``, ``fail_processing``, ``token_scale``; ``echo_key``: every error
quotes the key the request carried (in its message, bare and as ``?key=…``, and in an
``x-echo-key`` header), as careless servers and proxies do (the redaction tests).
"""

from __future__ import annotations

import io
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.helpers.stubs.loopback import LOOPBACK, LoopbackServer, RecordedRequest, RecordingHandler

RETENTION = timedelta(hours=48)

#: the stub's per-frame token truth, by ``generationConfig.mediaResolution`` (None: not sent)
DEFAULT_FRAME_TOKENS: dict[str | None, int] = {
    None: 258,
    "MEDIA_RESOLUTION_UNSPECIFIED": 258,
    "MEDIA_RESOLUTION_LOW": 66,
    "MEDIA_RESOLUTION_MEDIUM": 258,
    "MEDIA_RESOLUTION_HIGH": 258,
}

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass
class GReply:
    """One generateContent reply. ``status`` != 200 sends a Google-style error body;
    ``block_reason`` sends no candidates and ``promptFeedback.blockReason``; ``no_candidates``
    sends no candidates and no reason; a ``finish_reason`` of SAFETY (etc.) sends a candidate
    without content, as the real API does."""

    text: str | None = "A"
    status: int = 200
    finish_reason: str = "STOP"
    block_reason: str | None = None
    no_candidates: bool = False
    thoughts_tokens: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    retry_delay: str | None = None  # a 429's google.rpc.RetryInfo retryDelay, e.g. "7s"


class StubRequest(RecordedRequest):
    @property
    def route(self) -> str:
        return urlsplit(self.path).path

    @property
    def parts(self) -> list[dict[str, Any]]:
        if not isinstance(self.body, dict):
            return []
        return [p for c in self.body.get("contents", []) for p in (c.get("parts") or [])]

    @property
    def text(self) -> str:
        return "\n".join(p["text"] for p in self.parts if "text" in p)

    @property
    def file_uris(self) -> list[str]:
        return [field_of(field_of(p, "fileData"), "fileUri", "") for p in self.parts if field_of(p, "fileData")]

    @property
    def generation_config(self) -> dict[str, Any]:
        return field_of(self.body, "generationConfig", {}) or {}

    @property
    def video_metadata(self) -> list[dict[str, Any]]:
        """The ``videoMetadata`` of each file part (``{}`` where none was sent)."""
        return [field_of(p, "videoMetadata", {}) or {} for p in self.parts if field_of(p, "fileData")]


@dataclass
class StubCache:
    name: str  # cachedContents/<id>
    model: str  # models/<id>
    contents: list[dict[str, Any]]
    tokens: int
    by_modality: dict[str, int]
    created: datetime
    expires: datetime
    display_name: str | None = None


@dataclass
class StubBatch:
    name: str  # batches/<id>
    model: str
    display_name: str | None
    requests: list[dict[str, Any]]  # [{"request": {...}, "metadata": {...}}]
    created: datetime
    polls_left: int
    state: str = "BATCH_STATE_PENDING"
    output: list[dict[str, Any]] | None = None


@dataclass
class StubFile:
    name: str  # files/<id>
    display_name: str | None
    mime_type: str
    size_bytes: int
    data: bytearray
    created: datetime
    expires: datetime
    polls_left: int
    finalized: bool = False
    failed: bool = False
    duration_s: float = 0.0
    has_audio: bool = False
    width: int = 0
    height: int = 0
    frame_rate: float = 0.0
    n_frames: int = 0

    @property
    def state(self) -> str:
        if self.failed:
            return "FAILED"
        return "PROCESSING" if self.polls_left > 0 or not self.finalized else "ACTIVE"


Responder = Callable[[StubRequest], "str | GReply | None"]


def field_of(obj: Any, camel: str, default: Any = None) -> Any:
    """A JSON field by its lowerCamelCase or snake_case name: proto3 JSON accepts both, and the
    SDK sends some nested messages (``fileData``, ``thinkingConfig``, the upload's ``file``) in
    snake_case."""
    if not isinstance(obj, dict):
        return default
    if camel in obj:
        return obj[camel]
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    return obj.get(snake, default)


def _rfc3339(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def probe_bytes(data: bytes) -> dict[str, Any]:
    """Duration, audio presence and size of an uploaded video, read with PyAV (like the server)."""
    import av

    with av.open(io.BytesIO(bytes(data))) as container:
        v = container.streams.video[0] if container.streams.video else None
        duration = 0.0
        if v is not None and v.duration is not None and v.time_base is not None:
            duration = float(v.duration * v.time_base)
        elif container.duration is not None:
            duration = container.duration / 1_000_000
        rate = (v.average_rate or v.guessed_rate or v.base_rate) if v is not None else None
        return {
            "duration_s": duration,
            "has_audio": bool(container.streams.audio),
            "width": v.codec_context.width if v is not None else 0,
            "height": v.codec_context.height if v is not None else 0,
            "frame_rate": float(rate) if rate else 0.0,
            "n_frames": int(v.frames or 0) if v is not None else 0,
        }


class GeminiStub(LoopbackServer):
    """A threaded Gemini REST stub on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        api_key: str | None = None,
        statuses: Sequence[int] = (),
        retry_after: float | str | None = None,
        retry_delay: str | None = None,
        upload_statuses: Sequence[int] = (),
        upload_delay: float = 0.0,
        latency: float = 0.0,
        processing_polls: int = 1,
        fail_processing: bool = False,
        frame_tokens: dict[str | None, int] | None = None,
        audio_tokens_per_s: int = 32,
        token_scale: float = 1.0,
        default_fps: float = 1.0,
        model_version: str = "gemini-stub-001",
        min_cache_tokens: int = 1024,
        implicit_cache: bool = False,
        batch_polls: int = 1,
        batch_final_state: str = "BATCH_STATE_SUCCEEDED",
        echo_key: bool = False,
    ) -> None:
        self.responder = responder
        self.echo_key = echo_key
        self.api_key = api_key
        self.statuses = list(statuses)
        self.retry_after = retry_after
        self.retry_delay = retry_delay
        self.upload_statuses = list(upload_statuses)
        self.upload_delay = upload_delay
        self.uploads_in_flight = 0
        self.max_uploads_in_flight = 0
        self.latency = latency
        self.processing_polls = processing_polls
        self.fail_processing = fail_processing
        self.frame_tokens = dict(frame_tokens or DEFAULT_FRAME_TOKENS)
        self.audio_tokens_per_s = audio_tokens_per_s
        self.token_scale = token_scale
        self.default_fps = default_fps
        self.model_version = model_version
        self.min_cache_tokens = min_cache_tokens
        self.implicit_cache = implicit_cache
        self._seen_prefixes: set[str] = set()
        self.caches: dict[str, StubCache] = {}
        self.caches_created: list[StubCache] = []
        self.batch_polls = batch_polls
        self.batch_final_state = batch_final_state
        #: a script of statuses for batchGenerateContent (e.g. [503]: the submit fails)
        self.batch_create_statuses: list[int] = []
        self.batches: dict[str, StubBatch] = {}
        self.requests: list[StubRequest] = []
        self.files: dict[str, StubFile] = {}
        self._sessions: dict[str, StubFile] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/"

    # -- inspection -------------------------------------------------------------------------------
    def _select(self, pred: Callable[[StubRequest], bool]) -> list[StubRequest]:
        with self._lock:
            return [r for r in self.requests if pred(r)]

    def generate_requests(self) -> list[StubRequest]:
        return self._select(lambda r: r.route.endswith(":generateContent"))

    def count_requests(self) -> list[StubRequest]:
        return self._select(lambda r: r.route.endswith(":countTokens"))

    def upload_starts(self) -> list[StubRequest]:
        return self._select(lambda r: r.method == "POST" and r.headers.get("x-goog-upload-command") == "start")

    def upload_chunks(self) -> list[StubRequest]:
        return self._select(
            lambda r: r.method == "POST" and r.headers.get("x-goog-upload-command", "").startswith("upload")
        )

    def file_gets(self) -> list[StubRequest]:
        return self._select(lambda r: r.method == "GET" and "/files/" in r.route)

    def cache_creates(self) -> list[StubRequest]:
        return self._select(lambda r: r.method == "POST" and r.route.endswith("/cachedContents"))

    def cache_deletes(self) -> list[StubRequest]:
        return self._select(lambda r: r.method == "DELETE" and "/cachedContents/" in r.route)

    def batch_creates(self) -> list[StubRequest]:
        return self._select(lambda r: r.route.endswith(":batchGenerateContent"))

    def batch_gets(self) -> list[StubRequest]:
        return self._select(lambda r: r.method == "GET" and "/batches/" in r.route)

    @property
    def uploads_started(self) -> int:
        return len(self.upload_starts())

    @property
    def uploads_finished(self) -> int:
        with self._lock:
            return sum(1 for f in self.files.values() if f.finalized)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = self.in_flight

    def expire(self, name: str | None = None) -> None:
        """Forget a file (or all): the server's 48 h retention ran out."""
        with self._lock:
            for n in [name] if name else list(self.files):
                self.files.pop(n, None)

    # -- token truth ------------------------------------------------------------------------------
    def count(self, body: dict[str, Any]) -> tuple[int, dict[str, int]]:
        """(total prompt tokens, tokens per modality) of a generateContent / countTokens body."""
        resolution = field_of(field_of(body, "generationConfig", {}), "mediaResolution")
        by: dict[str, int] = {}
        layers_default = ["FRAMES", "AUDIO"]
        for content in body.get("contents", []):
            for part in content.get("parts") or []:
                if "text" in part:
                    by["TEXT"] = by.get("TEXT", 0) + max(1, math.ceil(len(part["text"]) / 3))
                elif field_of(part, "fileData"):
                    f = self.file_by_uri(field_of(field_of(part, "fileData"), "fileUri", ""))
                    if f is None:
                        continue
                    meta = field_of(part, "videoMetadata", {}) or {}
                    fps = float(field_of(meta, "fps") or self.default_fps)
                    layers = field_of(meta, "contentLayers") or layers_default
                    frames = max(1, int(f.duration_s * fps))
                    own = field_of(field_of(part, "mediaResolution", {}), "level")
                    per = self.frame_tokens.get(own or resolution, self.frame_tokens[None])
                    if "FRAMES" in layers:
                        by["VIDEO"] = by.get("VIDEO", 0) + int(round(frames * per * self.token_scale))
                    if f.has_audio and "AUDIO" in layers:
                        by["AUDIO"] = by.get("AUDIO", 0) + int(math.ceil(f.duration_s * self.audio_tokens_per_s))
        return sum(by.values()), by

    def prompt_usage(self, body: dict[str, Any], model: str) -> tuple[int, dict[str, int], int, dict[str, int]]:
        """(prompt tokens, per modality, cached tokens, cached per modality) of a request: an
        explicit cache's contents count first and are cached; with ``implicit_cache``, a first
        part seen before (same model) is reported cached."""
        prompt, by = self.count(body)
        cached, cached_by = 0, {}
        name = field_of(body, "cachedContent")
        if name:
            with self._lock:
                cache = self.caches.get(name)
            assert cache is not None  # checked by the handler
            prompt += cache.tokens
            for m, n in cache.by_modality.items():
                by[m] = by.get(m, 0) + n
            cached, cached_by = cache.tokens, dict(cache.by_modality)
        elif self.implicit_cache:
            parts = [p for c in body.get("contents", []) for p in (c.get("parts") or [])]
            if parts and field_of(parts[0], "fileData"):
                key = model + json.dumps(parts[0], sort_keys=True)
                first = {
                    "contents": [{"parts": [parts[0]]}],
                    "generationConfig": field_of(body, "generationConfig", {}),
                }
                with self._lock:
                    seen = key in self._seen_prefixes
                    self._seen_prefixes.add(key)
                if seen:
                    cached, cached_by = self.count(first)
        return prompt, by, cached, cached_by

    def file_by_uri(self, uri: str) -> StubFile | None:
        name = "files/" + uri.rstrip("/").rsplit("/", 1)[-1]
        with self._lock:
            return self.files.get(name)

    def file_json(self, f: StubFile) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": f.name,
            "mimeType": f.mime_type,
            "sizeBytes": str(f.size_bytes),
            "createTime": _rfc3339(f.created),
            "updateTime": _rfc3339(f.created),
            "expirationTime": _rfc3339(f.expires),
            "sha256Hash": "",
            "uri": f"{self.base_url}v1beta/{f.name}",
            "state": f.state,
            "source": "UPLOADED",
        }
        if f.display_name:
            out["displayName"] = f.display_name
        if f.state == "ACTIVE":
            out["videoMetadata"] = {"videoDuration": f"{f.duration_s:.3f}s"}
        if f.failed:
            out["error"] = {"code": 400, "message": "stub: the video could not be processed"}
        return out

    # -- behaviour ------------------------------------------------------------------------------
    def decide(self, req: StubRequest) -> GReply:
        with self._lock:
            scripted = self.statuses.pop(0) if self.statuses else None
        if scripted is not None and scripted != 200:
            headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
            return GReply(status=scripted, headers=headers, retry_delay=self.retry_delay if scripted == 429 else None)
        out = self.responder(req) if self.responder is not None else None
        return out if isinstance(out, GReply) else GReply(text=out if out is not None else "A")

    def generate_payload(self, req: StubRequest, reply: GReply, model: str = "") -> dict[str, Any]:
        prompt, by, cached, cached_by = self.prompt_usage(req.body, model or _model_of(req.route))
        out_tokens = len((reply.text or "").split()) if reply.text else 0
        usage: dict[str, Any] = {
            "promptTokenCount": prompt,
            "totalTokenCount": prompt + out_tokens + reply.thoughts_tokens,
            "promptTokensDetails": [{"modality": m, "tokenCount": n} for m, n in sorted(by.items())],
        }
        if cached:
            usage["cachedContentTokenCount"] = cached
            usage["cacheTokensDetails"] = [{"modality": m, "tokenCount": n} for m, n in sorted(cached_by.items())]
        if reply.text:
            usage["candidatesTokenCount"] = out_tokens
        if reply.thoughts_tokens:
            usage["thoughtsTokenCount"] = reply.thoughts_tokens
        payload: dict[str, Any] = {
            "usageMetadata": usage,
            "modelVersion": self.model_version,
            "responseId": uuid.uuid4().hex[:16],
        }
        if reply.block_reason:
            payload["promptFeedback"] = {"blockReason": reply.block_reason}
            return payload
        if reply.no_candidates:
            return payload
        cand: dict[str, Any] = {"index": 0, "finishReason": reply.finish_reason}
        if reply.finish_reason in ("SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"):
            cand["safetyRatings"] = [
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
            ]
        elif reply.text is not None:
            cand["content"] = {"role": "model", "parts": [{"text": reply.text}]}
        payload["candidates"] = [cand]
        return payload


def _model_of(route: str) -> str:
    """``gemini-2.5-flash`` of ``/v1beta/models/gemini-2.5-flash:generateContent``."""
    return route.rsplit("/", 1)[-1].split(":", 1)[0]


def _bare(model: str) -> str:
    return model.split("/", 1)[1] if model.startswith("models/") else model


def _ttl_seconds(ttl: Any) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(ttl or ""))
    return float(m.group(1)) if m else 3600.0  # the API's default TTL: 1 hour


class _Handler(RecordingHandler):
    stub: GeminiStub

    def _send(self, req: StubRequest, status: int, payload: Any = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if data:
            self.wfile.write(data)
        self.wfile.flush()
        req.status, req.completed = status, time.monotonic()

    def _error(
        self,
        req: StubRequest,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        retry_delay: str | None = None,
    ) -> None:
        key = req.headers.get("x-goog-api-key") or ""
        if self.stub.echo_key and key:
            message = f"{message}: API key {key} rejected (https://stub.invalid/v1beta/models?key={key})"
            headers = {**(headers or {}), "x-echo-key": key}
        error: dict[str, Any] = {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "UNKNOWN")}
        if retry_delay is not None:  # as Gemini sends a rate limit: the wait is in the body
            error["details"] = [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "stub"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay},
            ]
        self._send(req, status, {"error": error}, headers)

    def _refused(self, req: StubRequest, model: str | None = None) -> str | None:
        """What the real API refuses with a 400 on any request: a part's own mediaResolution off
        Gemini 3, an unknown content layer, a thinking setting the model does not take."""
        model = model or _model_of(req.route)
        gemini3 = re.match(r"gemini-([3-9]|\d\d)", model) is not None
        for p in req.parts:
            if field_of(p, "mediaResolution") is not None and not gemini3:
                return f"Per-part media resolution is not supported for {model}."
            layers = field_of(field_of(p, "videoMetadata", {}) or {}, "contentLayers") or []
            bad = [x for x in layers if x not in ("FRAMES", "AUDIO", "TRANSCRIPT")]
            if bad:
                return f"Invalid value at 'contents[0].parts[0].video_metadata.content_layers': {bad}"
        thinking = field_of(req.generation_config, "thinkingConfig") or {}
        if field_of(thinking, "thinkingLevel") is not None and not gemini3:
            return "Thinking level is not supported for this model."
        if field_of(thinking, "thinkingBudget") is not None and gemini3:
            return "Thinking budget is not supported for this model; use thinking level."
        return None

    def _authorised(self, req: StubRequest) -> bool:
        want = self.stub.api_key
        if want is None or req.headers.get("x-goog-api-key") == want:
            return True
        self._error(req, 400 if not req.headers.get("x-goog-api-key") else 403, "API key not valid.")
        return False

    def _read(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    # -- verbs ------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server API
        req = self._record(None)
        if not self._authorised(req):
            return
        if self._get_cache_or_batch(req):
            return
        m = re.fullmatch(r"/[^/]+/(files/[^/:?]+)", req.route)
        if not m:
            self._error(req, 404, f"no route {req.route}")
            return
        stub = self.stub
        with stub._lock:
            f = stub.files.get(m.group(1))
            if f is not None and f.finalized and f.polls_left > 0:
                f.polls_left -= 1
                shown = stub.file_json(f)
                shown["state"] = "PROCESSING"
            else:
                shown = stub.file_json(f) if f is not None else None
        if shown is None:
            self._error(req, 404, f"File {m.group(1)} not found.")
            return
        self._send(req, 200, shown)

    def do_DELETE(self) -> None:  # noqa: N802 - http.server API
        req = self._record(None)
        if not self._authorised(req):
            return
        m = re.fullmatch(r"/[^/]+/((?:files|cachedContents|batches)/[^/:?]+)", req.route)
        with self.stub._lock:
            table: dict[str, Any] = (
                self.stub.caches
                if m and m.group(1).startswith("cachedContents/")
                else self.stub.batches
                if m and m.group(1).startswith("batches/")
                else self.stub.files
            )
            gone = table.pop(m.group(1), None) if m else None
        if gone is None:
            self._error(req, 404, "File not found.")
        else:
            self._send(req, 200, {})

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        command = (self.headers.get("X-Goog-Upload-Command") or "").lower()
        if command.startswith("upload"):
            self._upload_chunk(command)
            return
        raw = self._read()
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        req = self._record(body)
        if not self._authorised(req):
            return
        route = req.route
        if command == "start" and re.fullmatch(r"/upload/[^/]+/files", route):
            self._upload_start(req)
        elif re.fullmatch(r"/[^/]+/models/[^/:]+:generateContent", route):
            self._generate(req)
        elif re.fullmatch(r"/[^/]+/models/[^/:]+:countTokens", route):
            self._count_tokens(req)
        elif re.fullmatch(r"/[^/]+/cachedContents", route):
            self._create_cache(req)
        elif re.fullmatch(r"/[^/]+/models/[^/:]+:batchGenerateContent", route):
            self._create_batch(req)
        elif m := re.fullmatch(r"/[^/]+/(batches/[^/:]+):cancel", route):
            with self.stub._lock:
                job = self.stub.batches.get(m.group(1))
                if job is not None and job.state in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
                    job.state = "BATCH_STATE_CANCELLED"
            if job is None:
                self._error(req, 404, f"Batch {m.group(1)} not found.")
            else:
                self._send(req, 200, {})
        else:
            self._error(req, 404, f"no route {route}")

    # -- context caching and batches -------------------------------------------------------------

    def _check_cache(self, req: StubRequest) -> bool:
        name = field_of(req.body, "cachedContent")
        if not name:
            return True
        with self.stub._lock:
            cache = self.stub.caches.get(name)
            if cache is not None and cache.expires <= datetime.now(timezone.utc):
                self.stub.caches.pop(name, None)
                cache = None
        if cache is None:
            self._error(req, 403, f"CachedContent not found (or permission denied): {name}")
            return False
        if _bare(cache.model) != _model_of(req.route):
            self._error(req, 400, f"Model {_model_of(req.route)} does not match the cached content's {cache.model}")
            return False
        return True

    def _create_cache(self, req: StubRequest) -> None:
        stub, body = self.stub, req.body
        if not isinstance(body, dict) or not field_of(body, "model") or not body.get("contents"):
            self._error(req, 400, "cachedContents.create needs model and contents")
            return
        model = _bare(str(field_of(body, "model")))
        if not self._check_files(req):
            return
        refused = self._refused(req, model)
        if refused:
            self._error(req, 400, refused)
            return
        tokens, by = stub.count({"contents": body["contents"]})
        if tokens < stub.min_cache_tokens:
            self._error(
                req,
                400,
                f"Cached content is too small. total_token_count={tokens}, min_total_token_count={stub.min_cache_tokens}",
            )
            return
        now = datetime.now(timezone.utc)
        cache = StubCache(
            name=f"cachedContents/{uuid.uuid4().hex[:12]}",
            model=f"models/{model}",
            contents=body["contents"],
            tokens=tokens,
            by_modality=by,
            created=now,
            expires=now + timedelta(seconds=_ttl_seconds(field_of(body, "ttl"))),
            display_name=field_of(body, "displayName"),
        )
        with stub._lock:
            stub.caches[cache.name] = cache
            stub.caches_created.append(cache)
        self._send(req, 200, _cache_json(cache))

    def _create_batch(self, req: StubRequest) -> None:
        stub = self.stub
        with stub._lock:
            scripted = stub.batch_create_statuses.pop(0) if stub.batch_create_statuses else None
        if scripted is not None and scripted != 200:
            self._error(req, scripted, f"stub batch error {scripted}")
            return
        batch = field_of(req.body, "batch", {}) or {}
        requests = field_of(field_of(field_of(batch, "inputConfig", {}), "requests", {}), "requests")
        if not isinstance(requests, list) or not requests:
            self._error(req, 400, "batch.inputConfig.requests.requests is required")
            return
        job = StubBatch(
            name=f"batches/{uuid.uuid4().hex[:12]}",
            model=f"models/{_model_of(req.route)}",
            display_name=field_of(batch, "displayName"),
            requests=requests,
            created=datetime.now(timezone.utc),
            polls_left=stub.batch_polls,
        )
        with stub._lock:
            stub.batches[job.name] = job
        self._send(req, 200, _batch_json(job))

    def _run_batch(self, job: StubBatch) -> list[dict[str, Any]]:
        """Each inlined request answered as a direct generateContent would be (or its error)."""
        stub, out = self.stub, []
        route = f"/v1beta/{job.model}:generateContent"
        for item in job.requests:
            body = field_of(item, "request", {}) or {}
            inner = StubRequest(index=-1, method="POST", path=route, headers={}, body=body, received=time.monotonic())
            reply = stub.decide(inner)
            entry: dict[str, Any] = {}
            if field_of(item, "metadata") is not None:
                entry["metadata"] = field_of(item, "metadata")
            missing = [u for u in inner.file_uris if (f := stub.file_by_uri(u)) is None or f.state != "ACTIVE"]
            refused = self._refused(inner, _bare(job.model))
            if reply.status != 200 or missing or refused:
                code = reply.status if reply.status != 200 else 400
                msg = refused or (f"file not ACTIVE: {missing}" if missing else f"stub error {code}")
                entry["error"] = {"code": code, "message": msg, "status": _STATUS_NAMES.get(code, "UNKNOWN")}
            else:
                entry["response"] = stub.generate_payload(inner, reply, _bare(job.model))
            out.append(entry)
        return out

    def _get_cache_or_batch(self, req: StubRequest) -> bool:
        stub, route = self.stub, req.route
        if re.fullmatch(r"/[^/]+/cachedContents", route):
            with stub._lock:
                shown = [_cache_json(c) for c in stub.caches.values()]
            self._send(req, 200, {"cachedContents": shown} if shown else {})
            return True
        if m := re.fullmatch(r"/[^/]+/(cachedContents/[^/:?]+)", route):
            with stub._lock:
                cache = stub.caches.get(m.group(1))
            if cache is None:
                self._error(req, 403, f"CachedContent not found (or permission denied): {m.group(1)}")
            else:
                self._send(req, 200, _cache_json(cache))
            return True
        if re.fullmatch(r"/[^/]+/batches", route):
            with stub._lock:
                shown = [_batch_json(b) for b in stub.batches.values()]
            self._send(req, 200, {"operations": shown} if shown else {})
            return True
        if m := re.fullmatch(r"/[^/]+/(batches/[^/:?]+)", route):
            with stub._lock:
                job = stub.batches.get(m.group(1))
                run = False
                if job is not None and job.state in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
                    if job.polls_left > 0:
                        job.polls_left -= 1
                        job.state = "BATCH_STATE_RUNNING"
                    else:
                        run = True
            if job is None:
                self._error(req, 404, f"Batch {m.group(1)} not found.")
                return True
            if run:
                final = stub.batch_final_state
                output = self._run_batch(job) if final == "BATCH_STATE_SUCCEEDED" else None
                with stub._lock:
                    job.state, job.output = final, output
            with stub._lock:
                shown_job = _batch_json(job)
            self._send(req, 200, shown_job)
            return True
        return False

    # -- the Files API ------------------------------------------------------------------------------
    def _upload_start(self, req: StubRequest) -> None:
        stub = self.stub
        with stub._lock:
            scripted = stub.upload_statuses.pop(0) if stub.upload_statuses else None
        if scripted is not None and scripted != 200:
            self._error(req, scripted, f"stub upload error {scripted}")
            return
        meta = field_of(req.body, "file", {}) or {}
        size = int(req.headers.get("x-goog-upload-header-content-length") or field_of(meta, "sizeBytes") or 0)
        mime = req.headers.get("x-goog-upload-header-content-type") or field_of(meta, "mimeType") or ""
        if not mime.startswith("video/"):
            self._error(req, 400, f"unsupported MIME type {mime!r}")
            return
        now = datetime.now(timezone.utc)
        upload_id = uuid.uuid4().hex
        f = StubFile(
            name=f"files/{uuid.uuid4().hex[:12]}",
            display_name=field_of(meta, "displayName"),
            mime_type=mime,
            size_bytes=size,
            data=bytearray(),
            created=now,
            expires=now + RETENTION,
            polls_left=stub.processing_polls,
        )
        with stub._lock:
            stub._sessions[upload_id] = f
        url = f"{stub.base_url}upload/v1beta/files?upload_id={upload_id}&upload_protocol=resumable"
        self._send(
            req,
            200,
            None,
            {"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active", "X-Goog-Upload-Chunk-Granularity": "8388608"},
        )

    def _upload_chunk(self, command: str) -> None:
        stub = self.stub
        data = self._read()
        req = self._record({"bytes": len(data)})
        upload_id = (parse_qs(urlsplit(self.path).query).get("upload_id") or [""])[0]
        with stub._lock:
            f = stub._sessions.get(upload_id)
        if f is None:
            self._error(req, 404, "unknown upload session")
            return
        if stub.upload_delay:
            with stub._lock:
                stub.uploads_in_flight += 1
                stub.max_uploads_in_flight = max(stub.max_uploads_in_flight, stub.uploads_in_flight)
            time.sleep(stub.upload_delay)
            with stub._lock:
                stub.uploads_in_flight -= 1
        offset = int(req.headers.get("x-goog-upload-offset") or 0)
        if offset != len(f.data):
            self._error(req, 400, f"offset {offset} != {len(f.data)} bytes received")
            return
        f.data.extend(data)
        if "finalize" not in command:
            self._send(req, 200, None, {"X-Goog-Upload-Status": "active"})
            return
        if len(f.data) != f.size_bytes:
            self._error(req, 400, f"size {len(f.data)} != declared {f.size_bytes}")
            return
        try:
            info = probe_bytes(f.data)
        except Exception:  # noqa: BLE001 - not a video: FAILED like the real service
            info = None
        with stub._lock:
            if info is None or stub.fail_processing:
                f.failed = True
            else:
                f.duration_s, f.has_audio = info["duration_s"], info["has_audio"]
                f.width, f.height = info["width"], info["height"]
                f.frame_rate, f.n_frames = info["frame_rate"], info["n_frames"]
            f.finalized = True
            stub._sessions.pop(upload_id, None)
            stub.files[f.name] = f
            shown = stub.file_json(f)
        shown["state"] = "PROCESSING" if not f.failed else "FAILED"
        self._send(req, 200, {"file": shown}, {"X-Goog-Upload-Status": "final"})

    # -- models ----------------------------------------------------------------------------------
    def _check_files(self, req: StubRequest) -> bool:
        for uri in req.file_uris:
            f = self.stub.file_by_uri(uri)
            if f is None:
                self._error(req, 403, f"You do not have permission to access the File {uri} or it may not exist.")
                return False
            if f.state != "ACTIVE":
                self._error(req, 400, f"The File {f.name} is not in an ACTIVE state and usage is not allowed.")
                return False
        return True

    def _count_tokens(self, req: StubRequest) -> None:
        if not isinstance(req.body, dict) or not self._check_files(req):
            if not isinstance(req.body, dict):
                self._error(req, 400, "bad body")
            return
        if field_of(req.body, "generationConfig") is not None:
            self._error(req, 400, 'Invalid JSON payload received. Unknown name "generationConfig"')
            return
        refused = self._refused(req)
        if refused:
            self._error(req, 400, refused)
            return
        total, _ = self.stub.count(req.body)
        self._send(req, 200, {"totalTokens": total})

    def _generate(self, req: StubRequest) -> None:
        stub = self.stub
        with stub._lock:
            stub.in_flight += 1
            stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
        try:
            if not isinstance(req.body, dict):
                self._error(req, 400, "bad body")
                return
            reply = stub.decide(req)
            wait = stub.latency + reply.delay
            if wait:
                time.sleep(wait)
            if reply.status != 200:
                self._error(req, reply.status, f"stub error {reply.status}", reply.headers, reply.retry_delay)
                return
            refused = self._refused(req)
            if refused:
                self._error(req, 400, refused)
                return
            if not self._check_files(req) or not self._check_cache(req):
                return
            self._send(req, 200, stub.generate_payload(req, reply), reply.headers)
        except (BrokenPipeError, ConnectionResetError):
            req.status = -1
        finally:
            with stub._lock:
                stub.in_flight -= 1


def _cache_json(c: StubCache) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": c.name,
        "model": c.model,
        "createTime": _rfc3339(c.created),
        "updateTime": _rfc3339(c.created),
        "expireTime": _rfc3339(c.expires),
        "usageMetadata": {"totalTokenCount": c.tokens},
    }
    if c.display_name:
        out["displayName"] = c.display_name
    return out


def _batch_json(b: StubBatch) -> dict[str, Any]:
    """The job as the API shapes it: an operation whose ``metadata`` is the GenerateContentBatch."""
    meta: dict[str, Any] = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
        "name": b.name,
        "model": b.model,
        "state": b.state,
        "createTime": _rfc3339(b.created),
        "updateTime": _rfc3339(b.created),
        "batchStats": {"requestCount": str(len(b.requests))},
    }
    if b.display_name:
        meta["displayName"] = b.display_name
    out: dict[str, Any] = {"name": b.name, "metadata": meta}
    if b.output is not None:
        meta["output"] = {"inlinedResponses": {"inlinedResponses": b.output}}
        meta["endTime"] = _rfc3339(datetime.now(timezone.utc))
        out["done"] = True
        out["response"] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
            "inlinedResponses": {"inlinedResponses": b.output},
        }
    elif b.state in ("BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED"):
        out["done"] = True
    return out


GeminiStub.handler_class = _Handler
GeminiStub.request_class = StubRequest
