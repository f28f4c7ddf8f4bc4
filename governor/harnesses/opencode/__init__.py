"""OpenCode: its plugin's messages -> Event, a Decision -> the answer the plugin applies (the hot path).

OpenCode runs no hook commands: it loads JavaScript plugins into its own process. `install
opencode` writes one (plugin.js, filled in by setup.py) that sends each hook call it forwards, as
one JSON object, to the warm server's socket, or to the hook process when there is no server,
and applies the JSON object that comes back. The message and the answer are this module's.

Harness facts this relies on (seen on the real binary, 1.18.33; see docs/opencode.md):
- `chat.message(input {sessionID, agent?, messageID?}, output {message, parts})` fires once per
  message to a session, before it is stored: for each user prompt, and for a subagent's
  dispatch prompt in the subagent's own session. A text part pushed onto `output.parts` (with an
  id of OpenCode's form) reaches the model with the message. OpenCode's own injected messages
  (a background task's result) carry only `synthetic` parts. `opencode run`'s message is its
  arguments joined, each holding a space in `"…"`; the plugin says which message that is
  (`runArgs`), and the quotes are undone before the prompt is judged.
- `tool.execute.before(input {tool, sessionID, callID}, output {args})` fires for every tool
  call, a subagent's too; throwing makes the model get exactly the error's message as the
  result; changing `output.args` in place changes what the tool receives.
- `tool.execute.after(input {tool, sessionID, callID, args}, output)`: for an MCP tool `output`
  is the server's result `{content: [blocks]}`; replacing `output.content` replaces what the
  model gets (`output.output` does not). It does not fire for a failed call (an MCP error result
  throws): the call's part turns to status "error", which the plugin reports as `tool.failed`.
- MCP tools are named `<server>_<tool>`, every character outside [A-Za-z0-9_-] made `_`, so a
  name alone cannot say where the server's name ends; the plugin knows each governed name's
  server and tool (the installer writes them in) and sends them (`mcp`).
- A subagent (the `task` tool) runs in a child session whose info has `parentID` (the
  dispatching session) and `agent` (its name); its calls carry the child's sessionID. The
  plugin sends both with every message, from the session info OpenCode gives it.
- `experimental.session.compacting` fires before a session's history is compacted (the
  compact command and automatic compaction alike).
- The plugin's hooks are awaited without a timeout (the plugin bounds its own waits); a hook
  that throws stops the hooks of plugins after it for that call.

No objection is no output; the plugin then changes nothing.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import governed, mapping, readers
from governor.harnesses.payload import text as _text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "opencode"
TITLE = "OpenCode"
MAX_STRING = 100_000  # OpenCode caps no answer; this keeps one bounded
PLUGIN_FILE = "memory-governor.js"  # what `install opencode` writes into a plugin folder
# Subagent definitions, under the project and under HOME (`{name}` is the agent's name).
AGENT_DIRS = (".opencode/agent/{name}.md", ".opencode/agents/{name}.md", ".config/opencode/agent/{name}.md",
              ".config/opencode/agents/{name}.md")  # fmt: skip
# Its row in docs/harnesses.md: what it can express, and how the governor uses it.
CAPABILITIES = {
    "deny": "yes: the plugin throws; the model gets the error's message as the result",
    "rewrite arguments": "yes: the plugin changes `output.args` in place",
    "replace result": "yes: the plugin replaces an MCP result's `output.content`",
    "context": "on a prompt: a synthetic text part on the user's message; before a tool: added to its result",
    "turn id": "no: a turn starts at each user message (`chat.message`)",
    "call id": "yes: `callID`",
    "subagent id": "yes: a subagent is a child session (`parentID`, `agent`), counted in its dispatcher's",
    "on crash": "a throw denies the call; when no governor answers, the plugin applies on_error itself "
    "(closed when it never learnt the policy)",
}

EVENTS = {
    "session.start": ev.SESSION_START,  # the plugin's first sight of a session: source startup or resume
    "chat.message": ev.PROMPT,
    "tool.execute.before": ev.PRE_TOOL,
    "tool.execute.after": ev.POST_TOOL,
    "tool.failed": ev.TOOL_FAILED,
    "session.compacting": ev.SESSION_START,  # OpenCode's only compaction signal: it arms what a compaction unlocks
}
event_name, sniff_event = readers("hook", EVENTS, rb"[\w.]+")
SOURCES = ("startup", "resume")


def tool_name(server: str, tool: str) -> str:
    """The name OpenCode gives an MCP server's tool: both parts with every character outside
    [A-Za-z0-9_-] made `_`, joined by `_` (`my.engram` + `mem_search` -> `my_engram_mem_search`)."""

    def clean(part: str) -> str:
        return "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in part)

    return f"{clean(server)}_{clean(tool)}"


def result_text(content: Any) -> str:
    """The text an MCP result gives the model, as OpenCode builds it: the text of its text
    blocks and of its resources' text, joined by blank lines (images become attachments)."""
    if isinstance(content, str):
        return content
    texts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "resource" and isinstance(block.get("resource"), dict):
            inner = block["resource"].get("text")
            if isinstance(inner, str) and inner:
                texts.append(inner)
    return "\n\n".join(texts)


def run_args(text: str) -> str:
    """The words `opencode run` was given, from the message it made of them: it joins its
    arguments with spaces, each one holding a space wrapped in `"…"` with its `"` escaped as `\\"`
    (so `opencode run "give me all context"` reaches the model as `"give me all context"`, which
    would read as a quotation)."""
    import re

    return re.sub(r'(?:(?<=^)|(?<= ))"((?:[^"\\]|\\")*)"(?= |$)', lambda m: m.group(1).replace('\\"', '"'), text)


def _user_prompt(parts: Any, from_run_args: bool = False) -> str | None:
    """The text of a user's message, or None for a message OpenCode made itself (every part synthetic)."""
    if not isinstance(parts, list):
        raise BadPayload("field 'parts' should be a list")
    own = [p for p in parts if isinstance(p, dict) and not p.get("synthetic")]
    if parts and not own:
        return None
    texts = [str(p["text"]) for p in own if p.get("type") == "text" and isinstance(p.get("text"), str)]
    return "\n".join(run_args(t) if from_run_args else t for t in texts)


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a message describes; None for one this adapter does not govern."""
    known = governed(payload, "hook", EVENTS, "the message")
    if known is None:
        return None
    name, kind = known
    session = _text(payload, "sessionID", required=True) or ""
    directory = _text(payload, "directory")
    fields: dict[str, Any] = {"cwd": directory, "project": directory}
    parent = _text(payload, "parentID")
    if parent is None and kind in (ev.PRE_TOOL, ev.POST_TOOL) and payload.get("mcp") is not None:
        # The plugin could not learn whose session this is. Counting a memory call in a session
        # of its own could give a subagent a budget of its own: on_error decides instead.
        raise BadPayload("OpenCode did not say whether this session is a subagent's (no parentID)")
    if parent:
        # A subagent's child session: counted in the session (or subagent) that dispatched it.
        if kind == ev.PROMPT:
            return None  # its dispatch prompt: no user prompt, no turn of its own
        fields.update(agent_id=session, agent_type=_text(payload, "agent") or None)
        session = parent
    if kind in (ev.PRE_TOOL, ev.POST_TOOL, ev.TOOL_FAILED):
        name_ = _text(payload, "tool", required=True) or ""
        args = mapping(payload, "args")
        mcp = payload.get("mcp")
        server = tool = None
        if isinstance(mcp, dict):
            server, tool = _text(mcp, "server") or None, _text(mcp, "tool") or None
        elif mcp is not None:
            raise BadPayload(f"field 'mcp' should be an object, got {type(mcp).__name__}")
        fields.update(tool_name=name_, server=server, tool=tool, tool_input=args, call_id=_text(payload, "callID"))
        if kind == ev.POST_TOOL:
            fields["tool_result"] = result_text(payload.get("content", payload.get("output")))
    elif kind == ev.PROMPT:
        prompt = _user_prompt(payload.get("parts") or [], payload.get("runArgs") is True)
        if prompt is None:
            return None
        fields["prompt"] = prompt
    elif name == "session.compacting":
        fields["source"] = "compact"
    else:
        source = _text(payload, "source")
        fields["source"] = source if source in SOURCES else None
    return Event(kind, session, **fields)


# What the plugin applies: `args` for a rewrite (the whole new arguments), else answers.scripted's.
ANSWERS = answers.scripted("tool.execute.before", "tool.execute.after", MAX_STRING,
                           tuple(name for name in EVENTS if name != "tool.failed"), rewrite="args")  # fmt: skip
render = ANSWERS.render
refusal = ANSWERS.refusal
