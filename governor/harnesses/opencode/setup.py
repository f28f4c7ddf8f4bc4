"""OpenCode: where its plugins live, installing memory-governor's plugin there, and checking it.

`install opencode` writes one plain JavaScript file, `memory-governor.js`, into the project's
`.opencode/plugin/` (`--scope user`: OpenCode's own config folder, `$XDG_CONFIG_HOME/opencode/plugin/`),
which OpenCode loads at start. It is plugin.js with its CONFIG line filled in: the hook command
(at project scope, which is committed, the project's launcher `.memory-governor/hook`, found
beside the plugin file, which finds each machine's governor: governor.harnesses.launcher; at
user scope this interpreter, isolated, on this package's entry file), the exact names OpenCode gives the
tools the policy governs (`<server>_<tool>`) with the server and tool each stands for, and the
other tools whose calls it forwards (the policy's dispatch tools and the tools its routes name).
It imports only node's built-ins: a plugin with dependencies makes OpenCode install packages.

A file of that name that is not memory-governor's is never overwritten. A second install writes
the same text (nothing changes); one after a policy change rewrites it, backed up.

Cold path.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.checks import INFO, WARN, Check, server_entries, unmapped_memory_servers
from governor.harnesses.opencode import NAME, PLUGIN_FILE, tool_name
from governor.harnesses.scripts import Script, governor_answers, run_config, timeouts
from governor.harnesses.settings import Change, governed_names, read_text, route_tools

SCOPES = ("project", "user")
SCRIPT = Script(__file__, "plugin.js", "// memory-governor for OpenCode:")  # the plugin's template, its first line


def config_dir() -> str:
    """OpenCode's own config folder: $XDG_CONFIG_HOME/opencode, else ~/.config/opencode."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "opencode")


def plugin_path(scope: str, project: str) -> str:
    if scope == "user":
        return os.path.join(config_dir(), "plugin", PLUGIN_FILE)
    return os.path.join(project, ".opencode", "plugin", PLUGIN_FILE)


def governed_tools(policy: dict[str, Any]) -> dict[str, list[str]]:
    """The name OpenCode gives each tool the policy governs -> [server, tool]. Two pairs can get one
    name (`a_b` + `c`, `a` + `b_c`); OpenCode then exposes only one of them, and the first the
    policy lists is the one the governor counts it as."""
    return {name: list(pair) for name, pair in governed_names(policy, tool_name).items()}


def forwarded_tools(policy: dict[str, Any], governed: dict[str, list[str]]) -> list[str]:
    """Other tools whose calls the governor judges before they run: dispatches, and the routes' tools."""
    others = [*policy["briefing"]["dispatch_tools"], *route_tools(policy)]
    return [name for name in dict.fromkeys(others) if name not in governed]


def plugin_config(policy: dict[str, Any], scope: str) -> dict[str, Any]:
    governed = governed_tools(policy)
    return {"harness": NAME, **run_config(NAME, scope), "tools": governed, "forward": forwarded_tools(policy, governed),
            **timeouts()}  # fmt: skip


def plugin_text(policy: dict[str, Any], scope: str) -> str:
    return SCRIPT.text(plugin_config(policy, scope))


installed_config = SCRIPT.config


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    done = f"installed the plugin for {len(governed_tools(policy))} memory tools"
    change = SCRIPT.install(plugin_path(scope, project), plugin_config(policy, scope), done)
    return launcher.with_install(scope, project, change)


def project_files(project: str) -> list[str]:
    """The project-scope files that run the launcher."""
    return [plugin_path("project", project)]


def plan_uninstall(scope: str, project: str) -> list[Change]:
    return launcher.with_uninstall(
        scope, project, NAME, SCRIPT.uninstall(plugin_path(scope, project), "plugin removed")
    )


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the plugin there, current for this policy, and does the governor it names answer?"""
    governed = governed_tools(policy)
    files = [(scope, plugin_path(scope, project)) for scope in SCOPES]
    checks, installed = SCRIPT.doctor(
        NAME, "plugin", project, files, lambda scope: plugin_text(policy, scope), governed
    )
    if not installed:
        return checks
    if len(installed) == 2:
        checks.append(Check(INFO, "opencode", "installed in both scopes: OpenCode loads both, and the first it "
                            "loads decides (the other stands aside)"))  # fmt: skip
    stale = stale_pwd(os.environ)
    if stale is not None:
        checks.append(Check(WARN, "opencode", f"$PWD is {stale} but the working directory is {os.getcwd()}: OpenCode "
                            "takes its project from an inherited $PWD first, so started from here it loads the "
                            f"plugins and policy of {stale}, not this project's", f"cd {os.getcwd()} (or run it "
                            "with PWD set to the folder it runs in)"))  # fmt: skip
    for command in {json.dumps(command): command for command in installed}.values():
        checks += _governor_answers(command, project, governed)
    checks += _unmapped_memory_servers(project, policy)
    return checks


def stale_pwd(env: Mapping[str, str]) -> str | None:
    """$PWD when it names another folder than the working directory (a program that changed
    directory without updating it); None when they agree or PWD is unset."""
    pwd = env.get("PWD")
    try:
        here = os.getcwd()
        return pwd if pwd and os.path.realpath(pwd) != os.path.realpath(here) else None
    except OSError:
        return None


def _governor_answers(command: list[str], project: str, governed: dict[str, list[str]]) -> list[Check]:
    payload = None
    for name, (server, tool) in list(governed.items())[:1]:
        payload = {"hook": "tool.execute.before", "sessionID": "doctor", "parentID": "", "agent": "build",
                   "directory": project, "worktree": project, "tool": name, "callID": "doctor-1",
                   "args": {"query": "doctor", "limit": 10}, "mcp": {"server": server, "tool": tool}}  # fmt: skip
    return governor_answers(
        NAME, "plugin", command, project, payload, lambda answer: (answer.get("args") or {}).get("limit")
    )


def config_files(project: str) -> list[str]:
    """OpenCode's config files for `project`: its own, then the project's."""
    names = ("opencode.json", "opencode.jsonc", "config.json")
    mine = [os.path.join(config_dir(), name) for name in names]
    here = [os.path.join(folder, name) for folder in (project, os.path.join(project, ".opencode"))
            for name in names[:2]]  # fmt: skip
    return mine + here


def mcp_servers(project: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(file, name, entry) of every MCP server OpenCode's config files name for `project`."""
    out = []
    for path in config_files(project):
        try:
            data = jsonc(read_text(path) or "")
        except ValueError:
            continue
        out += server_entries(path, data.get("mcp") if isinstance(data, dict) else None)
    return out


def _unmapped_memory_servers(project: str, policy: dict[str, Any]) -> list[Check]:
    servers = []
    for path, name, entry in mcp_servers(project):
        command = entry.get("command")
        words = [str(word) for word in command] if isinstance(command, list) else [str(command or entry.get("url", ""))]
        servers.append((path, name, " ".join(words)))
    return unmapped_memory_servers(policy, servers)


def jsonc(text: str) -> Any:
    """JSON with comments and trailing commas, as OpenCode reads its config files (ValueError if not)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", "".join(out)) or "{}")
