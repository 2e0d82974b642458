"""Durable tool evidence for a running host (seeds/durable-tool-evidence.txt).

:class:`EvidenceRecorder` stores every tool outcome as an evidence record before the
model sees it (the projection replaces a large result in the history), keeps the
session's bounded index of recent receipts, and serves the host API over the
session's evidence scope: list, read (verified against the reference the session
recorded), and acknowledge a record after storage was repaired.
"""

from __future__ import annotations

from typing import Any

from amos.engine.binding import SessionBinding
from amos.engine.calls import PlannedCall
from amos.engine.transcript import Transcript
from amos.errors import SessionError
from amos.evidence.capture import EvidenceCapture
from amos.evidence.model import EvidenceError, EvidenceReference, coerce_reference
from amos.evidence.prefix import resolve_record_id
from amos.tools.base import ToolOutcome

EVIDENCE_RECENT = 50
"""Evidence receipts kept in the session's recent index."""


class EvidenceRecorder:
    """Evidence capture and the evidence host API of one session.

    Args:
        capture: the capture over the configured store (None: evidence is off).
        transcript: the session (its tool results name the references it recorded).
        binding: where the session is saved after an acknowledgement.
        autosave: save after an acknowledgement.
    """

    def __init__(self, capture: EvidenceCapture | None, transcript: Transcript, binding: SessionBinding,
                 *, autosave: bool):
        self.capture = capture
        self.transcript = transcript
        self.binding = binding
        self.autosave = autosave
        if capture is not None:
            capture.known = self.known

    @property
    def enabled(self) -> bool:
        """True when tool outcomes are stored (``evidence.enabled``)."""
        return self.capture is not None

    def known(self, record_id: str) -> EvidenceReference | None:
        """The reference the current session recorded for ``record_id`` (after a restore too)."""
        for message in self.transcript.messages:
            for part in message.tool_results:
                if part.evidence_id == record_id and part.evidence:
                    return EvidenceReference.model_validate(part.evidence)
        return None

    def record(self, call: PlannedCall, outcome: ToolOutcome) -> tuple[dict[str, Any], str | None, str | None]:
        """Store one outcome as evidence.

        Returns:
            ``(tool-result fields, projection or None, error notice or None)``; the fields
            are empty for a reserved retrieval tool's result.
        """
        if self.capture is None:
            return {}, None, None
        summarize = call.tool.summarize_result if call.tool is not None else None
        captured = self.capture.capture(outcome, call.arguments, summarize)
        if captured.reference is None and captured.error is None:
            return {}, None, None  # a reserved retrieval tool
        receipt = {"call_id": call.call_id, "tool": call.tool_name, "status": outcome.status,
                   "id": captured.reference.id if captured.reference else None,
                   "stored": captured.reference is not None}
        session = self.transcript.session
        session.evidence_recent = [*session.evidence_recent, receipt][-EVIDENCE_RECENT:]
        if captured.reference is None:
            return ({"evidence_error": captured.error}, None,
                    f"evidence for {call.tool_name} ({call.call_id}) was not stored ({captured.error}); its raw "
                    "result is kept and protected. Nothing is retried.")
        ref = captured.reference
        fields = {"evidence_id": ref.id, "evidence": ref.model_dump(mode="json"),
                  "projected": captured.projection is not None}
        return fields, captured.projection, None

    # ------------------------------------------------------------------ host API

    def store(self) -> Any:
        """The evidence store.

        Raises:
            SessionError: ``no_evidence`` when evidence is off.
        """
        if self.capture is None:
            raise SessionError("no_evidence", "evidence is not enabled (evidence.enabled in the config)")
        return self.capture.store

    def page(self, after: str | None = None, limit: int = 20) -> Any:
        """One page of evidence metadata in this session's scope (``EvidencePage``).

        Raises:
            SessionError: ``no_evidence``.
            EvidenceError: a bad cursor or a damaged index.
        """
        return self.store().list(after, limit)

    def chunk(self, id_or_reference: str, offset: int = 0, limit: int = 4000) -> Any:
        """A verified chunk of a record's exact JSON (``EvidenceChunk``; offsets in code points).

        ``id_or_reference`` may be a unique id prefix (issue 21).

        Raises:
            SessionError: ``no_evidence``.
            EvidenceError: missing, corrupt (no content is returned), a bad offset, or an
                ambiguous or too short prefix (``ambiguous``).
        """
        store = self.store()
        text = id_or_reference.strip()
        ref = coerce_reference(text) if text.startswith("{") else store.get_reference(resolve_record_id(store, text))
        pinned = self.known(ref.id)
        if pinned is not None and (pinned.sha256, pinned.size) != (ref.sha256, ref.size):
            raise EvidenceError("corrupt", f"evidence {ref.id} no longer matches the SHA-256 this session "
                                           "recorded for it")
        return store.read_text_chunk(ref, offset, limit)

    def acknowledge(self, call_id: str, reference: Any) -> EvidenceReference:
        """Attach a stored record to a protected tool result (see ``Host.acknowledge_tool_evidence``).

        Raises:
            SessionError: ``not_found`` for an unknown call id, ``no_evidence``.
            EvidenceError: the record is missing, corrupt, or belongs to another call.
        """
        store = self.store()
        if isinstance(reference, str) and not reference.lstrip().startswith("{"):
            ref = store.get_reference(reference)
        else:
            ref = coerce_reference(reference)
        session = self.transcript.session
        for index, message in enumerate(session.messages):
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
                self.transcript.replace(index, message.model_copy(update={"parts": parts}))
                if self.autosave:
                    self.binding.save(session)
                return ref
        raise SessionError("not_found", f"no tool result with call id {call_id!r} in session {session.id}")
