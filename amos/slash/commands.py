"""Built-in slash commands (spec/slash-commands.md).

Host commands make no model call. Each handler takes the runner (the host API) and
the argument text, and returns a :class:`SlashResult` holding JSON data for
``amos run --json`` and a text rendering for people. Unknown commands and bad
arguments raise :class:`~amos.errors.SlashCommandError` carrying the usage line;
nothing changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amos.errors import AmosError, SessionError, SlashCommandError
from amos.render import checkpoint_rows_text
from amos.slash.custom import CustomCommand, Skipped, expand, load_custom_commands
from amos.slash.files import (
    DIFF_DETAILS,
    DIFF_USAGE,
    REWIND_DETAILS,
    REWIND_USAGE,
    UNDO_DETAILS,
    UNDO_USAGE,
    diff_command,
    rewind_command,
    undo_command,
)
from amos.slash.mcp import MCP_PREFIX, MCP_USAGE, mcp_command, mcp_prompt_result, prompt_rows
from amos.slash.parser import parse_line, split_tokens
from amos.slash.permissions import PERMISSIONS_USAGE, PLAN_USAGE, permissions_command, plan_command
from amos.verdicts import command_exit_code


@dataclass
class SlashResult:
    """What a slash command did.

    Attributes:
        command: the line as typed.
        ok: False when the command ran and failed (exit 1 in ``amos run``).
        result: the command's data as JSON-ready values.
        error: ``{"code", "message"}`` when not ok.
        text: a rendering for people (plain text; JSON blocks where useful).
        action: what the front end should do next: ``quit``, ``clear``,
            ``load_session`` (``action_arg`` is the id), ``new_session``, ``prompt`` (a custom
            command: run ``action_arg``, the expanded prompt, exactly as if it had been
            typed as a prompt), ``files`` (``/undo``, ``/rewind N``, ``/diff``: ``run_line``
            awaits the host for the final result), ``reload_session`` or None.
        save: True when the session changed and ``amos run`` should save it.
    """

    command: str
    ok: bool = True
    result: Any = None
    error: dict[str, str] | None = None
    text: str = ""
    action: str | None = None
    action_arg: str | None = None
    save: bool = False

    @property
    def exit_code(self) -> int:
        """0 on success; when the command ran and failed, 9 for a refused task edit, 10
        for a disabled feature, else 1 (:func:`amos.verdicts.command_exit_code`)."""
        return 0 if self.ok else command_exit_code((self.error or {}).get("code"))

    def to_json(self, session_id: str) -> dict[str, Any]:
        """The ``--json`` shape of spec/cli.md "``--json`` output of a slash command"."""
        return {"session_id": session_id, "command": self.command, "ok": self.ok,
                "result": self.result, "error": self.error}


@dataclass(frozen=True)
class Command:
    """A built-in command: its name, usage line, summary and handler."""

    name: str
    usage: str
    summary: str
    handler: Callable[[Any, str, str], SlashResult] = field(repr=False)
    details: str = ""
    """Every form of the command, shown by ``/help NAME``."""


def _failed(line: str, code: str, message: str) -> SlashResult:
    return SlashResult(command=line, ok=False, error={"code": code, "message": message}, text=message)


def _json_block(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


# ---------------------------------------------------------------------------- handlers


def _help(runner: Any, rest: str, line: str) -> SlashResult:
    tokens, _ = split_tokens(rest, 1)
    customs, skipped = custom_commands(runner)
    if tokens:
        name = tokens[0].lstrip("/")
        cmd = COMMANDS.get(name)
        custom = customs.get(name)
        if cmd is not None:
            ignored = "".join(f"\n\nignored: {s.source} (built-in commands cannot be replaced)"
                              for s in skipped if s.builtin and s.name == name)
            text = f"{cmd.usage}\n  {cmd.summary}" + (f"\n\n{cmd.details}" if cmd.details else "") + ignored
            return SlashResult(command=line, result={"usage": cmd.usage, "summary": cmd.summary,
                                                     "details": cmd.details or None}, text=text)
        if custom is not None:
            text = (f"{custom.usage}\n  {_custom_summary(custom, runner)}\n  file: {custom.source}\n\n"
                    f"sends this prompt ($ARGUMENTS = the rest of the line, $1…$9 = its words):\n"
                    f"{custom.template}")
            return SlashResult(command=line, result={"usage": custom.usage, "summary": custom.description,
                                                     "details": custom.template, "custom": True,
                                                     "source": str(custom.source)}, text=text)
        prompt = next((p for p in runner.mcp.prompts() if p.command == name), None) \
            if name.startswith(MCP_PREFIX) else None
        if prompt is not None:
            args = "".join(f"\n  {a.name.upper()}{'' if a.required else ' (optional)'}: {a.description}"
                           for a in prompt.arguments)
            return SlashResult(command=line, result={"usage": prompt.usage, "summary": prompt.description,
                                                     "mcp": True, **prompt.to_json()},
                               text=f"{prompt.usage}\n  {prompt.description}\n  prompt {prompt.prompt!r} of MCP "
                                    f"server {prompt.server}; arguments by position or NAME=value" + args)
        broken = _broken(skipped, name)
        if broken is not None:
            return _failed(line, "CUSTOM_COMMAND_INVALID",
                           f"/{name} cannot be used: {broken.source}: {broken.reason}")
        raise SlashCommandError(f"unknown command /{name}; /help lists commands", usage=COMMANDS["help"].usage)
    rows: list[dict[str, Any]] = [{"usage": c.usage, "summary": c.summary} for c in COMMANDS.values()]
    width = max(len(r["usage"]) for r in rows)
    text = "\n".join(f"{r['usage']:<{width}}  {r['summary']}" for r in rows)
    custom_rows = [{"usage": c.usage, "summary": _custom_summary(c, runner), "custom": True,
                    "description": c.description, "arguments": c.arguments, "source": str(c.source)}
                   for c in customs.values()]
    if custom_rows:
        width = max(len(r["usage"]) for r in custom_rows)
        text += "\n\nCustom commands (each sends its prompt to the model; /help NAME shows it):\n"
        text += "\n".join(f"{r['usage']:<{width}}  {r['summary']}" for r in custom_rows)
    mcp_rows = prompt_rows(runner)
    if mcp_rows:
        width = max(len(r["usage"]) for r in mcp_rows)
        text += "\n\nMCP prompts (each sends the server's prompt to the model):\n"
        text += "\n".join(f"{r['usage']:<{width}}  {r['summary']}" for r in mcp_rows)
    elif runner.mcp.configured:
        text += "\n\nMCP prompts are listed once the servers have started (/mcp starts them)."
    warnings = [str(s) for s in skipped]
    if warnings:
        text += "\n\nSkipped command files:\n" + "\n".join(f"  {w}" for w in warnings)
    text += "\n\nA line that does not start with / is a prompt; //text sends the prompt /text."
    return SlashResult(command=line, result={"commands": rows + custom_rows + mcp_rows, "custom_warnings": warnings},
                       text=text)


def custom_commands(runner: Any) -> tuple[dict[str, CustomCommand], list[Skipped]]:
    """The custom commands this runner sees (read afresh from disk on every call).

    Looked up in the runner's workspace (``commands/``, ``.claude/commands/``), the user
    config folder (``<config>/commands/``), then the commands bundled with amos;
    built-in names are never replaced (:func:`amos.slash.custom.load_custom_commands`).

    Args:
        runner: the ``Host`` (only ``workspace`` is read).

    Returns:
        ``(commands by name, skipped files)``.
    """
    from amos import paths

    return load_custom_commands(Path(runner.workspace), paths.config_dir(), frozenset(COMMANDS))


def _broken(skipped: list[Skipped], name: str) -> Skipped | None:
    return next((s for s in skipped if s.name == name and not s.builtin), None)


def _custom_summary(command: CustomCommand, runner: Any) -> str:
    """``description · custom, commands/greet.md``: what /help and the TUI show."""
    source = command.source
    if command.origin == "bundled":
        where = f"bundled with amos ({source.name})"
    else:
        try:
            where = str(source.relative_to(Path(runner.workspace)))
        except ValueError:
            home = Path.home()
            where = ("~/" + str(source.relative_to(home))) if source.is_relative_to(home) else str(source)
    return f"{command.description or 'custom prompt'} · custom, {where}"


def _context(runner: Any, rest: str, line: str) -> SlashResult:
    tokens, remainder = split_tokens(rest, 1, rest=True)
    sub = tokens[0] if tokens else ""
    if sub == "loop":
        if remainder:
            raise SlashCommandError("/context loop takes no arguments", usage="/context loop")
        return _context_loop(runner, line)
    if sub == "task":
        if not runner.tasks_enabled:
            return _failed(line, "TASK_STATE_DISABLED",
                           "task state is not enabled; set \"task_state\": {\"enabled\": true} in the config "
                           "(`amos config path` shows where) to use /context task")
        from amos.slash import tasks as task_commands

        words, more = split_tokens(remainder, 1, rest=True)
        ok, data, text = task_commands.run(runner, words[0] if words else "", more)
        if not ok:
            return SlashResult(command=line, ok=False, error=data, text=text)
        return SlashResult(command=line, result=data, text=text)
    if sub == "evidence":
        if not runner.evidence_enabled:
            return _failed(line, "EVIDENCE_DISABLED",
                           "evidence is not enabled; set \"evidence\": {\"enabled\": true} in the config "
                           "(`amos config path` shows where) to use /context evidence")
        return _context_evidence(runner, remainder, line)
    if sub:
        raise SlashCommandError(f"unknown /context section {sub!r}",
                                usage="/context [loop | task … | evidence …]")
    data = runner.context_report()
    ctx, usage, diag = data["context"], data["usage"], data["loop"]
    window, estimate = ctx["window_tokens"], ctx["estimated_tokens"]
    show_cost = runner.ui.show_cost
    parts = ctx["parts"]
    cost = usage.get("cost_usd")
    cost_text = ("" if not show_cost else f", cost ${cost:.4f}" if cost is not None
                 else ", cost unknown for this model")
    text = (f"model {data['model']}  ·  workspace {data['workspace']}\n"
            f"context ~{estimate} / {window} tokens ({estimate * 100 // window}%, window from "
            f"{ctx['window_source']}), {data['messages']} messages\n"
            f"  system ~{parts['system']}  ·  task view ~{parts['task_view']}  ·  tools ~{parts['tools']}  ·  "
            f"history ~{parts['history']} (protected ~{parts['protected']})\n"
            f"  compaction at ~{ctx['compact_at_tokens']} tokens ({ctx['compact_at']:.0%}); "
            f"~{ctx['compactable_tokens']} tokens of older turns can be compacted (/compact)\n"
            f"usage {usage['input_tokens']} in + {usage['output_tokens']} out tokens "
            f"({usage['cached_tokens']} cached, {usage['reasoning_tokens']} reasoning) over "
            f"{usage['model_calls']} model calls{cost_text}\n"
            f"loop {data['loop']['phase'] + ' (' + str(data['loop']['reason']) + ')' if diag else 'no run yet'}"
            f"  ·  last verdict {data['last_verdict'] or '-'}")
    task = data["task_state"]
    if task["enabled"]:
        text += f"\ntask state revision {task['revision']}: {task['notes']} notes, {task['actions']} action receipts"
    ev = data["evidence"]
    if ev["enabled"]:
        text += f"\nevidence: {ev['recent']} recent receipts" + (f", {ev['unstored']} NOT stored" if ev["unstored"]
                                                                   else "")
    return SlashResult(command=line, result=data, text=text)


EVIDENCE_USAGE = "/context evidence [list] [--after CURSOR] | /context evidence read ID [OFFSET [LIMIT]]"


def _whole(token: str, what: str) -> int:
    if not token.isascii() or not token.isdigit() or len(token) > 12:
        raise SlashCommandError(f"{what} must be a whole number (0 or more), not {token!r}", usage=EVIDENCE_USAGE)
    return int(token)


def _context_evidence(runner: Any, rest: str, line: str) -> SlashResult:
    tokens, remainder = split_tokens(rest, 5)
    if remainder:
        raise SlashCommandError(f"unexpected arguments {remainder!r}", usage=EVIDENCE_USAGE)
    from amos.errors import AmosError

    try:
        if not tokens or tokens[0] in ("list", "--after"):
            args = tokens[1:] if tokens and tokens[0] == "list" else tokens
            after = None
            if args:
                if args[0] != "--after" or len(args) != 2:
                    raise SlashCommandError(f"unknown /context evidence list arguments {' '.join(args)!r}",
                                            usage=EVIDENCE_USAGE)
                after = args[1]
            page = runner.evidence_page(after)

            def safe(value: object) -> str:
                return "".join(c if c.isprintable() else "?" for c in str(value))

            rows = [f"{safe(e.id)}  {safe(e.tool):<12} {safe(e.status):<10} {e.size:>9} B  {safe(e.call_id)}"
                    for e in page.entries]
            text = "\n".join(rows) or "no evidence records in this scope"
            if page.next_cursor:
                text += f"\nmore: /context evidence list --after {page.next_cursor}"
            return SlashResult(command=line, result=page.to_dict(), text=text)
        if tokens[0] != "read":
            raise SlashCommandError(f"unknown /context evidence command {tokens[0]!r}", usage=EVIDENCE_USAGE)
        if len(tokens) < 2 or len(tokens) > 4:
            raise SlashCommandError("/context evidence read needs an evidence id, then an optional OFFSET and "
                                    "LIMIT", usage=EVIDENCE_USAGE)
        offset = _whole(tokens[2], "OFFSET") if len(tokens) > 2 else 0
        limit = _whole(tokens[3], "LIMIT") if len(tokens) > 3 else 4000
        if limit < 1:
            raise SlashCommandError("LIMIT must be at least 1", usage=EVIDENCE_USAGE)
        chunk = runner.evidence_chunk(tokens[1], offset, min(limit, 65536))
    except SlashCommandError:
        raise
    except AmosError as exc:
        if getattr(exc, "code", None) == "ambiguous" or exc.exit_code == 2:  # bad arguments, as `amos evidence read`
            raise SlashCommandError(str(exc), usage=EVIDENCE_USAGE) from None
        return _failed(line, f"EVIDENCE_{str(getattr(exc, 'code', 'error')).upper()}", str(exc))
    more = (f"\n… more: /context evidence read {tokens[1]} {chunk.next_offset} (of {chunk.total_chars} characters)"
            if chunk.next_offset is not None else "")
    return SlashResult(command=line, result=chunk.to_dict(), text=chunk.text + more)


def _context_loop(runner: Any, line: str) -> SlashResult:
    diag = runner.get_loop_diagnostics()
    if diag is None:
        return SlashResult(command=line, result=None, text="no run yet in this session: no loop diagnostics")
    data = diag.model_dump(mode="json")
    recovery = (f"recovery {diag.recovery_attempts}/{diag.max_recovery_attempts}"
                if diag.max_recovery_attempts is not None else "recovery off (no loop policy)")
    summary = (f"phase {diag.phase}  ·  stopping reason {diag.reason or '-'}  ·  {recovery}  ·  "
               f"iterations {diag.iterations}")
    if diag.completion is not None:
        verdict = "confirmed" if diag.completion.complete else f"not done ({diag.completion.reason or '-'})"
        summary += f"\ncompletion check: {verdict}" + ("  ·  status completed" if diag.status else "")
    if diag.policy_enabled and diag.tracked:
        t = diag.tracked
        summary += (f"\ntracked: {t.get('admissions', 0)} admissions, {t.get('signatures', 0)} signatures, "
                    f"{t.get('observations', 0)} observations (bound {t.get('max_tracked')})")
    if diag.doom_loop:
        last = diag.doom_loop.get("last_verdict")
        streaks = ", ".join(f"{k} {v}" for k, v in (diag.doom_loop.get("streaks") or {}).items()) or "none"
        summary += (f"\ndoom loop: streaks {streaks}  ·  last verdict "
                    + (f"{last['action']} ({last['detector']}, streak {last['streak']})" if last else "none"))
    return SlashResult(command=line, result=data, text=summary + "\n" + _json_block(data))


def compact_result(line: str, outcome: Any) -> SlashResult:
    """The ``/compact`` result once the front end has awaited ``Host.compact``.

    Nothing to compact is a success (exit 0); a failed step is ``COMPACTION_FAILED``.
    """
    if outcome.failed:
        return SlashResult(command=line, ok=False, result=outcome.to_dict(),
                           error={"code": "COMPACTION_FAILED", "message": outcome.message}, text=outcome.message)
    return SlashResult(command=line, result=outcome.to_dict(), text=outcome.message)


def _compact(runner: Any, rest: str, line: str) -> SlashResult:
    if runner.is_running:
        return _failed(line, "BUSY", "a run is active; /compact works between runs")
    return SlashResult(command=line, text="compacting older turns…", action="compact", action_arg=rest.strip())


def _session(runner: Any, rest: str, line: str) -> SlashResult:
    tokens, remainder = split_tokens(rest, 1, rest=True)
    sub = tokens[0] if tokens else ""
    if sub == "save":
        names, extra = split_tokens(remainder, 1)
        if extra:
            raise SlashCommandError("NAME is one token; put a name with spaces in double quotes",
                                    usage="/session save [NAME]")
        name = names[0] if names else None
        if name is not None:
            try:
                runner.check_session_name(name)
            except SessionError as exc:
                raise SlashCommandError(str(exc), usage="/session save [NAME]") from None
        try:
            checkpoint = runner.save_checkpoint(name)
        except SessionError as exc:
            return _failed(line, exc.code.upper(), str(exc))
        path = runner.session_path
        return SlashResult(command=line, result={"session_id": runner.session_id, "name": runner.session_name,
                                                 "path": str(path), "checkpoint": checkpoint.number},
                           text=f"saved session {runner.session_id}" + (f" as {name!r}" if name else "")
                           + f" to {path} (checkpoint {checkpoint.number})")
    if sub == "list":
        if remainder:
            raise SlashCommandError("/session list takes no arguments", usage="/session list")
        rows = [r.model_dump() for r in runner.sessions()]
        text = "\n".join(f"{r['id']}  {r['updated_at'][:19]}  {r['last_verdict'] or '-':<17} "
                         f"{r['name'] or ''} {r['title'] or ''}".rstrip() for r in rows) or "no saved sessions"
        return SlashResult(command=line, result={"sessions": rows}, text=text)
    if sub == "load":
        target = remainder.strip()
        if runner.is_running:
            return _failed(line, "BUSY", "a run is active; wait for it to end or cancel it first")
        if not target:
            rows = runner.sessions()
            text = "\n".join(f"{r.id}  {r.name or ''} {r.title or ''}".rstrip() for r in rows) or "no saved sessions"
            return SlashResult(command=line, result={"sessions": [r.model_dump() for r in rows]},
                               text="choose one with /session load ID:\n" + text)
        try:
            session_id = runner.resolve_session(target)
        except SessionError as exc:
            return _failed(line, exc.code.upper(), str(exc))
        return SlashResult(command=line, result={"session_id": session_id}, text=f"loading session {session_id}",
                           action="load_session", action_arg=session_id)
    if sub == "checkpoints":
        if remainder.strip():
            raise SlashCommandError("/session checkpoints takes no arguments", usage="/session checkpoints")
        rows = runner.list_checkpoints()
        return SlashResult(command=line, result={"checkpoints": [r.model_dump() for r in rows]},
                           text=checkpoint_rows_text(rows))
    if sub == "restore":
        numbers, extra = split_tokens(remainder, 1)
        if (not numbers or extra or not numbers[0].isascii() or not numbers[0].isdigit() or len(numbers[0]) > 9
                or int(numbers[0]) < 1):
            raise SlashCommandError("/session restore needs one checkpoint number (see /session checkpoints)",
                                    usage="/session restore N")
        try:
            restored = runner.restore_checkpoint(int(numbers[0]))
        except SessionError as exc:
            return _failed(line, exc.code.upper(), str(exc))
        undo = restored.last_checkpoint
        return SlashResult(command=line, result={"session_id": runner.session_id, "restored": int(numbers[0]),
                                                 "undo_checkpoint": undo, "messages": len(restored.messages)},
                           text=f"restored checkpoint {numbers[0]} ({len(restored.messages)} messages); "
                                f"/session restore {undo} undoes this",
                           action="reload_session", action_arg=runner.session_id)
    raise SlashCommandError(f"unknown /session subcommand {sub!r}" if sub else "/session needs a subcommand",
                            usage=COMMANDS["session"].usage)


def _model(runner: Any, rest: str, line: str) -> SlashResult:
    spec = rest.strip()
    if not spec:
        return SlashResult(command=line, result={"model": runner.model_spec}, text=f"model {runner.model_spec}")
    try:
        runner.set_model(spec)
    except AmosError as exc:
        raise SlashCommandError(str(exc), usage=COMMANDS["model"].usage) from None
    return SlashResult(command=line, result={"model": runner.model_spec}, save=True,
                       text=f"model for the next run: {runner.model_spec}")


def _tools(runner: Any, rest: str, line: str) -> SlashResult:
    if rest.strip():
        raise SlashCommandError("/tools takes no arguments", usage="/tools")
    rows = runner.tools_report()
    text = "\n".join(f"{r['name']:<14} {r['effect']:<8} {r['permission']}" for r in rows)
    return SlashResult(command=line, result={"tools": rows}, text="tool           effect   permission\n" + text)


def _policy(runner: Any, rest: str, line: str) -> SlashResult:
    if rest.strip():
        raise SlashCommandError("/policy takes no arguments", usage="/policy")
    data = runner.policy_report()
    lines = [f"loop policy: {'configured' if data['loop_policy'] else 'none'}",
             f"doom loop: {'configured' if data['doom_loop'] else 'off'}",
             f"completion check: {data['verify'] or 'none'}",
             f"limits: max_steps {data['max_steps']}, token_budget {data['token_budget'] or '-'}, "
             + (f"timeout {data['timeout_s']} s" if data["timeout_s"] else "no run timeout"),
             f"approvals owner: {data['approvals_owner'] or '- (pauses are WAITING_UNROUTED)'}",
             _json_block(data)]
    return SlashResult(command=line, result=data, text="\n".join(lines))


def _verify(runner: Any, rest: str, line: str) -> SlashResult:
    arg = rest.strip()
    if not arg:
        check = runner.check_in_force()
        return SlashResult(command=line, result=check.model_dump(),
                           text=f"completion check: {check.summary}" + (f" ({check.source})"
                                                                         if check.source != "none" else ""))
    if runner.is_running:
        return _failed(line, "BUSY", "a run is active; /verify works between runs")
    usage = COMMANDS["verify"].usage
    if arg.split()[0] in ("off", "human") and arg not in ("off", "human"):
        raise SlashCommandError(f"/verify {arg.split()[0]} takes nothing after it", usage=usage)
    import shlex

    try:
        shlex.split(arg)
    except ValueError as exc:
        raise SlashCommandError(f"the check is not a valid shell command line ({exc})", usage=usage) from None
    try:
        check = runner.set_verify(None if arg == "off" else arg)
    except AmosError as exc:
        raise SlashCommandError(str(exc), usage=COMMANDS["verify"].usage) from None
    said = ("the session forgets its completion check" if arg == "off"
            else "the next runs are checked by " + check.summary)
    return SlashResult(command=line, result=check.model_dump(), save=True,
                       text=f"{said}; in force now: {check.summary}"
                            + (f" ({check.source})" if check.source != "none" else ""))


def _clear(runner: Any, rest: str, line: str) -> SlashResult:
    return SlashResult(command=line, result={}, text="", action="clear")


def _new(runner: Any, rest: str, line: str) -> SlashResult:
    if rest.strip():
        raise SlashCommandError("/new takes no arguments", usage="/new")
    if runner.is_running:
        return _failed(line, "BUSY", "a run is active; /new works between runs")
    return SlashResult(command=line, result={"previous_session": runner.session_id},
                       text=f"a new session starts (session {runner.session_id} stays saved: "
                            f"/session load {runner.session_id} reopens it); in a shell every `amos run` "
                            "without --session or -c is a new session", action="new_session")


def _quit(runner: Any, rest: str, line: str) -> SlashResult:
    return SlashResult(command=line, result={}, text="bye", action="quit")


CONTEXT_DETAILS = "\n".join([
    "/context loop",
    "/context task",
    "    the task view and its revision",
    "/context task note TEXT…",
    "    a constraint at the current revision (id generated)",
    "/context task add REV CATEGORY ID TEXT…",
    "    CATEGORY: objective, constraint, decision, question, artifact",
    "/context task correct REV OLD_ID NEW_ID TEXT…",
    "/context task resolve REV ID",
    "/context task prune REV ID…",
    "    resolved or superseded notes",
    "/context task resolve-prune REV ID…",
    "/context task prune-action REV EXECUTION_ID…",
    "/context task confirm-prune REV EXECUTION_ID STATUS PROOF…",
    "    STATUS: completed, failed, cancelled",
    "/context evidence [list] [--after CURSOR]",
    "/context evidence read ID [OFFSET [LIMIT]]",
    "    ID: an evidence id or a unique prefix of it (4+ characters)",
])
"""``/help context``: one usage a line, its note indented under it (issue 21: two columns
wrapped into each other at 80 columns)."""


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("help", "/help [command]", "list commands, or one command's usage", _help),
    Command("context", "/context [loop | task … | evidence …]",
            "overview: model, context estimate, usage; /context loop shows loop diagnostics", _context,
            details=CONTEXT_DETAILS),
    Command("compact", "/compact [INSTRUCTIONS]", "summarise older turns to free context", _compact,
            details="/compact [INSTRUCTIONS]  replace the turns older than context.keep_recent_turns by one "
                    "summary the model writes (INSTRUCTIONS: what the summary must keep). Never removed: the "
                    "task view, tool results whose evidence is not acknowledged, the pending tool-call "
                    "protocol. The exact replaced history stays retrievable (evidence record "
                    "__context_source__ when evidence is on, and the checkpoint taken just before, which "
                    "/session restore N brings back)."),
    Command("session", "/session save [NAME] | load [ID_OR_NAME] | list | checkpoints | restore N",
            "save, load or list sessions", _session),
    Command("model", "/model [PROVIDER:MODEL]",
            "show or switch the model for the next run (in the TUI, no argument opens a picker)", _model),
    Command("policy", "/policy", "show the loop policy, doom-loop config and limits in force", _policy),
    Command("tools", "/tools", "tools, their effect and permission", _tools),
    Command("verify", "/verify [CMD | human | off]", "show or set the completion check the session remembers",
            _verify, details=("/verify            the check in force and where it came from (flag, session, config)\n"
                              "/verify CMD        runs count as done only when CMD exits 0 (remembered)\n"
                              "/verify human      a person confirms each completion claim\n"
                              "/verify off        forget the remembered check (the config's "
                              "completion.command still applies)")),
    Command("mcp", MCP_USAGE, "MCP servers: start them, show their status, tools and prompts",
            lambda runner, rest, line: mcp_command(runner, rest, line),
            details="/mcp  start the configured MCP servers not started yet (mcpServers in the config, a trusted "
                    "./.mcp.json) and show each one's status, its tools (mcp__SERVER__TOOL) with effect and "
                    "permission, and its prompts (/mcp__SERVER__PROMPT ARGS: by position or name=value)"),
    Command("permissions", PERMISSIONS_USAGE, "permission rules in force and where each came from; the sandbox",
            lambda runner, rest, line: permissions_command(runner, rest, line)),
    Command("plan", PLAN_USAGE, "plan mode for the next runs: read-only, write tools refused, a plan asked for",
            lambda runner, rest, line: plan_command(runner, rest, line),
            details="/plan      plan mode on: commands run in a read-only sandbox, write tools are refused, the "
                    "model is asked for a plan; receipts say it was a plan run\n"
                    "/plan off  back to the configured mode"),
    Command("undo", UNDO_USAGE, "put back the files the agent's last step changed", undo_command,
            details=UNDO_DETAILS),
    Command("rewind", REWIND_USAGE, "go back to a checkpoint: its files, its conversation or both", rewind_command,
            details=REWIND_DETAILS),
    Command("diff", DIFF_USAGE, "show what the agent changed in the files (latest run, or since checkpoint N)",
            diff_command, details=DIFF_DETAILS),
    Command("clear", "/clear", "clear the screen (not the session)", _clear),
    Command("new", "/new", "start a fresh session (same model and workspace; this one stays saved)", _new),
    Command("quit", "/quit", "save (if autosave) and exit", _quit),
]}


def execute_line(runner: Any, line: str) -> SlashResult:
    """Run one slash-command line against the runner.

    Args:
        runner: the ``Host`` (host API only).
        line: the line as typed, starting with ``/``.

    A name that is not a built-in is looked up among the custom commands
    (:func:`custom_commands`); one found returns ``action="prompt"`` with the expanded
    prompt in ``action_arg`` and ``result`` ``{"custom", "source", "prompt"}``; running
    it is the front end's job. Nothing else happens: no model call, no host code.

    Returns:
        The command's result.

    Raises:
        SlashCommandError: unknown command or bad arguments (usage attached; nothing
            changed); code ``CUSTOM_COMMAND_INVALID`` for a command file that could not
            be read (the one-line reason is the message).
    """
    parsed = parse_line(line)
    if parsed.kind != "command":
        raise SlashCommandError("not a slash command", usage="/help")
    name = parsed.name or ""
    command = COMMANDS.get(name)
    if command is not None:
        return command.handler(runner, parsed.rest, line)
    customs, skipped = custom_commands(runner) if name else ({}, [])
    custom = customs.get(name)
    if custom is not None:
        prompt = expand(custom, parsed.rest)
        return SlashResult(command=line, result={"custom": custom.name, "source": str(custom.source),
                                                 "prompt": prompt},
                           text=prompt, action="prompt", action_arg=prompt)
    broken = _broken(skipped, name)
    if broken is not None:
        raise SlashCommandError(f"/{name} cannot be used: {broken.source}: {broken.reason}",
                                code="CUSTOM_COMMAND_INVALID")
    if name.startswith(MCP_PREFIX):
        return mcp_prompt_result(runner, name, parsed.rest, line)
    raise SlashCommandError(f"unknown command /{parsed.name}; /help lists commands", usage="/help [command]",
                            code="UNKNOWN_COMMAND")
