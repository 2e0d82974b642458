"""Every filesystem location amos uses, one function per path (STYLE.md §7).

All paths derive from one root: ``$AMOS_HOME`` when it is set (``$AMOS_HOME/config``
and ``$AMOS_HOME/data``), otherwise platformdirs' ``user_config_dir("amos")`` and
``user_data_dir("amos")`` (DESIGN.md, "Storage").

These functions only compute paths; nothing here touches the disk except
:func:`ensure_dir`, which creates a folder (mode 0700) when asked. Importing this module
has no side effects.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

if TYPE_CHECKING:
    from amos.config import AmosConfig

APP_NAME = "amos"
USER_CONFIG_NAME = "config.json"
PROJECT_CONFIG_NAME = "amos.json"


def amos_home() -> Path | None:
    """The ``$AMOS_HOME`` root as an absolute path, or None when unset or empty."""
    value = os.environ.get("AMOS_HOME", "").strip()
    if not value:
        return None
    return Path(value).expanduser().absolute()


def config_dir() -> Path:
    """The folder holding the user config file and user-level custom commands."""
    home = amos_home()
    if home is not None:
        return home / "config"
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def data_dir() -> Path:
    """The folder holding sessions, evidence and logs unless the config moves them."""
    home = amos_home()
    if home is not None:
        return home / "data"
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def user_config_file() -> Path:
    """The user config file, ``<config>/config.json`` (it may not exist)."""
    return config_dir() / USER_CONFIG_NAME


def project_config_file(directory: Path) -> Path:
    """The project config file of ``directory``: ``<directory>/amos.json``.

    The folder is resolved (symlinks followed) so the same project always gets the
    same path, which is what ``trusted_projects`` records.
    """
    return Path(directory).expanduser().resolve() / PROJECT_CONFIG_NAME


def sessions_dir(config: AmosConfig | None = None) -> Path:
    """The session store: ``sessions.directory`` when configured, else ``<data>/sessions``.

    Args:
        config: the loaded config, or None for the default location.
    """
    directory = config.sessions.directory if config is not None else None
    if directory is not None:
        return Path(directory).expanduser()
    return data_dir() / "sessions"


def evidence_dir(config: AmosConfig | None = None) -> Path:
    """The evidence store: ``evidence.directory`` when configured, else ``<data>/evidence``.

    Args:
        config: the loaded config, or None for the default location.
    """
    directory = config.evidence.directory if config is not None else None
    if directory is not None:
        return Path(directory).expanduser()
    return data_dir() / "evidence"


def snapshots_dir(session_id: str) -> Path:
    """One session's workspace snapshots (issue 20): ``<data>/snapshots/<session>``.

    It holds ``git/`` (the shadow git repository), ``lock`` and, after a repair,
    ``git.broken/``. Under the data folder, not the session store, so snapshots exist
    under ``--no-save`` too; the caller checks ``session_id`` is a valid id.
    """
    return data_dir() / "snapshots" / session_id


def log_dir() -> Path:
    """Where ``--verbose`` / ``AMOS_LOG=debug`` writes debug logs: ``<data>/logs``."""
    return data_dir() / "logs"


def demo_dir() -> Path:
    """Where ``amos run --demo`` and the TUI's demo mode copy the demo project:
    ``<data>/demo`` (one ``amos-demo-*`` folder per copy; old ones are pruned)."""
    return data_dir() / "demo"


def commands_dir() -> Path:
    """User-level custom slash commands (``*.md`` files): ``<config>/commands``."""
    return config_dir() / "commands"


def ensure_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents with mode 0700; return it.

    Folders that already exist keep their permissions; only the ones created here are
    set to 0700 (regardless of the umask).

    Raises:
        OSError: the folder cannot be created.
    """
    path = Path(path)
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700)
    if not path.is_dir():
        raise NotADirectoryError(f"not a directory: {path}")
    return path
