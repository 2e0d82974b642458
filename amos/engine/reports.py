"""What ``/context``, ``/policy``, ``/tools`` and the side panel show, as plain data.

Each function reads the engine and returns JSON-ready values (the ``--json`` result of
the slash command); the front ends turn them into text.
"""

from __future__ import annotations

import hashlib
from typing import Any

from amos.engine.engine import Engine
from amos.engine.views import HeldCallView, NoteView, TaskNotesView
from amos.errors import SessionError
from amos.policy.stop import LoopDiagnostics
from amos.sessions import SessionSummary
from amos.sessions import check_session_name as check_name

_CATEGORY_ORDER = ("objective", "constraint", "decision", "question", "artifact")


def tools_report(engine: Engine) -> list[dict[str, str]]:
    """Each tool's name, effect and permission, in registration order: the permission a
    call with no rule of its own gets (``run_command`` runs unasked in a working sandbox;
    ``by`` says what decided; issue 19)."""
    tools, access = engine.tools, engine.access
    rows = []
    for spec in tools.specs():
        permission, by = tools.permission(spec.name), tools.permission_source(spec.name)
        if access is not None:
            decided = access.decide(spec.name, {}, effect=tools.effect(spec.name), configured=permission,
                                    configured_source=by, rules_apply=False)
            permission, by = decided.permission, decided.source
        rows.append({"name": spec.name, "effect": tools.effect(spec.name), "permission": permission, "by": by})
    return rows


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
    from amos.tools.command_sandbox import wants_unsandboxed

    summarize = engine.tools.summarize
    return [HeldCallView(call_id=h.call.call_id, tool=h.call.tool_name, summary=summarize(h.call),
                         arguments=h.call.raw_arguments if h.call.raw_arguments is not None else h.call.arguments,
                         needs_approval=h.needs_approval, decision=h.decision,
                         escalation=wants_unsandboxed(h.call.tool_name, h.call.arguments)) for h in pending.held]


def find_call(engine: Engine, call_id: str) -> Any:
    """The session's tool call with ``call_id`` (the newest, if reused), or None."""
    for message in reversed(engine.transcript.messages):
        for call in message.tool_calls:
            if call.call_id == call_id:
                return call
    return None


def change_signature(engine: Engine) -> tuple[Any, ...]:
    """A cheap signature of the session: messages, name, model, model calls, the task
    revision and the last receipt."""
    session = engine.transcript.session
    try:
        revision = engine.instructions.tasks.revision if engine.instructions.tasks is not None else None
    except Exception:  # noqa: BLE001 - a destroyed notebook
        revision = None
    last = session.last_stop
    return (len(session.messages), session.name, engine.model.spec, session.usage.model_calls, revision,
            (last.execution_id, last.ended_at) if last is not None else None)


def state_digest(engine: Engine) -> str:
    """SHA-256 of the session as it is now (all of it but its save time)."""
    data = engine.transcript.session.model_dump_json(exclude={"updated_at"})
    return hashlib.sha256(data.encode("utf-8", errors="replace")).hexdigest()


def previews(tool: str) -> bool:
    """True when the host shows a diff for ``tool``'s calls."""
    from amos.engine.previews import DIFF_TOOLS

    return tool in DIFF_TOOLS


def preview_call(engine: Engine, tool: str, arguments: Any) -> Any:
    """The diff a ``write_file``/``edit_file`` call would make against the workspace now."""
    from amos.engine.previews import call_diff

    return call_diff(tool, arguments, engine.workspace) if previews(tool) else None


def sessions(engine: Engine) -> list[SessionSummary]:
    """Saved sessions, newest first ([] with ``--no-save``)."""
    store = engine.binding.store
    return store.list() if store is not None else []


def resolve_session(engine: Engine, id_or_name: str) -> str:
    """The id of a saved session given by id, name or ``latest``."""
    store = engine.binding.store
    if store is None:
        raise SessionError("no_store", "sessions are not saved in this run (--no-save)")
    return store.resolve(id_or_name)


def check_session_name(engine: Engine, name: str) -> str:
    """Validate a new name for the session (unique among saved sessions)."""
    rows = sessions(engine)
    check_name(name, [r.id for r in rows])
    current = engine.transcript.session.id
    taken = [r.id for r in rows if r.name == name and r.id != current]
    if taken:
        raise SessionError("name_taken", f"the name {name!r} is already used by session {taken[0]}; choose "
                           "another (names must stay unique so they can stand for an id)")
    return name

