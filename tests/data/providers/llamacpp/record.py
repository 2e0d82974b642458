"""A recording proxy for OpenAI-compatible servers (how the fixtures beside it were made).

Sits between amos (or any client) and a real server on 127.0.0.1, forwards every
request unchanged and streams every response back as it arrives, while saving one
exchange per request under ``--out``:

- ``LABEL_N.request.json``: the request body exactly as the client sent it
  (pretty-printed; no headers are kept, so no key can be recorded);
- ``LABEL_N.response.sse`` or ``LABEL_N.response.json``: the raw response body bytes;
- ``exchanges.json``: an index, one entry per exchange: method, path, status,
  content type, bytes, seconds to the first and last byte, and the label.

``--override JSON`` merges keys into every JSON request body before it is forwarded
(e.g. ``{"temperature": 0, "repeat_penalty": 1.0}`` to make a small model's runaway loop
reproducible); the saved request is the body as forwarded, and the index names the keys.

``--cut-after BYTES`` closes the client's connection once that many response bytes
were forwarded (a stream cut mid-way, as a dropped network or a killed server does);
what was sent before the cut is what is saved.

Usage (stdlib only, Python 3.10+)::

    python record.py --upstream http://127.0.0.1:8081 --port 8090 --out /tmp/rec --label tool_roundtrip
    amos run --model openai-compatible:smollm2 --base-url http://127.0.0.1:8090/v1 ...

Nothing here is imported by the tests.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
                "proxy-connection", "te", "trailer", "upgrade"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="real server, e.g. http://127.0.0.1:8081")
    parser.add_argument("--port", type=int, default=8090, help="port to listen on (127.0.0.1)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the recordings")
    parser.add_argument("--label", default="exchange", help="file name prefix of this recording")
    parser.add_argument("--override", type=json.loads, default=None,
                        help="JSON object merged into each JSON request body before forwarding")
    parser.add_argument("--cut-after", type=int, default=None,
                        help="close the client's connection after this many response bytes")
    args = parser.parse_args()
    target = urlsplit(args.upstream)
    if target.hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("--upstream must be a loopback address")
    args.out.mkdir(parents=True, exist_ok=True)
    index_path = args.out / "exchanges.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else []
    lock = threading.Lock()
    counter = {"n": sum(1 for e in index if e.get("label") == args.label)}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *a: object) -> None:
            print(f"record: {fmt % a}", flush=True)

        def _proxy(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            with lock:
                counter["n"] += 1
                name = f"{args.label}_{counter['n']}"
            if args.override and body:
                body = json.dumps({**json.loads(body), **args.override}).encode()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
            upstream = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=900)
            started = time.monotonic()
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            content_type = response.getheader("content-type", "")
            self.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_HEADERS:
                    self.send_header(key, value)
            streaming = "text/event-stream" in content_type
            if streaming:
                self.send_header("transfer-encoding", "chunked")
            received = bytearray()
            first = last = None
            cut = False
            if not streaming:
                data = response.read()
                first = last = time.monotonic()
                self.send_header("content-length", str(len(data)))  # the whole length, even when cut
                self.end_headers()
                if args.cut_after is not None and len(data) > args.cut_after:
                    data, cut = data[:args.cut_after], True
                received += data
                self.wfile.write(data)
            else:
                self.end_headers()
                while True:
                    piece = response.read1(65536) if hasattr(response, "read1") else response.read(1024)
                    if not piece:
                        break
                    now = time.monotonic()
                    first = first or now
                    last = now
                    if args.cut_after is not None and len(received) + len(piece) >= args.cut_after:
                        piece = piece[:args.cut_after - len(received)]
                        cut = True
                    received += piece
                    if piece:
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                    if cut:
                        break
                if not cut:
                    self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            if cut:
                self.close_connection = True
                self.connection.shutdown(2)
            upstream.close()
            suffix = ".sse" if streaming else ".json"
            if body:
                try:
                    text = json.dumps(json.loads(body), indent=2, ensure_ascii=False) + "\n"
                except ValueError:
                    text = body.decode("utf-8", "replace")
                (args.out / f"{name}.request.json").write_text(text, encoding="utf-8")
            (args.out / f"{name}.response{suffix}").write_bytes(bytes(received))
            entry = {
                "name": name, "label": args.label, "method": self.command, "path": self.path,
                "status": response.status, "content_type": content_type, "bytes": len(received),
                "first_byte_s": round((first or started) - started, 3),
                "last_byte_s": round((last or started) - started, 3), "cut": cut,
                "override": sorted(args.override) if args.override and body else None,
            }
            with lock:
                index.append(entry)
                index_path.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
            print(f"record: saved {name} ({response.status}, {len(received)} bytes{', cut' if cut else ''})",
                  flush=True)

        do_GET = _proxy
        do_POST = _proxy

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"record: listening on http://127.0.0.1:{args.port} -> {args.upstream}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
