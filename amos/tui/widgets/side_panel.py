"""The side panel (F2): what the host knows about the session, at a glance.

Sections, each shown only when its feature exists and is enabled:

- **task notes** with the notebook's revision (``task_state.enabled``;
  seeds/protected-task-state.txt),
- **loop**: the latest execution's phase, stopping reason, recovery attempts and,
  with ``doom_loop`` on, the streaks and the last verdict (spec/stop-receipts.md
  "Loop diagnostics"),
- **evidence**: the last few evidence receipts, a receipt whose record was NOT
  stored flagged (``evidence.enabled``),
- **context**: the estimated size of the next request against the window, as a
  bar with the compaction threshold marked, and its parts,
- **usage**: tokens in/out and the cost, or "unknown price" (the cost line follows
  ``ui.show_cost``).

:func:`panel_data` reads the runner's host API once into a :class:`PanelData`
snapshot; :class:`SidePanel` only draws snapshots (presentation only, DESIGN.md
rule 1). Text that came from a person or a tool is shown literally, never as
markup (rule 5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from amos.tui.widgets.status_bar import format_rate, format_tokens
from amos.tui.widgets.tool_line import STATUS_GLYPHS

CSS_PATH = Path(__file__).with_suffix(".tcss")

EVIDENCE_SHOWN = 5
"""How many of the latest evidence receipts the panel lists."""
NOTES_SHOWN = 12
"""How many task notes the panel lists before saying how many more there are."""
_NOTE_CHARS = 140
FOOTER = "F2 hides this panel · F1 help"


@dataclass(frozen=True)
class NoteRow:
    """One task note as the panel shows it.

    Attributes:
        id: the note id.
        category: ``objective``, ``constraint``, ``decision``, ``question`` or ``artifact``.
        text: the note's text.
        status: ``active``, ``superseded`` or ``resolved``.
        confirmed: False for proposals and assumptions the host has not adopted.
    """

    id: str
    category: str
    text: str
    status: str = "active"
    confirmed: bool = True


@dataclass(frozen=True)
class TaskData:
    """The task notebook (present only with task state enabled).

    Attributes:
        revision: the notebook's current revision (the REV task edits must name).
        notes: retained notes, objectives first.
        actions: number of action receipts kept.
    """

    revision: int
    notes: tuple[NoteRow, ...] = ()
    actions: int = 0


@dataclass(frozen=True)
class LoopData:
    """The latest execution's loop diagnostics, reduced to what the panel shows.

    Attributes:
        phase: ``running``, ``recovering``, ``complete``, ``input-needed`` or ``stopped``.
        reason: the stopping reason word (None while running).
        iterations: model calls made.
        recovery_attempts: feedback turns used.
        max_recovery_attempts: the loop policy's limit, None without a loop policy.
        doom_streaks: doom-loop streak per tool (None when doom-loop detection is off).
        text_streak: the doom-loop streak of repeated text, if any.
        doom_last: the last doom-loop verdict (``action``, ``detector``, ``streak``…), if any.
    """

    phase: str
    reason: str | None = None
    iterations: int = 0
    recovery_attempts: int = 0
    max_recovery_attempts: int | None = None
    doom_streaks: dict[str, int] | None = None
    text_streak: int | None = None
    doom_last: dict[str, Any] | None = None


@dataclass(frozen=True)
class EvidenceRow:
    """One evidence receipt (``Host.evidence_recent()``).

    Attributes:
        tool: the tool whose outcome it is.
        status: the outcome's status (``succeeded``, ``failed``…).
        id: the evidence record id, None when nothing was stored.
        stored: False when storing failed (the raw result stayed in the history).
        call_id: the tool call's id.
    """

    tool: str
    status: str
    id: str | None
    stored: bool
    call_id: str = ""


@dataclass(frozen=True)
class ContextData:
    """``runner.context_overview()``: the next request against the context window.

    Attributes:
        estimated: estimated tokens of the next request.
        window: the context window (tokens).
        parts: tokens per part (``system``, ``task_view``, ``tools``, ``history``, ``protected``).
        compact_at: fraction of the window at which older turns are compacted.
        compact_at_tokens: that threshold in tokens.
        compactable: tokens of older turns ``/compact`` could replace now.
    """

    estimated: int
    window: int
    parts: dict[str, int] = field(default_factory=dict)
    compact_at: float = 0.8
    compact_at_tokens: int = 0
    compactable: int = 0

    @property
    def fraction(self) -> float:
        """``estimated / window`` (0 when the window is unknown)."""
        return self.estimated / self.window if self.window > 0 else 0.0


@dataclass(frozen=True)
class UsageData:
    """The session's usage so far.

    Attributes:
        tokens_in / tokens_out: input and output tokens.
        cached: input tokens served from a prompt cache.
        calls: model calls counted.
        cost_usd: the cost in US dollars, None when the price is unknown.
        show_cost: ``ui.show_cost``; False hides the cost line.
        estimated: some counts are amos's estimate (no usage reported): shown with ``~``
            as in the status bar.
        tokens_per_s: output tokens per second, or None when not measured.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cached: int = 0
    calls: int = 0
    cost_usd: float | None = None
    show_cost: bool = True
    estimated: bool = False
    tokens_per_s: float | None = None


@dataclass(frozen=True)
class ServerRow:
    """One MCP server: its name, its status text (``running``, ``failed: why`` …) and its
    number of tools (issue 18, "The side panel shows servers")."""

    name: str
    state: str
    status: str
    tools: int = 0


@dataclass(frozen=True)
class PanelData:
    """One snapshot of everything the panel shows; None means "section hidden".

    Attributes:
        task: the task notebook, None when task state is disabled.
        loop: loop diagnostics, None before the session's first run.
        evidence: the latest receipts (oldest first), None when evidence is disabled.
        evidence_total: how many receipts the session keeps in its recent index.
        context: the context figures, None when they could not be measured.
        context_error: why not, in that case.
        usage: the session's usage and cost.
        servers: the MCP servers, None when none is configured.
    """

    task: TaskData | None = None
    loop: LoopData | None = None
    evidence: tuple[EvidenceRow, ...] | None = None
    evidence_total: int = 0
    context: ContextData | None = None
    context_error: str | None = None
    usage: UsageData = field(default_factory=UsageData)
    servers: tuple[ServerRow, ...] | None = None


# ---------------------------------------------------------------------------- reading the host API


def _task_data(notes: Any) -> TaskData | None:
    """The host's task notes view (``Host.task_notes()``) as the panel's rows."""
    if notes is None:
        return None
    rows = tuple(NoteRow(id=n.id, category=n.category, text=n.text, status=n.status, confirmed=n.confirmed)
                 for n in notes.notes)
    return TaskData(revision=notes.revision, notes=rows, actions=notes.actions)


def _loop_data(diag: Any) -> LoopData | None:
    if diag is None:
        return None
    doom = diag.doom_loop or None
    return LoopData(
        phase=diag.phase, reason=diag.reason, iterations=diag.iterations,
        recovery_attempts=diag.recovery_attempts, max_recovery_attempts=diag.max_recovery_attempts,
        doom_streaks={k: v for k, v in (doom.get("streaks") or {}).items() if v} if doom else None,
        text_streak=doom.get("text_streak") if doom else None,
        doom_last=doom.get("last_verdict") if doom else None)


def panel_data(runner: Any) -> PanelData:
    """Read what the panel shows from the host API (nothing else).

    Uses ``task_notes()``, ``get_loop_diagnostics()``, ``evidence_enabled`` and
    ``evidence_recent()``, ``context_overview()``, ``usage`` and ``ui.show_cost``. Never
    raises for a figure it cannot read: that section says so instead.

    Args:
        runner: the :class:`~amos.engine.Host`.
    """
    evidence = None
    recent = runner.evidence_recent() if runner.evidence_enabled else []
    if runner.evidence_enabled:
        evidence = tuple(EvidenceRow(tool=str(r.get("tool", "?")), status=str(r.get("status", "?")),
                                     id=r.get("id"), stored=bool(r.get("stored")),
                                     call_id=str(r.get("call_id", "")))
                         for r in recent[-EVIDENCE_SHOWN:])
    context, context_error = None, None
    try:
        ctx = runner.context_overview()
        context = ContextData(estimated=int(ctx["estimated_tokens"]), window=int(ctx["window_tokens"]),
                              parts=dict(ctx.get("parts") or {}), compact_at=float(ctx.get("compact_at", 0.8)),
                              compact_at_tokens=int(ctx.get("compact_at_tokens", 0)),
                              compactable=int(ctx.get("compactable_tokens", 0)))
    except Exception as exc:  # noqa: BLE001 - the panel reports, it never breaks the app
        context_error = f"{type(exc).__name__}: {exc}"
    usage = runner.usage
    servers = None
    if runner.mcp.configured:
        try:
            servers = tuple(ServerRow(name=st.name, state=st.state, status=st.text, tools=st.tools)
                            for st in runner.mcp.status())
        except Exception as exc:  # noqa: BLE001 - the panel reports, it never breaks the app
            servers = (ServerRow(name="?", state="failed", status=f"cannot read: {type(exc).__name__}"),)
    return PanelData(
        task=_task_data(runner.task_notes()),
        loop=_loop_data(runner.get_loop_diagnostics()),
        evidence=evidence, evidence_total=len(recent),
        context=context, context_error=context_error,
        usage=UsageData(tokens_in=usage.input_tokens, tokens_out=usage.output_tokens, cached=usage.cached_tokens,
                        estimated=usage.estimated, tokens_per_s=usage.output_tokens_per_s,
                        calls=usage.model_calls, cost_usd=usage.cost_usd, show_cost=runner.ui.show_cost),
        servers=servers)


# ---------------------------------------------------------------------------- drawing sections


def _heading(title: str, detail: str = "") -> Content:
    parts: list[str | tuple[str, str]] = [(title, "bold $accent")]
    if detail:
        parts.append((f" · {detail}", "dim"))
    return Content.assemble(*parts, "\n")


def task_content(task: TaskData) -> Content:
    """The task-notes section: revision, then one line per note (category, id, text).

    Args:
        task: the notebook snapshot.
    """
    parts: list[str | tuple[str, str] | Content] = [_heading("TASK NOTES", f"revision {task.revision}")]
    if not task.notes:
        parts.append((f"no notes yet · /context task add {task.revision} objective ID TEXT…", "dim"))
    for note in task.notes[:NOTES_SHOWN]:
        faded = note.status != "active"
        text = note.text if len(note.text) <= _NOTE_CHARS else note.text[:_NOTE_CHARS - 1] + "…"
        parts.append((f"{note.category} ", "dim" if faded else "$primary"))
        parts.append((f"{note.id}: ", "dim" if faded else "bold"))
        parts.append((text, "dim strike" if note.status == "superseded" else "dim" if faded else ""))
        if faded:
            parts.append((f" ({note.status})", "dim italic"))
        if not note.confirmed:
            parts.append((" UNCONFIRMED", "$warning"))
        parts.append("\n")
    if len(task.notes) > NOTES_SHOWN:
        parts.append((f"… {len(task.notes) - NOTES_SHOWN} more · /context task\n", "dim"))
    if task.actions:
        parts.append((f"{task.actions} action receipt{'s' if task.actions != 1 else ''} · /context task", "dim"))
    return Content.assemble(*parts).rstrip()


_PHASE_STYLES = {"running": "$primary", "recovering": "$warning", "complete": "$success",
                 "input-needed": "$accent", "stopped": "$warning"}


def loop_content(loop: LoopData | None) -> Content:
    """The loop section: phase and reason, model calls and recovery, doom-loop streaks.

    Args:
        loop: the diagnostics snapshot, None before the first run.
    """
    if loop is None:
        return Content.assemble(_heading("LOOP"), ("no run yet in this session", "dim"))
    parts: list[str | tuple[str, str] | Content] = [
        _heading("LOOP"), ("phase ", "dim"), (loop.phase, f"bold {_PHASE_STYLES.get(loop.phase, '')}")]
    if loop.reason:
        parts += [(" · ", "dim"), loop.reason]
    parts += ["\n", f"{loop.iterations} model call{'s' if loop.iterations != 1 else ''} · "]
    if loop.max_recovery_attempts is None:
        parts.append(("no loop policy", "dim"))
    else:
        spent = loop.recovery_attempts >= loop.max_recovery_attempts > 0
        parts.append((f"recovery {loop.recovery_attempts}/{loop.max_recovery_attempts}",
                      "$warning" if spent else ""))
    if loop.doom_streaks is not None:
        streaks = [f"{tool} ×{n}" for tool, n in sorted(loop.doom_streaks.items())]
        if loop.text_streak:
            streaks.append(f"text ×{loop.text_streak}")
        parts += ["\n", ("doom-loop streaks ", "dim"), ", ".join(streaks) or "none"]
        last = loop.doom_last
        parts += ["\n", ("doom-loop verdict ", "dim")]
        if last:
            action = str(last.get("action", "?"))
            parts.append((action, "$warning" if action in ("block", "stop", "escalate") else ""))
            parts.append((f" ({last.get('detector', '?')}, streak {last.get('streak', '?')})", "dim"))
        else:
            parts.append(("none", "dim"))
    return Content.assemble(*parts)


def evidence_content(rows: tuple[EvidenceRow, ...], total: int,
                     short: Callable[[str], str] | None = None) -> Content:
    """The evidence section: the latest receipts, the ones NOT stored flagged.

    Args:
        short: shortens an id for display (the app's short ids); None shows it whole.
        rows: the receipts shown, oldest first.
        total: receipts in the session's recent index.
    """
    detail = f"last {len(rows)} of {total}" if total > len(rows) else ""
    parts: list[str | tuple[str, str] | Content] = [_heading("EVIDENCE", detail)]
    if not rows:
        parts.append(("no tool outcomes stored yet", "dim"))
    for row in rows:
        ok = row.status == "succeeded"
        parts.append((f"{STATUS_GLYPHS.get(row.status, '?')} ", "$success" if ok else "$warning"))
        parts.append((row.tool, "bold"))
        parts.append(f" {row.status}")
        if row.stored and row.id:
            parts += ["\n", (f"  {short(row.id) if short else row.id}", "dim")]
        else:
            parts += ["\n", ("  NOT stored", "bold $error"), (" · raw result kept", "dim")]
        parts.append("\n")
    return Content.assemble(*parts).rstrip()


def context_heading(context: ContextData | None, error: str | None = None) -> Content:
    """The context section's first lines: estimate against the window, and its share.

    Args:
        context: the figures, None when they could not be measured.
        error: why they could not.
    """
    if context is None:
        return Content.assemble(_heading("CONTEXT"), (f"unavailable: {error or 'unknown'}", "dim"))
    percent = int(context.fraction * 100)
    return Content.assemble(_heading("CONTEXT"),
                            f"~{format_tokens(context.estimated)} / {format_tokens(context.window)} tokens ",
                            (f"({percent}%)", "dim"))


def context_body(context: ContextData) -> Content:
    """The context section under the bar: each part, and when compaction happens.

    Args:
        context: the figures.
    """
    p = context.parts
    parts: list[str | tuple[str, str]] = [
        ("system ", "dim"), format_tokens(p.get("system", 0)),
        *([(" · task ", "dim"), format_tokens(p["task_view"])] if p.get("task_view") else []),
        (" · tools ", "dim"), format_tokens(p.get("tools", 0)), "\n",
        ("history ", "dim"), format_tokens(p.get("history", 0)),
        (" (protected ", "dim"), format_tokens(p.get("protected", 0)), (")", "dim"), "\n",
        ("compacts at ", "dim"), f"~{format_tokens(context.compact_at_tokens)} ({context.compact_at:.0%})"]
    if context.compactable:
        parts += ["\n", (f"/compact can free ~{format_tokens(context.compactable)}", "dim")]
    return Content.assemble(*parts)


_SERVER_STYLE = {"running": "$success", "failed": "$error", "starting": "$warning"}


def servers_content(rows: tuple[ServerRow, ...]) -> Content:
    """The MCP section: one line per server, its status and its tool count (``/mcp`` shows more)."""
    parts: list[str | tuple[str, str] | Content] = [_heading("MCP", f"{len(rows)} server{'s' if len(rows) != 1 else ''}")]
    for index, row in enumerate(rows):
        parts += ["\n" if index else "", row.name, " ", (row.status, _SERVER_STYLE.get(row.state, "dim"))]
        if row.state == "running":
            parts.append((f" · {row.tools} tool{'s' if row.tools != 1 else ''}", "dim"))
    return Content.assemble(*parts)


def usage_content(usage: UsageData) -> Content:
    """The usage section: tokens in/out, model calls, and the cost (or "unknown price").

    Args:
        usage: the session's usage; ``show_cost`` False leaves the cost line out.
    """
    about = "~" if usage.estimated else ""
    parts: list[str | tuple[str, str] | Content] = [
        _heading("USAGE"), f"{about}{format_tokens(usage.tokens_in)} in / {about}{format_tokens(usage.tokens_out)} out",
        (" tokens", "dim")]
    if usage.cached:
        parts.append((f" ({format_tokens(usage.cached)} cached)", "dim"))
    if usage.tokens_per_s is not None:
        parts += ["\n", (f"{about}{format_rate(usage.tokens_per_s)} tok/s", "dim")]
    parts += ["\n", (f"{usage.calls} model call{'s' if usage.calls != 1 else ''}", "dim")]
    if usage.show_cost:
        parts += ["\n", ("cost: ", "dim")]
        if usage.cost_usd is None:
            parts.append(("unknown price" if usage.calls else "none yet", "italic"))
        else:
            parts.append(f"${usage.cost_usd:.4f}" if usage.cost_usd < 0.01 else f"${usage.cost_usd:.2f}")
    return Content.assemble(*parts)


class ContextBar(Widget):
    """A one-line bar: the share of the window used, the compaction threshold marked ``┃``.

    The fill takes the ``-near`` class at three quarters of the threshold and ``-over``
    past it (coloured by ``side_panel.tcss``).
    """

    fraction: reactive[float] = reactive(0.0)
    threshold: reactive[float] = reactive(0.8)

    def render(self) -> Content:
        """Draw the bar across the widget's width."""
        width = max(self.size.width, 4)
        filled = min(width, round(max(0.0, self.fraction) * width))
        mark = min(width - 1, max(0, round(self.threshold * width)))
        cells = []
        for x in range(width):
            if x == mark and x >= filled:
                cells.append(("┃", "$warning"))
            else:
                cells.append(("█", "") if x < filled else ("░", "dim"))
        return Content.assemble(*cells)

    def watch_fraction(self, fraction: float) -> None:
        """Colour the bar by how close the request is to compaction."""
        self.set_class(self.threshold * 0.75 <= fraction < self.threshold, "-near")
        self.set_class(fraction >= self.threshold, "-over")


class SidePanel(VerticalScroll, can_focus=False):
    """The toggleable panel beside the conversation; :meth:`show` draws a snapshot."""

    def compose(self) -> ComposeResult:
        """One block per section (hidden until :meth:`show` says it applies), then the footer."""
        yield Static(id="panel-task", classes="panel-section")
        yield Static(id="panel-loop", classes="panel-section")
        yield Static(id="panel-evidence", classes="panel-section")
        with Vertical(id="panel-context", classes="panel-section"):
            yield Static(id="panel-context-head")
            yield ContextBar(id="panel-context-bar")
            yield Static(id="panel-context-body")
        yield Static(id="panel-usage", classes="panel-section")
        yield Static(id="panel-mcp", classes="panel-section")
        yield Static(Content.styled(FOOTER, "dim"), id="panel-footer")

    def _section(self, key: str, content: Content | None) -> None:
        widget = self.query_one(f"#panel-{key}", Static)
        widget.display = content is not None
        if content is not None:
            widget.update(content)

    def show(self, data: PanelData) -> None:
        """Draw ``data``; sections whose feature is off (None) are hidden.

        Args:
            data: a snapshot from :func:`panel_data`.
        """
        self.data = data
        self._section("task", task_content(data.task) if data.task is not None else None)
        self._section("loop", loop_content(data.loop))
        ids = getattr(self.app, "evidence_ids", None)
        self._section("evidence", evidence_content(data.evidence, data.evidence_total,
                                                   ids.short if ids is not None else None)
                      if data.evidence is not None else None)
        self.query_one("#panel-context-head", Static).update(context_heading(data.context, data.context_error))
        bar = self.query_one(ContextBar)
        bar.display = data.context is not None
        body = self.query_one("#panel-context-body", Static)
        body.display = data.context is not None
        if data.context is not None:
            bar.threshold = data.context.compact_at
            bar.fraction = data.context.fraction
            body.update(context_body(data.context))
        self._section("usage", usage_content(data.usage))
        self._section("mcp", servers_content(data.servers) if data.servers is not None else None)

    def section_text(self, key: str) -> str | None:
        """The plain text a section shows, or None when it is hidden (for tests and tools).

        Args:
            key: ``task``, ``loop``, ``evidence``, ``context``, ``usage`` or ``mcp``.
        """
        widget = self.query_one(f"#panel-{key}")
        if not widget.display:
            return None
        if key == "context":
            return "\n".join(str(s.content) for s in widget.query(Static))
        return str(widget.content)  # type: ignore[attr-defined]
