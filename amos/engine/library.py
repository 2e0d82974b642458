"""Saved sessions and stored evidence, without opening a run: ``amos sessions …`` and
``amos evidence …`` (spec/cli.md).

:class:`Library` is the host API of the commands that manage what is on disk: list,
show, export, delete, checkpoints, restore and repair sessions; list, read, prune and
rebuild evidence. It reads the layered config for the store locations, returns plain
values (with the warnings met while loading, as return values), and holds a session's
run lock whenever it writes, so it never races a running amos.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amos.checkpoints import CheckpointInfo
from amos.config_models import AmosConfig
from amos.engine.opening import load_host_config, open_store
from amos.engine.options import RunOptions
from amos.errors import AmosError, SessionError
from amos.session_store import SessionStore
from amos.sessions import Session, SessionSummary


@dataclass
class Loaded:
    """A session read from disk, and what was repaired or recovered while reading it."""

    session: Session
    warnings: list[str] = field(default_factory=list)


@dataclass
class Restored:
    """What ``amos sessions restore`` did.

    Attributes:
        session_id: the session.
        restored: the checkpoint number restored.
        undo_checkpoint: the checkpoint holding the state before (restore it to undo).
        messages: messages of the restored session.
        warnings: problems met while loading, and why the files were not restored.
        what: ``both``, ``files`` or ``conversation`` (issue 20).
        files: what happened to the files (None when not asked for or not possible).
        conversation: the conversation was restored (False for ``files``, or when the
            files were refused).
    """

    session_id: str
    restored: int
    undo_checkpoint: int | None
    messages: int
    warnings: list[str] = field(default_factory=list)
    what: str = "conversation"
    files: Any = None
    conversation: bool = True

    @property
    def refused(self) -> bool:
        """Files changed after the agent's change stopped the restore (nothing changed)."""
        return self.files is not None and self.files.refused


class Library:
    """The session store and evidence store a config points at.

    Build with :meth:`open`.

    Args:
        config: the loaded config.
        store: its session store.
    """

    def __init__(self, config: AmosConfig, store: SessionStore):
        self.config = config
        self.store = store
        self._evidence: Any = None

    @classmethod
    def open(cls, config_path: Path | None = None) -> tuple[Library, list[str]]:
        """The library of the config at ``config_path`` (else the layered default).

        Returns:
            ``(library, config warnings)``.

        Raises:
            ConfigError: an unreadable or invalid config file.
        """
        config, warnings = load_host_config(RunOptions(config_path=config_path))
        return cls(config, open_store(config)), warnings

    @contextmanager
    def _locked(self, session_id: str) -> Iterator[None]:
        lock = self.store.lock(session_id)
        try:
            yield
        finally:
            self.store.close_journal(session_id)
            lock.release()

    # ------------------------------------------------------------------ sessions

    def sessions(self) -> list[SessionSummary]:
        """Saved sessions, newest first; one that cannot be read is listed with ``broken``."""
        return self.store.list()

    def resolve(self, id_or_name: str) -> str:
        """The id of a session given by id, name, unique id prefix or ``latest``.

        Raises:
            SessionError: ``not_found``.
        """
        return self.store.resolve(id_or_name)

    def load(self, id_or_name: str) -> Loaded:
        """Read one session (its journal replayed).

        Raises:
            SessionError: ``not_found``, ``corrupt``, ``too_new``.
        """
        session, warnings = self.store.open(id_or_name)
        return Loaded(session, warnings)

    def delete(self, id_or_name: str) -> str:
        """Delete a session folder and its workspace snapshots (issue 20); returns its id.

        Raises:
            SessionError: ``not_found``, or ``busy`` while a run holds it.
        """
        import shutil

        from amos.paths import snapshots_dir

        deleted = self.store.delete(id_or_name)
        shutil.rmtree(snapshots_dir(deleted), ignore_errors=True)
        return deleted

    def run_receipts(self, session_id: str) -> list[Any]:
        """Stop receipts of the session's earlier runs, from its journal (the session file
        keeps only the latest); a receipt that does not validate is skipped."""
        from pydantic import ValidationError

        from amos.journal import run_receipts
        from amos.policy.stop import StopReceipt

        try:
            entries = self.store.journal_entries(session_id)
        except SessionError:
            return []
        receipts = []
        for data in run_receipts(entries):
            try:
                receipts.append(StopReceipt.model_validate(data))
            except ValidationError:
                continue
        return receipts

    def export(self, id_or_name: str, fmt: str) -> tuple[str, list[str]]:
        """A session as Markdown (``md``, every run's receipt included) or its JSON (``json``).

        Returns:
            ``(text, warnings)``.

        Raises:
            SessionError: as :meth:`load`.
        """
        from amos.session_export import export_json, export_markdown

        loaded = self.load(id_or_name)
        session = loaded.session
        text = (export_markdown(session, receipts=self.run_receipts(session.id)) if fmt == "md"
                else export_json(session) + "\n")
        return text, loaded.warnings

    def checkpoints(self, id_or_name: str) -> tuple[str, list[CheckpointInfo]]:
        """``(session id, its checkpoints oldest first)``.

        Raises:
            SessionError: ``not_found``.
        """
        resolved = self.store.resolve(id_or_name)
        return resolved, self.store.checkpoints_of(resolved).list()

    def restore(self, id_or_name: str, number: int, *, what: str = "both", force: bool = False) -> Restored:
        """Restore a session to checkpoint ``number``: its files, its conversation or both.

        The conversation's current state is checkpointed first; the files' current state
        is snapshotted first (issue 20). Files the agent changed that were changed since
        by someone else stop the whole restore unless ``force``.

        Args:
            id_or_name: the session.
            number: the checkpoint.
            what: ``both`` (default), ``files`` or ``conversation``.
            force: overwrite files changed after the agent's change.

        Raises:
            SessionError: ``not_found``, ``busy``, ``corrupt``, ``write_failed``.
            SnapshotError: ``off`` / ``no_file_record`` / ``pruned`` (exit 1) for ``files``.
        """
        from amos.engine.snapshot_control import rewind_session

        resolved = self.store.resolve(id_or_name)
        keep = int(self.config.sessions.max_checkpoints)
        with self._locked(resolved):
            current, warnings = self.store.open(resolved)
            folder = self.store.checkpoints_of(resolved)
            repo, why = self._snapshot_repo(current) if what != "conversation" else (None, None)
            messages: list[int] = []

            def conversation(n: int, files: Any) -> tuple[int, int | None]:
                restored = self.store.restore(current, n, keep=keep, files=files)
                messages.append(len(restored.messages))
                return len(restored.messages), current.last_checkpoint

            def checkpoint_before(files: Any) -> int:
                return self.store.take_checkpoint(current, "before_restore", keep=keep, files=files).number

            done = rewind_session(repo, why, current.file_history, folder.list(), folder.read, number, what=what,
                                  force=force, restore_conversation=conversation,
                                  checkpoint_before=checkpoint_before)
            if done.files is not None and not done.conversation and not done.refused:
                self.store.save(current)
        return Restored(resolved, number, done.undo_checkpoint, done.messages or len(current.messages),
                        warnings + done.warnings, what, done.files, done.conversation)

    def _snapshot_repo(self, session: Session) -> tuple[Any, str | None]:
        """The session's shadow repository, or ``(None, why not)``."""
        from amos.snapshots import open_session_repo

        if not session.host.workspace:
            return None, "the session does not record its workspace"
        try:
            return open_session_repo(self.config, session.id, Path(session.host.workspace))
        except AmosError as exc:
            return None, f"file checkpoints are off: {exc}"

    def diff(self, id_or_name: str, checkpoint: int | None = None, *, stat: bool = False,
             color: bool = False) -> tuple[str, Any, list[str]]:
        """What the agent changed in a session's files: the latest run that changed files,
        or since ``checkpoint`` (``amos diff``).

        Returns:
            ``(session id, FileDiffReport, warnings)``.

        Raises:
            SessionError: ``not_found``, ``corrupt``.
            SnapshotError: ``off`` / ``no_file_record`` / ``pruned`` (exit 1).
        """
        from amos.engine.snapshot_control import diff_session

        resolved = self.store.resolve(id_or_name)
        session, warnings = self.store.open(resolved)
        repo, why = self._snapshot_repo(session)
        infos = self.store.checkpoints_of(resolved).list() if checkpoint is not None else []
        from amos.providers import secret_values
        from amos.providers.common import scrub

        secrets = secret_values(self.config)
        report = diff_session(repo, why, session.file_history, infos, checkpoint, stat=stat, color=color)
        return resolved, report.masked(lambda text: scrub(text, secrets)), warnings  # a key in a file: never shown

    def repair(self, id_or_name: str) -> tuple[str, Any]:
        """Rebuild an unreadable session from its newest good checkpoint plus its journal.

        Returns:
            ``(session id, RepairResult)``.

        Raises:
            SessionError: ``not_found``, ``busy``, or nothing can rebuild it.
        """
        resolved = self.store.resolve(id_or_name)
        lock = self.store.lock(resolved)
        try:
            return resolved, self.store.repair(resolved)
        finally:
            lock.release()

    # ------------------------------------------------------------------ evidence

    def evidence(self) -> Any:
        """The configured evidence store (opened on first use).

        Raises:
            EvidenceError / ConfigError: the store cannot be opened.
        """
        if self._evidence is None:
            from amos.evidence import open_evidence_store

            self._evidence = open_evidence_store(self.config)
        return self._evidence

    def evidence_session(self, value: str | None) -> str | None:
        """The session id a ``--session`` value names (kept as given when the session is
        gone: its evidence outlives it)."""
        if value is None:
            return None
        try:
            return self.store.resolve(value)
        except SessionError:
            return value

    def evidence_page(self, *, session: str | None = None, after: str | None = None, limit: int = 100) -> Any:
        """One page of evidence metadata (``EvidencePage``), optionally of one session."""
        return self.evidence().list(after, limit, session_id=self.evidence_session(session))

    def evidence_orphaned(self) -> bool:
        """True when record files exist that the index does not list (``rebuild`` finds them)."""
        records = getattr(self.evidence(), "records_dir", None)
        return records is not None and records.is_dir() and any(records.iterdir())

    def evidence_reference(self, id_or_ref: str) -> Any:
        """The reference a record id, a unique id prefix (issue 21) or a reference's JSON names.

        Raises:
            EvidenceError: unknown id, an ambiguous or too short prefix (exit 2), or an
                invalid reference.
        """
        from amos.evidence import coerce_reference
        from amos.evidence.prefix import resolve_record_id

        text = id_or_ref.strip()
        if text.startswith("{"):
            return coerce_reference(text)
        return self.evidence().get_reference(resolve_record_id(self.evidence(), text))

    def evidence_bytes(self, ref: Any) -> bytes:
        """A record's exact stored JSON, verified (size and SHA-256) first."""
        return self.evidence().read_bytes(ref)

    def evidence_chunk(self, ref: Any, offset: int, limit: int | None) -> Any:
        """A verified chunk of a record (``EvidenceChunk``; offsets in code points)."""
        store = self.evidence()
        return store.read_text_chunk(ref, offset, limit or store.max_record_bytes)

    def evidence_prune(self, older_than_days: float | None, session: str | None) -> int:
        """Delete records past ``evidence.ttl_days`` (no arguments), older ones, or a session's."""
        store = self.evidence()
        if older_than_days is None and session is None:
            return store.prune_expired()
        return store.prune(older_than_days, self.evidence_session(session))

    def evidence_rebuild(self) -> dict[str, Any]:
        """Rebuild the scope's index from its record files; the store's report (a record
        whose content no longer matches the SHA-256 a session or the old index recorded
        is listed under ``corrupt`` and kept, never re-hashed)."""
        from amos.evidence.recorded import session_references

        return self.evidence().rebuild_index(session_references(self.store))

    def migrate_store(self, to: str, progress: Any) -> Any:
        """Copy every session and evidence record to ``to`` (``postgres`` or ``files``),
        verifying every hash; ``progress(line)`` is called per step (issue 22).

        Returns:
            The :class:`~amos.store_pg.migrate.MigrateReport`.

        Raises:
            SessionError / ConfigError: a store cannot be reached, a session is busy.
        """
        from amos.store_pg.migrate import migrate

        return migrate(self.config, to, progress)

    # ------------------------------------------------------------------ MCP servers

    def tool_permissions(self) -> dict[str, str]:
        """``tools.permissions`` of the config (tool name → allow/ask/deny)."""
        return dict(self.config.tools.permissions)

    def mcp_hub(self, project_dir: Path) -> Any:
        """An (unstarted) :class:`~amos.mcp.McpHub` for the configured MCP servers and a
        trusted ``project_dir/.mcp.json``; provider keys and server secrets are masked in
        everything it reports.

        Raises:
            ConfigError: an invalid server entry or ``.mcp.json`` (exit 2).
        """
        from amos import paths
        from amos.mcp import McpHub
        from amos.providers import secret_values

        return McpHub.from_config(self.config, project_dir=project_dir, log_dir=paths.log_dir() / "mcp",
                                  secrets=secret_values(self.config))

