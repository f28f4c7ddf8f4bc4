"""Copilot CLI session logs (`~/.copilot/session-state/<session>/events.jsonl`) as replay steps.

The log becomes the events the hooks would have seen, in order (seen on 1.0.102): a start at
`session.start` (`startup`), each `session.resume` (`resume`) and `session.compaction_start`
(`compact`); a prompt for each `user.message` of the user (a subagent's dispatch prompt is
recorded as a `user.message` whose `source` is `agent-<dispatcher>`: no prompt); a call for
each `tool.execution_start` and its result at `tool.execution_complete`. An MCP tool is
spelled `mcp__<mcpServerName>__<mcpToolName>` as replay expects; a call inside a subagent
carries `parentToolCallId`, the `task` call that started it (`subagent.started` names the
agent). The result replayed is the one the server gave: `detailedContent` when a hook
replaced what the model saw, else `content`. A call a hook denied at the time
(`error.code: "denied"`) has no result.

Cold path.
"""

from __future__ import annotations

from typing import Any

from governor.harnesses.transcript import Call, Step, read_jsonl
from governor.harnesses.transcript import when as _when


def recognise(records: list[dict[str, Any]]) -> bool:
    """Is this a Copilot CLI session log? It opens with session.start from the copilot agent."""
    return any(
        r.get("type") == "session.start"
        and isinstance(r.get("data"), dict)
        and r["data"].get("producer") == "copilot-agent"
        for r in records[:20]
    )


STARTS = {"session.start": "startup", "session.resume": "resume", "session.compaction_start": "compact"}


def steps(path: str, records: list[dict[str, Any]] | None = None) -> list[Step]:
    records = read_jsonl(path) if records is None else records
    out: list[Step] = []
    agents: dict[str, tuple[str, str]] = {}  # the task call id that started a subagent -> (agent id, name)
    for record in records:
        kind = record.get("type")
        data = record.get("data")
        if not isinstance(data, dict):
            continue
        when = _when(record)
        if kind in STARTS:
            out.append(Step("start", STARTS[str(kind)], when=when))
        elif kind == "user.message":
            source = data.get("source")
            if isinstance(source, str) and source.startswith("agent-"):
                continue
            out.append(Step("prompt", str(data.get("content") or ""), str(data.get("messageId") or ""), when=when))
        elif kind == "subagent.started" and data.get("toolCallId"):
            call_id = str(data["toolCallId"])
            agents[call_id] = (f"agent-{call_id}", str(data.get("agentName") or "subagent"))
        elif kind == "tool.execution_start":
            server, tool = data.get("mcpServerName"), data.get("mcpToolName")
            name = f"mcp__{server}__{tool}" if server and tool else str(data.get("toolName") or "")
            arguments = data.get("arguments")
            call = Call(name, arguments if isinstance(arguments, dict) else {}, str(data.get("toolCallId") or ""),
                        agent=agents.get(str(data.get("parentToolCallId") or "")))  # fmt: skip
            out.append(Step("pre", call, when=when))
        elif kind == "tool.execution_complete":
            call_id = str(data.get("toolCallId") or "")
            result = data.get("result")
            result = result if isinstance(result, dict) else {}
            error = data.get("error")
            error = error if isinstance(error, dict) else {}
            if data.get("success"):
                text = result.get("detailedContent") or result.get("content") or ""
                out.append(Step("post", call_id, str(text), False, when=when))
            elif error.get("code") != "denied":
                out.append(Step("post", call_id, str(error.get("message") or "error"), True, when=when))
    return out
