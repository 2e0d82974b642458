"""The limits and host choices in force for the runs of one host (STYLE.md §4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from amos.policy.loop_policy import LoopPolicy


@dataclass
class RunSettings:
    """Limits and host choices in force for the runs of one host.

    Attributes:
        max_steps: model calls per execution; the step limit fires when the count
            equals it, after that step's tool calls ran.
        token_budget: cumulative tokens (input + output) per execution, or None.
        timeout_s: wall-clock limit of one run (seconds), or None.
        verify: completion-check command (``--verify`` or the config's
            ``completion.command``), or None.
        verify_source: where ``verify`` (or ``human``) came from: ``flag`` (this run's
            ``--verify``), ``session`` (remembered) or ``config``.
        human: a person confirms completion (``--verify human``).
        verify_timeout_s: limit of one completion check (seconds).
        approvals_owner: who decides paused approvals (None → WAITING_UNROUTED).
        approvals_deadline_s: how long a paused approval may wait (seconds).
        auto_approve: ``--yes``: approve every call that would ask (never ``deny``).
        interactive: a person can answer approvals now (the TUI); otherwise an
            ``ask`` call pauses the run WAITING.
        policy_hash: hash of the loop policy and doom-loop config in force.
        loop_policy: the loop policy from config (None: no policy); ``--verify``
            becomes its ``completion.command``. ``Host.set_loop_policy`` overrides it
            in memory.
        autosave: save the session at the end of every run (always for ``amos run``;
            ``sessions.autosave`` in the TUI).
        secrets: values of every provider key variable set in the environment; masked
            in every text that enters the session, the model, the screen or the disk.
    """

    max_steps: int = 20
    token_budget: int | None = None
    timeout_s: float | None = None
    verify: str | None = None
    verify_source: str = "none"
    human: bool = False
    verify_timeout_s: float = 120.0
    approvals_owner: str | None = None
    approvals_deadline_s: float = 86400.0
    auto_approve: bool = False
    interactive: bool = False
    policy_hash: str | None = None
    loop_policy: LoopPolicy | None = None
    autosave: bool = True
    secrets: tuple[str, ...] = field(default=(), repr=False)
