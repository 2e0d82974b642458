"""A session rebuilt from its snapshot and the journal entries after it, an invalid
entry found by bisection and ignored with everything after it (both session stores).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amos.errors import SessionError
from amos.journal import replay
from amos.journal_gaps import JournalGap
from amos.sessions import Session, validate_session


def replay_validated(session_id: str, data: dict[str, Any], entries: list[dict[str, Any]], *, where: str,
                     snapshot_where: str, load_base: Callable[[], dict[str, Any]], live: bool,
                     gaps: list[JournalGap], warnings: list[str]) -> Session:
    """The snapshot ``data`` (or what ``load_base()`` returns afresh) with ``entries``
    applied (past any ``gaps``, :func:`amos.journal.replay`).

    Args:
        session_id: the session.
        data: its snapshot, migrated (changed in place).
        entries: journal entries after the snapshot, in order.
        where / snapshot_where: how messages name the journal and the snapshot.
        load_base: a fresh copy of the snapshot (each bisection step replays anew).
        live: another process runs the session now.
        gaps: the journal's unreadable runs.
        warnings: the store's warning log (this replay's warnings are added).

    Raises:
        SessionError: ``corrupt`` when the snapshot itself is invalid.
    """
    def attempt(count: int, base: dict[str, Any] | None = None) -> tuple[Session, int, list[str]]:
        current = base if base is not None else load_base()
        applied, problems = replay(current, entries[:count], live=live, gaps=gaps)
        return validate_session(current, where), applied, problems

    try:
        session, applied, problems = attempt(len(entries), data)
    except SessionError as exc:
        good, bad = 0, len(entries)  # attempt(good) validates; attempt(bad) does not
        while bad - good > 1:
            middle = (good + bad) // 2
            try:
                attempt(middle)
                good = middle
            except SessionError:
                bad = middle
        try:
            session, applied, problems = attempt(good)
        except SessionError:  # the snapshot itself is invalid
            validate_session(load_base(), snapshot_where)
            raise
        warnings.append(f"{where}: entry {entries[good].get('seq')} would make the session invalid "
                        f"({str(exc).removeprefix(where + ': ')}); ignored it and the "
                        f"{len(entries) - good - 1} entries after it")
    warnings.extend(w for w in problems if w not in warnings)
    if applied:
        warnings.append(f"session {session_id}: recovered {applied} journal entries written after "
                        "its last snapshot (amos stopped before saving)")
    return session
