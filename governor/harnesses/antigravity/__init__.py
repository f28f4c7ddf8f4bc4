"""Antigravity CLI (`agy`): its hook payload -> Event, a Decision -> its hook answer (the hot path).

Not proven in a binary: `agy` is a closed binary, not on npm, and does not run here. What this
relies on was reported by others who ran real builds (docs/antigravity.md names the source of each):
- Hooks run from `~/.gemini/config/hooks.json`, Claude-style groups; the matcher `""` matches every
  tool. PreToolUse and PostToolUse run (PreInvocation, PostInvocation and Stop were seen parsed and
  never run). The payload does not name its event: the installed command does (`antigravity
  PreToolUse`), and the hook reads `{"event": <Event>, "payload": <agy's>}` (payload.wrap).
- The payload (camelCase): `conversationId`, `stepIdx`, `toolCall` `{name, args}`, `transcriptPath`,
  `workspacePaths`, `artifactDirectoryPath`; PostToolUse adds `error`, and its `toolCall` may be
  null. No result text, no turn id, no call id, no prompt event: a conversation is one turn, a
  call is known by its tool and arguments, and nothing counts a result's tokens here.
- Native tools are agy's own (`run_command` with `CommandLine`, `view_file` with `AbsolutePath`:
  PascalCase arguments). An MCP tool is `<server>/<tool>`, or the generic `call_mcp_tool` with
  `ServerName`, `ToolName`, `Arguments` (Doc); `mcp__<server>__<tool>` and `mcp_<server>_<tool>`
  are read too (unverified).
- PreToolUse answers `{"decision": "allow" | "deny" | "ask" | "force_ask", "reason": ...}`; a
  missing or malformed answer blocks the call, so every event gets one (`neutral`). `deny` blocks
  it and the model gets the reason; `ask` leaves the call to agy's own review (the user's
  Always-Allow choices included); `allow` did not skip that review on 1.1.2 but may in a later
  build, so it is never the answer before a tool. No rewritten arguments (a clamp is a refusal
  naming the arguments: `no_rewrite`), no replaced result (`whole_result`), no added context.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import governed, mapping, readers
from governor.harnesses.payload import text as _text
from governor.harnesses.tool_names import split_any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "antigravity"
TITLE = "Antigravity CLI"
MAX_STRING = 10_000  # agy documents no cap; this keeps a reason readable
AGENT_DIRS = (".agents/agents",)  # agent definitions under a customization root (Doc)
CAPABILITIES = {
    "deny": "`decision: deny` with a `reason`, which the model gets (Doc: not run here)",
    "rewrite arguments": "✗ no answer rewrites them: a clamp is a refusal naming the arguments to call again with "
    "(the refused call counts nothing)",
    "replace result": "✗ and PostToolUse carries no result: its tokens are not counted here (the MCP proxy counts "
    "and cuts them)",
    "context": "✗ none reaches the model",
    "turn id": "✗ none, and no prompt event: a conversation is one turn",
    "call id": "✗ a call is matched by its tool and arguments",
    "subagent id": "✗",
    "on crash": "no answer blocks the call: the hook always answers (`ask`, agy's own review, when it has no "
    "objection or nothing decided; on_error decides a memory call)",
}

PRE, POST = "PreToolUse", "PostToolUse"
EVENTS = {PRE: ev.PRE_TOOL, POST: ev.POST_TOOL}
event_name, sniff_event = readers("event", EVENTS)
GENERIC = "call_mcp_tool"  # agy's tool that calls any MCP server's tool by name (Doc)


def tool_name(server: str, tool: str) -> str:
    """The name agy gives an MCP server's tool (Doc)."""
    return f"{server}/{tool}"


def _call(call: dict[str, Any]) -> tuple[str, str | None, str | None, dict[str, Any] | None]:
    """(tool name, server, tool, arguments) of a `toolCall`; `call_mcp_tool` read as the call it makes."""
    name = _text(call, "name", required=True) or ""
    args = mapping(call, "args")
    if name != GENERIC:
        server, tool = split_any(name)
        return name, server, tool, args
    args = args or {}
    server, tool, inner = _text(args, "ServerName"), _text(args, "ToolName"), args.get("Arguments")
    if isinstance(inner, str):  # a JSON object spelt as a string
        from governor import jsonio

        try:
            inner = jsonio.loads(inner) if inner.strip() else {}
        except ValueError:
            raise BadPayload("field 'Arguments' of call_mcp_tool is not a JSON object") from None
    inner = mapping({"Arguments": inner}, "Arguments")
    if not server or not tool:
        return name, None, None, args
    return tool_name(server, tool), server, tool, inner


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a payload describes; None for an event this adapter does not govern."""
    found = governed(payload, "event", EVENTS)
    if found is None:
        return None
    name, kind = found
    inner = mapping(payload, "payload")
    if inner is None:
        raise BadPayload("field 'payload' is missing")
    session = _text(inner, "conversationId", required=True) or ""
    paths = inner.get("workspacePaths")
    project = paths[0] if isinstance(paths, list) and paths and isinstance(paths[0], str) else None
    call = inner.get("toolCall")
    if call is None and name == POST:
        return None  # seen after some calls: nothing names the call that ended
    if not isinstance(call, dict):
        raise BadPayload("field 'toolCall' should be an object")
    full, server, tool, tool_input = _call(call)
    if kind == ev.POST_TOOL and _text(inner, "error"):
        kind = ev.TOOL_FAILED
    return Event(kind, session, cwd=project, project=project, tool_name=full, server=server, tool=tool,
                 tool_input=tool_input, call_key=ev.call_key(full, tool_input or {}), no_rewrite=True,
                 whole_result=True, replace_in_place=False)  # fmt: skip


def neutral(name: str | None, answer: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one answer agy gets, whatever the runtime made of the event (`answer`, None for none):
    its decision, else no objection (after a tool, nothing to stop: `allow`; before one, or an
    event not known, `ask`: agy's own review decides, as with no hook); what the user is to be
    told (`systemMessage`) as the `reason` (Doc: shown with agy's review prompt); no other key."""
    out = dict(answer or {})
    if "decision" not in out:
        out["decision"] = "allow" if name == POST else "ask"
    message = out.get("systemMessage")
    if message and "reason" not in out:
        out["reason"] = answers.cap(str(message), MAX_STRING)
    return {key: out[key] for key in ("decision", "reason") if key in out}


# Only a refusal is spelt: nothing rewrites arguments or replaces a result (no_rewrite, whole_result).
ANSWERS = answers.Dialect(
    pre=(PRE,), post=(POST,), limit=MAX_STRING, context_events=(),
    deny=lambda reason: {"decision": "deny", "reason": reason}, rewrite=lambda tool_input: {},
    replace=lambda text: {},
)  # fmt: skip


def render(name: str, decision: Any) -> dict[str, Any]:
    """Always one answer: a refusal, else `neutral`."""
    return neutral(name, ANSWERS.render(name, decision))


def refusal(name: str | None, reason: str) -> dict[str, Any]:
    """The fail-closed answer, whatever the event: `deny` (after a tool, the result withheld where
    agy honours it: unverified)."""
    return {"decision": "deny", "reason": answers.cap(reason, MAX_STRING)}
