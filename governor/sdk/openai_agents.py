"""govern(server_or_agent): an OpenAI Agents SDK program's MCP memory calls, decided in-process.

    from agents import Agent, Runner
    from agents.mcp import MCPServerStdio
    from governor.sdk.openai_agents import govern

    async with MCPServerStdio(name="engram", params={"command": "engram", "args": ["mcp"]}) as engram:
        lead = govern(Agent(name="lead", instructions="...", mcp_servers=[engram]))
        result = await Runner.run(lead, "What did we decide about auth?")

`govern(agent)` governs the agent, every agent it hands off to or uses as a tool, and their MCP
servers; `govern(server)` governs one `MCPServer`. Both change the object in place and return
it; a second govern() adds nothing. Every call of a server's tool is decided through the same
engine and ledger as the hooks (governor.sdk.in_process.Governor: refused, clamped, its result
counted and trimmed to whole entries, its reservation given back when it fails), in this
process, with no subprocess per call:

- the server's `call_tool` is wrapped: it is where the SDK hands the arguments to the server
  (a tool input guardrail can refuse a call but not change its arguments) and where a failure
  is seen (an output guardrail gets the SDK's error text as if it were a result);
- the server's `tool_meta_resolver` (the SDK asks it for each call's `_meta`, with the call's
  `ToolContext`) is wrapped too, so each call is known by the model's call id and the agent that
  made it; the caller's own resolver still answers, and no `_meta` of ours reaches the server;
- an input guardrail on each agent (not in parallel: it decides before the model is called)
  takes the run's input as the user's prompt, which may arm `mem_context` (explicit recall). It
  runs for the starting agent only, so a handoff's input is never a user's prompt, and a nested
  run (an agent used as a tool) is recognised by its context and skipped.

One `Runner.run` is one turn: the run's `Usage` object, which every tool context of the run and
every nested run of an agent used as a tool share, names it. The starting agent is the main
agent; any other agent of the run (a handoff's target, an agent used as a tool) is a subagent,
whose tier is the policy's `subagents.agents` entry for its `name`. The session is one per
process (or `session=`). The policy, its acceptance and the ledger are found as the hooks find
them: from `project` (default: this process's working directory), in `env` (default: this
process's environment).

Needs `openai-agents` (`pip install 'memory-governor[openai-agents]'`). Never imported by a hook.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
import weakref
from typing import Any

from governor.harnesses.openai_agents import NAME
from governor.sdk.in_process import Governor, governor_for

__all__ = ["govern"]

_MARK = "_memory_governor"  # set on what govern() changed, so a second govern() adds nothing
_SESSION = f"{NAME}:{os.getpid():x}.{time.time_ns():x}"  # this process's session, unless one is named
_call: contextvars.ContextVar[Any] = contextvars.ContextVar("memory_governor_tool_context", default=None)


def govern(target: Any, *, env: Any = None, project: str | None = None, session: str | None = None) -> Any:
    """`target` (an `Agent` or an `MCPServer`), governed in place; returned for chaining."""
    from agents import Agent
    from agents.mcp import MCPServer

    governor = governor_for(NAME, env, project, session or _SESSION)
    if isinstance(target, MCPServer):
        _govern_server(target, governor)
    elif isinstance(target, Agent):
        _govern_agent(target, governor, set())
    else:
        raise TypeError(f"govern() takes an agents.Agent or an agents.mcp.MCPServer, not {type(target).__name__}")
    return target


def _govern_agent(agent: Any, governor: Governor, seen: set[int]) -> None:
    """The agent's input guardrail, its servers, and the agents it hands off to or uses as tools."""
    if id(agent) in seen:
        return
    seen.add(id(agent))
    from agents import InputGuardrail

    if not any(getattr(g, _MARK, False) for g in agent.input_guardrails):
        guardrail = InputGuardrail(guardrail_function=_prompt_guardrail(governor), name="memory-governor",
                                   run_in_parallel=False)  # fmt: skip
        setattr(guardrail, _MARK, True)
        agent.input_guardrails = [*agent.input_guardrails, guardrail]
    for server in agent.mcp_servers:
        _govern_server(server, governor)
    for handoff in agent.handoffs:
        reference = getattr(handoff, "_agent_ref", None)  # a Handoff keeps a weak reference to its agent
        target = reference() if reference is not None else handoff
        if hasattr(target, "mcp_servers"):
            _govern_agent(target, governor, seen)
    for tool in agent.tools:
        nested = getattr(tool, "_agent_instance", None)  # Agent.as_tool() keeps the agent it runs
        if nested is not None and hasattr(nested, "mcp_servers"):
            _govern_agent(nested, governor, seen)


def _govern_server(server: Any, governor: Governor) -> None:
    if getattr(server, _MARK, False):
        return
    setattr(server, _MARK, True)
    turns = _turns(governor)
    name = server.name
    send_to_server = server.call_tool
    resolve = server.tool_meta_resolver

    def tool_meta_resolver(meta: Any) -> Any:
        _call.set(meta.run_context)  # the call's ToolContext, for call_tool below (same task, or a copy of it)
        return resolve(meta) if resolve is not None else None

    async def call_tool(tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None) -> Any:
        context = _call.get()
        ids = {"server": name, "tool": tool_name, **turns.ids(context)}

        async def send(args: dict[str, Any] | None) -> Any:
            return await (
                send_to_server(tool_name, args) if meta is None else send_to_server(tool_name, args, meta=meta)
            )

        return await governor.call(ids, arguments, send)

    server.tool_meta_resolver = tool_meta_resolver
    server.call_tool = call_tool


def _prompt_guardrail(governor: Governor) -> Any:
    from agents import GuardrailFunctionOutput
    from agents.tool_context import ToolContext

    turns = _turns(governor)

    async def memory_governor(context: Any, agent: Any, run_input: Any) -> Any:
        if not isinstance(context, ToolContext):  # a nested run's input was written by the model
            turn = turns.start(context.usage, agent.name)
            await governor.decided({"event": "prompt", "turn_id": turn, "prompt": _prompt_text(run_input)})
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)

    return memory_governor


def _prompt_text(run_input: Any) -> str:
    """The user's prompt in a run's input: the text itself, or the last user message of a list."""
    if isinstance(run_input, str):
        return run_input
    for item in reversed(run_input if isinstance(run_input, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class _Turns:
    """The turn of each run (by its `Usage` object, held weakly) and the agent that started it."""

    def __init__(self, governor: Governor) -> None:
        self.governor = governor
        self.runs: dict[int, tuple[weakref.ReferenceType[Any], str, str | None]] = {}
        self.count = 0
        self.lock = threading.Lock()

    def start(self, usage: Any, agent: str | None) -> str:
        """The turn of the run `usage` belongs to, begun by `agent` when it is new."""
        with self.lock:
            found = self.runs.get(id(usage))
            if found is not None and found[0]() is usage:
                return found[1]
            self.count += 1
            turn = f"run:{_SESSION}:{self.count}"
            self.runs[id(usage)] = (weakref.ref(usage, lambda _: self.runs.pop(id(usage), None)), turn, agent)
            return turn

    def ids(self, context: Any) -> dict[str, Any]:
        """The call's id, turn and agent, from its ToolContext (None: a call made outside a run)."""
        if context is None:
            return {"call_id": f"call:{time.time_ns():x}:{threading.get_ident():x}"}
        agent = getattr(getattr(context, "agent", None), "name", None)
        turn = self.start(context.usage, agent)
        with self.lock:
            main = self.runs[id(context.usage)][2]
        ids: dict[str, Any] = {"call_id": context.tool_call_id, "turn_id": turn}
        if agent and main and agent != main:
            ids.update(agent_id=f"{turn}:{agent}", agent_type=agent)
        return ids


_all_turns: dict[int, _Turns] = {}


def _turns(governor: Governor) -> _Turns:
    return _all_turns.setdefault(id(governor), _Turns(governor))
