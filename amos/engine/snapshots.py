"""The snapshot collaborator: workspace snapshots around every step that may change files (issue 20).

:class:`SnapshotGate` is the last gate of every round (``engine/loop.py``), so it sees
a call only once every other gate let it through, just before it is dispatched:

- the first call of a step that may change files — a ``write`` tool, ``run_command``
  (effect ``unknown``: a command can change anything), an MCP tool whose effect is not
  ``read`` — first takes the snapshot *before*, with the ``path`` of every write-tool
  call of the round included even when ignored, so each file the step's tools touch is
  kept exactly as it was before the step, and writes the step's entry (``after`` None)
  in the session's :class:`~amos.sessions.FileHistory`, journalled at once: a step cut
  short by ``kill -9`` is still in the history, and the next use of the session closes
  it (:func:`~amos.engine.file_history.settle_open_steps`);
- when the step's tools are done (``round_finished``, or ``run_finishing`` for a round
  cut short by an approval pause, a stop or a cancellation) it takes the snapshot
  *after* and completes the entry with the files changed (or removes it when none
  changed), so ``/undo`` knows the last step that changed files and each conversation
  checkpoint records where the history stood;
- ``run_finishing`` puts the files the run changed (from the snapshots, so what
  ``run_command`` changed is included) on the :class:`~amos.engine.state.RunState`
  for ``RunFinished`` and ``--json``;
- ``before_request`` delivers the note a restore left for the model (which files
  ``/undo`` or a rewind put back) as host feedback, once.

The shadow repository (``<data>/snapshots/<session>/git``) is opened on the first call
that needs it. When it cannot be (``checkpoints.files`` false, a home folder, no git)
file checkpoints are off and one notice says why. A snapshot that fails never fails
the run: one notice, the tool still runs, and no more snapshots are taken in that run.
Git runs on a worker thread under one lock, so the event loop stays free and a
snapshot cut short by a cancellation finishes before the next one starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from amos.engine.file_history import run_changes, settle_open_steps
from amos.engine.gates import Gate
from amos.events import Notice
from amos.messages import Message
from amos.sessions import FileHistory, FileStep

if TYPE_CHECKING:
    from amos.engine.calls import PlannedCall
    from amos.engine.gates import Decision, RoundControl
    from amos.engine.state import RunState
    from amos.engine.transcript import Transcript
    from amos.snapshots import ShadowRepo, Snapshot

T = TypeVar("T")

Opener = Callable[[], "tuple[ShadowRepo | None, str | None]"]
"""Opens the session's shadow repository: ``(repo, None)`` or ``(None, why file checkpoints are off)``."""

MAX_SKIPPED_SHOWN = 10
"""Skipped paths named in one notice."""


def write_paths(calls: Sequence[PlannedCall]) -> list[str]:
    """The ``path`` arguments of the valid write-tool calls among ``calls`` (each once, in order)."""
    found: list[str] = []
    for call in calls:
        arguments = call.call.arguments if isinstance(call.call.arguments, dict) else {}
        path = arguments.get("path")
        if call.valid and call.effect == "write" and isinstance(path, str) and path.strip() and path not in found:
            found.append(path)
    return found


class SnapshotGate(Gate):
    """Snapshots before and after every step that may change files, and the session's file history.

    Args:
        opener: opens the shadow repository (``amos.snapshots.open_session_repo``
            bound to the config, session id and workspace); called once, on first need.
        transcript: the session (its ``file_history`` is updated and journalled here).

    Attributes:
        why_off: why file checkpoints are off (None while on, or not yet opened).
    """

    name = "snapshots"

    def __init__(self, opener: Opener, transcript: Transcript):
        self._opener = opener
        self.transcript = transcript
        self.why_off: str | None = None
        self._repo: ShadowRepo | None = None
        self._opened = False
        self._lock = threading.RLock()
        self._said: set[str] = set()
        self._run: RunState | None = None
        self._before: str | None = None
        self._open: int | None = None  # the seq of this step's history entry
        self._unkept: Any = None  # the ignored files' scan before a step that may run anything
        self._step = 0
        self._failed = False

    # ------------------------------------------------------------------ the repository

    @property
    def history(self) -> FileHistory:
        """The session's file history (the session in force: a restore may replace it)."""
        return self.transcript.session.file_history

    def repo(self) -> ShadowRepo | None:
        """The shadow repository, opened on first use (None when file checkpoints are off).

        Runs git's version check the first time: call it off the event loop.
        """
        with self._lock:
            if not self._opened:
                try:
                    self._repo, self.why_off = self._opener()
                except Exception as exc:  # noqa: BLE001 - a bad id or folder turns snapshots off, never the run
                    self._repo, self.why_off = None, f"file checkpoints are off: {exc}"
                self._opened = True
            return self._repo

    def locked(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``fn(*args, **kwargs)`` holding the repository lock of this process (blocking)."""
        with self._lock:
            return fn(*args, **kwargs)

    def record_history(self) -> None:
        """Journal the file history after a change to it."""
        self.transcript.fields("file_history")

    # ------------------------------------------------------------------ the hooks

    def _begin(self, run: RunState) -> None:
        if self._run is not run:  # a new execution: nothing open, snapshots allowed again
            self._run, self._before, self._failed = run, None, False

    async def before_request(self, run: RunState) -> None:
        """Deliver a restore's note to the model (once) as host feedback."""
        self._begin(run)
        history = self.history
        if history.note:
            note, history.note = history.note, None
            self.transcript.append(Message.user(note, kind="feedback"))
            self.record_history()

    async def admit(self, run: RunState, call: PlannedCall, round: RoundControl) -> Decision | None:
        """Snapshot before the first call of the step that may change files (never refuses)."""
        self._begin(run)
        if not call.valid or call.effect == "read" or self._failed:
            return None
        repo = await asyncio.to_thread(self.repo)
        if repo is None:
            self._say(run, self.why_off or "file checkpoints are off",
                      "; /undo, /rewind --files and /diff are not available in this session", key="off")
            return None
        step = run.record.steps
        if self._before is not None and self._step == step:
            return None  # the step's snapshot before already holds every file its calls may touch
        include = write_paths([call, *round.calls])
        if self.history.open_steps():
            await self._settle(run, repo)
        snap = await self._snapshot(run, repo, f"step {step}: before {call.tool_name}", include)
        self._unkept = None
        if snap is not None and any(c.valid and c.effect == "unknown" for c in (call, *round.calls)):
            try:  # a command may change ignored files no snapshot keeps: list what it changes
                self._unkept = await asyncio.to_thread(self.locked, repo.unkept)
            except Exception:  # noqa: BLE001 - without the scan such changes go unlisted, as before
                self._unkept = None
        if snap is not None:
            self._before, self._step = snap.id, step
            entry = self.history.add(FileStep(seq=0, kind="step", execution_id=run.execution_id, step=step,
                                              before=snap.id, after=None))
            self._open = entry.seq
            self.record_history()  # before the step's first change: a kill -9 during it keeps the entry
        return None

    async def _settle(self, run: RunState, repo: ShadowRepo) -> None:
        """Close the steps an earlier amos was killed during (their ``after`` is taken now)."""
        try:
            settled = await asyncio.to_thread(self.locked, settle_open_steps, repo, self.history)
        except Exception as exc:  # noqa: BLE001 - reported; the run goes on
            self._fail(run, exc)
            return
        if settled:
            self.record_history()
            steps = ", ".join(str(e.step) for e in settled)
            self._say(run, f"snapshots: step {steps} of an earlier run was cut short (amos was stopped during it); "
                           "its changes are taken as everything that differs from the snapshot before it, and "
                           "/undo puts them back", key=f"settled:{steps}")

    async def round_finished(self, run: RunState) -> None:
        """The step's tools are done: snapshot after, record the step."""
        self._begin(run)
        if self._before is not None:
            before, self._before = self._before, None
            found = await asyncio.to_thread(self._after, run, before)
            self._record(run, before, found)

    def run_finishing(self, run: RunState) -> None:
        """Close a step the run's end cut short; put the files the run changed on ``run``."""
        self._begin(run)
        if self._before is not None:
            before, self._before = self._before, None
            self._record(run, before, self._after(run, before))
        repo = self._repo
        if repo is None or not self.history.steps:
            return
        try:
            run.files_changed = self.locked(run_changes, repo, self.history, run.execution_id)
        except Exception as exc:  # noqa: BLE001 - the receipt is built anyway
            self._say(run, f"snapshots: cannot list the files this run changed: {exc}", key="list")

    # ------------------------------------------------------------------ taking snapshots

    async def _snapshot(self, run: RunState, repo: ShadowRepo, message: str, include: list[str]) -> Snapshot | None:
        from amos.errors import SnapshotError

        try:
            try:
                snap = await asyncio.to_thread(self.locked, repo.snapshot, message, include=include)
            except SnapshotError as exc:
                if exc.code != "bad_path" or not include:
                    raise
                snap = await asyncio.to_thread(self.locked, repo.snapshot, message)  # the tool refuses that path
        except Exception as exc:  # noqa: BLE001 - a snapshot failure never fails the run
            self._fail(run, exc)
            return None
        self._report(run, snap)
        return snap

    def _after(self, run: RunState, before: str) -> tuple[Snapshot, list[dict[str, str]], list[dict[str, str]]] | Exception:
        """Snapshot after the step, what it changed, and what changed among the ignored
        files no snapshot keeps (blocking; errors returned, not raised)."""
        from amos.snapshots.unkept import changes as unkept_changes

        repo = self._repo
        assert repo is not None
        scan, self._unkept = self._unkept, None
        try:
            with self._lock:
                snap = repo.snapshot(f"step {self._step}: after")
                changes = repo.agent_changes([(before, snap.id)])
                unkept = unkept_changes(scan, repo.unkept()) if scan is not None else []
        except Exception as exc:  # noqa: BLE001 - reported on the loop by _record
            return exc
        kept = {c.path for c in changes}
        return (snap, [{"path": c.path, "change": c.change} for c in changes],
                [row for row in unkept if row["path"] not in kept])

    def _record(self, run: RunState, before: str,
                found: tuple[Snapshot, list[dict[str, str]], list[dict[str, str]]] | Exception) -> None:
        if isinstance(found, Exception):
            self._fail(run, found)
            return
        snap, files, unkept = found
        self._report(run, snap)
        history = self.history
        seq, self._open = self._open, None
        entry = next((e for e in history.steps if e.seq == seq), None)
        if entry is None and (files or unkept):  # the open entry is gone (should not happen): record anew
            entry = history.add(FileStep(seq=0, kind="step", execution_id=run.execution_id, step=self._step,
                                         before=before, after=None))
        if entry is not None:
            if files or unkept:
                entry.after, entry.files, entry.unrestorable = snap.id, files, unkept
            else:
                history.drop_open(entry)
        history.head = snap.id
        self.record_history()

    # ------------------------------------------------------------------ notices

    def _say(self, run: RunState, text: str, tail: str = "", *, key: str | None = None,
             level: str = "warning") -> None:
        """One notice per distinct ``key`` (or text) for the life of this host."""
        key = key or text
        if key in self._said:
            return
        self._said.add(key)
        if key == "off" and "checkpoints.files is false" in text:
            level = "info"  # turned off on purpose: said, not warned about
        run.emit(Notice(level=level, text=text + tail))

    def _fail(self, run: RunState, exc: Exception) -> None:
        self._failed = True
        self._say(run, f"snapshots: {exc}; the tool runs without a file checkpoint and /undo cannot put this "
                       "run's changes back", key=f"fail:{exc}")

    def _report(self, run: RunState, snap: Snapshot) -> None:
        for warning in snap.warnings:  # repairs after a crash, the workspace size cap
            self._say(run, warning if warning.startswith("snapshots:") else f"snapshots: {warning}")
        fresh = [s for s in snap.skipped if f"skip:{s.path}" not in self._said]
        if fresh:
            for skipped in fresh:
                self._said.add(f"skip:{skipped.path}")
            shown = "; ".join(f"{s.path} ({s.reason})" for s in fresh[:MAX_SKIPPED_SHOWN])
            more = f"; and {len(fresh) - MAX_SKIPPED_SHOWN} more" if len(fresh) > MAX_SKIPPED_SHOWN else ""
            run.emit(Notice(level="warning", text=f"snapshots: left out of file checkpoints (not restorable): "
                                                  f"{shown}{more}"))


__all__ = ["SnapshotGate"]
