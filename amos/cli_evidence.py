"""``amos evidence list | read | prune``: audit durable tool evidence (issue 6).

Evidence outlives sessions. Every command takes ``--config`` for the store's
directory and scope (the same config the runs used). Reads verify each record's
size and SHA-256 first and print nothing of a record that fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from amos.safe_text import printable

evidence_app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (evidence directory and scope).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]
SessionOpt = Annotated[str | None, typer.Option("--session", help="Only records of this session (id or name).")]


def _open(config: Path | None):
    """The library of the configured stores (evidence, and sessions for ``--session`` names)."""
    from amos.engine import Library

    library, warnings = Library.open(config)
    for warning in warnings:
        typer.echo(f"amos: warning: {warning}", err=True)
    return library


def _safe(value: object) -> str:
    """A value for one terminal line: control characters (escape sequences, newlines) shown as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in str(value))


def _fail(exc: Exception, json_out: bool = False) -> None:
    """One line on stderr (and, with --json, one error object on stdout), then exit."""
    typer.echo(printable(f"amos: {exc}"), err=True)
    if json_out:
        code = getattr(exc, "code", None) or "USAGE_ERROR"
        typer.echo(json.dumps({"ok": False, "error": {"code": f"EVIDENCE_{str(code).upper()}"
                                                       if not str(code).isupper() else str(code),
                                                       "message": str(exc)}}, ensure_ascii=False))
    raise typer.Exit(getattr(exc, "exit_code", 2))


@evidence_app.command("list")
def list_evidence(
    session: SessionOpt = None,
    after: Annotated[str | None, typer.Option("--after", help="Cursor: the last id of the previous page.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Entries per page.")] = 100,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Stored evidence records, oldest first (metadata only: no results, no arguments).

    Example: amos evidence list --session latest --json
    """
    from amos.errors import AmosError

    try:
        library = _open(config)
        page = library.evidence_page(session=session, after=after, limit=limit)
    except AmosError as exc:
        _fail(exc, json_out)
    if json_out:
        typer.echo(json.dumps(page.to_dict(), ensure_ascii=False))
        return
    if not page.entries:
        orphaned = after is None and library.evidence_orphaned()
        typer.echo("no evidence records" + (" in the index, but record files exist: run `amos evidence rebuild`"
                                            if orphaned else ""))
        return
    typer.echo(f"{'ID':<36}  {'STORED (UTC)':<19}  {'TOOL':<14}  {'STATUS':<10}  {'BYTES':>9}  CALL")
    for e in page.entries:
        typer.echo(f"{_safe(e.id):<36}  {_safe(e.stored_at)[:19].replace('T', ' '):<19}  {_safe(e.tool):<14}  "
                   f"{_safe(e.status):<10}  {e.size:>9}  {_safe(e.call_id)}")
    if page.next_cursor:
        typer.echo(f"more: amos evidence list --after {page.next_cursor}")


@evidence_app.command("read")
def read_evidence(
    id_or_ref: Annotated[str, typer.Argument(metavar="ID_OR_REF", help="Record id (or a unique prefix of one, 4+ characters), or a reference as JSON.")],
    offset: Annotated[int, typer.Option("--offset", min=0, help="First character (code point).")] = 0,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Most characters (default: all).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Print a record's exact stored JSON (integrity verified first).

    Example: amos evidence read 01a2… --offset 0 --limit 65536
    """
    from amos.errors import AmosError

    try:
        library = _open(config)
        ref = library.evidence_reference(id_or_ref)
        if limit is None and offset == 0:
            sys.stdout.write(library.evidence_bytes(ref).decode("utf-8"))
            sys.stdout.write("\n")
            return
        chunk = library.evidence_chunk(ref, offset, limit)
    except AmosError as exc:
        _fail(exc)
    sys.stdout.write(chunk.text)
    sys.stdout.write("\n")
    if chunk.next_offset is not None:
        typer.echo(f"amos: more from --offset {chunk.next_offset} (of {chunk.total_chars} characters)", err=True)


@evidence_app.command("prune")
def prune_evidence(
    older_than: Annotated[float | None, typer.Option("--older-than", min=0, metavar="DAYS",
                                                     help="Delete records stored more than DAYS ago.")] = None,
    session: SessionOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete records: expired ones (evidence.ttl_days), older ones, or a session's.

    With no option, only records past ``evidence.ttl_days`` are removed.

    Example: amos evidence prune --older-than 30
    """
    import math

    from amos.errors import AmosError

    if older_than is not None and not math.isfinite(older_than):
        _fail(ValueError("--older-than needs a finite number of days, e.g. 30"), json_out)
    try:
        removed = _open(config).evidence_prune(older_than, session)
    except AmosError as exc:
        _fail(exc, json_out)
    if json_out:
        typer.echo(json.dumps({"removed": removed}))
    else:
        typer.echo(f"removed {removed} evidence record(s)")


@evidence_app.command("rebuild")
def rebuild_evidence(config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Rebuild the scope's index from its record files (after a damaged or deleted index).

    Records are re-verified; an acknowledgement is kept only where the old index
    confirms the same hash, else it is reported as ``written``. A record whose content
    no longer matches the SHA-256 recorded for it (in the old index or a session's
    reference) is listed as corrupt, kept with that hash, and the exit code is 1.

    Example: amos evidence rebuild
    """
    from amos.errors import AmosError

    try:
        report = _open(config).evidence_rebuild()
    except AmosError as exc:
        _fail(exc, json_out)
    corrupt = report.get("corrupt") or []
    if json_out:
        typer.echo(json.dumps(report, ensure_ascii=False))
    else:
        skipped = report.get("skipped") or []
        typer.echo(f"indexed {report.get('indexed', 0)} record(s)"
                   + (f"; skipped {len(skipped)} unreadable: {', '.join(map(_safe, skipped[:10]))}" if skipped else "")
                   + (f"; {len(corrupt)} corrupt (kept, with the SHA-256 they were stored with): "
                      f"{', '.join(map(_safe, corrupt[:10]))}" if corrupt else ""))
    if corrupt:
        typer.echo(f"amos: {len(corrupt)} evidence record(s) no longer match the SHA-256 recorded when they were "
                   "stored; they stay listed and every read of them fails", err=True)
        raise typer.Exit(1)
