"""Codex CLI session logs (rollout JSONL under `$CODEX_HOME/sessions/`) as replay steps.

A rollout holds one thread: `session_meta` first, then per turn an `event_msg` task_started,
the user's message (an `item_completed` of a UserMessage), and the model's `response_item`s:
`function_call` (an MCP tool as `namespace: "mcp__<server>"` + `name`), `function_call_output`
(a list of text items after Codex's "Wall time" header, or a plain string for a refusal).
Each `codex exec resume` appends to the same file, announced by `thread_settings_applied`
after a finished turn; a compaction writes a `compacted` record. A spawned subagent has a
rollout of its own beside it (`session_meta.parent_thread_id`, `agent_role`); its calls are
played when the parent's spawn_agent call returns its agent id.

Cold path.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

from governor.harnesses.transcript import Call, Step, read_jsonl
from governor.harnesses.transcript import when as _when

WALL_TIME = "Wall time: "
REFUSED = ("Tool call blocked by PreToolUse hook:", "Command blocked by PreToolUse hook:")


def recognise(records: list[dict[str, Any]]) -> bool:
    """Is this a Codex rollout? It opens with session_meta naming the CLI version."""
    return any(r.get("type") == "session_meta" and isinstance(r.get("payload"), dict)
               and "cli_version" in r["payload"] for r in records[:5])  # fmt: skip


def _meta(records: list[dict[str, Any]]) -> dict[str, Any]:
    first = next((r for r in records if r.get("type") == "session_meta"), {})
    payload = first.get("payload")
    return payload if isinstance(payload, dict) else {}


def side_chains(path: str, records: list[dict[str, Any]]) -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """Subagent rollouts beside this one, by agent id (the spawn_agent call's result names it)."""
    thread = _meta(records).get("id")
    out: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    if not thread:
        return out
    for candidate in sorted(glob.glob(os.path.join(glob.escape(os.path.dirname(path)), "rollout-*.jsonl"))):
        if candidate == path:
            continue
        try:
            chain = read_jsonl(candidate)
        except ValueError:
            continue
        meta = _meta(chain)
        if meta.get("parent_thread_id") == thread and meta.get("id"):
            out[str(meta["id"])] = (str(meta.get("agent_role") or "subagent"), chain)
    return out


def _output(value: Any) -> tuple[str, bool]:
    """(the tool's text, refused?) of a function_call_output."""
    if isinstance(value, str):
        return value, value.startswith(REFUSED)
    parts = [str(p.get("text", "")) for p in value if isinstance(p, dict)] if isinstance(value, list) else []
    if parts and parts[0].startswith(WALL_TIME):
        parts = parts[1:]
    return "\n".join(parts), False


def _tool_name(item: dict[str, Any]) -> str:
    name = str(item.get("name") or "")
    namespace = item.get("namespace")
    return f"{namespace}__{name}" if isinstance(namespace, str) and namespace.startswith("mcp__") else name


def steps(path: str, records: list[dict[str, Any]] | None = None) -> list[Step]:
    records = read_jsonl(path) if records is None else records
    first = next((_when(r) for r in records if _when(r) is not None), None)
    out = [Step("start", "startup", when=first)]
    _walk(records, side_chains(path, records), out, agent=None)
    return out


def _walk(
    records: list[dict[str, Any]], chains: dict[str, Any], out: list[Step], agent: tuple[str, str] | None
) -> None:
    turns_done = 0
    calls: dict[str, str] = {}
    for record in records:
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        kind, what, when = record.get("type"), payload.get("type"), _when(record)
        if kind == "compacted" and agent is None:
            out.append(Step("start", "compact", when=when))
        elif kind == "event_msg" and what == "task_complete":
            turns_done += 1
        elif kind == "event_msg" and what == "thread_settings_applied" and turns_done and agent is None:
            out.append(Step("start", "resume", when=when))
            turns_done = 0
        elif kind == "event_msg" and what == "item_completed" and agent is None:
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "UserMessage":
                prompt = "\n".join(str(c.get("text", "")) for c in item.get("content") or [] if isinstance(c, dict))
                out.append(Step("prompt", prompt, str(payload.get("turn_id") or ""), when=when))
        elif kind == "response_item" and what == "function_call":
            try:
                arguments = json.loads(payload.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            call_id = str(payload.get("call_id") or "")
            calls[call_id] = _tool_name(payload)
            out.append(Step("pre", Call(calls[call_id], arguments if isinstance(arguments, dict) else {}, call_id,
                                        agent=agent), when=when))  # fmt: skip
        elif kind == "response_item" and what == "function_call_output":
            call_id = str(payload.get("call_id") or "")
            text, refused = _output(payload.get("output"))
            out.append(Step("post", call_id, text, refused, when=when))
            if calls.get(call_id) == "spawn_agent" and not refused:
                try:
                    spawned = json.loads(text).get("agent_id")
                except (ValueError, AttributeError):
                    spawned = None
                chain = chains.get(str(spawned)) if spawned else None
                if chain:
                    agent_type, chain_records = chain
                    _walk(chain_records, {}, out, agent=(str(spawned), agent_type))
