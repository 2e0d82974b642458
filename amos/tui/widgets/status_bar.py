"""The one-line status bar: run state and loop phase, model, usage, last verdict,
session (and whether it is saved), workspace."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rich.cells import cell_len
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from amos.render import phase_for, verdict_glyph

CSS_PATH = Path(__file__).with_suffix(".tcss")


def short_model(spec: str) -> str:
    """``PROVIDER:MODEL`` for people: a scripted model shows its file name only.

    Args:
        spec: the model spec, e.g. ``scripted:/long/path/script.json``.
    """
    provider, sep, rest = spec.partition(":")
    if sep and ("/" in rest or os.sep in rest):
        return f"{provider}:{Path(rest).name}"
    return spec


def short_path(path: str | Path, limit: int = 40) -> str:
    """``path`` with the home folder as ``~`` and the middle elided past ``limit`` characters."""
    text = str(path)
    home = str(Path.home())
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        text = "~" + text[len(home):]
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[: keep // 3] + "…" + text[-(keep - keep // 3):]


SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
"""Frames of the running glyph; the app advances :attr:`Status.frame` with a timer."""

_SEPARATOR = " │ "


def format_elapsed(seconds: float) -> str:
    """Whole seconds for the status bar: ``3s``, ``1m05s``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest:02d}s"


@dataclass(frozen=True)
class Status:
    """What the status bar shows.

    Attributes:
        model: the model spec in force.
        session_id: the session id.
        session_name: the session's name, shown instead of the id when set.
        workspace: the workspace root.
        state: ``idle``, ``running``, ``cancelling`` or ``approval``.
        phase: the loop phase (spec/stop-receipts.md "Loop diagnostics"; see
            :func:`status_phase`), or None before the session's first run.
        step: the current step (model call) of the running execution, or 0.
        max_steps: the step cap in force, or 0 when unknown.
        last_verdict: verdict of the last finished run, if any.
        elapsed_s: seconds since the run started (shown while it runs), or None.
        frame: spinner frame shown while running (advanced by a timer).
        tokens_in / tokens_out: the session's usage so far (tokens).
        cost_usd: the session's cost so far, or None (unknown price, or ``ui.show_cost``
            off).
        saved: ``saved``, ``unsaved`` (changes not written, see
            :class:`amos.tui.texts.SaveTracker`), or None (nothing to say yet).
        check: the completion check in force (``command `pytest -q```…), ``none`` or "".
        check_source: where it came from: ``flag``, ``session``, ``config`` or ``none``.
        tokens_estimated: some counts are amos's estimate (the provider reported no
            usage): shown with ``~``.
        tokens_per_s: the session's output tokens per second (``Usage.output_tokens_per_s``),
            or None when not measured (issue 23); while a reply streams, its live estimate.
        rate_live: ``tokens_per_s`` is the live estimate of the reply streaming now
            (:class:`amos.tui.live_rate.LiveRate`): shown with ``~`` even before any
            call has finished.
    """

    model: str = ""
    session_id: str = ""
    session_name: str | None = None
    workspace: str = ""
    state: str = "idle"
    step: int = 0
    max_steps: int = 0
    last_verdict: str | None = None
    elapsed_s: float | None = None
    frame: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    phase: str | None = None
    saved: str | None = None
    check: str = ""
    check_source: str = "none"
    tokens_estimated: bool = False
    tokens_per_s: float | None = None
    rate_live: bool = False


def status_phase(state: str, announced: str | None, last_verdict: str | None) -> str | None:
    """The loop phase the status bar shows.

    While a run is active: ``input-needed`` when it waits for an approval,
    ``recovering`` when the latest phase-announcing ``Notice`` of the run said so
    (``amos.events.Notice.phase``), else ``running``. Once it ended: the phase its
    loop diagnostics end in (:func:`amos.render.phase_for` of the last
    verdict: ``complete``, ``input-needed`` or ``stopped``), so the bar and
    ``/context loop`` agree.

    Args:
        state: the app's run state (``idle``, ``running``, ``cancelling``, ``approval``).
        announced: the latest phase a ``Notice`` of the active run announced, if any.
        last_verdict: the verdict of the session's last finished run, if any.

    Returns:
        The phase, or None when idle before the session's first run.
    """
    if state == "approval":
        return "input-needed"
    if state in ("running", "cancelling"):
        return "recovering" if announced == "recovering" else "running"
    return phase_for(last_verdict) if last_verdict else None


def format_tokens(tokens: int) -> str:
    """A token count for people: ``950``, ``12.3k``, ``32k``, ``1.2M``."""
    if tokens < 1000:
        return str(tokens)
    value, unit = (tokens / 1_000_000, "M") if tokens >= 1_000_000 else (tokens / 1000, "k")
    return f"{value:.1f}".removesuffix(".0") + unit



def _usage_variants(s: Status) -> list[str]:
    if not (s.tokens_in or s.tokens_out):
        if s.rate_live and s.tokens_per_s is not None:  # the first reply, still streaming
            live = f"~{format_rate(s.tokens_per_s)} tok/s"
            return [live, live, live, ""]  # as short as usage gets: it goes only where usage would
        return [""]
    cost = f" · ${s.cost_usd:.2f}" if s.cost_usd is not None and s.cost_usd >= 0.01 else \
        f" · ${s.cost_usd:.4f}" if s.cost_usd is not None else ""
    about = "~" if s.tokens_estimated else ""
    full = f"{about}{format_tokens(s.tokens_in)} in / {about}{format_tokens(s.tokens_out)} out tok{cost}"
    short = f"{about}{format_tokens(s.tokens_in + s.tokens_out)} tok{cost}"
    if s.tokens_per_s is None:
        return [full, short, ""]
    rate = f" · {'~' if s.rate_live else about}{format_rate(s.tokens_per_s)} tok/s"
    return [full + rate, short + rate, short, ""]


def format_rate(per_s: float) -> str:
    """Tokens per second for people: ``8.4``, ``35``, ``1.2k``."""
    if per_s >= 1000:
        return format_tokens(int(per_s))
    return f"{per_s:.1f}" if per_s < 10 else f"{per_s:.0f}"


def _check_variants(s: Status) -> list[str]:
    """The completion check in force and its source, richest first."""
    if not s.check or s.check == "none" or s.check_source == "none":
        return [""]  # nothing to say: the receipt says "no completion check" when a run ends
    summary = s.check if len(s.check) <= 28 else s.check[:27] + "…"
    return [f"check {summary} ({s.check_source})", f"check ({s.check_source})", ""]


def _state_variants(s: Status) -> list[str]:
    """The run-state segment, richest first: an idle bar may drop its phase to fit."""
    if s.state == "running":
        state = f"{SPINNER[s.frame % len(SPINNER)]} {'recovering' if s.phase == 'recovering' else 'running'}"
    else:
        state = {"cancelling": "● cancelling…", "approval": "⏸ input-needed"}.get(s.state, "○ idle")
    if s.state in ("running", "approval") and s.step:
        state += f" · step {s.step}/{s.max_steps}" if s.max_steps else f" · step {s.step}"
    if s.state in ("running", "cancelling") and s.elapsed_s is not None:
        state += f" · {format_elapsed(s.elapsed_s)}"
    if s.state == "idle" and s.phase:
        return [f"{state} · {s.phase}", state]
    return [state]


def _saved_variants(s: Status) -> list[str]:
    if s.saved == "unsaved":  # it asks for an action: kept until the very last step
        return ["unsaved", "unsaved", ""]
    return ["saved", "", ""] if s.saved == "saved" else [""]


_SHRINK_ORDER = (7, 7, 7, 7, 6, 2, 4, 5, 3, 0, 5, 5, 4, 3, 3, 2, 6)
"""Which segment gives way next (index into the segments of :func:`status_text`): the
workspace shortens then goes, a "saved" marker goes ("unsaved" stays), the usage
shortens, the check drops its command (keeping its source), the "session" label goes,
the "last" label goes, an idle bar drops its phase, the session shortens then goes, the
check goes, the verdict shrinks to its glyph, the usage goes, and last of all "unsaved"
goes."""


def status_text(s: Status, width: int) -> Content:
    """The status line for ``width`` cells, shrinking the least important parts first.

    Segments, most important first: run state (loop phase, step, elapsed time), model,
    usage (tokens and cost), last verdict, the completion check in force, session (name
    or id), saved marker, workspace. When they do not fit they give way in :data:`_SHRINK_ORDER`; whatever
    still overflows ends with an ellipsis.

    Args:
        s: what to show.
        width: the cells available.
    """
    session = s.session_name or s.session_id
    glyph = verdict_glyph(s.last_verdict) if s.last_verdict else ""
    # Variants from richest to poorest ("" drops the segment) and the style of each segment.
    segments: list[tuple[list[str], str]] = [
        (_state_variants(s), "bold"),
        ([short_model(s.model)], ""),
        (_usage_variants(s), "dim"),
        ([f"last {glyph} {s.last_verdict}", f"{glyph} {s.last_verdict}", f"last {glyph}"]
         if s.last_verdict else [""], ""),
        (_check_variants(s), "dim"),
        ([f"session {session}", session, short_path(session, 16), ""] if session else [""], "dim"),
        (_saved_variants(s), "bold $warning" if s.saved == "unsaved" else "dim"),
        ([short_path(s.workspace, n) for n in (len(s.workspace), 24, 14)] + [""] if s.workspace else [""], "dim"),
    ]
    chosen = [0] * len(segments)

    def length() -> int:
        parts = [variants[i] for (variants, _), i in zip(segments, chosen, strict=True) if variants[i]]
        return cell_len(" " + _SEPARATOR.join(parts))

    for index in _SHRINK_ORDER:
        if length() <= width:
            break
        chosen[index] = min(chosen[index] + 1, len(segments[index][0]) - 1)
    workspace = segments[-1][0]
    if s.workspace and chosen[-1] > 0:  # a shortened (or dropped) workspace takes all the room left
        workspace[-1] = ""
        chosen[-1] = len(workspace) - 1
        room = width - length() - cell_len(_SEPARATOR)
        if room >= 10:
            workspace[-1] = short_path(s.workspace, room)
    pieces: list[tuple[str, str]] = []
    for (variants, style), i in zip(segments, chosen, strict=True):
        if variants[i]:
            pieces += [(" " if not pieces else _SEPARATOR, "bold" if not pieces else ""), (variants[i], style)]
    return Content.assemble(*pieces)


class StatusBar(Static):
    """Docked at the bottom; set :attr:`status` to redraw."""

    status: reactive[Status] = reactive(Status, layout=False)

    def render(self) -> Content:
        """Draw the current :class:`Status` as one line that fits the bar."""
        return status_text(self.status, self.size.width or 80)

    def watch_status(self, status: Status) -> None:
        """Reflect the run state in a CSS class (``-running``, ``-idle``…)."""
        for state in ("idle", "running", "cancelling", "approval"):
            self.set_class(status.state == state, f"-{state}")
