"""The run options of the command line, as one value (:class:`RunFlags`).

``amos``, ``amos run`` and ``amos resume`` take the same options; each command collects
them into a :class:`RunFlags` once and hands that on. Cheap to import (no engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from amos.engine.options import RunOptions
from amos.errors import UsageError


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

    def given(self) -> list[str]:
        """The flags given (``--model``, ``--yes``…), in declaration order."""
        return [f"--{name.replace('_', '-')}" for name in self.__dataclass_fields__ if getattr(self, name)]

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
        return RunOptions(config_path=self.config, model=model, base_url=self.base_url, workspace=self.workspace,
                          session=session or self.session, max_steps=self.max_steps, verify=self.verify,
                          no_verify=self.no_verify,
                          yes=self.yes, no_save=self.no_save, demo=demo, interactive=interactive,
                          require_model=require_model, cwd=Path.cwd(), ask=ask and not self.no_ask,
                          sandbox=self.sandbox, plan=self.plan, allow=tuple(self.allow), deny=tuple(self.deny))
