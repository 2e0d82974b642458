"""What a front end asks the host for: :class:`RunOptions`, and the bundled demo.

spec/cli.md: flags given again override the settings a session remembers; the model
is ``--model``/``--script`` > session > config ``model`` > nothing (no silent fallback).
"""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

NO_MODEL_HELP = (
    "no model chosen: pass --model PROVIDER:MODEL (e.g. openai:gpt-4o-mini, "
    "anthropic:claude-sonnet-4-5) or --script PATH, or set \"model\" in the config "
    "(`amos config path` shows where); `amos run --demo` works offline with no key"
)


HUMAN_VERIFY = "human"
"""``--verify human``: a person confirms completion instead of (or besides) a command."""


@dataclass
class RunOptions:
    """What the user asked for on the command line or in the TUI.

    Attributes:
        config_path: ``--config``.
        model: ``--model`` (``--script PATH`` is passed here as ``scripted:PATH``).
        base_url: ``--base-url``.
        workspace: ``--workspace``.
        session: ``--session`` id or name to resume.
        max_steps: ``--max-steps``.
        verify: ``--verify`` completion-check command (``human``: a person confirms).
        no_verify: ``--no-verify``: forget the check the session remembers.
        yes: ``--yes`` (never remembered by the session).
        no_save: ``--no-save``.
        demo: run the bundled demo (``amos run --demo``; the TUI's offline mode).
        interactive: a person can answer approvals now (TUI).
        require_model: when no model is chosen, fail (``amos run``) instead of demo.
        cwd: folder relative flags are resolved against.
        ask: a person answers approvals now in the shell (``amos run`` on a terminal,
            without ``--no-ask``); unlike ``interactive`` the session is saved as by
            ``amos run``.
        sandbox: ``--sandbox MODE`` (None: ``sandbox.mode``).
        plan: ``--plan``: a plan run (read-only sandbox, write tools denied).
        allow / deny: ``--allow`` / ``--deny`` permission rules for this process only.
    """

    config_path: Path | None = None
    model: str | None = None
    base_url: str | None = None
    workspace: Path | None = None
    session: str | None = None
    max_steps: int | None = None
    verify: str | None = None
    no_verify: bool = False
    yes: bool = False
    no_save: bool = False
    demo: bool = False
    interactive: bool = False
    require_model: bool = True
    cwd: Path = field(default_factory=Path.cwd)
    ask: bool = False
    sandbox: str | None = None
    plan: bool = False
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@dataclass
class Opened:
    """What :func:`amos.engine.open_host` prepared, besides the host itself.

    Attributes:
        demo: the host runs the offline demo.
        demo_workspace: the temporary copy of the demo workspace, if one was made.
        warnings: one line each, shown before anything else (config, journal repairs).
    """

    demo: bool = False
    demo_workspace: Path | None = None
    warnings: list[str] = field(default_factory=list)


def demo_script_path() -> Path:
    """The bundled demo script (package data)."""
    return Path(str(resources.files("amos.demo").joinpath("script.json")))


def demo_workspace_source() -> Path:
    """The bundled demo workspace (package data, never modified)."""
    return Path(str(resources.files("amos.demo").joinpath("workspace")))


DEMO_COPIES_KEPT = 10
"""How many demo copies ``<data>/demo`` keeps (the newest); older ones are deleted."""


def copy_demo_workspace() -> Path:
    """Copy the demo workspace to a new folder under ``<data>/demo`` and return it; all
    but the newest :data:`DEMO_COPIES_KEPT` copies there are deleted (issue 21)."""
    from amos import paths

    root = paths.ensure_dir(paths.demo_dir())
    _prune_demo_copies(root, DEMO_COPIES_KEPT - 1)
    target = Path(tempfile.mkdtemp(prefix="amos-demo-", dir=root))
    shutil.copytree(demo_workspace_source(), target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def _prune_demo_copies(root: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest ``amos-demo-*`` folders of ``root`` (best effort)."""
    def changed(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    copies = sorted((p for p in root.glob("amos-demo-*") if p.is_dir() and not p.is_symlink()),
                    key=changed, reverse=True)
    for old in copies[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def demo_verify_command() -> str:
    """The demo's completion check: its unittest suite with the Python running amos."""
    return f"{shlex.quote(sys.executable)} -m unittest"
