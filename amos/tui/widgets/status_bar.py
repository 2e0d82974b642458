"""The one-line status bar: run state, model, last verdict, session, workspace."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from amos.policy.stop import verdict_glyph

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
        step: the current step (model call) of the running execution, or 0.
        max_steps: the step cap in force, or 0 when unknown.
        last_verdict: verdict of the last finished run, if any.
        elapsed_s: seconds since the run started (shown while it runs), or None.
        frame: spinner frame shown while running (advanced by a timer).
        tokens_in / tokens_out: the session's usage so far (tokens).
        cost_usd: the session's cost so far, or None (unknown price, or ``ui.show_cost``
            off).
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


def _count(tokens: int) -> str:
    return f"{tokens / 1_000_000:.1f}M" if tokens >= 1_000_000 else f"{tokens / 1000:.1f}k" if tokens >= 1000 \
        else str(tokens)


def _usage_variants(s: Status) -> list[str]:
    if not (s.tokens_in or s.tokens_out):
        return [""]
    cost = f" · ${s.cost_usd:.2f}" if s.cost_usd is not None and s.cost_usd >= 0.01 else \
        f" · ${s.cost_usd:.4f}" if s.cost_usd is not None else ""
    full = f"{_count(s.tokens_in)} in / {_count(s.tokens_out)} out tok{cost}"
    return [full, f"{_count(s.tokens_in + s.tokens_out)} tok{cost}", ""]


def _state_text(s: Status) -> str:
    if s.state == "running":
        state = f"{SPINNER[s.frame % len(SPINNER)]} running"
    else:
        state = {"cancelling": "● cancelling…", "approval": "⏸ approval"}.get(s.state, "○ idle")
    if s.state in ("running", "approval") and s.step:
        state += f" · step {s.step}/{s.max_steps}" if s.max_steps else f" · step {s.step}"
    if s.state in ("running", "cancelling") and s.elapsed_s is not None:
        state += f" · {format_elapsed(s.elapsed_s)}"
    return state


_SHRINK_ORDER = (5, 5, 5, 5, 2, 4, 3, 4, 4, 3, 3, 2)
"""Which segment gives way next (index into the segments of :func:`status_text`): the
workspace shortens then goes, the usage shortens, the "session" label goes, the "last"
label goes, the session shortens then goes, the verdict shrinks to its glyph, and the
usage goes."""


def status_text(s: Status, width: int) -> Text:
    """The status line for ``width`` cells, shrinking the least important parts first.

    Segments, most important first: run state (step, elapsed time), model, usage
    (tokens and cost), last verdict, session (name or id), workspace. When they do not fit they give way in
    :data:`_SHRINK_ORDER`; whatever still overflows ends with an ellipsis.

    Args:
        s: what to show.
        width: the cells available.
    """
    session = s.session_name or s.session_id
    glyph = verdict_glyph(s.last_verdict) if s.last_verdict else ""
    # Variants from richest to poorest ("" drops the segment) and the style of each segment.
    segments: list[tuple[list[str], str]] = [
        ([_state_text(s)], "bold"),
        ([short_model(s.model)], ""),
        (_usage_variants(s), "dim"),
        ([f"last {glyph} {s.last_verdict}", f"{glyph} {s.last_verdict}", f"last {glyph}"]
         if s.last_verdict else [""], ""),
        ([f"session {session}", session, short_path(session, 16), ""] if session else [""], "dim"),
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
    text = Text(no_wrap=True, overflow="ellipsis")
    first = True
    for (variants, style), i in zip(segments, chosen, strict=True):
        if not variants[i]:
            continue
        text.append(" " if first else _SEPARATOR, style="bold" if first else "")
        text.append(variants[i], style=style)
        first = False
    return text


class StatusBar(Static):
    """Docked at the bottom; set :attr:`status` to redraw."""

    status: reactive[Status] = reactive(Status, layout=False)

    def render(self) -> Text:
        """Draw the current :class:`Status` as one line that fits the bar."""
        return status_text(self.status, self.size.width or 80)

    def watch_status(self, status: Status) -> None:
        """Reflect the run state in a CSS class (``-running``, ``-idle``…)."""
        for state in ("idle", "running", "cancelling", "approval"):
            self.set_class(status.state == state, f"-{state}")
