"""Shared helpers: write scripts, open real runners, run the real CLI."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from amos.cli import app
from amos.events import RunFinished
from amos.host import RunOptions, open_runner


def write_script(folder: Path, turns: list[dict[str, Any]], name: str = "script.json", **extra: Any) -> Path:
    """Write a scripted-provider script and return its path."""
    path = folder / name
    path.write_text(json.dumps({"version": 1, "turns": turns, **extra}), encoding="utf-8")
    return path


def make_runner(script: Path, workspace: Path, **kwargs: Any):
    """Open a real runner on the scripted provider (returns ``(runner, opened)``)."""
    kwargs.setdefault("sandbox", "danger-full-access")  # commands ask, as without a sandbox (see test_sandbox_*)
    options = RunOptions(model=f"scripted:{script}", workspace=workspace, cwd=workspace, **kwargs)
    return open_runner(options)


def collect(runner, prompt: str | None = None, **resume: Any) -> list:
    """Run (or resume) to the end and return every event."""

    async def go():
        events = runner.run(prompt) if prompt is not None else runner.resume(**resume)
        return [e async for e in events]

    return asyncio.run(go())


def finished(events: list) -> RunFinished:
    """The RunFinished event of a run."""
    last = events[-1]
    assert isinstance(last, RunFinished), last
    return last


def cli(*args: str, input: str | None = None):
    """Invoke the real CLI in-process; returns typer's Result (exit_code, stdout, stderr)."""
    return CliRunner().invoke(app, list(args), input=input)


def cli_json(*args: str, input: str | None = None) -> tuple[int, dict]:
    """Invoke ``amos … --json`` in-process and parse the single JSON object on stdout."""
    result = cli(*args, "--json", input=input)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (result.stdout, result.stderr)
    return result.exit_code, json.loads(lines[0])


def amos_process(*args: str, cwd: Path | None = None, **kwargs: Any) -> subprocess.Popen:
    """Start the real ``amos`` console entry point as a child process."""
    return subprocess.Popen(
        [sys.executable, "-m", "amos.cli", *args], cwd=cwd, env=dict(os.environ),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def user_git(cwd: Path, *args: str) -> str:
    """Run the ``git`` program as the user would (no inherited ``GIT_*``); its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="u", GIT_AUTHOR_EMAIL="u@x", GIT_COMMITTER_NAME="u", GIT_COMMITTER_EMAIL="u@x")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def workspace_files(ws: Path) -> dict[str, tuple[bytes, int]]:
    """The workspace's files but any .git: name -> (bytes, permission bits)."""
    return {p.relative_to(ws).as_posix(): (p.read_bytes(), stat.S_IMODE(p.lstat().st_mode))
            for p in sorted(ws.rglob("*")) if p.is_file() and ".git" not in p.relative_to(ws).parts}
