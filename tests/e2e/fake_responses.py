"""A loopback stand-in for the OpenAI Responses API that plays a script (for Codex CLI).

Codex is pointed at it by a model provider in a throwaway CODEX_HOME's config.toml
(``base_url = "<url>/v1"``, ``wire_api = "responses"``); Codex appends ``/responses``. It
answers

- ``POST .../responses`` with one Response object when the request does not ask for ``stream``
  (the OpenAI Agents SDK's ``Runner.run``), else with a streamed SSE reply: ``response.created``, one
  ``response.output_item.done`` per output item (an assistant ``message`` with ``output_text``,
  or a ``function_call``), then ``response.completed`` with the usage;
- anything else (a model list, a compaction endpoint) with 404, recorded in ``other``.

The script, its lanes and the recording are script.py's, in the same vocabulary as
fake_model.py: ``text``, ``tool_uses``, ``call``. A call is written as Codex names the tool to
its hooks (``mcp__engram__mem_search``); the stand-in sends it the way Codex's model would,
as a ``function_call`` in the tool's namespace (``namespace: "mcp__engram"``, ``name:
"mem_search"``). A plain name (``spawn_agent``) is sent without a namespace. Every call gets a
fresh ``call_<uuid>`` id.

Request shapes seen from the real binary (Codex 0.171.0, ``codex exec --json``):

- ``instructions`` is the system prompt; ``input`` is the conversation: ``message`` items
  (roles ``developer`` and ``user``, content ``input_text``; the first user messages carry
  AGENTS.md and an ``<environment_context>`` block, then the prompt), the model's own
  ``function_call`` items, and ``function_call_output`` items (``call_id``, ``output``: a
  string, or a list of ``input_text`` items).
- ``tools`` lists functions; an MCP server's tools come as one ``{"type": "namespace",
  "name": "mcp__engram", "tools": [...]}`` entry.
- A hook's ``additionalContext`` arrives as a separate ``developer`` message.
- Compaction (``/compact``, or the context passing ``model_auto_compact_token_limit``) sends
  a request whose last user message asks for a summary (``COMPACT_MARKER``); it is answered
  here, outside the script, with ``COMPACT_SUMMARY``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from script import BaseRequest, Reply, Response, ScriptedModel, Step, call, text, tool_uses

__all__ = ["Reply", "Request", "Step", "ToolResult", "call", "engram", "text", "tool_uses"]

COMPACT_MARKER = "CONTEXT CHECKPOINT COMPACTION"
COMPACT_SUMMARY = "Summary: the user searched project memory for myapp; nothing is pending."


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    """A call of the Engram stand-in's tool: engram("mem_search", query="jwt")."""
    return call(f"mcp__engram__{tool}", tool_input)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


WALL_TIME = "Wall time: "  # Codex's header before a tool's own output ("Wall time: 0.0052 seconds\nOutput:")


class ToolResult:
    """One ``function_call_output`` as the model received it, with the call it answers.

    ``raw`` is everything the model got; ``text`` is the tool's part of it, without the
    "Wall time ... Output:" header Codex puts before a result it ran (a refusal or a hook's
    replacement comes as a plain string, with no header: ``ran`` is False then)."""

    def __init__(self, item: dict[str, Any], name: str | None, tool_input: dict[str, Any] | None) -> None:
        self.item = item
        self.tool_use_id: str = str(item.get("call_id", ""))
        output = item.get("output")
        self.raw: str = _content_text(output)
        parts = [p for p in output if isinstance(p, dict)] if isinstance(output, list) else []
        self.ran = bool(parts) and str(parts[0].get("text", "")).startswith(WALL_TIME)
        self.text: str = _content_text(parts[1:]) if self.ran else self.raw
        self.name = name  # as Codex names it to hooks: mcp__<server>__<tool>, or the plain function name
        self.input = tool_input

    def __repr__(self) -> str:
        return f"ToolResult({self.name!r}, text={self.text[:80]!r})"


class Request(BaseRequest):
    """One recorded request to /responses."""

    @property
    def input(self) -> list[dict[str, Any]]:
        return [item for item in self.body.get("input") or [] if isinstance(item, dict)]

    @property
    def system(self) -> str:
        """The instructions and every developer message (a subagent's role instructions are one)."""
        return "\n".join([str(self.body.get("instructions") or ""), *self.messages("developer")])

    def messages(self, role: str | None = None) -> list[str]:
        return [_content_text(item.get("content")) for item in self.input
                if item.get("type") == "message" and (role is None or item.get("role") == role)]  # fmt: skip

    @property
    def first_user_text(self) -> str:
        """Every user message before the first tool call (Codex sends context blocks before the prompt)."""
        out = []
        for item in self.input:
            if item.get("type") == "function_call":
                break
            if item.get("type") == "message" and item.get("role") == "user":
                out.append(_content_text(item.get("content")))
        return "\n".join(out)

    @property
    def last_user_text(self) -> str:
        users = self.messages("user")
        return users[-1] if users else ""

    @property
    def tools(self) -> list[str]:
        """Tool names as Codex names them to hooks (a namespace's tools as <namespace>__<name>)."""
        names = []
        for tool in self.body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace":
                names += [
                    f"{tool.get('name')}__{t.get('name')}" for t in tool.get("tools") or [] if isinstance(t, dict)
                ]
            elif tool.get("name"):
                names.append(str(tool["name"]))
        return names

    @property
    def namespaces(self) -> list[str]:
        return [
            str(t.get("name"))
            for t in self.body.get("tools") or []
            if isinstance(t, dict) and t.get("type") == "namespace"
        ]

    def all_text(self) -> str:
        return self.system + "\n" + "\n".join(self.messages())

    def calls_by_id(self) -> dict[str, dict[str, Any]]:
        return {str(item.get("call_id")): item for item in self.input if item.get("type") == "function_call"}

    def all_tool_results(self) -> list[ToolResult]:
        calls = self.calls_by_id()
        out = []
        for item in self.input:
            if item.get("type") != "function_call_output":
                continue
            made = calls.get(str(item.get("call_id")), {})
            name = made.get("name")
            if made.get("namespace"):
                name = f"{made['namespace']}__{name}"
            try:
                arguments = json.loads(made.get("arguments") or "{}")
            except ValueError:
                arguments = None
            out.append(ToolResult(item, name, arguments if isinstance(arguments, dict) else None))
        return out

    def tool_results(self) -> list[ToolResult]:
        """The outputs after the model's last reply (the results of the last batch)."""
        items = self.input
        last_reply = max((i for i, item in enumerate(items) if item.get("type") == "function_call"), default=-1)
        first_of_batch = last_reply
        while first_of_batch > 0 and items[first_of_batch - 1].get("type") == "function_call":
            first_of_batch -= 1
        batch = {str(item.get("call_id")) for item in items[first_of_batch:] if item.get("type") == "function_call"}
        return [r for r in self.all_tool_results() if r.tool_use_id in batch]


class FakeResponses(ScriptedModel):
    """The Responses API stand-in. Use as a context manager, or start()/stop(). Thread-safe.

    `total_tokens` is the usage every reply reports: set it past the provider's
    `model_auto_compact_token_limit` to make Codex compact before its next request."""

    total_tokens = 15

    def handle(self, method: str, path: str, body: Any) -> Response:
        bare = path.split("?", 1)[0]
        if method != "POST" or not bare.endswith("/responses"):
            self.other.append((method, path, body))
            return Response.json({"error": {"message": f"not served here: {bare}", "type": "not_found"}}, 404)
        request = Request(len(self.requests), path, body if isinstance(body, dict) else {})
        if COMPACT_MARKER in request.last_user_text or COMPACT_MARKER in request.system:
            with self.lock:
                self.requests.append(request)
                request.lane = "compact"
            reply = text(COMPACT_SUMMARY)
            request.reply = reply
        else:
            reply = self.next_reply(request)
        if not request.body.get("stream"):  # the OpenAI Agents SDK's Runner.run asks for one object
            return Response.json(_response(reply, self.total_tokens, request.namespaces, request.body))
        return Response.sse(_sse(reply, self.total_tokens, request.namespaces))


def _event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


def _items(reply: Reply, namespaces: list[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.get("text"):
        items.append({"type": "message", "role": "assistant", "id": f"msg_{uuid.uuid4().hex[:16]}",
                      "content": [{"type": "output_text", "text": reply["text"]}]})  # fmt: skip
    for made in reply.get("calls", []):
        item = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:16]}", "call_id": f"call_{uuid.uuid4().hex}",
                "arguments": json.dumps(made["input"])}  # fmt: skip
        name = made["name"]
        namespace = next((ns for ns in namespaces if name.startswith(ns + "__")), None)
        if namespace:  # the model calls a namespaced tool by its namespace and its own name
            item.update(namespace=namespace, name=name[len(namespace) + 2 :])
        else:
            item["name"] = name
        items.append(item)
    if not items:
        items.append({"type": "message", "role": "assistant", "id": f"msg_{uuid.uuid4().hex[:16]}",
                      "content": [{"type": "output_text", "text": "Done."}]})  # fmt: skip
    return items


def _usage(total_tokens: int) -> dict[str, Any]:
    return {"input_tokens": total_tokens - 5, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": total_tokens}  # fmt: skip


def _response(reply: Reply, total_tokens: int, namespaces: list[str], body: dict[str, Any]) -> dict[str, Any]:
    """The whole reply as one Response object (a request without ``stream``)."""
    output = _items(reply, namespaces)
    for item in output:  # the fields the SDK's typed Response requires of each item
        item["status"] = "completed"
        for part in item.get("content", []):
            part.setdefault("annotations", [])
    return {"id": f"resp_{uuid.uuid4().hex[:16]}", "object": "response", "created_at": 0, "status": "completed",
            "model": str(body.get("model") or "gpt-4.1"), "output": output,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": _usage(total_tokens)}  # fmt: skip


def _sse(reply: Reply, total_tokens: int, namespaces: list[str]) -> list[str]:
    response_id = f"resp_{uuid.uuid4().hex[:16]}"
    out = [_event({"type": "response.created", "response": {"id": response_id}})]
    out += [_event({"type": "response.output_item.done", "item": item}) for item in _items(reply, namespaces)]
    usage = {"input_tokens": total_tokens - 5, "input_tokens_details": None, "output_tokens": 5,
             "output_tokens_details": None, "total_tokens": total_tokens}  # fmt: skip
    out.append(_event({"type": "response.completed", "response": {"id": response_id, "usage": usage}}))
    return out
