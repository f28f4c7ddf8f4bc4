"""Claude Code: where its settings live, installing the hooks there, and checking the install.

`install claude-code` writes hooks into `.claude/settings.json` (`--scope local`:
`.claude/settings.local.json`; `--scope user`: `~/.claude/settings.json`) with narrow
matchers: the exact tool names the policy governs, the dispatch tools, the tools that read a
spilled result back and the tools the policy's routes go through, so no other tool starts a
hook process, and any server's tools named like the memory's (`mcp__.+__mem_.*`: the memory
registered again under another name). Matchers of plain names joined by `|` match those names
exactly; with a pattern among them the matcher is one anchored regex.

The project scope is committed, so its command finds each machine's governor (and runs the project's
launcher `$CLAUDE_PROJECT_DIR/.memory-governor/hook` where there is none: governor.harnesses.launcher),
the same on every clone; `local` and `user` name this machine's interpreter.

Cold path.
"""

from __future__ import annotations

import os
import re
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.checks import (
    BAD,
    INFO,
    OK,
    WARN,
    Check,
    isolations,
    run_hook_command,
    server_entries,
    unmapped_memory_servers,
)
from governor.harnesses.claude_code import FILE_TOOLS
from governor.harnesses.settings import (
    Change,
    SettingsError,
    any_server_patterns,
    before_tools,
    command_is,
    exact_matcher,
    governed_names,
    ours,
    read_json,
)

NAME = "claude-code"
SCOPES = ("project", "local", "user")
TIMEOUT_SECONDS = 10
# What marks a hook entry as ours, whichever install (path, venv, layout) wrote it.
OURS = ours(NAME, r"sdd-memory-budget\.sh")  # and the shell script that came before the governor
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
SESSION_EVENTS = ("UserPromptSubmit", "SessionStart", "PreCompact", "SubagentStart", "SubagentStop", "Stop")


def settings_path(scope: str, project: str) -> str:
    if scope == "user":
        return os.path.join(os.path.expanduser("~"), ".claude", "settings.json")
    name = "settings.local.json" if scope == "local" else "settings.json"
    return os.path.join(project, ".claude", name)


def governed_tools(policy: dict[str, Any]) -> list[str]:
    """The MCP tool names, as Claude Code spells them, of every tool the policy governs."""
    return list(governed_names(policy, "mcp__{}__{}".format))


def tool_matcher(names: list[str], policy: dict[str, Any]) -> str:
    """Plain names joined by `|` match exactly; with the memory under any server name the matcher
    is a regex (Claude Code tests it unanchored), anchored here to match nothing else."""
    patterns = any_server_patterns(policy, "mcp__", "__")
    return exact_matcher(names, patterns) if patterns else "|".join(names)


is_ours = command_is(OURS)


def our_hooks(policy: dict[str, Any], command: str) -> dict[str, list[dict[str, Any]]]:
    entry = {"type": "command", "command": command, "timeout": TIMEOUT_SECONDS}
    tools = governed_tools(policy)
    pre_matcher = tool_matcher(before_tools(policy, tools, *FILE_TOOLS), policy)
    out: dict[str, list[dict[str, Any]]] = {
        "PreToolUse": [{"matcher": pre_matcher, "hooks": [entry]}],
        "PostToolUse": [{"matcher": tool_matcher(tools, policy), "hooks": [entry]}],
        "PostToolUseFailure": [{"matcher": tool_matcher(tools, policy), "hooks": [entry]}],
    }
    for event in SESSION_EVENTS:
        out[event] = [{"hooks": [entry]}]
    return out


PROJECT_VARIABLE = "CLAUDE_PROJECT_DIR"  # set for every hook command (Doc)


HOOKS = launcher.HooksFile(NAME, settings_path, SCOPES, is_ours, PROJECT_VARIABLE)
project_files = HOOKS.project_files
plan_uninstall = HOOKS.plan_uninstall


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    path = settings_path(scope, project)
    tools = len(governed_tools(policy))
    events = len(TOOL_EVENTS) + len(SESSION_EVENTS)
    done = f"installed hooks on {events} events ({len(SESSION_EVENTS)} session events) for {tools} memory tools"
    if scope != "user" and not os.path.isdir(os.path.dirname(path)):
        done += f"; {RESTART_NOTE}"
    return HOOKS.plan_install(scope, project, lambda command: our_hooks(policy, command), done)


# Claude Code reads a project's .claude/ hooks only if the folder was there when the session started.
RESTART_NOTE = (
    ".claude/ is new in this project: a Claude Code session that was already running here uses these hooks only "
    "after a restart"
)


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the install complete for this policy, and does the installed command answer?"""
    tools = governed_tools(policy)
    checks, commands, complete = HOOKS.installed(project, (*TOOL_EVENTS, *SESSION_EVENTS), tools)
    for scope in complete:
        path = settings_path(scope, project)
        if scope != "user" and _made_by_install(os.path.dirname(path)):
            checks.append(Check(INFO, f"claude-code ({scope})", f"{RESTART_NOTE} (its .claude/ holds only what the "
                                "install wrote)", "restart Claude Code sessions started before it"))  # fmt: skip
    walled = _managed_doctor()
    checks += walled
    if commands and not walled:
        checks.append(Check(INFO, "guarantees", "not managed: the hooks and the policy are in files the user, and so "
                            "the model, can write; the routes refuse the plain ways to change them. A wall: "
                            "sudo memory-governor install claude-code --scope managed"))  # fmt: skip
    checks += _unmapped_memory_servers(project, policy)
    checks += _engram_plugin(project)
    checks += isolations(NAME, commands)
    if commands:
        checks += _server_spellings(policy)
    if commands and tools:
        checks.append(_selftest(commands[0], tools[0], project))
    return checks


def _managed_doctor() -> list[Check]:
    """The managed install's checks (governor.harnesses.claude_code.managed)."""
    from governor.harnesses.claude_code import managed

    return list(managed.doctor(managed.ROOT, is_ours))


def managed_config() -> str | None:
    """The managed folder whose policy this machine's Claude Code hooks enforce, or None."""
    from governor.harnesses.claude_code import managed

    return managed.in_force(managed.ROOT, is_ours)


def _made_by_install(folder: str) -> bool:
    """Does the project's .claude/ hold nothing but settings files and their install backups?"""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return bool(names) and all(re.fullmatch(r"settings(?:\.local)?\.json(?:\.bak-[\w.-]+)?", n) for n in names)


ENGRAM_PLUGIN = re.compile(r"engram@[\w.-]+")  # Engram's own Claude Code plugin, from its marketplace


def _engram_plugin(project: str) -> list[Check]:
    """Engram's own Claude Code plugin, when a settings file enables it: its SessionStart hook puts
    Engram's protocol and memory context (~2.4K tokens measured) into every session start and
    every compaction, through no tool, so outside any budget the governor keeps."""
    for scope in SCOPES:
        path = settings_path(scope, project)
        try:
            enabled = read_json(path).get("enabledPlugins")
        except SettingsError:
            continue
        names = (
            [n for n, on in enabled.items() if on and ENGRAM_PLUGIN.fullmatch(n)] if isinstance(enabled, dict) else []
        )
        if names:
            return [Check(WARN, "engram plugin", f"{path}: {names[0]} is enabled: its SessionStart hook injects ~2.4K "
                          "tokens of protocol and memory context at every session start and compaction, outside any "
                          "memory budget", f"disable it (enabledPlugins: {{\"{names[0]}\": false}}) and register "
                          "Engram's MCP server alone (`claude mcp add engram -- engram mcp`)")]  # fmt: skip
    return []


def mcp_servers(project: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(where, name, entry) of every MCP server Claude Code is configured with for `project`:
    the project's .mcp.json, and ~/.claude.json (for every project, and for this one)."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    user = os.path.join(os.path.expanduser("~"), ".claude.json")
    for path in (os.path.join(project, ".mcp.json"), user):
        try:
            data = read_json(path, "an MCP config")
        except Exception:
            continue
        out += server_entries(path, data.get("mcpServers"))
        if path == user and isinstance(data.get("projects"), dict):
            mine = data["projects"].get(os.path.abspath(project))
            out += server_entries(path, mine.get("mcpServers") if isinstance(mine, dict) else None)
    return out


def _unmapped_memory_servers(project: str, policy: dict[str, Any]) -> list[Check]:
    servers = [(path, name, " ".join([str(entry.get("command", "")), *map(str, entry.get("args") or [])]))
               for path, name, entry in mcp_servers(project)]  # fmt: skip
    return unmapped_memory_servers(policy, servers)


def _server_spellings(policy: dict[str, Any]) -> list[Check]:
    """A server the policy names by a config key Claude Code spells otherwise in tool names
    (`my mem` is `mcp__my_mem__…`) would never match: say how to write it."""
    from governor.harnesses.claude_code import spelled

    checks = []
    for mapping in policy["tools"]:
        for server in mapping["servers"]:
            if spelled(server) != server:
                checks.append(Check(BAD, "claude-code server name",
                                    f"Claude Code names server {server!r} {spelled(server)!r} in its tool names "
                                    f"(mcp__{spelled(server)}__…), so the policy's tools for it never match",
                                    f"write {spelled(server)!r} in the policy's servers"))  # fmt: skip
    return checks


def _selftest(command: str, tool: str, project: str) -> Check:
    """Run the installed command on a synthetic search with limit 10: it must clamp to the ladder."""
    payload = {"session_id": "doctor", "hook_event_name": "PreToolUse", "cwd": os.getcwd(), "tool_name": tool,
               "tool_input": {"query": "doctor", "limit": 10}, "tool_use_id": "doctor-1"}  # fmt: skip
    run = run_hook_command(command, payload, {PROJECT_VARIABLE: os.path.abspath(project)})
    answer = run.answer if isinstance(run.answer, dict) else {}
    clamped = answer.get("hookSpecificOutput", {}).get("updatedInput", {}).get("limit")
    if run.returncode == 0 and clamped is not None:
        return Check(OK, "claude-code hook", f"the installed command answers (clamped limit 10 -> {clamped}) in "
                     f"{run.millis:.0f} ms")  # fmt: skip
    return Check(BAD, "claude-code hook", f"the installed command did not clamp a search: {run.last_error}",
                 "memory-governor install claude-code  (then run doctor again)")  # fmt: skip
