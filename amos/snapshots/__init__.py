"""Workspace snapshots in a shadow git repository: the files half of checkpoints (issue 20).

Public face::

    from amos.snapshots import ShadowRepo, open_session_repo, snapshot_refusal

    repo, why_off = open_session_repo(config, session_id, workspace)
    before = repo.snapshot("before step 3", include=["notes/.env"])
    ...                                       # the step's tools run
    after = repo.snapshot("after step 3")
    repo.changed(before, after)               # [FileChange("a.py", "modified"), ...]
    repo.diff(before, None, stat=True)        # text, like git diff --stat
    changes = repo.agent_changes([(before.id, after.id)])
    result = repo.revert(changes)             # /undo; result.conflicts, result.before

Importing this package starts no process and touches no file.
"""

from amos.snapshots.models import (
    AgentChange,
    Change,
    Conflict,
    FileChange,
    RestoreResult,
    SkippedFile,
    Snapshot,
)
from amos.snapshots.policy import open_session_repo, snapshot_refusal
from amos.snapshots.repo import ShadowRepo

__all__ = [
    "AgentChange", "Change", "Conflict", "FileChange", "RestoreResult", "ShadowRepo", "SkippedFile",
    "Snapshot", "open_session_repo", "snapshot_refusal",
]
