"""Pi: its extension's messages -> Event, a Decision -> the answer the extension applies (the hot path).

Pi runs no hook commands: it loads TypeScript or JavaScript extensions into its own process. `install
pi` writes one (extension.js, filled in by setup.py) that sends each event it forwards, as one JSON
object, to the warm server's socket, or to the hook process when there is no server, and applies the
JSON object that comes back (governor/harnesses/client.js). The message and the answer are this module's.

Harness facts this relies on (seen on the real binary, @earendil-works/pi-coding-agent 1.6.0; see
docs/pi.md):
- Extensions load from `~/.pi/agent/extensions/` (or $PI_CODING_AGENT_DIR/extensions/) and, in a
  project the user trusts (`~/.pi/agent/trust.json`), from `.pi/extensions/`. Handlers are awaited.
- `before_agent_start` fires once per prompt before the agent runs (`messageType` "user" for the
  user's prompt, "custom" for a message an extension sent); a returned `message` reaches the model
  with the prompt. `turn_start`/`turn_end` fire per model request, not per prompt: a turn of the
  governor is a user's prompt.
- `tool_call` fires for every tool call before it runs (one reply's calls are checked one after the
  other, then run concurrently); changing `event.input` in place changes what the tool receives;
  returning `{block: true, reason}` makes the model get the reason as the call's error result.
- `tool_result` fires after the tool ran; returning `{content}` replaces what the model gets.
  A call made from a `codemode` script fires both with `parentToolCallId`; the script gets the result.
- MCP is built in (`~/.pi/agent/mcp.json`, `.pi/mcp.json` in a trusted project): tools are named
  `mcp__<server>__<tool>`, every character outside [A-Za-z0-9_] made `_` (a name two tools would
  share gets a hash suffix); the extension knows each governed name's server and tool and sends them.
- `session_start` carries `reason` (startup, resume, new, fork, reload); `session_compact` fires after
  a compaction. Pi has no subagents of its own.

No objection is no output; the extension then changes nothing.
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

NAME = "pi"
TITLE = "Pi"
MAX_STRING = 100_000  # Pi caps no answer; this keeps one bounded
EXTENSION_FILE = "memory-governor.js"  # what `install pi` writes into an extensions folder
AGENT_DIRS: tuple[str, ...] = ()  # Pi has no subagents
# Its row in docs/harnesses.md: what it can express, and how the governor uses it.
CAPABILITIES = {
    "deny": "yes: the extension returns `block` with the reason; the model gets it as the call's error result",
    "rewrite arguments": "yes: the extension changes `event.input` in place",
    "replace result": "yes: the extension returns the `tool_result`'s new `content`",
    "context": "on a prompt: a message with it (`before_agent_start`); before or after a tool: added to its result",
    "turn id": "no: a turn starts at each user prompt (`before_agent_start`)",
    "call id": "yes: `toolCallId`",
    "subagent id": "none: Pi has no subagents",
    "on crash": "when no governor answers, the extension applies on_error itself (closed when it never learnt "
    "the policy)",
}

EVENTS = {
    "session_start": ev.SESSION_START,
    "before_agent_start": ev.PROMPT,
    "tool_call": ev.PRE_TOOL,
    "tool_result": ev.POST_TOOL,
    "session_compact": ev.SESSION_START,  # a compaction: it arms what a compaction unlocks
}
event_name, sniff_event = readers("event", EVENTS)
# session_start's reason -> the engine's source (new, fork: a session that starts; reload: no new start).
SOURCES = {"startup": "startup", "new": "startup", "fork": "startup", "resume": "resume"}


def tool_name(server: str, tool: str) -> str:
    """The name Pi gives an MCP server's tool: `mcp__<server>__<tool>`, every character outside
    [A-Za-z0-9_] made `_` (`my-engram` + `mem_search` -> `mcp__my_engram__mem_search`)."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in f"mcp__{server}__{tool}")


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a message describes; None for one this adapter does not govern."""
    known = script_message(payload, EVENTS)
    if known is None:
        return None
    name, kind, fields = known
    if kind == ev.PROMPT:
        fields["prompt"] = _text(payload, "prompt") or ""
        if payload.get("messageType") != "user":
            fields["machine_made"] = True  # a message an extension sent: no user's request
    elif name == "session_compact":
        fields["source"] = "compact"
    elif kind == ev.SESSION_START:
        source = SOURCES.get(_text(payload, "reason") or "")
        if source is None:
            return None  # a reload: the same session goes on
        fields["source"] = source
    return Event(kind, _text(payload, "sessionId", required=True) or "", **fields)


ANSWERS = answers.scripted("tool_call", "tool_result", MAX_STRING, tuple(EVENTS))
render = ANSWERS.render
refusal = ANSWERS.refusal
