"""Factory Droid: where its settings live, installing the hooks there, and checking the install.

`install droid` writes hooks into `.factory/settings.json` (`--scope user`:
`~/.factory/settings.json`), Claude-style groups: PreToolUse with one anchored pattern of the
governed tools as Droid names them (`<server>___<tool>`), the policy's dispatch tools and the tools
its routes go through; PostToolUse with the governed tools; SessionStart, UserPromptSubmit,
PreCompact and Stop every time. The project scope runs the committed launcher through
$FACTORY_PROJECT_DIR.

Cold path.
"""

from __future__ import annotations

import os
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.checks import Check
from governor.harnesses.droid import SEPARATOR, tool_name
from governor.harnesses.settings import (
    Change,
    any_server_patterns,
    before_tools,
    command_is,
    governed_names,
    ours,
)

NAME = "droid"
SCOPES = ("project", "user")
TIMEOUT_SECONDS = 10
PROJECT_VARIABLE = "FACTORY_PROJECT_DIR"  # set for every hook command (seen on 0.225.2)
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
SESSION_EVENTS = ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop")
is_ours = command_is(ours(NAME))


def settings_path(scope: str, project: str) -> str:
    return os.path.join(os.path.expanduser("~") if scope == "user" else project, ".factory", "settings.json")


HOOKS = launcher.HooksFile(NAME, settings_path, SCOPES, is_ours, PROJECT_VARIABLE)
project_files = HOOKS.project_files
plan_uninstall = HOOKS.plan_uninstall


def governed_tools(policy: dict[str, Any]) -> list[str]:
    """The names Droid gives the tools the policy governs."""
    return list(governed_names(policy, tool_name))


def our_hooks(policy: dict[str, Any], command: str) -> dict[str, list[dict[str, Any]]]:
    tools = governed_tools(policy)
    before = before_tools(policy, tools)
    anywhere = any_server_patterns(policy, "", SEPARATOR)  # the memory registered under another name
    return HOOKS.groups(command, before, tools, anywhere, ("PostToolUse",), SESSION_EVENTS, TIMEOUT_SECONDS)


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    done = f"installed hooks for {len(governed_tools(policy))} memory tools and {len(SESSION_EVENTS)} session events"
    return HOOKS.plan_install(scope, project, lambda command: our_hooks(policy, command), done)


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the install complete for this policy, and does the installed command refuse an oversized search?"""
    return HOOKS.refusing_doctor(project, (*TOOL_EVENTS, *SESSION_EVENTS), governed_tools(policy),
                                 lambda tool: {"session_id": "doctor", "hook_event_name": "PreToolUse",
                                               "cwd": os.getcwd(), "tool_name": tool, "permission_mode": "auto-low",
                                               "tool_input": {"query": "doctor", "limit": 10}})  # fmt: skip
