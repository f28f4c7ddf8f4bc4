"""Gemini CLI: where its settings live, installing the hooks there, and checking the install.

`install gemini-cli` writes hooks into `.gemini/settings.json` (`--scope user`:
`~/.gemini/settings.json`). Gemini CLI reads a tool hook's matcher as an unanchored regular
expression and a lifecycle hook's matcher as an exact string, and its timeouts are in
milliseconds. So BeforeTool and AfterTool get one anchored pattern of exactly the tool names
the policy governs (as Gemini spells them: `mcp_<server>_<tool>`) and `invoke_agent` (its
before and after bound a subagent's calls), BeforeTool also the policy's dispatch tools; PreCompress only `manual` (an `auto` one fires before every model call and
says nothing); BeforeAgent, SessionStart and AfterAgent every time.

Project hooks run only in a folder Gemini trusts; user hooks run everywhere.

Cold path.
"""

from __future__ import annotations

import os
import re
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.checks import BAD, OK, WARN, Check, coverage, installs, run_hook_command
from governor.harnesses.gemini_cli import DISPATCH_TOOL
from governor.harnesses.settings import (
    Change,
    any_server_patterns,
    command_is,
    governed_names,
    hook_groups,
    ours,
    read_json,
    route_tools,
)

NAME = "gemini-cli"
SCOPES = ("project", "user")
TIMEOUT_MS = 10_000
HOOK_NAME = "memory-governor"  # what Gemini shows in its warnings, and what hooksConfig.disabled names
# What marks a hook entry as ours, whichever install (path, venv, layout) wrote it.
OURS = ours(NAME)
PROJECT_VARIABLE = "GEMINI_PROJECT_DIR"  # set for every hook command (Doc); the project scope's launcher names it
TOOL_EVENTS = ("BeforeTool", "AfterTool")
SESSION_EVENTS = ("BeforeAgent", "SessionStart", "PreCompress", "AfterAgent")
EVENT_MATCHERS = {"PreCompress": "manual"}


def settings_path(scope: str, project: str) -> str:
    if scope == "user":
        return os.path.join(os.path.expanduser("~"), ".gemini", "settings.json")
    return os.path.join(project, ".gemini", "settings.json")


def tool_name(server: str, tool: str) -> str:
    """The name Gemini CLI gives an MCP server's tool (its generateValidName)."""
    name = re.sub(r"[^a-zA-Z0-9_\-.:]", "_", f"mcp_{server}_{tool}")
    if not re.match(r"[a-zA-Z_]", name):
        name = "_" + name
    return name if len(name) <= 63 else name[:30] + "..." + name[-30:]


def governed_tools(policy: dict[str, Any]) -> list[str]:
    """The MCP tool names, as Gemini CLI spells them, of every tool the policy governs."""
    return list(governed_names(policy, tool_name))


def matcher(names: list[str], patterns: list[str] | None = None) -> str:
    """A pattern matching exactly these tool names, and `patterns` (Gemini tests it unanchored, as a
    JS RegExp). Tool names hold only [A-Za-z0-9_.:-], of which only `.` means anything in a pattern."""
    return "^(?:" + "|".join([*(name.replace(".", "\\.") for name in names), *(patterns or [])]) + ")$"


def matches(pattern: str, name: str) -> bool:
    """Does Gemini run a hook with this matcher for this tool? (Its own rule: a matcher that is
    not a valid pattern is compared as a plain string.)"""
    if pattern.strip() in ("", "*"):
        return True
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return pattern == name


is_ours = command_is(OURS)


def our_hooks(policy: dict[str, Any], command: str) -> dict[str, list[dict[str, Any]]]:
    entry = {"name": HOOK_NAME, "type": "command", "command": command, "timeout": TIMEOUT_MS}
    tools = governed_tools(policy)
    # invoke_agent's before and after bound a subagent's calls (nothing else names the agent).
    dispatch = [t for t in (DISPATCH_TOOL, *policy["briefing"]["dispatch_tools"]) if t not in tools]
    routes = [t for t in route_tools(policy) if t not in tools + dispatch]  # refused before they run
    anywhere = any_server_patterns(policy, "mcp_", "_")  # the memory registered under another name
    out: dict[str, list[dict[str, Any]]] = {
        "BeforeTool": [{"matcher": matcher(tools + dispatch + routes, anywhere), "hooks": [entry]}],
        "AfterTool": [{"matcher": matcher([*tools, DISPATCH_TOOL], anywhere), "hooks": [entry]}],
    }
    for event in SESSION_EVENTS:
        group: dict[str, Any] = {"hooks": [entry]}
        if event in EVENT_MATCHERS:
            group = {"matcher": EVENT_MATCHERS[event], **group}
        out[event] = [group]
    return out


HOOKS = launcher.HooksFile(NAME, settings_path, SCOPES, is_ours, PROJECT_VARIABLE)
project_files = HOOKS.project_files
plan_uninstall = HOOKS.plan_uninstall


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    tools = len(governed_tools(policy))
    done = f"installed hooks for {tools} memory tools and {len(SESSION_EVENTS)} session events"
    if scope == "project":
        done += " (Gemini runs project hooks only in a trusted folder)"
    return HOOKS.plan_install(scope, project, lambda command: our_hooks(policy, command), done)


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the install complete for this policy, are hooks on, and does the installed command answer?"""
    checks: list[Check] = []
    tools = governed_tools(policy)
    commands: list[str] = []
    installed: list[str] = []
    readable: dict[str, dict[str, Any]] = {}
    for scope, path, settings in installs(NAME, [(scope, settings_path(scope, project)) for scope in SCOPES],
                                          read_json, checks):  # fmt: skip
        readable[scope] = settings
        checks += _migrated(settings, scope, path)
        events = hook_groups(settings, is_ours)
        if not events:
            continue
        installed.append(scope)
        commands += [hook["command"] for groups in events.values() for _, hook in groups]
        if scope == "project":
            checks += launcher.doctor(project, NAME, path, commands, PROJECT_VARIABLE)
        missing = [e for e in (*TOOL_EVENTS, *SESSION_EVENTS) if e not in events]
        uncovered = [t for t in [*tools, DISPATCH_TOOL]
                     if not any(matches(m, t) for m, _ in events.get("BeforeTool", []))]  # fmt: skip
        uncovered += [t for t in [*tools, DISPATCH_TOOL]
                      if not any(matches(m, t) for m, _ in events.get("AfterTool", []))]  # fmt: skip
        uncovered = list(dict.fromkeys(uncovered))
        checks.append(coverage(NAME, scope, path, events, missing, uncovered, len(tools)))
    if not installed:
        return checks
    checks += _switched_off(readable, project)
    if installed == ["project"]:
        checks += _untrusted_route(readable.get("user", {}), policy, project)
    if commands and tools:
        checks.append(_selftest(commands[0], tools[0], policy, project))
    return checks


def _switched_off(readable: dict[str, dict[str, Any]], project: str) -> list[Check]:
    """hooksConfig turns every hook off (enabled: false), or ours by name or command (disabled)."""
    out = []
    for scope, settings in readable.items():
        config = settings.get("hooksConfig")
        if not isinstance(config, dict):
            continue
        path = settings_path(scope, project)
        if config.get("enabled") is False:
            out.append(Check(BAD, f"gemini-cli ({scope})", f"{path}: hooksConfig.enabled is false, so no hook runs",
                             "remove hooksConfig.enabled, or set it to true"))  # fmt: skip
        disabled = config.get("disabled")
        named = [d for d in disabled if d == HOOK_NAME or OURS.search(str(d))] if isinstance(disabled, list) else []
        if named:
            out.append(Check(BAD, f"gemini-cli ({scope})", f"{path}: hooksConfig.disabled switches ours off ({named[0]})",
                             f"remove {named[0]!r} from hooksConfig.disabled"))  # fmt: skip
    return out


def _untrusted_route(user: dict[str, Any], policy: dict[str, Any], project: str) -> list[Check]:
    """A memory server in the user's own settings is there in every folder; hooks in the project's
    settings run only where Gemini trusts the folder. In an untrusted one the calls would go ungoverned."""
    servers = user.get("mcpServers")
    governed = {server for mapping in policy["tools"] for server in mapping["servers"]}
    exposed = sorted(governed & set(servers)) if isinstance(servers, dict) else []
    if not exposed:
        return []
    return [Check(WARN, "gemini-cli (trust)",
                  f"memory server {exposed[0]} is in {settings_path('user', project)}, hooks only in this project: in a "
                  "folder Gemini does not trust its calls would go ungoverned",
                  "memory-governor install gemini-cli --scope user")]  # fmt: skip


def _migrated(settings: dict[str, Any], scope: str, path: str) -> list[Check]:
    """Claude Code hooks copied over by `gemini hooks migrate`: their matchers name Claude's tools
    (mcp__server__tool) and their timeouts are seconds that Gemini reads as milliseconds."""
    from governor.harnesses.claude_code.setup import is_ours as claude_hook

    if not hook_groups(settings, claude_hook):
        return []
    return [Check(WARN, f"gemini-cli ({scope})",
                  f"{path}: has memory-governor's Claude Code hooks (from `gemini hooks migrate`), which do not match "
                  "Gemini's tool names", f"memory-governor install gemini-cli --scope {scope}, then remove those")]  # fmt: skip


def _selftest(command: str, tool: str, policy: dict[str, Any], project: str) -> Check:
    """Run the installed command on a synthetic search with limit 10: it must clamp to the ladder."""
    server, bare = next(((s, t) for m in policy["tools"] for s in m["servers"] for t in m["map"]
                         if tool_name(s, t) == tool), ("", ""))  # fmt: skip
    payload = {"session_id": "doctor", "hook_event_name": "BeforeTool", "cwd": os.getcwd(), "tool_name": tool,
               "tool_input": {"query": "doctor", "limit": 10}, "timestamp": "2026-01-01T00:00:00.000Z",
               "mcp_context": {"server_name": server, "tool_name": bare}}  # fmt: skip
    run = run_hook_command(command, payload, {PROJECT_VARIABLE: os.path.abspath(project)})
    answer = run.answer if isinstance(run.answer, dict) else {}
    specific = answer.get("hookSpecificOutput")
    clamped = specific.get("tool_input", {}).get("limit") if isinstance(specific, dict) else None
    if run.returncode == 0 and clamped is not None:
        return Check(OK, "gemini-cli hook", f"the installed command answers (clamped limit 10 -> {clamped}) in "
                     f"{run.millis:.0f} ms")  # fmt: skip
    return Check(BAD, "gemini-cli hook", f"the installed command did not clamp a search: {run.last_error}",
                 "memory-governor install gemini-cli  (then run doctor again)")  # fmt: skip
