"""Host-owned task notes and the instructions of every request (seeds/protected-task-state.txt).

:class:`Instructions` is the system prompt plus, with task state enabled, the current
task view — rebuilt from the notebook for every request, so it is always present and
current at dispatch and never compacted. :meth:`Instructions.update_tasks` is the one
way a host edit reaches the notebook (revision-checked operations; the model can
never overwrite it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amos.engine.binding import SessionBinding
from amos.engine.transcript import Transcript
from amos.errors import SessionError
from amos.tasks import TaskState


class Instructions:
    """The system prompt and the task notebook of one session.

    Args:
        system_prompt: the built system prompt (built-in or configured + project files).
        tasks: the notebook, or None when ``task_state.enabled`` is false.
        transcript: the session (the notebook's snapshot is kept in it).
        binding: where the session is saved after a host edit.
        mode_note: what the mode in force adds to the system prompt ("" for none).
    """

    def __init__(self, system_prompt: str, tasks: TaskState | None, transcript: Transcript,
                 binding: SessionBinding, mode_note: Callable[[], str] | None = None):
        self._system_prompt = system_prompt
        self.tasks = tasks
        self.transcript = transcript
        self.binding = binding
        self.mode_note = mode_note

    @property
    def system_prompt(self) -> str:
        """The system prompt, with what the mode in force adds (plan mode; issue 19)."""
        note = self.mode_note() if self.mode_note is not None else ""
        return f"{self._system_prompt}\n\n{note}" if note else self._system_prompt

    def text(self) -> str:
        """The instructions of the next model request."""
        if self.tasks is None:
            return self.system_prompt
        return f"{self.system_prompt}\n\n{self.tasks.view()}"

    def task_view(self) -> str:
        """The task view alone ("" with task state off)."""
        return self.tasks.view() if self.tasks is not None else ""

    def update_tasks(self, operation: Callable[[TaskState], Any]) -> Any:
        """Apply one host operation to the notebook and save the session.

        Args:
            operation: ``fn(task_state) -> result`` calling one revision-checked method.

        Returns:
            What ``operation`` returned.

        Raises:
            SessionError: ``no_task_state`` when disabled.
            TaskStateError: the operation failed (nothing changed).
        """
        if self.tasks is None:
            raise SessionError("no_task_state", "task state is not enabled (task_state.enabled in the config)")
        result = operation(self.tasks)
        self.transcript.set(task_state=self.tasks.to_snapshot())
        if self.binding.saved:
            self.binding.save(self.transcript.session)
        return result

    def snapshot_into_session(self) -> None:
        """Keep the notebook's current snapshot in the session (at a run's end)."""
        if self.tasks is not None:
            self.transcript.session.task_state = self.tasks.to_snapshot()
