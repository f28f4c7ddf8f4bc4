"""Pi: where its extensions live, installing memory-governor's extension there, and checking it.

`install pi` writes one plain JavaScript file, `memory-governor.js`, into the project's
`.pi/extensions/` (`--scope user`: Pi's agent folder, `$PI_CODING_AGENT_DIR/extensions/`, else
`~/.pi/agent/extensions/`), which Pi loads at start. It is extension.js with its CONFIG line filled in
and the shared client (client.js) written in: the hook command (at project scope, which is
committed, the project's launcher `.memory-governor/hook`, found beside the extension file; at user
scope this interpreter, isolated, on this package's entry file), the names Pi gives the tools the
policy governs (`mcp__<server>__<tool>`) with the server and tool each stands for, and the other
tools whose calls it forwards (the policy's dispatch tools and the tools its routes name).

Pi loads a project's `.pi/` (extensions, MCP servers, settings) only once the user trusts the
project: a decision saved in the agent folder's `trust.json` (`/trust` in Pi, or `pi --approve`
once). The install is no such decision (trusting loads everything in `.pi/`, not only ours): it
says so when the project is not trusted, and `doctor` fails until it is.

A file of that name that is not memory-governor's is never overwritten. A second install writes
the same text (nothing changes); one after a policy change rewrites it, backed up.

Cold path.
"""

from __future__ import annotations

import json
import os
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.checks import BAD, INFO, Check, server_entries, unmapped_memory_servers
from governor.harnesses.pi import EXTENSION_FILE, NAME, tool_name
from governor.harnesses.scripts import Script, governor_answers, run_config, timeouts
from governor.harnesses.settings import Change, governed_names, read_json, read_text, route_tools

SCOPES = ("project", "user")
SCRIPT = Script(__file__, "extension.js", "// memory-governor for Pi:")  # the extension's template, its first line


def agent_dir() -> str:
    """Pi's agent folder: $PI_CODING_AGENT_DIR, else ~/.pi/agent."""
    explicit = os.environ.get("PI_CODING_AGENT_DIR")
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    return os.path.join(os.path.expanduser("~"), ".pi", "agent")


def extension_path(scope: str, project: str) -> str:
    folder = agent_dir() if scope == "user" else os.path.join(os.path.abspath(project), ".pi")
    return os.path.join(folder, "extensions", EXTENSION_FILE)


def governed_tools(policy: dict[str, Any]) -> dict[str, list[str]]:
    """The name Pi gives each tool the policy governs -> [server, tool]."""
    return {name: list(pair) for name, pair in governed_names(policy, tool_name).items()}


def extension_config(policy: dict[str, Any], scope: str) -> dict[str, Any]:
    governed = governed_tools(policy)
    others = [*policy["briefing"]["dispatch_tools"], *route_tools(policy)]
    forward = [name for name in dict.fromkeys(others) if name not in governed]
    return {"harness": NAME, **run_config(NAME, scope), "tools": governed, "forward": forward, **timeouts()}


def extension_text(policy: dict[str, Any], scope: str) -> str:
    return SCRIPT.text(extension_config(policy, scope))


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
    done = f"installed the extension for {len(governed_tools(policy))} memory tools"
    if scope == "project" and trusted(project) is not True:
        done += (f"; Pi loads .pi/extensions only in a project the user trusts, and {os.path.abspath(project)} is not "
                 f"trusted yet: {TRUST_FIX}")  # fmt: skip
    change = SCRIPT.install(extension_path(scope, project), extension_config(policy, scope), done)
    return launcher.with_install(scope, project, change)


def project_files(project: str) -> list[str]:
    """The project-scope files that run the launcher."""
    return [extension_path("project", project)]


def plan_uninstall(scope: str, project: str) -> list[Change]:
    change = SCRIPT.uninstall(extension_path(scope, project), "extension removed")
    return launcher.with_uninstall(scope, project, NAME, change)


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the extension there, current for this policy, loaded (a trusted project), and does the
    governor it names answer?"""
    governed = governed_tools(policy)
    files = [(scope, extension_path(scope, project)) for scope in SCOPES]
    checks, installed = SCRIPT.doctor(NAME, "extension", project, files, lambda s: extension_text(policy, s), governed)
    if not installed:
        return checks
    project_file = extension_path("project", project)
    if SCRIPT.ours(_readable(project_file)) and trusted(project) is not True:
        checks.append(Check(BAD, "pi (project)", f"{project_file}: Pi loads .pi/extensions only in a project the user "
                            f"trusts, and {os.path.abspath(project)} is not trusted in "
                            f"{os.path.join(agent_dir(), 'trust.json')}", TRUST_FIX))  # fmt: skip
    if len(installed) == 2:
        checks.append(Check(INFO, "pi", "installed in both scopes: Pi loads both, and the first it loads decides "
                            "(the other stands aside)"))  # fmt: skip
    payload = None
    for name, (server, tool) in list(governed.items())[:1]:
        payload = {"event": "tool_call", "sessionId": "doctor", "cwd": project, "toolName": name,
                   "toolCallId": "doctor-1", "input": {"query": "doctor", "limit": 10},
                   "mcp": {"server": server, "tool": tool}}  # fmt: skip
    for command in {json.dumps(command): command for command in installed}.values():
        checks += governor_answers(NAME, "extension", command, project, payload,
                                   lambda answer: (answer.get("input") or {}).get("limit"))  # fmt: skip
    checks += unmapped_memory_servers(
        policy, [(path, name, _words(entry)) for path, name, entry in mcp_servers(project)]
    )
    return checks


def _readable(path: str) -> str | None:
    try:
        return read_text(path)
    except ValueError:
        return None


def mcp_servers(project: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(file, name, entry) of every MCP server Pi's mcp.json files name: the agent folder's, the project's."""
    out = []
    for path in (os.path.join(agent_dir(), "mcp.json"), os.path.join(project, ".pi", "mcp.json")):
        try:
            out += server_entries(path, read_json(path, "an MCP config").get("mcpServers"))
        except ValueError:
            continue
    return out


def _words(entry: dict[str, Any]) -> str:
    return " ".join([str(entry.get("command") or entry.get("url") or ""), *map(str, entry.get("args") or [])])
