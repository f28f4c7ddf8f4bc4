"""Replay a Claude Code session transcript under a policy: what would have been denied,
clamped or trimmed, and the tokens it would have saved.

The transcript (the JSONL at a session's transcript_path) becomes the events the hooks would
have seen, in order: SessionStart (startup; `resume` when a new run continues the file;
`compact` at a compaction boundary), UserPromptSubmit for each prompt, PreToolUse for each
tool_use (a parallel batch: all its PreToolUse first), PostToolUse (or PostToolUseFailure)
for each tool_result. A subagent's calls come from its side-chain transcript
(`<session>/subagents/agent-<id>.jsonl`, or `<stem>.agent-<name>.jsonl` beside the file) and
are played when the Agent call that spawned it runs.

Replay assumes the session would have made the same calls. A clamped search gets the first
results of the recorded one, as the server would have returned fewer.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

from governor.player import Call, Outcome, Player
from governor.results import result_text

DISPATCH_TOOLS = ("Agent", "Task")


class TranscriptError(ValueError):
    """A transcript line that cannot be read; the message says where."""


def _records(path: str) -> list[dict[str, Any]]:
    out = []
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
    except OSError as err:
        raise TranscriptError(f"{path}: cannot read it ({err.strerror})") from err
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise TranscriptError(f"{path}:{number}: not JSON ({err})") from None
        if isinstance(record, dict):
            out.append(record)
    return out


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
            out[str(meta["toolUseId"])] = (str(meta.get("agentType") or "subagent"), _records(candidate))
    return out


class Step:
    """One event to play: ("start", source) | ("prompt", text, id) | ("pre", Call) | ("post", call_id, text, error),
    at the time the transcript recorded (None when it did not)."""

    __slots__ = ("args", "kind", "when")

    def __init__(self, kind: str, *args: Any, when: float | None = None) -> None:
        self.kind = kind
        self.args = args
        self.when = when


def _when(record: dict[str, Any]) -> float | None:
    from datetime import datetime

    value = record.get("timestamp")
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def steps(path: str) -> list[Step]:
    records = _records(path)
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


class Turn:
    def __init__(self, number: int, prompt: str) -> None:
        self.number = number
        self.prompt = prompt
        self.outcomes: list[Outcome] = []
        self.before = 0
        self.after = 0

    def as_dict(self) -> dict[str, Any]:
        governed = [o for o in self.outcomes if o.governed]
        return {
            "turn": self.number,
            "prompt_chars": len(self.prompt),
            "calls": len(governed),
            "denied": sum(o.decision == "deny" for o in governed),
            "clamped": sum(o.decision == "clamp" for o in governed),
            "trimmed": sum(o.trimmed for o in governed),
            "tokens_before": self.before,
            "tokens_after": self.after,
            "tokens_saved": self.before - self.after,
            "decisions": [o.as_dict() for o in governed],
        }


def replay(path: str, policy: str | None = None) -> dict[str, Any]:
    """Play a transcript under `policy` (default: the effective policy here)."""
    from governor import compiled
    from governor.results import parse, render
    from governor.tokens import counter

    plan = steps(path)
    with Player(policy=policy, session_id="replay") as player:
        effective, notices = compiled.load(player.env, player.project, player.env["MEMORY_GOVERNOR_STATE_DIR"])
        count = counter(effective.unit).count
        turns: list[Turn] = [Turn(0, "")]
        open_calls: dict[str, Outcome] = {}
        for step in plan:
            player.now = step.when
            if step.kind == "start":
                player.start(step.args[0])
            elif step.kind == "prompt":
                turns.append(Turn(len(turns), step.args[0]))
                answer = player.prompt(step.args[0], step.args[1])
                context = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
                turns[-1].after += count(context) if context else 0
            elif step.kind == "pre":
                call: Call = step.args[0]
                outcome = player.pre(call)
                spec = _spec(effective, call.tool_name)
                outcome.governed = spec is not None
                outcome.role = spec["role"] if spec else None
                turns[-1].outcomes.append(outcome)
                open_calls[call.call_id] = outcome
            elif step.kind == "post":
                call_id, text, is_error = step.args
                if call_id not in open_calls:
                    continue
                outcome = open_calls.pop(call_id)
                turn = next(t for t in reversed(turns) if outcome in t.outcomes)
                memory = outcome.governed and outcome.role not in ("save", "summary")
                if memory and not is_error:
                    turn.before += count(text)
                if outcome.decision == "deny":
                    continue
                outcome.call.is_error = is_error
                if outcome.decision == "clamp" and outcome.role == "search" and outcome.updated_input:
                    text = _as_if_clamped(text, outcome, parse, render)
                player.post(outcome, text)
                if memory and not is_error and outcome.delivered is not None:
                    turn.after += count(outcome.delivered)
        digest = effective.digest
    result_turns = [t.as_dict() for t in turns if t.number > 0 or t.outcomes]
    keys = ("calls", "denied", "clamped", "trimmed", "tokens_before", "tokens_after", "tokens_saved")
    totals = {k: sum(t[k] for t in result_turns) for k in keys}
    return {"transcript": path, "policy": policy or "effective", "policy_digest": digest[:16], "unit": effective.unit,
            "notices": notices, "turns": result_turns, "totals": totals}  # fmt: skip


def _spec(policy: Any, tool_name: str) -> dict[str, Any] | None:
    from hooks.claude_code import split_tool_name

    server, tool = split_tool_name(tool_name)
    return policy.tool(server, tool) if server and tool else None


def _as_if_clamped(text: str, outcome: Outcome, parse: Any, render: Any) -> str:
    """The recorded search as a clamped call would have returned it: its first results."""
    assert outcome.updated_input is not None
    limit = next((v for k, v in outcome.updated_input.items() if outcome.call.tool_input.get(k) != v), None)
    if not isinstance(limit, int):
        return text
    parsed = parse(text, "search")
    if len(parsed.entries) <= limit:
        return text
    return str(render(parsed, set(range(limit)), ""))
