"""``amos sessions list | show | delete | export``: manage saved sessions (spec/cli.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from amos.safe_text import printable

sessions_app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (finds the session store).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]


def _library(config: Path | None):
    from amos.engine import Library

    library, warnings = Library.open(config)
    _warn(warnings)
    return library


def _warn(warnings: list[str]) -> None:
    """Problems met while loading (a torn journal line, entries recovered after a crash)."""
    for warning in warnings:
        typer.echo(f"amos: warning: {warning}", err=True)


def _echo(text: str) -> None:
    """Print one line for people: control characters from model text, tool arguments or
    names (``ESC[2J``, OSC title sequences) are shown escaped, never sent to the terminal."""
    typer.echo(printable(text))


def _fail(exc: Exception) -> None:
    typer.echo(printable(f"amos: {exc}"), err=True)
    raise typer.Exit(getattr(exc, "exit_code", 2))


@sessions_app.command("list")
def list_sessions(
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    workspace: Annotated[Path | None, typer.Option(
        "--workspace", metavar="DIR", help="Only the sessions of this workspace (default: all, the current "
                                           "folder's marked with *).")] = None,
) -> None:
    """Saved sessions, newest first, with the workspace and host (machine) each last ran in.

    Examples:

    \b
      amos sessions list
      amos sessions list --workspace .      # the sessions `amos -c` picks from
      amos sessions list --json
    """
    from amos.errors import AmosError

    try:
        rows = _library(config).sessions()
    except AmosError as exc:
        _fail(exc)
    here = (workspace or Path.cwd()).expanduser().resolve()

    def ours(row) -> bool:
        return bool(row.workspace) and Path(row.workspace).resolve() == here

    if workspace is not None:
        rows = [r for r in rows if ours(r)]
    if json_out:
        typer.echo(json.dumps({"sessions": [{**r.model_dump(), "current_workspace": ours(r)} for r in rows]},
                              ensure_ascii=False))
        return
    if not rows:
        _echo("no saved sessions" + (f" of {here}" if workspace is not None else ""))
        return
    name_width = max([4] + [len(r.name or "") for r in rows])
    host_width = min(16, max([4] + [len(r.machine or "-") for r in rows]))  # the machine it last ran on
    _echo(f"  {'ID':<22}  {'UPDATED (UTC)':<19}  {'LAST VERDICT':<17}  {'MSGS':>4}  {'COST':>8}  "
          f"{'NAME':<{name_width}}  {'WORKSPACE':<24}  {'HOST':<{host_width}}  TITLE")
    for r in rows:
        cost = f"${r.cost_usd:.4f}" if r.cost_usd is not None else "-"
        title = f"BROKEN: {r.broken}" if r.broken else (r.title or "")
        mark = "*" if ours(r) else " "
        _echo(f"{mark} {r.id:<22}  {r.updated_at[:19].replace('T', ' '):<19}  {r.last_verdict or '-':<17}  "
              f"{r.messages:>4}  {cost:>8}  {r.name or '-':<{name_width}}  {_short_path(r.workspace):<24}  "
              f"{(r.machine or '-')[:host_width]:<{host_width}}  {title}")
    if workspace is None and any(ours(r) for r in rows):
        _echo(f"* this workspace ({here}); `amos -c` continues the newest of them")


def _short_path(path: str | None) -> str:
    """A workspace for the table: ``~/…`` under the home folder, at most 24 characters."""
    if not path:
        return "-"
    home = str(Path.home())
    text = "~" + path[len(home):] if path == home or path.startswith(home + "/") else path
    return text if len(text) <= 24 else "…" + text[-23:]


@sessions_app.command("show")
def show_session(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id or name.")],
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show one session: host settings, last stop receipt, pending approvals, transcript.

    Example: amos sessions show 20261130-101500-ab12cd
    """
    from amos.errors import AmosError
    from amos.render import summary_line

    try:
        loaded = _library(config).load(session_id)
    except AmosError as exc:
        _fail(exc)
    _warn(loaded.warnings)
    session = loaded.session
    if json_out:
        typer.echo(session.model_dump_json())
        return
    _echo(f"session {session.id}" + (f" ({session.name})" if session.name else ""))
    _echo(f"  title:     {session.title or '-'}")
    _echo(f"  updated:   {session.updated_at}")
    host = session.host
    _echo(f"  model:     {host.model or '-'}")
    _echo(f"  workspace: {host.workspace or '-'}")
    _echo(f"  verify:    {host.verify or '-'}")
    u = session.usage
    _echo(f"  usage:     {u.input_tokens} in + {u.output_tokens} out tokens, {u.model_calls} model call{'s' if u.model_calls != 1 else ''}")
    if session.last_stop:
        _echo(f"  last stop: {summary_line(session.last_stop)}")
    if session.pending:
        from datetime import UTC, datetime

        deadline = session.pending.deadline
        try:
            when = datetime.fromisoformat(deadline) if deadline else None
            overdue = bool(when and (when if when.tzinfo else when.replace(tzinfo=UTC)) < datetime.now(UTC))
        except ValueError:
            overdue = False
        for held in session.pending.undecided():
            _echo(f"  pending:   {held.call.call_id} {held.call.tool_name} "
                       f"{json.dumps(held.call.arguments, ensure_ascii=False)[:120]}"
                       + ("  (overdue)" if overdue else f"  (decide by {deadline})"))
        _echo(f"  resume:    amos resume {session.id} --approve CALL_ID | --deny CALL_ID | --all")
    _echo("")
    for message in session.messages:
        for part in message.parts:
            kind = part.part_kind
            if kind == "text":
                label = message.kind if message.kind in ("feedback", "summary") else message.role
                _echo(f"[{label}] {part.text}")
            elif kind == "tool_call":
                args = json.dumps(part.arguments, ensure_ascii=False) if part.raw_arguments is None else part.raw_arguments
                _echo(f"[{message.role}] → {part.tool_name} {args[:200]}  ({part.call_id})")
            else:
                first = part.content.strip().splitlines()[0] if part.content.strip() else ""
                _echo(f"[tool] ← {part.tool_name} {part.status}: {first[:200]}")


@sessions_app.command("delete")
def delete_session(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id or name.")],
    config: ConfigOpt = None,
) -> None:
    """Delete a saved session (refused while a run holds it).

    Example: amos sessions delete 20261130-101500-ab12cd
    """
    from amos.errors import AmosError

    try:
        deleted = _library(config).delete(session_id)
    except AmosError as exc:
        _fail(exc)
    typer.echo(f"deleted session {deleted}")


EXPORT_FORMATS = ("md", "json")


@sessions_app.command("export")
def export_session(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id or name.")],
    fmt: Annotated[str, typer.Option("--format", metavar="md|json",
                                     help="md: readable Markdown; json: the whole session file.")] = "md",
    output: Annotated[Path | None, typer.Option("--output", "-o", metavar="FILE",
                                                help="Write to FILE (atomically) instead of stdout.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Export a session: the conversation, tool calls and stop receipt as Markdown, or its JSON.

    Example: amos sessions export 20261130-101500-ab12cd --format md -o session.md
    """
    import os

    from amos.atomic import atomic_write_text
    from amos.errors import AmosError, SessionError, UsageError

    try:
        if fmt not in EXPORT_FORMATS:
            raise UsageError(f"unknown export format {fmt!r}: --format accepts {' or '.join(EXPORT_FORMATS)}")
        if output is not None and output.is_dir():
            raise UsageError(f"{output} is a folder; give a file name with --output")
        if output is not None and os.path.lexists(output) and not force:
            raise UsageError(f"{output} already exists; use --force to overwrite it")
        if output is not None and os.path.lexists(output) and (output.is_symlink() or not output.is_file()):
            raise UsageError(f"{output} is not a regular file (a link, device or pipe); amos only replaces "
                             "regular files — write to stdout and redirect instead")
        if output is not None and not output.absolute().parent.is_dir():
            raise UsageError(f"the folder of {output} does not exist")
        text, warnings = _library(config).export(session_id, fmt)
    except AmosError as exc:
        _fail(exc)
    _warn(warnings)
    if output is None:
        try:
            typer.echo(text, nl=False)
            sys.stdout.flush()
        except OSError as exc:
            _fail(SessionError("write_failed", f"cannot write the export to stdout: {exc.strerror or exc}",
                               exit_code=1))
        return
    try:
        atomic_write_text(output, text)
    except OSError as exc:
        _fail(SessionError("write_failed", f"cannot write {output}: {exc.strerror or exc}", exit_code=1))
    typer.echo(f"wrote {output.resolve()}", err=True)
