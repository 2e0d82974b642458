"""The command sandbox: bubblewrap on Linux (issue 19).

- :mod:`amos.sandbox.modes`: the modes, :class:`SandboxPolicy` and
  :func:`sandbox_policy` (config → policy, with amos's own folders always hidden).
- :mod:`amos.sandbox.probe`: :func:`probe_sandbox`, does bwrap work here (run once,
  cached per process), with a reason and how to install it when it does not.
- :mod:`amos.sandbox.bwrap`: :class:`SandboxLauncher` and :func:`bwrap_argv`, a shell
  command → the bwrap command line.
- :mod:`amos.sandbox.denials`: :func:`denial_note`, the note a blocked command's
  result gets.

Importing this package has no side effects.
"""

from __future__ import annotations

from amos.sandbox.bwrap import Launch, SandboxLauncher, bwrap_argv
from amos.sandbox.denials import denial_causes, denial_note
from amos.sandbox.modes import (
    DEFAULT_HIDDEN_PATHS,
    DEFAULT_MODE,
    MODES,
    SandboxMode,
    SandboxPolicy,
    always_hidden_paths,
    normalise_path,
    sandbox_policy,
)
from amos.sandbox.probe import SandboxProbe, probe_sandbox

__all__ = [
    "DEFAULT_HIDDEN_PATHS",
    "DEFAULT_MODE",
    "MODES",
    "Launch",
    "SandboxLauncher",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxProbe",
    "always_hidden_paths",
    "bwrap_argv",
    "denial_causes",
    "denial_note",
    "normalise_path",
    "probe_sandbox",
    "sandbox_policy",
]
