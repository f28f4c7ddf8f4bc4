"""The MCP proxy: one governed `tools/call` -> Event, a Decision -> what the proxy does with it.

The proxy (governor.runtime.proxy) stands between any MCP client and the memory server. It
describes each governed call to this adapter as a payload of its own making:
`{"event": "call" | "result" | "failed", "session_id", "turn_id", "call_id", "server", "tool",
"arguments", "result", "project"}` (`result`: the server's CallToolResult object). The answer
tells the proxy what to do: `deny` (the reason, sent back as an `isError` result), `arguments`
(the clamped arguments the server receives), `defer` (a client's hook already decided this
call: pass it through and count nothing; only a live reservation no observer has used yet is
deferred to), `reused` (the call's id was seen before and is spent: decide it again under the
proxy's own id), `replace` (the trimmed result text), `context` (a
line to add to the result the model reads), `systemMessage` (for the user: the proxy writes it
to stderr, which MCP clients keep in their server log).

Client facts this relies on (seen on the real binaries; see docs/proxy.md):
- Claude Code 2.1.197 starts each stdio server with CLAUDE_CODE_SESSION_ID (its session id,
  the same as its hooks' `session_id`) and CLAUDE_PROJECT_DIR in the environment, and sends
  `_meta: {"claudecode/toolUseId": "toolu_...", "progressToken": N}` on every tools/call: the
  tool-use id is its hooks' `tool_use_id`, so a call its hooks reserved is recognised here.
- Claude Code's `-p` (2.1.197, 2.1.332) starts its servers with CLAUDE_CODE_ENTRYPOINT=sdk-cli: the
  connection is that one run, so one turn.
- The official MCP Python SDK client (2.3.0) sends no `_meta` on tools/call unless asked.
- No client tried sends a turn id: the proxy numbers turns itself (quiet gaps, see
  governor.runtime.proxy), or follows the hooks' turn when they decide calls of its session.

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Decision, Event
from governor.harnesses import answers
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import event_name as _event_name
from governor.harnesses.payload import nonempty as _text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "mcp-proxy"
TITLE = "MCP proxy (any MCP client)"
AGENT_DIRS: tuple[str, ...] = ()  # an MCP connection says nothing about subagents
CAPABILITIES = {
    "deny": "yes: an `isError` result with the reason; the call never reaches the server",
    "rewrite arguments": "yes: the server receives the clamped arguments",
    "replace result": "yes: the client receives the trimmed text (`structuredContent` dropped, `outputSchema` "
    "hidden, for governed tools only)",
    "context": "◐ appended to the tool's result as a text block",
    "turn id": "✗ none sent: a quiet gap (`proxy.turn_gap_seconds`), or the hooks' turn when they decide",
    "call id": "◐ Claude Code's `_meta` `claudecode/toolUseId`, else the JSON-RPC request id",
    "subagent id": "✗",
    "on crash": "the client sees its server exit; bad input never crashes it (on_error decides, visibly)",
}

EVENTS = {"call": ev.PRE_TOOL, "result": ev.POST_TOOL, "failed": ev.TOOL_FAILED}
# The client starts the proxy itself (no shell between): the proxy's parent runs the session
# (governor.runtime.lineage), and a proxy a model starts from its shell is seen under the model's harness.
STARTED_DIRECTLY = True
SESSION_VARIABLE = "CLAUDE_CODE_SESSION_ID"  # Claude Code: the session its hooks see too
PROJECT_VARIABLE = "CLAUDE_PROJECT_DIR"
CALL_ID_META = ("claudecode/toolUseId",)  # `_meta` keys that carry a client's own id of the call


def session_of(env: Mapping[str, str]) -> str | None:
    """The client's own session id, when it gives its servers one."""
    value = env.get(SESSION_VARIABLE)
    return value or None


def project_of(env: Mapping[str, str], cwd: str) -> str:
    """The project the client works in: its own word for it, else the folder it started us in."""
    return env.get(PROJECT_VARIABLE) or cwd


ONE_RUN = {"CLAUDE_CODE_ENTRYPOINT": ("sdk-cli",)}  # a client's word that this connection is one `-p` run


def one_run(env: Mapping[str, str]) -> bool:
    """Does the client say this connection serves one non-interactive run (Claude Code's `-p`)?
    Then the whole connection is one turn: no quiet gap starts another."""
    return any(env.get(name) in values for name, values in ONE_RUN.items())


def call_id_of(params: Any) -> str | None:
    """The client's own id of a tools/call (from the request's `_meta`), if it sends one."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return None
    for name in CALL_ID_META:
        value = meta.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def model_text(result: Any) -> str:
    """The text of a CallToolResult as the model reads it: its text blocks and the text of its
    embedded resources; `structuredContent` (as compact JSON) only when there is no text."""
    import json

    parts: list[str] = []
    content = result.get("content") if isinstance(result, dict) else None
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "resource" and isinstance(block.get("resource"), dict):
            text = block["resource"].get("text")
            if isinstance(text, str):
                parts.append(text)
    if not parts and isinstance(result, dict) and result.get("structuredContent") is not None:
        return json.dumps(result["structuredContent"], ensure_ascii=False, separators=(",", ":"))
    return "\n".join(parts)


def sniff_event(raw: bytes) -> str | None:
    return None  # the proxy hands over parsed payloads, never bytes


def event_name(payload: Any) -> str | None:
    return _event_name(payload, "event")


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event one governed call describes."""
    if not isinstance(payload, dict):
        raise BadPayload(f"the call should be described by an object, got {type(payload).__name__}")
    kind = EVENTS.get(event_name(payload) or "")
    if kind is None:
        raise BadPayload(f"unknown proxy event {payload.get('event')!r}")
    server = _text(payload, "server", required=True) or ""
    tool = _text(payload, "tool", required=True) or ""
    arguments = payload.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise BadPayload(f"the tools/call arguments should be an object, got {type(arguments).__name__}")
    fields: dict[str, Any] = {
        "turn_id": _text(payload, "turn_id"),
        "call_id": _text(payload, "call_id", required=True),
        "tool_name": f"{server}/{tool}",
        "server": server,
        "tool": tool,
        "tool_input": arguments,
        "project": _text(payload, "project"),
        "context_unseen": True,  # no compaction or /clear reaches an MCP server, nor which agent called
        "observer": True,  # the client's hooks, when it has them, saw the call first
    }
    if kind == ev.POST_TOOL:
        fields["tool_result"] = model_text(payload.get("result"))
    return Event(kind, _text(payload, "session_id", required=True) or "", **fields)


# A call another observer already decided: what the proxy does instead of a rewrite (see above).
SPENT = {"repeat": {"defer": True}, "reused_id": {"reused": True}}


def render(name: str, decision: Decision) -> dict[str, Any] | None:
    """What the proxy does for event `name`; None for no objection."""
    return answers.plain(name, decision, SPENT.get(decision.code) if name == "call" else None)


refusal = answers.plain_refusal
