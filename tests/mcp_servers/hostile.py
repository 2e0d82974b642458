"""A small, deliberately badly behaved MCP server speaking raw JSON-RPC over stdio.

Usage: ``python hostile.py MODE [STATE_DIR]``. It answers ``initialize``, ``tools/list``
and ``tools/call`` (tool ``poke``, or ``$HOSTILE_TOOL``) and misbehaves according to MODE:

- ``exit``: writes to stderr and exits 3 before answering anything;
- ``crash``: exits in the middle of every ``tools/call``;
- ``crash_once``: exits in the middle of the first ``tools/call`` only (STATE_DIR remembers);
- ``hang``: never answers a ``tools/call`` (it still exits when its stdin closes);
- ``big``: answers ``poke`` with 5 MB of text;
- ``badschema``: lists a tool with an invalid input schema next to a good one;
- ``garbage``: prints lines that are not JSON-RPC on stdout, before every answer;
- ``env``: answers ``poke`` with its environment as JSON;
- ``spawn``: starts a ``sleep`` grandchild and writes both pids to STATE_DIR/pids;
- ``error``: answers ``poke`` with an ``isError`` result;
- ``mute``: reads but never answers anything (not even ``initialize``);
- ``idle_exit_once``: exits right after listing its tools, the first time only (STATE_DIR);
- ``ok``: behaves.
"""

import json
import os
import subprocess
import sys
import threading
import time

MODE = sys.argv[1]
STATE = sys.argv[2] if len(sys.argv) > 2 else None


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def tools():
    poke = {"name": os.environ.get("HOSTILE_TOOL", "poke"), "description": "Poke the server.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
    if MODE == "badschema":
        broken = {"type": "object", "properties": {"when": {"type": "timestamp"}}}
        return [{"name": "broken", "inputSchema": broken}, poke]
    return [poke]


def call(mid, params):
    if MODE == "crash" or (MODE == "crash_once" and not os.path.exists(os.path.join(STATE, "crashed"))):
        if STATE:
            open(os.path.join(STATE, "crashed"), "w").close()
        sys.stderr.write("hostile: crashing mid-call\n")
        sys.stderr.flush()
        os._exit(9)
    if MODE == "hang":
        return
    if MODE == "big":
        text = "x" * (5 * 1024 * 1024)
    elif MODE == "env":
        text = json.dumps(dict(os.environ))
    else:
        text = "poked: " + str((params.get("arguments") or {}).get("text", ""))
    result = {"content": [{"type": "text", "text": text}]}
    if MODE == "error":
        result = {"content": [{"type": "text", "text": "the poke went wrong"}], "isError": True}
    send({"jsonrpc": "2.0", "id": mid, "result": result})


def main():
    if MODE == "exit":
        sys.stderr.write("hostile: missing configuration, giving up\n")
        sys.exit(3)
    if MODE == "spawn":
        child = subprocess.Popen(["sleep", "300"])
        with open(os.path.join(STATE, "pids"), "w") as handle:
            handle.write(f"{os.getpid()} {child.pid}\n")
    if MODE == "env" and os.environ.get("MY_TOKEN"):  # a server that logs its token, plain and encoded
        import base64

        token = os.environ["MY_TOKEN"]
        sys.stderr.write(f"hostile: starting with token={token} ({base64.b64encode(token.encode()).decode()})\n")
        sys.stderr.flush()
    if MODE == "garbage":
        sys.stdout.write("Welcome to the hostile server!\n")
        sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        mid, method = msg.get("id"), msg.get("method")
        if MODE == "garbage":
            sys.stdout.write("debug: got " + str(method) + "\n")
            sys.stdout.flush()
        if mid is None:
            continue
        if method == "initialize" and MODE != "mute":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-" + MODE, "version": "1"}}})
        elif MODE == "mute":
            continue
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools()}})
            marker = os.path.join(STATE or ".", "exited-idle")
            if MODE == "idle_exit_once" and not os.path.exists(marker):
                open(marker, "w").close()
                threading.Timer(0.05, os._exit, (0,)).start()
        elif method == "tools/call":
            if MODE == "hang":
                threading.Thread(target=_exit_on_eof, daemon=True).start()
                time.sleep(3600)
            call(mid, msg.get("params") or {})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})


def _exit_on_eof():
    for _ in sys.stdin:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
