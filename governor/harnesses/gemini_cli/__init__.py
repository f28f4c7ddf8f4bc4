"""Gemini CLI: its hook payload -> Event, a Decision -> its hook answer (the hot path).

Harness facts this relies on (seen on the real binary, 0.61.0; see docs/gemini-cli.md):
- One JSON object on stdin per hook process; common fields session_id, transcript_path, cwd,
  hook_event_name, timestamp. No turn id and no call id on any event.
- BeforeAgent fires once per prompt (`prompt`), never inside a subagent: each one starts a
  turn. BeforeTool / AfterTool carry tool_name and tool_input; for an MCP tool also
  mcp_context {server_name, tool_name, command, args}, the unambiguous server and tool.
  MCP tools are named mcp_<server>_<tool> (characters outside [A-Za-z0-9_.:-] become `_`,
  names over 63 characters are cut to first 30 + "..." + last 30).
- AfterTool's tool_input is what the server received (a rewrite included), tool_response is
  {llmContent, returnDisplay, error?}; llmContent of an MCP tool is a list of {text} parts,
  the server's text wrapped in <untrusted_context>...</untrusted_context>. An MCP result
  with isError carries `error` (a failure, not a result).
- SessionStart carries source (startup, resume, clear); PreCompress carries trigger: manual
  for /compress, auto before EVERY model call, whether or not it then compresses.
- The hooks of one reply's parallel calls run concurrently. A subagent starts with the tool
  invoke_agent {agent_name, prompt}; its own tool calls fire the same BeforeTool/AfterTool,
  with the parent's session_id and nothing naming the agent, between invoke_agent's
  BeforeTool and AfterTool. It fires no BeforeAgent.
- An answer is one JSON object on stdout with exit 0 (an empty stdout makes Gemini read
  stderr as a message for the user). BeforeTool {"decision": "deny", "reason": R}: the model
  gets the error "Tool execution blocked: R". hookSpecificOutput.tool_input REPLACES the
  arguments (a partial object fails validation), and the model's result then ends with
  "[System] Tool input parameters were modified by a hook before execution.". AfterTool
  {"decision": "deny", "reason": R}: the model gets R as the tool's error instead of the
  result; nothing replaces the result as a success (no field does). additionalContext on
  BeforeAgent, SessionStart and AfterTool reaches the model as <hook_context> with < and >
  escaped; BeforeTool has none. systemMessage is shown to the user.
- "decision": "allow" is never needed and never sent: no objection is no output.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import mapping, placed, readers
from governor.harnesses.payload import text as _text
from governor.harnesses.tool_names import split_single

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "gemini-cli"
TITLE = "Gemini CLI"
MAX_STRING = 100_000  # Gemini sets no cap on a hook's strings; this keeps one answer bounded
AGENT_DIRS = (".gemini/agents",)  # subagent definitions, under the project and under HOME
# Its row in docs/harnesses.md: what it can express, and how the governor uses it.
CAPABILITIES = {
    "deny": 'yes: `decision: deny`; the model gets "Tool execution blocked: R"',
    "rewrite arguments": "yes: `hookSpecificOutput.tool_input` (it replaces them: the whole input is sent)",
    "replace result": "downgraded: AfterTool `decision: deny` with the trimmed result as the reason, which the "
    "model gets as the call's error",
    "context": "yes: `additionalContext` on BeforeAgent, SessionStart, AfterTool (none on BeforeTool)",
    "turn id": "no: a turn starts at each BeforeAgent",
    "call id": "no: a result is matched to its call by tool and arguments",
    "subagent id": "no: a subagent's calls are those between its `invoke_agent` BeforeTool and AfterTool",
    "on crash": "fails open (exit 1, a crash, a timeout); the governor always answers or applies on_error",
}

EVENTS = {
    "SessionStart": ev.SESSION_START,
    "BeforeAgent": ev.PROMPT,
    "BeforeTool": ev.PRE_TOOL,
    "AfterTool": ev.POST_TOOL,
    "PreCompress": ev.PRE_COMPACT,
    "AfterAgent": ev.STOP,
}
event_name, sniff_event = readers("hook_event_name", EVENTS)
# Events whose answer may carry hookSpecificOutput.additionalContext.
CONTEXT_EVENTS = ("SessionStart", "BeforeAgent", "AfterTool")
UNTRUSTED_OPEN, UNTRUSTED_CLOSE = "<untrusted_context>\n", "\n</untrusted_context>"
DISPATCH_TOOL = "invoke_agent"  # starts a subagent: {agent_name, prompt}


# mcp_<server>_<tool> -> (server, tool), as Gemini CLI itself parses it; only for payloads without
# mcp_context, which names both exactly.
split_tool_name = split_single


def result_text(response: Any) -> str:
    """The server's text in an AfterTool tool_response: llmContent's text parts, joined as Gemini
    joins them for the model, without the <untrusted_context> wrapper Gemini adds."""
    content = response.get("llmContent") if isinstance(response, dict) else response
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(str(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    elif isinstance(content, dict) and isinstance(content.get("text"), str):
        text = content["text"]
    else:
        from governor.engine.results import result_text as any_result

        return any_result(content)
    if text.startswith(UNTRUSTED_OPEN) and text.endswith(UNTRUSTED_CLOSE):
        return text[len(UNTRUSTED_OPEN) : -len(UNTRUSTED_CLOSE)]
    return text


def _server_and_tool(payload: dict[str, Any], tool_name: str) -> tuple[str | None, str | None]:
    context = payload.get("mcp_context")
    if isinstance(context, dict):
        server, tool = context.get("server_name"), context.get("tool_name")
        if isinstance(server, str) and server and isinstance(tool, str) and tool:
            return server, tool
    return split_tool_name(tool_name)


# How a replaced result reaches the model here (Event's fields; replay plays this harness's logs with
# them): as the call's error text, so a result is changed only to hold something back.
DELIVERY = {"replace_in_place": False}


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a payload describes; None for an event this adapter does not govern."""
    found = placed(payload, "hook_event_name", EVENTS, env, "GEMINI_PROJECT_DIR")
    if found is None:
        return None
    kind, fields = found
    fields.update(DELIVERY)
    if kind in (ev.PRE_TOOL, ev.POST_TOOL):
        tool_name = _text(payload, "tool_name", required=True) or ""
        tool_input = mapping(payload, "tool_input")
        server, tool = _server_and_tool(payload, tool_name)
        # No call id: the call is known by its tool and arguments (AfterTool's are the
        # rewritten ones, which the engine also knows the call by). No agent either: the
        # engine tells a subagent's calls by the dispatch that started it and has not ended.
        fields.update(tool_name=tool_name, server=server, tool=tool, tool_input=tool_input,
                      call_key=ev.call_key(tool_name, tool_input or {}), agent_unknown=True)  # fmt: skip
        if tool_name == DISPATCH_TOOL and server is None:
            agent = (tool_input or {}).get("agent_name")
            fields["dispatches"] = agent if isinstance(agent, str) else ""
        if kind == ev.POST_TOOL:
            response = payload.get("tool_response")
            if isinstance(response, dict) and response.get("error"):
                kind = ev.TOOL_FAILED
            else:
                fields["tool_result"] = result_text(response)
    elif kind == ev.PROMPT:
        fields["prompt"] = _text(payload, "prompt") or ""
    elif kind == ev.SESSION_START:
        fields["source"] = _text(payload, "source")
    elif kind == ev.PRE_COMPACT and _text(payload, "trigger") == "manual":
        # /compress compresses the history unconditionally: the compaction trigger. (An "auto"
        # PreCompress fires before every model call, before Gemini decides whether to compress:
        # it says nothing, so it stays an audit record.)
        kind, fields["source"] = ev.SESSION_START, "compact"
    return Event(kind, _text(payload, "session_id", required=True) or "", **fields)


# The whole input on a rewrite: Gemini replaces, not merges. No success result can be replaced:
# the trimmed result goes to the model as the error text, wrapped as Gemini wraps every MCP result.
ANSWERS = answers.Dialect(
    pre=("BeforeTool",), post=("AfterTool",), limit=MAX_STRING, context_events=CONTEXT_EVENTS,
    deny=lambda reason: {"decision": "deny", "reason": reason},
    rewrite=lambda tool_input: {"tool_input": tool_input},
    replace=lambda text: {"decision": "deny", "reason": answers.cap(f"{UNTRUSTED_OPEN}{text}{UNTRUSTED_CLOSE}", MAX_STRING)},
    nested=(answers.REWRITE, answers.CONTEXT),
)  # fmt: skip
render = ANSWERS.render
refusal = ANSWERS.refusal
