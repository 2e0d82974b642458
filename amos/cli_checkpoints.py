"""``amos sessions checkpoints | restore | repair``: get back to a known state (spec/cli.md).

Registered on the ``sessions`` command group by :func:`register`. Restore and repair
hold the session's run lock while they write, so they never race a running amos.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from amos.safe_text import printable

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (finds the session store).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]
IdArg = Annotated[str, typer.Argument(metavar="ID", help="Session id, name, unique id prefix or 'latest'.")]


def _open(config: Path | None):
    from amos.engine import Library

    library, warnings = Library.open(config)
    for warning in warnings:
        typer.echo(f"amos: warning: {warning}", err=True)
    return library


def _fail(exc: Exception, json_out: bool = False) -> None:
    if json_out:
        code = str(getattr(exc, "code", "error")).upper()
        typer.echo(json.dumps({"ok": False, "error": {"code": code, "message": str(exc)}}, ensure_ascii=False))
    typer.echo(printable(f"amos: {exc}"), err=True)
    raise typer.Exit(getattr(exc, "exit_code", 2))


def checkpoints(session_id: IdArg, config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """List a session's checkpoints, oldest first: number, time, reason, label, message
    count and last verdict.

    Example: amos sessions checkpoints latest
    """
    from amos.errors import AmosError
    from amos.render import checkpoint_rows_text

    try:
        resolved, rows = _open(config).checkpoints(session_id)
    except AmosError as exc:
        _fail(exc, json_out)
    if json_out:
        typer.echo(json.dumps({"session_id": resolved, "checkpoints": [r.model_dump() for r in rows]},
                              ensure_ascii=False))
        return
    typer.echo(checkpoint_rows_text(rows))


def restore(
    session_id: IdArg,
    checkpoint: Annotated[int, typer.Option("--checkpoint", "-c", metavar="N", min=1,
                                            help="Checkpoint number (see `amos sessions checkpoints ID`).")],
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Restore a session to checkpoint N. The current state becomes a new checkpoint
    first, so the restore can be undone by restoring that one.

    Example: amos sessions restore latest --checkpoint 1
    """
    from amos.errors import AmosError

    try:
        done = _open(config).restore(session_id, checkpoint)
    except AmosError as exc:
        _fail(exc, json_out)
    for warning in done.warnings:
        typer.echo(f"amos: warning: {warning}", err=True)
    resolved, undo = done.session_id, done.undo_checkpoint
    if json_out:
        typer.echo(json.dumps({"session_id": resolved, "restored": checkpoint, "undo_checkpoint": undo,
                               "messages": done.messages}))
        return
    typer.echo(f"restored session {resolved} to checkpoint {checkpoint} ({done.messages} messages); "
               f"the state before is checkpoint {undo} (`amos sessions restore {resolved} --checkpoint {undo}` "
               "undoes this)")


def repair(session_id: IdArg, config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Rebuild a session whose session.json is unreadable from its newest good
    checkpoint plus its journal. The broken file is kept as session.json.corrupt-<time>.

    Example: amos sessions repair 20261130-101500-ab12cd
    """
    from amos.errors import AmosError

    try:
        resolved, result = _open(config).repair(session_id)
    except AmosError as exc:
        _fail(exc, json_out)
    for warning in result.warnings:
        typer.echo(f"amos: warning: {warning}", err=True)
    if json_out:
        typer.echo(json.dumps({"session_id": resolved, "source": result.source, "replayed": result.replayed,
                               "set_aside": str(result.set_aside) if result.set_aside else None,
                               "messages": len(result.session.messages)}))
        return
    if result.source == "snapshot":
        typer.echo(f"session {resolved} was readable; applied {result.replayed} journal entries and saved it "
                   f"({len(result.session.messages)} messages)")
    else:
        typer.echo(f"repaired session {resolved} from {result.source} plus {result.replayed} journal entries "
                   f"({len(result.session.messages)} messages); the unreadable file is kept as "
                   f"{result.set_aside.name if result.set_aside else '-'}")


def register(app: typer.Typer) -> None:
    """Add ``checkpoints``, ``restore`` and ``repair`` to the ``sessions`` group."""
    app.command("checkpoints")(checkpoints)
    app.command("restore")(restore)
    app.command("repair")(repair)
