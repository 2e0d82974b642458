"""The run options of the command line, as one value (:class:`RunFlags`).

``amos``, ``amos run`` and ``amos resume`` take the same options; each command collects
them into a :class:`RunFlags` once and hands that on. Cheap to import (no engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from amos.engine.options import RunOptions
from amos.errors import UsageError

_FLAG_NAMES = {"continue_last": "--continue"}
"""Fields whose flag is not their name with dashes."""


@dataclass(frozen=True)
class RunFlags:
    """The run options every command that opens a host takes (``amos``, ``amos run``,
    ``amos resume``), as typed on the command line."""

    config: Path | None = None
    model: str | None = None
    base_url: str | None = None
    script: Path | None = None
    workspace: Path | None = None
    session: str | None = None
    max_steps: int | None = None
    verify: str | None = None
    no_verify: bool = False
    yes: bool = False
    no_save: bool = False
    verbose: bool = False
    sandbox: str | None = None
    plan: bool = False
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    no_ask: bool = False
    continue_last: bool = False
    """``-c/--continue``: the most recent session of this workspace (issue 21)."""

    def given(self) -> list[str]:
        """The flags given (``--model``, ``--yes``…), in declaration order."""
        return [_FLAG_NAMES.get(name, f"--{name.replace('_', '-')}") for name in self.__dataclass_fields__
                if getattr(self, name)]

    def continued_session(self) -> str | None:
        """With ``-c/--continue``: the id of the most recent session whose workspace is
        this one (``--workspace``, else the current folder); else None.

        Raises:
            UsageError: ``-c`` with ``--session``, or no saved session of this workspace.
        """
        if not self.continue_last:
            return None
        if self.session:
            raise UsageError("-c/--continue picks the latest session of this workspace; "
                             "it cannot be combined with --session")
        from amos.engine import Library

        here = (self.workspace or Path.cwd()).expanduser().resolve()
        library, _ = Library.open(self.config)
        for row in library.sessions():  # newest first
            if row.workspace and not row.broken and Path(row.workspace).resolve() == here:
                return row.id
        raise UsageError(f"no saved session of this workspace ({here}) to continue; "
                         "`amos sessions list` shows them all, `--session latest` takes the newest anywhere")

    def options(self, *, interactive: bool = False, require_model: bool = True, demo: bool = False,
                session: str | None = None, ask: bool = False) -> RunOptions:
        """These flags as :class:`RunOptions` for the host (``ask``: a person at this
        terminal answers approvals, unless ``--no-ask``).

        Raises:
            UsageError: ``--model`` and ``--script`` together.
        """
        model = self.model
        if model and self.script:
            raise UsageError("--model and --script are exclusive; --script PATH means --model scripted:PATH")
        if self.script is not None:
            model = f"scripted:{self.script}"
        session = session or self.continued_session() or self.session
        return RunOptions(config_path=self.config, model=model, base_url=self.base_url, workspace=self.workspace,
                          session=session, max_steps=self.max_steps, verify=self.verify,
                          no_verify=self.no_verify,
                          yes=self.yes, no_save=self.no_save, demo=demo, interactive=interactive,
                          require_model=require_model, cwd=Path.cwd(), ask=ask and not self.no_ask,
                          sandbox=self.sandbox, plan=self.plan, allow=tuple(self.allow), deny=tuple(self.deny))
