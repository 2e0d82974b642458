"""Deciding completion: the one place a run is judged done (issue 16; spec/stop-receipts.md).

A run claims completion by answering (a turn with no tool calls) or by calling the
configured done tool. The host then decides, with the checks in force
(:class:`CheckPlan`: ``--verify``, the session's remembered check, or the config's
``loop_policy.completion``):

1. no check and no person configured → ``answer_returned`` (ANSWERED); an empty answer
   (no text, no calls) → one recovery nudge with a loop policy, then ``empty_answer``
   (UNCERTAIN);
2. the host checks run; one that cannot give a verdict (exit 126/127, a signal, a
   timeout, an unreadable file, a verifier that raises) → ``checker_error``
   (UNCERTAIN), never a recovery turn spent on the model;
3. a check that says no → a recovery turn while the loop policy's budget lasts, then
   ``recovery_exhausted``; without a policy ``check_failed`` (FALSE_COMPLETE); an empty
   answer → nudge, then ``empty_answer``;
4. checks that pass, with ``completion.human`` → WAITING for a person's confirmation;
5. checks that pass → ``completed`` (VERIFIED_COMPLETE) — unless they already passed at
   the run's baseline and the workspace's digest did not change:
   ``check_already_passing`` (ANSWERED).

The baseline is taken once per execution, before the first model call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from amos.engine.masking import Masker
from amos.engine.permissions import Approvals
from amos.engine.policy_gate import PolicyGate
from amos.engine.settings import RunSettings
from amos.engine.state import RunState
from amos.engine.tasks import Instructions
from amos.engine.transcript import Transcript
from amos.engine.workspace_digest import WorkspaceDigest, digest_workspace
from amos.events import ConfirmationRequested, Notice
from amos.loop_guard import make_packet
from amos.messages import Message
from amos.policy.loop_policy import CompletionSpec, LoopPolicy, feedback_text
from amos.policy.stop import CheckInForce, CompletionResult
from amos.policy.verifiers import CheckerError, run_completion_checks
from amos.sessions import ConfirmationRequest

Source = Literal["flag", "session", "config", "demo", "none"]


@dataclass(frozen=True)
class CheckPlan:
    """The completion checks in force for one execution.

    Attributes:
        spec: the checks the host runs (command, files, require_tools, python), or None.
        human: a person confirms completion.
        done_tool: the done tool's name, or None.
        baseline: take a baseline before the first model call.
        source: where the checks came from (flag, session, config, none).
        timeout_s: limit of a Python checker (seconds).
    """

    spec: CompletionSpec | None = None
    human: bool = False
    done_tool: str | None = None
    baseline: bool = True
    source: Source = "none"
    timeout_s: float = 30.0

    @property
    def machine(self) -> bool:
        """True when the host runs some check."""
        return self.spec is not None and self.spec.configured

    @property
    def configured(self) -> bool:
        """True when a check or a person must confirm completion."""
        return self.machine or self.human

    def summary(self) -> str:
        """The checks in one line, e.g. ``command `pytest -q` + files report.json``."""
        parts = []
        spec = self.spec
        if spec is not None:
            if spec.command:
                parts.append(f"command `{spec.command}`")
            if spec.files:
                from amos.policy.destinations import FileCheck

                parts.append("files " + ", ".join(FileCheck.of(f).describe() for f in spec.files))
            if spec.require_tools:
                parts.append("tools " + ", ".join(spec.require_tools) + " succeeded")
            if spec.python:
                parts.append(f"python {spec.python}")
        if self.human:
            parts.append("a person confirms")
        return " + ".join(parts) or "none"


@dataclass(frozen=True)
class Claim:
    """A completion claim: how it was made and what the model said."""

    route: Literal["answer", "done_tool"]
    text: str

    @property
    def empty(self) -> bool:
        """An answer with no text (and, being an answer, no tool calls)."""
        return self.route == "answer" and not self.text.strip()


class Completion:
    """Runs the completion checks and records the verdict.

    Args:
        settings: ``verify``, its source, ``verify_timeout_s``, interactivity, routing.
        workspace: where checks run.
        env: the child environment of checks (no provider keys).
        transcript: the session (a check must not race a change to it).
        instructions: the task notebook (its snapshot is in the checker packet).
        approvals: where an interactive confirmation is answered.
        masker: secrets masked in check output.
        config_completion: the config's ``loop_policy.completion`` (read afresh by
            :meth:`remember` when the session forgets its check).
    """

    def __init__(self, settings: RunSettings, workspace: Path, env: Mapping[str, str], transcript: Transcript,
                 instructions: Instructions, approvals: Approvals, masker: Masker,
                 config_completion: Any = None):
        self.settings = settings
        self.config_completion = config_completion
        self.workspace = workspace
        self.env = env
        self.transcript = transcript
        self.instructions = instructions
        self.approvals = approvals
        self.masker = masker

    # ------------------------------------------------------------------ the plan

    def plan(self, policy: LoopPolicy | None) -> CheckPlan:
        """The checks in force for an execution under ``policy`` (the loop policy's
        completion, else ``--verify`` / the remembered check alone)."""
        settings = self.settings
        if policy is not None:
            spec = policy.completion
            human = bool(spec and spec.human) or settings.human
            configured = bool(spec and spec.configured) or human
            source: Source = settings.verify_source if settings.verify or settings.human else (
                "config" if configured else "none")
            return CheckPlan(spec=spec, human=human, done_tool=spec.done_tool if spec else None,
                             baseline=spec.baseline if spec else True, source=source,
                             timeout_s=policy.checker_timeout_s)
        spec = CompletionSpec(command=settings.verify, timeout_s=settings.verify_timeout_s) if settings.verify else None
        configured = spec is not None or settings.human
        return CheckPlan(spec=spec, human=settings.human, source=settings.verify_source if configured else "none")

    def remember(self, command: str | None) -> None:
        """The check the session remembers: ``command`` (``human``: a person confirms), or
        None to forget it (the config's ``completion.command`` then applies).

        Raises:
            UsageError: a blank command.
        """
        from amos.engine.options import HUMAN_VERIFY
        from amos.errors import UsageError

        settings = self.settings
        if command is not None:
            if self.masker.text(command) != command:
                # the masked text would run instead of the command: refuse, store nothing
                raise UsageError("the check holds a secret value (an API key or token), which is never stored; "
                                 "refer to its variable instead, e.g. /verify 'test -n \"$MY_TOKEN\"'")
            command = self.masker.clean(command).strip()
            if not command:
                raise UsageError("/verify needs a command that exits 0 when the work is done, 'human', or 'off'")
            if command != HUMAN_VERIFY and shell_cannot_parse(command):
                raise UsageError(f"the shell cannot parse the check {command!r}; give a command line that exits 0 "
                                 "when the work is done")
        completion = self.config_completion
        configured = completion.command if completion is not None else None
        settings.human = command == HUMAN_VERIFY
        settings.verify = None if settings.human else (command or configured)
        settings.verify_source = "session" if command else ("config" if configured else "none")
        self.transcript.session.host.verify = command
        self.transcript.fields("host")

    def check_view(self, plan: CheckPlan, run: RunState) -> CheckInForce:
        """The receipt's ``check``: which check decided, where it came from, how it began."""
        rec = run.record
        return CheckInForce(summary=self.masker.text(plan.summary()), source=plan.source if plan.configured else "none",
                            route=rec.claim_route, baseline=rec.baseline, workspace_changed=run.workspace_changed,
                            confirmed_by=rec.confirmed_by)

    # ------------------------------------------------------------------ the baseline

    async def baseline(self, run: RunState, gate: PolicyGate | None, plan: CheckPlan) -> None:
        """Evaluate the checks once before the first model call (kept across a pause)."""
        rec = run.record
        if rec.baseline is not None or not plan.machine:
            return
        if not plan.baseline:
            rec.baseline = "skipped"
            return
        try:
            result = await self._run_checks(run, gate, plan)
        except CheckerError as exc:
            rec.baseline = "error"
            missing = self._missing_program(plan)
            if missing is not None:  # a typo in --verify: say so now, not after the model's work
                run.stop("checker_error", "checker_error",
                         f"the completion check cannot run: {missing!r} is not a command on PATH ({exc}); fix the "
                         "check (--verify, /verify or loop_policy.completion.command) — no model call was made")
                return
            if await asyncio.to_thread(self._unparsable, plan):  # no work can make the line itself parse
                run.stop("checker_error", "checker_error",
                         f"the completion check cannot run: the shell cannot parse the command itself ({exc}); fix "
                         "the check (--verify, /verify or loop_policy.completion.command) — no model call was made")
                return
            run.emit(Notice(level="warning",
                            text=f"completion baseline: the check cannot run yet ({exc}); the run goes on"))
            return
        rec.baseline = "passed" if result.complete else "failed"
        pins = await asyncio.to_thread(self._pin_check_files, plan)
        digest = await asyncio.to_thread(digest_workspace, self.workspace)
        rec.baseline_digest = {"sha256": digest.sha256, "files": digest.files, "truncated": digest.truncated,
                               **({"check_files": pins} if pins else {})}
        if result.complete:
            run.emit(Notice(text="completion baseline: the check already passes before the run; only a change "
                                 "to the workspace can make this run VERIFIED_COMPLETE"))
        else:
            run.emit(Notice(text=f"completion baseline: the check fails before the run ({result.reason})"))

    def _pin_check_files(self, plan: CheckPlan) -> dict[str, str]:
        from amos.engine.check_files import check_files, pin_files

        command = plan.spec.command if plan.spec is not None else None
        return pin_files(check_files(command, self.workspace), self.workspace)

    def _tampered(self, rec) -> list[str]:
        """Files the check command runs that changed since the baseline (amos/engine/check_files.py)."""
        from amos.engine.check_files import changed_files

        pins = (rec.baseline_digest or {}).get("check_files")
        return changed_files(pins, self.workspace) if isinstance(pins, dict) and pins else []

    def _unparsable(self, plan: CheckPlan) -> bool:
        """True when ``sh -n`` rejects the check's command line itself (``;``, ``if true; then``),
        as opposed to a script it runs, which the model may still fix."""
        command = plan.spec.command if plan.spec is not None else None
        return bool(command) and shell_cannot_parse(command or "")

    def _missing_program(self, plan: CheckPlan) -> str | None:
        """The check command's program when it is a bare name that is neither on PATH, a
        shell builtin or keyword, nor a file in the workspace (so no work can create it)."""
        import shlex
        import shutil

        command = plan.spec.command if plan.spec is not None else None
        if not command:
            return None
        try:
            words = shlex.split(command)
        except ValueError:
            return None
        while words and "=" in words[0] and not words[0].startswith("="):  # VAR=value cmd
            words = words[1:]
        if not words:
            return None
        program = words[0].rstrip(";&|")
        if not program or "/" in program or program in _SHELL_WORDS or (self.workspace / program).exists():
            return None
        if shutil.which(program, path=self.env.get("PATH")) is not None:
            return None
        return program

    # ------------------------------------------------------------------ a claim

    async def decide(self, run: RunState, gate: PolicyGate | None, plan: CheckPlan, claim: Claim) -> bool:
        """A completion claim: run the checks and record the verdict.

        Returns:
            True when the run stopped; False after host feedback was appended (a
            recovery turn, a nudge after an empty answer, a person's rejection).
        """
        rec = run.record
        rec.claim_route = claim.route
        if not plan.configured:
            if claim.empty:
                return self._empty(run, gate, None)
            unknown = [f"{r['tool']} {r['call_id']}" for r in rec.tool_calls if r.get("completion") == "unknown"]
            if unknown:  # no check can tell what state the work is in (README exit-code table, row 8)
                run.stop("policy_stop", "uncertain_effect",
                         f"the model answered, but {', '.join(unknown[:5])} may or may not have happened "
                         "(timed out or cut off) and no completion check is configured to tell")
                return True
            run.stop("answer", "answer_returned",
                     "the model answered; " + ("the loop policy has no completion check" if gate is not None
                                               else "no completion check is configured"))
            return True
        changed: bool | None = None
        if plan.machine:
            # The workspace is compared before the check runs: a check that writes (a log,
            # a stamp) must not make a run that did nothing look like it changed something.
            changed = await asyncio.to_thread(self._workspace_changed, rec)
            still = await asyncio.to_thread(self._unchanged_since_failing, rec, plan.spec)
            tampered = await asyncio.to_thread(self._tampered, rec)
            if tampered:  # the check may have been rewritten to pass: it cannot confirm
                rec.completion = CompletionResult(complete=None, reason="not run: the run changed the check's own "
                                                                        f"files ({', '.join(tampered[:5])})")
                run.stop("checker_error", "check_tampered",
                         f"the run changed {', '.join(tampered[:5])}, which the completion check "
                         f"{self.masker.text(plan.summary())} runs, so its verdict cannot confirm the work; review "
                         "the change (and amos diff / /undo when snapshots are on)")
                return True
            run.emit(Notice(text=f"completion check: running {self.masker.text(plan.summary())}"))
            before = len(self.transcript.messages)
            try:
                result = await self._run_checks(run, gate, plan)
            except CheckerError as exc:
                text = self.masker.text(str(exc))
                rec.completion = CompletionResult(complete=None, reason=f"the check could not give a verdict: {text}")
                run.stop("checker_error", "checker_error", f"the completion check could not give a verdict: {exc}")
                return True
            if len(self.transcript.messages) != before:
                run.stop("policy_stop", "state_changed",
                         "the session changed while the completion check ran, so its verdict cannot confirm")
                return True
            rec.completion = result
            if not result.complete:
                run.emit(Notice(level="warning", text=f"completion check: not done — {result.reason}"))
                if claim.empty:
                    return self._empty(run, gate, result)
                if gate is not None:
                    return gate.apply(run, gate.guard.recover_completion(result))
                run.stop("answer", "check_failed",
                         f"the model {self._claimed(claim)} but the completion check "
                         f"{self.masker.text(plan.summary())} failed ({result.reason})")
                return True
            if result.complete and still:
                # it failed before the run and passes now, yet nothing was changed: the check
                # is not deterministic (time, a stamp it writes, the network) and proves nothing
                rec.completion = result.model_copy(update={"complete": None, "reason": "passed, but nothing changed "
                                                                                       "since it failed"})
                run.stop("checker_error", "check_unstable",
                         f"the completion check {self.masker.text(plan.summary())} failed before the run and passes "
                         "now, but the run changed nothing (no successful write or command, the same workspace "
                         "files): the check is not deterministic, so it cannot confirm the work")
                return True
            if claim.empty and rec.baseline == "passed" and changed is False:
                # the check passed before the run and nothing changed: it says nothing about
                # an empty reply, which is no answer (README "Empty answers are not answers")
                return self._empty(run, gate, None)
        if plan.human:
            return await self._ask_person(run, gate, plan, claim)
        return self._passed(run, plan, claim, changed)

    def _claimed(self, claim: Claim) -> str:
        return "called the done tool" if claim.route == "done_tool" else "answered"

    def _passed(self, run: RunState, plan: CheckPlan, claim: Claim, changed: bool | None) -> bool:
        rec = run.record
        run.workspace_changed = changed
        run.emit(Notice(phase="complete", text="completion check passed: the host confirmed the work is done"))
        if rec.baseline == "passed" and changed is False:
            run.stop("answer", "check_already_passing",
                     f"the completion check {self.masker.text(plan.summary())} passes, but it already passed before "
                     "this run and the workspace did not change: nothing shows this run did the work")
            return True
        how = (" (failing → passing)" if rec.baseline == "failed"
               else " (it already passed before the run; the workspace changed)" if rec.baseline == "passed" else "")
        run.stop("answer", "completed",
                 f"the model {self._claimed(claim)} and every host completion check confirmed{how}")
        return True

    def _unchanged_since_failing(self, rec, spec: CompletionSpec | None) -> bool:
        """True when the baseline failed and, since, no call did work (a write that changed
        a byte, a command that exited 0) and the workspace's files are the same (so a
        passing check now proves nothing)."""
        digest = rec.baseline_digest or {}
        if rec.baseline != "failed" or rec.work_done or "sha256" not in digest:
            return False
        if spec is None or spec.python or spec.require_tools:  # those look at the run, not the files
            return False
        then = WorkspaceDigest(digest["sha256"], int(digest.get("files", 0)), bool(digest.get("truncated")))
        return digest_workspace(self.workspace).same_as(then)

    def _workspace_changed(self, rec) -> bool | None:
        if rec.baseline != "passed" or rec.baseline_digest is None:
            return None
        now = digest_workspace(self.workspace)
        then = WorkspaceDigest(rec.baseline_digest["sha256"], int(rec.baseline_digest.get("files", 0)),
                               bool(rec.baseline_digest.get("truncated")))
        return not now.same_as(then)

    def _empty(self, run: RunState, gate: PolicyGate | None, result: CompletionResult | None) -> bool:
        """An answer with no text and no tool calls: one nudge with a policy, then UNCERTAIN."""
        rec = run.record
        if gate is not None and not rec.empty_nudged and gate.guard.tracker.try_recover():
            rec.empty_nudged = True
            rec.recovery_attempts = gate.guard.tracker.recovery_attempts
            body = ("Your last reply had no text and no tool calls, so it is not an answer. Say what you did "
                    "and what is left, or call a tool to go on.")
            if result is not None and result.feedback:
                body += "\n" + result.feedback
            text = feedback_text("completion", body, rec.recovery_attempts, gate.policy.max_recovery_attempts)
            self.transcript.append(Message.user(text, kind="feedback"))
            run.emit(Notice(level="warning", phase="recovering",
                            text=f"loop: recovering ({rec.recovery_attempts}/{gate.policy.max_recovery_attempts})"
                                 " — the model's reply was empty"))
            return False
        run.stop("answer", "empty_answer", "the model's final reply had no text and no tool calls"
                 + (" and the completion check did not pass" if result is not None else "")
                 + "; an empty reply is not an answer")
        return True

    # ------------------------------------------------------------------ checks

    async def _run_checks(self, run: RunState, gate: PolicyGate | None, plan: CheckPlan) -> CompletionResult:
        """Every machine check of the plan.

        Raises:
            CheckerError: some check could not give a verdict.
        """
        spec = plan.spec
        assert spec is not None
        checker = gate.guard.checker if gate is not None else None  # python checkers need a loop policy
        rec = run.record
        tasks = self.instructions.tasks
        packet = make_packet(execution_id=rec.execution_id, iteration=rec.steps, output_text=rec.output_text,
                             observations=list(rec.observations), workspace=self.workspace,
                             task_state=tasks.to_snapshot() if tasks is not None else None)
        result = await run_completion_checks(
            spec, workspace=self.workspace, env=self.env, observations=list(rec.observations), checker=checker,
            packet=packet, checker_timeout_s=plan.timeout_s)
        masked = {name: self.masker.text(getattr(result, name)) for name in ("reason", "feedback", "output")
                  if getattr(result, name)}
        return result.model_copy(update=masked) if masked else result

    # ------------------------------------------------------------------ a person as the receipt

    async def _ask_person(self, run: RunState, gate: PolicyGate | None, plan: CheckPlan, claim: Claim) -> bool:
        """``completion.human``: ask now (interactive) or end WAITING for a person."""
        text = self.masker.clean(claim.text)[:2000]
        if not self.settings.interactive:
            from amos.approvals import new_confirmation

            run.pending = new_confirmation(run.record, text, owner=self.settings.approvals_owner,
                                           deadline_s=self.settings.approvals_deadline_s)
            run.stop("approval_required", "confirmation_pending",
                     "the host checks passed and a person must confirm the work is done "
                     f"(amos resume {self.transcript.session.id} --confirm | --reject REASON)")
            return True
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.approvals.waiting[CONFIRMATION_ID] = future
        run.emit(ConfirmationRequested(claim=text, route=claim.route,
                                       resume_token=f"{self.transcript.session.id}:{run.execution_id}:"
                                                    f"{CONFIRMATION_ID}"))
        try:
            confirmed, reason, _ = await future
        finally:
            self.approvals.waiting.pop(CONFIRMATION_ID, None)
        return await self.apply_confirmation(run, gate, plan, ConfirmationRequest(
            claim=text, decision="confirm" if confirmed else "reject", reason=reason, by=local_person()))

    async def apply_confirmation(self, run: RunState, gate: PolicyGate | None, plan: CheckPlan,
                                 request: ConfirmationRequest) -> bool:
        """A person's answer to a completion claim.

        A confirmation runs the machine checks again first: the workspace may have
        changed while the claim waited (a file deleted after the question was asked), and
        a person's "yes" never outweighs a host check that now fails (issue 16).

        Returns:
            True when the run stopped (confirmed, or a check no longer passes); False
            after the rejection's reason was given to the model as host feedback.
        """
        rec = run.record
        if request.decision == "confirm":
            rec.confirmed_by = request.by or local_person()
            changed: bool | None = None
            if plan.machine:
                changed = await asyncio.to_thread(self._workspace_changed, rec)
                try:
                    result = await self._run_checks(run, gate, plan)
                except CheckerError as exc:
                    run.stop("checker_error", "checker_error",
                             f"{rec.confirmed_by} confirmed, but the completion check could not give a verdict: {exc}")
                    return True
                rec.completion = result
                if not result.complete:
                    run.stop("answer", "check_failed",
                             f"{rec.confirmed_by} confirmed, but the completion check "
                             f"{self.masker.text(plan.summary())} no longer passes ({result.reason}); the "
                             "workspace changed while the claim waited")
                    return True
                run.workspace_changed = changed
                if rec.baseline == "passed" and changed is False:
                    run.stop("answer", "check_already_passing",
                             f"{rec.confirmed_by} confirmed, but the completion check "
                             f"{self.masker.text(plan.summary())} already passed before this run and the "
                             "workspace did not change: nothing shows this run did the work")
                    return True
            run.stop("answer", "confirmed", f"{rec.confirmed_by} confirmed the work is done")
            return True
        reason = self.masker.clean(request.reason or "no reason given")
        body = f"A person reviewed your completion claim and rejected it: {reason}"
        if gate is not None:
            if not gate.guard.tracker.try_recover():
                run.stop("recovery_exhausted", "recovery_exhausted",
                         f"a person rejected the completion claim ({reason}) and the recovery budget is spent")
                return True
            rec.recovery_attempts = gate.guard.tracker.recovery_attempts
            text = feedback_text("completion", body, rec.recovery_attempts, gate.policy.max_recovery_attempts)
        else:
            text = f"[amos host feedback — a person rejected the completion claim]\n{body}"
        self.transcript.append(Message.user(text, kind="feedback"))
        run.emit(Notice(level="warning", phase="recovering", text=f"completion rejected by a person: {reason}"))
        return False


_SHELL_WORDS = frozenset((
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until", "do", "done", "in", "function",
    "select", "time", "{", "}", "!", "[[", "]]", ".", ":", "[", "alias", "bg", "bind", "break", "builtin", "cd",
    "command", "compgen", "complete", "continue", "declare", "dirs", "disown", "echo", "enable", "eval", "exec",
    "exit", "export", "false", "fc", "fg", "getopts", "hash", "help", "history", "jobs", "kill", "let", "local",
    "logout", "popd", "printf", "pushd", "pwd", "read", "readonly", "return", "set", "shift", "shopt", "source",
    "suspend", "test", "times", "trap", "true", "type", "typeset", "ulimit", "umask", "unalias", "unset", "wait",
))
"""Shell keywords and builtins: a check starting with one is not a missing program."""


CONFIRMATION_ID = "confirmation"
"""The id an interactive confirmation is answered under (``Host.answer_confirmation``)."""


def local_person() -> str:
    """Who is at this terminal (``AMOS_USER``, else the login name)."""
    import os

    from amos.evidence.model import local_user_name

    return os.environ.get("AMOS_USER") or local_user_name()


def shell_cannot_parse(command: str) -> bool:
    """True when ``sh -n -c COMMAND`` rejects the command line (seconds: at most 5; a shell
    that cannot be started counts as parsing, so a check is never refused for that)."""
    import subprocess

    try:
        return subprocess.run(["sh", "-n", "-c", command], capture_output=True, timeout=5,
                              stdin=subprocess.DEVNULL).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return False

