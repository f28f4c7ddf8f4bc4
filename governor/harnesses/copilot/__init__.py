"""GitHub Copilot CLI: its hook payloads, in both its dialects, -> Event; a Decision -> its answer (the hot path).

Harness facts this relies on (seen on 1.0.102; docs/copilot.md has the details and the tests):
- Copilot runs the hooks of ~/.copilot/hooks/*.json always and, in a trusted folder, those of
  the project's .github/hooks/*.json, .github/copilot/settings*.json and .claude/settings*.json
  (never ~/.claude/settings.json). The hooks of one event run one after another; the
  preToolUse hooks of one model reply's tool calls all run, one call after another, before
  any of the calls does.
- Two dialects on stdin, one JSON object each:
  - its own (camelCase event names in the config): sessionId, timestamp (epoch ms), cwd;
    toolName, toolArgs; postToolUse toolResult {resultType, textResultForLlm};
    postToolUseFailure error; userPromptSubmitted prompt; sessionStart source ("new",
    "startup", "resume"); preCompact trigger; subagentStart/Stop agentName. No event name:
    the event is known by the fields it carries (`event_name`). The hook's environment has
    COPILOT_HOOK_DIR, the folder of the hook file that ran it.
  - Claude-style (PascalCase event names, e.g. the hooks of a project's .claude/settings.json):
    hook_event_name, session_id, tool_name, tool_input, tool_result {result_type,
    text_result_for_llm}, error, agent_id, agent_type, parent_agent_id (SubagentStart comes in
    camelCase with snake_case agent fields). These arrive through the claude-code entry, whose
    `foreign()` sees COPILOT_CLI=1 and hands them here.
- No tool-call id and no turn id in either dialect: a call is matched by its tool and
  arguments (`events.call_key`); a turn starts at each prompt of the main agent.
- A subagent is a session of its own: its events carry sessionId = agentId, agentType (the
  agent's name) and parentAgentId (the dispatching session or subagent); it fires its own
  userPromptSubmitted with the dispatch prompt, which is no user prompt.
- MCP tools are named <server>-<tool>, the server key with any character other than letters,
  digits, `_` and `-` turned into `-`; the dispatch tool is `task` (`Agent` in the Claude-style
  payload). `/compact` fires preCompact and no sessionStart.
- Answers, honoured at the top level in both dialects: permissionDecision "deny" with
  permissionDecisionReason (the model gets "Denied by preToolUse hook: <reason>");
  modifiedArgs (the call runs with them; no "allow" needed); modifiedResult {resultType,
  textResultForLlm} (exactly what the model gets); additionalContext (in the prompt for
  sessionStart and userPromptSubmitted, a message after the tool results for preToolUse,
  appended to the result for postToolUse). updatedMCPToolOutput is ignored; nothing a hook
  prints is shown to the user in `-p` mode.
- The session log (~/.copilot/session-state/<id>/events.jsonl) keeps each result untrimmed
  beside what the model got: a view, grep, glob or bash call that names it is refused
  (`session_log`).
- A non-zero exit of a preToolUse hook denies the call ("hook errored"); other events ignore
  the exit code; a hook past its timeout lets the call through; output that is not JSON is
  ignored.

VS Code's agent hooks (a preview; Doc only, not run here: docs/vscode.md) run the same hook files
(.github/hooks/*.json, ~/.copilot/hooks) for every tool call, matchers ignored, with a payload of
their own: hookEventName (PascalCase), sessionId, timestamp (ISO), cwd, transcript_path,
tool_name (an MCP tool `mcp_<server>_<tool>`), tool_input, tool_use_id; PostToolUse tool_response
(a string). Answers go inside
hookSpecificOutput (permissionDecision, additionalContext); PostToolUse `decision: "block"` with
a reason "shown to the model". Such a payload is known by `hookEventName` and read as VS Code's
(`VSCODE_EVENTS`): its tool_use_id is the call id; its rewritten arguments are not relied on
(an `updatedInput` that does not match a tool's schema is ignored, and whether it needs an allow
is not said), so a clamp is a refusal naming the arguments; nothing is said to replace a result,
so one past the budget is counted whole and the user told.

Copilot runs every hook file it finds, so when memory-governor is installed in two of them
(its own hooks and the Claude Code hooks, or both scopes) exactly one decides (`_deferred`).
"""

from __future__ import annotations

import os

from governor.engine import events as ev
from governor.engine.events import Event
from governor.harnesses import answers, claude_dialect
from governor.harnesses.payload import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.payload import named
from governor.harnesses.payload import text as _checked
from governor.harnesses.tool_names import split_single

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "copilot"
TITLE = "GitHub Copilot CLI"
MAX_STRING = 10_000
HOOKS_FILE = "memory-governor.json"  # the file `install copilot` writes, in .github/hooks or ~/.copilot/hooks
# Subagent definitions, under the project and under HOME (`{name}` is the agent's name).
AGENT_DIRS = (".github/agents/{name}.agent.md", ".github/agents/{name}.md", ".claude/agents/{name}.md",
              ".copilot/agents/{name}.agent.md", ".copilot/agents/{name}.md")  # fmt: skip
# Its row in docs/harnesses.md: what it can express, and how the governor uses it.
CAPABILITIES = {
    "deny": "yes: `permissionDecision: deny`; the model gets `Denied by preToolUse hook: <reason>`",
    "rewrite arguments": "yes: `modifiedArgs` (no `allow` needed)",
    "replace result": "yes: `modifiedResult` (`updatedMCPToolOutput` is ignored)",
    "context": "yes: `additionalContext` (after a tool: appended to its result)",
    "turn id": "no: a turn starts at each prompt",
    "call id": "no: a call is matched by its tool and arguments",
    "subagent id": "yes: `agentId`, `agentType`; each subagent is a session of its own, counted in its dispatcher's",
    "on crash": "a preToolUse hook's non-zero exit denies: the installed command exits 0 unless on_error is closed",
}

# Its own event names (camelCase) and the Claude-style ones, by what the engine calls them.
EVENTS = {
    "sessionStart": ev.SESSION_START,
    "userPromptSubmitted": ev.PROMPT,
    "preToolUse": ev.PRE_TOOL,
    "postToolUse": ev.POST_TOOL,
    "postToolUseFailure": ev.TOOL_FAILED,
    "preCompact": ev.SESSION_START,  # Copilot's only compaction signal: it arms what a compaction unlocks
    "subagentStart": ev.SUBAGENT_START,
    "subagentStop": ev.SUBAGENT_STOP,
    "agentStop": ev.STOP,
    "SessionStart": ev.SESSION_START,
    "UserPromptSubmit": ev.PROMPT,
    "PreToolUse": ev.PRE_TOOL,
    "PostToolUse": ev.POST_TOOL,
    "PostToolUseFailure": ev.TOOL_FAILED,
    "PreCompact": ev.SESSION_START,
    "SubagentStart": ev.SUBAGENT_START,
    "SubagentStop": ev.SUBAGENT_STOP,
    "Stop": ev.STOP,
}
VSCODE = "@vscode"  # how this adapter names VS Code's events apart from Copilot's Claude-style ones
VSCODE_EVENTS = {f"{name}{VSCODE}": kind for name, kind in (
    ("SessionStart", ev.SESSION_START), ("UserPromptSubmit", ev.PROMPT), ("PreToolUse", ev.PRE_TOOL),
    ("PostToolUse", ev.POST_TOOL), ("PreCompact", ev.SESSION_START), ("SubagentStart", ev.SUBAGENT_START),
    ("SubagentStop", ev.SUBAGENT_STOP), ("Stop", ev.STOP))}  # fmt: skip
EVENTS.update(VSCODE_EVENTS)
COMPACTION = ("preCompact", "PreCompact", f"PreCompact{VSCODE}")
# Events whose answer's additionalContext reaches the model (seen); elsewhere it is not sent.
CONTEXT_EVENTS = frozenset(("sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse", "postToolUseFailure",
                            "subagentStart", "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                            "PostToolUseFailure", "SubagentStart"))  # fmt: skip
SOURCES = {"new": "startup", "startup": "startup", "resume": "resume"}
FAILED_RESULTS = frozenset(("failure", "denied", "rejected", "timeout"))


def split_tool_name(name: str) -> tuple[str | None, str | None]:
    """<server>-<tool> -> (server, tool), split at the last `-` (Engram's tools have none; a server
    key may); anything without one -> (None, None)."""
    server, sep, tool = name.rpartition("-")
    if not sep or not server or not tool:
        return None, None
    return server, tool


def server_name(key: str) -> str:
    """A server key as Copilot spells it in tool names: other characters than letters, digits, `_`
    and `-` become `-` (`my.engram` -> `my-engram`)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "-" for c in key)


def claude_style(payload: dict[str, Any]) -> bool:
    """Did this come from a Claude-style hook (PascalCase event, snake_case fields)?"""
    return "hook_event_name" in payload or "session_id" in payload or "agent_id" in payload


def _field(payload: dict[str, Any], camel: str, snake: str) -> Any:
    value = payload.get(camel)
    return payload.get(snake) if value is None else value


def _text(payload: dict[str, Any], camel: str, snake: str, required: bool = False) -> str | None:
    return _checked(payload, camel, required, alias=snake)


def _own_event(payload: dict[str, Any]) -> str | None:
    """Copilot's own payloads name no event: each is known by the fields it alone carries."""
    if "toolName" in payload or "tool_name" in payload:
        if "toolResult" in payload or "tool_result" in payload:
            return "postToolUse"
        return "postToolUseFailure" if "error" in payload else "preToolUse"
    if "agentName" in payload:
        return "subagentStop" if "response" in payload or "stopReason" in payload else "subagentStart"
    if "prompt" in payload:
        return "userPromptSubmitted"
    if "source" in payload:
        return "sessionStart"
    if "trigger" in payload:
        return "preCompact"
    if "stopReason" in payload:
        return "agentStop"
    return None


def vscode(payload: dict[str, Any]) -> bool:
    """Did VS Code's agent hooks send this (`hookEventName`, which Copilot's dialects never send)?"""
    return "hookEventName" in payload and "hook_event_name" not in payload


def event_name(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return None
    name = payload.get("hook_event_name")
    if isinstance(name, str):
        return name
    if vscode(payload):
        name = payload.get("hookEventName")
        return f"{name}{VSCODE}" if isinstance(name, str) else None
    return _own_event(payload)


def sniff_event(raw: bytes) -> str | None:
    """The event of input that is not valid JSON, as far as its first bytes tell (to fail closed)."""
    name = named(raw, "hook_event_name")
    if name is not None:
        return name if name in EVENTS else None
    name = named(raw, "hookEventName")
    if name is not None:
        return f"{name}{VSCODE}" if f"{name}{VSCODE}" in EVENTS else None
    if b'"toolName"' in raw or b'"tool_name"' in raw:
        if b'"toolResult"' in raw or b'"tool_result"' in raw:
            return "postToolUse"
        return "postToolUseFailure" if b'"error"' in raw else "preToolUse"
    return None


def _project(payload: dict[str, Any], env: Mapping[str, str]) -> str | None:
    cwd = _field(payload, "cwd", "cwd")
    return env.get("COPILOT_PROJECT_DIR") or env.get("CLAUDE_PROJECT_DIR") or (cwd if isinstance(cwd, str) else None)


def user_hooks_dir(env: Mapping[str, str]) -> str:
    home = env.get("COPILOT_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".copilot")
    return os.path.join(home, "hooks")


def installed_here(path: str) -> bool:
    """Does the hooks file at `path` hold memory-governor's Copilot hooks?"""
    from governor.state import read_regular

    try:
        text = read_regular(path, 262_144, follow=True).decode("utf-8", "replace")
    except OSError:
        return False
    if "copilot" not in text:
        return False  # no `re` for a file that cannot match (a cold hook imports it for nothing: ~5 ms)
    import re

    return re.search(r'(?:entry\.py|\.memory-governor/hook)\\?"?\s+copilot\b', text) is not None


def _deferred(payload: dict[str, Any], env: Mapping[str, str], project: str | None) -> bool:
    """Copilot runs every hook file it finds. When memory-governor's hooks are in two of them,
    one decides and the other answers nothing: its own hooks over the Claude Code hooks it runs
    (both project files load only in a trusted folder; the user's always), and the user's over
    the project's (the user's always load)."""
    user_file = os.path.join(user_hooks_dir(env), HOOKS_FILE)
    if claude_style(payload):
        project_file = os.path.join(project, ".github", "hooks", HOOKS_FILE) if project else ""
        return installed_here(user_file) or (bool(project_file) and installed_here(project_file))
    hook_dir = env.get("COPILOT_HOOK_DIR") or ""
    if hook_dir and os.path.normpath(hook_dir) != os.path.normpath(user_hooks_dir(env)):
        return installed_here(user_file)
    return False


def _tool_input(payload: dict[str, Any]) -> dict[str, Any]:
    value = _field(payload, "toolArgs", "tool_input")
    if isinstance(value, str):  # a harness may pass the arguments as the model wrote them
        import json

        try:
            value = json.loads(value)
        except ValueError:
            raise BadPayload("field 'toolArgs' is a string that is not JSON") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadPayload(f"field 'toolArgs' should be an object, got {type(value).__name__}")
    return value


def parse(payload: Any, env: Mapping[str, str] | None = None) -> Event | None:
    """The Event a payload describes; None for an event this adapter does not govern (or that
    another installed copy of these hooks decides)."""
    if not isinstance(payload, dict):
        raise BadPayload(f"the hook input should be a JSON object, got {type(payload).__name__}")
    env = env or {}
    name = event_name(payload)
    kind = EVENTS.get(name or "")
    if kind is None:
        return None
    session = _text(payload, "sessionId", "session_id", required=True) or ""
    agent_id = _text(payload, "agentId", "agent_id") or None
    if agent_id is not None:
        if kind == ev.PROMPT:
            return None  # a subagent's dispatch prompt: no user prompt, no turn of its own
        # A subagent is a session of its own; it is counted in the session (or subagent) that dispatched it.
        session = _text(payload, "parentAgentId", "parent_agent_id") or session
    project = _project(payload, env)
    from_vscode = vscode(payload)
    if not from_vscode and _deferred(payload, env, project):
        return None
    fields: dict[str, Any] = {
        "agent_id": agent_id,
        "agent_type": _text(payload, "agentType", "agent_type") or _text(payload, "agentName", "agent_name") or None,
        "cwd": _text(payload, "cwd", "cwd"),
        "project": project,
    }
    if kind in (ev.PRE_TOOL, ev.POST_TOOL, ev.TOOL_FAILED):
        tool_name = _text(payload, "toolName", "tool_name", required=True) or ""
        tool_input = _tool_input(payload)
        server, tool = split_tool_name(tool_name)
        fields.update(tool_name=tool_name, server=server, tool=tool, tool_input=tool_input,
                      call_key=ev.call_key(tool_name, tool_input))  # fmt: skip
        if from_vscode:  # mcp_<server>_<tool>; its own call id; no rewrite or replacement it is known to apply
            server, tool = split_single(tool_name)
            fields.update(server=server, tool=tool, call_id=_checked(payload, "tool_use_id", True), call_key=None, no_rewrite=True,
                          whole_result=True)  # fmt: skip
        if kind == ev.PRE_TOOL and server is None and tool_input:
            from governor.harnesses.copilot.session_log import FILE_TOOLS, log_read

            if tool_name in FILE_TOOLS:  # the session log keeps every result untrimmed
                fields["spilled"] = log_read(tool_name, tool_input, env or {}, fields["cwd"] or "")
        if kind == ev.POST_TOOL and from_vscode:
            from governor.engine.results import result_text

            fields["tool_result"] = result_text(payload.get("tool_response"))
        elif kind == ev.POST_TOOL:
            result = _field(payload, "toolResult", "tool_result")
            if isinstance(result, dict):
                if _field(result, "resultType", "result_type") in FAILED_RESULTS:
                    kind = ev.TOOL_FAILED
                text = _field(result, "textResultForLlm", "text_result_for_llm")
                fields["tool_result"] = text if isinstance(text, str) else ""
            else:
                from governor.engine.results import result_text

                fields["tool_result"] = result_text(result)
    elif kind == ev.PROMPT:
        fields["prompt"] = _text(payload, "prompt", "prompt") or ""
    elif kind == ev.SESSION_START:
        fields["source"] = "compact" if name in COMPACTION else SOURCES.get(_text(payload, "source", "source") or "")
    return Event(kind, session, **fields)


# Either dialect. systemMessage is not shown by Copilot 1.0.102; it is kept for the record.
ANSWERS = answers.Dialect(
    pre=("preToolUse", "PreToolUse"), post=("postToolUse", "PostToolUse"), limit=MAX_STRING,
    context_events=CONTEXT_EVENTS,
    deny=claude_dialect.deny,
    rewrite=lambda tool_input: {"modifiedArgs": tool_input},
    replace=lambda text: {"modifiedResult": {"resultType": "success", "textResultForLlm": text}},
)  # fmt: skip
# VS Code's (Doc): inside hookSpecificOutput, under the event's own name; a withheld result (on_error
# closed) is a PostToolUse block whose reason the model is shown.
VSCODE_ANSWERS = answers.Dialect(
    pre=(f"PreToolUse{VSCODE}",), post=(f"PostToolUse{VSCODE}",), limit=MAX_STRING,
    context_events=frozenset(f"{name}{VSCODE}" for name in ("PreToolUse", "PostToolUse", "SessionStart",
                                                            "SubagentStart")),
    deny=claude_dialect.deny, rewrite=lambda tool_input: {"updatedInput": tool_input},
    replace=lambda text: {"decision": "block", "reason": text},
    nested=(answers.DENY, answers.REWRITE, answers.CONTEXT), label=lambda name: name.removesuffix(VSCODE),
)  # fmt: skip


def render(name: str, decision: Any) -> dict[str, Any] | None:
    return (VSCODE_ANSWERS if name.endswith(VSCODE) else ANSWERS).render(name, decision)


def refusal(name: str | None, reason: str) -> dict[str, Any] | None:
    return (VSCODE_ANSWERS if name and name.endswith(VSCODE) else ANSWERS).refusal(name, reason)
