"""Cline: where its plugins live, installing memory-governor's plugin there, and checking it.

`install cline` writes one plain JavaScript file, `memory-governor.js`, into the project's
`.cline/plugins/` (`--scope user`: `$CLINE_DIR/plugins/`, else `~/.cline/plugins/`), which the `cline`
CLI loads at start: plugin.js with its CONFIG and the shared client written in
(governor.harnesses.scripts): the hook command (the project's committed launcher at project scope,
this interpreter on the entry file at user scope), the names Cline gives the tools the policy
governs (`<server>__<tool>`), and the other tools whose calls it forwards.

Why a plugin and not Cline's file hooks (`.clinerules/hooks/PreToolUse` ...): a file hook's only
refusal, `cancel`, aborts the whole task, and nothing a file hook answers replaces a result
(docs/cline.md).

Cold path.
"""

from __future__ import annotations

import os
from typing import Any

from governor.harnesses.checks import Check, server_entries, unmapped_memory_servers
from governor.harnesses.cline import NAME, PLUGIN_FILE, tool_name
from governor.harnesses.scripts import Script, ScriptSetup
from governor.harnesses.settings import read_json

SCOPES = ("project", "user")


def cline_dir() -> str:
    """Cline's own folder: $CLINE_DIR, else ~/.cline."""
    explicit = os.environ.get("CLINE_DIR")
    return (
        os.path.abspath(os.path.expanduser(explicit)) if explicit else os.path.join(os.path.expanduser("~"), ".cline")
    )


def plugin_path(scope: str, project: str) -> str:
    folder = cline_dir() if scope == "user" else os.path.join(os.path.abspath(project), ".cline")
    return os.path.join(folder, "plugins", PLUGIN_FILE)


def _selftest(name: str, server: str, tool: str, project: str) -> dict[str, Any]:
    return {"event": "tool_call", "sessionId": "doctor", "cwd": project, "agentId": "doctor", "parentAgentId": None,
            "toolName": name, "toolCallId": "doctor-1", "input": {"query": "doctor", "limit": 10},
            "mcp": {"server": server, "tool": tool}}  # fmt: skip


SETUP = ScriptSetup(NAME, Script(__file__, "plugin.js", "// memory-governor for Cline:"), "plugin", plugin_path,
                    tool_name, _selftest, lambda answer: (answer.get("input") or {}).get("limit"))  # fmt: skip
governed_tools = SETUP.governed_tools
project_files = SETUP.project_files
plan_install = SETUP.plan_install
plan_uninstall = SETUP.plan_uninstall


def mcp_settings() -> str:
    """Cline's MCP servers file: $CLINE_MCP_SETTINGS_PATH, else <data dir>/settings/cline_mcp_settings.json."""
    explicit = os.environ.get("CLINE_MCP_SETTINGS_PATH")
    if explicit:
        return explicit
    data = os.environ.get("CLINE_DATA_DIR") or os.path.join(cline_dir(), "data")
    return os.path.join(data, "settings", "cline_mcp_settings.json")


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the plugin there, current for this policy, and does the governor it names answer?"""
    checks, installed = SETUP.doctor(project, policy)
    if not installed:
        return checks
    path = mcp_settings()
    try:
        servers = server_entries(path, read_json(path, "an MCP config").get("mcpServers"))
    except ValueError:
        servers = []
    words = [(p, name, " ".join([str(e.get("command") or e.get("url") or ""), *map(str, e.get("args") or [])]))
             for p, name, e in servers]  # fmt: skip
    return checks + unmapped_memory_servers(policy, words)
