"""Task-state data types: scope, limits, notes, action receipts and the snapshot.

Seed: protected-task-state ("Enable one host-selected task", "Keep observations and
proposals below host authority", "Record execution without inventing remote
completion", "Capacity, compaction and request integrity"). Every model is frozen,
rejects unknown fields and is validated from strict JSON text (no coercion of
``"1"`` to ``1``). The stored :class:`TaskBook` *is* the version-1 snapshot.

Pure code: no I/O and no import-time side effects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from amos.evidence.model import EvidenceReference

__all__ = [
    "ACTIVE",
    "CATEGORIES",
    "CONFIRM_STATUSES",
    "SNAPSHOT_KIND",
    "SNAPSHOT_VERSION",
    "TERMINAL_CONFIRMATIONS",
    "ActionOutcome",
    "ActionReceipt",
    "Authority",
    "Category",
    "ConfirmInput",
    "Confirmation",
    "HostDelta",
    "Lifecycle",
    "LifecycleBinding",
    "LifecycleView",
    "Note",
    "NoteInput",
    "PruneInput",
    "Resolution",
    "ResolveInput",
    "Source",
    "TaskBook",
    "TaskLimits",
    "TaskScope",
]

SNAPSHOT_VERSION = 1
"""Version of the snapshot format written by :meth:`TaskState.to_snapshot`."""
SNAPSHOT_KIND = "amos.task_state"
"""The ``kind`` field of every snapshot."""

MAX_ID_CHARS = 128
MAX_LABEL_CHARS = 500
MAX_TEXT_CHARS = 4000
MAX_LINKS = 32
"""Most ``conflicts_with`` links on one note."""
MAX_ITEMS = 1000
"""Most items in one list of an input delta (inputs are also byte-bounded)."""

Category = Literal["objective", "constraint", "decision", "question", "artifact"]
"""What a note records."""
CATEGORIES: tuple[str, ...] = ("objective", "constraint", "decision", "question", "artifact")
Authority = Literal["host", "proposal", "assumption"]
"""``host``: asserted by the host; ``proposal``/``assumption``: unconfirmed data."""
NoteStatus = Literal["active", "superseded", "resolved"]
ACTIVE = "active"
ConfirmStatus = Literal["waiting_external", "completed", "failed", "cancelled"]
"""Host workflow status of an action (separate from its execution diagnostics)."""
CONFIRM_STATUSES: tuple[str, ...] = ("waiting_external", "completed", "failed", "cancelled")
TERMINAL_CONFIRMATIONS: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
OutcomeStatus = Literal[
    "succeeded", "failed", "denied", "blocked", "cancelled", "timed_out", "not_started"
]
Completion = Literal["complete", "unknown"]
Effect = Literal["read", "write", "unknown"]

# IDs are single tokens so slash commands can name them; no whitespace or controls.
ID_CHARS = r"[A-Za-z0-9][A-Za-z0-9._:@/+-]*"
"""What a note or action id may be, as a regular expression for ``re.fullmatch`` (its
length is :data:`MAX_ID_CHARS` at most)."""
Id = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_ID_CHARS, pattern=rf"^{ID_CHARS}$"),
]
"""1–128 characters: a letter or digit, then letters, digits and ``._:@/+-``."""
Label = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_LABEL_CHARS, pattern=r"^[^\x00-\x1f\x7f]+$")
]
"""1–500 characters on one line (no control characters)."""
Text = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS, pattern=r"^[^\x00-\x08\x0b-\x1f\x7f]+$"),
]
"""1–4,000 characters; tab and newline are the only control characters allowed."""
Timestamp = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z:.+-]+$")]
"""An ISO-8601 timestamp (not parsed)."""
Revision = Annotated[int, Field(ge=0, le=2**53 - 1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TaskScope(_Strict):
    """The host scope a notebook is bound to (from the host's authorization layer).

    Attributes:
        owner_id: owning user; must match the evidence owner when both are enabled.
        namespace: a partition of the owner's tasks.
        tenant_id: optional tenant/account; None means none.
    """

    owner_id: Label
    namespace: Label
    tenant_id: Label | None = None


@dataclass(frozen=True)
class TaskLimits:
    """Capacity of one notebook (config ``task_state``; seed "Capacity…").

    Attributes:
        max_entries: notes plus action receipts kept (default 100).
        max_prompt_tokens: estimated tokens of the rendered task view (default 8,000).
        max_snapshot_bytes: UTF-8 bytes of the strict-JSON snapshot, and of each input
            (default 262,144 = 256 KiB).
    """

    max_entries: int = 100
    max_prompt_tokens: int = 8000
    max_snapshot_bytes: int = 262144

    def __post_init__(self) -> None:
        for name in ("max_entries", "max_prompt_tokens", "max_snapshot_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer")

    @classmethod
    def from_config(cls, config: Any) -> TaskLimits:
        """Limits from an :class:`amos.config_models.TaskStateConfig` (or any object with them)."""
        return cls(config.max_entries, config.max_prompt_tokens, config.max_snapshot_bytes)


class Source(_Strict):
    """Where a note, resolution or confirmation came from (host-supplied).

    Attributes:
        label: human description, e.g. ``Confirmed user instruction``.
        turn_id: optional conversation turn id.
        evidence: optional evidence reference (a citation; it verifies nothing).
    """

    label: Label
    turn_id: Label | None = None
    evidence: EvidenceReference | None = None


class NoteInput(_Strict):
    """One new note as submitted to ``update_host``, ``propose`` or ``assume``.

    Attributes:
        id: unique among retained notes (an absent, pruned id may be reused).
        category: ``objective``, ``constraint``, ``decision``, ``question``, ``artifact``.
        text: the note itself.
        source: where it came from.
        supersedes: host notes only: an active note of the same category this corrects.
        conflicts_with: ids of retained notes this conflicts with (no winner chosen).
        uncertainty: optional description of how uncertain a proposal/assumption is.
    """

    id: Id
    category: Category
    text: Text
    source: Source
    supersedes: Id | None = None
    conflicts_with: tuple[Id, ...] = Field(default=(), max_length=MAX_LINKS)
    uncertainty: Label | None = None


class Resolution(_Strict):
    """A host resolution of a note (``revision``: the revision that recorded it)."""

    revision: Revision
    label: Label | None = None
    recorded_at: Timestamp | None = None


class Note(_Strict):
    """A retained note.

    Attributes:
        status: ``active``; ``superseded`` (by a host correction; ``superseded_by``
            may be None once that correction's id was pruned and reused); ``resolved``.
        superseded_by: id of the correcting note, if still linked.
        resolution: set exactly when ``status`` is ``resolved``.
        revision: the revision that admitted the note.
        (other fields as in :class:`NoteInput`.)
    """

    id: Id
    category: Category
    text: Text
    source: Source
    authority: Authority
    status: NoteStatus = "active"
    supersedes: Id | None = None
    superseded_by: Id | None = None
    conflicts_with: tuple[Id, ...] = Field(default=(), max_length=MAX_LINKS)
    uncertainty: Label | None = None
    resolution: Resolution | None = None
    revision: Revision
    recorded_at: Timestamp | None = None


class ResolveInput(_Strict):
    """A resolution with an optional label (``resolve`` also accepts a bare id)."""

    id: Id
    label: Label | None = None


class ConfirmInput(_Strict):
    """A host confirmation of an action's workflow status (``source`` is required)."""

    execution_id: Id
    status: ConfirmStatus
    source: Source


class PruneInput(_Strict):
    """Explicit pruning: resolved/superseded notes and host-confirmed terminal actions."""

    note_ids: tuple[Id, ...] = Field(default=(), max_length=MAX_ITEMS)
    execution_ids: tuple[Id, ...] = Field(default=(), max_length=MAX_ITEMS)


class HostDelta(_Strict):
    """One atomic host transaction, applied in field order: notes, resolve,
    confirm_actions, then prune."""

    notes: tuple[NoteInput, ...] = Field(default=(), max_length=MAX_ITEMS)
    resolve: tuple[Id | ResolveInput, ...] = Field(default=(), max_length=MAX_ITEMS)
    confirm_actions: tuple[ConfirmInput, ...] = Field(default=(), max_length=MAX_ITEMS)
    prune: PruneInput | None = None


class ActionOutcome(_Strict):
    """What ``record_action`` admits: the receipt fields of one observed tool call.

    Raw results, arguments and error prose are not accepted; they stay in the outcome
    and its evidence. :func:`amos.tasks.receipt_from_tool_outcome` builds this from an
    amos ``ToolOutcome``.

    Attributes:
        execution_id: the receipt's identity (for amos tool calls
            ``"<run execution id>:<call id>"``).
        call_id: the model's call id.
        run_id: the run execution the call belongs to, if known.
        tool: tool name.
        effect: declared effect.
        status: framework outcome status.
        completion: ``unknown`` when a write may or may not have happened.
        started_at / ended_at: ISO-8601 timestamps.
        evidence: optional evidence reference (may be repaired later).
    """

    execution_id: Id
    call_id: Label
    run_id: Label | None = None
    tool: Label
    effect: Effect = "unknown"
    status: OutcomeStatus
    completion: Completion = "complete"
    started_at: Timestamp | None = None
    ended_at: Timestamp | None = None
    evidence: EvidenceReference | None = None


class Confirmation(_Strict):
    """The host's workflow status of an action, with its required source."""

    status: ConfirmStatus
    source: Source
    revision: Revision
    recorded_at: Timestamp | None = None


class ActionReceipt(ActionOutcome):
    """A retained action receipt: the outcome fields plus host confirmation."""

    confirmation: Confirmation | None = None
    revision: Revision


class LifecycleBinding(_Strict):
    """Immutable binding to a host-owned task or routine lifecycle."""

    kind: Literal["task", "routine"]
    id: Id


class LifecycleView(_Strict):
    """A host-reported lifecycle status (a cached view; it transitions nothing)."""

    status: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
    detail: Label | None = None


class Lifecycle(LifecycleView):
    """The cached lifecycle view and the revision that stored it."""

    revision: Revision
    recorded_at: Timestamp | None = None


class TaskBook(_Strict):
    """The whole notebook; its JSON dump is the version-1 snapshot.

    Attributes:
        version: 1.
        kind: ``amos.task_state``.
        task_id / scope / association / lifecycle_binding: the binding (immutable).
        revision: grows by one per committed change.
        notes / actions: retained records, in admission order.
        lifecycle: the last synced lifecycle view, if any.
    """

    version: int
    kind: Literal["amos.task_state"] = SNAPSHOT_KIND
    task_id: Id
    scope: TaskScope
    association: Label | None = None
    lifecycle_binding: LifecycleBinding | None = None
    revision: Revision = 0
    notes: tuple[Note, ...] = ()
    actions: tuple[ActionReceipt, ...] = ()
    lifecycle: Lifecycle | None = None
