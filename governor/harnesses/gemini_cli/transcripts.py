"""Gemini CLI session logs (the JSONL at a session's transcript_path, which Gemini CLI writes
under `~/.gemini/tmp/<project>/chats/`) as replay steps.

What 0.61.0 writes: a header record `{sessionId, projectHash, startTime, kind}` when a run
starts (a resumed run appends another to the same file), `{"$set": ...}` updates (one holds
the whole message list again; after a compression it begins with a `<state_snapshot>`
summary), and messages `{id, timestamp, type: "user" | "gemini",
content, toolCalls?}`, a message written again when its tool calls finish (the last version
counts, in the place of the first). A user message's text is a prompt, except the first one
of a run (`<session_context>`); a gemini message's `toolCalls` are one parallel batch, each
`{id, name, args, result: [{functionResponse: {response: {output | error}}}], displayName:
"<tool> (<server> MCP Server)"}`. A subagent's log is `chats/<session id>/<its id>.jsonl`
(`kind: "subagent"`), its first prompt the `invoke_agent` call's `prompt`; its calls are
played inside that call, as that agent.

Tool names are given as replay plays them, `mcp__<server>__<tool>` (from displayName: the
tool name itself does not say where the server's name ends).

Cold path.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from governor.harnesses.gemini_cli import DISPATCH_TOOL, result_text
from governor.harnesses.transcript import Call, Step, read_jsonl, when

_MCP_DISPLAY = re.compile(r"^(?P<tool>.+) \((?P<server>.+) MCP Server\)$")
_SESSION_CONTEXT = "<session_context>"
_SNAPSHOT = "<state_snapshot>"  # the summary chat compression puts in place of the history


def recognise(records: list[dict[str, Any]]) -> bool:
    """Is this a Gemini CLI session log? Its runs start with a header naming the project's hash."""
    return any("sessionId" in r and "projectHash" in r and "kind" in r for r in records[:50])


def _when(record: dict[str, Any]) -> float | None:
    return when(record, ("timestamp", "startTime"))  # a run's header has startTime


def _messages(records: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """("start", header), ("compact", record) and ("message", the last version of a message), in
    order of first appearance. A `$set` of the whole message list is no new message: it is the
    history written again (a resumed run), or, when it brings a <state_snapshot>, compressed."""
    order: list[tuple[str, Any]] = []
    latest: dict[str, dict[str, Any]] = {}
    snapshots: set[str] = set()
    for record in records:
        if "projectHash" in record and "kind" in record:
            order.append(("start", record))
            continue
        updates = record.get("$set")
        if isinstance(updates, dict):
            batch = updates.get("messages")
            fresh = [m for m in batch if isinstance(m, dict) and _SNAPSHOT in str(m.get("content"))
                     and m.get("id") not in snapshots] if isinstance(batch, list) else []  # fmt: skip
            if fresh:
                snapshots.update(str(m.get("id")) for m in fresh)
                order.append(("compact", record))
            continue
        ident = record.get("id")
        if not isinstance(ident, str) or record.get("type") not in ("user", "gemini"):
            continue
        if ident not in latest:
            order.append(("message", ident))
        latest[ident] = record
    return [(kind, latest[item] if kind == "message" else item) for kind, item in order]


def _prompt(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or any(isinstance(p, dict) and "functionResponse" in p for p in content):
        return None
    text = "\n".join(str(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return None if not text or text.startswith(_SESSION_CONTEXT) else text


def _tool_name(call: dict[str, Any]) -> str:
    match = _MCP_DISPLAY.match(str(call.get("displayName") or ""))
    if match:
        return f"mcp__{match.group('server')}__{match.group('tool')}"
    return str(call.get("name") or "")


def _result(call: dict[str, Any]) -> tuple[str, bool]:
    for part in call.get("result") or []:
        response = part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            if "error" in response:
                return str(response["error"]), True
            return result_text({"llmContent": response.get("output", "")}), False
    return "", call.get("status") == "error"


def _subagents(path: str, records: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(first prompt, records) of each subagent log of this session, oldest first."""
    session = next((r["sessionId"] for r in records if isinstance(r.get("sessionId"), str)), None)
    if not session:
        return []
    out = []
    for candidate in sorted(
        glob.glob(os.path.join(glob.escape(os.path.dirname(path)), glob.escape(session), "*.jsonl"))
    ):
        try:
            chain = read_jsonl(candidate)
        except ValueError:
            continue
        first = next((p for kind, m in _messages(chain) if kind == "message" for p in [_prompt(m)] if p), None)
        if first is not None:
            out.append((first, chain))
    return out


def steps(path: str, records: list[dict[str, Any]] | None = None) -> list[Step]:
    records = read_jsonl(path) if records is None else records
    out: list[Step] = []
    _walk(records, _subagents(path, records), out, agent=None)
    return out


def _walk(records: list[dict[str, Any]], chains: list[tuple[str, list[dict[str, Any]]]], out: list[Step],
          agent: tuple[str, str] | None) -> None:  # fmt: skip
    runs = 0
    for kind, item in _messages(records):
        when = _when(item)
        if kind == "start":
            if agent is None:
                out.append(Step("start", "resume" if runs else "startup", when=when))
            runs += 1
            continue
        if kind == "compact":
            if agent is None:
                out.append(Step("start", "compact", when=out[-1].when if out else None))
            continue
        if item.get("type") == "user":
            prompt = _prompt(item)
            if prompt is not None and agent is None:
                out.append(Step("prompt", prompt, str(item.get("id") or ""), when=when))
            continue
        calls = [c for c in item.get("toolCalls") or [] if isinstance(c, dict)]
        for call in calls:
            arguments = call.get("args")
            step = Call(_tool_name(call), arguments if isinstance(arguments, dict) else {}, str(call.get("id") or ""),
                        agent=agent)  # fmt: skip
            out.append(Step("pre", step, when=when))
            if call.get("name") == DISPATCH_TOOL and isinstance(arguments, dict):
                prompt = arguments.get("prompt")
                chain = next((c for c in chains if c[0] == prompt), None)
                if chain is not None:
                    chains.remove(chain)
                    name = str(arguments.get("agent_name") or "subagent")
                    _walk(chain[1], [], out, agent=(f"agent-{step.call_id}", name))
        for call in calls:
            text, is_error = _result(call)
            out.append(Step("post", str(call.get("id") or ""), text, is_error, when=_when(call) or when))
