"""The host API: everything front ends may call (issue 15; STYLE.md §1).

:class:`Host` drives one session: runs and resumes (each an async iterator of
:mod:`amos.events`), cancellation and approvals, slash lines (:meth:`Host.run_line`),
loop diagnostics, the context window and compaction, task notes, evidence,
checkpoints, saving and the model switch. The TUI, the CLI and the slash commands call
nothing else of the engine, and render the values it returns (see
:mod:`amos.engine.views` and :mod:`amos.render`). Build one with
:func:`amos.engine.open_host`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from amos.checkpoints import CheckpointInfo
from amos.config_models import UiConfig
from amos.engine import reports
from amos.engine.context_budget import CompactionResult
from amos.engine.driver import RunDriver
from amos.engine.engine import Engine
from amos.engine.loop import TurnLoop
from amos.engine.mcp_control import McpControl
from amos.engine.permissions_control import PermissionsControl
from amos.engine.policy_gate import live_diagnostics
from amos.engine.previews import FileDiff
from amos.engine.resuming import decided_run
from amos.engine.snapshot_control import SnapshotControl
from amos.engine.state import RunState
from amos.engine.views import HeldCallView, TaskNotesView
from amos.errors import SessionError
from amos.events import RunEvent
from amos.evidence.model import EvidenceReference
from amos.messages import Message, ToolCallPart, Usage
from amos.policy.loop_policy import LoopPolicy
from amos.policy.stop import CheckInForce, LoopDiagnostics, StopReceipt
from amos.sessions import ExecutionRecord, Session, SessionSummary, utc_now


class Host:
    """The managed agent loop over one session, and the one API front ends use.

    Only one run may be active at a time; the session's lock is held from
    construction until :meth:`close`.

    Args:
        engine: the wired collaborators (see :func:`amos.engine.open_host`).
        on_close: callbacks run by :meth:`close` (e.g. removing a demo workspace copy).
    """

    def __init__(self, engine: Engine, *, on_close: Iterable[Callable[[], None]] = ()):
        self.engine = engine
        self._on_close = list(on_close)
        self._driver = RunDriver()

    # ------------------------------------------------------------------ what the host holds

    # Engine-side attributes (host code and tests): front ends never read these; they
    # render the values of the methods below (tests/test_architecture.py checks it).

    @property
    def session(self) -> Session:
        """The session (engine side)."""
        return self.engine.transcript.session

    @property
    def config(self) -> Any:
        """The loaded config (engine side)."""
        return self.engine.config

    @property
    def store(self) -> Any:
        """The session store, or None with ``--no-save`` (engine side; tests swap it)."""
        return self.engine.binding.store

    @store.setter
    def store(self, store: Any) -> None:
        self.engine.binding.store = store

    @property
    def tools(self) -> Any:
        """The tool manager (engine side)."""
        return self.engine.tools

    @property
    def provider(self) -> Any:
        """The provider in force (engine side)."""
        return self.engine.model.provider

    @property
    def session_id(self) -> str:
        """Id of the session this host drives."""
        return self.session.id

    @property
    def session_name(self) -> str | None:
        """The session's name (``/session save NAME``), or None."""
        return self.session.name

    @property
    def session_title(self) -> str | None:
        """The session's title (its first prompt's first line), or None."""
        return self.session.title

    @property
    def session_path(self) -> Path | None:
        """Path of ``session.json`` (None with ``--no-save``)."""
        return self.engine.binding.path(self.session_id)

    @property
    def saves_sessions(self) -> bool:
        """False with ``--no-save`` (nothing of the session is written)."""
        return self.engine.binding.saved

    @property
    def save_state(self) -> tuple[bool, int] | None:
        """``(stored, writes)``: the session is in its store (files or PostgreSQL), and this host
        wrote it ``writes`` times; None with ``--no-save`` (the TUI's saved marker)."""
        return self.engine.binding.save_state(self.session_id)

    @property
    def model_spec(self) -> str:
        """The ``PROVIDER:MODEL`` string of the model in force."""
        return self.engine.model.spec

    @property
    def workspace(self) -> Path:
        """The workspace root."""
        return self.engine.workspace

    @property
    def is_running(self) -> bool:
        """True while a run (or a compaction) is executing."""
        return self._driver.busy

    @property
    def is_waiting(self) -> bool:
        """True when the session is paused on approvals (resume with :meth:`resume`)."""
        return self.session.pending is not None

    @property
    def autosave(self) -> bool:
        """Whether the session is saved automatically (``sessions.autosave`` and not ``--no-save``)."""
        return self.engine.binding.saved and self.engine.settings.autosave

    def summarize_call(self, call: ToolCallPart) -> str:
        """A one-line summary of a tool call for display (never raises)."""
        return self.engine.tools.summarize(call)

    # ------------------------------------------------------------------ views for front ends

    def messages(self) -> tuple[Message, ...]:
        """The transcript as it is now (frozen messages, oldest first)."""
        return tuple(self.engine.transcript.messages)

    def find_call(self, call_id: str) -> ToolCallPart | None:
        """The session's tool call with ``call_id`` (the newest, if reused), or None."""
        return reports.find_call(self.engine, call_id)

    @property
    def usage(self) -> Usage:
        """The session's usage so far (a copy; tokens, model calls, cost)."""
        return self.session.usage.model_copy()

    @property
    def last_receipt(self) -> StopReceipt | None:
        """The stop receipt of the session's latest run, or None."""
        return self.session.last_stop

    @property
    def ui(self) -> UiConfig:
        """The ``ui`` settings (theme, show_cost)."""
        return self.engine.config.ui

    def held_calls(self) -> list[HeldCallView]:
        """The calls the session's approval pause holds, in order ([] when not waiting)."""
        return reports.held_calls(self.engine)

    def pending_claim(self) -> str | None:
        """The completion claim a person must confirm (``completion.human``), else None."""
        pending = self.session.pending
        return pending.confirmation.claim if pending is not None and pending.confirmation is not None else None

    def evidence_recent(self) -> list[dict[str, Any]]:
        """The session's latest evidence receipts (``{call_id, tool, id, status, stored}``),
        newest last ([] with evidence off)."""
        return [dict(r) for r in self.session.evidence_recent] if self.evidence_enabled else []

    def tools_report(self) -> list[dict[str, str]]:
        """Each tool's name, effect and permission (``/tools``)."""
        return reports.tools_report(self.engine)

    def policy_report(self) -> dict[str, Any]:
        """The loop policy, doom-loop config and limits in force (``/policy``)."""
        return reports.policy_report(self.engine)

    def context_report(self) -> dict[str, Any]:
        """The ``/context`` overview (model, context estimate, usage, loop, notes, evidence)."""
        return reports.context_report(self.engine, self.get_loop_diagnostics())

    @property
    def tasks_enabled(self) -> bool:
        """True when the host-owned task notebook is on (``task_state.enabled``)."""
        return self.engine.instructions.tasks is not None

    def task_notes(self) -> TaskNotesView | None:
        """The task notebook at a glance (None with task state off)."""
        return reports.task_notes(self.engine)

    def change_signature(self) -> tuple[Any, ...]:
        """What a change to the session changes (messages, name, model, model calls, task
        revision, last receipt): the TUI's saved/unsaved marker."""
        return reports.change_signature(self.engine)

    def state_digest(self) -> str:
        """SHA-256 of the whole session but its save time (did anything change?)."""
        return reports.state_digest(self.engine)

    def preview_call(self, tool: str, arguments: Any) -> FileDiff | None:
        """The diff a ``write_file``/``edit_file`` call would make (None for other tools);
        reads one confined file, so call it off the event loop."""
        return reports.preview_call(self.engine, tool, arguments)

    def previews(self, tool: str) -> bool:
        """True when :meth:`preview_call` gives a diff for ``tool``'s calls."""
        return reports.previews(tool)

    # ------------------------------------------------------------------ other sessions

    def sessions(self) -> list[SessionSummary]:
        """Saved sessions, newest first ([] with ``--no-save``)."""
        return reports.sessions(self.engine)

    def resolve_session(self, id_or_name: str) -> str:
        """The id of a saved session given by id, name or ``latest``.

        Raises:
            SessionError: ``no_store`` with ``--no-save``, ``not_found``.
        """
        return reports.resolve_session(self.engine, id_or_name)

    def check_session_name(self, name: str) -> str:
        """Validate a name for this session (``/session save NAME``).

        Raises:
            SessionError: ``bad_name`` saying what is accepted, ``name_taken`` naming the
                session that has it (names stand for an id, so they stay unique).
        """
        return reports.check_session_name(self.engine, self.engine.masker.clean(name))

    # ------------------------------------------------------------------ runs

    def run(self, prompt: str, *, title: str | None = None) -> AsyncIterator[RunEvent]:
        """Send ``prompt`` and run the loop until it stops (``title``: the line as typed, for a
        custom command, when it is the session's first prompt; else the prompt's first line).

        Yields:
            ``RunEvent``s; the last is always ``RunFinished`` with the stop receipt.

        Raises:
            SessionError: ``busy`` when a run is already active.
        """
        self._ensure_idle()
        prompt = self.engine.masker.clean(prompt)
        run = RunState(record=ExecutionRecord(execution_id=str(uuid.uuid4()), started_at=utc_now()))
        loop = TurnLoop(self.engine, run)
        title = self.engine.masker.clean(title) if title else None
        return self._driver.drive(loop, lambda: loop.prompt(prompt, title))

    def resume(self, approve: Iterable[str] = (), deny: Mapping[str, str | None] | None = None,
               approve_all: bool = False, *, confirm: bool = False,
               reject: str | None = None) -> AsyncIterator[RunEvent]:
        """Decide held calls (or a completion claim) of a WAITING session and continue.

        Args:
            approve: call ids to approve.
            deny: call id → reason (or None) to deny.
            approve_all: approve every pending call (never a completion claim).
            confirm: a person confirms the pending completion claim (``completion.human``).
            reject: a person rejects it with this reason (sent to the model as feedback).

        Yields:
            ``RunEvent``s ending with ``RunFinished``. Until every pending call is
            decided (and no person can be asked now) the run stays WAITING without
            a model call.

        Raises:
            SessionError: ``not_waiting`` (nothing to resume), ``bad_decision`` (a call id
                that is not pending in this pause, or a confirmation given for held calls
                and the other way round).
        """
        self._ensure_idle()
        last = self.last_receipt
        pending, run, preset = decided_run(self.session, self.engine.masker, approve=approve, deny=deny,
                                           approve_all=approve_all, confirm=confirm, reject=reject,
                                           last_verdict=last.verdict if last is not None else None)
        loop = TurnLoop(self.engine, run, preset)
        return self._driver.drive(loop, lambda: loop.resume(pending))

    def answer_confirmation(self, confirmed: bool, reason: str | None = None) -> None:
        """Answer a ``ConfirmationRequested`` event (interactive front ends): confirm the
        completion claim (VERIFIED_COMPLETE, naming who confirmed) or reject it (the
        reason goes to the model as host feedback). Ignored when nothing waits."""
        from amos.engine.completion import CONFIRMATION_ID

        reason = self.engine.masker.clean(reason) if reason else reason
        if self.engine.approvals.answer(CONFIRMATION_ID, confirmed, reason, False):
            self.engine.transcript.approval(CONFIRMATION_ID, confirmed, reason, False)

    def answer_approval(self, call_id: str, approved: bool, reason: str | None = None,
                        remember: bool = False) -> None:
        """Answer an ``ApprovalRequested`` event (interactive front ends).

        The run waiting on that call goes on at once. An answer for a call that is not
        waiting (already answered, or its run ended) is ignored.

        Args:
            call_id: the ``call_id`` of the ``ApprovalRequested`` event.
            approved: run the call (True) or deny it (False). A denied call gets a
                ``denied`` result carrying ``reason``, which the model sees; an
                identical call later in the same execution is denied again without
                asking (spec/stop-receipts.md "Approvals that pause a run").
            reason: why it was denied (optional; ignored when approved; masked).
            remember: with ``approved``, approve this exact call (same tool, same
                arguments: the planned call's identity) for the rest of this process:
                such a call runs without asking (a notice says so). Kept in memory
                only, never saved with the session, so a later ``amos resume``/``amos
                run`` or a reopened session asks again.
        """
        approvals = self.engine.approvals
        future = approvals.waiting.get(call_id)
        if future is None or future.done():
            return
        remember = bool(approved and remember)
        reason = self.engine.masker.clean(reason) if reason else reason
        self.engine.transcript.approval(call_id, approved, reason, remember)
        approvals.answer(call_id, approved, reason, remember)

    @property
    def session_approvals(self) -> int:
        """How many calls were approved for this session (``answer_approval`` with
        ``remember``); they are forgotten when this process ends."""
        return len(self.engine.approvals.for_session)

    def cancel(self, why: str | None = None) -> None:
        """Stop the running model call, tools or compaction: ``user_abort`` (``why``: e.g. "SIGTERM")."""
        self._driver.cancel(why)

    def _ensure_idle(self) -> None:
        self._driver.ensure_idle()

    # ------------------------------------------------------------------ diagnostics and policy

    def get_loop_diagnostics(self) -> LoopDiagnostics | None:
        """A detached snapshot of the latest execution's loop diagnostics.

        While a run is active it describes that run (phase ``running`` or
        ``recovering``); afterwards, the finished execution as saved with the session
        (spec/stop-receipts.md "Loop diagnostics"). None before any run.
        """
        loop = self._driver.live
        if loop is not None and self.is_running:
            doom = loop.doom.diagnostics() if loop.doom is not None else None
            return live_diagnostics(loop.run, loop.policy, doom, self.engine.transcript)
        return self.session.loop.model_copy(deep=True) if self.session.loop else None

    def set_loop_policy(self, policy: Any) -> None:
        """Override the loop policy for later executions of this host (host only).

        The override stays in memory: it is never saved with the session, and model
        output can never install or change it (seeds/loop-policy-bounded-recovery.txt
        "Examples, AMOS and validation").

        Args:
            policy: None (explicitly no policy), a ``LoopPolicy``, a ``LoopPolicyConfig``
                or a JSON object as in spec/config.md ``loop_policy``.

        Raises:
            SessionError: ``busy`` while a run is active.
            ConfigError: the policy does not validate, or ``read_only_tools`` names a
                tool that does not declare effect ``read``.
        """
        self._ensure_idle()
        self.engine.override_policy(policy)

    def loop_policy(self) -> LoopPolicy | None:
        """The loop policy the next execution uses (``--verify`` folded into ``completion``)."""
        return self.engine.loop_policy()

    # ------------------------------------------------------------------ the completion check

    def check_in_force(self) -> CheckInForce:
        """Which completion check the next run uses and where it came from (``flag``:
        this invocation's ``--verify``; ``session``: remembered or set with ``/verify``;
        ``config``: ``loop_policy.completion``; ``none``)."""
        plan = self.engine.completion.plan(self.engine.loop_policy())
        return CheckInForce(summary=plan.summary(), source=plan.source if plan.configured else "none")

    def set_verify(self, command: str | None) -> CheckInForce:
        """Set (``/verify CMD``, ``--verify``) or clear (``/verify off``, ``--no-verify``) the
        completion check this session remembers; ``human`` asks a person. The config's
        ``completion.command`` still applies when none is remembered.

        Raises:
            SessionError: ``busy`` while a run is active.
            UsageError: a blank command.
        """
        self._ensure_idle()
        self.engine.completion.remember(command)
        return self.check_in_force()

    # ------------------------------------------------------------------ context window

    def context_window(self) -> tuple[int, str]:
        """``(window tokens, source)``: ``config``, ``model table`` or ``default``."""
        return self.engine.context.window()

    @property
    def estimator(self) -> Any:
        """The session's token estimator (calibrated by the usage providers report)."""
        return self.engine.context.estimator

    def context_overview(self) -> dict[str, Any]:
        """The ``/context`` figures: window, each part of the next request, how close to compaction (tokens)."""
        return self.engine.context.overview()

    def request_system_prompt(self) -> str:
        """The instructions of the next model request (system prompt + task view)."""
        return self.engine.instructions.text()

    async def compact(self, instructions: str | None = None) -> CompactionResult:
        """Compact now (``/compact [INSTRUCTIONS]``); :meth:`cancel` stops it.

        Raises:
            SessionError: ``busy`` while a run is active.
        """
        self._ensure_idle()
        if instructions:
            instructions = self.engine.masker.clean(instructions)
        with self._driver.holding():  # a run or host edit is refused as busy meanwhile
            return await self.engine.context.compact(instructions)

    # ------------------------------------------------------------------ task notes

    @property
    def tasks(self) -> Any:
        """The task notebook (engine side; None when ``task_state.enabled`` is false)."""
        return self.engine.instructions.tasks

    def update_tasks(self, operation: Callable[[Any], Any]) -> Any:
        """Apply one host operation to the task notebook and save the session.

        Args:
            operation: ``fn(task_state) -> result`` calling one revision-checked method.

        Raises:
            SessionError: ``busy`` while a run executes, ``no_task_state`` when disabled.
            TaskStateError: the operation failed (nothing changed).
        """
        self._ensure_idle()
        return self.engine.instructions.update_tasks(operation)

    # ------------------------------------------------------------------ evidence

    @property
    def evidence(self) -> Any:
        """The evidence capture (engine side; None when evidence is off)."""
        return self.engine.evidence.capture

    @property
    def evidence_enabled(self) -> bool:
        """True when tool outcomes are stored as evidence (``evidence.enabled``)."""
        return self.engine.evidence.enabled

    def evidence_page(self, after: str | None = None, limit: int = 20) -> Any:
        """One page of evidence metadata in this session's scope (``EvidencePage``).

        Raises:
            SessionError: ``no_evidence`` when evidence is off.
            EvidenceError: a bad cursor or a damaged index.
        """
        return self.engine.evidence.page(after, limit)

    def evidence_chunk(self, id_or_reference: str, offset: int = 0, limit: int = 4000) -> Any:
        """A verified chunk of a record's exact JSON (``EvidenceChunk``; offsets in code points).

        Raises:
            SessionError: ``no_evidence`` when evidence is off.
            EvidenceError: missing, corrupt (no content is returned), or a bad offset.
        """
        return self.engine.evidence.chunk(id_or_reference, offset, limit)

    def acknowledge_tool_evidence(self, call_id: str, reference: Any) -> EvidenceReference:
        """Host-only recovery after storage was repaired: attach a stored record to a result.

        The record must be in this session's evidence scope, verify (size and hash), and
        belong to the same call and tool. Only the acknowledgement metadata of the tool
        result changes; its content stays and no tool runs again
        (seeds/durable-tool-evidence.txt "Failure and recovery").

        Raises:
            SessionError: ``busy``, ``not_found`` for an unknown call id, ``no_evidence``.
            EvidenceError: the record is missing, corrupt, or belongs to another call.
        """
        self._ensure_idle()
        return self.engine.evidence.acknowledge(call_id, reference)

    # ------------------------------------------------------------------ saving and checkpoints

    def save(self, name: str | None = None) -> Path:
        """Write the session now; ``name`` (optional) becomes its name.

        Raises:
            SessionError: ``write_failed``, or ``no_store`` with ``--no-save``.
        """
        binding = self.engine.binding
        if not binding.saved:
            raise SessionError("no_store", "this session is not saved (--no-save)")
        if name is not None:
            self.engine.transcript.set(name=self.engine.masker.clean(name))
        return binding.save(self.session)

    @property
    def max_checkpoints(self) -> int:
        """``sessions.max_checkpoints``."""
        return self.engine.binding.max_checkpoints

    def save_checkpoint(self, name: str | None = None) -> CheckpointInfo:
        """Save the session now and take a checkpoint (``/session save [NAME]``).

        Args:
            name: becomes the session's name and labels the checkpoint (labelled
                checkpoints are never pruned).

        Raises:
            SessionError: ``no_store`` with ``--no-save``, ``busy`` during a run,
                ``write_failed``.
        """
        self._ensure_idle()
        self.save(name)
        return self.engine.binding.checkpoint(self.session, "save", label=self.session_name if name else None)

    def list_checkpoints(self) -> list[CheckpointInfo]:
        """Checkpoints of this session, oldest first (``/session checkpoints``)."""
        return self.engine.binding.checkpoints(self.session_id)

    def restore_checkpoint(self, number: int) -> Session:
        """Restore checkpoint ``number`` into this session (``/session restore N``).

        The current state becomes a new checkpoint first. The front end must reopen the
        session afterwards (the task notebook and doom-loop state are rebuilt from the
        restored file); this host must not be used to run again.

        Returns:
            The restored session.

        Raises:
            SessionError: ``no_store``, ``busy``, ``not_found`` (listing the numbers
                that exist), ``corrupt`` or ``write_failed``.
        """
        self._ensure_idle()
        restored = self.engine.binding.restore(self.session, number)
        self.engine.transcript.rebind(restored)
        return restored

    # ------------------------------------------------------------------ model

    def set_model(self, spec: str) -> None:
        """Switch the model for the next run (refused while a run is active).

        Raises:
            SessionError: ``busy``, ``unsupported``.
            UsageError / ConfigError: the model string or its provider is not usable.
        """
        self._ensure_idle()
        self.engine.model.switch(spec)
        self.session.host.model = spec
        self.engine.transcript.fields("host")

    # ------------------------------------------------------------------ lifecycle

    def relock(self) -> None:
        """Take the session's run lock again after :meth:`close` (a reopen that failed).

        Raises:
            SessionError: ``busy`` when another process took the session meanwhile.
        """
        self.engine.binding.relock(self.session_id)

    @property
    def snapshots(self) -> SnapshotControl:
        """Workspace snapshots: ``/undo``, ``/rewind``, ``/diff`` (issue 20)."""
        return SnapshotControl(self.engine.snapshots, self.engine.binding, self.engine.transcript, self._driver,
                               mask=self.engine.masker.clean)

    @property
    def mcp(self) -> McpControl:
        """The session's MCP servers: status, tools, prompts (issue 18; empty without servers)."""
        return McpControl(self.engine.mcp)

    @property
    def permissions(self) -> PermissionsControl:
        """Permission rules, the sandbox and plan mode (issue 19)."""
        return PermissionsControl(self.engine.access, self._ensure_idle)

    def close(self) -> None:
        """Stop the session's MCP servers, release the session lock and temporary
        resources (the journal is fsynced)."""
        for part in (self.engine.mcp, self.engine.access):  # MCP servers; the sandbox's folders
            if part is not None:
                part.close()
        self.engine.transcript.close()
        for fn in self._on_close:
            fn()
        self._on_close.clear()
        self.engine.binding.release()
