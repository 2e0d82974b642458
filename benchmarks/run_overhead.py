"""amos's own overhead per ``amos run`` against an OpenAI-compatible server (issue 23).

A local stub server on 127.0.0.1 answers every chat completion at once with a two-chunk
stream, so what is measured is amos alone: for ``amos run --json`` with
``--model openai-compatible:m`` it prints the medians of

- **to request**: process start until the request reached the server (Python start-up,
  imports, config, session, host), seconds;
- **after**: the rest of the wall time (the answer, the receipt, the session save, exit);
- **CPU**: user + system CPU seconds of the process (steadier than wall time on a busy
  machine);

for two set-ups: bytecode cached (what an installed amos has) and bytecode never cached
(``PYTHONDONTWRITEBYTECODE=1`` with an empty ``PYTHONPYCACHEPREFIX``: every module of
amos compiled from source on each run, as in an environment that forbids writing
``__pycache__``). Then one ``python -X importtime`` run splits the import time by
package: the OpenAI SDK (``openai`` and its HTTP stack) is most of it.

Usage: python benchmarks/run_overhead.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SDK = {"openai", "httpx2", "httpcore2", "anyio", "h11", "sniffio", "distro", "jiter", "certifi", "idna", "ssl",
       "_ssl", "email", "http", "urllib"}
"""Top-level packages counted as the OpenAI SDK and the HTTP stack it brings."""


def _chunk(delta: dict, finish: str | None = None) -> str:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n"


STREAM = (_chunk({"role": "assistant", "content": "Hi."}) + _chunk({}, "stop") + "data: [DONE]\n\n").encode()


class Stub:
    """A chat-completions server that notes when each POST arrived (``time.time()``)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._send(404, b'{"detail": "Not Found"}', "application/json")

            def do_POST(self) -> None:  # noqa: N802
                stub.arrivals.append(time.time())
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self._send(200, STREAM, "text/event-stream")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def one_run(argv: list[str], env: dict[str, str], stub: Stub) -> dict[str, float]:
    """Run ``amos run`` once; its wall, to-request and CPU seconds."""
    before = len(stub.arrivals)
    started = time.time()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - started
    if os.waitstatus_to_exitcode(status) != 0 or len(stub.arrivals) == before:
        raise SystemExit(f"amos run failed (exit {os.waitstatus_to_exitcode(status)}): {' '.join(argv)}")
    to_request = stub.arrivals[before] - started
    return {"wall": wall, "to_request": to_request, "after": wall - to_request,
            "cpu": usage.ru_utime + usage.ru_stime}


def import_split(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """Self import time by group (seconds) from one ``-X importtime`` run."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True)
    groups: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \| \s*(\S+)", line)
        if not match:
            continue
        top = match.group(2).split(".")[0]
        group = "amos" if top == "amos" else "OpenAI SDK + HTTP" if top in SDK else \
            "typer, pydantic" if top in {"typer", "pydantic", "pydantic_core", "annotated_types"} else "the rest"
        groups[group] = groups.get(group, 0.0) + int(match.group(1)) / 1e6
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per set-up (medians printed)")
    args = parser.parse_args()
    stub = Stub()
    root = Path(tempfile.mkdtemp(prefix="amos-overhead-"))
    (root / "ws").mkdir()
    (root / "c.json").write_text(json.dumps({"providers": {"openai-compatible": {"max_retries": 0}}}))
    argv = [sys.executable, "-m", "amos.cli", "run", "--config", str(root / "c.json"), "--model",
            "openai-compatible:m", "--base-url", f"http://127.0.0.1:{stub.port}/v1", "--workspace",
            str(root / "ws"), "--json", "hi"]
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    base["AMOS_HOME"] = str(root / "home")
    setups = {
        "bytecode cached": base,
        "never cached": {**base, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(root / "no-pyc")},
    }
    print(f"amos run --json against a stub OpenAI-compatible server, median of {args.runs} runs (seconds)")
    print(f"{'set-up':<16} {'wall':>6} {'to request':>10} {'after':>6} {'CPU':>6}")
    for name, env in setups.items():
        one_run(argv, env, stub)  # warm-up: caches bytecode where allowed, and the file system
        runs = [one_run(argv, env, stub) for _ in range(args.runs)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{name:<16} {med['wall']:>6.2f} {med['to_request']:>10.2f} {med['after']:>6.2f} {med['cpu']:>6.2f}")
    split = import_split(argv, base)
    total = sum(split.values())
    print(f"\nimport time (bytecode cached, one -X importtime run; inflates the figures): {total:.2f} s")
    for group, seconds in sorted(split.items(), key=lambda item: -item[1]):
        print(f"  {group:<18} {seconds:5.2f} s  {100 * seconds / total:4.0f}%")
    stub.server.shutdown()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
