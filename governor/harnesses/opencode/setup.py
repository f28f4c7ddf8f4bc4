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

from governor.harnesses.checks import INFO, WARN, Check, server_entries, unmapped_memory_servers
from governor.harnesses.opencode import NAME, PLUGIN_FILE, tool_name
from governor.harnesses.scripts import Script, ScriptSetup
from governor.harnesses.settings import read_text

SCOPES = ("project", "user")
MARK = "// memory-governor for OpenCode:"  # the plugin template's first line (a fork's install writes it too)


def _selftest(name: str, server: str, tool: str, project: str) -> dict[str, Any]:
    return {"hook": "tool.execute.before", "sessionID": "doctor", "parentID": "", "agent": "build",
            "directory": project, "worktree": project, "tool": name, "callID": "doctor-1",
            "args": {"query": "doctor", "limit": 10}, "mcp": {"server": server, "tool": tool}}  # fmt: skip


class Host:
    """Where a harness that loads OpenCode's plugins keeps them and its config: OpenCode, or a
    fork that loads the same plugin (Kilo Code). `name`: the harness; `title`: its name for the
    user; `folder`: its folder in the project (`.opencode`), `config`: its folder's name under
    $XDG_CONFIG_HOME (`opencode`), `names`: its config files' names, `also`: other project folders
    it reads config from."""

    def __init__(self, name: str, title: str, folder: str, config: str, names: tuple[str, ...],
                 also: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.name, self.title, self.folder, self.config = name, title, folder, config
        self.names, self.also = names, also
        self.setup = ScriptSetup(name, Script(__file__, "plugin.js", MARK), "plugin", self.plugin_path, tool_name,
                                 _selftest, lambda answer: (answer.get("args") or {}).get("limit"))  # fmt: skip

    def config_dir(self) -> str:
        """The harness's own config folder: $XDG_CONFIG_HOME/<config>, else ~/.config/<config>."""
        xdg = os.environ.get("XDG_CONFIG_HOME")
        base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".config")
        return os.path.join(base, self.config)

    def plugin_path(self, scope: str, project: str) -> str:
        if scope == "user":
            return os.path.join(self.config_dir(), "plugin", PLUGIN_FILE)
        return os.path.join(project, self.folder, "plugin", PLUGIN_FILE)

    def doctor(self, project: str, policy: dict[str, Any]) -> list[Check]:
        """Is the plugin there, current for this policy, and does the governor it names answer?"""
        checks, installed = self.setup.doctor(project, policy)
        if not installed:
            return checks
        if installed == 2:
            checks.append(Check(INFO, self.name, f"installed in both scopes: {self.title} loads both, and the first "
                                "it loads decides (the other stands aside)"))  # fmt: skip
        stale = stale_pwd(os.environ)
        if stale is not None:
            checks.append(Check(WARN, self.name, f"$PWD is {stale} but the working directory is {os.getcwd()}: "
                                f"{self.title} takes its project from an inherited $PWD first, so started from here "
                                f"it loads the plugins and policy of {stale}, not this project's", f"cd {os.getcwd()} "
                                "(or run it with PWD set to the folder it runs in)"))  # fmt: skip
        servers = []
        for path, name, entry in self.mcp_servers(project):
            command = entry.get("command")
            words = [str(w) for w in command] if isinstance(command, list) else [str(command or entry.get("url", ""))]
            servers.append((path, name, " ".join(words)))
        return checks + unmapped_memory_servers(policy, servers)

    def config_files(self, project: str) -> list[str]:
        """The harness's config files for `project`: its own, then the project's."""
        mine = [os.path.join(self.config_dir(), name) for name in self.names]
        here = [os.path.join(folder, name) for folder in (project, *(os.path.join(project, f) for f in
                (self.folder, *self.also))) for name in self.names if name != "config.json"]  # fmt: skip
        return mine + here

    def mcp_servers(self, project: str) -> list[tuple[str, str, dict[str, Any]]]:
        """(file, name, entry) of every MCP server the harness's config files name for `project`."""
        out = []
        for path in self.config_files(project):
            try:
                data = jsonc(read_text(path) or "")
            except ValueError:
                continue
            out += server_entries(path, data.get("mcp") if isinstance(data, dict) else None)
        return out


HOST = Host(NAME, "OpenCode", ".opencode", "opencode", ("opencode.json", "opencode.jsonc", "config.json"))
config_dir = HOST.config_dir
plugin_path = HOST.plugin_path
governed_tools = HOST.setup.governed_tools
plugin_text = HOST.setup.text
installed_config = HOST.setup.script.config
plan_install = HOST.setup.plan_install
project_files = HOST.setup.project_files
plan_uninstall = HOST.setup.plan_uninstall
doctor = HOST.doctor
config_files = HOST.config_files
mcp_servers = HOST.mcp_servers


def stale_pwd(env: Mapping[str, str]) -> str | None:
    """$PWD when it names another folder than the working directory (a program that changed
    directory without updating it); None when they agree or PWD is unset."""
    pwd = env.get("PWD")
    try:
        here = os.getcwd()
        return pwd if pwd and os.path.realpath(pwd) != os.path.realpath(here) else None
    except OSError:
        return None


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
