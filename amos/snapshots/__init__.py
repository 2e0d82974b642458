"""Workspace snapshots in a shadow git repository: the files half of checkpoints (issue 20).

How the engine uses it::

    from amos.snapshots import open_session_repo

    repo, why_off = open_session_repo(config, session_id, workspace)   # None + reason when off
    # before each write tool (include its path) and each run_command of a step:
    before = repo.snapshot("step 3: before write_file", include=["notes/.env"])
    ...                                            # the tool runs
    after = repo.snapshot("step 3: after")         # when the step's tools are done
    repo.changed(before, after)                    # [FileChange("a.py", "modified"), ...]
    repo.diff(before, None, stat=True)             # text, like git diff --stat
    changes = repo.agent_changes([(before.id, after.id)])
    result = repo.revert(changes)                  # /undo; result.conflicts, result.before

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
