"""The ``amos`` command line (spec/cli.md): a thin client of the runner's host API.

Heavy modules (the runner, providers, Textual) are imported inside the commands that
need them, so ``amos --version`` and ``--help`` stay fast (STYLE.md §1).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from amos import __version__
from amos.cli_checkpoints import register as register_checkpoints
from amos.cli_config import config_app
from amos.cli_diff import diff_command
from amos.cli_evidence import evidence_app
from amos.cli_mcp import mcp_app
from amos.cli_models import models_command
from amos.cli_sessions import sessions_app
from amos.cli_store import store_app
from amos.safe_text import printable


class _PromptGroup(TyperGroup):
    """The ``amos`` group: a first word that is not a subcommand starts a prompt.

    ``amos "fix the test"`` opens the TUI with that prompt sent; ``amos -p "…"`` is a
    one-shot run; ``amos -- TEXT`` always sends TEXT (``amos -- sessions``); a word equal
    to a subcommand's name runs the subcommand. The prompt goes to the callback in
    ``ctx.meta["amos.prompt"]``.
    """

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        """Take the prompt words out of ``args`` before click sees them."""
        takes_value = {name for param in self.params if param.param_type_name == "option"
                       and not getattr(param, "is_flag", False) and not getattr(param, "count", False)
                       for name in param.opts}
        printing = False
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                ctx.meta["amos.prompt"] = " ".join(args[i + 1:]) or None
                args = args[:i]
                break
            if arg.startswith("-") and arg != "-":
                printing = printing or arg in ("-p", "--print")
                i += 2 if arg in takes_value else 1
                continue
            if arg in self.commands and not printing:
                break  # a subcommand: everything after it is its own
            words, rest, j = [], list(args[:i]), i
            while j < len(args):
                word = args[j]
                if word == "--":
                    words += args[j + 1:]
                    break
                if word.startswith("-") and word != "-":
                    rest += args[j:j + 2] if word in takes_value else [word]
                    j += 2 if word in takes_value else 1
                    continue
                words.append(word)
                j += 1
            ctx.meta["amos.prompt"] = " ".join(words)
            args = rest
            break
        return super().parse_args(ctx, args)


app = typer.Typer(
    name="amos",
    cls=_PromptGroup,
    help=(
        "amos — a terminal agent shell that can prove why it stopped.\n\n"
        "The options below start the interactive TUI; `amos run --help` lists the options of a\n"
        "one-shot run (they go after `run`).\n\n"
        "Examples:\n\n"
        "\b\n"
        "  amos                            # TUI (offline demo mode when no model is configured)\n"
        "  amos \"what is in this repo?\"    # TUI with that prompt sent\n"
        "  amos -c                         # TUI on the latest session of this workspace\n"
        "  amos --session my-work          # reopen a saved session in the TUI\n"
        "  amos -p \"what is here?\" -m openai:gpt-4o-mini   # one-shot run (like `amos run`)\n"
        "  amos -c -p \"now add a test\" --output-format stream-json\n"
        "  amos -- sessions                # send the word as a prompt, not the subcommand\n"
        "  amos run --demo                 # offline demo: fix a tiny project, verified\n"
        "  amos run --script s.json \"fix it\" --workspace ./proj --verify \"python3 -m pytest -q\"\n"
        "  amos sessions list              # saved sessions, newest first\n"
        "  amos models                     # known models, windows, prices, which keys are set\n"
        "  amos diff latest                # what the agent changed in the files (/undo puts it back)"
    ),
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
app.add_typer(config_app, name="config", help="Show, check and trust configuration.")
register_checkpoints(sessions_app)
app.add_typer(sessions_app, name="sessions",
              help="List, show, export, delete, checkpoint, restore and repair saved sessions.")
app.add_typer(evidence_app, name="evidence", help="List, read and prune durable tool evidence.")
app.add_typer(store_app, name="store", help="Move sessions and evidence between the folders and PostgreSQL.")
app.add_typer(mcp_app, name="mcp", help="List MCP servers and their tools; check that they start.")
app.command("diff")(diff_command)
app.command("models", help=models_command.__doc__)(models_command)

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (overrides user and project config).")]
ModelOpt = Annotated[str | None, typer.Option("-m", "--model", help="PROVIDER:MODEL, e.g. openai:gpt-4o-mini, scripted:PATH.")]
BaseUrlOpt = Annotated[str | None, typer.Option("--base-url", help="API base URL (local servers, proxies).")]
ScriptOpt = Annotated[Path | None, typer.Option("--script", help="Shorthand for --model scripted:PATH.")]
WorkspaceOpt = Annotated[Path | None, typer.Option("--workspace", help="Root the file tools are confined to.")]
SessionOpt = Annotated[str | None, typer.Option("-s", "--session", help="Resume this session (id, name or "
                                                                            "'latest', the newest anywhere).")]
ContinueOpt = Annotated[bool, typer.Option("-c", "--continue", help="Continue the most recent session of this "
                                                                    "workspace (--workspace, else this folder).")]
MaxStepsOpt = Annotated[int | None, typer.Option("--max-steps", min=1, help="Step cap (model calls) for this run.")]
VerifyOpt = Annotated[str | None, typer.Option("--verify", help="Completion check: complete only when CMD exits 0 "
                                                                "('human': a person confirms). Remembered by the session.")]
NoVerifyOpt = Annotated[bool, typer.Option("--no-verify", help="Forget the completion check the session remembers.")]
YesOpt = Annotated[bool, typer.Option("-y", "--yes", help="Approve every call that would ask (never overrides deny).")]
NoSaveOpt = Annotated[bool, typer.Option("--no-save", help="Do not write the session.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON object on stdout "
                                                      "(--output-format json).")]
OutputOpt = Annotated[str | None, typer.Option(
    "--output-format", metavar="FORMAT", help="text (the answer; default), json (one JSON object) or stream-json "
                                              "(one JSON object per line as the run goes, the result last).")]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="Print nothing but the final answer (no progress).")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", help="Write a debug log to the data directory.")]
SandboxOpt = Annotated[str | None, typer.Option(
    "--sandbox", metavar="MODE", help="Where commands run: workspace-write (default where bubblewrap works), "
                                      "read-only or danger-full-access (no sandbox: every command asks).")]
PlanOpt = Annotated[bool, typer.Option("--plan", help="Plan run: read-only sandbox, write tools denied, a plan "
                                                      "asked for.")]
AllowOpt = Annotated[list[str] | None, typer.Option(
    "--allow", metavar="RULE", help="Run calls matching RULE without asking, e.g. 'run_command(git status:*)', "
                                    "'write_file(docs/**)' (repeatable; not saved).")]
DenyRuleOpt = Annotated[list[str] | None, typer.Option(
    "--deny", metavar="RULE", help="Refuse calls matching RULE, e.g. 'run_command(rm:*)' (repeatable; not saved).")]
NoAskOpt = Annotated[bool, typer.Option("--no-ask", help="On a terminal, stop WAITING for approvals instead of "
                                                         "asking here.")]


_GROUPS = frozenset({"config", "sessions", "evidence", "mcp"})
"""Subcommands with commands of their own (``amos mcp tools --config …``)."""


def _version(value: bool) -> None:
    if value:
        print(f"amos {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    print_: Annotated[bool, typer.Option("-p", "--print", help="One-shot run of PROMPT (or piped stdin), as "
                                                              "`amos run`; prints the answer and exits.")] = False,
    config: ConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    script: ScriptOpt = None,
    workspace: WorkspaceOpt = None,
    session: SessionOpt = None,
    continue_last: ContinueOpt = False,
    max_steps: MaxStepsOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    yes: YesOpt = False,
    no_save: NoSaveOpt = False,
    verbose: VerboseOpt = False,
    sandbox: SandboxOpt = None,
    plan: PlanOpt = False,
    allow: AllowOpt = None,
    deny: DenyRuleOpt = None,
    json_out: JsonOpt = False,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    no_ask: NoAskOpt = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Start the interactive TUI (with PROMPT sent, when given), run one prompt with -p, or run a subcommand."""
    from amos.cli_flags import RunFlags

    flags = RunFlags(config=config, model=model, base_url=base_url, script=script, workspace=workspace,
                     session=session, max_steps=max_steps, verify=verify, no_verify=no_verify, yes=yes, no_save=no_save,
                     verbose=verbose, sandbox=sandbox, plan=plan, allow=tuple(allow or ()), deny=tuple(deny or ()),
                     no_ask=no_ask, continue_last=continue_last)
    one_shot = {"--print": print_, "--json": json_out, "--output-format": output, "--quiet": quiet}
    if ctx.invoked_subcommand is not None:
        given = flags.given() + [name for name, value in one_shot.items() if value]
        if given:
            sub = ctx.invoked_subcommand
            where = f"amos {sub} COMMAND {given[0]} …" if sub in _GROUPS else f"amos {sub} {given[0]} …"
            typer.echo(f"amos: {given[0]} goes after the subcommand: {where}", err=True)
            raise typer.Exit(2)
        return
    prompt = ctx.meta.get("amos.prompt")
    if print_:
        from amos.cli_run import cli_run

        raise typer.Exit(cli_run(prompt=prompt, demo=False, flags=flags, json_out=json_out, quiet=quiet,
                                 output=output))
    misplaced = [name for name, value in one_shot.items() if value] + (["--no-ask"] if no_ask else [])
    if misplaced:
        typer.echo(f"amos: {misplaced[0]} belongs to a one-shot run: amos -p \"PROMPT\" {misplaced[0]} … "
                   f"(or amos run \"PROMPT\" {misplaced[0]} …)", err=True)
        raise typer.Exit(2)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        which = "stdin" if not sys.stdin.isatty() else "stdout"
        typer.echo(f"amos: the TUI needs a terminal and {which} is not one; for a one-shot run use amos -p \"PROMPT\" "
                   "(or amos run; --output-format stream-json for events)", err=True)
        raise typer.Exit(2)
    from amos.cli_run import setup_logging
    from amos.errors import AmosError

    setup_logging(verbose)
    try:
        options = flags.options(interactive=True, require_model=False)
        from amos.tui.app import run_tui

        code = run_tui(options, first_line=prompt)
    except AmosError as exc:
        typer.echo(printable(f"amos: {exc}"), err=True)
        raise typer.Exit(exc.exit_code) from None
    raise typer.Exit(code)


@app.command("run")
def run_command(
    prompt: Annotated[str | None, typer.Argument(help="Prompt or slash command; '-' (or piped stdin) reads stdin.")] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Run the bundled offline demo (ends VERIFIED_COMPLETE).")] = False,
    config: ConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    script: ScriptOpt = None,
    workspace: WorkspaceOpt = None,
    session: SessionOpt = None,
    continue_last: ContinueOpt = False,
    max_steps: MaxStepsOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    yes: YesOpt = False,
    no_save: NoSaveOpt = False,
    json_out: JsonOpt = False,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    sandbox: SandboxOpt = None,
    plan: PlanOpt = False,
    allow: AllowOpt = None,
    deny: DenyRuleOpt = None,
    no_ask: NoAskOpt = False,
) -> None:
    """One-shot run: one prompt or slash command against a new or resumed session.

    Exit codes: 0 VERIFIED_COMPLETE/ANSWERED, 1 FAILED, 2 usage/config error,
    3 FALSE_COMPLETE, 4 WAITING, 5 WAITING_UNROUTED, 6 BOUNDED_STOP, 7 STUCK,
    8 UNCERTAIN, 130/143 interrupted.

    Examples:

    \b
      amos run --demo --json
      amos run --demo --output-format stream-json       # one JSON event per line, the result last
      amos run -c "and now the docs" -y -q             # continue this workspace's latest session
      amos run --script examples/hello/script.json --workspace examples/hello/workspace "what is here?"
      amos run --session latest "now add a test" --verify "python3 -m unittest"
      echo "summarise README.md" | amos run --script my-script.json
      amos run --session latest "/context loop" --json
      amos run --script s.json "tidy up" --allow 'run_command(git status:*)' --deny 'run_command(rm:*)'
      amos run --plan --model openai:gpt-4o-mini "how would you split cli.py?"

    Commands run in a bubblewrap sandbox (workspace-write: no writes outside the
    workspace, no network) and so without asking; write_file/edit_file still ask.
    On a terminal, approvals are asked here (y once, s this call, a always for a
    pattern in this session, n deny with a reason); --no-ask stops WAITING instead.
    """
    from amos.cli_flags import RunFlags
    from amos.cli_run import cli_run

    flags = RunFlags(config=config, model=model, base_url=base_url, script=script, workspace=workspace,
                     session=session, max_steps=max_steps, verify=verify, no_verify=no_verify, yes=yes, no_save=no_save,
                     verbose=verbose, sandbox=sandbox, plan=plan, allow=tuple(allow or ()), deny=tuple(deny or ()),
                     no_ask=no_ask, continue_last=continue_last)
    raise typer.Exit(cli_run(prompt=prompt, demo=demo, flags=flags, json_out=json_out, quiet=quiet, output=output))


@app.command("resume")
def resume_command(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id or name (or 'latest') that stopped WAITING.")],
    approve: Annotated[list[str] | None, typer.Option("--approve", metavar="CALL_ID", help="Approve a held call (repeatable).")] = None,
    deny: Annotated[list[str] | None, typer.Option("--deny", metavar="CALL_ID", help="Deny a held call (repeatable).")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Reason given to the model for --deny.")] = None,
    approve_all: Annotated[bool, typer.Option("--all", help="Approve every pending call.")] = False,
    confirm: Annotated[bool, typer.Option("--confirm", help="Confirm a completion claim a person must check "
                                          "(completion.human; --yes and --all never do).")] = False,
    reject: Annotated[str | None, typer.Option("--reject", metavar="REASON",
                                               help="Reject that claim; REASON goes to the model.")] = None,
    config: ConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    script: ScriptOpt = None,
    workspace: WorkspaceOpt = None,
    max_steps: MaxStepsOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    yes: YesOpt = False,
    no_save: NoSaveOpt = False,
    json_out: JsonOpt = False,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    sandbox: SandboxOpt = None,
    no_ask: NoAskOpt = False,
) -> None:
    """Continue a session that stopped WAITING on approvals or on a person's confirmation.

    Every pending call must be decided (--approve / --deny / --all); until then the
    session stays WAITING without a model call. A call that asks to run a command
    outside the sandbox is approved by its id only (--all and --yes never do). Then the held calls run in their
    original order and the same loop continues.

    Examples:

    \b
      amos resume 20261130-101500-ab12cd --approve call_2_0
      amos resume my-session --deny call_2_0 --reason "do not touch setup.py"
      amos resume latest --all --json
      amos resume latest --confirm                      # a person checked the work (completion.human)
      amos resume latest --reject "the report has no totals"
    """
    from amos.cli_flags import RunFlags
    from amos.cli_run import cli_resume

    flags = RunFlags(config=config, model=model, base_url=base_url, script=script, workspace=workspace,
                     max_steps=max_steps, verify=verify, no_verify=no_verify, yes=yes, no_save=no_save,
                     verbose=verbose, sandbox=sandbox, no_ask=no_ask)
    raise typer.Exit(cli_resume(session_id=session_id, approve=approve or [], deny=deny or [], reason=reason,
                                approve_all=approve_all, confirm=confirm, reject=reject, flags=flags,
                                json_out=json_out, quiet=quiet, output=output))


def _wants_json(argv: list[str]) -> str | None:
    """``json`` or ``stream-json`` when the command line asks for JSON output, else None."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--json":
            return "json"
        value = arg.partition("=")[2] if arg.startswith("--output-format=") else (
            argv[i + 1] if arg == "--output-format" and i + 1 < len(argv) else None)
        if value in ("json", "stream-json"):
            return value
    return None


def main() -> None:
    """Console-script entry point; a clean one-line error instead of a traceback.

    A usage error click finds itself (an unknown option, a bad value) is the usual usage
    text on stderr, exit 2 — and, when the line asked for ``--json`` or
    ``--output-format json|stream-json``, also the error ``result`` object on stdout, so a
    script parsing stdout always gets one (issue 21, "One JSON object shape").
    """
    from amos import cli_run

    cli_run.HOLD_UNTIL_EXIT.append(True)  # a late Ctrl+C never changes the exit code of a finished run
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        sys.exit(1)
    except typer.TyperException as exc:  # click's errors (typer vendors click: only this base is public)
        exit_code = int(getattr(exc, "exit_code", 1))
        if exit_code == 2 and _wants_json(sys.argv[1:]):
            from amos.cli_output import error_document, write_line

            doc = error_document(exc, exit_code=2)
            format_message = getattr(exc, "format_message", None)
            doc["error"] = {"code": "USAGE_ERROR", "message": format_message() if format_message else str(exc)}
            write_line(sys.stdout, doc)
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            typer.echo(f"amos: {exc}", err=True)
        sys.exit(exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
