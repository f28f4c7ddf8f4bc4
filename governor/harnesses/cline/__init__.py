"""Cline: its plugin's messages -> Event, a Decision -> the answer the plugin applies (the hot path).

Cline's file hooks (executables named PreToolUse, PostToolUse, ... in `.clinerules/hooks/`,
`.cline/hooks/`, `~/.cline/hooks/`) cannot refuse one call: a `cancel` aborts the whole task, and
nothing replaces a result. Its plugins can: `install cline` writes one (plugin.js, filled in by
setup.py) into `.cline/plugins/` or `~/.cline/plugins/`, which forwards each runtime hook, as one
JSON object, to the governor (governor/harnesses/client.js) and applies the answer. The message and
the answer are this module's.

Harness facts this relies on (seen on the real binary, the `cline` CLI 3.0.65 with @cline/core
0.0.86; see docs/cline.md):
- A plugin's `setup(api, ctx)` gets `ctx.session.sessionId` (the CLI session, `--id` resumes it) and
  `ctx.workspaceInfo.rootPath`. Its hooks run in a sandbox process and are awaited.
- `beforeRun({snapshot})` fires once per run: a root agent's run is one user prompt (the last user
  message in `snapshot.messages`); a subagent's (`spawn_agent`) has `snapshot.parentAgentId` set.
- `beforeModel({snapshot, request})` may return `{messages}`: what that request sends instead.
- `beforeTool({snapshot, toolCall, input})`: `{skip: true, reason}` gives the model `{"error": reason}`
  as the result and the run goes on; `{input}` replaces the call's arguments; `{appendContext}` adds
  a `<hook_context>` block after the results. One reply's calls are checked one after the other.
- `afterTool({..., result})`: `{result}` replaces what the model gets (the model reads the JSON of
  `result.output`, `{"content": [...]}` for an MCP tool).
- MCP tools are named `<server>__<tool>` (characters outside [A-Za-z0-9_-], or a name past 64
  characters: cleaned, cut, and given a hash suffix); the plugin knows each governed name's server and
  tool and sends them.

No objection is no output; the plugin then changes nothing.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import readers, script_message
from governor.harnesses.payload import text as _text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "cline"
TITLE = "Cline"
MAX_STRING = 50_000  # Cline's own cap on a hook's injected context (MAX_HOOK_CONTEXT_SIZE)
PLUGIN_FILE = "memory-governor.js"  # what `install cline` writes into a plugins folder
AGENT_DIRS: tuple[str, ...] = ()  # spawn_agent takes its system prompt inline: no definitions to read
# Its row in docs/harnesses.md: what it can express, and how the governor uses it.
CAPABILITIES = {
    "deny": 'yes: the plugin\'s beforeTool returns `skip` with the reason; the model gets `{"error": reason}` '
    "(a file hook's `cancel` would abort the whole task)",
    "rewrite arguments": "yes: beforeTool returns the whole new `input`",
    "replace result": "yes: afterTool returns the new `result` (file hooks cannot)",
    "context": "on a prompt: added to the user's message in the run's requests; around a tool: `appendContext`",
    "turn id": "no: a turn starts at each root agent's run (`beforeRun`)",
    "call id": "yes: `toolCallId`",
    "subagent id": "yes: `agentId`, `parentAgentId` (`spawn_agent`), counted in the session's turn",
    "on crash": "when no governor answers, the plugin applies on_error itself (closed when it never learnt the policy)",
}

EVENTS = {
    "session_start": ev.SESSION_START,
    "prompt": ev.PROMPT,
    "tool_call": ev.PRE_TOOL,
    "tool_result": ev.POST_TOOL,
}
event_name, sniff_event = readers("event", EVENTS)
SOURCES = ("startup", "resume")


def tool_name(server: str, tool: str) -> str:
    """The name Cline gives an MCP server's tool: `<server>__<tool>`, or, where that holds a
    character outside [A-Za-z0-9_-] or passes 64 characters, the name cleaned (each run of such
    characters made `_`), cut to 55 characters, and `_` and 8 hex digits of its sha1 added."""
    name = f"{server}__{tool}"
    clean, run = [], False
    for c in name:
        ok = c.isascii() and (c.isalnum() or c in "_-")
        if ok or not run:
            clean.append(c if ok else "_")
        run = not ok
    cleaned = "".join(clean)
    if cleaned == name and len(name) <= 64:
        return name
    import hashlib

    return f"{cleaned[:55] or 'mcp_tool'}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a message describes; None for one this adapter does not govern."""
    known = script_message(payload, EVENTS)
    if known is None:
        return None
    _, kind, fields = known
    if _text(payload, "parentAgentId"):  # a subagent's: counted in the session, in its tier
        if kind not in (ev.PRE_TOOL, ev.POST_TOOL, ev.TOOL_FAILED):
            return None  # its task is the parent model's words: no user prompt, no start
        fields.update(agent_id=_text(payload, "agentId", required=True), agent_type=_text(payload, "agentRole") or None)
    if kind == ev.PROMPT:
        fields["prompt"] = _text(payload, "prompt") or ""
    elif kind == ev.SESSION_START:
        source = _text(payload, "reason")
        fields["source"] = source if source in SOURCES else None
    return Event(kind, _text(payload, "sessionId", required=True) or "", **fields)


ANSWERS = answers.scripted("tool_call", "tool_result", MAX_STRING, tuple(EVENTS))
render = ANSWERS.render
refusal = ANSWERS.refusal
