"""The host's collaborators, wired once: the dependencies every run shares.

:class:`Engine` is the second of the two explicit objects of a run (the first is its
:class:`~amos.engine.state.RunState`): the session's transcript and store binding, the
model, the tools, the masker, the instructions and task notes, the context budget,
evidence, completion, approvals, the doom-loop state, how a run ends — and any extra
gates a caller adds. It holds no per-run state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amos.config_models import AmosConfig
from amos.doom_guard import DoomLoopGuard
from amos.engine.access import CallAccess
from amos.engine.binding import SessionBinding
from amos.engine.completion import Completion
from amos.engine.context_budget import ContextBudget
from amos.engine.evidence import EvidenceRecorder
from amos.engine.finish import RunEnd
from amos.engine.gates import Gate
from amos.engine.masking import Masker
from amos.engine.mcp import McpTools
from amos.engine.model import ModelSlot
from amos.engine.permissions import Approvals
from amos.engine.settings import RunSettings
from amos.engine.snapshots import SnapshotGate
from amos.engine.tasks import Instructions
from amos.engine.transcript import Transcript
from amos.policy.loop_policy import LoopPolicy
from amos.tools.manager import ToolManager

_UNSET: Any = object()


@dataclass
class Engine:
    """Everything a run needs besides its own state.

    Attributes:
        config: the loaded config (read-only here).
        settings: limits and approval routing.
        workspace: the workspace root.
        env: the child environment of tools and checks (no provider keys).
        transcript: the session and its journal.
        binding: the store, the run lock, checkpoints.
        model: the provider in force.
        tools: the tool set.
        masker: masks secrets in every text that enters the session.
        instructions: system prompt and task notes.
        context: the context budget.
        evidence: durable evidence.
        completion: completion checks.
        approvals: approval answers and session approvals (in memory).
        run_end: how a run ends.
        doom_guard: doom-loop state (None when ``doom_loop`` is off).
        mcp: the MCP servers' tools and notices (None without servers; issue 18).
        access: permission rules, the command sandbox and plan mode (None: each tool's
            configured permission alone; issue 19).
        extra_gates: gates added by the caller, after the built-in ones.
        snapshots: workspace snapshots around the steps that change files, the last gate
            (None: not wired; issue 20).
        policy_override: a loop policy set with ``Host.set_loop_policy`` (unset: config's).
    """

    config: AmosConfig
    settings: RunSettings
    workspace: Path
    env: Mapping[str, str]
    transcript: Transcript
    binding: SessionBinding
    model: ModelSlot
    tools: ToolManager
    masker: Masker
    instructions: Instructions
    context: ContextBudget
    evidence: EvidenceRecorder
    completion: Completion
    approvals: Approvals
    run_end: RunEnd
    doom_guard: DoomLoopGuard | None = None
    mcp: McpTools | None = None
    access: CallAccess | None = None
    extra_gates: list[Gate] = field(default_factory=list)
    snapshots: SnapshotGate | None = None
    policy_override: Any = _UNSET

    def loop_policy(self) -> LoopPolicy | None:
        """The loop policy the next execution uses (``--verify`` folded into ``completion``)."""
        policy = self.settings.loop_policy if self.policy_override is _UNSET else self.policy_override
        return policy.with_verify(self.settings.verify) if policy is not None else None

    def override_policy(self, policy: Any) -> None:
        """Use ``policy`` for later executions (``Host.set_loop_policy``; in memory only).

        Raises:
            ConfigError: the policy does not validate, or names tools it cannot.
        """
        from amos.errors import ConfigError
        from amos.policy.loop_policy import coerce_policy

        coerced = coerce_policy(policy)
        if coerced is not None:
            tools = self.tools
            try:
                coerced.check_tools({spec.name: tools.effect(spec.name) for spec in tools.specs()})
            except ValueError as exc:
                raise ConfigError(str(exc), json_path="loop_policy") from None
            done = coerced.completion.done_tool if coerced.completion else None
            if done and tools.get(done) is None:
                raise ConfigError(f"done_tool {done!r} is not offered to the model in this session; set it in the "
                                  "config file (loop_policy.completion.done_tool)",
                                  json_path="loop_policy.completion.done_tool")
        self.policy_override = coerced

