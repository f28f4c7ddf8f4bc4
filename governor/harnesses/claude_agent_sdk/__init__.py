"""The Claude Agent SDK: a hook callback's arguments -> Event, a Decision -> its return value.

The SDK (`claude-agent-sdk` on PyPI) runs the Claude Code binary it bundles and calls the
callbacks in `ClaudeAgentOptions.hooks` over that binary's control protocol, in the SDK user's
own process; `governor.sdk.claude_agent.govern` adds memory-governor's. A callback's
`input_data` is the JSON object a Claude Code command hook reads on stdin, and its return value
is the object such a hook prints, so this adapter reads and answers through Claude Code's
(governor.harnesses.claude_code: the one place those payloads are spelled) and keeps only what
differs. Facts it relies on (seen with claude-agent-sdk 0.2.189 and 0.2.190, bundling Claude Code 2.1.332 and 2.1.337;
docs/claude-agent-sdk.md):

- input_data carries session_id, cwd, prompt_id (on every event after the first prompt, and
  inside subagents), hook_event_name, and for tool events tool_name, tool_input, tool_use_id;
  PostToolUse's tool_response for an MCP tool is a list of text blocks. The same ids as the
  settings hooks of the same session see.
- A subagent defined in `options.agents` reaches the callbacks as agent_id plus agent_type,
  the agent's key in that dict: the policy's `subagents.agents` gives it a tier by that name.
- A SessionStart callback fired for `compact` only, not at startup or on `resume=` (govern()
  decides a SessionStart resume itself for a resumed session).
- The project is `options.cwd`: govern() passes it as CLAUDE_PROJECT_DIR, as the binary does
  for its command hooks.
- The TypeScript SDK (`@anthropic-ai/claude-agent-sdk` 0.3.334, 0.3.337) hands its callbacks the same
  input; the module `install claude-agent-sdk` writes (govern.mjs) forwards it here through the
  warm server or the hook process (`entry.py claude-agent-sdk`).
- With the project's settings also loaded (`setting_sources` None or naming them), memory-
  governor's command hooks see the same events: both are observers of one call (`twin`), and
  the ledger decides and counts each event once, by its ids.

Hot path: standard library only (the SDK itself is never imported here).
"""

from __future__ import annotations

from governor.harnesses import claude_code
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from governor.engine.events import Event

NAME = "claude-agent-sdk"
TITLE = "Claude Agent SDK (Python in-process; TypeScript module)"
AGENT_DIRS = claude_code.AGENT_DIRS  # agents the binary loads from settings; programmatic ones have no file
EVENTS = tuple(claude_code.EVENTS)  # the events govern() registers a callback for
CAPABILITIES = {
    "deny": "yes: `permissionDecision: deny` returned by the callback",
    "rewrite arguments": "yes: `updatedInput`",
    "replace result": "yes: `updatedMCPToolOutput`",
    "context": "yes: `additionalContext`",
    "turn id": "yes: `prompt_id`",
    "call id": "yes: `tool_use_id` (the settings hooks' too: a call both see is counted once)",
    "subagent id": "yes: `agent_id`, `agent_type` (an `options.agents` key)",
    "on crash": "Python: the callback never raises (it answers or applies on_error); TypeScript: the module applies on_error when no governor answers",
}

# Decided in (or for) the program that runs the binary: that program is the session's own process
# (governor.runtime.lineage), not a host above a twin's hooks.
HOSTED = True

event_name = claude_code.event_name
sniff_event = claude_code.sniff_event
render = claude_code.render
refusal = claude_code.refusal


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a callback's input_data describes; None for an event not governed."""
    event = claude_code.parse(payload, env)
    if event is not None:
        event.twin = True  # the project's command hooks may observe the same event
        event.harness = NAME
    return event
