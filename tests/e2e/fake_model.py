"""A loopback stand-in for the Anthropic Messages API that plays a script.

The real Claude Code binary is pointed at it with ANTHROPIC_BASE_URL. It answers

- ``POST /v1/messages?beta=true`` with a streamed SSE reply (``message_start``, per content
  block ``content_block_start`` / ``content_block_delta`` (``text_delta`` or
  ``input_json_delta``) / ``content_block_stop``, then ``message_delta`` with the stop reason
  and ``message_stop``), or a plain JSON message when the request has ``"stream": false``;
- ``.../count_tokens`` with ``{"input_tokens": N}``;
- requests that carry no ``tools`` (side queries: titles, summaries, topic checks) with a short
  plain text, without touching the script.

The script, its lanes (the main agent and each subagent) and the recording are script.py's;
``engram(tool, ...)`` names an Engram tool as Claude Code does, ``dispatch(...)`` starts a
subagent with the Agent tool. Every ``tool_use`` block gets a fresh ``toolu_<uuid>`` id: a
resumed session that sees a reused id silently drops the new result (the model gets "(no
content)"). Tests put a lane's marker in the agent's definition body and/or the dispatch
prompt, so routing never depends on Claude Code's own prompt wording.

Everything is recorded (``FakeModel.requests``): the path, the parsed body, the lane, and which
script step answered it, so a test asserts on exactly what the model received.

Request shapes seen from the real binary (Claude Code 2.1.197; the hook behaviour is written
up in conftest.py's docstring and pinned by test_harness_facts.py):

- Every model call is a streamed ``POST /v1/messages?beta=true`` with ``tools``; with
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 a ``-p`` run sent no side queries and no
  count_tokens calls at all (both are still handled).
- ``system`` is a list of text blocks; the main agent's starts with a billing header
  ``cc_version=...; cc_entrypoint=sdk-cli;``, a subagent's adds ``cc_is_subagent=true;`` and
  then carries the agent definition's body. A subagent only gets the tools its front matter
  lists.
- ``messages`` starts with the user's prompt (after a ``<system-reminder>`` text block with the
  date), then a message with role ``system`` (agent and skill listings, and the
  SessionStart/UserPromptSubmit hooks' additionalContext), then the assistant/user exchanges.
  The results of one batch come back in one user message: all ``tool_result`` blocks first
  (``content`` a string or a list of text blocks, ``is_error`` only when true), then one
  ``<system-reminder>`` text block per PreToolUse/PostToolUse additionalContext.
- A hook's deny reaches the model as ``{"type": "tool_result", "content": "<the reason>",
  "is_error": true}``, the reason verbatim.
- ``/compact`` sends one request with the main agent's tools whose last user message asks to
  "create a detailed summary of the conversation"; answered here with a fixed summary.

Newer builds (Claude Code 2.1.332) defer MCP tools behind a ``ToolSearch`` tool unless
ENABLE_TOOL_SEARCH=false: the request's ``tools`` lack them, and a system message lists them
under "The following deferred tools are now available via ToolSearch". A real model loads a
tool (``ToolSearch`` with ``select:<name>``) before calling it, so this stand-in does too: a
reply that calls a deferred tool is held back, a ``ToolSearch`` call is answered in its place,
and the held reply answers the lane's next request (``FakeModel.load_deferred = False`` calls
deferred tools directly, which those builds also run). Scripts never count the extra request.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from script import BaseRequest, Reply, Response, ScriptedModel, Step, after, call, text, tool_uses

__all__ = ["Reply", "Request", "Step", "ToolResult", "after", "call", "dispatch", "engram", "text", "tool_uses"]
# /compact's summary request (2.1.197): the last user message holds this instruction; it is answered
# here, outside the script, so scripts never have to count it.
COMPACT_MARKER = "create a detailed summary of the conversation"
DEFERRED_HEADER = "The following deferred tools are now available via ToolSearch"
COMPACT_SUMMARY = (
    "<analysis>The user searched project memory.</analysis>\n<summary>1. Primary Request: work on myapp with "
    "memory from Engram.\n2. Pending Tasks: none.</summary>"
)


# -- building replies --------------------------------------------------------------------


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    """A tool_use block for the Engram stand-in: engram("mem_search", query="jwt")."""
    return call(f"mcp__engram__{tool}", tool_input)


def dispatch(subagent_type: str, prompt: str, description: str = "Delegated task", background: bool | None = None,
             also: tuple[dict[str, Any], ...] = ()) -> Step:  # fmt: skip
    """The main agent's reply that starts a subagent: the Agent tool (named Task in older builds).

    `background` sets `run_in_background` where the tool has it (2.1.332 runs agents in the
    background unless told false; 2.1.197 has no such input). `also`: more calls in the batch."""

    def reply(request: Request) -> Reply:
        name = "Agent" if "Agent" in request.tools or "Task" not in request.tools else "Task"
        tool_input: dict[str, Any] = {"description": description, "prompt": prompt, "subagent_type": subagent_type}
        if background is not None and "run_in_background" in request.tool_schema(name).get("properties", {}):
            tool_input["run_in_background"] = background
        return tool_uses(call(name, tool_input), *also)

    return reply


# -- what was received -------------------------------------------------------------------


def _block_text(content: Any) -> str:
    """The text of a message's or tool_result's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "tool_result":
                    parts.append(_block_text(block.get("content")))
        return "\n".join(parts)
    return ""


class ToolResult:
    """One tool_result block as the model received it."""

    def __init__(self, block: dict[str, Any], name: str | None, tool_input: dict[str, Any] | None) -> None:
        self.block = block
        self.tool_use_id: str = block.get("tool_use_id", "")
        self.is_error: bool = bool(block.get("is_error", False))
        self.text: str = _block_text(block.get("content"))
        self.name = name  # the tool_use it answers (looked up in the preceding assistant message)
        self.input = tool_input

    def __repr__(self) -> str:
        return f"ToolResult({self.name!r}, is_error={self.is_error}, text={self.text[:80]!r})"


class Request(BaseRequest):
    """One recorded request to /v1/messages."""

    # the parts of the request
    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tools(self) -> list[str]:
        return [t.get("name", "") for t in self.body.get("tools") or [] if isinstance(t, dict)]

    def tool_schema(self, name: str) -> dict[str, Any]:
        for tool in self.body.get("tools") or []:
            if isinstance(tool, dict) and tool.get("name") == name:
                return dict(tool.get("input_schema") or {})
        return {}

    @property
    def deferred_tools(self) -> list[str]:
        """Tools offered only through ToolSearch (listed by name in a system message)."""
        names: list[str] = []
        for part in self.all_text().split(DEFERRED_HEADER)[1:]:
            lines = part.split("\n")[1:]
            for line in lines:
                if not line.strip():
                    break
                names.append(line.strip())
        return names

    @property
    def system(self) -> str:
        system = self.body.get("system")
        return system if isinstance(system, str) else _block_text(system)

    @property
    def first_user_text(self) -> str:
        for message in self.messages:
            if message.get("role") == "user":
                return _block_text(message.get("content"))
        return ""

    @property
    def last_user(self) -> dict[str, Any]:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return message
        return {}

    def all_text(self) -> str:
        """Every text the model was given in this request (system + all messages)."""
        return self.system + "\n" + "\n".join(_block_text(m.get("content")) for m in self.messages)

    def tool_uses_by_id(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for message in self.messages:
            if message.get("role") == "assistant" and isinstance(message.get("content"), list):
                for block in message["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        out[block.get("id", "")] = block
        return out

    def tool_results(self) -> list[ToolResult]:
        """The tool_result blocks of the last user message (the results of the last batch)."""
        return self._results([self.last_user])

    def all_tool_results(self) -> list[ToolResult]:
        """Every tool_result in the conversation so far (earlier batches and turns too)."""
        return self._results([m for m in self.messages if m.get("role") == "user"])

    def _results(self, messages: list[dict[str, Any]]) -> list[ToolResult]:
        uses = self.tool_uses_by_id()
        out = []
        for message in messages:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    use = uses.get(block.get("tool_use_id", ""), {})
                    out.append(ToolResult(block, use.get("name"), use.get("input")))
        return out

    def last_user_extra_text(self) -> str:
        """Text blocks of the last user message that are not tool results (system reminders, hook context)."""
        content = self.last_user.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(
            str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
        )


# -- the server --------------------------------------------------------------------------


class FakeModel(ScriptedModel):
    """The Messages API stand-in. Use as a context manager, or start()/stop(). Thread-safe."""

    def handle(self, method: str, path: str, body: Any) -> Response:
        bare = path.split("?", 1)[0]
        if method != "POST" or not bare.endswith(("/v1/messages", "/count_tokens")):
            self.other.append((method, path, body))
            return Response.json({"type": "error", "error": {"type": "not_found_error", "message": bare}}, 404)
        if bare.endswith("/count_tokens"):
            self.other.append((method, path, body))
            return Response.json({"input_tokens": max(1, len(json.dumps(body)) // 4)})
        request = Request(len(self.requests), path, body if isinstance(body, dict) else {})
        if not request.body.get("tools"):
            self.record_side_query(request)
            reply = text("OK.")
        elif COMPACT_MARKER in _block_text(request.last_user.get("content")):
            # /compact: Claude Code asks the model (with the main agent's tools) for a summary.
            reply = self.next_reply(request, lane="compact")
        else:
            reply = self.next_reply(request)
        blocks = _blocks(reply)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        model_name = request.body.get("model", "claude-fake")
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}  # fmt: skip
        if not request.body.get("stream"):
            return Response.json({"id": message_id, "type": "message", "role": "assistant", "model": model_name,
                                  "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage})  # fmt: skip
        return Response.sse(_sse(message_id, model_name, blocks, stop, usage))

    load_deferred = True  # load a deferred tool with ToolSearch before calling it, as a model does

    def __init__(self) -> None:
        super().__init__()
        self._held: dict[str, tuple[Reply, int | None]] = {}  # lane -> the reply sent after its ToolSearch

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self._held = {}
            self.load_deferred = True

    def remaining(self) -> dict[str, int]:
        left = super().remaining()
        with self.lock:
            for lane in self._held:
                left[lane] = left.get(lane, 0) + 1
        return left

    def next_reply(self, request: Any, lane: str | None = None) -> Reply:
        if lane == "compact":
            with self.lock:
                self.requests.append(request)
                request.lane = "compact"
            request.reply = text(COMPACT_SUMMARY)
            return request.reply
        lane = lane or self.lane_of(request)
        with self.lock:
            held = self._held.pop(lane, None)
            if held is not None:
                self.requests.append(request)
                request.lane, request.step = lane, held[1]
        if held is not None:
            request.reply = held[0]
            return held[0]
        reply = super().next_reply(request, lane)
        calls = [c["name"] for c in reply.get("calls", [])]
        deferred = [n for n in dict.fromkeys(calls) if n not in request.tools and n in request.deferred_tools]
        if self.load_deferred and deferred and "ToolSearch" in request.tools:
            with self.lock:
                self._held[lane] = (reply, request.step)
            request.reply = tool_uses(call("ToolSearch", {"query": "select:" + ",".join(deferred)}))
        return request.reply


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.get("text"):
        blocks.append({"type": "text", "text": reply["text"]})
    for c in reply.get("calls", []):
        blocks.append({"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex}", "name": c["name"], "input": c["input"]})
    if not blocks:
        blocks.append({"type": "text", "text": "Done."})
    return blocks


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def _sse(message_id: str, model: str, blocks: list[dict[str, Any]], stop: str, usage: dict[str, int]) -> list[str]:
    out = [
        _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        ),
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            out.append(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                      "content_block": {"type": "text", "text": ""}}))  # fmt: skip
            out.append(_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                      "delta": {"type": "text_delta", "text": block["text"]}}))  # fmt: skip
        else:
            out.append(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                      "content_block": {"type": "tool_use", "id": block["id"],
                                                                        "name": block["name"], "input": {}}}))  # fmt: skip
            out.append(_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))  # fmt: skip
        out.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(_event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                        "usage": {"output_tokens": usage["output_tokens"]}}))  # fmt: skip
    out.append(_event("message_stop", {"type": "message_stop"}))
    return out
