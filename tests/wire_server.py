"""A tiny HTTP server on 127.0.0.1 that replays recorded provider responses.

Used by provider tests that run the real ``amos`` CLI with ``--base-url`` (the SDK
clients then speak real HTTP to this server). Each queued reply is served once, in
order; every request is recorded (method, path, headers, decoded JSON body).

Example::

    with WireServer() as server:
        server.reply(200, FIXTURES / "anthropic/response_turn1_tool_use.sse", sse=True)
        server.reply(200, FIXTURES / "anthropic/response_turn2_text.sse", sse=True)
        code, out = cli_json("run", "--model", "anthropic:m", "--base-url", server.url, "hi")
        assert server.requests[1].json["messages"][-1]["role"] == "user"
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "data" / "providers"


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    """One canned reply."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    byte_by_byte: bool = False
    cut: bool = False
    """Send the body as one HTTP chunk and close without the last chunk (a stream cut mid-way)."""
    hold_s: float = 0.0
    """With ``cut``: keep the connection open this long before closing it (a stream that stalls)."""
    event_delay_s: float = 0.0
    """Pause this long after each SSE event (``\n\n``-separated): a server generating at a pace."""


class WireServer:
    """Replays queued replies over real HTTP on an ephemeral loopback port."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self.route: Any = None
        """Optional ``(Recorded) -> Reply | None`` asked before the queue (a validating replay)."""
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with server._lock:
                    recorded = Recorded(self.command, self.path, dict(self.headers.items()), body)
                    server.requests.append(recorded)
                    reply = server.route(recorded) if server.route is not None else None
                    if reply is None:
                        reply = server.replies.pop(0) if server.replies else Reply(
                            500, b'{"error": {"message": "wire server: no reply queued", "type": "server_error"}}',
                            {"content-type": "application/json"})
                self.send_response(reply.status)
                headers = {"content-type": "application/json", **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                if reply.cut:
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    self.wfile.write(f"{len(reply.body):x}\r\n".encode() + reply.body + b"\r\n")
                    self.wfile.flush()
                    if reply.hold_s:
                        time.sleep(reply.hold_s)
                    self.close_connection = True
                    return
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                if reply.event_delay_s:
                    events = reply.body.split(b"\n\n")
                    for n, event in enumerate(events):
                        self.wfile.write(event + (b"\n\n" if n < len(events) - 1 else b""))
                        self.wfile.flush()
                        time.sleep(reply.event_delay_s)
                elif reply.byte_by_byte:
                    for i in range(len(reply.body)):
                        self.wfile.write(reply.body[i:i + 1])
                        self.wfile.flush()
                else:
                    self.wfile.write(reply.body)
                self.wfile.flush()

            do_POST = _handle
            do_GET = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (append the API's base path as the SDK expects)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(
        self,
        status: int,
        body: bytes | str | Path | dict,
        *,
        sse: bool = False,
        headers: dict[str, str] | None = None,
        byte_by_byte: bool = False,
        cut: bool = False,
    ) -> None:
        """Queue one reply: a fixture path, raw text/bytes, or a JSON-able dict."""
        if isinstance(body, Path):
            data = body.read_bytes()
        elif isinstance(body, dict):
            data = json.dumps(body).encode()
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = body
        merged = {"content-type": "text/event-stream"} if sse else {}
        merged.update(headers or {})
        self.replies.append(Reply(status, data, merged, byte_by_byte, cut))

    def __enter__(self) -> WireServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def wait_for(predicate: Any, timeout_s: float = 5.0) -> bool:
    """Poll ``predicate`` until true or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False
