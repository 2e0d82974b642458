"""The loop policy: bounded recovery, effect admission and progress tracking.

Pure code (no I/O, no clock): the runner asks :class:`PolicyTracker` before it
dispatches a tool call (admission), tells it every outcome (observation) and every
progress-key sample, and asks it whether a recovery turn is still allowed.
Reference: seeds/loop-policy-bounded-recovery.txt; contract: spec/config.md
``loop_policy`` and spec/stop-receipts.md.

Identities (seed "Bounds and recovery"):

- every action is fingerprinted as ``sha256(tool + "\\n" + JCS(arguments))``
  (:mod:`amos.policy.canonical`), its canonical input bounded to 64 KiB; an action
  that cannot be fingerprinted stops before dispatch;
- a write/unknown action's identity is its fingerprint plus the *workspace
  revision* (a counter that increases whenever a write-effect tool succeeds): an
  identical action already admitted is blocked, never run again, and two identical
  calls in one model response are always one admission; a ``not_started`` outcome
  releases the admission;
- a read's identity is its fingerprint plus the count of successful write *and*
  unknown-effect outcomes (a command may have changed what the read sees) and the
  last progress key:
  ``max_repeated_reads`` identical reads run, the next one is blocked with labelled
  feedback, and asking again after that feedback stops the run (``repeated_action``).
  A read whose result changed (or could not be fingerprinted) is fresh again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from amos.policy.canonical import CanonicalizationError, canonicalize
from amos.policy.destinations import FileCheck

MAX_FINGERPRINT_BYTES = 64 * 1024
"""Bound of one fingerprint input (bytes of canonical JSON), seed "Bounds and recovery"."""

FAILURE_STATUSES = frozenset({"failed", "timed_out", "denied"})
"""Outcome statuses that count as failures (permission and argument failures included)."""

RecoveryKind = Literal["failure", "repeated_read", "progress", "completion"]

STOP_FOR_KIND: dict[str, tuple[str, str]] = {
    "failure": ("tool_error", "failure_budget"),
    "repeated_read": ("policy_stop", "repeated_action"),
    "progress": ("no_progress", "no_progress"),
    "completion": ("recovery_exhausted", "recovery_exhausted"),
}
"""Cause and reason word when the recovery budget is spent, per kind (spec/stop-receipts.md)."""


@dataclass(frozen=True)
class CompletionSpec:
    """Host completion checks; every configured kind must confirm.

    Attributes:
        command: shell command that exits 0 when the work is done.
        timeout_s: limit of the command (seconds).
        files: destination checks (:class:`~amos.policy.destinations.FileCheck`): paths
            that must exist, with optional size, hash, JSON-schema and content rules.
        require_tools: tools that must have a ``succeeded`` observation this execution.
        python: ``"pkg.mod:func"`` checker.
        baseline: evaluate the checks before the first model call (issue 16).
        done_tool: name of the tool the model calls to declare completion, or None.
        human: a person confirms completion.
    """

    command: str | None = None
    timeout_s: float = 120.0
    files: tuple[Any, ...] = ()
    require_tools: tuple[str, ...] = ()
    python: str | None = None
    baseline: bool = True
    done_tool: str | None = None
    human: bool = False

    @property
    def configured(self) -> bool:
        """True when at least one check the host runs is set (a person is not one)."""
        return bool(self.command or self.files or self.require_tools or self.python)


@dataclass(frozen=True)
class ProgressSpec:
    """How the host progress key is sampled: a command's output hash or a Python function."""

    command: str | None = None
    python: str | None = None

    @property
    def configured(self) -> bool:
        """True when a progress source is set."""
        return bool(self.command or self.python)


@dataclass(frozen=True)
class LoopPolicy:
    """A validated, immutable loop policy (spec/config.md ``loop_policy``).

    Attributes:
        max_recovery_attempts: labelled feedback turns allowed (0–1000).
        max_repeated_reads: identical reads run before one is refused (1–1000).
        max_unchanged_progress: unchanged progress samples in a row before
            feedback (1–1000).
        max_tracked: bound on admissions, distinct signatures and observations
            per execution (1–1000).
        read_only_tools: when set, only these tools get read treatment.
        completion: the completion checks, None for none.
        progress: the progress key, None for none.
        checker_timeout_s: limit of a Python checker or progress key (seconds).
    """

    max_recovery_attempts: int = 2
    max_repeated_reads: int = 2
    max_unchanged_progress: int = 3
    max_tracked: int = 1000
    read_only_tools: frozenset[str] | None = None
    completion: CompletionSpec | None = None
    progress: ProgressSpec | None = None
    checker_timeout_s: float = 30.0

    @classmethod
    def from_config(cls, config: Any) -> LoopPolicy:
        """Build from a validated ``LoopPolicyConfig`` (see :func:`coerce_policy` for raw input)."""
        comp = config.completion
        prog = config.progress
        return cls(
            max_recovery_attempts=config.max_recovery_attempts,
            max_repeated_reads=config.max_repeated_reads,
            max_unchanged_progress=config.max_unchanged_progress,
            max_tracked=config.max_tracked,
            read_only_tools=frozenset(config.read_only_tools) if config.read_only_tools is not None else None,
            completion=CompletionSpec(
                command=comp.command, timeout_s=float(comp.timeout_s),
                files=tuple(FileCheck.of(f) for f in comp.files), require_tools=tuple(comp.require_tools),
                python=comp.python, baseline=comp.baseline, done_tool=comp.done_tool,
                human=comp.human) if comp else None,
            progress=ProgressSpec(command=prog.command, python=prog.python) if prog else None,
            checker_timeout_s=float(config.checker_timeout_s),
        )

    def with_verify(self, command: str | None) -> LoopPolicy:
        """This policy with ``completion.command`` set to ``command`` (``--verify``)."""
        if not command:
            return self
        comp = self.completion or CompletionSpec()
        return _replace(self, completion=_replace(comp, command=command))

    @property
    def completion_configured(self) -> bool:
        """True when some completion check (or a person) must confirm before ``completed``."""
        return bool(self.completion and (self.completion.configured or self.completion.human))

    def check_tools(self, effects: Mapping[str, str]) -> None:
        """Check ``read_only_tools`` against the tools' declared effects.

        Args:
            effects: tool name → declared effect of every available tool.

        Raises:
            ValueError: a listed tool is unknown or does not declare effect ``read``, or
                ``completion.require_tools`` names a tool that is not available.
        """
        for name in (self.completion.require_tools if self.completion else ()):
            if name not in effects:
                raise ValueError(f"completion.require_tools lists {name!r}, which is not an available tool "
                                 f"({', '.join(sorted(effects))}); the run could never complete")
        for name in sorted(self.read_only_tools or ()):
            effect = effects.get(name)
            if effect != "read":
                what = "is not an available tool" if effect is None else f"declares effect {effect!r}"
                raise ValueError(f"read_only_tools lists {name!r}, which {what}; only tools that declare "
                                 "effect 'read' may be listed")


def _replace(obj: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(obj, **changes)


def coerce_policy(value: Any) -> LoopPolicy | None:
    """Turn what a host passes to ``set_loop_policy`` into a ``LoopPolicy``.

    Args:
        value: None (no policy), a ``LoopPolicy``, a ``LoopPolicyConfig`` or a JSON
            object as in spec/config.md ``loop_policy``.

    Returns:
        The validated policy, or None.

    Raises:
        ConfigError: the object does not validate (names the JSON path and what is accepted).
    """
    if value is None:
        return None
    if isinstance(value, LoopPolicy):
        coerce_policy(_as_config_dict(value))  # the same bounds as the config file
        return value
    from amos.config_models import LoopPolicyConfig

    if isinstance(value, LoopPolicyConfig):
        return LoopPolicy.from_config(value)
    if not isinstance(value, Mapping):
        from amos.errors import ConfigError

        raise ConfigError(f"loop_policy must be null or an object, not {type(value).__name__}",
                          json_path="loop_policy")
    from pydantic import ValidationError

    from amos.config import format_validation_error
    from amos.config_models import AmosConfig

    try:
        cfg = AmosConfig.model_validate({"loop_policy": dict(value)}).loop_policy
    except ValidationError as exc:
        raise format_validation_error(exc, "set_loop_policy") from None
    assert cfg is not None
    return LoopPolicy.from_config(cfg)


def _as_config_dict(policy: LoopPolicy) -> dict[str, Any]:
    from dataclasses import asdict

    data = asdict(policy)
    if policy.read_only_tools is not None:
        data["read_only_tools"] = sorted(policy.read_only_tools)
    if data.get("completion"):
        comp = {k: list(v) if isinstance(v, tuple) else v for k, v in data["completion"].items()}
        comp["files"] = [{k: v for k, v in f.items() if v is not None} if isinstance(f, dict) else f
                         for f in comp.get("files", [])]
        data["completion"] = comp
    return data


def action_fingerprint(tool_name: str, arguments: Any) -> str | None:
    """``sha256(tool + "\\n" + JCS(arguments))``, or None when it cannot be computed safely.

    None means: not strict JSON (NaN, cycles, non-string keys, over-deep) or more than
    ``MAX_FINGERPRINT_BYTES`` of canonical JSON.
    """
    try:
        text = canonicalize(arguments)
    except (CanonicalizationError, RecursionError, TypeError, ValueError):
        return None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) > MAX_FINGERPRINT_BYTES:
        return None
    return hashlib.sha256(tool_name.encode("utf-8", "replace") + b"\n" + data).hexdigest()


def result_fingerprint(result: Any) -> str | None:
    """Fingerprint of a read's result (None: cannot be compared, never "identical")."""
    return action_fingerprint("", result)


@dataclass(frozen=True)
class Admission:
    """The policy's decision about one call, before dispatch.

    Attributes:
        decision: ``run`` (dispatch it), ``blocked`` (do not run it; the model sees
            ``message`` as a ``blocked`` result), or ``stop`` (end the run before
            dispatch with ``cause``/``reason``).
        message: what the model (blocked) or the receipt (stop) is told.
        identity: the admission identity (release it with :meth:`PolicyTracker.release`).
        feedback: True when a labelled host-feedback turn should follow (a refused
            repeated read).
        cause / reason: the stop cause and reason word for ``stop``.
    """

    decision: Literal["run", "blocked", "stop"]
    message: str = ""
    identity: str | None = None
    feedback: bool = False
    cause: str | None = None
    reason: str | None = None


@dataclass
class PolicyTracker:
    """Per-execution bookkeeping of one loop policy (fresh for every execution).

    Attributes:
        policy: the policy in force.
        revision: workspace revision (successful write-effect outcomes so far).
        recovery_attempts: labelled feedback turns given.
        progress_key: last sampled progress key (None before the first sample).
        unchanged_progress: samples in a row equal to the previous one.
        progress_changed: the progress key changed at least once.
    """

    policy: LoopPolicy
    revision: int = 0
    recovery_attempts: int = 0
    progress_key: str | None = None
    unchanged_progress: int = 0
    progress_changed: bool = False
    observation_count: int = 0
    effects: int = 0
    _admissions: dict[str, str] = field(default_factory=dict)
    _signatures: set[str] = field(default_factory=set)
    _read_counts: dict[str, int] = field(default_factory=dict)
    _read_results: dict[str, str | None] = field(default_factory=dict)
    _read_warned: set[str] = field(default_factory=set)
    _write_blocked: set[str] = field(default_factory=set)
    _write_progress: dict[str, str | None] = field(default_factory=dict)
    _write_results: dict[str, list[str | None]] = field(default_factory=dict)
    _round: dict[str, str] = field(default_factory=dict)
    _call_identity: dict[str, tuple[str, str]] = field(default_factory=dict)

    # ---------------------------------------------------------------- admission

    def begin_round(self) -> None:
        """Start a model response's round of calls (identical calls in it are one admission)."""
        self._round = {}

    def is_read(self, tool_name: str, effect: str) -> bool:
        """Whether the call gets read treatment (declared ``read``, and allow-listed if a list is set)."""
        if effect != "read":
            return False
        allowed = self.policy.read_only_tools
        return allowed is None or tool_name in allowed

    def repeats(self, tool_name: str, effect: str, fingerprint: str) -> bool:
        """True when a write/unknown call with this fingerprint would repeat an admitted
        action (the host may then sample the progress key before :meth:`admit`)."""
        if self.is_read(tool_name, effect):
            return False
        return f"w:{fingerprint}:{self.revision}" in self._admissions

    def admit(self, call_id: str, tool_name: str, effect: str, arguments: Any, *,
              fingerprint: str | None = None, progress_now: str | None = None) -> Admission:
        """Decide whether a validated, permitted call may be dispatched.

        Args:
            call_id: the model's call id.
            tool_name: the tool.
            effect: the tool's declared effect (``read``, ``write``, ``unknown``).
            arguments: the decoded arguments (fingerprinted here when ``fingerprint`` is
                not given, within the seed's bound of ``MAX_FINGERPRINT_BYTES``).
            fingerprint: the call's identity computed by the host
                (:func:`amos.policy.canonical.call_identity`, the same digest, unbounded).
            progress_now: the progress key sampled just now (for a repeated write/unknown
                action: changed since the earlier one → not a repeat).

        Returns:
            An :class:`Admission`. ``run`` admissions are counted against ``max_tracked``.
        """
        bound = self.policy.max_tracked
        if len(self._admissions) >= bound or len(self._signatures) >= bound or self.observation_count >= bound:
            return Admission("stop", f"the loop policy's tracking bound of {bound} actions per execution "
                             "was reached", cause="policy_stop", reason="tracking_bound")
        fp = fingerprint if fingerprint is not None else action_fingerprint(tool_name, arguments)
        if fp is None:
            return Admission("stop", f"the arguments of {tool_name} ({call_id}) cannot be fingerprinted "
                             f"(not strict JSON or over {MAX_FINGERPRINT_BYTES // 1024} KiB), so the "
                             "policy cannot tell whether it repeats an action", cause="policy_stop",
                             reason="unfingerprintable")
        first = self._round.get(fp)
        if first is not None:
            return Admission("blocked", f"blocked: identical to call {first} in the same response, which is "
                             "the one admission of this action; it was not run again")
        self._round[fp] = call_id
        self._signatures.add(fp)
        if self.is_read(tool_name, effect):
            return self._admit_read(call_id, fp)
        identity = f"w:{fp}:{self.revision}"
        earlier = self._admissions.get(identity)
        if earlier is not None and self._moved_since(identity, progress_now):
            earlier = None  # not a repeat: its result or the progress key changed since (polling progress)
            self._write_blocked.discard(identity)
        if earlier is not None and identity in self._write_blocked:
            return Admission("stop", f"{tool_name} was requested again, identical to call {earlier}, after the "
                             "host refused to repeat it", identity=identity, cause="policy_stop",
                             reason="repeated_action")
        if earlier is not None:
            self._write_blocked.add(identity)
            return Admission("blocked", f"blocked: identical to call {earlier}, already admitted in this "
                             "execution; since then no write ran, the host's progress key did not change and "
                             "its result was the same as before — a write or command is never repeated on "
                             "that evidence alone: check its result, or change something first")
        self._admissions[identity] = call_id
        self._write_progress[identity] = self.progress_key
        self._call_identity[call_id] = ("w", identity)
        return Admission("run", identity=identity)

    def _moved_since(self, identity: str, progress_now: str | None = None) -> bool:
        """A write/unknown action whose world moved since it was admitted (issue 17 item 13):
        the progress key changed since (sampled after its round, and now), or its last two
        results differ (output, exit code)."""
        now = progress_now if progress_now is not None else self.progress_key
        if now is not None and identity in self._write_progress and self._write_progress[identity] not in (None, now):
            return True
        results = self._write_results.get(identity, [])
        return len(results) >= 2 and (results[-1] != results[-2] or results[-1] is None)

    def _admit_read(self, call_id: str, fp: str) -> Admission:
        identity = f"r:{fp}:{self.effects}:{self.progress_key}"
        count = self._read_counts.get(identity, 0) + 1
        if count <= self.policy.max_repeated_reads:
            self._read_counts[identity] = count
            self._admissions[f"{identity}#{count}"] = call_id
            self._call_identity[call_id] = ("r", identity)
            return Admission("run", identity=identity)
        if identity not in self._read_warned:
            self._read_warned.add(identity)
            return Admission("blocked", f"blocked: this exact read already ran {count - 1} times with nothing "
                             "changed; its result is above — use it, or read something different",
                             identity=identity, feedback=True)
        return Admission("stop", "the same read was requested again after the host's feedback that it "
                         "repeats with nothing changed", identity=identity, cause="policy_stop",
                         reason="repeated_action")

    def release(self, call_id: str) -> None:
        """Release the admission of a call whose outcome is ``not_started`` (it never ran)."""
        kind_identity = self._call_identity.pop(call_id, None)
        if kind_identity is None:
            return
        kind, identity = kind_identity
        if kind == "w":
            self._admissions.pop(identity, None)
        else:
            count = self._read_counts.get(identity, 0)
            if count:
                self._admissions.pop(f"{identity}#{count}", None)
                self._read_counts[identity] = count - 1
        for fp, cid in list(self._round.items()):
            if cid == call_id:
                del self._round[fp]

    # ---------------------------------------------------------------- observation

    def observe(self, call_id: str, tool_name: str, effect: str, status: str, completion: str,
                result: Any = None) -> Literal["ok", "failure", "uncertain"]:
        """Record one outcome.

        Args:
            call_id / tool_name / effect: the call.
            status: the framework outcome status (spec/tools.md).
            completion: ``complete`` or ``unknown``.
            result: the tool's JSON result (reads: compared with the previous one).

        Returns:
            ``uncertain`` for a write/unknown whose completion is unknown (the run must
            stop ``uncertain_effect``), ``failure`` for a failed/timed-out/denied
            outcome, else ``ok``.
        """
        self.observation_count += 1
        if status == "not_started":
            self.release(call_id)
            return "ok"
        kind_identity = self._call_identity.get(call_id)
        if kind_identity and kind_identity[0] == "r" and status == "succeeded":
            identity = kind_identity[1]
            rfp = result_fingerprint(result)
            previous = self._read_results.get(identity)
            if rfp is None or (identity in self._read_results and previous != rfp):
                self._read_counts[identity] = 1  # a changed result is progress: the count starts again
                self._read_warned.discard(identity)
            self._read_results[identity] = rfp
        if kind_identity and kind_identity[0] == "w" and status == "succeeded":
            results = self._write_results.setdefault(kind_identity[1], [])
            results.append(result_fingerprint(result))
            del results[:-2]
        if effect != "read" and completion == "unknown":
            return "uncertain"
        if status == "succeeded" and effect != "read":
            self.effects += 1
            if effect == "write":
                self.revision += 1
        if status in FAILURE_STATUSES:
            return "failure"
        return "ok"

    def sample_progress(self, key: str) -> bool:
        """Record a progress-key sample after a tool batch.

        Returns:
            True when the key stayed unchanged for ``max_unchanged_progress`` samples
            in a row (the counter then starts again).
        """
        if self.progress_key is None:  # the first sample is the state after the actions admitted so far
            for identity, seen in self._write_progress.items():
                if seen is None:
                    self._write_progress[identity] = key
        if self.progress_key is not None and key == self.progress_key:
            self.unchanged_progress += 1
        else:
            if self.progress_key is not None:
                self.progress_changed = True
            self.unchanged_progress = 0
        self.progress_key = key
        if self.unchanged_progress >= self.policy.max_unchanged_progress:
            self.unchanged_progress = 0
            return True
        return False

    # ---------------------------------------------------------------- recovery

    def try_recover(self) -> bool:
        """Spend one recovery attempt; False when the budget is already spent."""
        if self.recovery_attempts >= self.policy.max_recovery_attempts:
            return False
        self.recovery_attempts += 1
        return True

    _STATE_SETS = ("_signatures", "_read_warned", "_write_blocked")
    _STATE_DICTS = ("_admissions", "_read_counts", "_read_results", "_call_identity", "_write_progress",
                    "_write_results")
    _STATE_SCALARS = ("revision", "effects", "recovery_attempts", "progress_key", "unchanged_progress",
                      "progress_changed", "observation_count")

    def to_state(self) -> dict[str, Any]:
        """JSON state to carry an execution across an approval pause (bounded by ``max_tracked``)."""
        state: dict[str, Any] = {name: getattr(self, name) for name in self._STATE_SCALARS}
        state.update({name.lstrip("_"): sorted(getattr(self, name)) for name in self._STATE_SETS})
        state.update({name.lstrip("_"): dict(getattr(self, name)) for name in self._STATE_DICTS})
        return state

    @classmethod
    def from_state(cls, policy: LoopPolicy, state: Mapping[str, Any] | None, *,
                   recovery_attempts: int = 0) -> PolicyTracker:
        """A tracker resumed from :meth:`to_state` (a fresh one when ``state`` is None or unreadable)."""
        tracker = cls(policy, recovery_attempts=recovery_attempts)
        if not state:
            return tracker
        try:
            for name in cls._STATE_SCALARS:
                if name in state:
                    setattr(tracker, name, state[name])
            for name in cls._STATE_SETS:
                setattr(tracker, name, set(state.get(name.lstrip("_"), ())))
            for name in cls._STATE_DICTS:
                value = dict(state.get(name.lstrip("_"), {}))
                if name == "_call_identity":
                    value = {k: tuple(v) for k, v in value.items()}
                setattr(tracker, name, value)
        except (TypeError, ValueError):
            return cls(policy, recovery_attempts=recovery_attempts)
        tracker.recovery_attempts = max(tracker.recovery_attempts, recovery_attempts)
        return tracker

    def counts(self) -> dict[str, int | None]:
        """Tracked counts and their bound, for diagnostics."""
        return {
            "admissions": len(self._admissions),
            "signatures": len(self._signatures),
            "observations": self.observation_count,
            "max_tracked": self.policy.max_tracked,
            "workspace_revision": self.revision,
        }


def feedback_text(kind: RecoveryKind, body: str, attempt: int, limit: int) -> str:
    """The labelled host-feedback message of one recovery turn.

    The label makes it impossible to mistake for the person's prompt or model text.
    """
    title = {
        "failure": "a tool call failed",
        "repeated_read": "a read was repeated with nothing changed",
        "progress": "the host progress key has not changed",
        "completion": "the completion check did not confirm the work is done",
    }[kind]
    return (f"[amos host feedback — loop policy, recovery {attempt}/{limit}: {title}]\n{body.strip()}\n"
            "Choose a safe correction. Nothing is retried automatically; do not repeat an action that "
            "may already have happened.")
