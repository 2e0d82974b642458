"""A streamable-HTTP MCP server built with the ``mcp`` SDK's own server API, for tests.

Usage: ``python http_server.py PORT TOKEN``. Serves streamable HTTP at
``http://127.0.0.1:PORT/mcp`` and the older SSE transport at ``/sse``, and answers 401
to a request without ``Authorization: Bearer TOKEN``. Offers the tools
``add`` (read-only hint) and ``echo_image``, the prompt ``greet`` and the resource
``memo://hello``.
"""

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent, ToolAnnotations

PORT, TOKEN = int(sys.argv[1]), sys.argv[2]
server = MCPServer("amos-test-http")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo_image(text: str) -> list:
    """Answer with a text and a tiny image."""
    return [text, ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")]


@server.prompt()
def greet(name: str, style: str = "plain") -> str:
    """Greet someone."""
    return f"Say hello to {name} in a {style} way."


@server.resource("memo://hello")
def hello() -> str:
    """A short memo."""
    return "hello from a resource"


app = server.streamable_http_app()
sse = server.sse_app()


async def guarded(scope, receive, send):
    if scope["type"] == "http":
        headers = dict(scope.get("headers") or [])
        if headers.get(b"authorization") != f"Bearer {TOKEN}".encode():
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing or wrong token"})
            return
    if scope["type"] == "http" and scope["path"].startswith(("/sse", "/messages")):
        await sse(scope, receive, send)
    else:
        await app(scope, receive, send)


if __name__ == "__main__":
    uvicorn.run(guarded, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
