"""Codex CLI: its hook payload -> Event, a Decision -> its hook answer (the hot path).

Harness facts this relies on (seen on the real binary, 0.171.0; see docs/codex.md):
- One JSON object on stdin per hook process; common fields session_id, turn_id (on every
  event after SessionStart), transcript_path (the rollout JSONL), cwd, hook_event_name,
  model, permission_mode. Hooks of one parallel batch run concurrently.
- MCP tools are named mcp__<server>__<tool>. PreToolUse carries tool_name, tool_input,
  tool_use_id (the model's call id); PostToolUse adds tool_response, the MCP result as an
  object ({"content": [{"type": "text", "text": ...}], ...}). PostToolUse fires only for a
  successful result: an error result (isError) fires nothing after the call.
- SessionStart carries source: startup, resume (each `codex exec resume`), compact (after
  a compaction, which fires PreCompact and PostCompact first).
- A spawned subagent's events carry agent_id and agent_type (its role, the `name` of
  `.codex/agents/<name>.toml`), the parent's session_id, and a turn_id of its own. Its task
  arrives as a UserPromptSubmit with agent_id set. The spawn is the parent's `spawn_agent`
  call (tool_input {agent_type, message}; its PreToolUse carries the parent's turn_id and
  comes before any event of the subagent; its PostToolUse returns {"agent_id", "nickname"}).
- Answers are one JSON object on stdout, exit 0. A deny is hookSpecificOutput
  permissionDecision "deny" + permissionDecisionReason; the model gets "Tool call blocked by
  PreToolUse hook: <reason>. Tool: <name>". updatedInput is applied only together with
  permissionDecision "allow" (alone, Codex rejects the answer and runs the original call);
  that "allow" goes no further than the hook's answer: Codex's own MCP approval
  (approval_mode, approval policy) still judges the rewritten call. PostToolUse
  updatedMCPToolOutput / updatedToolOutput are ignored; {"decision": "block", "reason": R}
  makes R the call's whole output. additionalContext reaches the model as a developer
  message. A crash, timeout or invalid JSON fails open.

How the governor answers:
- A clamp is `allow` + updatedInput: the only rewrite Codex applies, and it bypasses nothing
  (pinned by tests/e2e/test_codex.py). No objection is no output, never a bare "allow".
- A trim (REPLACE) is PostToolUse decision "block" with the trimmed result as the reason:
  the model gets the trimmed text, without Codex's "Wall time" header. That is the
  downgrade CAPABILITIES names.
- A subagent's events are counted in the turn whose `spawn_agent` call started it (turn_id
  None; the engine fixes it at the subagent's first event: Case.enter_turn), not in the turn
  id Codex gives the subagent (otherwise every spawn would open a fresh per-turn budget) nor
  in a turn made current after the spawn. `spawn_agent` is a dispatch (`dispatches`: the role
  it starts). A subagent's task message is the parent model's words, not a user prompt: it
  is not classified and cannot arm the recall trigger.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers, claude_dialect
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import governed, readers
from governor.harnesses.payload import text as _text
from governor.harnesses.tool_names import split_tool_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "codex"
TITLE = "Codex CLI"
MAX_STRING = 10_000
# Subagent definitions (`<name>.toml`, the name is the agent_type), under the project and HOME.
AGENT_DIRS = (".codex/agents/{name}.toml",)
DISPATCH_TOOL = "spawn_agent"  # the tool that starts a subagent (the installer hooks its PreToolUse too)
# Its row in docs/harnesses.md: what it can express, and how the governor uses it.
CAPABILITIES = {
    "deny": 'yes: `permissionDecision: deny`; the model gets "Tool call blocked by PreToolUse hook: <reason>"',
    "rewrite arguments": "yes: `updatedInput` with `permissionDecision: allow` (Codex's own approval still applies)",
    "replace result": "downgraded: PostToolUse `decision: block` with the trimmed result as `reason` "
    "(`updatedMCPToolOutput` is ignored)",
    "context": "yes: `additionalContext` (a developer message)",
    "turn id": "yes: `turn_id` (a subagent's own turn counts in the user's turn)",
    "call id": "yes: `tool_use_id`",
    "subagent id": "yes: `agent_id`, `agent_type`",
    "on crash": "fails open (the governor never crashes: it answers or applies on_error)",
}

EVENTS = claude_dialect.events("PostToolUseFailure")
event_name, sniff_event = readers("hook_event_name", EVENTS)
# Events whose answer may carry hookSpecificOutput.additionalContext.
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "SubagentStart")


# How a replaced result reaches the model here (Event's fields; replay plays this harness's logs with
# them): as a block's reason, so a result is changed only to hold something back.
DELIVERY = {"replace_in_place": False}


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a payload describes; None for an event this adapter does not govern."""
    known = governed(payload, "hook_event_name", EVENTS)
    if known is None:
        return None
    kind = known[1]
    agent_id = _text(payload, "agent_id") or None
    if kind == ev.PROMPT and agent_id:
        return None  # a subagent's task, written by the parent model: not the user's prompt
    fields: dict[str, Any] = {
        "turn_id": None if agent_id else _text(payload, "turn_id") or None,
        "agent_id": agent_id,
        "agent_type": _text(payload, "agent_type") or None,
        "cwd": _text(payload, "cwd"),
        **DELIVERY,
    }
    fields.update(claude_dialect.event_fields(payload, kind, split_tool_name))
    if fields.get("tool_name") == DISPATCH_TOOL:
        spawn = fields.get("tool_input") or {}
        role, brief = spawn.get("agent_type"), spawn.get("message")
        fields["dispatches"] = role if isinstance(role, str) else ""
        fields["prompt"] = brief if isinstance(brief, str) else ""  # the brief the subagent starts with
    return Event(kind, _text(payload, "session_id", required=True) or "", **fields)


# Codex applies updatedInput only with "allow", and that allow stops at the hook: its MCP approval
# still runs on the rewritten call (docs/codex.md, "The allow question"). It ignores
# updatedMCPToolOutput; a block's reason becomes the call's output. Not capped: a trimmed result
# is already within the turn's budget, and cutting it would break an entry in half.
ANSWERS = answers.Dialect(
    pre=("PreToolUse",), post=("PostToolUse",), limit=MAX_STRING, context_events=CONTEXT_EVENTS,
    deny=claude_dialect.deny,
    rewrite=lambda tool_input: {"permissionDecision": "allow", "updatedInput": tool_input},
    replace=lambda text: {"decision": "block", "reason": text or "[memory-governor] result held back"},
    nested=(answers.DENY, answers.REWRITE, answers.CONTEXT),
)  # fmt: skip
render = ANSWERS.render
refusal = ANSWERS.refusal
