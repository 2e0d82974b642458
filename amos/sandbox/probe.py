"""Does the sandbox work here? Found out by running it once (issue 19).

Looking for the ``bwrap`` binary is not enough: user namespaces may be disabled, a
container may forbid mounts, an AppArmor profile may refuse bwrap. :func:`probe_sandbox`
runs ``true`` under the very command line a ``workspace-write`` launcher builds (with a
hidden folder and the network unshared, so every flag amos uses is exercised) and caches
the answer for the life of the process.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from amos.errors import SandboxError
from amos.sandbox.bwrap import SandboxLauncher
from amos.sandbox.modes import SandboxPolicy

PROBE_TIMEOUT_S = 10.0
"""Longest the trial run may take, seconds."""

INSTALL_HINT = "install bubblewrap: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora)"
"""How to get bwrap, shown when it is missing."""

USERNS_HINT = (
    "bwrap needs unprivileged user namespaces: enable them (sysctl kernel.unprivileged_userns_clone=1; "
    "on Ubuntu 24.04 allow bwrap in AppArmor) or run amos where they are allowed"
)
"""Shown when bwrap exists but may not create its namespaces."""


@dataclass(frozen=True)
class SandboxProbe:
    """The answer of :func:`probe_sandbox`.

    Attributes:
        available: True when a trial command ran in the sandbox and exited 0.
        bwrap: absolute path of the bwrap executable found (None when none was).
        reason: one line saying why the sandbox does not work (None when it does).
        fix: one line saying how to make it work (None when it does).
    """

    available: bool
    bwrap: str | None = None
    reason: str | None = None
    fix: str | None = None

    @property
    def message(self) -> str:
        """One line for the user: ``sandbox unavailable: REASON; FIX`` (or ``sandbox: bwrap at PATH``)."""
        if self.available:
            return f"sandbox: bubblewrap at {self.bwrap}"
        return f"sandbox unavailable: {self.reason}; {self.fix}"

    def require(self) -> str:
        """The bwrap path.

        Raises:
            SandboxError: ``unavailable`` with :attr:`message`.
        """
        if not self.available or self.bwrap is None:
            raise SandboxError("unavailable", self.message)
        return self.bwrap


@functools.lru_cache(maxsize=8)
def probe_sandbox(bwrap: str = "bwrap") -> SandboxProbe:
    """Run the sandbox once and say whether it works; cached per process and ``bwrap``.

    Args:
        bwrap: the executable name or path to try.

    Returns:
        The probe; never raises (every failure becomes ``available=False`` with a
        one-line ``reason`` and ``fix``). ``probe_sandbox.cache_clear()`` forgets it.
    """
    if not sys.platform.startswith("linux"):
        return SandboxProbe(
            False, None, f"the sandbox needs Linux and bubblewrap; this system is {sys.platform}",
            "run with --sandbox danger-full-access to be asked before every command",
        )
    found = shutil.which(bwrap)
    if found is None:
        return SandboxProbe(False, None, "bubblewrap (bwrap) is not installed", INSTALL_HINT)
    found = os.path.abspath(found)
    with tempfile.TemporaryDirectory(prefix="amos-probe-") as scratch:
        root = Path(scratch)
        (root / "ws").mkdir()
        (root / "hidden").mkdir()
        policy = SandboxPolicy("workspace-write", network=False, hidden_paths=(root / "hidden",))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        with SandboxLauncher(policy, bwrap=found, temp_parent=root) as launcher:
            launch = launcher.launch("true", workspace=root / "ws", env=env)
            assert launch is not None
            try:
                done = subprocess.run(
                    launch.argv, env=launch.env, cwd=launch.cwd, stdin=subprocess.DEVNULL,
                    capture_output=True, timeout=PROBE_TIMEOUT_S, check=False,
                )
            except subprocess.TimeoutExpired:
                return SandboxProbe(False, found, f"bwrap did not finish within {PROBE_TIMEOUT_S:g} s",
                                    "check that `bwrap --ro-bind / / true` works")
            except OSError as exc:
                return SandboxProbe(False, found, f"bwrap cannot be started: {exc.strerror or exc}",
                                    INSTALL_HINT)
    if done.returncode == 0:
        return SandboxProbe(True, found)
    text = done.stderr.decode("utf-8", "replace").strip()
    line = " ".join(text.splitlines()[0].split()) if text else f"exit code {done.returncode}"
    userns = any(word in text.lower() for word in ("namespace", "uid map", "operation not permitted"))
    return SandboxProbe(
        False, found, f"bwrap failed: {line[:200]}",
        USERNS_HINT if userns else "check that `bwrap --ro-bind / / --unshare-pid --unshare-net true` works",
    )
