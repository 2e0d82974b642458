"""Sandbox modes, the default hidden paths and the policy one launcher enforces (issue 19).

The modes are the names Codex users know: ``read-only`` (nothing writable),
``workspace-write`` (the workspace, a private ``/tmp`` and ``sandbox.writable_paths``
writable) and ``danger-full-access`` (no sandbox). :func:`sandbox_policy` turns the
``sandbox`` config section into a :class:`SandboxPolicy`: normalised absolute paths,
with amos's own folders and the session's agent sockets added to the hidden ones.

Importing this module has no side effects; nothing here touches the disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from amos import paths

if TYPE_CHECKING:
    from amos.config_models import AmosConfig

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
"""How much a sandboxed command may change (issue 19, "Sandbox modes")."""

MODES: tuple[str, ...] = get_args(SandboxMode)
"""The accepted mode names, in order of increasing access."""

DEFAULT_MODE: SandboxMode = "workspace-write"
"""The mode used when a sandbox is available and none is configured."""

DEFAULT_HIDDEN_PATHS: tuple[str, ...] = (
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gcloud",
    "~/.docker",
    "~/.netrc",
    "~/.kube",
    "~/.azure",
    "~/.config/gh",
    "~/.git-credentials",
    "~/.password-store",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "/var/run/docker.sock",
    "/run/docker.sock",
)
"""Credential files and folders hidden from sandboxed reads unless the config says otherwise.

The Docker socket is listed because a read-only mount does not stop ``connect()`` on a
Unix socket, and Docker access is root access.
"""


def normalise_path(value: str | os.PathLike[str], base: Path | None = None) -> Path:
    """``value`` with ``~`` expanded, made absolute and normalised lexically.

    Symlinks are not resolved here (the launcher resolves paths that exist when it
    builds a command line).

    Args:
        value: a path as written in the config (``~/.ssh``, ``/opt/cache``).
        base: folder a relative path is taken against; None refuses relative paths.

    Returns:
        The absolute, normalised path (no ``.``/``..`` components, no trailing slash).

    Raises:
        ValueError: the path is empty, holds a NUL byte, or is relative while ``base``
            is None.
    """
    text = os.fspath(value)
    if not text or not text.strip():
        raise ValueError("must not be empty")
    if "\x00" in text:
        raise ValueError("must not contain a NUL byte")
    path = Path(text).expanduser()
    if not path.is_absolute():
        if base is None:
            raise ValueError("must be an absolute path or start with ~ (e.g. ~/.cache/pip)")
        path = base / path
    return Path(os.path.normpath(path))


@dataclass(frozen=True)
class SandboxPolicy:
    """What one launcher allows (issue 19, "Sandbox modes").

    Attributes:
        mode: ``read-only``, ``workspace-write`` or ``danger-full-access``.
        network: True lets commands reach the network (and the host's loopback).
        writable_paths: absolute folders or files writable besides the workspace and
            ``/tmp`` (``workspace-write`` only; ignored in ``read-only``).
        hidden_paths: absolute paths whose content sandboxed commands cannot read
            (folders become empty and unreadable, files unreadable).
    """

    mode: SandboxMode = DEFAULT_MODE
    network: bool = False
    writable_paths: tuple[Path, ...] = ()
    hidden_paths: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"sandbox mode {self.mode!r} is unknown; accepted: {', '.join(MODES)}")

    @property
    def sandboxed(self) -> bool:
        """False for ``danger-full-access`` (commands run as they would without amos)."""
        return self.mode != "danger-full-access"

    def describe(self) -> str:
        """A short label for receipts and notes, e.g. ``workspace-write, network off``."""
        if not self.sandboxed:
            return "danger-full-access (no sandbox)"
        return f"{self.mode}, network {'on' if self.network else 'off'}"


def always_hidden_paths(
    config: AmosConfig | None = None, env: Mapping[str, str] | None = None
) -> list[Path]:
    """Paths hidden whatever ``sandbox.hidden_paths`` says.

    amos's own config folder (user config, trusted projects) and data folder (sessions,
    evidence, logs) and the configured session and evidence stores; and the session's
    agent sockets, which a read-only mount does not protect: ``$XDG_RUNTIME_DIR``
    (D-Bus session bus, keyrings, gpg-agent) and ``$SSH_AUTH_SOCK``.

    Args:
        config: the loaded config (for moved session/evidence stores), or None.
        env: the environment the sockets are read from (default ``os.environ``).

    Returns:
        Absolute normalised paths, without duplicates (they may not exist).
    """
    env = os.environ if env is None else env
    found = [paths.config_dir(), paths.data_dir(), paths.sessions_dir(config),
             paths.evidence_dir(config)]
    for name in ("XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"):
        value = env.get(name, "")
        if value.startswith("/"):
            found.append(Path(value))
    return _unique(normalise_path(path) for path in found)


def sandbox_policy(
    config: AmosConfig, *, mode: SandboxMode | None = None, env: Mapping[str, str] | None = None
) -> SandboxPolicy:
    """The policy of ``config.sandbox`` (plus the always-hidden paths).

    Args:
        config: the loaded config; ``sandbox.*`` paths are already absolute.
        mode: a mode that overrides ``sandbox.mode`` (``--sandbox MODE``, ``--plan``).
        env: the environment agent sockets are read from (default ``os.environ``).

    Returns:
        The policy; ``hidden_paths`` holds the configured ones first.

    Raises:
        ValueError: ``mode`` is not a mode name.
    """
    section = config.sandbox
    hidden = [Path(p) for p in section.hidden_paths] + always_hidden_paths(config, env)
    return SandboxPolicy(
        mode=mode or section.mode,
        network=section.network,
        writable_paths=tuple(_unique(Path(p) for p in section.writable_paths)),
        hidden_paths=tuple(_unique(hidden)),
    )


def _unique(items: Iterable[Path]) -> list[Path]:
    seen: dict[Path, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)
