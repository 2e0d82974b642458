"""MCP servers in the TUI (issue 18, "Seeing it" and "Prompts"): started in the background
when the app opens, shown in the side panel and by /mcp, their prompts completed, listed
in F1 and sent as prompts — through Textual's pilot on a real runner and a real server
(tests/mcp_servers/http_server.py, built with the mcp SDK's own server API)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amos.tui.app import AmosApp
from amos.tui.screens.help import HelpScreen
from amos.tui.widgets.side_panel import SidePanel
from tests import test_tui
from tests.mcp_support import hostile, http_server
from tests.test_tui import notices, shown_text, submit, wait_for

make_runner = test_tui.make_runner
workspace = test_tui.workspace

SIZE = (120, 40)
TOKEN = "tui-token-77aa"


@pytest.fixture(scope="module")
def http_port():
    with http_server(TOKEN) as port:
        yield port


def _config(tmp_path: Path, servers: dict) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


@pytest.fixture
def web(tmp_path, http_port, monkeypatch):
    monkeypatch.setenv("WEB_TOKEN", TOKEN)
    return _config(tmp_path, {"web": {"type": "http", "url": f"http://127.0.0.1:{http_port}/mcp",
                                      "headers": {"Authorization": "Bearer ${WEB_TOKEN}"},
                                      "trust_annotations": True}})


async def test_servers_start_when_the_app_opens_and_the_panel_shows_them(make_runner, web, tmp_path):
    state = tmp_path / "dead"
    state.mkdir()
    servers = json.loads(web.read_text())["mcpServers"]
    servers["dead"] = hostile("exit", state)
    web.write_text(json.dumps({"mcpServers": servers}))
    runner, opened = make_runner([{"text": "hi"}], config_path=web)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: any("MCP server dead failed to start" in str(n.content) for n in notices(app)),
                       timeout_s=30)
        await pilot.press("f2")
        await pilot.pause()
        text = app.query_one(SidePanel).section_text("mcp")
        assert text is not None and "web running · 2 tools" in text and "dead failed:" in text, text
        await submit(pilot, app, "/mcp")
        await wait_for(pilot, lambda: "mcp__web__add" in shown_text(app), timeout_s=15)
        assert "/mcp__web__greet NAME [STYLE]" in shown_text(app)


async def test_prompt_completes_shows_in_f1_and_is_sent_as_a_prompt(make_runner, web):
    runner, opened = make_runner([{"expect": {"any_message_contains": "Say hello to Grace in a plain way."},
                                   "text": "Hello, Grace."}], config_path=web)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "mcp__web__greet" in app._mcp_prompts, timeout_s=30)
        app.prompt_input.value = "/mcp__web__gr"
        await pilot.press("tab")
        await pilot.pause()
        assert app.prompt_input.value == "/mcp__web__greet "
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert [r["usage"] for r in app.screen.content.mcp_prompts] == ["/mcp__web__greet NAME [STYLE]"]
        await pilot.press("escape")
        await submit(pilot, app, "/mcp__web__greet Grace")
        await wait_for(pilot, lambda: app.receipts and not app.busy, timeout_s=15)
        assert "Hello, Grace." in shown_text(app)
        assert app.receipts[-1].verdict == "ANSWERED"
        await submit(pilot, app, "/mcp__web__greet")
        await wait_for(pilot, lambda: "/mcp__web__greet needs NAME" in shown_text(app))


async def test_no_mcp_section_without_servers(make_runner):
    runner, opened = make_runner([{"text": "hi"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        assert app.query_one(SidePanel).section_text("mcp") is None
