"""Custom slash commands (``commands/*.md``): loading, expansion, /help, the CLI and the TUI.

spec/slash-commands.md "Custom commands": a ``NAME.md`` file becomes ``/NAME``; its body
is a prompt template (``$ARGUMENTS``, ``$1``…``$9``); lookup is ``./commands``,
``./.claude/commands``, ``<config>/commands``, then the commands bundled with amos; the
first found wins and built-ins are never replaced. A custom command only sends a prompt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from textual.widgets import Collapsible, Static

from amos import paths
from amos.errors import SlashCommandError
from amos.slash import COMMANDS, execute_line
from amos.slash.custom import (
    MAX_FILE_BYTES,
    CustomCommand,
    bundled_dir,
    expand,
    load_custom_commands,
    parse_front_matter,
    required_count,
)
from amos.tui.app import BUSY_NOTICE, AmosApp

from . import test_tui
from .support import cli, cli_json, make_runner, write_script
from .test_tui import notices, shown_text, submit, wait_for

tui_make_runner = test_tui.make_runner
workspace = test_tui.workspace

REPO = Path(__file__).resolve().parent.parent
GREETING = ("Say hello to Ada Lovelace in one short, friendly sentence, then tell them in one more\n"
            "sentence what you can help with in this workspace. Do not call any tools.")


def write(folder: Path, name: str, text: str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def command(template: str, arguments: str = "", name: str = "t") -> CustomCommand:
    return CustomCommand(name=name, description="", arguments=arguments, template=template,
                         source=Path(f"{name}.md"), origin="workspace")


@pytest.fixture
def ws(workspace: Path) -> Path:
    """The workspace folder (``tmp_path / "ws"``), shared with the TUI fixtures."""
    return workspace


@pytest.fixture
def runner(tmp_path: Path, ws: Path):
    script = write_script(tmp_path, [{"text": "unused"}])
    opened_runner, _ = make_runner(script, ws, no_save=True)
    yield opened_runner
    opened_runner.close()


# ---------------------------------------------------------------------------- lookup


def test_lookup_order_first_found_wins(ws: Path, tmp_path: Path):
    config = tmp_path / "config"
    write(ws / "commands", "a.md", "from workspace")
    write(ws / ".claude" / "commands", "a.md", "from .claude")
    write(ws / ".claude" / "commands", "b.md", "from .claude")
    write(config / "commands", "b.md", "from config")
    write(config / "commands", "c.md", "from config")
    write(ws / "commands", "greet.md", "the project's own greeting")
    commands, skipped = load_custom_commands(ws, config)
    assert skipped == []
    assert (commands["a"].template, commands["a"].origin) == ("from workspace", "workspace")
    assert (commands["b"].template, commands["b"].origin) == ("from .claude", "claude")
    assert (commands["c"].template, commands["c"].origin) == ("from config", "user")
    assert commands["greet"].template == "the project's own greeting"  # shadows the bundled one
    assert commands["review"].origin == "bundled"
    assert list(commands)[:4] == ["a", "greet", "b", "c"]  # lookup order, then by name


def test_the_bundled_commands_load_cleanly_with_descriptions():
    folder = bundled_dir()
    assert folder is not None
    assert sorted(p.name for p in folder.glob("*.md")) == sorted(p.name for p in (REPO / "commands").glob("*.md"))
    commands, skipped = load_custom_commands(Path("/nonexistent-workspace"), None, frozenset(COMMANDS))
    assert skipped == []
    assert {"greet", "review", "explain", "fix-tests"} <= set(commands)
    for name in ("greet", "review", "explain", "fix-tests"):
        assert commands[name].description and commands[name].origin == "bundled"
        assert "$ARGUMENTS" in commands[name].template
    assert expand(commands["greet"], "Ada Lovelace") == GREETING
    assert "`src/app.py`" in expand(commands["explain"], "src/app.py what does main do?")


def test_pyproject_ships_the_bundled_commands_as_package_data():
    # amos/slash/bundled_commands points at the top-level commands/ folder; the
    # package-data glob for amos ("**/*.md") copies its files into wheels.
    link = REPO / "amos" / "slash" / "bundled_commands"
    assert link.is_dir() and link.resolve() == (REPO / "commands").resolve()
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"**/*.md"' in pyproject


def test_user_commands_come_from_the_config_folder(runner, amos_home: Path):
    write(paths.config_dir() / "commands", "standup.md", "Summarise yesterday's work for $1.")
    result = execute_line(runner, "/standup Ada")
    assert result.action == "prompt" and result.action_arg == "Summarise yesterday's work for Ada."
    assert result.result["source"] == str(paths.config_dir() / "commands" / "standup.md")


def test_builtins_cannot_be_shadowed(runner, ws: Path):
    write(ws / "commands", "help.md", "I am not help")
    write(ws / ".claude" / "commands", "quit.md", "do not quit")
    commands, skipped = load_custom_commands(ws, None, frozenset(COMMANDS))
    assert "help" not in commands and "quit" not in commands
    assert [(s.name, s.builtin) for s in skipped] == [("help", True), ("quit", True)]
    assert "built-in" in str(skipped[0]) and "help.md" in str(skipped[0])
    result = execute_line(runner, "/help")
    assert result.action is None and "/session save" in result.text
    assert any("help.md" in w and "built-in" in w for w in result.result["custom_warnings"])
    one = execute_line(runner, "/help help")
    assert one.result["usage"] == "/help [command]" and "ignored:" in one.text and "help.md" in one.text
    assert execute_line(runner, "/quit").action == "quit"


# ---------------------------------------------------------------------------- expansion


def test_arguments_is_the_rest_of_the_line_exactly_as_typed(runner, ws: Path):
    write(ws / "commands", "say.md", "---\ndescription: say it\n---\nSay: [$ARGUMENTS]")
    rest = """it's "quoted",  twice   and $1 stays"""
    result = execute_line(runner, f"/say {rest}")
    assert result.action == "prompt"
    assert result.action_arg == f"Say: [{rest}]"
    assert result.result == {"custom": "say", "source": str(ws / "commands" / "say.md"),
                             "prompt": f"Say: [{rest}]"}


def test_positional_arguments_use_the_slash_token_rules():
    cmd = command("1=$1 2=$2 3=$3 9=$9 all=$ARGUMENTS")
    assert expand(cmd, '"Ada Lovelace" it\'s  x') == (
        "1=Ada Lovelace 2=it's 3=x 9= all=\"Ada Lovelace\" it's  x")
    assert expand(cmd, "") == "1= 2= 3= 9= all="  # missing arguments are empty strings
    assert expand(command("$10 $0 $$ $ARGUMENTSX $arguments"), "a b") == "a0 $0 $$ a bX $arguments"
    assert expand(command("$1 then $2"), "$2 x") == "$2 then x"  # one pass: typed text is never expanded


def test_an_unterminated_quote_matters_only_to_positional_templates():
    with pytest.raises(SlashCommandError, match="unterminated double quote") as info:
        expand(command("first: $1", name="first"), 'say "hi')
    assert info.value.usage == "/first"
    assert expand(command("all: $ARGUMENTS"), 'say "hi') == 'all: say "hi'


def test_a_template_without_placeholders_keeps_what_was_typed():
    assert expand(command("Review the diff."), "") == "Review the diff."
    assert expand(command("Review the diff."), "focus on security") == "Review the diff.\n\nfocus on security"


def test_required_arguments_show_the_usage_when_missing():
    assert required_count("FILE [SYMBOL]") == 1
    assert required_count("[A [B]] C D…") == 2
    assert required_count("") == 0
    cmd = command("Explain $1. $ARGUMENTS", arguments="FILE [QUESTION…]", name="explain")
    with pytest.raises(SlashCommandError, match="needs FILE") as info:
        expand(cmd, "   ")
    assert info.value.usage == "/explain FILE [QUESTION…]"
    assert expand(cmd, "a.py") == "Explain a.py. a.py"
    with pytest.raises(SlashCommandError, match="empty prompt"):
        expand(command("$ARGUMENTS"), "")


# ---------------------------------------------------------------------------- bad files


def test_bad_files_are_skipped_with_one_line_warnings(ws: Path):
    folder = ws / "commands"
    write(folder, "latin1.md", "caf\xe9".encode("latin-1"))
    write(folder, "huge.md", "x" * (MAX_FILE_BYTES + 1))
    write(folder, "unclosed.md", "---\ndescription: never closed\n")
    write(folder, "notkey.md", "---\ndescription: x\nSay hi\n---\nSay hi")
    write(folder, "twice.md", "---\ndescription: a\ndescription: b\n---\nSay hi")
    write(folder, "empty.md", "---\ndescription: nothing below\n---\n\n  \n")
    write(folder, "bad name.md", "Say hi")
    write(folder, "dots.in.name.md", "Say hi")
    write(folder, ".hidden.md", "ignored silently")
    write(folder, "notes.txt", "ignored silently")
    (folder / "dir.md").mkdir()
    (folder / "dangling.md").symlink_to(folder / "missing-target.md")
    write(folder, "good.md", "Say hi to $1")
    commands, skipped = load_custom_commands(ws, None)
    assert "good" in commands
    reasons = {s.source.name: s.reason for s in skipped}
    assert set(reasons) == {"latin1.md", "huge.md", "unclosed.md", "notkey.md", "twice.md", "empty.md",
                            "bad name.md", "dots.in.name.md", "dangling.md"}
    assert "not UTF-8" in reasons["latin1.md"]
    assert "64 KiB" in reasons["huge.md"]
    assert "no closing '---'" in reasons["unclosed.md"]
    assert "line 3 is not 'key: value' (is the closing '---' missing?)" in reasons["notkey.md"]
    assert "appears twice" in reasons["twice.md"]
    assert "empty" in reasons["empty.md"]
    assert "name must be" in reasons["bad name.md"] and "name must be" in reasons["dots.in.name.md"]
    assert "cannot be read" in reasons["dangling.md"]
    for entry in skipped:
        line = str(entry)
        assert "\n" not in line and line.startswith(str(folder)) and line.endswith("; skipped")


def test_a_broken_file_takes_its_name_and_is_reported_when_invoked(runner, ws: Path, amos_home: Path):
    write(ws / "commands", "greet.md", b"\xff\xfe broken")  # hides the bundled greet.md
    write(ws / "commands", "blueprint.md", "---\ndescription: x\n")
    write(paths.config_dir() / "commands", "blueprint.md", "a good plan that is never reached")
    for line, name in (("/greet Ada", "greet"), ("/blueprint", "blueprint")):
        with pytest.raises(SlashCommandError) as info:
            execute_line(runner, line)
        assert info.value.code == "CUSTOM_COMMAND_INVALID"
        assert str(info.value).startswith(f"/{name} cannot be used: {ws / 'commands' / name}.md: ")
    help_one = execute_line(runner, "/help blueprint")
    assert not help_one.ok and help_one.error["code"] == "CUSTOM_COMMAND_INVALID"
    with pytest.raises(SlashCommandError) as unknown:
        execute_line(runner, "/nope")
    assert unknown.value.code == "UNKNOWN_COMMAND"


def test_an_unreadable_folder_is_a_warning(ws: Path, monkeypatch):
    write(ws / "commands", "a.md", "A")
    real_iterdir = Path.iterdir

    def failing(self):
        if self == ws / "commands":
            raise PermissionError(13, "Permission denied")
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", failing)
    commands, skipped = load_custom_commands(ws, None)
    assert "a" not in commands and "greet" in commands
    assert [str(s) for s in skipped] == [f"{ws / 'commands'}: cannot list the folder (Permission denied); skipped"]


def test_front_matter_is_yaml_ish_and_claude_files_work(ws: Path):
    text = ("\ufeff---\r\n# a comment\r\ndescription: \"Open a PR\"\r\nargument-hint: '[title]'\r\n"
            "allowed-tools: Bash(git add:*),\r\n  Bash(git commit:*)\r\nmodel: x\r\n---\r\nOpen a PR: $ARGUMENTS\r\n")
    write(ws / ".claude" / "commands", "pr.md", text.encode("utf-8"))
    commands, skipped = load_custom_commands(ws, None)
    assert skipped == []
    pr = commands["pr"]
    assert (pr.description, pr.arguments, pr.usage) == ("Open a PR", "[title]", "/pr [title]")
    assert expand(pr, "fix bug") == "Open a PR: fix bug"
    assert parse_front_matter("no front matter\n---\n") == ({}, "no front matter\n---\n")
    meta, body = parse_front_matter("---\ndescription: a\x1bb\nnote: |\n  more\n---\nbody")
    assert meta == {"description": "a?b", "note": "more"} and body == "body"


# ---------------------------------------------------------------------------- /help


def test_help_lists_custom_commands_with_description_arguments_and_source(runner, ws: Path):
    write(ws / "commands", "deploy.md", "---\ndescription: Deploy to staging\narguments: ENV [TAG]\n---\n"
                                        "Deploy $2 to $1.")
    write(ws / "commands", "bad name.md", "x")
    result = execute_line(runner, "/help")
    rows = {r["usage"]: r for r in result.result["commands"]}
    deploy = rows["/deploy ENV [TAG]"]
    assert deploy["custom"] is True and deploy["source"] == str(ws / "commands" / "deploy.md")
    assert deploy["description"] == "Deploy to staging" and deploy["arguments"] == "ENV [TAG]"
    assert deploy["summary"] == "Deploy to staging · custom, commands/deploy.md"
    assert rows["/greet NAME…"]["summary"].endswith("· custom, bundled with amos (greet.md)")
    assert all(not r.get("custom") for r in result.result["commands"][:len(COMMANDS)])
    assert "Custom commands" in result.text and "/deploy ENV [TAG]" in result.text
    assert "Skipped command files:" in result.text and "bad name.md" in result.text
    assert len(result.result["custom_warnings"]) == 1
    one = execute_line(runner, "/help deploy")
    assert one.result["custom"] is True and one.result["details"] == "Deploy $2 to $1."
    assert str(ws / "commands" / "deploy.md") in one.text and "Deploy $2 to $1." in one.text
    assert execute_line(runner, "/help /greet").result["usage"] == "/greet NAME…"


# ---------------------------------------------------------------------------- the real CLI


def _session_prompt(session_path: str) -> str:
    session = json.loads(Path(session_path).read_text(encoding="utf-8"))
    first = session["messages"][0]
    assert first["role"] == "user"
    return "".join(p["text"] for p in first["parts"] if p["part_kind"] == "text")


def test_amos_run_greet_runs_the_expanded_prompt(tmp_path: Path, ws: Path):
    script = write_script(tmp_path, [{"expect": {"last_message_role": "user",
                                                 "any_message_contains": "Say hello to Ada Lovelace in one"},
                                      "text": "Hello, Ada!"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "/greet Ada Lovelace")
    assert code == 0, doc
    plain_code, plain = cli_json("run", "--script", str(script), "--workspace", str(ws), GREETING)
    assert plain_code == 0 and set(doc) == set(plain)  # the same --json shape as a typed prompt
    # issue 21: what was typed and what the model received
    assert doc["command"] == "/greet Ada Lovelace" and doc["prompt"] == GREETING
    assert plain["command"] is None and plain["prompt"] == GREETING
    assert doc["output_text"] == "Hello, Ada!" and doc["stop"]["verdict"] == "ANSWERED"
    assert _session_prompt(doc["session_path"]) == GREETING == _session_prompt(plain["session_path"])

    text = cli("run", "--script", str(script), "--workspace", str(ws), "/greet Ada Lovelace")
    assert text.exit_code == 0 and text.stdout == "Hello, Ada!\n"


def test_amos_run_workspace_command_with_quotes_and_apostrophes(tmp_path: Path, ws: Path):
    write(ws / "commands", "ask.md", "---\narguments: WHO TOPIC…\n---\nAsk $1 about: $ARGUMENTS")
    script = write_script(tmp_path, [{"text": "asked"}])
    line = """/ask "Ada Lovelace" the engine's "notes" """
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), line)
    assert code == 0, doc
    assert _session_prompt(doc["session_path"]) == """Ask Ada Lovelace about: "Ada Lovelace" the engine's "notes" """


def test_amos_run_custom_command_errors_exit_2_and_run_nothing(tmp_path: Path, ws: Path):
    write(ws / "commands", "broken.md", "---\ndescription: x\n")
    script = write_script(tmp_path, [{"text": "never"}])
    missing = cli("run", "--script", str(script), "--workspace", str(ws), "/greet")
    assert missing.exit_code == 2 and "usage: /greet NAME…" in missing.stderr
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "/broken now")
    assert code == 2 and doc["ok"] is False and doc["error"]["code"] == "CUSTOM_COMMAND_INVALID"
    assert "no closing '---'" in doc["error"]["message"]
    listed = cli("run", "--script", str(script), "--workspace", str(ws), "--no-save", "/help")
    assert listed.exit_code == 0 and "/fix-tests" in listed.stdout and "broken.md" in listed.stdout


# ---------------------------------------------------------------------------- the TUI


async def test_tui_enter_on_a_custom_command_starts_a_run_with_the_expanded_prompt(tui_make_runner):
    runner, opened = tui_make_runner([{"expect": {"any_message_contains": "Say hello to Ada Lovelace in one"},
                                       "text": "Hello, Ada!"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 32)) as pilot:
        await submit(pilot, app, "/greet Ada Lovelace")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert app.receipts[-1].verdict == "ANSWERED"
        shown = shown_text(app)
        # issue 21: the line as typed, the prompt the model got folded under it
        assert "› /greet Ada Lovelace" in shown and "› " + GREETING.replace("\n", "\n  ") not in shown
        fold = app.conversation.query_one(".expansion", Collapsible)
        assert fold.collapsed and "the prompt sent" in fold.title
        assert GREETING.replace("\n", "\n  ") in str(fold.query_one(".expansion-text", Static).content)
        assert "Hello, Ada!" in shown
        assert app.prompt_input.value == "" and app.prompt_input.sent_lines[-1] == "/greet Ada Lovelace"
        assert runner.session.messages[0].parts[0].text == GREETING


async def test_tui_hint_and_tab_completion_offer_custom_commands(tui_make_runner, workspace: Path):
    write(workspace / "commands", "grill.md", "---\ndescription: Grill the design\n---\nGrill $ARGUMENTS")
    runner, opened = tui_make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(140, 32)) as pilot:

        def notice() -> str:
            return str(app.query_one("#notice-line").content)

        await pilot.press("/", "g")
        await pilot.pause()
        assert notice() == "ℹ Tab completes: /greet /grill"
        await pilot.press("r", "tab")
        await pilot.pause()
        assert app.prompt_input.value == "/gr"
        assert notice() == "ℹ matches: /greet  /grill"
        await pilot.press("e", "tab")
        await pilot.pause()
        assert app.prompt_input.value == "/greet "
        assert notice() == ("ℹ /greet NAME… — Say hello to someone (a tiny example of a custom command) "
                            "(custom, greet.md)")
        app.prompt_input.value = ""
        await pilot.press(*"/he", "tab")  # built-ins alone: the input's own completion
        assert app.prompt_input.value == "/help "
        await submit(pilot, app, "/help")
        assert "/grill" in shown_text(app) and "Grill the design" in shown_text(app)


async def test_tui_custom_command_while_a_run_is_active_is_refused_like_a_prompt(tui_make_runner):
    runner, opened = tui_make_runner([{"text": "slow", "delay_ms": 600}, {"text": "Hello, Ada!"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 32)) as pilot:
        await submit(pilot, app, "first")
        assert app.busy
        await submit(pilot, app, "/greet Ada Lovelace")
        assert app.prompt_input.value == "/greet Ada Lovelace"
        assert BUSY_NOTICE in str(app.query_one("#notice-line").content)
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await submit(pilot, app, "/greet Ada Lovelace")
        await wait_for(pilot, lambda: len(app.receipts) == 2 and not app.busy)
        assert "Hello, Ada!" in shown_text(app)


async def test_tui_reports_a_bad_custom_command_once(tui_make_runner, workspace: Path):
    write(workspace / "commands", "bad.md", b"\xff")
    runner, opened = tui_make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 32)) as pilot:
        await submit(pilot, app, "/bad")
        shown = shown_text(app)
        assert "/bad cannot be used:" in shown and "not UTF-8" in shown
        errors = [n.text for n in notices(app) if n.level == "error"]
        assert len(errors) == 1 and errors[0].startswith("/bad cannot be used: ")
        await submit(pilot, app, "/help")  # the table shows commands; skipped files are warning notices
        warnings = [n.text for n in notices(app) if n.level == "warning"]
        assert warnings == [f"{workspace / 'commands' / 'bad.md'}: not UTF-8 text (bad byte at offset 0); skipped"]
        assert not app.busy and not app.receipts


def test_custom_module_has_no_import_side_effects():
    before = dict(os.environ)
    import importlib

    import amos.slash.custom as module

    importlib.reload(module)
    assert dict(os.environ) == before


def test_a_link_to_a_file_outside_the_commands_folder_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0 the secret\n")
    folder = tmp_path / "ws" / "commands"
    folder.mkdir(parents=True)
    (folder / "shadow.md").symlink_to(secret)
    (folder / "real.md").write_text("A real prompt\n")
    (folder / "alias.md").symlink_to(folder / "real.md")  # a link inside the folder is fine
    commands, skipped = load_custom_commands(tmp_path / "ws", None, frozenset(COMMANDS))
    assert "shadow" not in commands and commands["alias"].template == "A real prompt"
    (warning,) = [str(s) for s in skipped if "shadow" in str(s)]
    assert "outside its commands folder" in warning


def test_a_fifo_named_like_a_command_never_hangs(tmp_path):
    folder = tmp_path / "ws" / "commands"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "pipe.fifo")
    (folder / "pipe.md").symlink_to(folder / "pipe.fifo")  # a bare FIFO is not even listed
    commands, skipped = load_custom_commands(tmp_path / "ws", None, frozenset(COMMANDS))
    assert "pipe" not in commands
    assert any("not a regular file" in str(s) for s in skipped)
