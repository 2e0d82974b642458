"""Capture middleware and projection: every tool outcome stored, large results projected.

After each call — success, failure and denial alike — :class:`EvidenceCapture`
stores the final raw result (redacted, before the model-facing output cap) and, when
the record is acknowledged, the tool declares a result summary and the redacted JSON
is at least ``project_threshold_bytes``, returns a *projection*: the summary plus an
envelope naming the record, which is what the model then sees instead of the raw value
(seeds/durable-tool-evidence.txt "What is recorded and projected").

Storage failure is not tool failure: the outcome is unchanged, the raw result stays in
the history (protected), and nothing is retried (seed "Failure and recovery").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from amos.evidence.model import EvidenceError, EvidenceReference, EvidenceScope, record_from_outcome
from amos.evidence.redact import redact
from amos.evidence.store import EvidenceStore

RESERVED_TOOLS = frozenset({"evidence_read", "evidence_list"})
"""Retrieval tools: never captured, so reading evidence does not create more of it."""

MAX_PROJECTION_CHARS = 4000
log = logging.getLogger("amos.evidence")


@dataclass(frozen=True)
class Captured:
    """What capture produced for one outcome.

    Attributes:
        reference: the stored record's reference (None when storage failed or the tool
            is reserved).
        error: ``"code: message"`` when storage failed (the raw result is then protected).
        projection: the model-facing projection text, or None to show the raw result.
    """

    reference: EvidenceReference | None = None
    error: str | None = None
    projection: str | None = None

    @property
    def acknowledged(self) -> bool:
        """True when a durable (or in-memory) acknowledgement exists."""
        return self.reference is not None


class EvidenceCapture:
    """Stores tool outcomes in one scoped store and builds projections.

    Args:
        store: the evidence store (its scope is the session's scope).
        secrets: values redacted wherever they appear (provider key values).
        identity: trusted host identity stored with every record (never from the model).
        session_id: the session the calls run in.
        project_threshold_bytes: redacted JSON at least this large is projected (bytes).
    """

    def __init__(self, store: EvidenceStore, *, secrets: Iterable[str], identity: dict[str, str | None],
                 session_id: str, project_threshold_bytes: int):
        self.store = store
        self.secrets = tuple(s for s in secrets if s)
        self.identity = dict(identity)
        self.session_id = session_id
        self.threshold = project_threshold_bytes
        self.known: Any = None  # id -> the reference the session recorded (set by the host)

    @property
    def scope(self) -> EvidenceScope:
        """The store's scope."""
        return self.store.scope

    def capture(self, outcome: Any, arguments: Any, summarize: Any | None) -> Captured:
        """Store one outcome and decide its projection.

        Args:
            outcome: the ``ToolOutcome`` (its ``result`` is the full, uncapped result).
            arguments: the dispatched arguments (or the raw argument text).
            summarize: the tool's ``summarize_result`` (None: never projected).

        Returns:
            A :class:`Captured`; never raises for storage problems.
        """
        if outcome.tool in RESERVED_TOOLS:
            return Captured()
        try:
            record = record_from_outcome(outcome, arguments=redact(arguments, self.secrets),
                                         identity=self.identity, session_id=self.session_id)
            record = record.model_copy(update={"result": redact(outcome.result, self.secrets),
                                               "error": _redact_text(outcome.error, self.secrets)})
            reference = self.store.put(record)
        except EvidenceError as exc:
            return Captured(error=f"{exc.code}: {exc}")
        except Exception as exc:  # noqa: BLE001 - storage failure is never tool failure
            log.exception("evidence capture failed")
            return Captured(error=f"io: {type(exc).__name__}: {exc}")
        return Captured(reference=reference, projection=self._project(outcome, record.result, reference, summarize))

    def _project(self, outcome: Any, redacted: Any, reference: EvidenceReference, summarize: Any) -> str | None:
        if summarize is None or outcome.status != "succeeded" or redacted is None:
            return None
        try:
            size = len(json.dumps(redacted, ensure_ascii=False).encode("utf-8"))
        except (TypeError, ValueError):
            return None
        if size < self.threshold:
            return None
        try:
            summary = summarize(json.loads(json.dumps(redacted)))
        except Exception:  # noqa: BLE001 - a failing summarizer falls back to raw
            return None
        if not isinstance(summary, str) or not summary.strip() or len(summary) > MAX_PROJECTION_CHARS:
            return None
        return projection_text(outcome, reference, size, summary)


def projection_text(outcome: Any, reference: EvidenceReference, size: int, summary: str) -> str:
    """The model-facing projection: an envelope naming the record, then the summary."""
    envelope = {
        "evidence": {"id": reference.id, "sha256": reference.sha256, "bytes": reference.size,
                     "acknowledgement": reference.acknowledgement},
        "status": outcome.status, "completion": outcome.completion, "effect": outcome.effect,
        "call_id": outcome.call_id, "result_bytes": size,
    }
    return (f"[projected result — the tool's complete result ({size} bytes) is stored as evidence {reference.id}; "
            f"read the exact data with evidence_read {{\"id\": \"{reference.id}\"}}]\n"
            f"{json.dumps(envelope, ensure_ascii=False)}\n{summary}")


def _redact_text(text: str | None, secrets: tuple[str, ...]) -> str | None:
    if text is None:
        return None
    value = redact(text, secrets)
    return value if isinstance(value, str) else text
