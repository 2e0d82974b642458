"""Did the sandbox block a command? A note for the model when it looks so (issue 19).

The sandbox does not report what it refused; the command's own error messages do:
``Read-only file system`` (EROFS: a write outside the writable folders, or any write in
``read-only``), ``Network is unreachable`` and failed name lookups (no network), and
``Permission denied`` naming a hidden path. :func:`denial_note` looks for them in the
end of stderr of a command that exited non-zero and words one note telling the model
it may ask to run the command unsandboxed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from amos.sandbox.modes import SandboxMode

_WRITE_DENIED = ("read-only file system",)
_NETWORK_DENIED = (
    "network is unreachable",
    "temporary failure in name resolution",
    "could not resolve host",
    "name or service not known",
    "no address associated with hostname",
    "failed to resolve",
    "connection refused",  # the host's 127.0.0.1 servers are not in the sandbox's network
)


def _path_forms(path: Path, workspace: Path | None) -> list[str]:
    text = str(path)
    forms = [text]
    home = os.path.expanduser("~")
    if text.startswith(home.rstrip("/") + "/"):
        forms.append("~" + text[len(home.rstrip("/")):])
    if workspace is not None:
        try:
            rel = os.path.relpath(text, workspace)
        except ValueError:
            rel = ""
        if rel and not rel.startswith(".."):
            forms.append(rel)
    return forms


def denial_causes(
    stderr: str,
    *,
    mode: SandboxMode,
    network: bool,
    hidden_paths: Iterable[Path] = (),
    workspace: Path | None = None,
) -> list[str]:
    """What in ``stderr`` looks like the sandbox refusing something.

    Args:
        stderr: the (end of the) command's stderr.
        mode: the sandbox mode it ran under.
        network: whether it had the network.
        hidden_paths: the policy's hidden paths (absolute).
        workspace: the command's working folder, for relative mentions of hidden paths.

    Returns:
        Short phrases (``a write outside the writable folders``, ``network access``,
        ``reading a hidden path``), in that order; empty when nothing matched.
    """
    low = stderr.lower()
    causes: list[str] = []
    if any(marker in low for marker in _WRITE_DENIED):
        causes.append("any write (read-only mode)" if mode == "read-only"
                      else "a write outside the workspace and the writable folders")
    if not network and any(marker in low for marker in _NETWORK_DENIED):
        causes.append("network access (the network is off)")
    if "permission denied" in low:
        lines = [line for line in stderr.splitlines() if "permission denied" in line.lower()]
        for path in hidden_paths:
            forms = _path_forms(Path(path), workspace)
            if any(form in line for line in lines for form in forms):
                causes.append("reading a hidden path (credentials or amos's own folders)")
                break
    return causes


def denial_note(
    stderr: str,
    exit_code: int | None,
    *,
    mode: SandboxMode,
    network: bool,
    hidden_paths: Iterable[Path] = (),
    workspace: Path | None = None,
) -> str | None:
    """The note added to a command's result when the sandbox seems to have blocked it.

    Args:
        stderr: the end of the command's stderr.
        exit_code: its exit code; a note is only given for a non-zero (or missing) one.
        mode / network / hidden_paths / workspace: as in :func:`denial_causes`.

    Returns:
        ``[amos: the sandbox (MODE, network off) refused ...; ask ... "sandbox": "none" ...]``
        or None when the command succeeded or nothing in stderr points at the sandbox.
    """
    if exit_code == 0:
        return None
    causes = denial_causes(stderr, mode=mode, network=network, hidden_paths=hidden_paths,
                           workspace=workspace)
    if not causes:
        return None
    label = f"{mode}, network {'on' if network else 'off'}"
    return (
        f"[amos: this command ran in a sandbox ({label}), which refuses {'; '.join(causes)}. "
        'If the task needs it, call run_command again with "sandbox": "none" and a '
        '"justification"; a person must approve running it unsandboxed.]'
    )
