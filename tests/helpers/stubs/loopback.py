"""The HTTP server scaffolding every stub shares: 127.0.0.1 only, a random free port, served
from a daemon thread, usable as a context manager. A stub subclass sets ``handler_class`` (a
``BaseHTTPRequestHandler`` whose ``stub`` attribute is set to the stub) and ``base_url``."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypeVar

LOOPBACK = "127.0.0.1"

S = TypeVar("S", bound="LoopbackServer")


@dataclass
class RecordedRequest:
    """What a stub received, and what it did with it (stubs subclass it to add readers)."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received: float
    status: int | None = None
    completed: float | None = None


class RecordingHandler(BaseHTTPRequestHandler):
    """Quiet HTTP/1.1 handler that appends each request to ``stub.requests`` under ``stub._lock``."""

    stub: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        pass

    def _record(self, body: Any) -> Any:
        stub = self.stub
        with stub._lock:
            req = stub.request_class(
                index=len(stub.requests),
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                received=time.monotonic(),
            )
            stub.requests.append(req)
        return req


class LoopbackServer:
    handler_class: ClassVar[type[BaseHTTPRequestHandler]]
    request_class: ClassVar[type[RecordedRequest]] = RecordedRequest

    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self: S) -> S:
        handler = type("Handler", (self.handler_class,), {"stub": self})
        server = ThreadingHTTPServer((LOOPBACK, 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def before_stop(self) -> None:
        """Hook: release anything requests may be blocked on."""

    def stop(self) -> None:
        self.before_stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "stub not started"
        return self._server.server_address[1]

    @property
    def host(self) -> str:
        assert self._server is not None, "stub not started"
        return self._server.server_address[0]
