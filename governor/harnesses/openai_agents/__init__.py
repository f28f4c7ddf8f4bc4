"""The OpenAI Agents SDK (`openai-agents` on PyPI): a governed MCP call -> Event, a Decision -> its answer.

`governor.sdk.openai_agents.govern(server_or_agent)` decides each call of an MCP server's tool
inside the program, and describes it to this adapter in the shape every in-process governor
shares (governor.harnesses.in_process). Facts it relies on (seen with openai-agents 0.24.0;
docs/orchestrators.md):

- Every call of an MCP tool goes through the server object's `call_tool(name, arguments, meta)`,
  after the server's `tool_meta_resolver` was asked for the call's `_meta` with the call's
  `ToolContext` (its `tool_call_id`, the `agent` that made it, the run's `usage`).
- One `Runner.run` (or `run_streamed`) is one turn: its `RunContextWrapper` keeps one `Usage`
  object, which every tool context of the run shares, and so does a nested run of an agent used
  as a tool. The run's input reaches the starting agent's input guardrails; a handoff's does not.
- Handoff targets and agents used as tools are the subagents: their tier is the policy's
  `subagents.agents` entry for the agent's `name`.

Hot path: standard library only (the SDK itself is never imported here).
"""

from __future__ import annotations

from governor.harnesses.in_process import AGENT_DIRS, event_name, parse, refusal, render, sniff_event
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error

__all__ = ["AGENT_DIRS", "CAPABILITIES", "NAME", "TITLE", "BadPayload", "event_name", "parse", "refusal", "render",
           "sniff_event"]  # fmt: skip

NAME = "openai-agents"
TITLE = "OpenAI Agents SDK (Python in-process)"
CAPABILITIES = {
    "deny": "yes: the model gets the reason as the tool's result (the server is not called)",
    "rewrite arguments": "yes: the server's `call_tool` receives the clamped arguments",
    "replace result": "yes: the model gets the trimmed text",
    "context": "◐ appended to the tool's result as a text block",
    "turn id": "yes: one `Runner.run` (its `Usage` object, shared by agents used as tools)",
    "call id": "yes: the model's `tool_call_id` (`ToolContext`)",
    "subagent id": "yes: the agent's `name`, for handoffs and agents used as tools",
    "on crash": "never raises: the runner answers, or applies on_error",
}
