"""What front ends see of the workspace snapshots: ``host.snapshots`` (issue 20: /undo, /rewind, /diff).

A small facade over the engine's :class:`~amos.engine.snapshots.SnapshotGate` (the
shadow repository and the session's file history) and the host's checkpoints, in the
pattern of ``host.mcp``. Its methods that run git are coroutines: the work runs on a
worker thread while the host counts as busy (a run or another edit is refused
meanwhile), so the TUI stays responsive and ``amos run`` awaits it.

:func:`rewind_session` and :func:`diff_session` are the same rules for callers without
a host (``amos sessions restore``, ``amos diff``: :class:`~amos.engine.library.Library`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amos.engine.file_history import (
    FileDiffReport,
    FilesRestored,
    diff_files,
    entries_since,
    failure,
    latest_run_steps,
    rewind_files,
    settle_open_steps,
    undo_files,
)
from amos.errors import SessionError
from amos.sessions import FileHistory

if TYPE_CHECKING:
    from amos.checkpoints import CheckpointInfo
    from amos.engine.binding import SessionBinding
    from amos.engine.driver import RunDriver
    from amos.engine.snapshots import SnapshotGate
    from amos.engine.transcript import Transcript
    from amos.snapshots import ShadowRepo

REWIND_PARTS = ("both", "files", "conversation")
"""What a rewind restores: both (the default, so they never disagree), or one of the two."""


@dataclass
class Rewound:
    """What a rewind to a checkpoint did.

    Attributes:
        checkpoint: the checkpoint gone back to.
        what: ``both``, ``files`` or ``conversation``.
        files: what happened to the files (None when they were not asked for, or could
            not be: then ``warnings`` says why).
        conversation: the conversation was restored (the front end reopens the session).
        messages: messages of the restored conversation.
        undo_checkpoint: the checkpoint holding the conversation as it was before (restore
            it to undo the conversation half), or None.
        warnings: one line each (the files of an old checkpoint cannot be restored…).
    """

    checkpoint: int
    what: str
    files: FilesRestored | None = None
    conversation: bool = False
    messages: int = 0
    undo_checkpoint: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """Files changed after the agent stopped the rewind (nothing was restored)."""
        return self.files is not None and self.files.refused

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {"checkpoint": self.checkpoint, "what": self.what,
                "files": self.files.to_json() if self.files is not None else None,
                "conversation": self.conversation, "messages": self.messages,
                "undo_checkpoint": self.undo_checkpoint, "warnings": list(self.warnings)}


def _find(infos: Sequence[CheckpointInfo], number: int) -> CheckpointInfo:
    for info in infos:
        if info.number == number:
            return info
    have = ", ".join(str(i.number) for i in infos) or "none"
    raise SessionError("not_found", f"no checkpoint {number} (checkpoints: {have})")


def _history_of(data: dict[str, Any]) -> FileHistory | None:
    try:
        return FileHistory.model_validate(data.get("file_history") or {})
    except ValueError:
        return None


def rewind_session(repo: ShadowRepo | None, why_off: str | None, history: FileHistory,
                   infos: Sequence[CheckpointInfo], read: Callable[[int], dict[str, Any]], number: int, *,
                   what: str = "both", force: bool = False,
                   restore_conversation: Callable[[int, FileHistory], tuple[int, int | None]] | None = None,
                   checkpoint_before: Callable[[FileHistory], int | None] | None = None) -> Rewound:
    """Rewind a session's files, conversation or both to checkpoint ``number`` (blocking).

    The files go first: when files the agent changed were changed since by someone else
    (conflicts) nothing is restored at all unless ``force``. ``history`` is updated in
    place; the caller saves the session (``restore_conversation`` saves it as it restores).

    Either way the state from before is a new checkpoint (``undo_checkpoint``) that
    records the file history as it was before the rewind and, as its snapshot, the
    workspace just before the files were written, so restoring it undoes the rewind
    exactly: ``restore_conversation`` takes it as it restores; for a files-only rewind
    that wrote something, ``checkpoint_before`` does.

    Args:
        repo: the session's shadow repository, or None (``why_off`` says why).
        why_off: why there is none.
        history: the session's file history now.
        infos: the session's checkpoints.
        read: reads a checkpoint's session data (its file history says which steps were
            undone then).
        number: the checkpoint.
        what: one of :data:`REWIND_PARTS`.
        force: overwrite files changed after the agent's change.
        restore_conversation: ``(number, file history before)`` → restores the conversation
            (its ``before_restore`` checkpoint records that file history); returns
            ``(messages, undo checkpoint)``.
        checkpoint_before: ``(file history before)`` → takes the ``before_restore``
            checkpoint of a files-only rewind; returns its number (None: not saved).

    Raises:
        SessionError: ``not_found`` (no such checkpoint).
        SnapshotError: ``off`` / ``no_file_record`` / ``pruned`` (exit 1) when only the
            files were asked for and cannot be restored; the repository failed.
    """
    info = _find(infos, number)
    done = Rewound(number, what)
    before = history.model_copy(deep=True)
    if what in ("both", "files"):
        try:
            if repo is None:
                raise failure("off", why_off or "file checkpoints are off for this session")
            if settle_open_steps(repo, history):
                before = history.model_copy(deep=True)
            entries_since(history, info)  # says why before anything is read
            done.files = rewind_files(repo, history, info, _history_of(read(number)), force=force)
        except Exception as exc:
            if what == "files" or getattr(exc, "code", None) not in ("off", "no_file_record", "pruned"):
                raise
            done.warnings.append(f"the files were not restored: {exc}")
        if done.refused:
            return done
        if done.files is not None and done.files.restored and done.files.undo_snapshot:
            before.head = done.files.undo_snapshot  # exactly what the workspace held just before
    if what in ("both", "conversation"):
        assert restore_conversation is not None
        done.messages, done.undo_checkpoint = restore_conversation(number, before)
        done.conversation = True
    elif done.files is not None and done.files.restored and checkpoint_before is not None:
        done.undo_checkpoint = checkpoint_before(before)
    return done


def diff_session(repo: ShadowRepo | None, why_off: str | None, history: FileHistory,
                 infos: Sequence[CheckpointInfo], number: int | None, *, stat: bool = False,
                 color: bool = False) -> FileDiffReport:
    """What the agent changed in the latest run that changed files, or since checkpoint ``number`` (blocking).

    Raises:
        SessionError: ``not_found`` (no such checkpoint).
        SnapshotError: ``off`` / ``no_file_record`` / ``pruned`` (exit 1); the repository failed.
    """
    if repo is None:
        raise failure("off", why_off or "file checkpoints are off for this session")
    settle_open_steps(repo, history)
    if number is None:
        entries = latest_run_steps(history)
        since = "before the latest run that changed files" if entries else "no run has changed files yet"
    else:
        entries = entries_since(history, _find(infos, number))
        since = f"checkpoint {number}"
    return diff_files(repo, entries, since=since, stat=stat, color=color)


class SnapshotControl:
    """``/undo``, ``/rewind`` and ``/diff`` for one host.

    Args:
        gate: the engine's snapshot collaborator, or None (not wired).
        binding: the session's checkpoints (a conversation restore goes through it, as
            ``Host.restore_checkpoint`` does).
        transcript: the session (rebound to the restored one after a conversation restore).
        driver: the host's run driver (these count as the active task while they work).
        mask: masks the session's secrets in what ``/diff`` shows (a key the agent wrote
            into a file or a file name; the snapshot itself keeps the exact bytes).
    """

    def __init__(self, gate: SnapshotGate | None, binding: SessionBinding, transcript: Transcript,
                 driver: RunDriver, *, mask: Callable[[str], str] | None = None):
        self._gate = gate
        self._binding = binding
        self._transcript = transcript
        self._driver = driver
        self._mask = mask or (lambda text: text)

    @property
    def _session_id(self) -> str:
        return self._transcript.session.id

    def _repo(self) -> tuple[ShadowRepo | None, str | None]:
        if self._gate is None:
            return None, "file checkpoints are not wired into this host"
        repo = self._gate.repo()
        return repo, self._gate.why_off

    def why_off(self) -> str | None:
        """Why file checkpoints are off in this session, or None when they are on (may run
        ``git --version`` the first time)."""
        return self._repo()[1] if self._gate is not None else "file checkpoints are not wired into this host"

    def undoable(self) -> dict[str, Any] | None:
        """The step ``/undo`` would put back (``{"step", "execution_id", "files"}``), or None."""
        from amos.engine.file_history import last_undoable

        if self._gate is None:
            return None
        step = last_undoable(self._gate.history)
        return None if step is None else {"step": step.step, "execution_id": step.execution_id,
                                          "files": [dict(f) for f in step.files]}

    async def _work(self, fn: Callable[[], Any]) -> Any:
        self._driver.ensure_idle()
        with self._driver.holding():
            assert self._gate is not None
            return await asyncio.to_thread(self._gate.locked, fn)

    async def undo(self, *, force: bool = False) -> FilesRestored:
        """Put back the files the last step that changed files changed (``/undo``).

        Files changed since by someone else are conflicts: nothing is restored unless
        ``force``. The current state is snapshotted first, and the next model request is
        told which files were put back. The caller saves the session.

        Raises:
            SessionError: ``busy`` while a run is active.
            SnapshotError: ``off`` / ``nothing_to_undo`` (exit 1); the repository failed.
        """
        def work() -> FilesRestored:
            repo, why = self._repo()
            if repo is None:
                raise failure("off", why or "file checkpoints are off for this session")
            assert self._gate is not None
            done = undo_files(repo, self._gate.history, force=force)
            self._gate.record_history()
            return done

        self._driver.ensure_idle()
        if self._gate is None:
            raise failure("off", "file checkpoints are not wired into this host")
        return await self._work(work)

    async def rewind(self, number: int, *, what: str = "both", force: bool = False) -> Rewound:
        """Go back to checkpoint ``number``: its files, its conversation or both (``/rewind``).

        After a conversation restore the front end must reopen the session (as after
        ``Host.restore_checkpoint``); a files-only rewind leaves the conversation and
        the caller saves the session.

        Raises:
            SessionError: ``busy``, ``no_store`` (``--no-save``: no checkpoints), ``not_found``.
            SnapshotError: see :func:`rewind_session`.
        """
        if what not in REWIND_PARTS:
            raise ValueError(f"what must be one of {REWIND_PARTS}")
        if not self._binding.saved:
            raise SessionError("no_store", "this session is not saved (--no-save), so it has no checkpoints")
        if self._gate is None and what != "conversation":
            raise failure("off", "file checkpoints are not wired into this host")

        def conversation(n: int, files: FileHistory) -> tuple[int, int | None]:
            # what Host.restore_checkpoint does, with the file history from before the rewind
            restored = self._binding.restore(self._transcript.session, n, files=files)
            self._transcript.rebind(restored)
            return len(restored.messages), restored.last_checkpoint

        def checkpoint_before(files: FileHistory) -> int | None:
            return self._binding.checkpoint(self._transcript.session, "before_restore", files=files).number

        def work() -> Rewound:
            repo, why = self._repo() if what != "conversation" else (None, None)
            history = self._gate.history if self._gate is not None else FileHistory()
            done = rewind_session(repo, why, history, self._binding.checkpoints(self._session_id),
                                  lambda n: self._binding.read_checkpoint(self._session_id, n), number,
                                  what=what, force=force, restore_conversation=conversation,
                                  checkpoint_before=checkpoint_before)
            if self._gate is not None and done.files is not None and not done.conversation:
                self._gate.record_history()
            return done

        self._driver.ensure_idle()
        if self._gate is None:  # conversation only, nothing to lock
            with self._driver.holding():
                return await asyncio.to_thread(work)
        return await self._work(work)

    async def diff(self, checkpoint: int | None = None, *, stat: bool = False, color: bool = False) -> FileDiffReport:
        """What the agent changed: in the latest run that changed files, or since ``checkpoint``.

        Args:
            checkpoint: a checkpoint number (``/session checkpoints``), or None.
            stat: a ``--stat`` summary instead of the whole diff.
            color: ANSI colors (for a terminal).

        Raises:
            SessionError: ``busy``, ``not_found``.
            SnapshotError: ``off`` / ``no_file_record`` / ``pruned`` (exit 1).
        """
        def work() -> FileDiffReport:
            repo, why = self._repo()
            history = self._gate.history if self._gate is not None else FileHistory()
            infos = self._binding.checkpoints(self._session_id) if checkpoint is not None else []
            return diff_session(repo, why, history, infos, checkpoint, stat=stat, color=color).masked(self._mask)

        self._driver.ensure_idle()
        if self._gate is None:
            raise failure("off", "file checkpoints are not wired into this host")
        return await self._work(work)


__all__ = ["REWIND_PARTS", "Rewound", "SnapshotControl", "diff_session", "rewind_session"]
