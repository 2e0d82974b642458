"""amos: a terminal agent shell that can prove why it stopped."""

__version__ = "0.1.0"
