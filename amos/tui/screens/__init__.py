"""Screens of the amos TUI, one per module with its ``.tcss`` beside it (STYLE.md §5)."""
