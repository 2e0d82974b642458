"""The bubblewrap command line of one sandboxed shell command (issue 19).

:func:`bwrap_argv` turns a shell command, its working folder (the workspace) and a
:class:`~amos.sandbox.modes.SandboxPolicy` into ``bwrap ... -- /bin/sh -c COMMAND``:

- ``--ro-bind / /``: the whole filesystem is readable and nothing is writable, so PATH,
  interpreters, toolchains and virtual environments keep working wherever they are
  installed (``/usr``, ``/opt``, ``~/.local``, ``~/.pyenv``, a venv in or out of home).
- ``--dev /dev``, ``--proc /proc``: a minimal ``/dev`` and a ``/proc`` of the new PID
  namespace only, so no amos process (and no other host process) can be inspected.
- ``/tmp``: a private folder of the launcher (``workspace-write``) or an empty read-only
  tmpfs (``read-only``); ``TMPDIR`` is set to ``/tmp``. Entries of ``PATH`` that lived
  under the host's ``/tmp`` are bound back read-only.
- the workspace (and ``sandbox.writable_paths``) bound writable in ``workspace-write``,
  read-only in ``read-only``.
- hidden folders: an empty tmpfs with mode 0000, remounted read-only (listing and
  reading fail with EACCES, nothing can be created; mode 0111 when the workspace or
  another visible path lies inside, so it stays reachable); hidden files: an
  unreadable empty file bound read-only over them.
- ``--unshare-pid --unshare-ipc`` (and ``--unshare-net`` unless the network is on: only
  a loopback of its own, so the host's 127.0.0.1 servers are out of reach),
  ``--die-with-parent`` (amos gone → bwrap and everything inside gone),
  ``--new-session`` (no TIOCSTI into a terminal), ``--cap-drop ALL`` (as root, bwrap
  would otherwise keep every capability, and ``mount -o remount,rw /`` would work).

Mounts are applied parents first (a hidden folder inside the workspace stays hidden; a
workspace inside a hidden folder stays usable), read-only remounts last.

The environment is not passed with ``--setenv``: bwrap is executed with the child
environment itself (already stripped of provider keys), so the sandbox's
``/proc/1/environ`` (bwrap's own) holds nothing the command could not see anyway.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from amos.errors import SandboxError
from amos.sandbox.modes import SandboxMode, SandboxPolicy

SHELL = "/bin/sh"
"""The shell a command runs in, as ``asyncio``'s ``subprocess_shell`` uses it."""

SANDBOX_TMP = "/tmp"
"""Where the private temporary folder appears inside the sandbox (also ``TMPDIR``)."""

STATE_PREFIX = "amos-sandbox-"
"""Name prefix of a launcher's state folder: ``amos-sandbox-PID-XXXXXXXX``."""

_STATE_NAME = re.compile(re.escape(STATE_PREFIX) + r"([0-9]+)-[A-Za-z0-9_]+")

_REPLACED_ROOTS = ("/tmp", "/dev", "/proc")
"""Host folders the sandbox replaces with its own (their host content is not visible)."""


@dataclass(frozen=True)
class Launch:
    """How to start one sandboxed command.

    Attributes:
        argv: the full command line, ``[bwrap, ..., "--", "/bin/sh", "-c", command]``.
        env: the environment to execute bwrap with (the child environment plus
            ``TMPDIR=/tmp``); nothing else is passed in.
        cwd: the folder to start bwrap in (the workspace; inside, ``--chdir`` sets it).
        mode: the sandbox mode the command runs under.
        network: whether the command can reach the network.
    """

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    mode: SandboxMode
    network: bool


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _depth(path: str) -> int:
    return len(Path(path).parts)


@dataclass
class _Mounts:
    """Mount operations, applied parents first; read-only remounts after all of them."""

    ops: list[tuple[int, int, list[str]]] = field(default_factory=list)
    remount_ro: list[str] = field(default_factory=list)

    def add(self, dest: str, args: list[str]) -> None:
        self.ops.append((_depth(dest), len(self.ops), args))

    def argv(self) -> list[str]:
        out: list[str] = []
        for _, _, args in sorted(self.ops):
            out += args
        for dest in self.remount_ro:
            out += ["--remount-ro", dest]
        return out


_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
"""Kernel settings under /proc bound read-only inside the sandbox (where they exist)."""


def bwrap_argv(
    command: str,
    *,
    workspace: Path,
    policy: SandboxPolicy,
    bwrap: str,
    private_tmp: Path | None,
    blocker: Path,
    path_dirs: Iterable[str] = (),
) -> list[str]:
    """The bwrap command line running ``command`` under ``policy``.

    Args:
        command: the shell command, run with ``/bin/sh -c``.
        workspace: the working folder (absolute; symlinks are resolved here).
        policy: mode, network and paths; its mode must not be ``danger-full-access``.
        bwrap: the bwrap executable (an absolute path).
        private_tmp: host folder shown as ``/tmp`` in ``workspace-write`` (None in
            ``read-only``, where ``/tmp`` is an empty read-only tmpfs).
        blocker: an empty host file with mode 0000, bound over hidden files.
        path_dirs: the child's ``PATH`` entries; those under the host ``/tmp`` are
            bound back read-only so they keep working.

    Returns:
        The argv list; hidden and writable paths that do not exist are left out.

    Raises:
        SandboxError: ``bad_workspace`` when the workspace or a writable path is ``/``,
            or the policy is ``danger-full-access`` (nothing to build).
    """
    if not policy.sandboxed:
        raise SandboxError("bad_workspace", "danger-full-access runs commands without bwrap")
    writable_mode = policy.mode == "workspace-write"
    ws = os.path.realpath(workspace)
    if ws == "/":
        raise SandboxError("bad_workspace", "the workspace is /: the sandbox would confine nothing")
    mounts = _Mounts()
    if writable_mode:
        if private_tmp is None:
            raise SandboxError("bad_workspace", "workspace-write needs a private temporary folder")
        mounts.add(SANDBOX_TMP, ["--bind", str(private_tmp), SANDBOX_TMP])
    else:
        mounts.add(SANDBOX_TMP, ["--tmpfs", SANDBOX_TMP])
        mounts.remount_ro.append(SANDBOX_TMP)
    bind = "--bind" if writable_mode else "--ro-bind"
    mounts.add(ws, [bind, ws, ws])
    shown = [ws]  # host paths visible inside even under a replaced root
    hidden = [real for real in map(os.path.realpath, policy.hidden_paths) if os.path.exists(real)]
    if writable_mode:
        for extra in policy.writable_paths:
            real = os.path.realpath(extra)
            if real == "/":
                raise SandboxError("bad_workspace", "sandbox.writable_paths holds /: use danger-full-access")
            if any(_under(real, h) for h in hidden):
                continue  # a hidden path stays hidden, even when listed as writable
            if os.path.lexists(real):
                mounts.add(real, ["--bind", real, real])
                shown.append(real)
    for entry in path_dirs:
        if not entry.startswith("/"):
            continue
        real = os.path.realpath(entry)
        if (_under(real, SANDBOX_TMP) and os.path.isdir(real) and not any(_under(real, h) for h in hidden)
                and not any(_under(real, s) for s in shown)):
            mounts.add(real, ["--ro-bind", real, real])
            shown.append(real)
    for real in dict.fromkeys(hidden):
        replaced = any(_under(real, root) for root in _REPLACED_ROOTS)
        if real in ("/", ws) or (replaced and not any(_under(real, s) for s in shown)):
            continue  # not visible inside anyway, or the workspace itself (it stays usable)
        if os.path.isdir(real):
            # Search-only when a visible path lies below it, so that path stays reachable.
            inner = any(_under(s, real) and s != real for s in shown)
            mounts.add(real, ["--perms", "0111" if inner else "0000", "--tmpfs", real])
            mounts.remount_ro.append(real)
        else:
            mounts.add(real, ["--ro-bind", str(blocker), real])
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # The kernel lets uid 0 write sysctls whatever its capabilities, and bwrap skips its
    # own read-only cover of /proc/sys when access() misreports it: cover them here, so a
    # command run as root cannot set the host's hostname or core_pattern (an escape).
    for path in _PROC_READ_ONLY:
        argv += ["--ro-bind-try", path, path]
    argv += mounts.argv()
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not policy.network:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--chdir", ws]
    argv += ["--", SHELL, "-c", command]
    return argv


class SandboxLauncher:
    """Turns shell commands into bwrap launches under one policy (issue 19).

    Owns a private state folder (created on first use, mode 0700) holding the folder
    shown as ``/tmp`` (shared by the commands of this launcher, like a real ``/tmp``)
    and the unreadable file bound over hidden files. :meth:`close` removes it; so does
    garbage collection or interpreter exit; the next launcher removes those of amos
    processes that were killed first.

    Args:
        policy: what commands may do.
        bwrap: the bwrap executable; None looks ``bwrap`` up on ``PATH``.
        temp_parent: where the state folder is created (default: the system's
            temporary folder).

    Raises:
        SandboxError: ``unavailable`` when the policy is sandboxed and no bwrap
            executable is found.
    """

    def __init__(
        self, policy: SandboxPolicy, *, bwrap: str | None = None, temp_parent: Path | None = None
    ):
        self.policy = policy
        found = shutil.which(bwrap or "bwrap")
        if found is None and policy.sandboxed:
            raise SandboxError(
                "unavailable", "bubblewrap (bwrap) is not installed; install it: apt-get install bubblewrap"
            )
        self.bwrap = os.path.abspath(found) if found else None
        self._temp_parent = temp_parent
        self._state: Path | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def mode(self) -> SandboxMode:
        """The policy's mode."""
        return self.policy.mode

    @property
    def network(self) -> bool:
        """Whether commands can reach the network (always True without a sandbox)."""
        return self.policy.network or not self.policy.sandboxed

    def launch(self, command: str, *, workspace: Path, env: Mapping[str, str]) -> Launch | None:
        """How to start ``command`` in the sandbox.

        Args:
            command: the shell command (``run_command``'s ``command``).
            workspace: its working folder (writable in ``workspace-write``).
            env: the child environment, already stripped of provider keys; bwrap is
                executed with it (plus ``TMPDIR=/tmp``).

        Returns:
            The launch, or None for ``danger-full-access`` (run the command directly).

        Raises:
            SandboxError: ``bad_workspace`` (see :func:`bwrap_argv`).
            OSError: the state folder cannot be created.
        """
        if not self.policy.sandboxed:
            return None
        assert self.bwrap is not None
        state = self._ensure_state()
        private_tmp = state / "tmp" if self.policy.mode == "workspace-write" else None
        child = dict(env)
        child["TMPDIR"] = SANDBOX_TMP
        argv = bwrap_argv(
            command,
            workspace=workspace,
            policy=self.policy,
            bwrap=self.bwrap,
            private_tmp=private_tmp,
            blocker=state / "hidden",
            # PATH, and the Python running amos (its venv may live under /tmp, as a CI
            # checkout does): interpreters stay runnable wherever they are installed
            path_dirs=[*child.get("PATH", "").split(os.pathsep), sys.prefix, sys.base_prefix,
                       os.path.dirname(sys.executable)],
        )
        return Launch(tuple(argv), child, Path(workspace), self.policy.mode, self.policy.network)

    def close(self) -> None:
        """Remove the state folder (and everything commands left in ``/tmp``)."""
        if self._finalizer is not None:
            self._finalizer()
        self._state = None
        self._finalizer = None

    def __enter__(self) -> SandboxLauncher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_state(self) -> Path:
        if self._state is not None and self._state.is_dir():
            return self._state
        parent = Path(self._temp_parent or tempfile.gettempdir())
        _sweep_stale(parent)
        state = Path(tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getpid()}-", dir=parent))
        (state / "tmp").mkdir(mode=0o700)
        blocker = state / "hidden"
        blocker.touch(mode=0o000)
        os.chmod(blocker, 0)
        self._finalizer = weakref.finalize(self, _remove_tree, state)
        self._state = state
        return state


def _sweep_stale(parent: Path) -> None:
    """Remove state folders of amos processes that are gone (killed before they cleaned up).

    Only folders named ``amos-sandbox-PID-…``, owned by this user, whose PID no longer
    exists; a PID that was reused keeps its folder (safe, merely left for later).
    """
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        match = _STATE_NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            os.kill(int(match[1]), 0)
        except ProcessLookupError:
            _remove_tree(Path(entry.path))
        except OSError:
            continue


def _remove_tree(path: Path) -> None:
    """Remove ``path`` even where a command left folders without write permission."""
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            try:
                os.chmod(os.path.join(root, name), stat.S_IRWXU)
            except OSError:
                continue
    shutil.rmtree(path, ignore_errors=True)
