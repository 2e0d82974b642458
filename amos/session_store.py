"""SessionStore: session folders with their snapshot, journal, checkpoints and run lock.

Layout (DESIGN.md "Storage"): ``<sessions>/<id>/session.json`` (0600, folder 0700),
``journal.jsonl`` and ``checkpoints/``; the run lock ``.<id>.lock`` beside the folder.
The file format itself is :mod:`amos.sessions`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from amos import safe_read
from amos.atomic import atomic_write_bytes
from amos.checkpoints import CheckpointInfo, Checkpoints
from amos.errors import SessionError
from amos.journal import Journal, read_journal, read_regular, replay, tail_seq
from amos.journal_gaps import JournalGap
from amos.session_recovery import RepairResult, SessionRecovery
from amos.session_replay import replay_validated
from amos.sessions import (
    _ID_RE,
    SESSION_VERSION,
    HostSettings,
    Session,
    SessionSummary,
    migrate,
    new_session_id,
    utc_now,
    validate_session,
)

_OWNER_MAX_BYTES = 4096
"""Largest run-lock owner file read (``{"pid", "since"}``), bytes."""


def _is_empty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size == 0
    except OSError:
        return False



class SessionStore:
    """Sessions under one folder: snapshots, journals, checkpoints and run locks.

    Layout per session (DESIGN.md "Storage"): ``<id>/session.json`` (the snapshot, 0600),
    ``<id>/journal.jsonl`` (append-only, :mod:`amos.journal`), ``<id>/checkpoints/``
    (:mod:`amos.checkpoints`); the run lock ``.<id>.lock`` and its owner file sit beside
    the folder. Every file write goes through :meth:`write_file` and every journal line
    through the journal class in :attr:`journal_class`, so tests can make writes fail.

    Args:
        root: the sessions folder (``paths.sessions_dir(config)``); created 0700 on
            first write.

    Attributes:
        warnings: every problem met while loading (a torn journal line, a replay that
            stopped), one line each, oldest first — a log the store keeps; callers get
            the warnings of their own call from :meth:`open` / :meth:`open_journal`.
        recovery: checkpoints, restore and repair (:class:`~amos.session_recovery.SessionRecovery`).
    """

    journal_class = Journal

    def __init__(self, root: Path):
        self.root = Path(root)
        self.warnings: list[str] = []
        self._journals: dict[str, Journal] = {}
        self.recovery = SessionRecovery(self)

    # ------------------------------------------------------------------ recovery (delegated)

    def checkpoints_of(self, session_id: str) -> Checkpoints:
        """The checkpoints folder of a session."""
        return self.recovery.checkpoints_of(session_id)

    def take_checkpoint(self, session: Session, reason: str, *, label: str | None = None,
                        keep: int = 20, files: Any = None) -> CheckpointInfo:
        """Write an immutable checkpoint of ``session`` (see :class:`SessionRecovery`)."""
        return self.recovery.take_checkpoint(session, reason, label=label, keep=keep, files=files)

    def restore(self, session: Session, number: int, *, keep: int = 20, files: Any = None) -> Session:
        """Replace ``session`` with checkpoint ``number`` (the current state checkpointed first)."""
        return self.recovery.restore(session, number, keep=keep, files=files)

    def recovery_source(self, session_id: str) -> str:
        """What ``amos sessions repair`` would rebuild the session from."""
        return self.recovery.recovery_source(session_id)

    def corrupt_error(self, session_id: str, problem: str) -> SessionError:
        """The ``corrupt`` error for an unreadable session (a copy is kept aside)."""
        return self.recovery.corrupt_error(session_id, problem)

    def set_aside(self, session_id: str, *, move: bool) -> Path | None:
        """Keep an unreadable snapshot aside as ``session.json.corrupt-<time>``."""
        return self.recovery.set_aside(session_id, move=move)

    def repair(self, session_id: str) -> RepairResult:
        """Rebuild an unreadable session from its newest good checkpoint plus its journal."""
        return self.recovery.repair(session_id)

    # ------------------------------------------------------------------ warnings as return values

    def open(self, id_or_name: str) -> tuple[Session, list[str]]:
        """:meth:`load`, and the warnings this load met (a recovered journal, a torn line)."""
        before = len(self.warnings)
        session = self.load(id_or_name)
        return session, list(self.warnings[before:])

    def open_journal(self, session: Session) -> tuple[Journal, list[str]]:
        """:meth:`journal`, and the warnings opening it met (a damaged journal set aside)."""
        before = len(self.warnings)
        journal = self.journal(session)
        return journal, list(self.warnings[before:])

    def _ensure_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise SessionError(
                "unavailable",
                f"cannot create the session folder {self.root}: {exc.strerror or exc} "
                "(check AMOS_HOME or sessions.directory in the config)",
            ) from None

    def unwritable(self, exc: OSError) -> SessionError:
        """The one-line ``unavailable`` error (exit 2, a configuration problem) for a
        sessions folder that exists but cannot be written (issue 17 item 7)."""
        return SessionError(
            "unavailable",
            f"cannot write to the session folder {self.root}: {exc.strerror or exc} "
            "(check AMOS_HOME or sessions.directory in the config, or use --no-save)",
        )

    def session_dir(self, session_id: str) -> Path:
        """Folder of one session."""
        return self.root / session_id

    def path(self, session_id: str) -> Path:
        """``session.json`` of one session."""
        return self.session_dir(session_id) / "session.json"

    def journal_path(self, session_id: str) -> Path:
        """``journal.jsonl`` of one session."""
        return self.session_dir(session_id) / "journal.jsonl"

    def write_file(self, path: Path, data: bytes) -> None:
        """Write one file atomically and durably (temp + fsync + replace, 0600).

        Raises:
            OSError: the write failed; the previous file is intact.
        """
        atomic_write_bytes(path, data)

    def create(self, host: HostSettings | None = None) -> Session:
        """A new, unsaved session with a fresh id."""
        return Session(id=new_session_id(), host=host or HostSettings())

    def _is_session(self, session_id: str) -> bool:
        folder = self.session_dir(session_id)
        if folder.is_symlink():  # a session is a real folder named after its id
            return False
        return (folder / "session.json").exists() or (folder / "journal.jsonl").exists()

    def resolve(self, id_or_name: str) -> str:
        """The session id for an id, a name, a unique id prefix, or ``latest`` (the newest).

        Raises:
            SessionError: ``not_found`` or ``ambiguous`` (exit 2).
        """
        if _ID_RE.match(id_or_name) and self._is_session(id_or_name):
            return id_or_name
        rows = self.list()
        matches = [s.id for s in rows if s.name == id_or_name]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise SessionError("ambiguous", f"session name {id_or_name!r} matches {len(matches)} sessions: {', '.join(matches)}")
        prefix = [s.id for s in rows if s.id.startswith(id_or_name)] if id_or_name else []
        if len(prefix) == 1:
            return prefix[0]
        if id_or_name == "latest" and rows:
            return rows[0].id
        raise SessionError(
            "not_found",
            f"no session {id_or_name!r} in {self.root}; `amos sessions list` shows saved sessions",
        )

    def read_data(self, session_id: str) -> dict[str, Any]:
        """``session.json`` parsed and migrated, without the journal.

        Raises:
            SessionError: ``not_found``, ``too_new``, or ``corrupt`` naming the file and
                the problem (the file itself is never modified).
        """
        path = self.path(session_id)
        try:
            data = json.loads(read_regular(path))
        except FileNotFoundError:
            raise SessionError("corrupt", f"{path}: the snapshot is missing") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problem = "the file is empty (0 bytes)" if _is_empty(path) else \
                (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
            raise SessionError("corrupt", f"{path}: cannot read session: {problem}") from None
        except RecursionError:
            raise SessionError("corrupt", f"{path}: cannot read session: JSON nested too deeply") from None
        if not isinstance(data, dict):
            raise SessionError("corrupt", f"{path}: session file is not a JSON object")
        if data.get("id") != session_id:
            raise SessionError("corrupt", f"{path}: the session id {data.get('id')!r} does not match its folder "
                               f"{session_id!r} (a copied session folder); `amos sessions repair {session_id}` "
                               "makes it a session of its own")
        return migrate(data, str(path))

    def load(self, id_or_name: str) -> Session:
        """Load a session by id or name: the snapshot, then the journal entries after it.

        Problems that lose nothing (a torn last journal line) are added to
        :attr:`warnings`.

        Raises:
            SessionError: ``not_found``, ``too_new``, or ``corrupt`` naming the file and
                the problem; a corrupt snapshot is copied aside (``session.json.corrupt-
                <time>``) and the message says how ``amos sessions repair`` can recover it.
        """
        session_id = self.resolve(id_or_name)
        try:
            data = self.read_data(session_id)
            journal = read_journal(self.journal_path(session_id), after_seq=int(data.get("journal_seq") or 0))
            before = len(self.warnings)
            if not journal.entries and not journal.gaps:
                session = validate_session(data, str(self.path(session_id)))
            else:
                session = self._replayed(session_id, data, journal.entries, gaps=journal.gaps)
        except SessionError as exc:
            if exc.code != "corrupt":
                raise
            raise self.corrupt_error(session_id, str(exc)) from None
        self.warnings[before:before] = [w for w in journal.warnings if w not in self.warnings]
        return session

    def _replayed(self, session_id: str, data: dict[str, Any], entries: list[dict[str, Any]],
                  loader: Any = None, gaps: list[JournalGap] | None = None) -> Session:
        """The snapshot (or what ``loader()`` returns afresh) with the journal entries
        after it (past any ``gaps``, :func:`amos.journal.replay`); an entry that would make
        the session invalid is found (by bisection) and ignored with everything after it."""
        return replay_validated(
            session_id, data, entries, where=str(self.journal_path(session_id)),
            snapshot_where=str(self.path(session_id)), load_base=loader or (lambda: self.read_data(session_id)),
            live=self.live_elsewhere(session_id), gaps=list(gaps or ()), warnings=self.warnings)

    def save(self, session: Session) -> Path:
        """Write ``session.json`` atomically (temp + fsync + replace, 0600).

        The snapshot records the journal entry it reflects (``journal_seq``).

        Returns:
            The path written.

        Raises:
            SessionError: ``write_failed`` (the previous file is intact).
        """
        session.updated_at = utc_now()
        session.version = SESSION_VERSION
        journal = self._journals.get(session.id)
        if journal is not None:
            session.journal_seq = journal.seq
        path = self.path(session.id)
        try:
            data = session.model_dump_json(indent=1, exclude_none=False).encode()
        except ValueError as exc:
            raise SessionError("write_failed", f"cannot save session to {path}: {exc}", exit_code=1) from None
        self._ensure_root()
        try:
            self.session_dir(session.id).mkdir(exist_ok=True, mode=0o700)
            self.write_file(path, data)
        except OSError as exc:
            raise SessionError("write_failed", f"cannot save session to {path}: {exc.strerror or exc}",
                               exit_code=1) from None
        return path

    def journal_entries(self, session_id: str) -> list[dict[str, Any]]:
        """Every readable entry of the session's journal, in order (read only)."""
        return read_journal(self.journal_path(session_id)).entries

    def exists(self, session_id: str) -> bool:
        """Whether a saved session with this id exists."""
        return self.path(session_id).exists()

    # ------------------------------------------------------------------ journal

    def journal(self, session: Session) -> Journal:
        """The open journal of a session (opened on first use; the caller holds its lock).

        A new journal starts with a ``snapshot`` entry holding the whole session, so
        the journal alone can rebuild it (``amos sessions repair``).

        Raises:
            SessionError: ``write_failed`` when the journal cannot be written.
        """
        journal = self._journals.get(session.id)
        if journal is None:
            path = self.journal_path(session.id)
            found = read_journal(path, after_seq=session.journal_seq)  # only its length is needed
            self.warnings.extend(w for w in found.warnings if w not in self.warnings)
            self._ensure_root()
            fresh = False
            if found.gaps:
                # Unreadable lines: never cut the entries after them (only a torn last
                # line is cut). Keep the file aside whole and start a new journal from
                # the state replay rebuilt (issue 17 item 5).
                aside = path.with_name(f"journal.jsonl.corrupt-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}")
                try:
                    os.replace(path, aside)
                except OSError as exc:
                    raise SessionError("write_failed", f"cannot set aside the damaged journal {path}: "
                                       f"{exc.strerror or exc}", exit_code=1) from None
                self.warnings.append(f"{path}: kept as {aside.name} (an unreadable line in the middle); a new "
                                     "journal starts from this session's state")
                found.good_bytes, fresh = 0, True
            journal = self.journal_class(path, last_seq=max(found.max_seq, found.last_seq, session.journal_seq),
                                         good_bytes=found.good_bytes)
            if journal.seq == 0 or fresh:
                journal.append("snapshot", utc_now(), session=session.model_dump(mode="json"))
            self._journals[session.id] = journal
        return journal

    def close_journal(self, session_id: str) -> None:
        """fsync and close a session's journal (when its runner closes)."""
        journal = self._journals.pop(session_id, None)
        if journal is not None:
            journal.close()

    # ------------------------------------------------------------------ listing

    def list(self) -> list[SessionSummary]:
        """Saved sessions, newest first; one that cannot be read is listed with ``broken``."""
        rows: list[SessionSummary] = []
        if not self.root.is_dir():
            return rows
        for child in self.root.iterdir():
            if not child.is_dir() or not _ID_RE.match(child.name) or not self._is_session(child.name):
                continue
            rows.append(self._summary(child.name))
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return rows

    def _summary(self, session_id: str) -> SessionSummary:
        path = self.path(session_id)
        try:
            data = self.read_data(session_id)
            journal = self.journal_path(session_id)
            if tail_seq(journal) > int(data.get("journal_seq") or 0):
                found = read_journal(journal, after_seq=int(data.get("journal_seq") or 0))
                replay(data, found.entries, live=self.live_elsewhere(session_id), gaps=found.gaps)
            messages = data.get("messages") or []
            if not isinstance(messages, list):
                raise SessionError("corrupt", f"{path}: messages is not a list")
            last = data.get("last_stop") or {}
            usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
            return SessionSummary(
                id=str(data.get("id", session_id)), name=data.get("name"), title=data.get("title"),
                updated_at=str(data.get("updated_at", "")), messages=len(messages),
                last_verdict=last.get("verdict") if isinstance(last, dict) else None,
                model=(data.get("host") or {}).get("model"), path=str(path),
                workspace=(data.get("host") or {}).get("workspace"),
                machine=(data.get("host") or {}).get("machine"),
                cost_usd=usage.get("cost_usd") if isinstance(usage.get("cost_usd"), (int, float)) else None)
        except (SessionError, ValueError, AttributeError, TypeError, RecursionError) as exc:
            reason = str(exc).removeprefix(f"{path}: ")
            if getattr(exc, "code", "corrupt") == "corrupt":  # a newer version is not broken: upgrade amos
                try:
                    source = self.recovery_source(session_id)
                except SessionError:
                    source = ""
                reason += (f" — `amos sessions repair {session_id}` rebuilds it from {source}" if source
                           else " — no checkpoint or journal can rebuild it")
            # A broken session sorts by when its folder last changed, so `latest` still
            # means the newest session (and then fails naming it) rather than an older one.
            try:
                changed = datetime.fromtimestamp(max(p.stat().st_mtime for p in self.session_dir(session_id).iterdir()),
                                                 UTC).isoformat(timespec="milliseconds")
            except (OSError, ValueError):
                changed = ""
            return SessionSummary(id=session_id, name=None, title=None, updated_at=changed, messages=0,
                                  last_verdict=None, model=None, path=str(path), broken=reason)

    def delete(self, id_or_name: str) -> str:
        """Delete a session folder; returns the id deleted.

        Raises:
            SessionError: ``not_found``, or ``busy`` when a run holds its lock.
        """
        session_id = self.resolve(id_or_name)
        lock = self.lock(session_id)
        try:
            self.close_journal(session_id)
            shutil.rmtree(self.session_dir(session_id))
        finally:
            lock.release()
        for suffix in (".lock", ".lock.owner"):
            with contextlib.suppress(OSError):
                os.unlink(self.root / f".{session_id}{suffix}")
        return session_id

    def live_elsewhere(self, session_id: str) -> bool:
        """True when another process holds the session's run lock right now (its run is
        live, so a journal ending inside a run is not an interrupted one)."""
        owner = self.root / f".{session_id}.lock.owner"
        try:
            if int(json.loads(safe_read.read_regular(owner, max_bytes=_OWNER_MAX_BYTES))["pid"]) == os.getpid():
                return False
        except (OSError, ValueError, KeyError, TypeError):
            return False
        probe = FileLock(str(self.root / f".{session_id}.lock"), timeout=0, thread_local=False)
        try:
            probe.acquire()
        except Timeout:
            return True
        except OSError:
            return False
        probe.release()
        return False

    def lock(self, session_id: str) -> FileLock:
        """Acquire the session's run lock now (non-blocking) and return it.

        Call ``release()`` when done. The lock is an OS file lock, so a process that
        dies (even by SIGKILL) releases it and the next one takes it over; the owner
        file beside it names the holder for the ``busy`` message.

        Raises:
            SessionError: ``busy`` naming the process that holds it; ``unavailable``
                (exit 2) when the sessions folder cannot be written (read-only, not a
                folder, no permission), naming the folder.
        """
        self._ensure_root()
        lock = FileLock(str(self.root / f".{session_id}.lock"), timeout=0, thread_local=False)
        owner = self.root / f".{session_id}.lock.owner"
        try:
            lock.acquire()
        except Timeout:  # (a TimeoutError, so an OSError: caught first)
            holder = ""
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                info = json.loads(safe_read.read_regular(owner, max_bytes=_OWNER_MAX_BYTES))
                holder = f" (pid {int(info['pid'])}, since {info.get('since', '?')})"
            raise SessionError(
                "busy", f"session {session_id} is in use by another amos process{holder}; "
                        "try again when it ends"
            ) from None
        except OSError as exc:  # a read-only mount, a folder without write permission
            raise self.unwritable(exc) from None
        with contextlib.suppress(OSError):
            atomic_write_bytes(owner, json.dumps({"pid": os.getpid(), "since": utc_now()}).encode(), durable=False)
        self._sweep_temp_files(session_id)
        return lock

    def _sweep_temp_files(self, session_id: str) -> None:
        """Remove the temp files of atomic writes a killed writer left in the session's
        folders (each as large as the session); only the lock holder writes there."""
        folder = self.session_dir(session_id)
        for where in (folder, folder / "checkpoints"):
            try:
                names = os.listdir(where)
            except OSError:
                continue
            for name in names:
                if name.startswith(".") and name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(where / name)
