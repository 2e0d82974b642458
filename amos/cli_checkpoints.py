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


def _part(files: bool, conversation: bool, both: bool) -> str:
    from amos.errors import UsageError

    chosen = [name for name, on in (("files", files), ("conversation", conversation), ("both", both)) if on]
    if len(chosen) > 1:
        raise UsageError(f"choose one of --files, --conversation and --both (got --{' and --'.join(chosen)})")
    return chosen[0] if chosen else "both"


def restore(
    session_id: IdArg,
    checkpoint: Annotated[int, typer.Option("--checkpoint", "-c", metavar="N", min=1,
                                            help="Checkpoint number (see `amos sessions checkpoints ID`).")],
    files: Annotated[bool, typer.Option("--files", help="Only the files the agent changed since checkpoint N.")]
    = False,
    conversation: Annotated[bool, typer.Option("--conversation", help="Only the conversation.")] = False,
    both: Annotated[bool, typer.Option("--both", help="Files and conversation (the default).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Also overwrite files changed after the agent's "
                                                        "change (their current state is snapshotted first).")]
    = False,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Restore a session to checkpoint N: the files the agent changed since, and the
    conversation (both by default, so they never disagree). The conversation's current
    state becomes a new checkpoint first and the files' current state a new snapshot,
    so a restore can be undone (--files too: restoring the checkpoint it names with
    --files puts the files back exactly). Files changed after the agent's change (by you or
    another program) stop the restore unless --force; files the agent never changed
    are never touched.

    Exit codes: 0 restored, 1 refused (files changed after the agent; nothing was
    restored), a file could not be written, or a file has no copy to restore (ignored
    and changed by a command, or too large: the others were restored), 2 bad input
    (unknown session or checkpoint).

    Examples:

    \b
      amos sessions restore latest --checkpoint 1
      amos sessions restore latest --checkpoint 3 --files --force
      amos sessions restore my-work -c 2 --conversation
    """
    from amos.errors import AmosError

    try:
        done = _open(config).restore(session_id, checkpoint, what=_part(files, conversation, both), force=force)
    except AmosError as exc:
        _fail(exc, json_out)
    for warning in [*done.warnings, *(done.files.notes if done.files is not None else ())]:
        typer.echo(printable(f"amos: warning: {warning}"), err=True)
    resolved, undo = done.session_id, done.undo_checkpoint
    code = 1 if done.refused or (done.files is not None and (done.files.failed or done.files.unavailable)) else 0
    if json_out:
        typer.echo(json.dumps({"session_id": resolved, "restored": checkpoint, "undo_checkpoint": undo,
                               "messages": done.messages, "what": done.what, "conversation": done.conversation,
                               "files": done.files.to_json() if done.files is not None else None},
                              ensure_ascii=False))
        raise typer.Exit(code)
    if done.files is not None:
        typer.echo(printable(_files_line(done.files, checkpoint)), err=code != 0)
        if not done.conversation and undo is not None:
            typer.echo(f"the files' state before is checkpoint {undo} (`amos sessions restore {resolved} "
                       f"--checkpoint {undo} --files` undoes this)")
    if done.conversation:
        typer.echo(f"restored session {resolved} to checkpoint {checkpoint} ({done.messages} messages); "
                   f"the state before is checkpoint {undo} (`amos sessions restore {resolved} --checkpoint {undo} "
                   "--conversation` undoes this)")
    raise typer.Exit(code)


def _files_line(files, checkpoint: int) -> str:
    """One line on what a restore did to the files."""
    if files.refused:
        listed = "; ".join(f"{path} ({reason})" for path, reason in files.conflicts[:20])
        return (f"amos: nothing was restored: these files were changed after the agent's change: {listed}; "
                "add --force to overwrite them (their current state is snapshotted first)")
    if not files.restored:
        text = f"files: nothing to put back since checkpoint {checkpoint}"
    else:
        text = f"files: put back {len(files.restored)} file(s) as at checkpoint {checkpoint}: " + ", ".join(
            files.restored[:20]) + (f" and {len(files.restored) - 20} more" if len(files.restored) > 20 else "")
    if files.forced:
        text += "; overwritten although changed after the agent: " + ", ".join(p for p, _ in files.conflicts)
    if files.unavailable:
        text += "; NOT restored, no copy was kept: " + "; ".join(f"{p} ({r})" for p, r in files.unavailable[:10])
    if files.failed:
        text += "; FAILED: " + "; ".join(f"{p} ({r})" for p, r in files.failed[:10])
    return text


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
