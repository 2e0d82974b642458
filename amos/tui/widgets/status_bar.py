"""The one-line status bar: model, session, workspace, run state, last verdict."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Status:
    """What the status bar shows.

    Attributes:
        model: the model spec in force.
        session_id: the session id.
        workspace: the workspace root.
        state: ``idle``, ``running``, ``cancelling`` or ``approval``.
        step: the current step (model call) of the running execution, or 0.
        max_steps: the step cap in force, or 0 when unknown.
        last_verdict: verdict of the last finished run, if any.
    """

    model: str = ""
    session_id: str = ""
    workspace: str = ""
    state: str = "idle"
    step: int = 0
    max_steps: int = 0
    last_verdict: str | None = None


class StatusBar(Static):
    """Docked at the bottom; set :attr:`status` to redraw."""

    status: reactive[Status] = reactive(Status, layout=False)

    def render(self) -> Text:
        """Draw the current :class:`Status` as one line."""
        s = self.status
        text = Text(no_wrap=True, overflow="ellipsis")
        state = {"running": "● running", "cancelling": "● cancelling…", "approval": "⏸ approval"}.get(
            s.state, "○ idle")
        if s.state in ("running", "approval") and s.step:
            state += f" · step {s.step}/{s.max_steps}" if s.max_steps else f" · step {s.step}"
        text.append(f" {state} ", style="bold")
        text.append(f"│ {short_model(s.model)} ")
        if s.last_verdict:
            text.append(f"│ last {verdict_glyph(s.last_verdict)} {s.last_verdict} ")
        text.append(f"│ session {s.session_id} ", style="dim")
        text.append(f"│ {short_path(s.workspace, 32)}", style="dim")
        return text

    def watch_status(self, status: Status) -> None:
        """Reflect the run state in a CSS class (``-running``, ``-idle``…)."""
        for state in ("idle", "running", "cancelling", "approval"):
            self.set_class(status.state == state, f"-{state}")
