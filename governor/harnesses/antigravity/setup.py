"""Antigravity CLI: where its hooks live, installing them there, and checking the install.

`install antigravity` writes two hook groups into `~/.gemini/config/hooks.json` (the one file
agy was seen to read hooks from), in the schema agy reads, with no key it was not seen to accept
(it drops a whole file over a key it rejects): PreToolUse and PostToolUse, each with the matcher
`""` (every tool: the MCP tools' names and the generic `call_mcp_tool` are unverified, and a hook
agy never starts governs nothing) and the hook command naming its event (agy's payload does not).
User scope only: a project's `.agents/hooks.json` would need the committed launcher, and agy
names no project folder to a hook command (it runs them in `~/.gemini/config`).

Cold path.
"""

from __future__ import annotations

import os
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.antigravity import POST, PRE, tool_name
from governor.harnesses.checks import Check, isolations, refused_search
from governor.harnesses.settings import Change, command_is, governed_names, ours

NAME = "antigravity"
SCOPES = ("user",)
EVENTS = (PRE, POST)
is_ours = command_is(ours(NAME))


def settings_path(scope: str, project: str) -> str:
    return os.path.join(os.path.expanduser("~"), ".gemini", "config", "hooks.json")


HOOKS = launcher.HooksFile(NAME, settings_path, SCOPES, is_ours, "")
project_files = HOOKS.project_files
plan_uninstall = HOOKS.plan_uninstall


def governed_tools(policy: dict[str, Any]) -> list[str]:
    """The names agy gives the tools the policy governs (`<server>/<tool>`)."""
    return list(governed_names(policy, tool_name))


def our_hooks(command: str) -> dict[str, list[dict[str, Any]]]:
    """Each event's group: every tool, the command naming the event; only `type` and `command`."""
    return {event: [{"matcher": "", "hooks": [{"type": "command", "command": f"{command} {event}"}]}]
            for event in EVENTS}  # fmt: skip


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    done = f"installed hooks for every tool call ({len(governed_tools(policy))} memory tools governed)"
    return HOOKS.plan_install(scope, project, our_hooks, done)


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the install complete, and does the installed command refuse an oversized search?"""
    checks, commands, _ = HOOKS.installed(project, EVENTS, [])
    checks += isolations(NAME, commands)
    before = [c for c in commands if c.endswith(f" {PRE}")]
    tools = governed_tools(policy)
    if before and tools:
        payload = {"conversationId": "doctor", "stepIdx": 1, "workspacePaths": [os.getcwd()],
                   "toolCall": {"name": tools[0], "args": {"query": "doctor", "limit": 10}}}  # fmt: skip
        checks.append(refused_search(NAME, before[0], payload, None))
    return checks
