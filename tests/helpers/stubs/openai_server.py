"""A local stub of an OpenAI-compatible chat-completions server, for tests.

    with OpenAIStub(responder=lambda req: "The answer is B") as stub:
        client = OpenAI(base_url=stub.base_url, api_key="k")
        ...
        stub.requests[0].body, stub.requests[0].headers

It speaks the wire protocol the real ``openai`` SDK expects (``POST /v1/chat/completions``
answering a full ``chat.completion`` object; ``GET /v1/models``), binds 127.0.0.1 only, on a
free port, and serves from a background thread. Every request is recorded (headers, parsed
body, arrival and completion times, the status sent). Behaviour is configured per test and may
be changed between requests:

* ``statuses``: a script of status codes consumed one per request (``[429, 503]`` then normal
  replies); ``retry_after`` adds a ``Retry-After`` header to the scripted errors;
* ``responder(req) -> str | Reply``: the answer text, or a full :class:`Reply` (status, headers,
  refusal, finish reason, content, delay, disconnect);
* ``refusal`` / ``empty``: every reply is a refusal / has empty content;
* ``latency``: seconds each reply waits before it is sent;
* ``hold_after``: let that many chat requests through (counted on arrival), then hold every
  later one until :meth:`release`;
* ``models``: the ids ``GET /v1/models`` lists (``owned_by``: ``owner``, vLLM's is ``vllm``,
  SGLang's ``sglang``; ``max_model_len`` when given, as both list it);
* ``echo_key``: every error (a scripted status, a refused request, a Batch API error line) quotes
  the key the request carried, in its message (bare, as ``Bearer …`` and as ``?key=…``) and in an
  ``x-echo-key`` header, as careless servers and proxies do (the redaction tests).

**The video part** is read as vLLM reads it (vllm/multimodal/media/video.py): a ``video_url``
data URL of media type ``video/jpeg`` is comma-separated base64 JPEG frames, one video, not
sampled again; the request's ``media_io_kwargs["video"]`` carries its timing (``fps``,
``frames_indices`` one per frame, ``total_num_frames`` >= frames, ``duration``, ``num_frames``
-1 or at least the frames). A part that breaks these rules is answered 400 with the reason, as
the server would refuse it. :meth:`StubRequest.video_frames` decodes the frames back to pixels.

**A prefix cache** (``prefix_cache=True``) models the server's (vLLM's automatic prefix
caching, SGLang's RadixAttention) in tokens: everything before the question (the media, with
its ``media_io_kwargs``) costs ``tokens_per_frame`` tokens per frame, the question
``len(text) // 4 + 1``. A request whose media prefix is cached when it arrives recomputes only
its question; one that is not computes the prefix too (one *video prefill*, counted per prefix
in :attr:`OpenAIStub.prefills`), and the prefix is cached once that prefill ends, so requests
that arrive while it runs compute it again, as concurrently scheduled requests do on a real
server. With ``prefill_s_per_token`` the computing takes time on one shared "GPU" (a lock),
so a run's wall time follows the tokens it made the server compute. The reply's ``usage``
then reports ``prompt_tokens_details.cached_tokens``.

The Batch API is served as well, in its wire format: ``POST /v1/files`` (multipart upload,
``purpose=batch``), ``GET /v1/files/{id}/content``, ``POST /v1/batches`` and ``GET
/v1/batches/{id}``. A batch reports ``validating``, then ``in_progress`` for ``batch_polls``
retrieves, then its final status (``batch_final_status``, default ``completed``; ``failed``
answers nothing; ``expired`` answers the first ``batch_expire_after`` lines). On completion every
input line is answered by the same ``responder`` as a live request (:attr:`batch_lines` records
them): a 200 goes to the output file, any other status to the error file. ``batch_line_hook``
may rewrite the serialized output lines (a corrupt line, for the tests).

Header names are recorded lower-cased.
"""

from __future__ import annotations

import base64
import binascii
import email.parser
import email.policy
import hashlib
import io
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.helpers.stubs.loopback import LOOPBACK, LoopbackServer, RecordedRequest, RecordingHandler


@dataclass
class Reply:
    """One reply. ``status`` != 200 sends an OpenAI-style error body; ``disconnect`` closes the
    connection without replying (a connection error for the client)."""

    content: str | None = "A"
    status: int = 200
    refusal: str | None = None
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    disconnect: bool = False


class StubRequest(RecordedRequest):
    """What the stub received, and what it did with it."""

    #: the request body as it came over the wire (the SDK's serialization, byte for byte)
    raw: bytes = b""
    #: prompt tokens the prefix cache served (``prefix_cache``)
    cached: int = 0

    # -- helpers for chat requests ------------------------------------------------------------
    @property
    def content(self) -> list[dict[str, Any]]:
        """The parts of the (last) user message; a string content becomes one text part."""
        if not isinstance(self.body, dict):
            return []
        users = [m for m in self.body.get("messages", []) if m.get("role") == "user"]
        if not users:
            return []
        content = users[-1].get("content")
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return list(content or [])

    @property
    def text(self) -> str:
        return "\n".join(p.get("text", "") for p in self.content if p.get("type") == "text")

    @property
    def part_types(self) -> list[str]:
        return [p.get("type", "") for p in self.content]

    @property
    def media_urls(self) -> list[str]:
        """The URLs of the image, video and audio parts, in order."""
        out = []
        for p in self.content:
            kind = p.get("type")
            if kind in ("image_url", "video_url", "audio_url"):
                out.append(p[kind]["url"])
        return out

    def audio_clips(self) -> list[tuple[int, Any]]:
        """Each ``audio_url`` part's WAV decoded as vLLM's ``AudioMediaIO`` reads it (rate, float32
        samples), by an independent reader (scipy), in order."""
        from scipy.io import wavfile

        out = []
        for p in self.content:
            if p.get("type") == "audio_url":
                url = p["audio_url"]["url"]
                head, _, data = url.partition(",")
                assert head == "data:audio/wav;base64", head
                out.append(wavfile.read(io.BytesIO(base64.b64decode(data, validate=True))))
        return out

    @property
    def media_io_kwargs(self) -> dict[str, Any]:
        """The request's per-request ``media_io_kwargs`` (vLLM's field; ``extra_body`` in the SDK)."""
        got = self.body.get("media_io_kwargs") if isinstance(self.body, dict) else None
        return dict(got) if isinstance(got, dict) else {}

    def video_jpegs(self) -> list[list[bytes]]:
        """The JPEG bytes of each ``data:video/jpeg`` video part, frame by frame, in order."""
        out = []
        for url in self.media_urls:
            if url.startswith(VIDEO_JPEG):
                out.append([base64.b64decode(b, validate=True) for b in url[len(VIDEO_JPEG) :].split(",")])
        return out

    def video_frames(self) -> list[Any]:
        """The frames of each ``data:video/jpeg`` part decoded back to pixels (uint8 HxWx3 arrays)."""
        import numpy as np
        from PIL import Image

        return [[np.asarray(Image.open(io.BytesIO(j)).convert("RGB")) for j in video] for video in self.video_jpegs()]

    @property
    def media_frames(self) -> int:
        """Frames the server would take from the media: one per image, each JPEG of a
        ``video/jpeg`` part, and 32 (vLLM's default) for a video it samples itself."""
        n = 0
        for p in self.content:
            if p.get("type") == "image_url":
                n += 1
            elif p.get("type") == "video_url":
                url = p["video_url"]["url"]
                n += url.count(",") if url.startswith(VIDEO_JPEG) else 32
        return n

    @property
    def prefix_key(self) -> str | None:
        """What a prefix cache keys the part before the question on: the media and its
        ``media_io_kwargs`` (None without media)."""
        if not self.media_urls:
            return None
        h = hashlib.sha256()
        for url in self.media_urls:
            h.update(hashlib.sha256(url.encode()).digest())
        h.update(json.dumps(self.media_io_kwargs, sort_keys=True).encode())
        return h.hexdigest()[:16]

    @property
    def signature(self) -> str:
        """Identifies the question asked: a hash of the media and the text."""
        h = hashlib.sha256()
        for url in self.media_urls:
            h.update(hashlib.sha256(url.encode()).digest())
        h.update(self.text.encode())
        return h.hexdigest()[:16]


Responder = Callable[[StubRequest], "str | Reply | None"]

#: vLLM's data URL of pre-extracted frames (comma-separated base64 JPEGs)
VIDEO_JPEG = "data:video/jpeg;base64,"


def video_part_error(req: StubRequest) -> str | None:
    """Why a server would refuse the request's ``video/jpeg`` part(s), or None: each frame a
    JPEG, and the timing in ``media_io_kwargs["video"]`` valid for the frames sent."""
    try:
        videos = req.video_jpegs()
    except (binascii.Error, ValueError) as e:
        return f"video/jpeg: a frame is not base64 ({e})"
    if not videos:
        return None
    if len(videos) > 1:
        return "one video per prompt (--limit-mm-per-prompt video=1)"
    frames = videos[0]
    if any(not j.startswith(b"\xff\xd8") for j in frames):
        return "video/jpeg: a frame is not a JPEG"
    meta = req.media_io_kwargs.get("video") or {}
    fps, idx, total, dur = (meta.get(k) for k in ("fps", "frames_indices", "total_num_frames", "duration"))
    num = meta.get("num_frames", -1)
    if not isinstance(fps, (int, float)) or fps <= 0:
        return f"media_io_kwargs.video.fps must be > 0, got {fps!r}"
    if not isinstance(idx, list) or len(idx) != len(frames) or not all(isinstance(i, int) for i in idx):
        return f"media_io_kwargs.video.frames_indices must be one int per frame ({len(frames)}), got {idx!r}"
    if not isinstance(total, int) or total < len(frames) or (idx and (min(idx) < 0 or max(idx) >= total)):
        return f"media_io_kwargs.video.total_num_frames must cover the frames sent, got {total!r}"
    if not isinstance(dur, (int, float)) or dur <= 0:
        return f"media_io_kwargs.video.duration must be > 0, got {dur!r}"
    if num != -1 and (not isinstance(num, int) or num < len(frames)):
        return f"media_io_kwargs.video.num_frames={num!r} would drop frames (send -1)"
    return None


#: the final statuses of a batch
BATCH_TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass
class StubFile:
    """An uploaded (or generated) file."""

    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class StubBatch:
    """A batch job and its progress."""

    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None
    created_at: int
    status: str = "validating"
    retrieves: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "in_progress_at": self.created_at if self.status != "validating" else None,
            "expires_at": self.created_at + 86400,
            "completed_at": self.created_at + 1 if self.status == "completed" else None,
            "failed_at": self.created_at + 1 if self.status == "failed" else None,
            "expired_at": self.created_at + 1 if self.status == "expired" else None,
            "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
            "metadata": self.metadata,
        }


class OpenAIStub(LoopbackServer):
    """A threaded OpenAI-compatible stub on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        statuses: Sequence[int] = (),
        retry_after: float | str | None = None,
        refusal: str | None = None,
        empty: bool = False,
        latency: float = 0.0,
        hold_after: int | None = None,
        fingerprint: str = "fp_naru_stub",
        models: Sequence[str] = ("stub",),
        owner: str = "stub",
        max_model_len: int | None = None,
        prefix_cache: bool = False,
        tokens_per_frame: int = 64,
        prefill_s_per_token: float = 0.0,
        batch_polls: int = 1,
        batch_final_status: str = "completed",
        batch_expire_after: int = 0,
        batch_line_hook: Callable[[dict[str, Any], str], str] | None = None,
        echo_key: bool = False,
    ) -> None:
        self.responder = responder
        self.echo_key = echo_key
        self.statuses = list(statuses)
        self.retry_after = retry_after
        self.refusal = refusal
        self.empty = empty
        self.latency = latency
        self.hold_after = hold_after
        self.fingerprint = fingerprint
        self.models = list(models)
        self.owner = owner
        self.max_model_len = max_model_len
        self.prefix_cache = prefix_cache
        self.tokens_per_frame = tokens_per_frame
        self.prefill_s_per_token = prefill_s_per_token
        #: prefix key -> how many requests computed that media prefix (video prefills)
        self.prefills: Counter[str] = Counter()
        #: prompt tokens the server computed, and those it served from the cache
        self.computed_tokens = 0
        self.cached_tokens = 0
        self._cached: set[str] = set()
        self._gpu = threading.Lock()
        self.batch_polls = batch_polls
        self.batch_final_status = batch_final_status
        self.batch_expire_after = batch_expire_after
        self.batch_line_hook = batch_line_hook
        self.files: dict[str, StubFile] = {}
        self.batches: dict[str, StubBatch] = {}
        #: the chat requests answered inside batches (not in :attr:`requests`)
        self.batch_lines: list[StubRequest] = []
        self.requests: list[StubRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.answered = 0  # 200 replies sent
        self._admitted = 0  # chat requests that arrived (hold_after counts these)
        self._lock = threading.Lock()
        self._batch_lock = threading.Lock()  # one retrieve advances a batch at a time
        self._release = threading.Event()

    # -- lifecycle ------------------------------------------------------------------------------
    def before_stop(self) -> None:
        self._release.set()

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    # -- control and inspection -----------------------------------------------------------------
    def release(self) -> None:
        """Let held requests (see ``hold_after``) and every later one through."""
        self.hold_after = None
        self._release.set()

    def chat_requests(self) -> list[StubRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def requests_to(self, method: str, suffix: str) -> list[StubRequest]:
        """The recorded requests of ``method`` whose path ends with ``suffix`` (``/batches``)."""
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path.rstrip("/").endswith(suffix)]

    def held(self) -> list[StubRequest]:
        """Chat requests received but not yet replied to."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions") and r.completed is None]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = self.in_flight
            self.answered = 0
            self._admitted = 0

    # -- behaviour ------------------------------------------------------------------------------
    def error_text(self, req: RecordedRequest, text: str) -> str:
        """``text``, quoting the request's key when ``echo_key`` is on."""
        key = (req.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        if not self.echo_key or not key:
            return text
        return f"{text}: the key {key} is not allowed (Authorization: Bearer {key}; https://stub.invalid/v1?key={key})"

    def error_headers(self, req: RecordedRequest, headers: dict[str, str]) -> dict[str, str]:
        key = (req.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        return {**headers, "x-echo-key": key} if self.echo_key and key else headers

    def _decide(self, req: StubRequest) -> Reply:
        with self._lock:
            scripted = self.statuses.pop(0) if self.statuses else None
        if scripted is not None and scripted != 200:
            headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
            return Reply(status=scripted, headers=headers)
        out = self.responder(req) if self.responder is not None else None
        reply = out if isinstance(out, Reply) else Reply(content=out if out is not None else "A")
        if self.refusal is not None:
            reply.content, reply.refusal = None, self.refusal
        if self.empty:
            reply.content = ""
        return reply

    def _hold(self, ticket: int) -> None:
        while True:
            with self._lock:
                limit = self.hold_after
                if limit is None or ticket < limit:
                    return
            if self._release.wait(0.05):
                return

    # -- the Batch API --------------------------------------------------------------------------
    def add_file(self, filename: str, purpose: str, data: bytes) -> StubFile:
        with self._lock:
            f = StubFile(f"file-stub{len(self.files) + 1:04d}", filename, purpose, data, int(time.time()))
            self.files[f.id] = f
        return f

    def create_batch(self, body: dict[str, Any]) -> StubBatch:
        with self._lock:
            b = StubBatch(
                id=f"batch_stub{len(self.batches) + 1:04d}",
                input_file_id=str(body.get("input_file_id")),
                endpoint=str(body.get("endpoint")),
                completion_window=str(body.get("completion_window")),
                metadata=body.get("metadata"),
                created_at=int(time.time()),
            )
            self.batches[b.id] = b
        return b

    def advance(self, b: StubBatch) -> None:
        """One retrieve: validating -> in_progress (``batch_polls`` retrieves) -> the final status."""
        b.retrieves += 1
        if b.status in BATCH_TERMINAL:
            return
        if b.retrieves <= self.batch_polls:
            b.status = "in_progress"
            return
        self._finish(b)

    def _finish(self, b: StubBatch) -> None:
        src = self.files.get(b.input_file_id)
        lines = [json.loads(x) for x in src.data.decode().splitlines() if x.strip()] if src else []
        b.total = len(lines)
        if src is None or any(x.get("url") != b.endpoint for x in lines):
            b.status = "failed"
            b.errors = [{"code": "invalid_request", "message": "stub: input file missing or wrong url", "line": None}]
            return
        if self.batch_final_status == "failed":
            b.status = "failed"
            b.errors = [{"code": "stub_failure", "message": "stub: the batch failed", "line": None}]
            return
        if self.batch_final_status == "expired":
            lines = lines[: self.batch_expire_after]
        out, err = [], []
        for n, line in enumerate(lines):
            req = StubRequest(
                index=n,
                method="POST",
                path=str(line.get("url")),
                headers={},
                body=line.get("body"),
                received=time.monotonic(),
            )
            with self._lock:
                self.batch_lines.append(req)
            reply = self._decide(req)
            if reply.status == 200:
                payload: dict[str, Any] = self.completion(req, reply)
                b.completed += 1
            else:
                payload = {
                    "error": {
                        "message": f"stub error {reply.status}",
                        "type": _REASONS.get(reply.status, "server_error"),
                    }
                }
                b.failed += 1
            record = {
                "id": f"batch_req_{b.id}_{n}",
                "custom_id": line.get("custom_id"),
                "response": {"status_code": reply.status, "request_id": f"req-stub-{n}", "body": payload},
                "error": None,
            }
            text = json.dumps(record)
            if self.batch_line_hook is not None:
                text = self.batch_line_hook(record, text)
            (out if reply.status == 200 else err).append(text)
        if out:
            b.output_file_id = self.add_file(
                f"{b.id}_output.jsonl", "batch_output", ("\n".join(out) + "\n").encode()
            ).id
        if err:
            b.error_file_id = self.add_file(f"{b.id}_error.jsonl", "batch_output", ("\n".join(err) + "\n").encode()).id
        b.status = self.batch_final_status

    def prefill(self, req: StubRequest) -> None:
        """The prefix-cache model (see the module docstring): count, and with
        ``prefill_s_per_token`` spend, the prompt tokens this request makes the server compute."""
        key = req.prefix_key
        media = req.media_frames * self.tokens_per_frame
        text = len(req.text) // 4 + 1
        with self._lock:
            hit = key is not None and key in self._cached
        computed = text + (0 if hit or key is None else media)
        if self.prefill_s_per_token:
            with self._gpu:
                time.sleep(computed * self.prefill_s_per_token)
        with self._lock:
            self.computed_tokens += computed
            req.cached = media if hit else 0
            self.cached_tokens += req.cached
            if key is not None and not hit:
                self.prefills[key] += 1
                self._cached.add(key)

    def completion(self, req: StubRequest, reply: Reply) -> dict[str, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        n_media = len(req.media_urls)
        prompt_tokens = len(req.text) // 4 + 64 * n_media
        if self.prefix_cache:
            prompt_tokens = len(req.text) // 4 + 1 + req.media_frames * self.tokens_per_frame
        completion_tokens = len((reply.content or reply.refusal or "").split())
        with self._lock:
            n = len(self.requests)
        return {
            "id": f"chatcmpl-stub-{req.index}-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "system_fingerprint": self.fingerprint,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content, "refusal": reply.refusal},
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                **({"prompt_tokens_details": {"cached_tokens": req.cached}} if self.prefix_cache else {}),
            },
        }


_REASONS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout",
    409: "conflict",
    429: "rate_limit_exceeded",
}


class _Handler(RecordingHandler):
    stub: OpenAIStub

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req-stub-{time.monotonic_ns()}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_bytes(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _not_found(self, what: str) -> None:
        self._send_json(404, {"error": {"message": f"no such {what}", "type": "invalid_request_error"}})

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        req = self._record(None)
        stub = self.stub
        path = self.path.split("?", 1)[0].rstrip("/")
        parts = path.split("/")
        req.status = 200
        if path.endswith("/models"):
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": self.stub.owner}
                | ({"max_model_len": self.stub.max_model_len} if self.stub.max_model_len else {})
                for m in self.stub.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        elif len(parts) >= 3 and parts[-3] == "files" and parts[-1] == "content":
            f = stub.files.get(parts[-2])
            self._send_bytes(f.data) if f is not None else self._not_found("file")
        elif len(parts) >= 2 and parts[-2] == "batches":
            b = stub.batches.get(parts[-1])
            if b is None:
                self._not_found("batch")
                return
            with stub._batch_lock:
                stub.advance(b)
            self._send_json(200, b.as_json())
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        stub = self.stub
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/files"):
            self._upload(raw)
            return
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        req = self._record(body)
        req.raw = raw
        if path.endswith("/batches") and isinstance(body, dict):
            req.status, req.completed = 200, time.monotonic()
            self._send_json(200, stub.create_batch(body).as_json())
            return
        if not path.endswith("/chat/completions"):
            req.status, req.completed = 404, time.monotonic()
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})
            return
        with stub._lock:
            stub.in_flight += 1
            stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
            ticket = stub._admitted
            stub._admitted += 1
        try:
            stub._hold(ticket)
            invalid = video_part_error(req)
            reply = Reply(status=400, content=invalid) if invalid else stub._decide(req)
            if reply.status == 200 and not reply.disconnect and stub.prefix_cache:
                stub.prefill(req)
            wait = stub.latency + reply.delay
            if wait:
                time.sleep(wait)
            if reply.disconnect:
                req.status = 0
                self.close_connection = True
                return
            if reply.status != 200:
                err = {
                    "error": {
                        "message": stub.error_text(req, invalid or f"stub error {reply.status}"),
                        "type": _REASONS.get(reply.status, "server_error"),
                        "code": reply.status,
                    }
                }
                self._send_json(reply.status, err, stub.error_headers(req, reply.headers))
            else:
                payload = stub.completion(req, reply)
                self._send_json(200, payload, reply.headers)
                with stub._lock:
                    stub.answered += 1
            req.status = reply.status
        except (BrokenPipeError, ConnectionResetError):
            req.status = -1  # the client went away (killed)
        finally:
            req.completed = time.monotonic()
            with stub._lock:
                stub.in_flight -= 1

    def _upload(self, raw: bytes) -> None:
        """``POST /files``: the SDK's multipart form (``purpose`` and ``file``)."""
        ctype = self.headers.get("Content-Type", "")
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + raw
        )
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            fields[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
        req = self._record({k: (v[0], len(v[1])) for k, v in fields.items()})
        if "file" not in fields or "purpose" not in fields:
            req.status = 400
            self._send_json(
                400, {"error": {"message": "file and purpose are required", "type": "invalid_request_error"}}
            )
            return
        filename, data = fields["file"]
        f = self.stub.add_file(filename or "upload.jsonl", fields["purpose"][1].decode(), data)
        req.status = 200
        self._send_json(200, f.as_json())


OpenAIStub.handler_class = _Handler
OpenAIStub.request_class = StubRequest
