"""The engine: the one loop, its gates, and the host API front ends call (issue 15).

The public face is :class:`~amos.engine.host.Host` (built with :func:`open_host`),
the options it is opened with, the gate interface for new capabilities, and the value
types front ends render (re-exported here so no front end imports a provider, a store,
evidence or a policy module — not even for type hints). ``docs/architecture.md`` maps
the package.

Names are loaded on first use, so ``import amos.engine`` costs nothing until a name is
touched.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Host": "amos.engine.host",
    "Library": "amos.engine.library",
    "ModelCatalog": "amos.engine.models",
    "EvidenceIds": "amos.engine.evidence_ids",
    "masked_text": "amos.engine.display",
    "open_host": "amos.engine.opening",
    "open_store": "amos.engine.opening",
    "load_host_config": "amos.engine.opening",
    "RunOptions": "amos.engine.options",
    "Opened": "amos.engine.options",
    "NO_MODEL_HELP": "amos.engine.options",
    "demo_script_path": "amos.engine.options",
    "demo_workspace_source": "amos.engine.options",
    "copy_demo_workspace": "amos.engine.options",
    "Gate": "amos.engine.gates",
    "Decision": "amos.engine.gates",
    "RoundControl": "amos.engine.gates",
    "PlannedCall": "amos.engine.calls",
    "RunState": "amos.engine.state",
    "RunSettings": "amos.engine.settings",
    "CompactionResult": "amos.engine.context_budget",
    "FileDiff": "amos.engine.previews",
    "HeldCallView": "amos.engine.views",
    "TaskNotesView": "amos.engine.views",
    "NoteView": "amos.engine.views",
    "LineOutcome": "amos.slash.lines",
    "StopReceipt": "amos.policy.stop",
    "LoopDiagnostics": "amos.policy.stop",
    "CheckpointInfo": "amos.checkpoints",
    "SnapshotControl": "amos.engine.snapshot_control",
    "Rewound": "amos.engine.snapshot_control",
    "REWIND_PARTS": "amos.engine.snapshot_control",
    "FilesRestored": "amos.engine.file_history",
    "FileDiffReport": "amos.engine.file_history",
    "SessionSummary": "amos.sessions",
    "is_session_id": "amos.sessions",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'amos.engine' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = sorted(_EXPORTS)
