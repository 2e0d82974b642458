"""Modal screens that answer once.

A fast typist or a paste can deliver two keys before the first ``dismiss()`` has popped
the screen; a second ``dismiss()`` then raised Textual's ``ScreenStackError`` and ended
the app. A :class:`DismissOnce` screen makes every dismissal after the first a no-op.
"""

from __future__ import annotations

from typing import Any, TypeVar

from textual.screen import ModalScreen

ResultT = TypeVar("ResultT")


class DismissOnce(ModalScreen[ResultT]):
    """A ``ModalScreen`` whose first ``dismiss`` counts; later ones do nothing."""

    _answered = False

    def dismiss(self, result: Any = None) -> Any:
        """Dismiss with ``result`` the first time; later calls do nothing.

        Returns:
            What ``ModalScreen.dismiss`` returns the first time, else None.
        """
        if self._answered:
            return None
        self._answered = True
        return super().dismiss(result)
