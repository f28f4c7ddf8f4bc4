"""The MCP proxy: putting it in front of the memory server in an MCP client's configuration.

`install mcp-proxy --client CLIENT [--scope SCOPE]` rewrites the client's entry for each memory
server the policy governs (an entry named as in the policy's `tools[].servers`, e.g. `engram`)
so that the client starts the proxy, which starts the original command behind it:

    "engram": {"command": "uvx", "args": ["engram", "mcp"], "env": {...}}
 -> "engram": {"command": "<python>", "args": ["-I", "-S", "<...>/governor/runtime/proxy.py",
              "--name", "engram", "--", "uvx", "engram", "mcp"], "env": {...}}

A project's file is committed, so at project scope the entry names no machine's path: it runs
this machine's governor as the hook launcher finds it (`$MEMORY_GOVERNOR`, else `memory-governor`
on PATH), `sh -c 'exec "${MEMORY_GOVERNOR:-memory-governor}" proxy "$@"' memory-governor --name
engram -- uvx engram mcp`. Where there is none, the memory server does not start at all.

Everything else in the entry and the file is kept. The original command is the tail of the new
one, so `uninstall` restores it exactly, and a second install changes nothing; the file is
written atomically, with a backup, by governor.harnesses.settings. An entry with a `url`
(a remote server) cannot run behind a stdio proxy and is left alone, with a message.

Where each client keeps its MCP servers (Doc: each client's own documentation; Seen: Claude
Code 2.1.197 ran an entry written here, through `--mcp-config`):

| client | scope | file | key |
|---|---|---|---|
| claude-desktop | user | macOS `~/Library/Application Support/Claude/claude_desktop_config.json`, Windows `%APPDATA%\\Claude\\claude_desktop_config.json`, else `$XDG_CONFIG_HOME/Claude/claude_desktop_config.json` | mcpServers |
| cursor | project, user | `.cursor/mcp.json`, `~/.cursor/mcp.json` | mcpServers |
| windsurf | user | `~/.codeium/windsurf/mcp_config.json` | mcpServers |
| claude-code | project, user, local | `.mcp.json`, `~/.claude.json`, `~/.claude.json` | mcpServers; local: projects.<project>.mcpServers |
| gemini-cli | project, user | `.gemini/settings.json`, `~/.gemini/settings.json` | mcpServers |
| vscode | project | `.vscode/mcp.json` | servers |
| antigravity | user | `~/.gemini/antigravity/mcp_config.json` | mcpServers |

Cold path.
"""

from __future__ import annotations

import copy
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from governor.harnesses import ENTRY
from governor.harnesses.checks import BAD, OK, Check
from governor.harnesses.settings import Change, SettingsError, json_text, read_json

NAME = "mcp-proxy"
PROXY = os.path.join(os.path.dirname(ENTRY), "proxy.py")  # governor.runtime.proxy, run as a file
OURS = re.compile(r"governor[/\\]runtime[/\\]proxy\.py$")
PORTABLE = 'exec "${MEMORY_GOVERNOR:-memory-governor}" proxy "$@"'  # a committed entry's sh script


def _home(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


def _claude_desktop(_project: str) -> str:
    if sys.platform == "darwin":
        return _home("Library", "Application Support", "Claude", "claude_desktop_config.json")
    if sys.platform == "win32":
        return os.path.join(os.environ.get("APPDATA") or _home("AppData", "Roaming"), "Claude",
                            "claude_desktop_config.json")  # fmt: skip
    config = os.environ.get("XDG_CONFIG_HOME") or _home(".config")
    return os.path.join(config, "Claude", "claude_desktop_config.json")


class Client:
    """One MCP client: its config file in each scope it has (the first is the default), and the key
    its servers live under (`nested`: a scope whose servers sit deeper, as a key path)."""

    def __init__(self, title: str, files: dict[str, Callable[[str], str]], key: str = "mcpServers",
                 nested: dict[str, Callable[[str], tuple[str, ...]]] | None = None) -> None:  # fmt: skip
        self.title, self.files, self.key, self.nested = title, files, key, nested or {}

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.files)

    def path(self, scope: str, project: str) -> str:
        return self.files[scope](project)

    def keys(self, scope: str, project: str) -> tuple[str, ...]:
        return self.nested[scope](project) if scope in self.nested else (self.key,)


CLIENTS = {
    "claude-desktop": Client("Claude Desktop", {"user": _claude_desktop}),
    "cursor": Client("Cursor", {"project": lambda p: os.path.join(p, ".cursor", "mcp.json"),
                                "user": lambda _p: _home(".cursor", "mcp.json")}),
    "windsurf": Client("Windsurf", {"user": lambda _p: _home(".codeium", "windsurf", "mcp_config.json")}),
    # `claude mcp add` keeps a server in ~/.claude.json: top level (--scope user) or under the
    # project's own entry (--scope local, its default).
    "claude-code": Client("Claude Code", {"project": lambda p: os.path.join(p, ".mcp.json"),
                                          "user": lambda _p: _home(".claude.json"),
                                          "local": lambda _p: _home(".claude.json")},
                          nested={"local": lambda p: ("projects", os.path.abspath(p), "mcpServers")}),
    "gemini-cli": Client("Gemini CLI", {"project": lambda p: os.path.join(p, ".gemini", "settings.json"),
                                        "user": lambda _p: _home(".gemini", "settings.json")}),
    "vscode": Client("VS Code", {"project": lambda p: os.path.join(p, ".vscode", "mcp.json")}, key="servers"),
    "antigravity": Client("Antigravity", {"user": lambda _p: _home(".gemini", "antigravity", "mcp_config.json")}),
}  # fmt: skip
SCOPES = ("project", "user", "local")  # every scope some client has; each client says which it has


def _client(name: str | None) -> Client:
    target = CLIENTS.get(name or "")
    if target is None:
        raise SettingsError(f"unknown MCP client {name!r}: use --client with one of {', '.join(CLIENTS)}")
    return target


def scopes(name: str | None) -> tuple[str, ...]:
    """The scopes client `name` has, its default first."""
    return _client(name).scopes


def governed_servers(policy: dict[str, Any]) -> list[str]:
    """The server names the policy maps tools for, in its order."""
    names: list[str] = []
    for mapping in policy["tools"]:
        names += [server for server in mapping["servers"] if server not in names]
    return names


def is_ours(entry: Any) -> bool:
    args = entry.get("args") if isinstance(entry, dict) else None
    if not isinstance(args, list) or "--" not in args:
        return False
    return args[:2] == ["-c", PORTABLE] or any(isinstance(a, str) and OURS.search(a) for a in args)


def unwrapped(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as it was before the proxy was put in front of it."""
    if not is_ours(entry):
        return entry
    args = entry["args"]
    tail = args[args.index("--") + 1 :]
    if not tail:
        return {k: v for k, v in entry.items() if k not in ("command", "args")}
    return {**entry, "command": tail[0], "args": tail[1:]}  # keys stay where they were


def wrapped(entry: dict[str, Any], server: str, scope: str = "user") -> dict[str, Any]:
    """The entry with the proxy in front of its command: at project scope (committed) the
    governor the launcher's rule finds on each machine, elsewhere this one's interpreter."""
    original = unwrapped(entry)
    args = original.get("args") or []
    command = [str(original["command"]), *(str(a) for a in args)]
    if scope == "project":
        return {**original, "command": "sh", "args": ["-c", PORTABLE, "memory-governor", "--name", server, "--",
                                                       *command]}  # fmt: skip
    return {**original, "command": sys.executable, "args": ["-I", "-S", PROXY, "--name", server, "--", *command]}


def _servers(data: dict[str, Any], path: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The object of MCP servers at `keys` in `data` ({} where there is none)."""
    node: Any = data
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            return {}
    if not isinstance(node, dict):
        raise SettingsError(f"{path}: `{'.'.join(keys)}` should be an object of MCP servers; nothing was changed")
    return node


def plan_install(policy: dict[str, Any], scope: str, project: str, client: str | None = None) -> list[Change]:
    target = _client(client)
    path, keys = target.path(scope, project), target.keys(scope, project)
    before = read_json(path)
    servers = _servers(before, path, keys)
    names = governed_servers(policy)
    found = [name for name in names if name in servers]
    if not found:
        raise SettingsError(
            f"{path}: no MCP server named {' or '.join(names)} under `{'.'.join(keys)}`. Add your memory server "
            "there first, or map its name in the policy's tools[].servers; nothing was changed"
        )
    after = copy.deepcopy(before)
    into = _servers(after, path, keys)
    done = []
    for name in found:
        entry = servers[name]
        if not isinstance(entry, dict) or "command" not in unwrapped(entry):
            raise SettingsError(f"{path}: `{name}` is not a local command (a remote `url` server cannot run behind "
                                "the stdio proxy); nothing was changed")  # fmt: skip
        into[name] = wrapped(entry, name, scope)
        done.append(name)
    return [Change(path, before, after, f"{target.title} starts {', '.join(done)} behind the governing proxy",
                   "the proxy is already in front of " + ", ".join(done), json_text)]  # fmt: skip


def plan_uninstall(scope: str, project: str, client: str | None = None) -> list[Change]:
    target = _client(client)
    path, keys = target.path(scope, project), target.keys(scope, project)
    before = read_json(path)
    servers = _servers(before, path, keys)
    after = copy.deepcopy(before)
    into = _servers(after, path, keys)
    restored = [name for name, entry in servers.items() if is_ours(entry)]
    for name in restored:
        into[name] = unwrapped(servers[name])
    return [Change(path, before, after, f"{', '.join(restored)} restored to run without the proxy",
                   "the proxy is not installed there", json_text)]  # fmt: skip


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Each client config with the proxy in it: does the command it runs exist?"""
    checks: list[Check] = []
    for name, target in CLIENTS.items():
        for scope in target.scopes:
            path = target.path(scope, project)
            if not os.path.exists(path):
                continue
            try:
                servers = _servers(read_json(path), path, target.keys(scope, project))
            except SettingsError as err:
                checks.append(Check(BAD, f"mcp-proxy {name}", str(err), "fix the file by hand"))
                continue
            ours = {key: entry for key, entry in servers.items() if is_ours(entry)}
            if not ours:
                continue
            broken = [key for key, entry in ours.items() if not _runs(entry)]
            if broken:
                checks.append(Check(BAD, f"mcp-proxy {name}", f"{path}: {', '.join(broken)} runs a proxy that is not "
                                    "there (moved or uninstalled; a committed entry: no memory-governor on PATH and "
                                    "MEMORY_GOVERNOR not set)",
                                    f"memory-governor install mcp-proxy --client {name} --scope {scope}"))  # fmt: skip
            else:
                checks.append(Check(OK, f"mcp-proxy {name}", f"{path}: {', '.join(ours)} behind the proxy"))
    return checks


def _runs(entry: dict[str, Any]) -> bool:
    """Is the governor the entry starts there on this machine?"""
    import shutil

    if entry["args"][:2] == ["-c", PORTABLE]:
        program = os.environ.get("MEMORY_GOVERNOR") or "memory-governor"
        return shutil.which(program) is not None
    return os.path.exists(str(entry.get("command"))) and any(os.path.exists(a) for a in entry["args"]
                                                             if OURS.search(str(a)))  # fmt: skip
