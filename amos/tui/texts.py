"""Sentences the TUI says about the session as a whole: the demo banner, what was
resumed, and the line printed after the app exits.

They read only the host API (``session_id``, ``session_name``, ``session_title``,
``saves_sessions``, ``save_state``, ``autosave``, ``change_signature``), so they are
plain functions, easy to test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def demo_banner(workspace: Path, *, writes_allowed: bool = True) -> str:
    """The banner shown in the offline demo mode (issue 2, "Model selection").

    Args:
        workspace: the demo's workspace (a temporary copy of the demo project).
        writes_allowed: True when the demo lets writes and commands run without
            asking (it does in its temporary copy).
    """
    text = f"offline demo mode: a scripted demo model in a temporary copy of the demo workspace ({workspace})"
    if writes_allowed:
        text += "; writes and commands run without asking in this temporary copy"
    return text + ". Send any prompt (e.g. \"fix the tests\") to watch it work; choose a real model with --model."


def session_label(runner: Any) -> str:
    """``NAME (ID)`` for a named session, else its id.

    Args:
        runner: the ``Host``.
    """
    name = runner.session_name
    return f"{name} ({runner.session_id})" if name else runner.session_id


def resumed_notice(runner: Any, verb: str = "resumed") -> str:
    """``resumed session NAME (ID)``, with the session's title when it has no name.

    Args:
        runner: the ``Host`` of the reopened session.
        verb: ``resumed`` (``--session``) or ``loaded`` (``/session load``).
    """
    text = f"{verb} session {session_label(runner)}"
    title = runner.session_title
    if title and not runner.session_name:
        text += f": {title}"
    return text


def exit_message(runner: Any) -> str:
    """The line printed after the TUI exits: where the session is and how to reopen it.

    Args:
        runner: the ``Host`` the app ended with (possibly already closed).

    Returns:
        ``session saved — reopen with: amos --session ID`` (``session NAME saved …``
        for a named one; the command names the id, as names need not be unique) when
        the session file exists; otherwise why it was not saved (``--no-save``, or
        nothing was sent). It fits 80 columns unless the name is long.
    """
    if not runner.saves_sessions:
        return f"session {runner.session_id} not saved (--no-save)"
    state = runner.save_state
    if state is None or not state[0]:
        return f"session {runner.session_id} not saved: nothing was sent"
    name = f"session {runner.session_name}" if runner.session_name else "session"
    return f"{name} saved — reopen with: amos --session {runner.session_id}"


class SaveTracker:
    """Whether the session has changes that are not on disk (the status bar's marker).

    Kept simple and honest, from the host API only (``change_signature``,
    ``autosave``, ``save_state``), the same for session files and PostgreSQL:

    - with autosave, every run is journalled as it happens and saved when it ends,
      so the session is ``saved`` once it is in its store;
    - with ``--no-save`` nothing is ever written: ``unsaved`` once the session differs
      from how it was opened;
    - with autosave off, ``unsaved`` once the session differs from how it was when
      it was last written (``/session save``, a task edit, ``/quit``…; a write is
      noticed by the host's count of writes changing).

    "Differs" compares a cheap signature: the number of messages, the name, the model,
    the model calls, the task-notes revision and the last stop receipt.
    """

    def __init__(self) -> None:
        self._runner: Any = None
        self._seen: int | None = None
        self._saved: tuple[Any, ...] | None = None

    @staticmethod
    def signature(runner: Any) -> tuple[Any, ...]:
        """What a change to the session changes (see the class docstring)."""
        return runner.change_signature()

    def marker(self, runner: Any) -> str | None:
        """``saved``, ``unsaved`` or None (nothing changed and nothing saved yet).

        Args:
            runner: the ``Host`` in use; a new one (``/session load``) starts
                from how it was opened.
        """
        state = runner.save_state
        signature = self.signature(runner)
        writes = state[1] if state is not None else None
        if runner is not self._runner:
            self._runner, self._seen, self._saved = runner, writes, signature
        if state is None:  # --no-save: never written
            return "unsaved" if signature != self._saved else None
        stored, writes = state
        if runner.autosave:
            return "saved" if stored else None
        if writes != self._seen:  # written since we last looked
            self._seen, self._saved = writes, signature
        if signature != self._saved:
            return "unsaved"
        return "saved" if stored else None
