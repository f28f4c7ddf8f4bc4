"""Factory Droid: its hook payload -> Event, a Decision -> its hook answer (the hot path).

Droid's hooks take Claude Code's protocol, with less in it. Harness facts this relies on (seen on
the real binary, @factory/cli-linux-x64 0.225.2, `droid exec`; see docs/droid.md):
- One JSON object on stdin per hook process: session_id, transcript_path, cwd, permission_mode,
  hook_event_name. No turn id and no call id on any event. Hooks run with FACTORY_PROJECT_DIR
  (and DROID_PROJECT_DIR, CLAUDE_PROJECT_DIR) set to the project.
- `droid exec` fires SessionStart (source) and Stop, and no UserPromptSubmit: a run is one
  session, and its calls one turn. (UserPromptSubmit, with `prompt`, fires where Droid takes a
  prompt over its JSON-RPC session, Source.) There is no PostToolUseFailure and no SubagentStart.
- PreToolUse carries tool_name and tool_input; PostToolUse adds tool_response, the result's text
  as the model gets it. MCP tools are named `<server>___<tool>` and reach the model deferred: it
  loads them with ToolSearch (`select:engram___mem_search`) before it calls them.
- PreToolUse `permissionDecision: "deny"` with a reason: the model gets "Error: <reason>".
  `updatedInput` is applied only with `permissionDecision: "allow"`, which also skips Droid's own
  confirmation of the call (Source: "allow-bypass"): never sent, so a clamp is a refusal naming
  the arguments (`no_rewrite`).
- Nothing a PostToolUse hook answers replaces a result (additionalContext, exit 2's stderr: added
  as a separate message): results are counted whole (`whole_result`).
- No objection is no output.
"""

from __future__ import annotations

from governor.engine.events import Event
from governor.harnesses import answers, claude_dialect
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import placed, readers
from governor.harnesses.payload import text as _text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "droid"
TITLE = "Factory Droid"
MAX_STRING = 100_000  # Droid caps no answer; this keeps one bounded
AGENT_DIRS = (".factory/droids",)  # custom droids (subagents), under the project and under HOME
CAPABILITIES = {
    "deny": '`permissionDecision: deny`; the model gets "Error: <reason>"',
    "rewrite arguments": "downgraded: `updatedInput` needs `allow`, which skips Droid's own confirmation; a clamp "
    "is a refusal naming the arguments to call again with (the refused call counts nothing)",
    "replace result": "✗ nothing replaces a result: an over-budget one reaches the model whole, counted whole, "
    "and the user is told (the MCP proxy can cut it)",
    "context": "◐ `additionalContext` after a tool (a message of its own)",
    "turn id": "✗ none, and no UserPromptSubmit in `droid exec`: one run is one turn",
    "call id": "✗ a call is matched by its tool and arguments",
    "subagent id": "✗",
    "on crash": "fails open (a crash, a timeout); the governor always answers or applies on_error",
}

EVENTS = claude_dialect.events("PostToolUseFailure", "SubagentStart")
event_name, sniff_event = readers("hook_event_name", EVENTS)
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")
SEPARATOR = "___"  # between an MCP server's name and its tool's


def tool_name(server: str, tool: str) -> str:
    """The name Droid gives an MCP server's tool."""
    return f"{server}{SEPARATOR}{tool}"


def split_tool_name(name: str) -> tuple[str | None, str | None]:
    """`<server>___<tool>` -> (server, tool), as Droid splits it (at the first `___`)."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else (None, None)


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a payload describes; None for an event this adapter does not govern."""
    found = placed(payload, "hook_event_name", EVENTS, env, "FACTORY_PROJECT_DIR")
    if found is None:
        return None
    kind, fields = found
    fields.update(claude_dialect.event_fields(payload, kind, split_tool_name, call_id=""))
    fields.update(no_rewrite=True, whole_result=True, replace_in_place=False)
    return Event(kind, _text(payload, "session_id", required=True) or "", **fields)


# Neither a rewrite nor a replacement is ever asked for (no_rewrite, whole_result).
ANSWERS = answers.Dialect(
    pre=("PreToolUse",), post=("PostToolUse",), limit=MAX_STRING, context_events=CONTEXT_EVENTS,
    deny=claude_dialect.deny, rewrite=lambda tool_input: {}, replace=lambda text: {},
    nested=(answers.DENY, answers.CONTEXT),
)  # fmt: skip
render = ANSWERS.render
refusal = ANSWERS.refusal
