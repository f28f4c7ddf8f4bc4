"""A loopback stand-in for the OpenAI Chat Completions API that plays a script.

Any harness that speaks Chat Completions to a configurable base URL is pointed at it (Copilot
CLI with COPILOT_PROVIDER_BASE_URL, OpenCode with a custom provider's baseURL). It answers

- ``POST .../chat/completions`` with the next scripted reply: streamed as server-sent events
  when the request has ``"stream": true`` (a first chunk with the role, the text as one
  ``delta.content`` chunk, each tool call as a ``delta.tool_calls`` chunk carrying its id, type
  and name followed by one with its ``arguments``, a last chunk with ``finish_reason``, a usage
  chunk when ``stream_options.include_usage`` asks for it, then ``data: [DONE]``), or as one
  ``chat.completion`` object otherwise;
- ``GET .../models`` with a list naming the model of the last request (or ``MODEL``);
- requests that carry no ``tools`` (side queries: titles, summaries) with a short text, outside
  the script.

The script, its lanes and the recording are script.py's (``text``, ``tool_uses``, ``call``;
tool names as the harness names them to the model, e.g. ``engram-mem_search`` for Copilot).
Each tool call gets a fresh ``call_<hex>`` id. Everything is recorded (``FakeChat.requests``),
so a test asserts on what the model received: ``Request.tool_results()`` are the ``role:
"tool"`` messages that answer the last assistant message's tool calls, with the call's name
and arguments looked up by ``tool_call_id``.

Chat Completions has no error flag on a tool result: a harness that reports a failed or
refused call does so in the text (``ToolResult.text``); tests read it there.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from script import BaseRequest, Reply, Response, ScriptedModel, Step, call, text, tool_uses

__all__ = ["MODEL", "FakeChat", "Reply", "Request", "Step", "ToolResult", "call", "text", "tool_uses"]
MODEL = "gpt-4.1"  # what GET /models lists before any request named a model


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts ({"type": "text", "text"})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


class ToolResult:
    """One ``role: "tool"`` message as the model received it, with the call it answers."""

    def __init__(self, message: dict[str, Any], name: str | None, tool_input: dict[str, Any] | None) -> None:
        self.message = message
        self.tool_use_id: str = str(message.get("tool_call_id", ""))
        self.text: str = content_text(message.get("content"))
        self.name = name
        self.input = tool_input

    def __repr__(self) -> str:
        return f"ToolResult({self.name!r}, text={self.text[:80]!r})"


class Request(BaseRequest):
    """One recorded request to /chat/completions."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [m for m in self.body.get("messages") or [] if isinstance(m, dict)]

    @property
    def tools(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict):
                names.append(str(function.get("name", "")))
        return names

    @property
    def system(self) -> str:
        return "\n".join(content_text(m.get("content")) for m in self.messages if m.get("role") in ("system",
                                                                                                      "developer"))  # fmt: skip

    @property
    def first_user_text(self) -> str:
        for message in self.messages:
            if message.get("role") == "user":
                return content_text(message.get("content"))
        return ""

    def all_text(self) -> str:
        """Every text the model was given in this request (all messages, the system prompt included)."""
        return "\n".join(content_text(m.get("content")) for m in self.messages)

    def tool_calls_by_id(self) -> dict[str, dict[str, Any]]:
        """Every tool call the assistant made so far: id -> {"name", "input"}."""
        out: dict[str, dict[str, Any]] = {}
        for message in self.messages:
            for tool_call in message.get("tool_calls") or [] if message.get("role") == "assistant" else []:
                function = tool_call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    arguments = {"(unparsed)": function.get("arguments")}
                out[str(tool_call.get("id", ""))] = {"name": function.get("name"), "input": arguments}
        return out

    def _last_assistant(self) -> int:
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].get("role") == "assistant":
                return index
        return -1

    def tool_results(self) -> list[ToolResult]:
        """The tool messages after the last assistant message (the results of the last batch)."""
        return self._results(self.messages[self._last_assistant() + 1 :])

    def all_tool_results(self) -> list[ToolResult]:
        """Every tool result in the conversation so far (earlier batches and turns too)."""
        return self._results(self.messages)

    def _results(self, messages: list[dict[str, Any]]) -> list[ToolResult]:
        calls = self.tool_calls_by_id()
        out = []
        for message in messages:
            if message.get("role") == "tool":
                made = calls.get(str(message.get("tool_call_id", "")), {})
                out.append(ToolResult(message, made.get("name"), made.get("input")))
        return out

    def after_results_text(self) -> str:
        """Text of the non-tool messages after the last assistant message (context a harness added)."""
        return "\n".join(content_text(m.get("content")) for m in self.messages[self._last_assistant() + 1 :]
                         if m.get("role") != "tool")  # fmt: skip


class FakeChat(ScriptedModel):
    """The Chat Completions stand-in. Use as a context manager, or start()/stop(). Thread-safe."""

    def __init__(self) -> None:
        super().__init__()
        self.model_name = MODEL

    def handle(self, method: str, path: str, body: Any) -> Response:
        bare = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and bare.endswith("/models"):
            self.other.append((method, path, body))
            return Response.json({"object": "list", "data": [{"id": self.model_name, "object": "model",
                                                              "created": 0, "owned_by": "fake-chat"}]})  # fmt: skip
        if method != "POST" or not bare.endswith("/chat/completions"):
            self.other.append((method, path, body))
            return Response.json({"error": {"message": f"no route {method} {bare}", "type": "invalid_request_error"}},
                                 404)  # fmt: skip
        request = Request(len(self.requests), path, body if isinstance(body, dict) else {})
        self.model_name = str(request.body.get("model") or self.model_name)
        if not request.body.get("tools"):
            self.record_side_query(request)
            reply = text("OK.")
        else:
            reply = self.next_reply(request)
        return self.answer(request, reply)

    def answer(self, request: Request, reply: Reply) -> Response:
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        calls = [
            {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c["input"])}}
            for c in reply.get("calls", [])
        ]  # fmt: skip
        content = reply.get("text") or ("" if calls else "Done.")
        finish = "tool_calls" if calls else "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not request.body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": content or None}
            if calls:
                message["tool_calls"] = calls
            return Response.json({"id": completion_id, "object": "chat.completion", "created": created,
                                  "model": self.model_name, "choices": [{"index": 0, "message": message,
                                                                         "finish_reason": finish}], "usage": usage})  # fmt: skip
        include_usage = bool((request.body.get("stream_options") or {}).get("include_usage"))
        return Response.sse(_chunks(completion_id, created, self.model_name, content, calls, finish,
                                    usage if include_usage else None))  # fmt: skip


def _chunks(completion_id: str, created: int, model: str, content: str, calls: list[dict[str, Any]], finish: str,
            usage: dict[str, int] | None) -> list[str]:  # fmt: skip
    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
        data = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}  # fmt: skip
        return f"data: {json.dumps(data)}\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    if content:
        out.append(chunk({"content": content}))
    for index, tool_call in enumerate(calls):
        head = {"index": index, "id": tool_call["id"], "type": "function",
                "function": {"name": tool_call["function"]["name"], "arguments": ""}}  # fmt: skip
        out.append(chunk({"tool_calls": [head]}))
        out.append(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": tool_call["function"]["arguments"]}}]})
        )
    out.append(chunk({}, finish))
    if usage is not None:
        data = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [], "usage": usage}  # fmt: skip
        out.append(f"data: {json.dumps(data)}\n\n")
    out.append("data: [DONE]\n\n")
    return out
