"""Secrets and terminal control on every path text takes (issue 17, items 1, 2 and 4a):
a key split across streamed deltas never shows, slash-command arguments are masked
before they reach the session, and model text cannot drive the terminal."""

from __future__ import annotations

import asyncio
import base64
import json

from amos.engine import RunOptions, open_host
from amos.events import TextDelta
from tests.support import cli, cli_json, write_script
from tests.test_provider_openai_cli import chunk, sse
from tests.wire_server import WireServer

KEY = "sk-proj-STREAMED-SECRET-0123456789abcdef"


def test_a_key_split_between_streamed_deltas_never_reaches_an_event(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ws = tmp_path / "ws"
    ws.mkdir()
    text = f"the key is {KEY} and again {base64.b64encode(KEY.encode()).decode()} done"
    pieces = [text[i:i + 5] for i in range(0, len(text), 5)]  # every boundary cuts the key somewhere
    with WireServer() as server:
        server.reply(200, sse(chunk({"role": "assistant", "content": ""}),
                              *[chunk({"content": p}) for p in pieces], chunk({}, "stop")), sse=True)
        host, _ = open_host(RunOptions(model="openai-compatible:m", base_url=f"{server.url}/v1", workspace=ws,
                                       cwd=ws, no_save=True))

        async def go():
            return [e async for e in host.run("tell me")]

        try:
            events = asyncio.run(go())
        finally:
            host.close()
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    shown = "".join(deltas)
    assert len(deltas) > 3 and KEY not in shown and "[REDACTED]" in shown
    assert all(KEY[:12] not in d for d in deltas)
    assert events[-1].output_text == shown  # what was streamed is what was kept
    assert base64.b64encode(KEY.encode()).decode()[:20] not in shown


def test_slash_command_arguments_are_masked_before_they_enter_the_session(tmp_path, monkeypatch, amos_home):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"task_state": {"enabled": True}}))
    script = write_script(tmp_path, [{"text": "hi"}], on_exhausted="repeat_last")
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "hello")
    sid = doc["session_id"]
    code, doc = cli_json("run", "--session", sid, "--config", str(cfg),
                         f"/context task add 0 constraint c1 the deploy key is {KEY}")
    assert code == 0, doc
    named = cli("run", "--session", sid, "--config", str(cfg), f"/session save {KEY}")
    assert named.exit_code == 2 and KEY not in named.stderr
    code, doc = cli_json("run", "--session", sid, "--config", str(cfg), "/verify echo " + KEY)
    listing = cli("sessions", "list", "--config", str(cfg))
    assert KEY not in listing.stdout
    for path in [*amos_home.rglob("*"), *tmp_path.rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_model_text_cannot_drive_the_terminal_on_stdout_or_in_a_pipe(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    hostile = ("clipboard \x1b]52;c;ZXZpbA==\x07 title \x1b]0;pwned\x07 link \x1b]8;;http://x\x1b\\here\x1b]8;;\x1b\\ "
               "clear \x1b[2J bidi \u202eevil\u202c csi \x9b31m end")
    script = write_script(tmp_path, [{"text": hostile}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "go")
    assert result.exit_code == 0
    for raw in ("\x1b", "\x07", "\u202e", "\u202c", "\x9b"):
        assert raw not in result.stdout and raw not in result.stderr
    assert "\\x1b]52" in result.stdout and "\\u202e" in result.stdout


def test_a_worker_thread_stuck_after_a_cancel_never_keeps_amos_alive():
    """Issue 17, item 8: the receipt is printed and the process exits, whatever a thread does."""
    import subprocess
    import sys
    import time

    code = ("import asyncio, time\n"
            "from amos import aio\n"
            "from amos.__main__ import _leave\n"
            "async def main():\n"
            "    stuck = asyncio.ensure_future(asyncio.to_thread(time.sleep, 60))\n"
            "    await asyncio.sleep(0.2)\n"
            "    stuck.cancel()\n"
            "aio.run(main())\n"
            "print('receipt printed', flush=True)\n"
            "_leave(3)\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "receipt printed" and done.returncode == 3
    assert time.monotonic() - started < 15
