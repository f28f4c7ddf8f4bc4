"""govern(client_or_tools): a LangChain / LangGraph program's MCP memory calls, decided in-process.

    from langchain.agents import create_agent
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from governor.sdk.langchain import govern

    client = govern(MultiServerMCPClient({"engram": {"command": "engram", "args": ["mcp"], "transport": "stdio"}}))
    agent = create_agent(model, await client.get_tools(), name="lead")
    await agent.ainvoke({"messages": [("user", "What did we decide about auth?")]})

`govern(client)` puts memory-governor's tool-call interceptor first (outermost) in a
`MultiServerMCPClient`'s `tool_interceptors`, so every tool it loads afterwards is governed;
`govern(tools)` governs tools already loaded (`load_mcp_tools`, `client.get_tools()`) by wrapping
each one's call. Each call of a tool the policy governs is decided through the same engine and
ledger as the hooks (governor.sdk.in_process.Governor: refused without calling the server,
clamped through `request.override(args=...)`, its result counted and trimmed to whole entries,
its reservation given back when it fails), in this process, with no subprocess per call.

Inside a graph each call comes with LangGraph's `ToolRuntime`:

- the turn is the graph invocation's user message (the last `HumanMessage` of the state, by its
  id); the first memory call of a turn decides that message as the user's prompt (its memory
  need; `mem_context` armed by an explicit recall), before any call of the turn is decided;
- a graph run inside another graph's tool (an agent used as a tool: its checkpoint namespace is
  nested) is a subagent: its input was written by a model, so it is no prompt and opens no turn
  (its calls count in the session's current turn), and its tier is the policy's
  `subagents.agents` entry for its `create_agent(name=...)` (`lc_agent_name`);
- the session is the conversation's `thread_id` when the graph is checkpointed, else one per
  process (or `session=`).

A call made outside a graph (no runtime) counts in the session's current turn. The policy, its
acceptance and the ledger are found as the hooks find them: from `project` (default: this
process's working directory), in `env` (default: this process's environment).

Needs `langchain-mcp-adapters` (`pip install 'memory-governor[langchain]'`). Never imported by a hook.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from governor.harnesses.langchain import NAME
from governor.sdk.in_process import Governor, governor_for

__all__ = ["govern"]

_MARK = "_memory_governor"  # set on what govern() changed, so a second govern() adds nothing
_SESSION = f"{NAME}:{os.getpid():x}.{time.time_ns():x}"  # this process's session, unless one is named


def govern(target: Any, *, env: Any = None, project: str | None = None, session: str | None = None,
           server: str = "engram") -> Any:  # fmt: skip
    """`target` (a `MultiServerMCPClient`, or a list of tools it loaded), governed in place; returned.
    `server`: for a list of tools, the name the policy knows their server by (a client names each)."""
    governor = governor_for(NAME, env, project, session or _SESSION)
    interceptors = getattr(target, "tool_interceptors", None)
    if isinstance(interceptors, list):
        if not any(getattr(i, _MARK, False) for i in interceptors):
            target.tool_interceptors = [_interceptor(governor), *interceptors]
        return target
    if isinstance(target, (list, tuple)):
        for tool in target:
            _govern_tool(tool, governor, server)
        return target
    raise TypeError(f"govern() takes a MultiServerMCPClient or a list of its tools, not {type(target).__name__}")


def _interceptor(governor: Governor) -> Any:
    turns = _Turns(governor)

    async def memory_governor(request: Any, handler: Any) -> Any:
        ids, prompt = turns.ids(request.runtime, request.server_name, request.name)

        async def send(arguments: dict[str, Any] | None) -> Any:
            return await handler(request if arguments == request.args else request.override(args=arguments or {}))

        return await governor.call(ids, request.args, send, prompt)

    setattr(memory_governor, _MARK, True)
    return memory_governor


def _govern_tool(tool: Any, governor: Governor, server: str) -> None:
    """A tool `load_mcp_tools` made (its call returns the content blocks and an artifact), its call
    wrapped; `server` is the name the policy knows its server by (a tool does not say)."""
    if getattr(tool, "coroutine", None) is None or getattr(tool.coroutine, _MARK, False):
        return
    from mcp.types import CallToolResult, TextContent

    turns = _Turns(governor)
    original = tool.coroutine

    async def coroutine(runtime: Any = None, **arguments: Any) -> Any:
        ids, prompt = turns.ids(runtime, server, tool.name)

        async def send(args: dict[str, Any] | None) -> Any:
            content, artifact = await original(runtime=runtime, **(args or {}))
            blocks = [content] if isinstance(content, str) else content if isinstance(content, list) else []
            texts = [b if isinstance(b, str) else b.get("text", "") for b in blocks
                     if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")]  # fmt: skip
            structured = getattr(artifact, "structured_content", None) if artifact is not None else None
            return CallToolResult(content=[TextContent(type="text", text=t) for t in texts],
                                  structuredContent=structured)  # fmt: skip

        result = await governor.call(ids, arguments, send, prompt)
        return [{"type": "text", "text": block.text} for block in result.content if block.type == "text"], None

    setattr(coroutine, _MARK, True)
    tool.coroutine = coroutine


class _Turns:
    """The ids of a call from its LangGraph runtime: session, turn, agent."""

    def __init__(self, governor: Governor) -> None:
        self.governor = governor
        self.mains: set[tuple[str, str]] = set()  # (session, agent name) seen running at the top of a graph
        self.lock = threading.Lock()

    def ids(self, runtime: Any, server: str, tool: str) -> tuple[dict[str, Any], str | None]:
        """The call's ids, and the user's prompt of its turn (None for a subagent or outside a graph)."""
        call_id = getattr(runtime, "tool_call_id", None) or f"call:{time.time_ns():x}:{threading.get_ident():x}"
        ids: dict[str, Any] = {"server": server, "tool": tool, "call_id": call_id}
        config = getattr(runtime, "config", None)
        if not isinstance(config, dict):
            return ids, None
        thread = (config.get("configurable") or {}).get("thread_id")
        session = f"{NAME}:thread:{thread}" if thread is not None else self.governor.session
        ids["session_id"] = session
        metadata = config.get("metadata") or {}
        agent = metadata.get("lc_agent_name")
        namespace = str(metadata.get("langgraph_checkpoint_ns") or metadata.get("checkpoint_ns") or "")
        if "|" not in namespace:  # the graph the program invoked: the user's turn
            if agent:
                with self.lock:
                    self.mains.add((session, str(agent)))
            message = _user_message(getattr(runtime, "state", None))
            if message is None:
                return ids, None
            ids["turn_id"] = f"message:{message[0]}"
            return ids, message[1]
        with self.lock:
            main = (session, str(agent)) in self.mains
        if agent and not main:  # an agent run inside a tool: a subagent, by its name
            ids.update(agent_id=f"{session}:{agent}:{namespace.split('|', 1)[0]}", agent_type=str(agent))
        return ids, None


def _user_message(state: Any) -> tuple[str, str] | None:
    """(id, text) of the last user message in a graph's state, if it has one with an id."""
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    for message in reversed(messages if isinstance(messages, list) else []):
        if getattr(message, "type", None) == "human":
            ident = getattr(message, "id", None)
            if not ident:
                return None
            content = message.content
            if isinstance(content, list):
                content = "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
            return str(ident), str(content)
    return None
