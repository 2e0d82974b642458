"""Issue 21 in the TUI, through Textual's pilot on real runners: readline keys in the
composer, ``/new``, and ``amos "prompt"`` (the app sends a first line once it is up)."""

from __future__ import annotations

import os

from amos.tui.app import AmosApp
from tests import test_tui
from tests.test_tui import shown_text, submit, wait_for

make_runner = test_tui.make_runner
workspace = test_tui.workspace

SIZE = (80, 24)


async def test_readline_keys_in_the_composer(make_runner):
    runner, opened = make_runner([{"text": "x"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.prompt_input
        await pilot.press(*"hello world", *["left"] * 6, "ctrl+u")
        await pilot.pause()
        assert composer.text == " world" and composer.cursor_location == (0, 0)  # Ctrl+U: back to column 0
        await pilot.press("ctrl+e")
        assert composer.cursor_location == (0, 6)
        await pilot.press("ctrl+a")
        assert composer.cursor_location == (0, 0)  # column 0, even before a blank
        await pilot.press("right", "ctrl+k")
        await pilot.pause()
        assert composer.text == " "
        await pilot.press(*"one two", "ctrl+w")
        await pilot.pause()
        assert composer.text == " one "


async def test_new_starts_a_fresh_session_and_keeps_the_old_one(make_runner):
    runner, opened = make_runner([{"text": "first answer"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "hello")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        old_id = app.runner.session_id
        await submit(pilot, app, "/new")
        await wait_for(pilot, lambda: app.runner.session_id != old_id)
        assert not app.runner.messages() and "first answer" not in shown_text(app)
        assert f"/session load {old_id}" in shown_text(app)
        assert app.runner.model_spec == runner.model_spec and app.runner.workspace == runner.workspace
        assert old_id in [row.id for row in app.runner.sessions()]
    app.runner.close()


async def test_a_first_line_is_sent_once_the_app_is_up(make_runner):
    runner, opened = make_runner([{"text": "sent at start"}])
    app = AmosApp(runner, opened, first_line="what is here?")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        text = shown_text(app)
        assert "what is here?" in text and text.count("sent at start") == 1


async def test_model_without_an_argument_opens_a_picker_and_enter_switches(make_runner, monkeypatch):
    from textual.widgets import OptionList

    from amos.tui.screens.model_picker import ModelPickerScreen

    monkeypatch.setenv("OPENAI_API_KEY", "sk-picker-0123456789abcdef")
    runner, opened = make_runner([{"text": "x"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "/model")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPickerScreen)
                       and isinstance(app.focused, OptionList), timeout_s=15)
        listing = app.screen.query_one(OptionList)
        ids = [option.id for option in listing.options]
        assert listing.options[listing.highlighted].id == runner.model_spec or runner.model_spec not in ids
        assert "openai:gpt-4o-mini" in ids and "anthropic:claude-sonnet-4-5" in ids
        headers = [str(o.prompt) for o in listing.options if o.disabled]
        assert any("OPENAI_API_KEY: set" in h for h in headers)
        assert any("ANTHROPIC_API_KEY: not set" in h for h in headers)
        assert not any("sk-picker" in str(o.prompt) for o in listing.options)
        listing.highlighted = ids.index("openai:gpt-4o-mini")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.runner.model_spec == "openai:gpt-4o-mini")
        assert "/model openai:gpt-4o-mini" in shown_text(app)  # as if it were typed
        await submit(pilot, app, "/model")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPickerScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: "model unchanged: openai:gpt-4o-mini" in shown_text(app))


async def test_tab_right_after_typing_completes_a_custom_command(make_runner):
    runner, opened = make_runner([{"text": "x"}])  # /greet is a bundled custom command
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("/", "g", "r", "tab")  # no pause: Tab lands right behind the keys
        await pilot.pause()
        assert app.prompt_input.value == "/greet "
        app.prompt_input.value = ""
        await pilot.press(*"/help gr", "tab")
        await pilot.pause()
        assert app.prompt_input.value == "/help greet "
        app.prompt_input.value = ""
        await pilot.press(*"/se", "tab")  # built-ins as before
        await pilot.pause()
        assert app.prompt_input.value == "/session "


def _evidence_config(tmp_path) -> object:
    import json

    path = tmp_path / "evidence.json"
    path.write_text(json.dumps({"evidence": {"enabled": True}}))
    return path


async def test_tool_lines_show_short_evidence_ids_and_tab_completes_them(make_runner, workspace, tmp_path):
    from amos.tui.widgets.tool_line import ToolCallLine

    for name in "ab":
        (workspace / f"{name}.txt").write_text(f"file {name}\n")
    runner, opened = make_runner(
        [{"tool_calls": [{"id": f"r{n}", "name": "read_file", "arguments": {"path": f"{n}.txt"}} for n in "ab"]},
         {"text": "read both"}], config_path=_evidence_config(tmp_path))
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "read")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        lines = list(app.query(ToolCallLine))
        ids = [line.evidence_id for line in lines]
        assert len(ids) == 2 and all(ids)
        headers = [line._header().plain for line in lines]
        for record_id, header in zip(ids, headers, strict=True):
            assert record_id not in header  # the whole 36 characters are not shown
            short = header.rsplit(" ev ", 1)[1].split()[0]
            assert record_id.startswith(short) and 12 <= len(short.replace("-", "")) < 32
        # Tab completes a unique prefix to the whole id
        short = headers[1].rsplit(" ev ", 1)[1].split()[0]
        app.prompt_input.value = ""
        await pilot.press(*f"/context evidence read {short}", "tab")
        await pilot.pause()
        assert app.prompt_input.value == f"/context evidence read {ids[1]} "
        # with nothing typed it offers this session's records
        app.prompt_input.value = "/context evidence read "
        await pilot.press("tab")
        await pilot.pause()
        assert app.prompt_input.value.startswith("/context evidence read " + os.path.commonprefix(ids))
        assert all(i[:13] in str(app.query_one("#notice-line").content) for i in ids)
        # and the short id is accepted where an id is taken
        await submit(pilot, app, f"/context evidence read {short}")
        await wait_for(pilot, lambda: '"call_id":"rb"' in shown_text(app).replace(" ", ""))


async def test_f2_overlays_the_conversation_below_100_columns_and_sits_beside_it_above(make_runner):
    runner, opened = make_runner([{"text": "x"}])
    for size, overlay in (((80, 24), True), ((120, 40), False)):
        app = AmosApp(runner, opened)
        async with app.run_test(size=size) as pilot:
            before = app.conversation.size.width
            await pilot.press("f2")
            await pilot.pause()
            panel = app.side_panel
            assert panel.display and 30 <= panel.size.width <= 45
            if overlay:  # the conversation keeps its width (no re-wrapping into 40 columns)
                assert app.conversation.size.width == before
                assert panel.region.x >= size[0] - panel.outer_size.width - 1
            else:
                assert app.conversation.size.width + panel.outer_size.width <= size[0]
                assert app.conversation.size.width >= 70


async def test_help_context_puts_each_note_under_its_usage(make_runner):
    runner, opened = make_runner([{"text": "x"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "/help context")
        text = shown_text(app)
        assert "/context task note TEXT…\n    a constraint at the current revision (id generated)" in text
        assert not any(len(line) > 78 for line in text.splitlines() if line.startswith("/context"))


async def test_a_key_typed_into_the_prompt_is_masked_on_screen(make_runner, monkeypatch):
    """Break-it finding: the typed prompt was echoed with the key (masked on disk and to
    the model only)."""
    key = "sk-proj-TYPEDKEY-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    runner, opened = make_runner([{"text": "noted"}], no_save=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await submit(pilot, app, f"my key is {key} keep it")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await submit(pilot, app, f"/session save {key}")
        await pilot.pause(0.3)
        text = shown_text(app)
        assert "my key is" in text and key not in text
        await pilot.press("up")
        await pilot.press("up")
        await pilot.pause()
        assert "my key is" in app.prompt_input.value and key not in app.prompt_input.value, "history masked"
