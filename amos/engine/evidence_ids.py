"""Evidence ids for people: unique prefixes in, shortest unique prefixes out (issue 21).

:class:`EvidenceIds` is the host API front ends use for what :mod:`amos.evidence.prefix`
does — the TUI shows short ids in tool lines and completes them with Tab; ``amos
evidence read`` and ``/context evidence read`` accept a prefix through
:meth:`Library.evidence_reference` and :meth:`EvidenceRecorder.chunk`.
"""

from __future__ import annotations

from typing import Any

from amos.evidence.prefix import MIN_PREFIX_HEX, matching_ids, resolve_record_id, short_id


class EvidenceIds:
    """Id prefixes over one evidence store.

    Args:
        store: the evidence store of a scope.
    """

    def __init__(self, store: Any):
        self._store = store
        self._short: dict[str, str] = {}

    @classmethod
    def for_host(cls, host: Any) -> EvidenceIds | None:
        """The ids of a host's evidence scope, or None when evidence is off."""
        if not host.evidence_enabled:
            return None
        return cls(host.engine.evidence.store())

    def resolve(self, text: str) -> str:
        """The full id a whole id or a unique prefix names.

        Raises:
            EvidenceError: ``ambiguous`` (exit 2; the candidates listed), ``missing``, ``invalid``.
        """
        return resolve_record_id(self._store, text)

    def short(self, record_id: str) -> str:
        """The shortest unique prefix (at least 12 hex digits) to show for ``record_id``;
        the id itself when it cannot be looked up. Remembered per id: a record stored
        later in the same millisecond may make an older short id ambiguous, which
        :meth:`resolve` then says."""
        if record_id not in self._short:
            try:
                self._short[record_id] = short_id(self._store, record_id)
            except Exception:  # noqa: BLE001 - a display nicety never breaks the screen
                return record_id
        return self._short[record_id]

    def complete(self, prefix: str, limit: int = 20) -> list[str]:
        """Full ids starting with ``prefix`` (at most ``limit``, in id order); [] when it
        is shorter than 4 digits or not hex."""
        if len(prefix.strip().replace("-", "")) < MIN_PREFIX_HEX:
            return []
        try:
            return matching_ids(self._store, prefix, limit)  # it normalises case and hyphens
        except Exception:  # noqa: BLE001 - completion is a convenience
            return []
