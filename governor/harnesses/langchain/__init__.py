"""LangChain and LangGraph (`langchain-mcp-adapters`): a governed MCP call -> Event, a Decision -> its answer.

`governor.sdk.langchain.govern(client_or_tools)` puts a tool-call interceptor around every MCP
tool call, and describes each call to this adapter in the shape every in-process governor
shares (governor.harnesses.in_process). Facts it relies on (seen with langchain-mcp-adapters
0.3.2, langgraph 1.2.24, langchain 1.5.2; docs/orchestrators.md):

- An interceptor is `async (request, handler) -> result`: `request.override(args=...)` changes
  the arguments, returning a `CallToolResult` without calling `handler` answers instead of the
  server, and it may return another result than the handler's.
- Inside a graph, `request.runtime` is LangGraph's `ToolRuntime`: `tool_call_id`, `state` (the
  graph's messages: the user's message that started this invocation is the last
  `HumanMessage`, with an id) and `config` (`metadata.lc_agent_name`: the `name` given to
  `create_agent`; `metadata.langgraph_checkpoint_ns`: `|`-joined for a graph run inside another
  graph's tool, a subagent; `configurable.thread_id`: the conversation, when checkpointed).

Hot path: standard library only (the framework itself is never imported here).
"""

from __future__ import annotations

from governor.harnesses.in_process import AGENT_DIRS, event_name, parse, refusal, render, sniff_event
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error

__all__ = ["AGENT_DIRS", "CAPABILITIES", "NAME", "TITLE", "BadPayload", "event_name", "parse", "refusal", "render",
           "sniff_event"]  # fmt: skip

NAME = "langchain"
TITLE = "LangChain / LangGraph MCP adapters (Python in-process)"
CAPABILITIES = {
    "deny": "yes: the model gets the reason as the tool's result (the server is not called)",
    "rewrite arguments": "yes: `request.override(args=...)`",
    "replace result": "yes: the model gets the trimmed text",
    "context": "◐ appended to the tool's result as a text block",
    "turn id": "yes: the user's message that started the graph invocation",
    "call id": "yes: the model's `tool_call_id` (`ToolRuntime`)",
    "subagent id": "◐ `lc_agent_name` of an agent run inside another's tool (`create_agent(name=...)`)",
    "on crash": "never raises: the runner answers, or applies on_error",
}
