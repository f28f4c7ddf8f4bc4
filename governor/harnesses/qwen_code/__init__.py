"""Qwen Code: its hook payload -> Event, a Decision -> its hook answer (the hot path).

Qwen Code is a fork of Gemini CLI whose hooks took Claude Code's names and fields. Harness facts
this relies on (seen on the real binary, @qwen-code/qwen-code 0.24.4; see docs/qwen-code.md):
- One JSON object on stdin per hook process: session_id, transcript_path, cwd, hook_event_name,
  timestamp, permission_mode, and `prompt_id` (`<session id>########<n>`, one per user prompt)
  on every event after the first prompt.
- UserPromptSubmit carries `prompt` and `submitted_prompt`; it fires again before each later model
  request of the same prompt, with the same prompt_id, an empty prompt and no submitted_prompt:
  no user's prompt, so not governed (advice there would say "no memory needed" mid-turn).
- PreToolUse carries tool_name, tool_input, tool_use_id (`toolu_...`, the same on PostToolUse)
  and tool_call_id (the model's own call id). PostToolUse adds tool_response {llmContent: [{text}],
  returnDisplay}. MCP tools are named mcp__<server>__<tool>.
- PreToolUse `hookSpecificOutput.permissionDecision: "deny"` with permissionDecisionReason: the
  model gets the reason as the call's error. `updatedInput` is ignored (the server receives the
  arguments the model sent), so a clamp is a refusal naming the arguments (`no_rewrite`).
- PostToolUse `{"continue": false, "stopReason": R}`: the model gets R in place of the result, as
  the call's error, and the run goes on. No field replaces a result as a success.
- additionalContext on SessionStart, UserPromptSubmit and PostToolUse reaches the model, < and >
  escaped. systemMessage is shown to the user.
- "permissionDecision": "allow" would skip Qwen's own approval prompt: never sent. No objection
  is no output.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers, claude_dialect
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import placed, readers
from governor.harnesses.payload import text as _text
from governor.harnesses.tool_names import split_tool_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "qwen-code"
TITLE = "Qwen Code"
MAX_STRING = 100_000  # Qwen sets no cap on a hook's strings; this keeps one answer bounded
AGENT_DIRS = (".qwen/agents",)  # subagent definitions, under the project and under HOME
# Its row in docs/harnesses.md: what it can express, and how the governor uses it.
CAPABILITIES = {
    "deny": "yes: `permissionDecision: deny`; the model gets the reason as the call's error",
    "rewrite arguments": "downgraded: `updatedInput` is ignored (0.24.4), so a clamp is a refusal naming the "
    "arguments to call again with (the refused call counts nothing)",
    "replace result": "downgraded: PostToolUse `continue: false` with the trimmed result as `stopReason`, which "
    "the model gets as the call's error; the run goes on",
    "context": "yes: `additionalContext` on SessionStart, UserPromptSubmit, PostToolUse",
    "turn id": "yes: `prompt_id`",
    "call id": "yes: `tool_use_id`",
    "subagent id": "◐ `agent_id`, `agent_type` where sent (Doc)",
    "on crash": "fails open (a crash, a timeout); the governor always answers or applies on_error",
}

EVENTS = claude_dialect.EVENTS
event_name, sniff_event = readers("hook_event_name", EVENTS)
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a payload describes; None for an event this adapter does not govern."""
    found = placed(payload, "hook_event_name", EVENTS, env, "QWEN_PROJECT_DIR")
    if found is None:
        return None
    kind, fields = found
    fields.update(turn_id=_text(payload, "prompt_id") or None, agent_id=_text(payload, "agent_id") or None,
                  agent_type=_text(payload, "agent_type") or None)  # fmt: skip
    fields.update(claude_dialect.event_fields(payload, kind, split_tool_name))
    if kind in (ev.PRE_TOOL, ev.POST_TOOL, ev.TOOL_FAILED):
        fields["no_rewrite"] = True  # Qwen ignores updatedInput
        fields["replace_in_place"] = False  # a replaced result arrives as the stopped call's reason
    elif kind == ev.PROMPT and not fields["prompt"] and "submitted_prompt" not in payload:
        return None  # the same prompt's next model request
    return Event(kind, _text(payload, "session_id", required=True) or "", **fields)


# A rewrite is never asked for (no_rewrite): `updatedInput` is what the docs name for it.
ANSWERS = answers.Dialect(
    pre=("PreToolUse",), post=("PostToolUse",), limit=MAX_STRING, context_events=CONTEXT_EVENTS,
    deny=claude_dialect.deny,
    rewrite=lambda tool_input: {"updatedInput": tool_input},
    replace=lambda text: {"continue": False, "stopReason": text},
    nested=(answers.DENY, answers.REWRITE, answers.CONTEXT),
)  # fmt: skip
render = ANSWERS.render
refusal = ANSWERS.refusal
