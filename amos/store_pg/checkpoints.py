"""A session's checkpoints in PostgreSQL: rows of ``amos_checkpoints`` (issue 22).

The interface of :class:`amos.checkpoints.Checkpoints`: a checkpoint is one INSERT of
its row and snapshot together (complete or absent), numbers only grow and are never
reused (the highest ever taken is kept by the session's ``last_checkpoint`` and the
rows), and pruning keeps labelled ones and ``before_compaction`` ones longest.
"""

from __future__ import annotations

import json
from typing import Any

from amos.checkpoints import CheckpointInfo
from amos.errors import SessionError


class PgCheckpoints:
    """The checkpoints of one session.

    Args:
        store: the :class:`~amos.store_pg.sessions.PgSessionStore` (its connections).
        session_id: the session.
    """

    def __init__(self, store: Any, session_id: str):
        self.store = store
        self.session_id = session_id

    def where(self, number: int) -> str:
        """How messages name checkpoint ``number``."""
        return f"{self.store.path(self.session_id)}/checkpoints/{number}"

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        return self.store._read("checkpoints", sql, (self.session_id, *args))

    def highest(self) -> int:
        """The highest checkpoint number stored (0 when none)."""
        return int(self._rows("SELECT coalesce(max(number), 0) FROM amos_checkpoints WHERE session_id = %s")[0][0])

    def list(self) -> list[CheckpointInfo]:
        """Checkpoints, oldest first (a row that cannot be read is skipped)."""
        found = []
        for (info,) in self._rows("SELECT info FROM amos_checkpoints WHERE session_id = %s ORDER BY number"):
            try:
                found.append(CheckpointInfo.model_validate_json(info))
            except ValueError:
                continue
        return found

    def take(self, session_json: bytes, info: CheckpointInfo, *, keep: int,
             protect: frozenset[int] = frozenset()) -> CheckpointInfo:
        """Store checkpoint ``info.number`` and prune the oldest unlabelled ones.

        Raises:
            SessionError: ``write_failed`` (nothing is stored).
        """
        info = info.model_copy(update={"size_bytes": len(session_json)})
        try:
            with self.store.conn_of(self.session_id) as conn:
                done = conn.execute(
                    "INSERT INTO amos_checkpoints (session_id, number, info, data) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING", (self.session_id, info.number, info.model_dump_json(),
                                               session_json.decode("utf-8")))
                if done.rowcount != 1:
                    raise SessionError("write_failed", f"checkpoint {info.number} already exists in "
                                                       f"{self.where(info.number)}", exit_code=1)
        except SessionError:
            raise
        except Exception as exc:
            from amos.store_pg.connect import problem

            raise SessionError("write_failed", f"cannot write checkpoint {info.number} of session "
                                               f"{self.session_id}: {problem(exc, self.store.db.url)}",
                               exit_code=1) from None
        self.prune(keep, protect=protect | {info.number})
        return info

    def prune(self, keep: int, *, protect: frozenset[int] | set[int] = frozenset()) -> list[int]:
        """Remove the oldest unlabelled checkpoints while more than ``keep`` exist.

        Returns:
            The numbers removed.
        """
        rows = self.list()
        excess = len(rows) - keep
        order = [r for r in rows if r.reason != "before_compaction"] + [r for r in rows
                                                                         if r.reason == "before_compaction"]
        doomed = []
        for row in order:
            if excess <= 0:
                break
            if row.label or row.number in protect:
                continue
            doomed.append(row.number)
            excess -= 1
        if doomed:
            try:
                with self.store.conn_of(self.session_id) as conn:
                    conn.execute("DELETE FROM amos_checkpoints WHERE session_id = %s AND number = ANY(%s)",
                                 (self.session_id, doomed))
            except Exception:
                return []
        return doomed

    def read(self, number: int) -> dict:
        """The session data of checkpoint ``number``.

        Raises:
            SessionError: ``not_found`` (listing the numbers that exist) or ``corrupt``.
        """
        rows = self._rows("SELECT data FROM amos_checkpoints WHERE session_id = %s AND number = %s", (number,))
        if not rows:
            have = ", ".join(str(r.number) for r in self.list()) or "none"
            raise SessionError("not_found", f"no checkpoint {number} (checkpoints: {have})")
        try:
            data = json.loads(rows[0][0])
        except (ValueError, RecursionError) as exc:
            raise SessionError("corrupt", f"{self.where(number)}: cannot read checkpoint: {exc}") from None
        if not isinstance(data, dict):
            raise SessionError("corrupt", f"{self.where(number)}: checkpoint is not a JSON object")
        return data
