"""Evidence ids as a person sees and types them in the TUI (issue 21).

Tool lines and the side panel show the shortest unique prefix of an id (at least 12 hex
digits, like git's short hashes) instead of 36 characters; Tab after
``/context evidence read `` completes a prefix to the whole id (with nothing typed, it
offers this session's latest records). Both go through the host API
(:class:`amos.engine.EvidenceIds`); presentation only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amos.tui.app import AmosApp


class ShortIds:
    """The app's view of evidence ids; follows the app's current runner.

    Args:
        app: the app.
    """

    def __init__(self, app: AmosApp):
        self.app = app
        self._runner: Any = None
        self._ids: Any = None

    def _names(self) -> Any:
        runner = self.app.runner
        if runner is not self._runner:
            from amos.engine import EvidenceIds

            self._runner = runner
            try:
                self._ids = EvidenceIds.for_host(runner)
            except Exception:  # noqa: BLE001 - evidence that cannot be opened: ids stay whole
                self._ids = None
        return self._ids

    def short(self, record_id: str) -> str:
        """The short form of ``record_id`` to show (the whole id when evidence is off)."""
        names = self._names()
        return names.short(record_id) if names is not None else record_id

    def complete(self, prefix: str) -> list[str]:
        """Whole ids starting with ``prefix``; with an empty prefix, the session's latest ones."""
        names = self._names()
        if names is None:
            return []
        if not prefix.strip():
            recent = [str(r.get("id")) for r in self.app.runner.evidence_recent() if r.get("id")]
            return list(dict.fromkeys(reversed(recent)))[:10]
        return names.complete(prefix)
