"""``/context task …``: the host edits the task notebook (spec/slash-commands.md).

Every edit names the revision it expects (``REV``), runs as one revision-checked
transaction through :meth:`Host.update_tasks` and is refused while a run
executes. Errors carry their ``TASK_STATE_*`` code; a failed command changes nothing.
Model text never reaches this module — only a person's typed line does.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from amos.errors import SessionError, SlashCommandError
from amos.slash.parser import split_tokens

USAGES = {
    "note": "/context task note TEXT…",
    "add": "/context task add REV CATEGORY ID TEXT…",
    "correct": "/context task correct REV OLD_ID NEW_ID TEXT…",
    "resolve": "/context task resolve REV ID",
    "prune": "/context task prune REV ID…",
    "resolve-prune": "/context task resolve-prune REV ID…",
    "prune-action": "/context task prune-action REV EXECUTION_ID…",
    "confirm-prune": "/context task confirm-prune REV EXECUTION_ID STATUS PROOF…",
}
USAGE = "/context task [" + " | ".join(USAGES) + "] …"
TERMINAL = ("completed", "failed", "cancelled")


def _revision(token: str | None, usage: str) -> int:
    if token is None:
        raise SlashCommandError("the expected revision REV is missing (see /context task for the current one)",
                                usage=usage)
    if not token.isascii() or not token.isdigit():
        raise SlashCommandError(f"REV must be a whole number, not {token!r}", usage=usage)
    return int(token)


def _source(command: str) -> dict[str, str]:
    return {"label": f"host command /context task {command}"}


def plan(sub: str, rest: str) -> Callable[[Any], Any]:
    """The notebook operation a ``/context task SUB …`` line asks for.

    Raises:
        SlashCommandError: unknown sub-command or bad arguments (usage attached).
    """
    usage = USAGES.get(sub)
    if usage is None:
        raise SlashCommandError(f"unknown /context task command {sub!r}", usage=USAGE)
    if sub == "note":
        text = _note_text(rest, usage, "the note's text is missing, e.g. /context task note keep the API stable")

        def note(t: Any) -> Any:  # the short form: current revision, a constraint, a fresh id
            number = 1 + len(t.notes)
            while t.note(f"n{number}") is not None:
                number += 1
            return t.update_host({"notes": [{"id": f"n{number}", "category": "constraint", "text": text,
                                             "source": _source("note")}]}, t.revision)
        return note
    if sub == "add":
        try:
            (rev, category, note_id), text = _fixed(rest, 3, usage, text=True)
        except SlashCommandError as exc:
            raise SlashCommandError(f"{exc}; to note a constraint at the current revision: "
                                    "/context task note TEXT…", usage=usage) from None
        text = _note_text(text, usage, "the note's text is missing (TEXT after the id)")
        _check_category(category, usage)
        _check_id(note_id, "ID", usage)
        r = _revision(rev, usage)
        return lambda t: t.update_host({"notes": [{"id": note_id, "category": category, "text": text,
                                                   "source": _source("add")}]}, r)
    if sub == "correct":
        (rev, old, new), text = _fixed(rest, 3, usage, text=True)
        text = _note_text(text, usage, "the corrected text is missing (TEXT after NEW_ID)")
        _check_id(new, "NEW_ID", usage)
        r = _revision(rev, usage)

        def correct(t: Any) -> Any:
            note = t.note(old)
            if note is None:
                from amos.tasks import TaskStateError

                raise TaskStateError("TASK_STATE_INVALID", f"no note {old!r} to correct")
            category = note.category if hasattr(note, "category") else note["category"]
            return t.update_host({"notes": [{"id": new, "category": category, "text": text, "supersedes": old,
                                             "source": _source("correct")}]}, r)
        return correct
    if sub == "resolve":
        (rev, note_id), _ = _fixed(rest, 2, usage)
        r = _revision(rev, usage)
        return lambda t: t.update_host({"resolve": [note_id]}, r)
    if sub == "confirm-prune":
        (rev, execution_id, status), proof = _fixed(rest, 3, usage, text=True)
        r = _revision(rev, usage)
        if status not in TERMINAL:
            raise SlashCommandError(f"STATUS must be one of {', '.join(TERMINAL)}, not {status!r}", usage=usage)
        return lambda t: t.update_host({"confirm_actions": [{"execution_id": execution_id, "status": status,
                                                             "source": {"label": proof}}],
                                        "prune": {"execution_ids": [execution_id]}}, r)
    tokens, _ = split_tokens(rest, 10_000)
    if len(tokens) < 2:
        raise SlashCommandError("give REV and at least one id", usage=usage)
    r = _revision(tokens[0], usage)
    ids = tokens[1:]
    if sub == "prune":
        return lambda t: t.prune_resolved(ids, [], r)
    if sub == "resolve-prune":
        return lambda t: t.update_host({"resolve": ids, "prune": {"note_ids": ids}}, r)
    return lambda t: t.prune_resolved([], ids, r)  # prune-action


def _check_category(category: str, usage: str) -> None:
    """Refuse a CATEGORY the notebook does not have, naming the accepted ones (exit 2)."""
    from amos.tasks.model import CATEGORIES

    if category not in CATEGORIES:
        raise SlashCommandError(f"CATEGORY must be one of {', '.join(CATEGORIES)}, not {category!r}", usage=usage)


def _check_id(value: str, name: str, usage: str) -> None:
    """Refuse a note id the notebook would refuse (exit 2, in words instead of its pattern)."""
    from amos.tasks.model import ID_CHARS, MAX_ID_CHARS

    if not re.fullmatch(ID_CHARS, value) or len(value) > MAX_ID_CHARS:
        raise SlashCommandError(f"{name} {value!r} is not a note id: 1-{MAX_ID_CHARS} characters, a letter or digit "
                                "first, then letters, digits or ._:@/+-", usage=usage)


def _note_text(raw: str, usage: str, missing: str) -> str:
    """A note's TEXT as typed: one pair of outer quotes dropped; empty, or holding control
    characters other than tab and newline, is refused (the notebook would refuse it too,
    naming a regular expression instead of the problem).

    Raises:
        SlashCommandError: ``missing`` for an empty text; the control-character refusal.
    """
    text = _unquoted(raw)
    if not text:
        raise SlashCommandError(missing, usage=usage)
    if any(unicodedata.category(c) == "Cc" and c not in "\t\n" for c in text):  # C0, DEL and C1
        raise SlashCommandError("the note's text holds control characters; only tab and newline are "
                                "accepted besides printable text", usage=usage)
    return text


def _unquoted(text: str) -> str:
    """``"keep the API stable"`` → ``keep the API stable`` (one pair of outer quotes)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def _fixed(rest: str, count: int, usage: str, *, text: bool = False) -> tuple[list[str], str]:
    tokens, remainder = split_tokens(rest, count, rest=True)
    if len(tokens) < count or (text and not remainder.strip()):
        raise SlashCommandError("missing arguments", usage=usage)
    if not text and remainder.strip():
        raise SlashCommandError(f"unexpected extra arguments {remainder.strip()!r}", usage=usage)
    return tokens, remainder.strip()


def run(runner: Any, sub: str, rest: str) -> tuple[bool, dict[str, Any], str]:
    """Run one ``/context task`` line: ``(ok, result or error, text)``.

    Raises:
        SlashCommandError: bad arguments (nothing changed).
    """
    from amos.tasks import TaskStateError

    if not sub:
        notes = runner.task_notes()
        return True, {"revision": notes.revision, "view": notes.view}, f"revision {notes.revision}\n{notes.view}"
    operation = plan(sub, rest)
    before = {(n.id, n.status, n.text) for n in runner.task_notes().notes}
    try:
        runner.update_tasks(operation)
    except TaskStateError as exc:
        return False, {"code": exc.code, "message": str(exc)}, f"{exc.code}: {exc}"
    except SessionError as exc:
        return False, {"code": f"SESSION_{exc.code.upper()}", "message": str(exc)}, str(exc)
    notes = runner.task_notes()
    unsaved = "" if runner.saves_sessions else " (not saved: --no-save)"
    changed = [n for n in notes.notes if (n.id, n.status, n.text) not in before]
    gone = sorted({i for i, _, _ in before} - {n.id for n in notes.notes})
    lines = [f"  {n.id} [{n.category}, {n.status}] {n.text}" for n in changed]
    lines += [f"  {note_id} pruned" for note_id in gone]
    data = {"revision": notes.revision, "view": notes.view,
            "changed": [{"id": n.id, "category": n.category, "status": n.status, "text": n.text} for n in changed],
            "pruned": gone}
    shown = "\n".join(lines) if lines else "  (no note changed)"
    return True, data, f"ok — revision {notes.revision}{unsaved}\n{shown}\n(/context task shows the whole view)"
