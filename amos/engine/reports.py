"""What ``/context``, ``/policy``, ``/tools`` and the side panel show, as plain data.

Each function reads the engine and returns JSON-ready values (the ``--json`` result of
the slash command); the front ends turn them into text.
"""

from __future__ import annotations

from typing import Any

from amos.engine.engine import Engine
from amos.engine.views import HeldCallView, NoteView, TaskNotesView
from amos.policy.stop import LoopDiagnostics

_CATEGORY_ORDER = ("objective", "constraint", "decision", "question", "artifact")


def tools_report(engine: Engine) -> list[dict[str, str]]:
    """Each tool's name, effect and permission, in registration order."""
    tools = engine.tools
    return [{"name": s.name, "effect": tools.effect(s.name), "permission": tools.permission(s.name)}
            for s in tools.specs()]


def policy_report(engine: Engine) -> dict[str, Any]:
    """The loop policy, doom-loop config and limits in force (``/policy``)."""
    config, s = engine.config, engine.settings
    return {
        "loop_policy": config.loop_policy.model_dump(mode="json") if config.loop_policy else None,
        "doom_loop": config.doom_loop.model_dump(mode="json") if config.doom_loop else None,
        "verify": s.verify, "max_steps": s.max_steps, "token_budget": s.token_budget, "timeout_s": s.timeout_s,
        "approvals_owner": s.approvals_owner, "policy_hash": s.policy_hash,
    }


def context_report(engine: Engine, diagnostics: LoopDiagnostics | None) -> dict[str, Any]:
    """The ``/context`` overview: model, workspace, context estimate, usage, loop, notes, evidence."""
    session = engine.transcript.session
    tasks = engine.instructions.tasks
    return {
        "model": engine.model.spec,
        "workspace": str(engine.workspace),
        "messages": len(session.messages),
        "context": engine.context.overview(),
        "usage": session.usage.model_dump(),
        "loop": {"phase": diagnostics.phase, "reason": diagnostics.reason} if diagnostics else None,
        "last_verdict": session.last_stop.verdict if session.last_stop else None,
        "task_state": ({"enabled": True, "revision": tasks.revision, "notes": len(tasks.notes),
                        "actions": len(tasks.actions)} if tasks is not None else {"enabled": False}),
        "evidence": {"enabled": engine.evidence.enabled,
                     "recent": len(session.evidence_recent),
                     "unstored": sum(1 for r in session.evidence_recent if not r.get("stored"))},
    }


def task_notes(engine: Engine) -> TaskNotesView | None:
    """The notebook for the side panel and ``/context task`` (None with task state off)."""
    tasks = engine.instructions.tasks
    if tasks is None:
        return None
    try:
        notes = sorted(tasks.notes, key=lambda n: (_CATEGORY_ORDER.index(n.category)
                                                   if n.category in _CATEGORY_ORDER else 99))
        rows = tuple(NoteView(id=n.id, category=n.category, text=n.text, status=n.status,
                              confirmed=n.authority == "host") for n in notes)
        return TaskNotesView(revision=tasks.revision, notes=rows, actions=len(tasks.actions), view=tasks.view())
    except Exception:  # noqa: BLE001 - a destroyed notebook: its revision only
        return TaskNotesView(revision=getattr(tasks, "revision", 0))


def held_calls(engine: Engine) -> list[HeldCallView]:
    """The calls held by the session's approval pause, in order ([] when not waiting)."""
    pending = engine.transcript.session.pending
    if pending is None:
        return []
    summarize = engine.tools.summarize
    return [HeldCallView(call_id=h.call.call_id, tool=h.call.tool_name, summary=summarize(h.call),
                         arguments=h.call.raw_arguments if h.call.raw_arguments is not None else h.call.arguments,
                         needs_approval=h.needs_approval, decision=h.decision) for h in pending.held]
