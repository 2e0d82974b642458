"""The evidence references sessions hold: a second record of each stored record's hash.

Every tool result stored as evidence keeps its full reference (``{id, sha256, size,
…}``) in the session history (``ToolResultPart.evidence``). ``amos evidence rebuild``
checks record files against these as well as against the old index, so a lost or
damaged index never lets a changed record be re-indexed under a new hash (issue 17
item 4).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from amos.errors import SessionError


def _references(value: Any, depth: int = 0) -> Iterator[tuple[str, str, int]]:
    """``(id, sha256, size)`` of every ``tool_result`` part's ``evidence`` inside ``value``."""
    if depth > 64:
        return
    if isinstance(value, dict):
        ref = value.get("evidence") if value.get("part_kind") == "tool_result" else None
        if isinstance(ref, dict) and isinstance(ref.get("id"), str) and isinstance(ref.get("sha256"), str) \
                and type(ref.get("size")) is int:
            yield ref["id"], ref["sha256"], ref["size"]
        for item in value.values():
            if isinstance(item, dict | list):
                yield from _references(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list):
                yield from _references(item, depth + 1)


def session_references(sessions: Any) -> dict[str, tuple[str, int]]:
    """``{evidence id: (sha256, size bytes)}`` from every session of a session store.

    Reads each session's snapshot and its journal (read only: nothing is replayed,
    repaired or set aside). A session that cannot be read is passed over.

    Args:
        sessions: a :class:`~amos.session_store.SessionStore`.

    Returns:
        The references found; when two disagree for one id, the first seen is kept
        (the record then fails against one of them either way).
    """
    found: dict[str, tuple[str, int]] = {}
    for row in sessions.list():
        if row.broken:
            continue
        sources: list[Any] = []
        try:
            sources.append(sessions.read_data(row.id).get("messages"))
        except (SessionError, ValueError):
            pass
        try:
            sources.extend(sessions.journal_entries(row.id))
        except SessionError:
            pass
        for source in sources:
            for record_id, sha256, size in _references(source):
                found.setdefault(record_id, (sha256, size))
    return found


__all__ = ["session_references"]
