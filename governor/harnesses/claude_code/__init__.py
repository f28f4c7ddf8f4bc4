"""Claude Code: its hook payload -> Event, a Decision -> its hook answer (the hot path).

Harness facts this relies on (seen on the real binary; see docs/claude-code.md):
- One JSON object on stdin per hook process; common fields session_id, transcript_path, cwd,
  hook_event_name; prompt_id (one per user prompt) on events after the first prompt, also
  inside subagents, whose events add agent_id and agent_type. A background subagent's events
  carry the prompt_id of the turn that launched it, even after that turn ended.
- MCP tools are named mcp__<server>__<tool>, the server's config key with every character but
  letters, digits, `_` and `-` made `_`; a plugin's server is plugin_<plugin>_<server>. Newer
  builds add mcp_server: {name: <the config key>, source}.
- A background task reports back as a UserPromptSubmit of its own (a new prompt_id) whose
  prompt is a `<task-notification>` block naming the launching call's `<tool-use-id>`.
- PreToolUse carries tool_name, tool_input, tool_use_id; PostToolUse adds tool_response (a
  string for an MCP tool); PostToolUseFailure carries error; SessionStart carries source
  (startup, resume, compact, clear).
- An answer is one JSON object on stdout with exit 0. A deny is
  hookSpecificOutput.permissionDecision "deny" with permissionDecisionReason, which the model
  receives as the tool's error result. updatedInput replaces a tool's input;
  updatedMCPToolOutput replaces what the model gets from an MCP tool; additionalContext adds
  to the model's context; systemMessage is shown to the user. Strings are capped at 10,000
  characters.
- "permissionDecision": "allow" would bypass the user's own permission rules: never sent.
  No objection is no output.
- A hook runs as `/bin/sh -c <command>`, a child of the `claude` process; SessionStart hooks get
  CLAUDE_ENV_FILE (`~/.claude/session-env/<session id>/sessionstart-hook-<n>.sh`), whose `export`
  lines are in the environment of the session's later Bash commands (`pass_marker`).
- Started by the Claude Agent SDK, the binary runs with CLAUDE_CODE_ENTRYPOINT=sdk-py (Python)
  or sdk-ts (TypeScript), which its hooks inherit; that program may observe the same events
  through memory-governor's in-process callbacks (governor.sdk): the events are `twin`.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers, claude_dialect
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import governed, mapping, readers
from governor.harnesses.payload import text as _text
from governor.harnesses.tool_names import split_tool_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "claude-code"
TITLE = "Claude Code"
MAX_STRING = 10_000
AGENT_DIRS = (".claude/agents",)  # subagent definitions, under the project and under HOME
FILE_TOOLS = {"Read": "read", "Grep": "search", "Glob": "list", "Bash": "shell"}  # tools that can read a spill back
# Its row in docs/harnesses.md: what it can express, and how the governor uses it.
CAPABILITIES = {
    "deny": "yes: `permissionDecision: deny`; the model gets the reason (2.1.332: after `PreToolUse:<tool> hook error: `)",
    "rewrite arguments": "yes: `updatedInput` (no `allow` needed)",
    "replace result": "yes: `updatedMCPToolOutput`",
    "context": "yes: `additionalContext`",
    "turn id": "yes: `prompt_id` (a background task's report joins the turn that launched it)",
    "call id": "yes: `tool_use_id`",
    "subagent id": "yes: `agent_id`, `agent_type`",
    "on crash": "fails open (the governor never crashes: it answers or applies on_error)",
}

EVENTS = claude_dialect.EVENTS
event_name, sniff_event = readers("hook_event_name", EVENTS)
# CLAUDE_CODE_ENTRYPOINT of a binary an Agent SDK program runs (`claude -p` is sdk-cli).
SDK_ENTRYPOINTS = ("sdk-py", "sdk-ts")
# Events whose answer may carry hookSpecificOutput.additionalContext.
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse")
# Event names only Gemini CLI sends.
GEMINI_EVENTS = ("BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "PreCompress", "BeforeModel", "AfterModel")


def foreign(payload: Any, env: Mapping[str, str]) -> str | None:
    """The harness that really sent this, when it is not Claude Code: others run the hooks in
    Claude Code's settings files with their own payloads. Copilot CLI sets COPILOT_CLI=1 and
    sends `tool_result: {result_type, text_result_for_llm}`; Cursor adds `cursor_version`; Gemini
    CLI (`gemini hooks migrate` copies these hooks into its settings) names events of its own.
    COPILOT_CLI=1 is also in the environment of every command Copilot's agent runs, so a
    Claude Code started from there is known by the fields only it sends. VS Code's agent hooks
    run these hooks too, with `hookEventName` for `hook_event_name`: the Copilot adapter reads
    that payload (VS Code runs Copilot's hook files alike), and a call both see is counted once
    (its `tool_use_id`)."""
    own = isinstance(payload, dict) and any(k in payload for k in ("permission_mode", "tool_use_id", "prompt_id"))
    if env.get("COPILOT_CLI") == "1" and not own:
        return "copilot"
    if isinstance(payload, dict):
        if "hookEventName" in payload and "hook_event_name" not in payload:
            return "copilot"  # VS Code's agent hooks (governor.harnesses.copilot.vscode)
        if "cursor_version" in payload:
            return "cursor"
        if payload.get("hook_event_name") in GEMINI_EVENTS:
            return "gemini-cli"
        result = payload.get("tool_result")
        if isinstance(result, dict) and "text_result_for_llm" in result:
            return "copilot"
    return None


def spelled(server: str) -> str:
    """A server's config key as Claude Code spells it in tool names."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in server)


def mcp_tool(tool_name: str, mcp_server: Any) -> tuple[str | None, str | None]:
    """(server, tool) of a tool call, the server as spelled in the tool name (as policies name
    it, on every build alike). `mcp_server.name`, where sent, says where the server's part ends,
    which splitting at the first `__` gets wrong for a key like `team__memory`."""
    name = mcp_server.get("name") if isinstance(mcp_server, dict) else None
    if isinstance(name, str) and name:
        server = spelled(name)
        prefix = f"mcp__{server}__"
        if tool_name.startswith(prefix) and len(tool_name) > len(prefix):
            return server, tool_name[len(prefix) :]
    return split_tool_name(tool_name)


NOTIFICATION = "<task-notification>"


def notification_origin(prompt: str) -> str | None:
    """For a prompt Claude Code wrote to report a background task (`<task-notification>`), the
    id of the tool call that launched the task ("" when it names none); None for any other
    prompt. Only the header Claude Code writes is read, never the task's result (model text)."""
    if not prompt.startswith(NOTIFICATION):
        return None
    import re

    header = re.match(r"<task-notification>\s*(?:<task-id>[^<]*</task-id>\s*)?<tool-use-id>([^<\s]+)</tool-use-id>",
                      prompt)  # fmt: skip
    return header.group(1) if header else ""


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a payload describes; None for an event this adapter does not govern."""
    known = governed(payload, "hook_event_name", EVENTS)
    if known is None:
        return None
    kind = known[1]
    fields: dict[str, Any] = {
        "turn_id": _text(payload, "prompt_id") or None,
        "agent_id": _text(payload, "agent_id") or None,
        "agent_type": _text(payload, "agent_type") or None,
        "cwd": _text(payload, "cwd"),
        # The folder Claude Code was started in; `cwd` follows the agent's `cd`.
        "project": (env or {}).get("CLAUDE_PROJECT_DIR") or _text(payload, "cwd"),
        "twin": (env or {}).get("CLAUDE_CODE_ENTRYPOINT", "") in SDK_ENTRYPOINTS,
    }
    if kind in (ev.PRE_TOOL, ev.POST_TOOL, ev.TOOL_FAILED):
        tool_name = _text(payload, "tool_name", required=True) or ""
        tool_input = mapping(payload, "tool_input")
        server, tool = mcp_tool(tool_name, payload.get("mcp_server"))
        fields.update(tool_name=tool_name, server=server, tool=tool, tool_input=tool_input,
                      call_id=_text(payload, "tool_use_id"))  # fmt: skip
        if kind == ev.POST_TOOL:
            from governor.engine.results import result_text

            text = result_text(payload.get("tool_response"))
            if server and tool and text.startswith("Error: result ("):
                from governor.harnesses.claude_code.spills import carried, spilled_result

                spilled = spilled_result(payload, text, server, tool)
                if spilled is None:  # behind the wall: the hook read it as the user (spills.carry)
                    spilled = carried(payload, text)
                if spilled is not None:  # the model saw only a pointer: it gets the result in its place
                    text, fields["result_elsewhere"] = spilled, True
            fields["tool_result"] = text
        elif kind == ev.PRE_TOOL and tool_name in FILE_TOOLS and tool_input:
            from governor.harnesses.claude_code.spills import spill_read

            fields["spilled"] = spill_read(FILE_TOOLS[tool_name], tool_input, payload, env)
    elif kind == ev.PROMPT:
        prompt = _text(payload, "prompt") or ""
        fields["prompt"] = prompt
        origin = notification_origin(prompt)
        if origin is not None:
            fields.update(machine_made=True, origin_call_id=origin or None)
    elif kind == ev.SESSION_START:
        fields["source"] = _text(payload, "source")
    return Event(kind, _text(payload, "session_id", required=True) or "", **fields)


def carry_spill(raw: bytes) -> bytes:
    """Behind the wall, in the hook (as the user): a PostToolUse whose result is a spill pointer
    gets the spilled text beside it (spills.CARRIED), read from exactly where `parse` reads it and
    checked as it checks it, since the decision service (another user) cannot open a file under a
    private home. `raw` as it came when there is none. The model could write that field itself, as
    it could write the result: it gains nothing a forged result would not."""
    from governor import jsonio
    from governor.engine.results import result_text
    from governor.harnesses.claude_code.spills import CARRIED, spilled_result

    try:
        payload = jsonio.loads(raw)
    except ValueError:
        return raw
    if not isinstance(payload, dict) or payload.get("hook_event_name") != "PostToolUse":
        return raw
    name = payload.get("tool_name")
    server, tool = mcp_tool(name, payload.get("mcp_server")) if isinstance(name, str) else (None, None)
    text = result_text(payload.get("tool_response"))
    spilled = spilled_result(payload, text, server, tool) if server and tool else None
    if spilled is None:
        return raw
    return jsonio.dumps({**payload, CARRIED: spilled}).encode()


ENV_FILE = "CLAUDE_ENV_FILE"  # given to SessionStart hooks: `export` lines sourced before each Bash command


def pass_marker(env: Mapping[str, str], payload: Any, process: str) -> None:
    """At a session's start: its Bash commands (and any agent they start) inherit the governor's
    marker, the key of the session's own process (governor.engine.nesting), through the file Claude
    Code sources before each command: CLAUDE_ENV_FILE, seen as
    `~/.claude/session-env/<session id>/sessionstart-hook-<n>.sh` on 2.1.197 and 2.1.332. Only a
    file of that shape is written (appended to, never through a link); nothing else, whatever the
    environment names."""
    import os

    from governor.engine.nesting import MARKER

    path = env.get(ENV_FILE) or ""
    folder = os.path.dirname(path)
    session = payload.get("session_id") if isinstance(payload, dict) else None
    if not (os.path.isabs(path) and path.endswith(".sh") and isinstance(session, str) and session
            and os.path.basename(folder) == session and os.path.basename(os.path.dirname(folder)) == "session-env"
            and all(c.isalnum() or c in ":" for c in process)):  # fmt: skip
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        os.write(fd, f"export {MARKER}={process}\n".encode())
    except OSError:
        pass
    finally:
        os.close(fd)


ANSWERS = answers.Dialect(
    pre=("PreToolUse",),
    post=("PostToolUse",),
    limit=MAX_STRING,
    context_events=CONTEXT_EVENTS,
    deny=claude_dialect.deny,
    rewrite=lambda tool_input: {"updatedInput": tool_input},
    replace=lambda text: {"updatedMCPToolOutput": text},
    nested=(answers.DENY, answers.REWRITE, answers.REPLACE, answers.CONTEXT),
)
render = ANSWERS.render
refusal = ANSWERS.refusal
