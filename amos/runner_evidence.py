"""The evidence part of :class:`~amos.runner.AgentRunner` (a mixin).

Host API over the session's evidence scope — list, read (verified against the
reference the session recorded), acknowledge a repaired record — and the guard that
stops a run rather than lose a protected raw result (seeds/durable-tool-evidence.txt
"Failure and recovery"). Uses the runner's ``evidence``, ``session``, ``store``,
``config``, ``system_prompt``, ``tools`` and ``autosave``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amos.errors import SessionError
from amos.evidence.model import EvidenceError, EvidenceReference, coerce_reference


class EvidenceDuties:
    """Evidence host API of the runner."""

    evidence: Any
    session: Any
    store: Any
    config: Any
    system_prompt: str
    tools: Any
    autosave: bool

    _ensure_idle: Callable[[], None]  # provided by AgentRunner
    request_system_prompt: Callable[[], str]  # provided by AgentRunner
    estimate_request_tokens: Callable[[], int]  # provided by AgentRunner
    _journal_write: Callable[..., bool]  # provided by JournalDuties
    _journaled: int

    @property
    def evidence_enabled(self) -> bool:
        """True when tool outcomes are stored as evidence (``evidence.enabled``)."""
        return self.evidence is not None

    def evidence_page(self, after: str | None = None, limit: int = 20) -> Any:
        """One page of evidence metadata in this session's scope (``EvidencePage``).

        Raises:
            SessionError: ``no_evidence`` when evidence is off.
            EvidenceError: a bad cursor or a damaged index.
        """
        return self._evidence_store().list(after, limit)

    def evidence_chunk(self, id_or_reference: str, offset: int = 0, limit: int = 4000) -> Any:
        """A verified chunk of a record's exact JSON (``EvidenceChunk``; offsets in code points).

        Raises:
            SessionError: ``no_evidence`` when evidence is off.
            EvidenceError: missing, corrupt (no content is returned), or a bad offset.
        """
        store = self._evidence_store()
        text = id_or_reference.strip()
        ref = coerce_reference(text) if text.startswith("{") else store.get_reference(text)
        pinned = self.evidence.known(ref.id) if self.evidence is not None and self.evidence.known else None
        if pinned is not None and (pinned.sha256, pinned.size) != (ref.sha256, ref.size):
            raise EvidenceError("corrupt", f"evidence {ref.id} no longer matches the SHA-256 this session "
                                           "recorded for it")
        return store.read_text_chunk(ref, offset, limit)

    def _evidence_store(self) -> Any:
        if self.evidence is None:
            raise SessionError("no_evidence", "evidence is not enabled (evidence.enabled in the config)")
        return self.evidence.store

    def acknowledge_tool_evidence(self, call_id: str, reference: Any) -> EvidenceReference:
        """Host-only recovery after storage was repaired: attach a stored record to a result.

        The record must be in this session's evidence scope, verify (size and hash), and
        belong to the same call and tool. Only the acknowledgement metadata of the
        tool result changes; its content stays as it is and no tool runs again
        (seeds/durable-tool-evidence.txt "Failure and recovery").

        Args:
            call_id: the call whose raw result is protected.
            reference: an ``EvidenceReference``, its dict, or a record id.

        Returns:
            The verified reference.

        Raises:
            SessionError: ``busy`` while a run is active, ``not_found`` for an unknown
                call id, ``no_evidence`` when evidence is off.
            EvidenceError: the record is missing, corrupt, or belongs to another call.
        """
        self._ensure_idle()
        store = self._evidence_store()
        if isinstance(reference, str) and not reference.lstrip().startswith("{"):
            ref = store.get_reference(reference)
        else:
            ref = coerce_reference(reference)
        for index, message in enumerate(self.session.messages):
            for part in message.tool_results:
                if part.call_id != call_id:
                    continue
                record = store.read_record(ref)
                if record.call_id != call_id or record.tool != part.tool_name:
                    raise EvidenceError("invalid", f"evidence {ref.id} records {record.tool} ({record.call_id}), "
                                                   f"not {part.tool_name} ({call_id})")
                updated = part.model_copy(update={"evidence_id": ref.id, "evidence": ref.model_dump(mode="json"),
                                                  "evidence_error": None})
                parts = tuple(updated if p is part else p for p in message.parts)
                self.session.messages[index] = message.model_copy(update={"parts": parts})
                if index < self._journaled:
                    self._journal_write("message", index=index, message=self.session.messages[index].model_dump(
                        mode="json"))
                if self.autosave:
                    self.store.save(self.session)  # type: ignore[union-attr]
                return ref
        raise SessionError("not_found", f"no tool result with call id {call_id!r} in session {self.session.id}")
