"""Qwen Code: where its settings live, installing the hooks there, and checking the install.

`install qwen-code` writes hooks into `.qwen/settings.json` (`--scope user`:
`~/.qwen/settings.json`). Qwen reads a tool hook's matcher as an unanchored regular expression
(a plain `a|b` list compared name by name), and a command hook's timeout in seconds. So
PreToolUse gets one anchored pattern of exactly the tool names the policy governs
(`mcp__<server>__<tool>`), its dispatch tools and the tools its routes go through;
PostToolUse and PostToolUseFailure the governed names; the session events every time.

Project hooks load only in a folder Qwen trusts (when its folder trust is on); user hooks
load everywhere. The project scope runs the committed launcher through $QWEN_PROJECT_DIR.

Cold path.
"""

from __future__ import annotations

import os
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.checks import Check
from governor.harnesses.settings import (
    Change,
    any_server_patterns,
    before_tools,
    command_is,
    governed_names,
    ours,
)

NAME = "qwen-code"
SCOPES = ("project", "user")
TIMEOUT_SECONDS = 10
PROJECT_VARIABLE = "QWEN_PROJECT_DIR"  # set for every command hook (Doc, and seen on 0.24.4)
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
SESSION_EVENTS = ("UserPromptSubmit", "SessionStart", "PreCompact", "Stop")
is_ours = command_is(ours(NAME))


def settings_path(scope: str, project: str) -> str:
    return os.path.join(os.path.expanduser("~") if scope == "user" else project, ".qwen", "settings.json")


HOOKS = launcher.HooksFile(NAME, settings_path, SCOPES, is_ours, PROJECT_VARIABLE)
project_files = HOOKS.project_files
plan_uninstall = HOOKS.plan_uninstall


def governed_tools(policy: dict[str, Any]) -> list[str]:
    """The MCP tool names, as Qwen Code spells them, of every tool the policy governs."""
    return list(governed_names(policy, "mcp__{}__{}".format))


def our_hooks(policy: dict[str, Any], command: str) -> dict[str, list[dict[str, Any]]]:
    tools = governed_tools(policy)
    before = before_tools(policy, tools)
    anywhere = any_server_patterns(policy, "mcp__", "__")  # the memory registered under another name
    return HOOKS.groups(command, before, tools, anywhere, TOOL_EVENTS[1:], SESSION_EVENTS, TIMEOUT_SECONDS)


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    done = f"installed hooks for {len(governed_tools(policy))} memory tools and {len(SESSION_EVENTS)} session events"
    if scope == "project":
        done += " (Qwen Code loads project hooks only in a folder it trusts)"
    return HOOKS.plan_install(scope, project, lambda command: our_hooks(policy, command), done)


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the install complete for this policy, and does the installed command refuse an oversized search?"""
    return HOOKS.refusing_doctor(project, (*TOOL_EVENTS, *SESSION_EVENTS), governed_tools(policy),
                                 lambda tool: {"session_id": "doctor", "hook_event_name": "PreToolUse",
                                               "cwd": os.getcwd(), "tool_name": tool, "tool_use_id": "doctor-1",
                                               "tool_input": {"query": "doctor", "limit": 10}})  # fmt: skip
