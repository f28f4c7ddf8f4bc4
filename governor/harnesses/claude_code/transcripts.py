"""Claude Code transcripts (the JSONL at a session's transcript_path) as replay steps.

The transcript becomes the events the hooks would have seen, in order: SessionStart
(startup; `resume` when a new run continues the file; `compact` at a compaction boundary),
UserPromptSubmit for each prompt, PreToolUse for each tool_use (a parallel batch: all its
PreToolUse first), PostToolUse (or PostToolUseFailure) for each tool_result. A subagent's
calls come from its side-chain transcript (`<session>/subagents/agent-<id>.jsonl`, or
`<stem>.agent-<name>.jsonl` beside the file) and are played when the Agent call that
spawned it runs.

Cold path.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

from governor.engine.results import result_text
from governor.harnesses.transcript import Call, Step, read_jsonl
from governor.harnesses.transcript import when as _when

DISPATCH_TOOLS = ("Agent", "Task")


def recognise(records: list[dict[str, Any]]) -> bool:
    """Is this a Claude Code transcript? Its records carry sessionId and a message type."""
    return any("sessionId" in r and r.get("type") in ("user", "assistant", "system") for r in records[:50])


def side_chains(path: str, records: list[dict[str, Any]]) -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """Subagent transcripts by the tool_use id of the Agent call that spawned them."""
    session = next((r.get("sessionId") for r in records if r.get("sessionId")), None)
    stem = path[: -len(".jsonl")] if path.endswith(".jsonl") else path
    candidates = glob.glob(f"{glob.escape(stem)}.agent-*.jsonl")
    if session:
        candidates += glob.glob(
            os.path.join(glob.escape(os.path.dirname(path)), glob.escape(session), "subagents", "agent-*.jsonl")
        )
    out: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for candidate in sorted(candidates):
        meta_path = candidate[: -len(".jsonl")] + ".meta.json"
        try:
            with open(meta_path, encoding="utf-8") as handle:
                meta = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("toolUseId"):
            out[str(meta["toolUseId"])] = (str(meta.get("agentType") or "subagent"), read_jsonl(candidate))
    return out


def steps(path: str, records: list[dict[str, Any]] | None = None) -> list[Step]:
    records = read_jsonl(path) if records is None else records
    chains = side_chains(path, records)
    first = next((_when(r) for r in records if _when(r) is not None), None)
    out = [Step("start", "startup", when=first)]
    _walk(records, chains, out, agent=None)
    return out


def _walk(
    records: list[dict[str, Any]], chains: dict[str, Any], out: list[Step], agent: tuple[str, str] | None
) -> None:
    run_ended = False
    for record in records:
        kind = record.get("type")
        if kind == "last-prompt":
            run_ended = True
            continue
        when = _when(record)
        if kind == "system" and record.get("subtype") == "compact_boundary":
            out.append(Step("start", "compact", when=when))
            run_ended = False
            continue
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if kind == "user" and isinstance(content, str):
            if (
                agent is None
                and not record.get("isSidechain")
                and not record.get("isMeta")
                and not record.get("isCompactSummary")
            ):
                if run_ended:
                    out.append(Step("start", "resume", when=when))
                    run_ended = False
                out.append(Step("prompt", content, record.get("promptId") or record.get("uuid") or "", when=when))
            continue
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if kind == "assistant" and block.get("type") == "tool_use":
                arguments = block.get("input")
                call = Call(str(block.get("name") or ""), arguments if isinstance(arguments, dict) else {},
                            str(block.get("id") or ""), agent=agent)  # fmt: skip
                out.append(Step("pre", call, when=when))
                chain = chains.get(call.call_id)
                if chain and call.tool_name in DISPATCH_TOOLS:
                    agent_type, chain_records = chain
                    _walk(chain_records, {}, out, agent=(f"agent-{call.call_id}", agent_type))
            elif kind == "user" and block.get("type") == "tool_result":
                out.append(
                    Step(
                        "post",
                        str(block.get("tool_use_id") or ""),
                        result_text(block.get("content")),
                        bool(block.get("is_error")),
                        when=when,
                    )
                )
