"""run_command: exit codes, output tails, environment, timeouts and cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from amos.messages import ToolCallPart
from amos.tools import ToolContext, ToolManager, ToolOutcome, builtin_tools, child_env
from amos.tools.command import MAX_TAIL_BYTES, render_command_result

_ids = itertools.count()
PY = shlex.quote(sys.executable)


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped by init) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


LINUX = sys.platform.startswith("linux")
needs_setsid = pytest.mark.skipif(
    not LINUX or shutil.which("setsid") is None, reason="needs Linux /proc and setsid"
)


def escaping(command: str) -> str:
    """``command`` in a new session, its pid in ``esc.pid`` once it has left the group."""
    return f"setsid sh -c 'echo $$ > esc.pid; exec {command}'"


# Keeps the shell from exiting while the escape is under way (the escaping process
# would then still be a background process of the group, and stopped as such).
AWAIT_ESCAPE = "while [ ! -s esc.pid ]; do sleep 0.01; done"


def processes_with_cmdline(cmdline: bytes) -> list[int]:
    """Live (non-zombie) processes whose ``/proc/PID/cmdline`` is ``cmdline``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if handle.read() == cmdline and alive(int(name)):
                    found.append(int(name))
        except OSError:
            continue
    return found


async def wait_for_file(path: Path, timeout_s: float = 5.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text().strip())
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def make_manager(ws: Path, *, timeout_s: float = 10.0, **env: str) -> ToolManager:
    context = ToolContext(
        workspace=ws,
        command_timeout_s=timeout_s,
        env=child_env({**os.environ, **env}, ["MY_PROVIDER_KEY"]),
    )
    return ToolManager(builtin_tools(), context=context)


async def run(manager: ToolManager, command: str, **extra: object) -> ToolOutcome:
    call = ToolCallPart(
        call_id=f"c{next(_ids)}", tool_name="run_command", arguments={"command": command, **extra}
    )
    return await manager.execute(call, "exec-1")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


def test_child_env_drops_provider_keys() -> None:
    base = {
        "PATH": "/bin",
        "OPENAI_API_KEY": "a",
        "ANTHROPIC_API_KEY": "b",
        "GEMINI_API_KEY": "c",
        "GOOGLE_API_KEY": "d",
        "CUSTOM_KEY": "e",
    }
    assert child_env(base, ["CUSTOM_KEY", None]) == {"PATH": "/bin"}  # type: ignore[list-item]
    assert child_env(base, [])["CUSTOM_KEY"] == "e"
    assert "OPENAI_API_KEY" in base


async def test_nonzero_exit_is_a_succeeded_execution(ws: Path) -> None:
    outcome = await run(make_manager(ws), "echo out; echo err >&2; exit 3")
    assert outcome.status == "succeeded"
    assert outcome.result == {
        "exit_code": 3,
        "stdout": "out\n",
        "stderr": "err\n",
        "timed_out": False,
    }
    assert outcome.content == "exit code: 3\n--- stdout ---\nout\n--- stderr ---\nerr\n"


async def test_runs_in_workspace_with_closed_stdin(ws: Path) -> None:
    outcome = await run(make_manager(ws), "pwd; cat; echo done")
    assert outcome.result["exit_code"] == 0
    assert outcome.result["stdout"] == f"{ws}\ndone\n"


async def test_environment_has_no_provider_keys(ws: Path) -> None:
    manager = make_manager(
        ws, OPENAI_API_KEY="sk-test-openai", MY_PROVIDER_KEY="sk-test-custom", AMOS_MARKER="kept"
    )
    outcome = await run(manager, "env")
    stdout = outcome.result["stdout"]
    assert "AMOS_MARKER=kept" in stdout
    assert "OPENAI_API_KEY" not in stdout and "sk-test-openai" not in stdout
    assert "MY_PROVIDER_KEY" not in stdout and "sk-test-custom" not in stdout


async def test_killed_by_signal_is_rendered() -> None:
    text = render_command_result({"exit_code": -9, "stdout": "", "stderr": "", "timed_out": False})
    assert text.startswith("exit code: -9 (killed by SIGKILL)")
    assert "--- stdout ---\n(empty)" in text


async def test_long_output_keeps_the_tail_with_a_note(ws: Path) -> None:
    command = f"{PY} -c \"import sys; sys.stdout.write('a' * 100000 + 'THE-END')\""
    outcome = await run(make_manager(ws), command)
    stdout = outcome.result["stdout"]
    assert stdout.startswith("[… ")
    assert "bytes cut; showing the last" in stdout
    assert stdout.endswith("THE-END")
    assert len(stdout.encode()) < 40_000
    assert outcome.cut_bytes == 0  # the tails fit the model cap


async def test_timeout_kills_the_whole_process_group(ws: Path) -> None:
    manager = make_manager(ws, timeout_s=0.5)
    command = "echo before; sh -c 'sleep 60 & echo $! > grandchild.pid; wait'"
    started = time.monotonic()
    outcome = await run(manager, command, timeout_s=30)  # capped by the config limit
    assert time.monotonic() - started < 4
    assert outcome.status == "timed_out"
    assert outcome.completion == "unknown"
    assert "timed out after 0.5 s" in outcome.error
    assert "before" in outcome.content
    pid = int((ws / "grandchild.pid").read_text())
    assert not alive(pid)


async def test_own_timeout_shorter_than_config(ws: Path) -> None:
    outcome = await run(make_manager(ws), "sleep 20", timeout_s=0.3)
    assert outcome.status == "timed_out"
    assert "0.3 s" in outcome.error


async def test_cancellation_kills_the_group_and_reraises(ws: Path) -> None:
    manager = make_manager(ws)
    command = "echo $$ > shell.pid; sh -c 'sleep 100 & echo $! > grandchild.pid; sleep 100'"
    task = asyncio.create_task(run(manager, command))
    shell = await wait_for_file(ws / "shell.pid")
    grandchild = await wait_for_file(ws / "grandchild.pid")
    assert alive(shell) and alive(grandchild)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 3
    assert not alive(shell)
    assert not alive(grandchild)


async def test_background_processes_are_stopped_when_the_command_exits(ws: Path) -> None:
    started = time.monotonic()
    outcome = await run(make_manager(ws), "sleep 60 & echo $! > bg.pid; echo started")
    assert time.monotonic() - started < 3
    assert outcome.status == "succeeded"
    assert outcome.result["stdout"] == "started\n"
    assert "background processes" in outcome.result["stderr"]
    assert not alive(int((ws / "bg.pid").read_text()))


async def test_invalid_timeout_is_an_argument_error(ws: Path) -> None:
    outcome = await run(make_manager(ws), "true", timeout_s=0)
    assert outcome.status == "failed"
    assert "timeout_s" in outcome.error


async def test_processes_ignoring_sigterm_are_killed(ws: Path) -> None:
    command = "trap '' TERM; sleep 60 & echo $! > stubborn.pid; wait"
    started = time.monotonic()
    outcome = await run(make_manager(ws, timeout_s=0.3), command)
    assert outcome.status == "timed_out"
    assert time.monotonic() - started < 4
    assert not alive(int((ws / "stubborn.pid").read_text()))


@needs_setsid
async def test_a_process_in_a_new_session_is_stopped_when_the_command_exits(ws: Path) -> None:
    started = time.monotonic()
    outcome = await run(make_manager(ws), f"{escaping('sleep 60')} & {AWAIT_ESCAPE}; echo s3")
    assert time.monotonic() - started < 4
    assert outcome.status == "succeeded"
    assert outcome.result["exit_code"] == 0
    assert outcome.result["stdout"] == "s3\n"
    assert "outside its process group" in outcome.result["stderr"]
    assert "background processes" not in outcome.result["stderr"]
    assert not alive(int((ws / "esc.pid").read_text()))


@needs_setsid
async def test_a_process_in_a_new_session_is_stopped_on_timeout(ws: Path) -> None:
    command = "setsid sh -c 'echo $$ > esc.pid; exec sleep 60' & echo before; sleep 60"
    started = time.monotonic()
    outcome = await run(make_manager(ws, timeout_s=0.5), command)
    assert time.monotonic() - started < 5
    assert outcome.status == "timed_out"
    assert "before" in outcome.content
    assert not alive(int((ws / "esc.pid").read_text()))


@needs_setsid
@pytest.mark.parametrize(
    ("redirect", "may_survive"),
    [
        ("", False),
        # It left the group and the pipes: not found, it may survive (not a sandbox).
        (" >/dev/null 2>&1", True),
    ],
)
def test_setsid_through_the_cli_leaves_no_process_and_no_transport_warning(
    tmp_path: Path, redirect: str, may_survive: bool
) -> None:
    duration = f"59.{secrets.randbelow(10**6):06d}"  # a command line no other test uses
    command = f"setsid sleep {duration}{redirect} & echo s3"
    script = {
        "version": 1,
        "turns": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]},
            {"text": "done"},
        ],
    }
    (tmp_path / "s.json").write_text(json.dumps(script))
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    argv = [sys.executable, "-m", "amos", "run", "--yes", "--json"]
    argv += ["--script", str(tmp_path / "s.json"), "--workspace", str(ws), "hi"]
    try:
        done = subprocess.run(
            argv,
            env={**os.environ, "AMOS_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "Exception ignored" not in done.stderr
        assert "Event loop is closed" not in done.stderr
        assert "Traceback" not in done.stderr
        assert json.loads(done.stdout)["output_text"] == "done"
        if not may_survive:
            assert processes_with_cmdline(f"sleep\0{duration}\0".encode()) == []
    finally:
        for pid in processes_with_cmdline(f"sleep\0{duration}\0".encode()):
            os.kill(pid, 9)


async def test_huge_output_keeps_memory_bounded_and_the_tail_exact(ws: Path) -> None:
    total = 50_000_000
    command = f"yes | head -c {total}; yes e | head -c {total} >&2"
    tracemalloc.start()
    try:
        outcome = await run(make_manager(ws, timeout_s=60), command)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4_000_000
    assert outcome.status == "succeeded"
    for stream, line in (("stdout", "y\n"), ("stderr", "e\n")):
        match = re.fullmatch(
            r"\[… (\d+) bytes cut; showing the last (\d+) bytes …\]\n(.*)",
            outcome.result[stream],
            re.DOTALL,
        )
        assert match is not None
        cut, shown, text = int(match[1]), int(match[2]), match[3]
        assert cut + shown == total
        assert 1024 <= shown <= MAX_TAIL_BYTES
        assert text == line * (shown // 2)


async def test_writing_to_the_own_streams_by_name_keeps_earlier_output(ws: Path) -> None:
    command = (
        "printf 'first\\n'; echo early >&2; echo second > /dev/stderr;"
        " echo third > /dev/stdout; echo last"
    )
    outcome = await run(make_manager(ws), command)
    assert outcome.status == "succeeded"
    assert outcome.result["stdout"] == "first\nthird\nlast\n"
    assert outcome.result["stderr"] == "early\nsecond\n"


@needs_setsid
async def test_a_new_session_without_the_pipes_is_no_error(ws: Path) -> None:
    command = f"{escaping('sleep 60')} >/dev/null 2>&1 & {AWAIT_ESCAPE}; echo ok"
    started = time.monotonic()
    try:
        outcome = await run(make_manager(ws), command)
        assert time.monotonic() - started < 3  # nothing holds the pipes: no drain wait
        assert outcome.status == "succeeded"
        assert outcome.result == {
            "exit_code": 0,
            "stdout": "ok\n",
            "stderr": "",
            "timed_out": False,
        }
    finally:
        # run_command is not a sandbox: a process that left the group and the pipes
        # may survive the call.
        with contextlib.suppress(ProcessLookupError, ValueError, FileNotFoundError):
            os.kill(int((ws / "esc.pid").read_text()), 9)


def open_subprocess_transports() -> list[object]:
    gc.collect()
    return [
        obj
        for obj in gc.get_objects()
        if isinstance(obj, asyncio.SubprocessTransport) and not obj.is_closing()
    ]


@needs_setsid
async def test_no_subprocess_transport_outlives_the_call(ws: Path) -> None:
    assert open_subprocess_transports() == []
    manager = make_manager(ws, timeout_s=0.5)
    await run(manager, "echo plain")
    await run(manager, "setsid sleep 60 & echo $! > esc.pid; echo s3")
    await run(manager, "sleep 60")  # times out
    task = asyncio.create_task(run(manager, "echo $$ > shell.pid; sleep 60", timeout_s=0.4))
    await wait_for_file(ws / "shell.pid")
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert open_subprocess_transports() == []
    assert not alive(int((ws / "esc.pid").read_text()))
