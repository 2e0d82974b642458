"""Real MCP servers nobody here wrote, called through the hub and a real ToolManager (issue 18):
mcp-server-time and mcp-server-git (stdio, from PyPI), a streamable-HTTP server built with
the mcp SDK's own server API on 127.0.0.1, and @modelcontextprotocol/server-everything
from npm where Node is present."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_asyncio

from .mcp_support import call, http_server, make_hub, manager, processes_with

pytestmark = pytest.mark.asyncio(loop_scope="module")

BIN = Path(sys.executable).parent
TOKEN = "test-token-8c1f2b"


@pytest.fixture(scope="module")
def http_port():
    with http_server(TOKEN) as port:
        yield port


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    folder = tmp_path_factory.mktemp("repo")
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    subprocess.run(["git", "init", "-q", str(folder)], check=True, env=env)
    (folder / "a.txt").write_text("hello\n")
    subprocess.run(["git", "-C", str(folder), "add", "a.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(folder), "commit", "-qm", "first commit from the test"], check=True, env=env)
    (folder / "a.txt").write_text("hello again\n")
    return folder


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hub(tmp_path_factory, http_port, repo):
    folder = tmp_path_factory.mktemp("mcp")
    servers = {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
        "git": {"command": str(BIN / "mcp-server-git"), "args": ["--repository", str(repo)],
                "trust_annotations": True,
                "tools": {"git_commit": {"permission": "deny"}, "git_reset": {"enabled": False},
                          "git_status": {"loop_key": ["repo_path"]}}},
        "web": {"type": "http", "url": f"http://127.0.0.1:{http_port}/mcp",
                "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}, "trust_annotations": True},
        "web_noauth": {"type": "http", "url": f"http://127.0.0.1:{http_port}/mcp"},
        "legacy": {"type": "sse", "url": f"http://127.0.0.1:{http_port}/sse",
                   "headers": {"Authorization": f"Bearer {TOKEN}"}},
    }
    environ = {**os.environ, "WEB_TOKEN": TOKEN}
    hub = make_hub(servers, folder, environ=environ)
    started = time.monotonic()
    tools = await hub.tools()
    hub.started_in = time.monotonic() - started
    hub.manager = manager(tools, folder)
    hub.first_notices = hub.take_notices()
    yield hub
    await hub.close()
    assert processes_with(str(repo)) == []


async def test_servers_start_in_parallel_and_a_failure_is_one_notice(hub):
    status = {s.name: s for s in hub.status()}
    assert {name: s.state for name, s in status.items()} == {
        "time": "running", "git": "running", "web": "running", "web_noauth": "failed", "legacy": "running"}
    assert status["time"].tools == 2 and status["web"].prompts == 1 and status["web"].resources == 1
    (notice,) = hub.first_notices
    assert notice.startswith("MCP server web_noauth failed to start") and "HTTP 401 Unauthorized" in notice
    assert TOKEN in hub.secret_values()


async def test_time_server(hub):
    m = hub.manager
    assert (m.effect("mcp__time__get_current_time"), m.permission("mcp__time__get_current_time")) == ("unknown", "ask")
    outcome = await call(m, "mcp__time__get_current_time", {"timezone": "Europe/Paris"})
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result["structured_content"]["timezone"] == "Europe/Paris"
    assert '"timezone": "Europe/Paris"' in outcome.content
    converted = await call(m, "mcp__time__convert_time",
                           {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
    assert converted.status == "succeeded" and converted.result["structured_content"]["target"]["datetime"]
    wrong = await call(m, "mcp__time__get_current_time", {"timezone": "Mars/Olympus_Mons"})
    assert wrong.status == "failed" and "reported an error" in wrong.error and "Mars/Olympus_Mons" in wrong.error
    invalid = await call(m, "mcp__time__get_current_time", {"timezone": 7})
    assert invalid.status == "failed" and invalid.error.startswith("invalid arguments for mcp__time__get_current_time")


async def test_git_server_with_trusted_annotations_and_overrides(hub, repo):
    m = hub.manager
    assert (m.effect("mcp__git__git_status"), m.permission("mcp__git__git_status")) == ("read", "allow")
    assert (m.effect("mcp__git__git_commit"), m.permission("mcp__git__git_commit")) == ("unknown", "deny")
    assert m.get("mcp__git__git_reset") is None
    assert m.loop_key("mcp__git__git_status") == ["repo_path"]
    status = await call(m, "mcp__git__git_status", {"repo_path": str(repo)})
    assert status.status == "succeeded" and "a.txt" in status.content
    log = await call(m, "mcp__git__git_log", {"repo_path": str(repo)})
    assert log.status == "succeeded" and "first commit from the test" in log.content


async def test_http_server_tools_resources_and_prompts(hub):
    m = hub.manager
    assert (m.effect("mcp__web__add"), m.permission("mcp__web__add")) == ("read", "allow")
    added = await call(m, "mcp__web__add", {"a": 2, "b": 40})
    assert added.status == "succeeded" and added.result["structured_content"] == {"result": 42}
    image = await call(m, "mcp__web__echo_image", {"text": "look"})
    assert image.content == "look\n[image: image/png, 8 bytes — not shown]"
    assert m.effect("mcp_read_resource") == "read"
    resource = await call(m, "mcp_read_resource", {"server": "web", "uri": "memo://hello"})
    assert (resource.status, resource.content) == ("succeeded", "hello from a resource")
    missing = await call(m, "mcp_read_resource", {"server": "web", "uri": "memo://nope"})
    assert missing.status == "failed" and "memo://nope" in missing.error
    prompt = next(p for p in await hub.prompts() if p.server == "web")
    assert (prompt.command, prompt.usage) == ("mcp__web__greet", "/mcp__web__greet NAME [STYLE]")
    text = await hub.expand_prompt("mcp__web__greet", 'Ada style="warm"')
    assert text == "Say hello to Ada in a warm way."


async def test_sse_server(hub):
    added = await call(hub.manager, "mcp__legacy__add", {"a": 1, "b": 1})
    assert added.status == "succeeded" and added.content == "2"


@pytest.fixture(scope="module")
def everything_server():
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are not installed")
    cache = Path(os.environ.get("AMOS_TEST_NPM_CACHE") or Path(tempfile.gettempdir()) / "amos-test-npm")
    script = cache / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    if not script.is_file():
        try:
            subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", "--prefer-offline",
                            "--fetch-retries=1", "--fetch-timeout=30000",
                            "@modelcontextprotocol/server-everything"], check=True, capture_output=True, timeout=120)
        except (subprocess.SubprocessError, OSError) as exc:
            pytest.skip(f"@modelcontextprotocol/server-everything could not be installed: {type(exc).__name__}")
    if not script.is_file():
        pytest.skip("@modelcontextprotocol/server-everything installed without dist/index.js")
    return node, script


async def test_server_everything(everything_server, tmp_path):
    node, script = everything_server
    hub = make_hub({"everything": {"command": node, "args": [str(script), "stdio"]}}, tmp_path)
    try:
        m = manager(await hub.tools(), tmp_path)
        assert hub.take_notices() == []
        echo = await call(m, "mcp__everything__echo", {"message": "hi there"})
        assert (echo.status, echo.content) == ("succeeded", "Echo: hi there")
        image = await call(m, "mcp__everything__get-tiny-image")
        assert image.status == "succeeded" and re.search(r"\[image: image/png, \d+ bytes — not shown\]", image.content)
        total = await call(m, "mcp__everything__get-sum", {"a": 1, "b": 2})
        assert "3" in total.content
        commands = {p.command for p in await hub.prompts()}
        assert "mcp__everything__args-prompt" in commands
        text = await hub.expand_prompt("mcp__everything__args-prompt", "Paris")
        assert "Paris" in text
    finally:
        await hub.close()
