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
import shlex
from collections.abc import Mapping
from typing import Any

from governor.harnesses import hook_command, launcher
from governor.harnesses.checks import BAD, INFO, OK, WARN, Check, isolation, server_entries, unmapped_memory_servers
from governor.harnesses.opencode import NAME, PLUGIN_FILE, tool_name
from governor.harnesses.scripts import Script, timeouts
from governor.harnesses.settings import Change, SettingsError, governed_names, read_text, route_tools

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


LAUNCHER = launcher.RELATIVE.replace(os.sep, "/")  # what a project install's plugin runs, from the project


def plugin_config(policy: dict[str, Any], scope: str) -> dict[str, Any]:
    governed = governed_tools(policy)
    run: dict[str, Any] = {"launcher": LAUNCHER} if scope == "project" else {"command": shlex.split(hook_command(NAME))}
    return {"harness": NAME, **run, "tools": governed, "forward": forwarded_tools(policy, governed), **timeouts()}


def config_command(config: dict[str, Any], path: str) -> list[str]:
    """The hook command an installed plugin's CONFIG runs (the plugin file at `path`), as plugin.js builds it."""
    if config.get("launcher"):
        project = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))
        return ["sh", os.path.join(project, str(config["launcher"])), NAME]
    command = config.get("command")
    return [str(word) for word in command] if isinstance(command, list) else []


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
    checks: list[Check] = []
    installed: list[tuple[str, list[str]]] = []
    governed = governed_tools(policy)
    for scope in SCOPES:
        path = plugin_path(scope, project)
        try:
            text = read_text(path)
        except SettingsError as err:
            checks.append(Check(BAD, f"opencode ({scope})", str(err), "fix the file's permissions"))
            continue
        if text is None:
            continue
        config = installed_config(text)
        fix = f"memory-governor install opencode --scope {scope}"
        if config is None:
            if SCRIPT.ours(text):
                checks.append(Check(BAD, f"opencode ({scope})", f"{path}: memory-governor's plugin, damaged", fix))
            continue
        installed.append((scope, config_command(config, path)))
        if scope == "project":
            runs = [launcher.command(NAME, None)] if config.get("launcher") else []
            checks += launcher.doctor(project, NAME, path, runs, None)
        missing = [name for name in governed if name not in (config.get("tools") or {})]
        if missing:
            checks.append(Check(BAD, f"opencode ({scope})", f"{path}: tools not forwarded: {', '.join(missing[:4])}",
                                fix))  # fmt: skip
        elif text != plugin_text(policy, scope):
            checks.append(Check(WARN, f"opencode ({scope})", f"{path}: written by another install or version of "
                                "memory-governor", fix))  # fmt: skip
        else:
            checks.append(Check(OK, f"opencode ({scope})", f"{path}: plugin for {len(governed)} memory tools"))
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
    commands = {json.dumps(command): command for _, command in installed}
    for command in commands.values():
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


def _governor_answers(command: list[Any], project: str, governed: dict[str, list[str]]) -> list[Check]:
    """The plugin's first step (it asks the governor to describe itself), then a synthetic search
    with limit 10 through the command it falls back to: it must clamp to the ladder."""
    import subprocess

    from governor.harnesses.checks import run_hook_command

    words = [str(word) for word in command]
    if len(words) < 2:
        return [Check(BAD, "opencode plugin", "the plugin names no hook command", "memory-governor install opencode")]
    out = []
    unsafe = isolation(NAME, shlex.join(words))
    if unsafe is not None:
        out.append(unsafe)
    try:
        proc = subprocess.run([*words[:-1], "--describe", project], capture_output=True, timeout=30)
        described = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        described = None
    if not isinstance(described, dict) or not described.get("fingerprint"):
        out.append(Check(BAD, "opencode plugin", f"the governor the plugin names does not answer ({words[0]}): "
                         "memory calls get what on_error says, closed", "memory-governor install opencode"))  # fmt: skip
        return out
    if not governed:
        return out
    name, (server, tool) = next(iter(governed.items()))
    payload = {"hook": "tool.execute.before", "sessionID": "doctor", "parentID": "", "agent": "build",
               "directory": project, "worktree": project, "tool": name, "callID": "doctor-1",
               "args": {"query": "doctor", "limit": 10}, "mcp": {"server": server, "tool": tool}}  # fmt: skip
    run = run_hook_command(shlex.join(words), payload)
    answer = run.answer if isinstance(run.answer, dict) else {}
    clamped = (answer.get("args") or {}).get("limit")
    if run.returncode == 0 and clamped is not None:
        out.append(Check(OK, "opencode plugin", f"the governor answers (clamped limit 10 -> {clamped}) in "
                         f"{run.millis:.0f} ms"))  # fmt: skip
    else:
        out.append(Check(BAD, "opencode plugin", f"the hook command did not clamp a search: {run.last_error}",
                         "memory-governor install opencode  (then run doctor again)"))  # fmt: skip
    return out


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
