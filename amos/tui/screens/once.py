"""Modal screens that answer once.

A fast typist or a paste can deliver two keys before the first ``dismiss()`` has popped
the screen; a second ``dismiss()`` then raised Textual's ``ScreenStackError`` and ended
the app. A :class:`DismissOnce` screen makes every dismissal after the first a no-op;
:class:`YesOrNo` is the y / anything-else question on top of it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from textual import events
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


class YesOrNo(DismissOnce[bool]):
    """A one-question modal: ``y`` dismisses with True, any other key or a click with False."""

    def on_key(self, event: events.Key) -> None:
        """``y`` is yes; every other key is no (and does nothing else)."""
        event.stop()
        event.prevent_default()
        self.dismiss(event.key == "y")

    def on_click(self, event: events.Click) -> None:
        """A click anywhere is no."""
        event.stop()
        self.dismiss(False)
