"""Pi: where its extensions live, installing memory-governor's extension there, and checking it.

`install pi` writes one plain JavaScript file, `memory-governor.js`, into the project's
`.pi/extensions/` (`--scope user`: Pi's agent folder, `$PI_CODING_AGENT_DIR/extensions/`, else
`~/.pi/agent/extensions/`), which Pi loads at start: extension.js with its CONFIG and the shared
client written in (governor.harnesses.scripts): the hook command (the project's committed launcher
at project scope, this interpreter on the entry file at user scope), the names Pi gives the tools
the policy governs (`mcp__<server>__<tool>`), and the other tools whose calls it forwards.

Pi loads a project's `.pi/` (extensions, MCP servers, settings) only once the user trusts the
project: a decision saved in the agent folder's `trust.json` (`/trust` in Pi, or `pi --approve`
once). The install is no such decision (trusting loads everything in `.pi/`, not only ours): it
says so when the project is not trusted, and `doctor` fails until it is.

Cold path.
"""

from __future__ import annotations

import os
from typing import Any

from governor.harnesses.checks import BAD, INFO, Check, server_entries, unmapped_memory_servers
from governor.harnesses.pi import EXTENSION_FILE, NAME, tool_name
from governor.harnesses.scripts import Script, ScriptSetup
from governor.harnesses.settings import Change, read_json

SCOPES = ("project", "user")


def agent_dir() -> str:
    """Pi's agent folder: $PI_CODING_AGENT_DIR, else ~/.pi/agent."""
    explicit = os.environ.get("PI_CODING_AGENT_DIR")
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    return os.path.join(os.path.expanduser("~"), ".pi", "agent")


def extension_path(scope: str, project: str) -> str:
    folder = agent_dir() if scope == "user" else os.path.join(os.path.abspath(project), ".pi")
    return os.path.join(folder, "extensions", EXTENSION_FILE)


def _selftest(name: str, server: str, tool: str, project: str) -> dict[str, Any]:
    return {"event": "tool_call", "sessionId": "doctor", "cwd": project, "toolName": name, "toolCallId": "doctor-1",
            "input": {"query": "doctor", "limit": 10}, "mcp": {"server": server, "tool": tool}}  # fmt: skip


SETUP = ScriptSetup(NAME, Script(__file__, "extension.js", "// memory-governor for Pi:"), "extension", extension_path,
                    tool_name, _selftest, lambda answer: (answer.get("input") or {}).get("limit"))  # fmt: skip
governed_tools = SETUP.governed_tools
project_files = SETUP.project_files
plan_uninstall = SETUP.plan_uninstall


def trusted(project: str) -> bool | None:
    """Pi's saved trust decision for `project` (the nearest entry of trust.json for it or a folder
    above it): True, False, or None when there is none."""
    try:
        decisions = read_json(os.path.join(agent_dir(), "trust.json"), "Pi's trust store")
    except ValueError:
        return None
    folder = os.path.realpath(project)
    while True:
        decision = decisions.get(folder)
        if isinstance(decision, bool):
            return decision
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


TRUST_FIX = "run `pi` in the project once and trust it (/trust), or: memory-governor install pi --scope user"


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    note = ""
    if scope == "project" and trusted(project) is not True:
        note = (f"; Pi loads .pi/extensions only in a project the user trusts, and {os.path.abspath(project)} is not "
                f"trusted yet: {TRUST_FIX}")  # fmt: skip
    return SETUP.plan_install(policy, scope, project, note)


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the extension there, current for this policy, loaded (a trusted project), and does the
    governor it names answer?"""
    checks, installed = SETUP.doctor(project, policy)
    if not installed:
        return checks
    if SETUP.installed("project", project) and trusted(project) is not True:
        checks.append(Check(BAD, "pi (project)", f"{extension_path('project', project)}: Pi loads .pi/extensions only "
                            f"in a project the user trusts, and {os.path.abspath(project)} is not trusted in "
                            f"{os.path.join(agent_dir(), 'trust.json')}", TRUST_FIX))  # fmt: skip
    if installed == 2:
        checks.append(Check(INFO, "pi", "installed in both scopes: Pi loads both, and the first it loads decides "
                            "(the other stands aside)"))  # fmt: skip
    servers = []
    for path in (os.path.join(agent_dir(), "mcp.json"), os.path.join(project, ".pi", "mcp.json")):
        try:
            servers += server_entries(path, read_json(path, "an MCP config").get("mcpServers"))
        except ValueError:
            continue
    words = [(path, name, " ".join([str(e.get("command") or e.get("url") or ""), *map(str, e.get("args") or [])]))
             for path, name, e in servers]  # fmt: skip
    return checks + unmapped_memory_servers(policy, words)
