"""The session file's model: versioned, migrated on load, validated.

A session holds the transcript (neutral messages), a host section (the settings it was
run with — never ``--yes``, never a secret) and optional capability sections, each with
a default so older files still load. :class:`~amos.session_store.SessionStore` (also
importable from here) reads and writes them (DESIGN.md "Storage").
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from amos.errors import SessionError
from amos.messages import Message, ToolCallPart, Usage
from amos.policy.stop import (
    Baseline,
    CompletionResult,
    LoopDiagnostics,
    LoopObservation,
    StopReceipt,
)

SESSION_VERSION = 2
"""Version written by this amos. 1: before the journal and checkpoints (migrated on load)."""
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9 ._-]{0,62}[A-Za-z0-9._-])?$")
_GENERATED_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")


def is_session_id(text: str) -> bool:
    """True when ``text`` has the form of a session id amos generates (``20261202-142230-ad5547``)."""
    return bool(_GENERATED_ID_RE.match(text))


def utc_now() -> str:
    """Current time as ISO-8601 UTC with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HostSettings(_Model):
    """The host settings a session was run with (spec/cli.md).

    Never holds ``--yes`` or a secret. ``checker_pins`` maps a Python checker or
    progress function that lives inside the workspace to the SHA-256 of its file when
    the host first loaded it: the model can write the workspace, so a changed file can
    never confirm anything in this session.
    """

    model: str | None = None
    base_url: str | None = None
    workspace: str | None = None
    config_path: str | None = None
    verify: str | None = None
    max_steps: int | None = None
    checker_pins: dict[str, str] = Field(default_factory=dict)
    machine: str | None = None
    """The host name of the machine the session last ran on (issue 22)."""


class ExecutionRecord(_Model):
    """The running state of one execution, persisted while it waits for approval.

    Attributes:
        execution_id: UUID of the execution.
        started_at: ISO-8601 UTC.
        steps: model calls made so far.
        usage: usage of this execution so far.
        tool_calls: ``{call_id, tool, status, evidence_id}`` rows of this execution.
        observations: tool executions as diagnostics show them.
        denied: argument fingerprint → reason of calls a person denied (never asked twice).
        effect_succeeded: a write/unknown-effect call succeeded.
        work_done: such a call did work a completion check may credit: not a write that
            changed nothing, not a command that exited non-zero (``check_unstable``).
        completion: last completion verdict (an earlier false one is kept when a
            later bound stops the run).
        recovery_attempts: loop-policy feedback turns given so far.
        progress_changed: the host progress key changed during the execution.
        tracked: the loop policy's tracked counts and bound (diagnostics).
        policy_state: the loop policy's admissions and counters while the execution
            waits for approval, so a resumed execution never repeats an admitted action.
        output_text: text of the latest assistant turn.
        baseline: how the completion checks stood before the first model call.
        baseline_digest: the workspace digest taken then (``{sha256, files, truncated}``).
        plan: the execution is a plan run (a resume of it stays one; issue 19).
        empty_nudged: the one recovery nudge after an empty answer was given.
        claim_route: how completion was last claimed (``answer`` / ``done_tool``).
        confirmed_by: who confirmed completion (``completion.human``).
    """

    execution_id: str
    started_at: str
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    observations: list[LoopObservation] = Field(default_factory=list)
    denied: dict[str, str] = Field(default_factory=dict)
    effect_succeeded: bool = False
    work_done: bool = False
    completion: CompletionResult | None = None
    recovery_attempts: int = 0
    progress_changed: bool = False
    tracked: dict[str, int | None] = Field(default_factory=dict)
    policy_state: dict[str, Any] | None = None
    output_text: str = ""
    baseline: Baseline | None = None
    baseline_digest: dict[str, Any] | None = None
    plan: bool = False
    empty_nudged: bool = False
    claim_route: str | None = None
    confirmed_by: str | None = None


class HeldCall(_Model):
    """A tool call held by an approval pause.

    Attributes:
        call: the call as the model sent it.
        needs_approval: True when a person must decide it before it runs.
        decision: ``approve`` / ``deny`` once decided, else None.
        reason: the denial reason given.
    """

    call: ToolCallPart
    needs_approval: bool
    decision: str | None = None
    reason: str | None = None


class ConfirmationRequest(_Model):
    """A completion claim waiting for a person's confirmation (``completion.human``).

    Attributes:
        claim: what the model said it did (its answer or done-tool summary, masked).
        decision: ``confirm`` / ``reject`` once decided, else None.
        reason: the rejection's reason (sent to the model as host feedback).
        by: who decided.
    """

    claim: str = ""
    decision: str | None = None
    reason: str | None = None
    by: str | None = None


class PendingApproval(_Model):
    """A run paused WAITING (spec/stop-receipts.md "Approvals that pause a run"): held
    tool calls, or a completion claim waiting for a person (``confirmation``)."""

    execution: ExecutionRecord
    held: list[HeldCall]
    owner: str | None = None
    deadline: str | None = None
    created_at: str = Field(default_factory=utc_now)
    confirmation: ConfirmationRequest | None = None

    def token(self, session_id: str, call_id: str) -> str:
        """``<session>:<execution>:<call>`` naming this exact pause."""
        return f"{session_id}:{self.execution.execution_id}:{call_id}"

    def undecided(self) -> list[HeldCall]:
        """Held calls still needing a decision, in order."""
        return [h for h in self.held if h.needs_approval and h.decision is None]


class FileStep(_Model):
    """One entry of a session's file history: a step that changed files, or a restore (issue 20).

    Attributes:
        seq: its number in the session's file history (from 0, only grows; a
            conversation checkpoint records the next one as ``file_seq``).
        kind: ``step`` (the agent's tools in one step), ``undo`` (``/undo``) or
            ``rewind`` (``/rewind``, ``amos sessions restore --files``).
        execution_id: the execution whose step it was (``step`` only).
        step: the step number in that execution (``step`` only).
        before: snapshot id taken before the step's first change (or before the restore).
        after: snapshot id taken when the step's tools finished (or after the restore);
            None while the step runs (the entry is written before its first change, so a
            step cut short by ``kill -9`` is still in the history).
        files: ``{"path", "change"}`` rows of what it changed (``added``, ``deleted``,
            ``modified``, ``mode``, ``type``); paths are workspace-relative.
        unrestorable: ``{"path", "change", "reason"}`` rows of files the step changed
            that no snapshot holds (ignored by the ignore rules), so ``/undo`` cannot put
            them back; it lists them instead.
        interrupted: the step was cut short (amos was killed during it): ``after`` was
            taken when amos next opened the session, so it also holds whatever changed
            between the crash and then.
        at: ISO-8601 UTC time it was recorded.
        undone: a ``step`` whose changes ``/undo`` or a rewind put back.
        undoes: the ``seq`` of the step an ``undo`` put back; the checkpoint number a
            ``rewind`` went back to.
    """

    seq: int
    kind: Literal["step", "undo", "rewind"] = "step"
    execution_id: str | None = None
    step: int | None = None
    before: str
    after: str | None
    files: list[dict[str, str]] = Field(default_factory=list)
    unrestorable: list[dict[str, str]] = Field(default_factory=list)
    at: str = Field(default_factory=utc_now)
    undone: bool = False
    undoes: int | None = None
    interrupted: bool = False


class FileHistory(_Model):
    """What the agent did to the workspace's files, as snapshots (issue 20: /undo, /rewind, /diff).

    Kept across a conversation restore (like usage): it is a record of what happened to
    the files, and a rewind of the files needs the steps taken after the checkpoint.

    Attributes:
        steps: the newest :data:`MAX_FILE_STEPS` entries, oldest first.
        next_seq: the ``seq`` the next entry gets.
        head: the newest snapshot id recorded (what the files were last known to be).
        note: what the next model request must be told (files put back by ``/undo`` or
            a rewind), delivered once as host feedback.
    """

    steps: list[FileStep] = Field(default_factory=list)
    next_seq: int = 0
    head: str | None = None
    note: str | None = None

    def add(self, entry: FileStep) -> FileStep:
        """Append ``entry`` (its ``seq`` is assigned here), dropping the oldest past the cap."""
        entry.seq = self.next_seq
        self.next_seq += 1
        self.steps.append(entry)
        del self.steps[:-MAX_FILE_STEPS]
        if entry.after is not None:
            self.head = entry.after
        return entry

    def drop_open(self, entry: FileStep) -> None:
        """Remove ``entry``, an open step that changed nothing; its ``seq`` is given back
        when it is the newest (no checkpoint can have been taken while it was open)."""
        kept = [e for e in self.steps if e.seq != entry.seq]
        if len(kept) != len(self.steps):
            self.steps = kept
            if entry.seq == self.next_seq - 1:
                self.next_seq -= 1

    def open_steps(self) -> list[FileStep]:
        """Steps whose ``after`` snapshot was never taken (amos was killed during them)."""
        return [e for e in self.steps if e.after is None]


MAX_FILE_STEPS = 200
"""File-history entries a session keeps (older ones cannot be undone or rewound)."""


class Session(_Model):
    """One saved session (``session.json``).

    ``doom_loop`` is the doom-loop detector's state (spec/doom-loop-behaviour.md §6) plus
    the runner's ``stop_verdict`` and ``pending_steer``; None before it is used.
    ``evidence_scope`` is the evidence scope the session's records belong to (a session
    cannot be opened under another scope) and ``evidence_recent`` a bounded index of its
    latest evidence receipts (``{call_id, tool, id, status, stored}``), newest last.
    ``task_state`` is the host-owned task notebook's versioned snapshot (None: none yet).
    ``journal_seq`` is the last journal entry this snapshot reflects (entries after it
    are replayed on load); ``last_checkpoint`` the highest checkpoint number taken.
    ``model_calls`` holds the usage of each model call (bounded, newest last) and
    ``estimator`` the context-budget estimator's calibration, and ``context_window`` the
    window learned from the server (its context-length error or its metadata), used when
    ``context.window_tokens`` is not configured. ``file_history`` records the workspace
    snapshots of the steps that changed files and of every restore (issue 20).
    """

    version: int = SESSION_VERSION
    id: str
    name: str | None = None
    title: str | None = None
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)
    host: HostSettings = Field(default_factory=HostSettings)
    messages: list[Message] = Field(default_factory=list)
    provider_state: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    loop: LoopDiagnostics | None = None
    last_stop: StopReceipt | None = None
    pending: PendingApproval | None = None
    doom_loop: Any = None
    evidence_scope: dict[str, Any] | None = None
    evidence_recent: list[dict[str, Any]] = Field(default_factory=list)
    task_state: dict[str, Any] | None = None
    journal_seq: int = 0
    last_checkpoint: int = 0
    model_calls: list[dict[str, Any]] = Field(default_factory=list)
    estimator: dict[str, Any] | None = None
    context_window: int | None = None
    file_history: FileHistory = Field(default_factory=FileHistory)


class SessionSummary(_Model):
    """A row of ``amos sessions list``.

    ``broken`` says why the session cannot be opened (and what repairs it); the other
    fields are then best effort.
    """

    id: str
    name: str | None
    title: str | None
    updated_at: str
    messages: int
    last_verdict: str | None
    model: str | None
    path: str
    broken: str | None = None
    cost_usd: float | None = None
    workspace: str | None = None
    """The workspace the session last ran in (its host settings), for ``amos -c``."""
    machine: str | None = None
    """The host name of the machine it last ran on (issue 22)."""


def _migrate_1(data: dict[str, Any]) -> dict[str, Any]:
    """1 → 2: the journal and checkpoints arrive; every new field has its default."""
    data["version"] = 2
    return data


MIGRATIONS = {1: _migrate_1}
"""``version → function`` upgrading a session's JSON data by one version, in memory."""


def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Bring a session's JSON data up to :data:`SESSION_VERSION` (in memory).

    The new version is written on the next save.

    Raises:
        SessionError: ``too_new`` for a file written by a newer amos, ``corrupt`` for a
            missing or unknown version.
    """
    version = data.get("version")
    if type(version) is not int:  # noqa: E721 - true, 2.0 and "2" are not versions
        raise SessionError("corrupt", f"{where}: session version {version!r} is not a whole number")
    if version > SESSION_VERSION:
        raise SessionError("too_new", f"{where}: session version {version} was written by a newer amos "
                           f"(this one reads up to {SESSION_VERSION}); upgrade amos to open it")
    while isinstance(version, int) and version in MIGRATIONS:
        data = MIGRATIONS[version](data)
        version = data.get("version")
    if version != SESSION_VERSION:
        raise SessionError("corrupt", f"{where}: session version {version!r} is not supported "
                           f"(this amos reads versions 1 to {SESSION_VERSION})")
    return data


def validate_session(data: dict[str, Any], where: str) -> Session:
    """A :class:`Session` from migrated JSON data.

    Raises:
        SessionError: ``corrupt`` naming the first invalid field.
    """
    try:
        return Session.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise SessionError("corrupt", f"{where}: {loc}: {err['msg']}") from None


def check_session_name(name: str, existing_ids: list[str] | None = None) -> str:
    """Validate a session name given with ``/session save NAME``.

    Names are 1-64 characters of letters, digits, space, ``.``, ``_`` and ``-``,
    starting with a letter or digit; they may not look like a session id, equal an
    existing id, or be ``latest`` (so an id always means the same session).

    Raises:
        SessionError: ``bad_name`` saying what is accepted.
    """
    accepted = ("a session name is 1-64 ASCII letters, digits, spaces, '.', '_' or '-', starting with a "
                "letter or digit, not ending with a space, and not a session id or 'latest'")
    if (not _NAME_RE.fullmatch(name) or _GENERATED_ID_RE.match(name) or name == "latest"
            or name in (existing_ids or [])):
        raise SessionError("bad_name", f"invalid session name {name!r}: {accepted}")
    return name


def new_session_id() -> str:
    """A sortable, unique session id such as ``20261130-031500-a1b2c3``."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def __getattr__(name: str) -> Any:
    """``SessionStore`` is importable from here too (it lives in :mod:`amos.session_store`,
    which builds on the models above)."""
    if name == "SessionStore":
        from amos.session_store import SessionStore

        return SessionStore
    raise AttributeError(f"module 'amos.sessions' has no attribute {name!r}")

__all__ = ["SESSION_VERSION", "MIGRATIONS", "ExecutionRecord", "HeldCall", "HostSettings", "PendingApproval",
           "Session", "SessionSummary", "check_session_name", "migrate", "new_session_id",
           "utc_now", "validate_session"]
