"""The done tool: how a model declares completion when a host asks it to (issue 16).

With ``loop_policy.completion.done_tool: "NAME"`` the model is offered a tool ``NAME``
taking one argument, ``summary``. Calling it ends the loop as a completion claim at
that step (the AI SDK's ``hasToolCall`` stop condition); the host's checks then decide
VERIFIED_COMPLETE or FALSE_COMPLETE (seeds/stop-receipts-fr.txt: ``done`` with a receipt
is verified, ``done`` without one is a false completion). The call's result is written
by the host, after the other calls of its turn ran; it is never dispatched to a tool and
gets no evidence record.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from amos.tools.base import Tool, ToolArgs, ToolContext

MAX_SUMMARY_CHARS = 2000


class DoneArgs(ToolArgs):
    """Arguments of the done tool."""

    summary: str = Field(min_length=1, max_length=MAX_SUMMARY_CHARS,
                         description="One or two sentences: what you did and how the host can see it is done.")


async def _never_run(args: Any, ctx: ToolContext) -> Any:  # pragma: no cover - the engine answers it
    raise RuntimeError("the done tool is answered by the host, never run")


def done_tool(name: str) -> Tool:
    """The done tool called ``name`` (effect ``read``, permission ``allow``, exempt from the
    doom loop: calling it ends the step)."""
    return Tool(
        name=name,
        description=("Call this once, when the task is complete, with a short summary of what you did. The host "
                     "then runs its own checks of the work; if they do not confirm it, you get feedback."),
        args_model=DoneArgs, effect="read", run=_never_run, default_permission="allow",
        summarize=lambda args: f"done: {args.summary[:80]}", loop_key=False)


def claim_text(arguments: Any) -> str:
    """The summary a done call carries (``""`` when it has none)."""
    if isinstance(arguments, dict) and isinstance(arguments.get("summary"), str):
        return arguments["summary"][:MAX_SUMMARY_CHARS]
    return ""
