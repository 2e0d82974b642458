"""The model's evidence tools: ``evidence_read`` and ``evidence_list`` (spec/tools.md).

Present only when evidence is enabled; effect ``read``, permission ``allow``, never
captured as evidence themselves. ``evidence_read`` returns chunks of a record's exact
serialized JSON after integrity verification (offsets in Unicode code points;
concatenating chunks rebuilds it exactly); ``evidence_list`` returns metadata pages
only — no results, no arguments (seeds/durable-tool-evidence.txt "Read, persist, and
inspect").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from pydantic import Field, model_validator

from amos.evidence.model import EvidenceError, EvidenceReference, coerce_reference
from amos.evidence.store import EvidenceStore
from amos.tools.base import Tool, ToolArgs, ToolContext, ToolFailure

MAX_READ_CHARS = 65536
DEFAULT_READ_CHARS = 16384


class EvidenceReadArgs(ToolArgs):
    """Arguments of ``evidence_read``: exactly one of ``id`` or ``reference``."""

    id: str | None = Field(default=None, description="Evidence id (from a projected result or evidence_list).")
    reference: Any = Field(default=None, description="A full evidence reference object, instead of id.")
    offset: int = Field(default=0, ge=0, description="First character (Unicode code point) to return.")
    limit: int = Field(default=DEFAULT_READ_CHARS, ge=1, le=MAX_READ_CHARS,
                       description="Most characters to return (at most 65536).")

    @model_validator(mode="after")
    def _one_selector(self) -> EvidenceReadArgs:
        if (self.id is None) == (self.reference is None):
            raise ValueError("give exactly one of 'id' or 'reference'")
        return self


class EvidenceListArgs(ToolArgs):
    """Arguments of ``evidence_list``."""

    after: str | None = Field(default=None, description="Cursor: the 'next' value of the previous page.")
    limit: int = Field(default=50, ge=1, le=100, description="Entries per page (at most 100).")


def evidence_tools(store: EvidenceStore, known: Callable[[str], EvidenceReference | None] | None = None
                   ) -> list[Tool]:
    """``evidence_read`` and ``evidence_list`` bound to ``store``.

    Args:
        store: the scoped store.
        known: looks up the reference the session itself recorded for an id; when it
            has one, reads are verified against it too, so rewriting a record *and* its
            index entry is still detected within the session.
    """

    def resolve(record_id: str) -> EvidenceReference:
        ref = store.get_reference(record_id)
        pinned = known(ref.id) if known is not None else None
        if pinned is not None and (pinned.sha256, pinned.size) != (ref.sha256, ref.size):
            raise EvidenceError("corrupt", f"evidence {ref.id} no longer matches the SHA-256 this session "
                                           "recorded for it")
        return ref

    async def read(args: EvidenceReadArgs, ctx: ToolContext) -> Any:
        def work() -> Any:
            ref = coerce_reference(args.reference) if args.reference is not None else resolve(args.id)
            chunk = store.read_text_chunk(ref, args.offset, args.limit)
            return chunk.to_dict()

        try:
            return await asyncio.to_thread(work)
        except EvidenceError as exc:
            raise ToolFailure(f"evidence {exc.code}: {exc}") from None

    async def listing(args: EvidenceListArgs, ctx: ToolContext) -> Any:
        try:
            return (await asyncio.to_thread(store.list, args.after, args.limit)).to_dict()
        except EvidenceError as exc:
            raise ToolFailure(f"evidence {exc.code}: {exc}") from None

    return [
        Tool(
            name="evidence_read",
            description=("Read the exact stored result of an earlier tool call, in chunks. A projected "
                         "result names its evidence id; pass it as 'id' and follow 'next_offset' until it "
                         "is null. The text is the record's exact JSON; integrity is verified first."),
            args_model=EvidenceReadArgs, effect="read", run=read, default_permission="allow",
            summarize=lambda a: f"{a.id or 'reference'} @{a.offset}", render=_compact, loop_key=False,
        ),
        Tool(
            name="evidence_list",
            description=("List stored evidence records (metadata only: id, tool, call id, status, size), "
                         "oldest first; pass the page's 'next' as 'after' for the next page."),
            args_model=EvidenceListArgs, effect="read", run=listing, default_permission="allow",
            summarize=lambda a: f"after {a.after}" if a.after else "first page", render=_compact, loop_key=False,
        ),
    ]


def _compact(result: Any) -> str:
    return json.dumps(result, ensure_ascii=False)
