"""The session's history and its journal, written in the same call (issue 15 "push-based").

Every change to the session a run makes goes through :class:`Transcript`: a message
appended or replaced, the whole history replaced (a compaction), session fields set,
a run event, an approval answer, a model call's usage. Each is applied to the session
and appended to ``journal.jsonl`` at once (:mod:`amos.journal`), so nothing is found
later by diffing. The journal is fsynced at the end of every turn (the next step
starting, the run finishing, an approval asked) and before every tool with a
``write`` or ``unknown`` effect runs. A write error is kept and reported once per run
as an error notice (stderr in ``amos run``), never swallowed. Journalling is on
whenever the session is autosaved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amos.engine.binding import SessionBinding
from amos.errors import SessionError
from amos.events import (
    ApprovalRequested,
    Notice,
    RunEvent,
    RunFinished,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from amos.journal import Journal
from amos.messages import Message
from amos.sessions import Session, utc_now

END_OF_RUN_FIELDS = ("title", "name", "host", "provider_state", "usage", "loop", "last_stop", "pending",
                     "doom_loop", "evidence_recent", "task_state", "estimator", "context_window")
"""Session fields written to the journal at the end of every run (``model_calls`` rows
are journalled one ``model_call`` entry per call instead, so the journal grows with the
calls, not with their square)."""


class Transcript:
    """The session being run and its journal.

    Args:
        session: the session (its messages are extended in place).
        binding: where the session is saved (the journal lives beside it).
        journalled: journal every change (autosave on); False writes nothing.

    Attributes:
        session: the current session (replaced by :meth:`rebind` after a restore, so
            every collaborator reading it through the transcript sees the new one).
    """

    def __init__(self, session: Session, binding: SessionBinding, *, journalled: bool):
        self.session = session
        self._binding = binding
        self._journalled = journalled and binding.saved
        self._journal: Journal | None = None
        self._error: str | None = None
        self._warned = False
        self._lost: str | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def messages(self) -> list[Message]:
        """The history (read it; change it only through this object)."""
        return self.session.messages

    def open(self) -> list[str]:
        """Start journalling for a run (the first run opens the journal).

        Returns:
            Warnings from opening the journal (a damaged one set aside), shown once as
            notices. A failure to open is reported by :meth:`problem`.
        """
        self._warned = False
        self._error = None  # a failure of an earlier run was reported with that run
        self._lost = None  # and each run tries the disk again
        if not self._journalled or self._journal is not None:
            return []
        try:
            self._journal, warnings = self._binding.open_journal(self.session)
        except SessionError as exc:
            self._error = f"session journal unavailable, so a crash during this run may lose it: {exc}"
            self._lost = str(exc)
            return []
        return warnings

    @property
    def lost(self) -> str | None:
        """Why the journal stopped being durable in this run (a write or an fsync failed),
        else None. Once set, no write or unknown-effect tool may run (issue 17, item 6)."""
        return self._lost

    def close(self) -> None:
        """fsync and close the journal (also one a restore opened)."""
        self._binding.close_journal(self.session.id)
        self._journal = None

    def rebind(self, session: Session) -> None:
        """Continue with ``session`` (a restored checkpoint) in place of the current one."""
        self.session = session

    # ------------------------------------------------------------------ changes

    def append(self, message: Message) -> None:
        """Append ``message`` to the history and the journal."""
        messages = self.session.messages
        messages.append(message)
        self._write("message", index=len(messages) - 1, message=message.model_dump(mode="json"))

    def extend(self, messages: Sequence[Message]) -> None:
        """Append several messages in order."""
        for message in messages:
            self.append(message)

    def replace(self, index: int, message: Message) -> None:
        """Replace the message at ``index`` (an acknowledgement changes a tool result's metadata)."""
        self.session.messages[index] = message
        self._write("message", index=index, message=message.model_dump(mode="json"))

    def replace_all(self, messages: Sequence[Message], **meta: Any) -> None:
        """Replace the whole history (a compaction); ``meta`` is journalled with it."""
        self.session.messages[:] = list(messages)
        self._write("messages", messages=[m.model_dump(mode="json") for m in self.session.messages], **meta)

    def set(self, **values: Any) -> None:
        """Set session fields and journal their new values."""
        for name, value in values.items():
            setattr(self.session, name, value)
        self.fields(*values)

    def fields(self, *names: str) -> None:
        """Journal the current value of some session fields (set in place by their owner)."""
        if self._journal is None:
            return
        self._write("fields", fields={name: _dump(getattr(self.session, name)) for name in names})

    def approval(self, call_id: str, approved: bool, reason: str | None, remember: bool) -> None:
        """Journal a person's answer to an approval."""
        self._write("approval", call_id=call_id, approved=approved, reason=reason, remember=remember)

    def model_call(self, row: dict[str, Any]) -> None:
        """Journal one model call's usage row (a killed run still counts what it spent)."""
        self._write("model_call", row=row)

    def event(self, event: RunEvent) -> None:
        """Journal a run event about to be emitted (text deltas are not: the finished turn
        is); fsync at turn ends and before write/unknown tools."""
        if self._journal is None or isinstance(event, TextDelta):
            return
        exclude = {"content"} if isinstance(event, ToolCallFinished) else None
        self._write("event", event=event.model_dump(mode="json", exclude=exclude))
        if isinstance(event, (StepStarted, RunFinished, ApprovalRequested)) or (
                isinstance(event, ToolCallStarted) and event.effect in ("write", "unknown")):
            try:
                self._journal.sync()
            except SessionError as exc:
                self._error = str(exc)
                self._lost = self._lost or str(exc)

    def problem(self) -> Notice | None:
        """An error notice for the first journal failure of this run, else None."""
        if self._error is None or self._warned:
            return None
        self._warned = True
        return Notice(level="error", text=f"not durable: {self._error}")

    def _write(self, kind: str, **data: Any) -> bool:
        if self._journal is None:
            return True
        try:
            self._journal.append(kind, utc_now(), **data)
        except SessionError as exc:
            self._error = str(exc)
            self._lost = self._lost or str(exc)
            return False
        return True


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value
