"""Helpers that turn amos host objects into task-state inputs.

Pure code: no I/O and no import-time side effects. Nothing here reads model text.
"""

from __future__ import annotations

from typing import Any

from amos.tasks.model import TaskLimits, TaskScope

__all__ = ["binding_from_config", "receipt_from_tool_outcome"]


def receipt_from_tool_outcome(outcome: Any, *, evidence: Any = None) -> dict[str, Any]:
    """The ``record_action`` input for an amos ``ToolOutcome`` (or its dict).

    Raw results, arguments, content and error prose are left out (they stay in the
    outcome and its evidence). The receipt id is ``"<execution_id>:<call_id>"``
    because an amos ``execution_id`` names the whole run execution.

    Args:
        outcome: an :class:`amos.tools.base.ToolOutcome` or a dict of its fields.
        evidence: optional :class:`~amos.evidence.EvidenceReference` (or its dict).

    Returns:
        A strict-JSON dict of :class:`~amos.tasks.model.ActionOutcome` fields.
    """
    data = outcome if isinstance(outcome, dict) else outcome.model_dump(mode="json")
    receipt: dict[str, Any] = {
        "execution_id": f"{data['execution_id']}:{data['call_id']}",
        "call_id": data["call_id"],
        "run_id": data["execution_id"],
        "tool": data["tool"],
        "effect": data.get("effect", "unknown"),
        "status": data["status"],
        "completion": data.get("completion", "complete"),
    }
    for key in ("started_at", "ended_at"):
        if data.get(key):
            receipt[key] = data[key]
    if evidence is not None:
        receipt["evidence"] = evidence if isinstance(evidence, dict) else evidence.model_dump(mode="json")
    return receipt


def binding_from_config(config: Any, *, session_id: str, local_user: str) -> dict[str, Any]:
    """Keyword arguments for ``TaskState(...)`` from a ``TaskStateConfig``.

    Applies the spec/config.md defaults: ``owner_id`` the local user name,
    ``namespace`` ``"default"``, ``task_id`` the session id.

    Args:
        config: an :class:`amos.config_models.TaskStateConfig`.
        session_id: the current session id.
        local_user: the local user name.

    Returns:
        ``{"scope", "task_id", "association", "limits"}``.
    """
    scope = TaskScope(
        owner_id=config.owner_id or local_user,
        namespace=config.namespace or "default",
        tenant_id=config.tenant_id,
    )
    return {
        "scope": scope,
        "task_id": config.task_id or session_id,
        "association": config.association,
        "limits": TaskLimits.from_config(config),
    }
