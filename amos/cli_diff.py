"""``amos diff ID [--checkpoint N] [--stat]``: what the agent changed in a session's files (issue 20).

Colored on a terminal (Rich), plain text when piped. A thin client of
:meth:`amos.engine.Library.diff`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from amos.safe_text import printable

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (finds the session store).")]
IdArg = Annotated[str, typer.Argument(metavar="ID", help="Session id, name, unique id prefix or 'latest'.")]


def diff_command(
    session_id: IdArg,
    checkpoint: Annotated[int | None, typer.Option("--checkpoint", "-c", metavar="N", min=1,
                                                   help="Since checkpoint N (`amos sessions checkpoints ID`); "
                                                        "default: the latest run that changed files.")] = None,
    stat: Annotated[bool, typer.Option("--stat", help="A summary (files and lines changed) instead.")] = False,
    config: ConfigOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Show what the agent changed in a session's files, as a unified diff: the files it
    changed, from before the latest run that changed files (or checkpoint N) to now.

    Exit codes: 0 shown (an empty diff too), 1 no file snapshots for this session,
    2 bad input (unknown session or checkpoint).

    Examples:

    \b
      amos diff latest
      amos diff latest --checkpoint 2 --stat
      amos diff my-work | less -R
    """
    from amos.engine import Library
    from amos.errors import AmosError

    color = sys.stdout.isatty() and not json_out
    try:
        library, warnings = Library.open(config)
        resolved, report, more = library.diff(session_id, checkpoint, stat=stat)
    except AmosError as exc:
        if json_out:
            code = str(getattr(exc, "code", "error")).upper()
            typer.echo(json.dumps({"ok": False, "error": {"code": code, "message": str(exc)}}, ensure_ascii=False))
        typer.echo(printable(f"amos: {exc}"), err=True)
        raise typer.Exit(getattr(exc, "exit_code", 2)) from None
    for warning in warnings + more:
        typer.echo(printable(f"amos: warning: {warning}"), err=True)
    if json_out:
        typer.echo(json.dumps({"session_id": resolved, **report.to_json()}, ensure_ascii=False))
        return
    if not report.text:
        typer.echo(f"amos: no file changes ({report.since})", err=True)
        return
    if color:
        from rich.console import Console

        from amos.render_diff import diff_renderable

        Console(highlight=False).print(diff_renderable(report.text), soft_wrap=True)
        return
    sys.stdout.write(printable(report.text))  # control characters escaped, as everywhere amos prints
    sys.stdout.flush()
