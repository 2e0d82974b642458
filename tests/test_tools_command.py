"""run_command: exit codes, output tails, environment, timeouts and cancellation."""

from __future__ import annotations

import asyncio
import itertools
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from amos.messages import ToolCallPart
from amos.tools import ToolContext, ToolManager, ToolOutcome, builtin_tools, child_env
from amos.tools.command import render_command_result

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
