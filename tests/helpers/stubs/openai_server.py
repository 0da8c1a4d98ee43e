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
* ``models``: the ids ``GET /v1/models`` lists.

Header names are recorded lower-cased.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
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
        """The URLs of the image and video parts, in order."""
        out = []
        for p in self.content:
            kind = p.get("type")
            if kind in ("image_url", "video_url"):
                out.append(p[kind]["url"])
        return out

    @property
    def signature(self) -> str:
        """Identifies the question asked: a hash of the media and the text."""
        h = hashlib.sha256()
        for url in self.media_urls:
            h.update(hashlib.sha256(url.encode()).digest())
        h.update(self.text.encode())
        return h.hexdigest()[:16]


Responder = Callable[[StubRequest], "str | Reply | None"]


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
    ) -> None:
        self.responder = responder
        self.statuses = list(statuses)
        self.retry_after = retry_after
        self.refusal = refusal
        self.empty = empty
        self.latency = latency
        self.hold_after = hold_after
        self.fingerprint = fingerprint
        self.models = list(models)
        self.requests: list[StubRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.answered = 0  # 200 replies sent
        self._admitted = 0  # chat requests that arrived (hold_after counts these)
        self._lock = threading.Lock()
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

    def completion(self, req: StubRequest, reply: Reply) -> dict[str, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        n_media = len(req.media_urls)
        prompt_tokens = len(req.text) // 4 + 64 * n_media
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

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self._record(None)
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in self.stub.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        stub = self.stub
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        req = self._record(body)
        req.raw = raw
        if not self.path.rstrip("/").endswith("/chat/completions"):
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
            reply = stub._decide(req)
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
                        "message": f"stub error {reply.status}",
                        "type": _REASONS.get(reply.status, "server_error"),
                        "code": reply.status,
                    }
                }
                self._send_json(reply.status, err, reply.headers)
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


OpenAIStub.handler_class = _Handler
OpenAIStub.request_class = StubRequest
