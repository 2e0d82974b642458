"""Opening a host from options: the names scripts and examples import.

A thin alias of :mod:`amos.engine` (``open_runner`` is :func:`amos.engine.open_host`),
kept so ``from amos.host import RunOptions, open_runner`` goes on working.
"""

from __future__ import annotations

from amos.engine.opening import load_host_config, open_host, open_store
from amos.engine.options import (
    NO_MODEL_HELP,
    Opened,
    RunOptions,
    copy_demo_workspace,
    demo_script_path,
    demo_verify_command,
    demo_workspace_source,
)
from amos.errors import ConfigError

open_runner = open_host
"""Alias of :func:`amos.engine.open_host`."""

__all__ = ["RunOptions", "Opened", "open_runner", "open_host", "open_store", "load_host_config", "ConfigError",
           "NO_MODEL_HELP", "demo_script_path", "demo_workspace_source", "demo_verify_command",
           "copy_demo_workspace"]
