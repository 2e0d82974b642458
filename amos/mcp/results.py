"""MCP results as amos text: tool results, prompt messages, resource contents.

Issue 18, "Tools": text blocks are the text; structured content is kept as the JSON
result (and shown when there is no text); images, audio, blobs and resource links are
a one-line placeholder until amos supports them (``[image: image/png, 1234 bytes — not
shown]``). Works on the SDK's pydantic objects by attribute (``type``, ``text``…), so this
module does not import the SDK.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

MAX_SUMMARY_CHARS = 2000
PREVIEW_LINES = 12


def _blob_bytes(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def render_block(block: Any) -> str:
    """One content block (text, image, audio, resource link, embedded resource) as text."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", None) or "unknown type"
        return f"[{kind}: {mime}, {_blob_bytes(getattr(block, 'data', ''))} bytes — not shown]"
    if kind == "resource_link":
        name = getattr(block, "name", None)
        return f"[resource link: {getattr(block, 'uri', '?')}{f' ({name})' if name else ''}]"
    if kind == "resource":
        return render_resource_contents(getattr(block, "resource", None))
    return f"[{kind or 'unknown'} content — not shown]"


def render_resource_contents(contents: Any) -> str:
    """One ``TextResourceContents`` (its text) or ``BlobResourceContents`` (a placeholder)."""
    uri = getattr(contents, "uri", "?")
    text = getattr(contents, "text", None)
    if isinstance(text, str):
        return text
    mime = getattr(contents, "mime_type", None) or "unknown type"
    return f"[resource {uri}: {mime}, {_blob_bytes(getattr(contents, 'blob', ''))} bytes — not shown]"


def render_call_result(result: Any) -> tuple[Any, str]:
    """A ``CallToolResult`` as ``(result value, text the model sees)``.

    Returns:
        ``(text, text)`` for content only; ``({"text": …, "structured_content": …}, text)``
        when the server sent structured content (the text is its JSON when the server
        sent no content blocks).
    """
    parts = [render_block(block) for block in (getattr(result, "content", None) or [])]
    text = "\n".join(parts)
    structured = getattr(result, "structured_content", None)
    if structured is None:
        return text, text
    if not text.strip():
        text = json.dumps(structured, ensure_ascii=False, default=str)
    return {"text": text, "structured_content": structured}, text


def render_result_text(result: Any) -> str:
    """The text of a result value made by :func:`render_call_result` (the ``Tool.render``)."""
    if isinstance(result, dict) and isinstance(result.get("text"), str):
        return result["text"]
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def summarize_result(result: Any) -> str:
    """Evidence projection of a large MCP result: its size and first lines."""
    text = render_result_text(result)
    lines = text.splitlines()
    preview = "\n".join(lines[:PREVIEW_LINES])
    more = f"\n… {len(lines) - PREVIEW_LINES} more lines" if len(lines) > PREVIEW_LINES else ""
    out = f"{len(text.encode('utf-8', 'replace'))} bytes, {len(lines)} lines; first lines:\n{preview}{more}"
    return out if len(out) <= MAX_SUMMARY_CHARS else out[: MAX_SUMMARY_CHARS - 1] + "…"


def render_prompt(result: Any) -> str:
    """A ``GetPromptResult`` as one user prompt.

    One user message is its text; several are joined by blank lines, and a message of
    another role starts with ``[ROLE]`` so the model still sees who said it.
    """
    messages = list(getattr(result, "messages", None) or [])
    if len(messages) == 1 and getattr(messages[0], "role", "user") == "user":
        return render_block(getattr(messages[0], "content", None))
    out = []
    for message in messages:
        role = getattr(message, "role", "user")
        text = render_block(getattr(message, "content", None))
        out.append(text if role == "user" else f"[{role}]\n{text}")
    return "\n\n".join(out)


def render_resource(result: Any) -> str:
    """A ``ReadResourceResult``: each content's text (placeholders for blobs), blank-line separated."""
    return "\n\n".join(render_resource_contents(c) for c in (getattr(result, "contents", None) or []))


__all__ = ["render_block", "render_call_result", "render_result_text", "summarize_result",
           "render_prompt", "render_resource", "render_resource_contents"]
