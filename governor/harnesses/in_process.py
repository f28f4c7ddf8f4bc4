"""What the in-process governors of agent frameworks share: the event a governed MCP call makes.

`governor.sdk.openai_agents.govern` and `governor.sdk.langchain.govern` sit inside the program
that runs the agents, around each call of an MCP server's tool (the OpenAI Agents SDK's server
object, langchain-mcp-adapters' tool-call interceptor). Neither framework has a hook payload of
its own, so they describe each event to their adapter (governor.harnesses.openai_agents,
governor.harnesses.langchain) as a payload of this shape:

    {"event": "prompt" | "call" | "result" | "failed", "session_id", "turn_id", "call_id",
     "server", "tool", "arguments", "result" (the text the model reads), "prompt",
     "agent_id", "agent_type" (a subagent's name), "project"}

and the answer says what to do: `deny` (the reason: the model gets it instead of a result),
`arguments` (the clamped arguments the server receives), `replace` (the trimmed result text),
`context` (a line for the model, added to the result), `systemMessage` (for the user: the
program's stderr).

Facts the adapters rely on: the program's framework gives each call an id (the model's tool-call
id) and names the agent that made it; the governor numbers turns from the framework's own run
(one `Runner.run`, one graph invocation from a user message); what the model still holds from
earlier turns is the program's choice, so delivered-once never stands a pointer in for an
entry (`context_unseen`).

Hot path: standard library only (nothing of either framework is imported here).
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers
from governor.harnesses.payload import BadPayload, governed, mapping, text
from governor.harnesses.payload import event_name as _event_name
from governor.harnesses.payload import nonempty as _id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

EVENTS = {"prompt": ev.PROMPT, "call": ev.PRE_TOOL, "result": ev.POST_TOOL, "failed": ev.TOOL_FAILED}
AGENT_DIRS: tuple[str, ...] = ()  # agents are defined in code: the policy's subagents.agents names their tiers


def sniff_event(raw: bytes) -> str | None:
    return None  # the governors hand over parsed payloads, never bytes


def event_name(payload: Any) -> str | None:
    return _event_name(payload, "event")


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event one payload describes."""
    found = governed(payload, "event", EVENTS, "the event")
    if found is None:
        raise BadPayload(f"unknown event {payload.get('event')!r}")
    kind = found[1]
    fields: dict[str, Any] = {
        "turn_id": _id(payload, "turn_id"),
        "agent_id": _id(payload, "agent_id"),
        "agent_type": _id(payload, "agent_type"),
        "project": _id(payload, "project"),
        "context_unseen": True,
    }
    if kind == ev.PROMPT:
        fields["prompt"] = text(payload, "prompt") or ""
    else:
        server = _id(payload, "server", required=True) or ""
        tool = _id(payload, "tool", required=True) or ""
        fields.update(call_id=_id(payload, "call_id", required=True), tool_name=f"{server}/{tool}", server=server,
                      tool=tool, tool_input=mapping(payload, "arguments"))  # fmt: skip
        if kind == ev.POST_TOOL:
            fields["tool_result"] = text(payload, "result") or ""
    return Event(kind, _id(payload, "session_id", required=True) or "", **fields)


# deny, arguments, replace, context, systemMessage: the answer described above.
render = answers.plain
refusal = answers.plain_refusal
