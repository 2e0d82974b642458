"""Text a front end shows that never went through a run, masked as the host masks (issue 21).

A custom command's expanded prompt is printed by ``amos run --json`` (``prompt``) next to
the line as typed; it must carry no provider key or MCP secret, exactly like the prompt
the session stores (:meth:`Host.run` masks it the same way).
"""

from __future__ import annotations

from typing import Any


def masked_text(host: Any, text: str) -> str:
    """``text`` made valid UTF-8 and masked with the host's secrets (``[REDACTED]``).

    Args:
        host: the :class:`~amos.engine.Host`.
        text: any text a front end is about to show.
    """
    return host.engine.masker.clean(text)
