"""What the harnesses that took Claude Code's hook protocol share (Codex CLI, Qwen Code, Factory
Droid): its event names, the fields of a tool call, a prompt and a session start, and the refusal.

Each adapter still says what is its own: which of the events it sends, its turn and agent fields,
how it names MCP tools, and how (or whether) it rewrites arguments and replaces results.

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.harnesses.payload import mapping
from governor.harnesses.payload import text as _text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Claude Code's hook event names -> the engine's events.
EVENTS = {
    "SessionStart": ev.SESSION_START,
    "UserPromptSubmit": ev.PROMPT,
    "PreToolUse": ev.PRE_TOOL,
    "PostToolUse": ev.POST_TOOL,
    "PostToolUseFailure": ev.TOOL_FAILED,
    "PreCompact": ev.PRE_COMPACT,
    "SubagentStart": ev.SUBAGENT_START,
    "SubagentStop": ev.SUBAGENT_STOP,
    "Stop": ev.STOP,
}


def events(*left_out: str) -> dict[str, str]:
    """EVENTS without those a harness does not send."""
    return {name: kind for name, kind in EVENTS.items() if name not in left_out}


def deny(reason: str) -> dict[str, Any]:
    """A refusal, inside `hookSpecificOutput`: the model gets the reason as the call's error."""
    return {"permissionDecision": "deny", "permissionDecisionReason": reason}


def event_fields(payload: dict[str, Any], kind: str, split: Callable[[str], tuple[str | None, str | None]],
                 call_id: str = "tool_use_id") -> dict[str, Any]:  # fmt: skip
    """The fields of a tool call (`split(tool_name)` -> its server and tool; the harness's call id
    in `call_id`, or none: then the call is known by its tool and arguments), a prompt or a session
    start, as these harnesses send them."""
    out: dict[str, Any] = {}
    if kind in (ev.PRE_TOOL, ev.POST_TOOL, ev.TOOL_FAILED):
        tool_name = _text(payload, "tool_name", required=True) or ""
        tool_input = mapping(payload, "tool_input")
        server, tool = split(tool_name)
        out.update(tool_name=tool_name, server=server, tool=tool, tool_input=tool_input)
        if call_id:
            out["call_id"] = _text(payload, call_id)
        else:
            out["call_key"] = ev.call_key(tool_name, tool_input or {})
        if kind == ev.POST_TOOL:
            from governor.engine.results import result_text

            out["tool_result"] = result_text(payload.get("tool_response"))
    elif kind == ev.PROMPT:
        out["prompt"] = _text(payload, "prompt") or ""
    elif kind == ev.SESSION_START:
        out["source"] = _text(payload, "source")
    return out
