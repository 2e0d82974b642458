"""Immutable numbered checkpoints of one session (``<session>/checkpoints/``).

A checkpoint is two files written in order: ``NNNNNN.json`` (the whole session, as
``session.json`` would hold it) and then ``NNNNNN.meta.json`` (its row for listings).
A checkpoint without its meta file was cut short by a crash and does not exist. Numbers
start at 1, only grow, and are never reused: the next number is one more than the
highest ever taken (the session remembers it in ``last_checkpoint``, the folder in its
file names). Taken at the end of each run, before a pause for approval, on
``/session save``, before a restore and before a compaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from amos.atomic import atomic_write_bytes
from amos.errors import SessionError
from amos.journal import read_regular

_FILE_RE = re.compile(r"^(\d{6,})\.(json|meta\.json)$")


class CheckpointInfo(BaseModel):
    """One row of ``amos sessions checkpoints``.

    Attributes:
        number: stable sequence number (from 1, never reused).
        created_at: ISO-8601 UTC.
        label: the name given with ``/session save NAME`` (labelled checkpoints are
            never pruned), else None.
        reason: ``run_end``, ``waiting`` (paused for approval), ``save``,
            ``before_restore`` or ``before_compaction``.
        messages: messages in the checkpointed history.
        last_verdict: verdict of its last stop receipt, or None.
        journal_seq: the journal entry the checkpoint reflects.
        size_bytes: size of the checkpoint file, bytes.
        prompt: the first line of the latest prompt in the checkpointed history (cut
            at 80 characters), or None.
        file_seq: the session's ``file_history.next_seq`` then: file-history entries
            from this number on came after the checkpoint (issue 20; None in
            checkpoints taken before file snapshots existed).
        snapshot: the newest workspace snapshot recorded then (``file_history.head``),
            or None.
    """

    model_config = ConfigDict(extra="ignore")

    number: int
    created_at: str
    label: str | None = None
    reason: str = "save"
    messages: int = 0
    last_verdict: str | None = None
    journal_seq: int = 0
    size_bytes: int = 0
    prompt: str | None = None
    file_seq: int | None = None
    snapshot: str | None = None


Writer = Callable[[Path, bytes], None]


def _durable_write(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)


class Checkpoints:
    """The checkpoints folder of one session.

    Args:
        folder: ``<session>/checkpoints`` (created 0700 on first write).
        write: ``write(path, data)`` writing a file atomically (the store's seam for
            simulated write errors).
    """

    def __init__(self, folder: Path, write: Writer = _durable_write):
        self.folder = Path(folder)
        self._write = write

    def _path(self, number: int) -> Path:
        return self.folder / f"{number:06d}.json"

    def _meta(self, number: int) -> Path:
        return self.folder / f"{number:06d}.meta.json"

    def where(self, number: int) -> str:
        """How messages name checkpoint ``number`` (its file)."""
        return str(self._path(number))

    def highest(self) -> int:
        """The highest number any file in the folder carries (0 when none)."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return 0
        return max((int(m.group(1)) for m in map(_FILE_RE.match, names) if m), default=0)

    def list(self) -> list[CheckpointInfo]:
        """Complete checkpoints, oldest first (a meta file that cannot be read is skipped)."""
        rows: list[CheckpointInfo] = []
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return rows
        for name in names:
            match = _FILE_RE.match(name)
            if not match or match.group(2) != "meta.json":
                continue
            number = int(match.group(1))
            if not self._path(number).is_file():
                continue
            try:
                rows.append(CheckpointInfo.model_validate_json(read_regular(self._meta(number))))
            except (OSError, ValueError):
                continue
        rows.sort(key=lambda r: r.number)
        return rows

    def take(self, session_json: bytes, info: CheckpointInfo, *, keep: int,
             protect: frozenset[int] = frozenset()) -> CheckpointInfo:
        """Write checkpoint ``info.number`` and prune the oldest unlabelled ones.

        Args:
            session_json: the whole session as JSON bytes.
            info: its row (``number`` already chosen by the caller; ``size_bytes`` is
                filled in here).
            keep: ``sessions.max_checkpoints``; labelled checkpoints and the new one are
                never pruned.

        Raises:
            SessionError: ``write_failed`` (a half-written checkpoint is not listed).
        """
        if self._path(info.number).exists() or self._meta(info.number).exists():
            raise SessionError("write_failed", f"checkpoint {info.number} already exists in {self.folder}", exit_code=1)
        info = info.model_copy(update={"size_bytes": len(session_json)})
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._write(self._path(info.number), session_json)
            self._write(self._meta(info.number), info.model_dump_json().encode())
        except OSError as exc:
            raise SessionError("write_failed", f"cannot write checkpoint {info.number} in {self.folder}: "
                               f"{exc.strerror or exc}", exit_code=1) from None
        self.prune(keep, protect=protect | {info.number})
        return info

    def prune(self, keep: int, *, protect: frozenset[int] | set[int] = frozenset()) -> list[int]:
        """Remove the oldest unlabelled checkpoints while more than ``keep`` exist
        (``before_compaction`` ones only after every other unlabelled one).

        Returns:
            The numbers removed.
        """
        rows = self.list()
        removed: list[int] = []
        excess = len(rows) - keep
        # The checkpoint taken before a compaction is what undoes it: those go last.
        order = [r for r in rows if r.reason != "before_compaction"] + [r for r in rows if r.reason == "before_compaction"]
        for row in order:
            if excess <= 0:
                break
            if row.label or row.number in protect:
                continue
            for path in (self._meta(row.number), self._path(row.number)):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            removed.append(row.number)
            excess -= 1
        return removed

    def read(self, number: int) -> dict:
        """The session data of checkpoint ``number``.

        Raises:
            SessionError: ``not_found`` (listing the numbers that exist) or ``corrupt``.
        """
        rows = {r.number for r in self.list()}
        if number not in rows:
            have = ", ".join(str(n) for n in sorted(rows)) or "none"
            raise SessionError("not_found", f"no checkpoint {number} (checkpoints: {have})")
        path = self._path(number)
        try:
            data = json.loads(read_regular(path))
        except (OSError, ValueError, RecursionError) as exc:
            raise SessionError("corrupt", f"{path}: cannot read checkpoint: {exc}") from None
        if not isinstance(data, dict):
            raise SessionError("corrupt", f"{path}: checkpoint is not a JSON object")
        return data
