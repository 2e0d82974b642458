"""The task-state part of :class:`~amos.runner.AgentRunner` (a mixin).

The instructions of each request (system prompt plus the current task view), the
offline size estimate of a request, and the host API that edits the notebook
(seeds/protected-task-state.txt). Uses the runner's ``tasks``, ``system_prompt``,
``session``, ``tools`` and ``store``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amos.errors import SessionError


class TaskDuties:
    """Task-state host API of the runner."""

    tasks: Any
    system_prompt: str
    session: Any
    tools: Any
    store: Any
    _ensure_idle: Callable[[], None]  # provided by AgentRunner
    _journal_fields: Callable[..., None]  # provided by JournalDuties

    def request_system_prompt(self) -> str:
        """The instructions of the next model request: the system prompt plus, with task
        state enabled, the current task view (rebuilt from the notebook every time, so it
        is always present and current at dispatch; never compacted)."""
        if self.tasks is None:
            return self.system_prompt
        return f"{self.system_prompt}\n\n{self.tasks.view()}"

    def update_tasks(self, operation: Callable[[Any], Any]) -> Any:
        """Apply one host operation to the task notebook and save the session.

        Args:
            operation: ``fn(task_state) -> result`` calling one revision-checked method.

        Returns:
            What ``operation`` returned.

        Raises:
            SessionError: ``busy`` while a run executes, ``no_task_state`` when disabled.
            TaskStateError: the operation failed (nothing changed).
        """
        self._ensure_idle()
        if self.tasks is None:
            raise SessionError("no_task_state", "task state is not enabled (task_state.enabled in the config)")
        result = operation(self.tasks)
        self.session.task_state = self.tasks.to_snapshot()
        self._journal_fields("task_state")
        if self.store is not None:
            self.store.save(self.session)
        return result
