"""``/undo``, ``/rewind`` and ``/diff``: the workspace's files, through ``host.snapshots`` (issue 20).

The handlers check the arguments at once (bad input is a ``SlashCommandError`` naming
what is accepted; nothing changes) and return ``action="files"``; ``run_line`` then
awaits :func:`finish_files`, which calls the host (git runs on a worker thread) and
gives the final result. Files changed after the agent's change are a failed result
with code ``FILES_CHANGED`` listing them (nothing was restored); the TUI asks whether
to overwrite them, ``amos run`` exits 1 and says to add ``--force``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amos.errors import AmosError, SlashCommandError
from amos.render import FILE_CHANGE_WORDS
from amos.slash.parser import parse_line, split_tokens

UNDO_USAGE = "/undo [--force]"
REWIND_USAGE = "/rewind [N] [--files | --conversation | --both] [--force]"
DIFF_USAGE = "/diff [N] [--stat]"

UNDO_DETAILS = (
    "/undo           put back the files the last step that changed files changed, exactly (bytes and\n"
    "                permissions; a file it created is removed, one it deleted comes back). Files the\n"
    "                agent did not change are never touched. The model is told on its next request.\n"
    "/undo --force   also overwrite files changed after the agent's change (by you or another program);\n"
    "                without it nothing is restored and those files are listed. Their current state is\n"
    "                snapshotted first either way, so nothing is lost.\n"
    "/undo again goes one step further back. A file no snapshot holds a copy of (ignored by your ignore\n"
    "                rules and changed by a command, or too large) is listed as not put back, and /undo\n"
    "                fails (exit 1) although the other files were put back.")
REWIND_DETAILS = (
    "/rewind                 list the checkpoints: number, time, the prompt, whether files were recorded\n"
    "/rewind N               go back to checkpoint N: the files the agent changed since, and the\n"
    "                        conversation (the default, --both, so the two never disagree)\n"
    "/rewind N --files       only the files;   /rewind N --conversation   only the conversation\n"
    "/rewind N --force       overwrite files changed after the agent's change too\n"
    "Shell: amos sessions restore ID --checkpoint N [--files | --conversation | --both] [--force]")
DIFF_DETAILS = (
    "/diff           what the latest run that changed files changed, as a unified diff (files the agent\n"
    "                changed, from before that run to now)\n"
    "/diff N         what changed in those files since checkpoint N (/rewind lists them)\n"
    "/diff --stat    a summary: files and lines changed\n"
    "Shell: amos diff ID [--checkpoint N] [--stat]")

_CHANGE_WORDS = FILE_CHANGE_WORDS


@dataclass(frozen=True)
class FilesCommand:
    """One parsed ``/undo``, ``/rewind`` or ``/diff`` line."""

    name: str
    number: int | None = None
    what: str = "both"
    force: bool = False
    stat: bool = False


def _number(token: str, usage: str) -> int:
    if not token.isascii() or not token.isdigit() or len(token) > 9 or int(token) < 1:
        raise SlashCommandError(f"{token!r} is not a checkpoint number (a whole number from 1; /rewind lists them)",
                                usage=usage)
    return int(token)


def parse_files_command(name: str, rest: str) -> FilesCommand:
    """Parse the arguments of ``/undo``, ``/rewind`` or ``/diff``.

    Raises:
        SlashCommandError: an unknown flag, two parts chosen, a bad number (usage attached).
    """
    usage = {"undo": UNDO_USAGE, "rewind": REWIND_USAGE, "diff": DIFF_USAGE}[name]
    tokens, extra = split_tokens(rest, 8)
    if extra:
        raise SlashCommandError(f"too many arguments: {extra!r}", usage=usage)
    flags = {"undo": {"--force"}, "rewind": {"--force", "--files", "--conversation", "--both"},
             "diff": {"--stat"}}[name]
    number: int | None = None
    seen: list[str] = []
    for token in tokens:
        if token.startswith("-"):
            if token not in flags:
                accepted = ", ".join(sorted(flags))
                raise SlashCommandError(f"unknown option {token!r} (/{name} accepts {accepted})", usage=usage)
            seen.append(token)
        elif name == "undo" or number is not None:
            raise SlashCommandError(f"unexpected argument {token!r}", usage=usage)
        else:
            number = _number(token, usage)
    parts = [t[2:] for t in seen if t in ("--files", "--conversation", "--both")]
    if len(set(parts)) > 1:
        raise SlashCommandError("choose one of --files, --conversation and --both", usage=usage)
    if name == "rewind" and number is None and (parts or "--force" in seen):
        raise SlashCommandError("/rewind needs a checkpoint number before its options", usage=usage)
    return FilesCommand(name, number, parts[0] if parts else "both", "--force" in seen, "--stat" in seen)


# ---------------------------------------------------------------------------- handlers


def _result(**kwargs: Any) -> Any:
    from amos.slash.commands import SlashResult

    return SlashResult(**kwargs)


def _failed(line: str, code: str, message: str, data: Any = None) -> Any:
    return _result(command=line, ok=False, result=data, error={"code": code, "message": message}, text=message)


def undo_command(runner: Any, rest: str, line: str) -> Any:
    """``/undo [--force]``: checked now, done by :func:`finish_files`."""
    parse_files_command("undo", rest)
    if runner.is_running:
        return _failed(line, "BUSY", "a run is active; /undo works between runs")
    return _result(command=line, text="putting the files back…", action="files")


def rewind_command(runner: Any, rest: str, line: str) -> Any:
    """``/rewind [N] [--files|--conversation|--both] [--force]``; without N, the checkpoints."""
    parsed = parse_files_command("rewind", rest)
    if parsed.number is None:
        return checkpoints_view(runner, line)
    if runner.is_running:
        return _failed(line, "BUSY", "a run is active; /rewind works between runs")
    return _result(command=line, text=f"going back to checkpoint {parsed.number}…", action="files")


def diff_command(runner: Any, rest: str, line: str) -> Any:
    """``/diff [N] [--stat]``: checked now, shown by :func:`finish_files`."""
    parse_files_command("diff", rest)
    if runner.is_running:
        return _failed(line, "BUSY", "a run is active; /diff works between runs")
    return _result(command=line, text="comparing the files…", action="files")


def checkpoints_view(runner: Any, line: str) -> Any:
    """``/rewind`` alone: the checkpoints with time, prompt and whether files were recorded."""
    rows = runner.list_checkpoints()
    if not rows:
        return _result(command=line, result={"checkpoints": []},
                       text="no checkpoints yet (one is taken at the end of every run and by /session save)")
    snapshots = getattr(runner, "snapshots", None)
    off = snapshots.why_off() if snapshots is not None else "file checkpoints are not wired into this host"
    lines = [f"{'N':>4}  {'TAKEN (UTC)':<19}  {'FILES':<5}  PROMPT"]
    for r in rows:
        files = "off" if off else "yes" if r.file_seq is not None else "-"
        prompt = r.prompt or "-"
        if r.reason == "before_restore":
            prompt = f"(before a restore) {prompt}"
        lines.append(f"{r.number:>4}  {r.created_at[:19].replace('T', ' '):<19}  {files:<5}  {prompt}")
    if off:
        lines.append(f"FILES off: {off}; /rewind N --conversation restores the conversation only")
    else:
        lines.append("go back with /rewind N (files and conversation), /rewind N --files or /rewind N --conversation")
    return _result(command=line, result={"checkpoints": [r.model_dump() for r in rows], "files_off": off},
                   text="\n".join(lines))


# ---------------------------------------------------------------------------- the work


def _paths(rows: Any, limit: int = 20) -> str:
    rows = list(rows)
    text = ", ".join(rows[:limit])
    return text + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def _files_text(done: Any, what: str, by: str = "by the agent") -> tuple[bool, str | None, str]:
    """``(ok, error code, text)`` of a :class:`~amos.engine.FilesRestored`."""
    ok, code, text = _restored_text(done, what, by)
    notes = "\n".join(getattr(done, "notes", ()) or ())
    return ok, code, (notes + "\n" + text if notes else text)


def _restored_text(done: Any, what: str, by: str) -> tuple[bool, str | None, str]:
    if done.refused:
        listed = "; ".join(f"{p} ({r})" for p, r in done.conflicts[:20])
        return False, "FILES_CHANGED", (f"{what}: nothing was put back, because these files were changed after the "
                                        f"agent's change: {listed}. Add --force to overwrite them (their current "
                                        "state is snapshotted first, so it is not lost).")
    if not done.restored:
        text = f"{what}: the files were already as they were before the agent changed them"
    else:
        changed = {row["path"]: row["change"] for row in done.changes}
        shown = [f"{p} ({_CHANGE_WORDS.get(changed.get(p, ''), 'changed')} {by})" for p in done.restored]
        text = f"{what}: put back {len(done.restored)} file(s): {_paths(shown)}"
        if done.forced:
            text += f"; overwritten although changed after the agent: {_paths(p for p, _ in done.conflicts)}"
    if getattr(done, "interrupted", False):
        text += (f"; step {done.step} was cut short (amos was stopped during it), so what it changed was taken as "
                 "everything that differed from the snapshot before it when amos next opened the session")
    if done.unavailable:
        more = f" and {len(done.unavailable) - 10} more" if len(done.unavailable) > 10 else ""
        text += ("; NOT put back, no copy was kept: " + "; ".join(f"{p} ({r})" for p, r in done.unavailable[:10])
                 + more)
    if done.failed:
        text += "; FAILED: " + "; ".join(f"{p} ({r})" for p, r in done.failed[:10])
    code = "RESTORE_FAILED" if done.failed else "NOT_RESTORABLE" if done.unavailable else None
    return code is None, code, text


async def finish_files(runner: Any, line: str) -> Any:
    """Do what an ``/undo``, ``/rewind N`` or ``/diff`` line asks of ``runner.snapshots``.

    Returns:
        The final ``SlashResult`` (``save`` set when the session changed; ``action
        reload_session`` after a conversation restore).
    """
    parsed_line = parse_line(line)  # exit 1 (not ok) when anything was refused, failed or not restorable
    cmd = parse_files_command(parsed_line.name or "", parsed_line.rest)
    try:
        if cmd.name == "undo":
            done = await runner.snapshots.undo(force=cmd.force)
            ok, code, text = _files_text(done, "/undo")
            if ok and done.restored:
                text += ". The model is told on its next request; /undo again goes one more step back."
            data = done.to_json()
            data["force_line"] = "/undo --force" if done.refused else None
            return _outcome(line, ok, code, text, data, save=not done.refused)
        if cmd.name == "rewind":
            assert cmd.number is not None
            rewound = await runner.snapshots.rewind(cmd.number, what=cmd.what, force=cmd.force)
            return _rewind_result(line, cmd, rewound, runner.session_id)
        report = await runner.snapshots.diff(cmd.number, stat=cmd.stat)
        files = "; ".join(f"{f['path']} ({_CHANGE_WORDS.get(f['change'], f['change'])})" for f in report.files)
        head = f"files the agent changed, {report.since}: {files}" if files else f"no file changes ({report.since})"
        text = head + ("\n\n" + report.text.rstrip("\n") if report.text else "")
        return _result(command=line, result=report.to_json(), text=text)
    except AmosError as exc:
        code = str(getattr(exc, "code", "error")).upper()
        if code == "NOT_FOUND" and cmd.number is not None:  # an unknown checkpoint is bad input (exit 2)
            raise SlashCommandError(str(exc), usage=f"/{cmd.name} N (/rewind lists the checkpoints)") from None
        code = {"OFF": "FILE_CHECKPOINTS_OFF"}.get(code, code)
        return _failed(line, code, str(exc))
    except OSError as exc:  # the disk refused: one line, never a traceback
        return _failed(line, "FILES_FAILED", f"/{cmd.name} failed: {exc.strerror or exc}")


def _outcome(line: str, ok: bool, code: str | None, text: str, data: Any, *, save: bool) -> Any:
    if ok:
        return _result(command=line, result=data, text=text, save=save)
    return _result(command=line, ok=False, result=data, error={"code": code or "ERROR", "message": text}, text=text,
                   save=save)


def _rewind_result(line: str, cmd: FilesCommand, rewound: Any, session_id: str) -> Any:
    data = rewound.to_json()
    parts: list[str] = []
    ok, code = True, None
    if rewound.files is not None:
        ok, code, text = _files_text(rewound.files, f"checkpoint {cmd.number}, files", "since then")
        parts.append(text)
        if rewound.refused:
            data["force_line"] = f"/rewind {cmd.number} --{cmd.what} --force"
            if cmd.what == "both":
                parts.append("The conversation was not restored either, so the two still agree.")
    parts += rewound.warnings
    if rewound.files is not None and not rewound.conversation and rewound.undo_checkpoint is not None:
        parts.append(f"the files as they were before are checkpoint {rewound.undo_checkpoint}: "
                     f"/rewind {rewound.undo_checkpoint} --files puts them back")
    if rewound.conversation:
        parts.append(f"conversation restored to checkpoint {cmd.number} ({rewound.messages} messages); "
                     f"/session restore {rewound.undo_checkpoint} brings the conversation before back")
    text = "\n".join(parts)
    if not ok:
        return _outcome(line, False, code, text, data, save=False)
    if rewound.conversation:  # the restore saved the session; the front end reopens it
        return _result(command=line, result=data, text=text, action="reload_session", action_arg=session_id)
    return _result(command=line, result=data, text=text, save=rewound.files is not None)


__all__ = ["DIFF_DETAILS", "DIFF_USAGE", "FilesCommand", "REWIND_DETAILS", "REWIND_USAGE", "UNDO_DETAILS",
           "UNDO_USAGE", "checkpoints_view", "diff_command", "finish_files", "parse_files_command",
           "rewind_command", "undo_command"]
