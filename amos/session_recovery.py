"""Checkpoints, restore and repair of a :class:`~amos.session_store.SessionStore`.

A collaborator the store owns and delegates to, so the store keeps one seam for writes
(``write_file``) while this module keeps the recovery rules in one place (issue "Sessions that never lose
work": checkpoints, restore, corruption and repair). Callers hold the session's run
lock for every method that writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amos.checkpoints import CheckpointInfo, Checkpoints
from amos.errors import SessionError
from amos.journal import read_journal, read_regular

if TYPE_CHECKING:
    from amos.session_store import SessionStore
    from amos.sessions import FileHistory, Session

CHECKPOINT_REASONS = ("run_end", "waiting", "save", "before_restore", "before_compaction")
"""Why a checkpoint was taken (``CheckpointInfo.reason``)."""


_UNDO_RE = re.compile(r"checkpoint (\d+) holds the history before this compaction")


def compaction_checkpoints(session: Session) -> frozenset[int]:
    """Checkpoints a compaction summary in the history names as its undo (never pruned
    while the summary is there)."""
    return frozenset(int(n) for m in session.messages if m.kind == "summary" for n in _UNDO_RE.findall(m.text))


@dataclass
class RepairResult:
    """What ``amos sessions repair`` did.

    Attributes:
        session: the session as written.
        source: ``snapshot`` (it was readable), ``checkpoint N`` or ``journal``.
        replayed: journal entries applied on top of the source.
        set_aside: where the unreadable snapshot was moved, or None.
        warnings: problems met (a torn journal line…).
    """

    session: Session
    source: str
    replayed: int
    set_aside: Path | None
    warnings: list[str]


def _latest_prompt(session: Session) -> str | None:
    """The first line of the newest prompt a person sent (for checkpoint lists), or None."""
    for message in reversed(session.messages):
        if message.role == "user" and message.kind == "prompt" and message.text.strip():
            line = message.text.strip().splitlines()[0]
            return line if len(line) <= 80 else line[:79] + "…"
    return None


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(read_regular(path)).hexdigest()
    except OSError:
        return None


class SessionRecovery:
    """Checkpoint, restore and repair rules of one session store (a collaborator the store
    owns: :attr:`SessionStore.recovery <amos.session_store.SessionStore>`).

    Args:
        store: the session store whose folders, writes and loading it uses.
    """

    def __init__(self, store: SessionStore):
        self.store = store

    def checkpoints_of(self, session_id: str) -> Checkpoints:
        """The checkpoints folder of a session (writes go through ``write_file``)."""
        return Checkpoints(self.store.session_dir(session_id) / "checkpoints", write=self.store.write_file)

    def take_checkpoint(self, session: Session, reason: str, *, label: str | None = None,
                        keep: int = 20, files: FileHistory | None = None) -> CheckpointInfo:
        """Write an immutable checkpoint of ``session`` as it is in memory.

        Args:
            session: the session (its ``last_checkpoint`` advances).
            reason: one of :data:`CHECKPOINT_REASONS`.
            label: kept forever when given (``/session save NAME``).
            keep: ``sessions.max_checkpoints``.
            files: the file history to record instead of the session's (a restore that
                has just rewound the files records the state from before it, issue 20).

        Raises:
            SessionError: ``write_failed``.
        """
        folder = self.checkpoints_of(session.id)
        history = files if files is not None else session.file_history
        number = max(folder.highest(), session.last_checkpoint) + 1
        previous = session.last_checkpoint
        session.last_checkpoint = number
        journal = self.store._journals.get(session.id)
        if journal is not None:
            session.journal_seq = journal.seq
        info = CheckpointInfo(
            number=number, created_at=datetime.now(UTC).isoformat(timespec="milliseconds"), label=label,
            reason=reason, messages=len(session.messages),
            last_verdict=session.last_stop.verdict if session.last_stop else None, journal_seq=session.journal_seq,
            prompt=_latest_prompt(session), file_seq=history.next_seq, snapshot=history.head)
        kept = session if files is None else session.model_copy(update={"file_history": files})
        try:
            info = folder.take(kept.model_dump_json().encode(), info, keep=keep,
                               protect=compaction_checkpoints(session))
        except SessionError:
            session.last_checkpoint = previous
            raise
        if journal is not None:
            # A record for people: the checkpoint is already complete on disk, and a
            # failing journal is reported by its writer, so a failure here is not an error.
            with contextlib.suppress(SessionError):
                journal.append("checkpoint", info.created_at, number=number, reason=reason, label=label)
        return info

    def restore(self, session: Session, number: int, *, keep: int = 20,
                files: FileHistory | None = None) -> Session:
        """Replace ``session`` with checkpoint ``number``; the current state becomes a new
        checkpoint first, so a restore can itself be undone.

        ``files`` is the file history from before the files were rewound (the caller
        rewound them first): the ``before_restore`` checkpoint records it, so restoring
        that checkpoint puts the files back exactly as they were before (issue 20).

        The id, name, evidence scope, checkpoint counter, checker pins, usage (tokens
        and cost already spent), per-call usage rows and the file history (issue 20)
        stay those of the current session. The restored state is saved and journalled
        (``snapshot``).

        Returns:
            The restored session (the caller replaces its in-memory one).

        Raises:
            SessionError: ``not_found`` (no such checkpoint, listing the numbers),
                ``corrupt``, ``too_new`` or ``write_failed``.
        """
        from amos.sessions import migrate, validate_session

        folder = self.checkpoints_of(session.id)
        where = folder.where(number)
        restored = validate_session(migrate(folder.read(number), where), where)
        self.store.save(session)
        self.take_checkpoint(session, "before_restore", keep=keep, files=files)
        restored = restored.model_copy(update={
            "id": session.id, "name": session.name, "evidence_scope": session.evidence_scope,
            "last_checkpoint": session.last_checkpoint, "created_at": session.created_at,
            # Tokens spent are spent: a restore rewinds the conversation, not the bill.
            "usage": session.usage.model_copy(), "model_calls": list(session.model_calls),
            "estimator": session.estimator,
            # What happened to the files happened: a rewind of the files needs the later steps.
            "file_history": session.file_history.model_copy(deep=True),
            "host": restored.host.model_copy(update={"checker_pins": dict(session.host.checker_pins)}),
        })
        journal = self.store.journal(session)
        journal.append("snapshot", datetime.now(UTC).isoformat(timespec="milliseconds"),
                       session=restored.model_dump(mode="json"), restored_from=number)
        journal.sync()
        self.store.save(restored)
        return restored

    # ------------------------------------------------------------------ corruption

    def set_aside(self, session_id: str, *, move: bool) -> Path | None:
        """Keep a copy of an unreadable ``session.json`` as ``session.json.corrupt-<time>``.

        A copy with the same bytes is never made twice. With ``move`` the original is
        moved (repair is about to write a new one); otherwise it stays in place.

        Returns:
            The path of the kept copy, or None when there was no file.
        """
        path = self.store.path(session_id)
        digest = _digest(path)
        if digest is None:
            return None
        for old in sorted(path.parent.glob("session.json.corrupt-*")):
            if _digest(old) == digest:
                if move:
                    os.unlink(path)
                return old
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = path.with_name(f"session.json.corrupt-{stamp}")
        if move:
            os.replace(path, aside)
        else:
            self.store.write_file(aside, read_regular(path))
        return aside

    def recovery_source(self, session_id: str) -> str:
        """What ``amos sessions repair`` would rebuild the session from, for messages."""
        rows = self.checkpoints_of(session_id).list()
        if rows:
            return f"checkpoint {rows[-1].number} plus the journal"
        first = read_journal(self.store.journal_path(session_id)).entries[:1]
        if first and first[0].get("kind") == "snapshot":
            return "the journal"
        return ""

    def corrupt_error(self, session_id: str, problem: str) -> SessionError:
        """The ``corrupt`` error for an unreadable session: names the file and problem,
        keeps a copy aside and says how to recover it."""
        kept = ""
        try:
            aside = self.set_aside(session_id, move=False)
            if aside is not None:
                kept = f"; a copy was kept as {aside.name}"
        except OSError:
            pass
        source = self.recovery_source(session_id)
        hint = (f"; `amos sessions repair {session_id}` rebuilds it from {source}" if source
                else "; no checkpoint or journal can rebuild it")
        return SessionError("corrupt", f"{problem}{kept}{hint}")

    def repair(self, session_id: str) -> RepairResult:
        """Rebuild an unreadable session from its newest good checkpoint (or the start of
        its journal) plus the journal entries after it, and write it as the snapshot.

        A readable session is re-saved with its journal applied. The unreadable
        snapshot is moved aside, never overwritten or deleted.

        Raises:
            SessionError: ``not_found``; ``corrupt`` when nothing can rebuild it.
        """
        from amos.sessions import validate_session

        warnings: list[str] = []
        journal_path = self.store.journal_path(session_id)
        try:
            data = self.store.read_data(session_id)
            validate_session(dict(data), str(self.store.path(session_id)))
            source, loader = "snapshot", (lambda: self.store.read_data(session_id))
        except SessionError as exc:
            if exc.code != "corrupt":
                raise
            warnings.append(str(exc))
            data, source, loader = self._repair_base(session_id, warnings)
        found = read_journal(journal_path, after_seq=int(data.get("journal_seq") or 0))
        warnings.extend(found.warnings)
        before = len(self.store.warnings)
        session = self.store._replayed(session_id, data, found.entries, loader=loader, gaps=found.gaps)
        warnings.extend(self.store.warnings[before:])  # this repair's, returned with its result
        applied = sum(1 for e in found.entries if e.get("kind") in ("message", "messages", "snapshot", "fields",
                                                                    "model_call"))
        session.id = session_id
        aside = self.set_aside(session_id, move=True) if source != "snapshot" else None
        self.store.save(session)
        return RepairResult(session=session, source=source, replayed=applied, set_aside=aside, warnings=warnings)

    def _repair_base(self, session_id: str, warnings: list[str]) -> tuple[dict[str, Any], str, Callable]:
        from amos.sessions import migrate, validate_session

        folder = self.checkpoints_of(session_id)
        for row in reversed(folder.list()):
            where = str(folder.folder / f"{row.number:06d}.json")

            def load(number: int = row.number, where: str = where) -> dict[str, Any]:
                return migrate(folder.read(number), where)
            try:
                validate_session(load(), where)
                return load(), f"checkpoint {row.number}", load
            except SessionError as exc:
                warnings.append(f"checkpoint {row.number} is unusable: {exc}")
        found = read_journal(self.store.journal_path(session_id))
        if found.entries and found.entries[0].get("kind") == "snapshot":
            def empty() -> dict[str, Any]:
                return {"id": session_id, "journal_seq": 0, "version": 2}
            return empty(), "journal", empty
        raise SessionError("corrupt", f"session {session_id} cannot be repaired: no readable checkpoint, and its "
                           f"journal does not start with a snapshot ({self.store.path(session_id)})")
