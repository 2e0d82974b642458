"""``amos sessions checkpoints | restore | repair``: get back to a known state (spec/cli.md).

Registered on the ``sessions`` command group by :func:`register`. Restore and repair
hold the session's run lock while they write, so they never race a running amos.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (finds the session store).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]
IdArg = Annotated[str, typer.Argument(metavar="ID", help="Session id, name, unique id prefix or 'latest'.")]


def _open(config: Path | None):
    from amos.host import RunOptions, load_host_config, open_store

    cfg, warnings = load_host_config(RunOptions(config_path=config))
    for warning in warnings:
        typer.echo(f"amos: warning: {warning}", err=True)
    return open_store(cfg), int(cfg.sessions.max_checkpoints)


def _fail(exc: Exception, json_out: bool = False) -> None:
    if json_out:
        code = str(getattr(exc, "code", "error")).upper()
        typer.echo(json.dumps({"ok": False, "error": {"code": code, "message": str(exc)}}, ensure_ascii=False))
    typer.echo(f"amos: {exc}", err=True)
    raise typer.Exit(getattr(exc, "exit_code", 2))


def checkpoint_rows_text(rows: list) -> str:
    """A table of checkpoints for people (oldest first)."""
    if not rows:
        return "no checkpoints yet (one is taken at the end of every run and by /session save)"
    lines = [f"{'N':>4}  {'TAKEN (UTC)':<19}  {'REASON':<17}  {'MSGS':>4}  {'LAST VERDICT':<17}  LABEL"]
    for r in rows:
        lines.append(f"{r.number:>4}  {r.created_at[:19].replace('T', ' '):<19}  {r.reason:<17}  {r.messages:>4}  "
                     f"{r.last_verdict or '-':<17}  {r.label or ''}".rstrip())
    return "\n".join(lines)


def checkpoints(session_id: IdArg, config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """List a session's checkpoints, oldest first: number, time, reason, label, message
    count and last verdict.

    Example: amos sessions checkpoints latest
    """
    from amos.errors import AmosError

    try:
        store, _ = _open(config)
        resolved = store.resolve(session_id)
        rows = store.checkpoints_of(resolved).list()
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
        store, keep = _open(config)
        resolved = store.resolve(session_id)
        lock = store.lock(resolved)
        try:
            current = store.load(resolved)
            restored = store.restore(current, checkpoint, keep=keep)
            undo = current.last_checkpoint
        finally:
            store.close_journal(resolved)
            lock.release()
    except AmosError as exc:
        _fail(exc, json_out)
    for warning in store.warnings:
        typer.echo(f"amos: warning: {warning}", err=True)
    if json_out:
        typer.echo(json.dumps({"session_id": resolved, "restored": checkpoint, "undo_checkpoint": undo,
                               "messages": len(restored.messages)}))
        return
    typer.echo(f"restored session {resolved} to checkpoint {checkpoint} ({len(restored.messages)} messages); "
               f"the state before is checkpoint {undo} (`amos sessions restore {resolved} --checkpoint {undo}` "
               "undoes this)")


def repair(session_id: IdArg, config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Rebuild a session whose session.json is unreadable from its newest good
    checkpoint plus its journal. The broken file is kept as session.json.corrupt-<time>.

    Example: amos sessions repair 20261130-101500-ab12cd
    """
    from amos.errors import AmosError

    try:
        store, _ = _open(config)
        resolved = store.resolve(session_id)
        lock = store.lock(resolved)
        try:
            result = store.repair(resolved)
        finally:
            lock.release()
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
