"""The command sandbox with the real bubblewrap (issue 19, "What it must show").

Every test here starts real ``bwrap`` processes; they skip, with the probe's reason,
only where the sandbox cannot run (no bwrap, no user namespaces). Paths meant to be
visible inside the sandbox live under /var/tmp, because the sandbox replaces /tmp.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from amos.config import AmosConfig
from amos.messages import ToolCallPart
from amos.sandbox import SandboxLauncher, SandboxPolicy, probe_sandbox, sandbox_policy
from amos.tools import (
    ToolContext,
    ToolManager,
    ToolOutcome,
    builtin_tools,
    child_env,
    escalation_justification,
    sandbox_use,
    wants_unsandboxed,
)
from amos.tools.command import SandboxedRunCommandArgs

PY = shlex.quote(sys.executable)
REPO = Path(__file__).resolve().parents[1]
CHILD = REPO / "tests" / "sandbox_child.py"
_ids = itertools.count()


@pytest.fixture(scope="module", autouse=True)
def _needs_bwrap() -> None:
    probe = probe_sandbox()
    if not probe.available:
        pytest.skip(probe.message)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


def manager(ws: Path, policy: SandboxPolicy | None, *, env: dict[str, str] | None = None,
            timeout_s: float = 10.0, approved: bool = False) -> ToolManager:
    launcher = SandboxLauncher(policy) if policy is not None else None
    context = ToolContext(
        workspace=ws,
        command_timeout_s=timeout_s,
        env=child_env(env if env is not None else dict(os.environ), []),
        sandbox=launcher,
        sandbox_escalation_approved=approved,
    )
    return ToolManager(builtin_tools(sandboxed=True), context=context)


async def run(mgr: ToolManager, command: str, **extra: object) -> ToolOutcome:
    call = ToolCallPart(call_id=f"s{next(_ids)}", tool_name="run_command",
                        arguments={"command": command, **extra})
    return await mgr.execute(call, "exec-1")


def processes_with_cmdline(cmdline: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if handle.read() != cmdline:
                    continue
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        if stat[stat.rindex(b")") + 2:].split()[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def gone(cmdline: bytes, timeout_s: float = 5.0) -> bool:
    """True once no live process has ``cmdline`` (polling: the namespace dies just after bwrap)."""
    deadline = time.monotonic() + timeout_s
    while processes_with_cmdline(cmdline):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def unique_sleep() -> tuple[str, bytes]:
    duration = f"59.{os.getpid() % 1000:03d}{next(_ids) % 1000:03d}{time.monotonic_ns() % 1000:03d}"
    return f"sleep {duration}", f"sleep\0{duration}\0".encode()


WW = SandboxPolicy("workspace-write")
RO = SandboxPolicy("read-only")


# --------------------------------------------------------------------------- writes


async def test_writes_inside_the_workspace_succeed(ws: Path) -> None:
    outcome = await run(manager(ws, WW), "echo hi > made.txt && mkdir -p sub && cat made.txt")
    assert outcome.result["exit_code"] == 0, outcome.result
    assert outcome.result["stdout"] == "hi\n"
    assert (ws / "made.txt").read_text() == "hi\n" and (ws / "sub").is_dir()
    assert outcome.result["sandbox"] == {
        "mode": "workspace-write", "network": False, "escalated": False, "blocked": False
    }


async def test_a_write_outside_the_workspace_is_refused_and_reported(ws: Path, visible: Path) -> None:
    target = visible / "outside.txt"
    command = f"echo x > {target}"
    unsandboxed = await run(manager(ws, None), command)  # the same command can write there
    assert unsandboxed.result["exit_code"] == 0 and target.exists()
    target.unlink()

    outcome = await run(manager(ws, WW), command)
    assert outcome.status == "succeeded"  # a non-zero exit, not a tool failure
    assert outcome.result["exit_code"] != 0
    assert not target.exists()
    stderr = outcome.result["stderr"]
    assert "Read-only file system" in stderr
    assert '"sandbox": "none"' in stderr and "outside the workspace" in stderr
    assert outcome.result["sandbox"]["blocked"] is True


async def test_tmp_is_private_and_writable(ws: Path) -> None:
    mgr = manager(ws, WW)
    marker = f"amos-private-{os.getpid()}-{next(_ids)}"
    first = await run(mgr, f'echo kept > /tmp/{marker} && echo "$TMPDIR"')
    assert first.result["exit_code"] == 0, first.result
    assert first.result["stdout"] == "/tmp\n"
    assert not Path("/tmp", marker).exists()  # the host's /tmp is untouched
    second = await run(mgr, f"cat /tmp/{marker}")  # shared by the launcher's commands
    assert second.result["stdout"] == "kept\n"
    mgr.context.sandbox.close()


async def test_read_only_refuses_every_write(ws: Path) -> None:
    (ws / "existing.txt").write_text("old\n")
    outcome = await run(manager(ws, RO), "cat existing.txt; echo new > existing.txt; touch /tmp/x")
    assert outcome.result["stdout"] == "old\n"  # reading works
    assert outcome.result["exit_code"] != 0
    assert (ws / "existing.txt").read_text() == "old\n"
    assert outcome.result["stderr"].count("Read-only file system") == 2
    assert "read-only mode" in outcome.result["stderr"]
    assert outcome.result["sandbox"]["mode"] == "read-only"


async def test_writable_paths_are_writable(ws: Path, visible: Path) -> None:
    policy = SandboxPolicy("workspace-write", writable_paths=(visible,))
    outcome = await run(manager(ws, policy), f"echo ok > {visible}/cache.txt")
    assert outcome.result["exit_code"] == 0, outcome.result
    assert (visible / "cache.txt").read_text() == "ok\n"


# --------------------------------------------------------------------------- network


@pytest.fixture
def loopback_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers every connection with ``hello``."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.sendall(b"hello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


def connect_command(port: int) -> str:
    code = (f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=3); "
            "print(s.recv(5).decode())")
    return f"{PY} -c {shlex.quote(code)}"


async def test_network_off_cannot_reach_a_loopback_server(ws: Path, loopback_server: int) -> None:
    outcome = await run(manager(ws, WW), connect_command(loopback_server))
    assert outcome.result["exit_code"] != 0
    assert "hello" not in outcome.result["stdout"]
    assert "network access" in outcome.result["stderr"]


async def test_network_on_reaches_the_loopback_server(ws: Path, loopback_server: int) -> None:
    policy = SandboxPolicy("workspace-write", network=True)
    outcome = await run(manager(ws, policy), connect_command(loopback_server))
    assert outcome.result["exit_code"] == 0, outcome.result
    assert outcome.result["stdout"] == "hello\n"
    assert outcome.result["sandbox"]["network"] is True


# --------------------------------------------------------------------------- hidden paths


async def test_hidden_home_paths_cannot_be_read(ws: Path, visible: Path, monkeypatch) -> None:
    home = visible / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SECRET-KEY\n")
    (home / ".netrc").write_text("machine x password SECRET-NETRC\n")
    (home / "notes.txt").write_text("plain\n")
    amos_home = home / "amos"
    (amos_home / "config").mkdir(parents=True)
    (amos_home / "config" / "config.json").write_text('{"SECRET-CONFIG": 1}\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AMOS_HOME", str(amos_home))
    policy = sandbox_policy(AmosConfig(), env={})  # the default hidden list under this HOME
    command = ("cat ~/notes.txt; cat ~/.ssh/id_ed25519; ls ~/.ssh; cat ~/.netrc;"
               " cat ~/amos/config/config.json")
    env = {**os.environ, "HOME": str(home)}

    exposed = await run(manager(ws, None, env=env), command)  # without the sandbox: all readable
    assert "SECRET-KEY" in exposed.result["stdout"] and "SECRET-CONFIG" in exposed.result["stdout"]

    outcome = await run(manager(ws, policy, env=env), command)
    text = outcome.result["stdout"] + outcome.result["stderr"]
    assert "SECRET" not in text
    assert outcome.result["stdout"] == "plain\n"  # only the hidden list is hidden
    assert "Permission denied" in outcome.result["stderr"]
    assert "reading a hidden path" in outcome.result["stderr"]


async def test_a_hidden_folder_inside_the_workspace_stays_hidden(ws: Path) -> None:
    (ws / "secrets").mkdir()
    (ws / "secrets" / "token").write_text("SECRET\n")
    policy = SandboxPolicy("workspace-write", hidden_paths=(ws / "secrets",))
    outcome = await run(manager(ws, policy), "cat secrets/token; touch secrets/new; echo ok > fine")
    assert "SECRET" not in outcome.result["stdout"]
    assert not (ws / "secrets" / "new").exists()
    assert (ws / "fine").read_text() == "ok\n"


async def test_a_workspace_inside_a_hidden_folder_is_usable(visible: Path) -> None:
    hidden = visible / "private"
    inner = hidden / "project"
    inner.mkdir(parents=True)
    (hidden / "secret.txt").write_text("SECRET\n")
    (inner / "code.py").write_text("print('ok')\n")
    policy = SandboxPolicy("workspace-write", hidden_paths=(hidden,))
    outcome = await run(manager(inner, policy), f"{PY} code.py; cat ../secret.txt")
    assert outcome.result["stdout"] == "ok\n"
    assert "SECRET" not in outcome.result["stderr"]


# --------------------------------------------------------------------------- environment


def run_child(spec: dict, **popen: object) -> subprocess.Popen[str]:
    spec = {"temp_parent": str(Path(spec["workspace"]).parent), **spec}
    env = {**os.environ, "AMOS_FAKE_KEY": "sk-fake-amos-0123456789",
           "OPENAI_API_KEY": "sk-fake-openai-0123456789"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.Popen([sys.executable, str(CHILD), json.dumps(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def child_result(spec: dict) -> dict:
    proc = run_child(spec)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out)["result"]


def test_the_environment_of_amos_cannot_be_read_through_proc(ws: Path) -> None:
    command = ("cat /proc/1/environ; echo; cat /proc/$PPID/environ; echo; env;"
               " for f in /proc/[0-9]*/environ; do cat $f; echo; done; ls /proc")
    leak = "cat /proc/$PPID/environ"
    leaked = child_result({"workspace": str(ws), "command": leak, "mode": None})
    assert "sk-fake-amos" in leaked["stdout"]  # unsandboxed: the parent's environ is readable

    result = child_result({"workspace": str(ws), "command": command, "mode": "workspace-write"})
    text = result["stdout"] + result["stderr"]
    assert "sk-fake" not in text
    assert "AMOS_FAKE_KEY" not in text and "OPENAI_API_KEY" not in text
    assert "PATH=" in result["stdout"]  # the command still has its (stripped) environment
    pids = [line for line in result["stdout"].split() if line.isdigit()]
    assert len(pids) < 10  # a new PID namespace: no host process is visible


def test_a_setsid_child_is_gone_after_amos_is_killed(ws: Path) -> None:
    sleep, cmdline = unique_sleep()
    command = f"setsid {sleep} & echo ready > ready; wait"
    proc = run_child({"workspace": str(ws), "command": command, "mode": "workspace-write"})
    try:
        deadline = time.monotonic() + 20
        while not (ws / "ready").exists() or not processes_with_cmdline(cmdline):
            assert time.monotonic() < deadline, "the sandboxed command never started"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert gone(cmdline)
        # Its private /tmp was left behind; the next launcher there removes it.
        left = list(ws.parent.glob("amos-sandbox-*"))
        assert [p.name.split("-")[2] for p in left] == [str(proc.pid)]
        SandboxLauncher(WW, temp_parent=ws.parent).launch("true", workspace=ws, env={})
        assert not left[0].exists()
    finally:
        for pid in processes_with_cmdline(cmdline):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.communicate()


# --------------------------------------------------------------------------- processes


async def test_background_and_setsid_processes_end_with_the_command(ws: Path) -> None:
    sleep_a, cmd_a = unique_sleep()
    sleep_b, cmd_b = unique_sleep()
    started = time.monotonic()
    outcome = await run(manager(ws, WW), f"{sleep_a} & setsid {sleep_b} >/dev/null 2>&1 & echo s")
    assert time.monotonic() - started < 3
    assert outcome.result["stdout"] == "s\n"
    assert gone(cmd_a) and gone(cmd_b)


async def test_a_timeout_kills_everything_in_the_sandbox(ws: Path) -> None:
    sleep, cmdline = unique_sleep()
    started = time.monotonic()
    outcome = await run(manager(ws, WW, timeout_s=0.5), f"setsid {sleep} & {sleep}")
    assert outcome.status == "timed_out"
    assert time.monotonic() - started < 4
    assert gone(cmdline)


# --------------------------------------------------------------------------- toolchains


async def test_the_venv_python_and_git_run_inside(ws: Path) -> None:
    command = (f"{PY} -c 'import sys, pydantic; print(sys.prefix)' && git init -q . && "
               "git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && git log --format=%s")
    outcome = await run(manager(ws, WW), command)
    assert outcome.result["exit_code"] == 0, outcome.result
    assert outcome.result["stdout"].splitlines() == [sys.prefix, "x"]


# --------------------------------------------------------------------------- escalation


async def test_an_approved_escalation_runs_unsandboxed(ws: Path, visible: Path) -> None:
    target = visible / "escalated.txt"
    args = {"sandbox": "none", "justification": "write the cache"}
    assert wants_unsandboxed("run_command", {"command": "x", **args})
    assert not wants_unsandboxed("run_command", {"command": "x"})
    assert not wants_unsandboxed("write_file", args)
    assert escalation_justification(args) == "write the cache"
    call = SandboxedRunCommandArgs(command="x", **args)
    assert sandbox_use(call, manager(ws, WW).context)["mode"] == "workspace-write"
    assert sandbox_use(call, manager(ws, WW, approved=True).context)["mode"] == "none"
    assert sandbox_use(call, manager(ws, None).context) is None
    refused = await run(manager(ws, WW), f"echo x > {target}", **args)
    assert not target.exists()  # not approved: it still ran in the sandbox, and says so
    assert "not approved" in refused.result["stderr"]
    assert refused.result["sandbox"]["escalated"] is False

    outcome = await run(manager(ws, WW, approved=True), f"echo x > {target}", **args)
    assert outcome.result["exit_code"] == 0 and target.exists()
    assert outcome.result["sandbox"] == {"mode": "none", "network": True, "escalated": True,
                                         "blocked": False}


async def test_danger_full_access_runs_without_bwrap(ws: Path, visible: Path) -> None:
    target = visible / "full.txt"
    outcome = await run(manager(ws, SandboxPolicy("danger-full-access")), f"echo x > {target}")
    assert outcome.result["exit_code"] == 0 and target.exists()
    assert outcome.result["sandbox"]["mode"] == "danger-full-access"
    assert outcome.result["sandbox"]["network"] is True


# --------------------------------------------------------------------------- failures


async def test_an_unconfinable_workspace_fails_the_call_cleanly() -> None:
    outcome = await run(manager(Path("/"), WW), "true")
    assert outcome.status == "failed"
    assert outcome.error == ("the sandbox cannot run this command: "
                             "the workspace is /: the sandbox would confine nothing")


async def test_odd_hidden_paths_do_not_break_commands(ws: Path) -> None:
    (ws / "dangling").symlink_to(ws / "nowhere")
    os.mkfifo(ws / "fifo")
    policy = SandboxPolicy("workspace-write", hidden_paths=(ws / "dangling", ws / "fifo", ws))
    outcome = await run(manager(ws, policy), "echo ok > out && cat out")
    assert outcome.result["exit_code"] == 0, outcome.result  # the workspace itself stays usable
    assert outcome.result["stdout"] == "ok\n"


class BrokenLauncher(SandboxLauncher):
    """A launcher whose bwrap command line names a source path that does not exist."""

    def launch(self, command, *, workspace, env):
        launch = super().launch(command, workspace=workspace, env=env)
        argv = (launch.argv[0], "--ro-bind", "/nonexistent-amos-source", "/x", *launch.argv[1:])
        return dataclasses.replace(launch, argv=argv)


async def test_a_sandbox_that_fails_to_start_says_so(ws: Path) -> None:
    context = ToolContext(workspace=ws, env=child_env(dict(os.environ), []),
                          sandbox=BrokenLauncher(WW))
    outcome = await run(ToolManager(builtin_tools(), context=context), "echo never")
    assert outcome.result["exit_code"] == 1 and outcome.result["stdout"] == ""
    assert outcome.result["stderr"].startswith("bwrap: Can't find source path /nonexistent-amos-source")
    assert "the sandbox (bubblewrap) failed to start the command" in outcome.result["stderr"]
