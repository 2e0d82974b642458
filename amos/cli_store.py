"""``amos store migrate --to postgres|files``: move sessions and evidence between the file
store and the PostgreSQL store (issue 22), through the host API (:class:`amos.engine.Library`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from amos.safe_text import printable

store_app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)


@store_app.command("migrate")
def migrate_command(
    to: Annotated[str, typer.Option("--to", metavar="postgres|files",
                                    help="Copy into PostgreSQL (store.url / AMOS_STORE_URL) or into the folders.")],
    config: Annotated[Path | None, typer.Option("--config", help="Config file (the folders and store.url).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON report on stdout (progress on stderr).")] = False,
) -> None:
    """Copy every session and evidence record to the other backend, verifying every hash.

    Safe to rerun: what the destination already holds is skipped; a session that differs
    there is left alone and reported (exit 1). Nothing is deleted from the source; switch
    store.backend afterwards.

    Examples:

    \b
      AMOS_STORE_URL=postgresql://amos@db/amos amos store migrate --to postgres
      amos store migrate --to files --json
    """
    from amos.engine import Library
    from amos.errors import AmosError

    if to not in ("postgres", "files"):
        typer.echo(printable(f"amos: --to must be postgres or files (got {to!r})"), err=True)
        raise typer.Exit(2)
    try:
        library, warnings = Library.open(config)
        for warning in warnings:
            typer.echo(printable(f"amos: warning: {warning}"), err=True)
        report = library.migrate_store(to, lambda line: typer.echo(printable(line), err=json_out))
    except AmosError as exc:
        typer.echo(printable(f"amos: {exc}"), err=True)
        raise typer.Exit(getattr(exc, "exit_code", 2)) from None
    if json_out:
        typer.echo(json.dumps(report.to_dict()))
    raise typer.Exit(1 if report.conflicts else 0)
