"""The amos error hierarchy.

Domain errors carry machine-readable attributes (``code``, ``kind``) so the front
ends turn them into one clean line and an exit code without parsing messages
(STYLE.md §1 and §8).
"""

from __future__ import annotations


class AmosError(Exception):
    """Base class of every error amos raises on purpose.

    Attributes:
        exit_code: the process exit code ``amos run`` uses when this error
            reaches the command line (2 = usage or configuration error).
    """

    exit_code: int = 2

    def __str__(self) -> str:
        """The message, with the value of any secret-named environment variable masked
        (a key typed into a session id, a path or a command name never reaches the
        screen through an error; :func:`amos.evidence.redact.mask_environment_secrets`)."""
        text = super().__str__()
        from amos.evidence.redact import mask_environment_secrets

        return mask_environment_secrets(text)


class UsageError(AmosError):
    """A bad flag, argument or combination of options; nothing was run."""


class ConfigError(AmosError):
    """An unreadable or invalid configuration file or value.

    Args:
        message: what is wrong and what is accepted, one line.
        file: the file the value came from, or None for flags/defaults.
        json_path: dotted JSON path of the bad field (``loop_policy.max_tracked``).
    """

    def __init__(self, message: str, *, file: str | None = None, json_path: str | None = None):
        self.file = file
        self.json_path = json_path
        self.detail = message
        self.others: list[ConfigError] = []
        """The file's other errors, when it was validated as a whole (``amos config check``)."""
        where = ""
        if file:
            where += f"{file}: "
        if json_path:
            where += f"{json_path}: "
        super().__init__(f"{where}{message}")


class ProviderError(AmosError):
    """The model API failed after the SDK's own retries (spec/stop-receipts.md, ``provider_error``).

    Args:
        kind: ``rate_limit``, ``overloaded``, ``timeout``, ``auth``, ``bad_request``,
            ``server``, ``context_length``, ``script_mismatch``, ``script_exhausted``,
            ``unavailable``.
        message: one human line, never containing a secret.
    """

    exit_code = 1

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


class ScriptMismatch(ProviderError):
    """A scripted turn's ``expect`` did not hold for the request the runner sent."""

    def __init__(self, message: str):
        super().__init__("script_mismatch", message)


class ScriptExhausted(ProviderError):
    """The script has no turn left and ``on_exhausted`` is ``"error"``."""

    def __init__(self, message: str):
        super().__init__("script_exhausted", message)


class SessionError(AmosError):
    """A session cannot be found, loaded, locked or written.

    Attributes:
        code: ``not_found``, ``busy``, ``corrupt``, ``write_failed``, ``not_waiting``,
            ``bad_decision``, ``ambiguous``.
    """

    def __init__(self, code: str, message: str, *, exit_code: int = 2):
        self.code = code
        self.exit_code = exit_code
        super().__init__(message)


class SlashCommandError(AmosError):
    """An unknown slash command or bad arguments; carries the command's usage line."""

    def __init__(self, message: str, *, usage: str | None = None, code: str = "BAD_ARGUMENTS"):
        self.usage = usage
        self.code = code
        super().__init__(message)


class SandboxError(AmosError):
    """The command sandbox cannot be used as asked (issue 19).

    Attributes:
        code: ``unavailable`` (bubblewrap missing or not working on this machine) or
            ``bad_workspace`` (a workspace or writable path the sandbox cannot confine,
            such as ``/``).
    """

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(message)


class SnapshotError(AmosError):
    """Workspace snapshots (issue 20) cannot be taken, read or restored.

    Attributes:
        code: ``git_missing``, ``git_too_old``, ``git_failed``, ``bad_path``,
            ``not_found`` (no such snapshot), ``busy`` (another amos holds the shadow
            repository), ``other_workspace`` (the repository belongs to another folder).
    """

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(message)
