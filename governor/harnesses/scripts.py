"""The JavaScript files an install writes into a host that loads code rather than running hook
commands (an OpenCode plugin, a Pi extension, the Claude Agent SDK module): one template per
harness, filled in here, once.

A template starts with its MARK (the line that says the file is memory-governor's), holds one
CONFIG line (`const CONFIG = {} // memory-governor: the install writes this line`, which the install
fills with the harness's settings as JSON) and one CLIENT line, which the install replaces with
governor/harnesses/client.js (how a JavaScript host reaches the governor: the warm server's
socket, the hook process, on_error when neither answers). A file of that name that is not
memory-governor's is never overwritten; a second install writes the same text.

Cold path.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from typing import Any

from governor.harnesses import hook_command, launcher
from governor.harnesses.checks import BAD, OK, WARN, Check, isolation, run_hook_command
from governor.harnesses.settings import Change, SettingsError, before_tools, governed_names, read_text

CONFIG_LINE = "const CONFIG = {} // memory-governor: the install writes this line"
CLIENT_LINE = "// memory-governor: the shared client (client.js) is written here by the install"
CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client.js")
SOCKET_TIMEOUT_MS = 5_000  # the thin client's own (governor.runtime.client.TIMEOUT)
PROCESS_TIMEOUT_MS = 10_000  # what the other installers give a hook process


class Script:
    """One harness's template (the file `name` beside the module `beside`) and the MARK it starts with."""

    def __init__(self, beside: str, name: str, mark: str) -> None:
        self.template, self.mark = os.path.join(os.path.dirname(os.path.abspath(beside)), name), mark

    def text(self, config: dict[str, Any]) -> str:
        """The file an install writes: the template with its CONFIG line filled and the client in."""
        with open(self.template, encoding="utf-8") as handle:
            template = handle.read()
        assert template.startswith(self.mark) and template.count(CONFIG_LINE) == 1, f"{self.template} lost its marks"
        assert template.count(CLIENT_LINE) == 1, f"{self.template} has no place for the client"
        with open(CLIENT, encoding="utf-8") as handle:
            client = handle.read().rstrip("\n")
        filled = json.dumps(config, ensure_ascii=False, sort_keys=True)
        return template.replace(CONFIG_LINE, CONFIG_LINE.replace("{}", filled, 1)).replace(CLIENT_LINE, client)

    def ours(self, text: str | None) -> bool:
        return text is not None and text.startswith(self.mark)

    def config(self, text: str) -> dict[str, Any] | None:
        """The CONFIG an installed file carries, or None if it is not one of ours or is damaged."""
        if not self.ours(text):
            return None
        head, tail = CONFIG_LINE.split("{}")
        for line in text.splitlines():
            if line.startswith(head) and line.endswith(tail):
                try:
                    value = json.loads(line[len(head) : -len(tail)])
                except ValueError:
                    return None
                return value if isinstance(value, dict) else None
        return None

    def install(self, path: str, config: dict[str, Any], done: str) -> Change:
        """The change that writes the file at `path` (SettingsError where another file of that name is)."""
        before = read_text(path)
        if before is not None and not self.ours(before):
            raise SettingsError(f"{path}: a file of that name that is not memory-governor's is there; move it aside "
                                "(nothing was changed)")  # fmt: skip
        return Change(path, before, self.text(config), done, "already installed", str)

    def uninstall(self, path: str, done: str) -> Change:
        """The change that removes the file at `path` if it is ours (another file there is kept)."""
        before = read_text(path)
        return Change(path, before, None if self.ours(before) else before, done, "not installed", str)

    def doctor(self, harness: str, what: str, project: str, files: list[tuple[str, str]],
               expected: Callable[[str], str], governed: dict[str, Any]) -> tuple[list[Check], list[list[str]]]:  # fmt: skip
        """Each installed file of `files` ((scope, path) of this harness's `what`, e.g. "plugin"):
        ours and undamaged, forwarding every tool the policy governs, written as this install would
        (`expected(scope)`); with the hook command each one runs."""
        checks: list[Check] = []
        commands: list[list[str]] = []
        for scope, path in files:
            try:
                text = read_text(path)
            except SettingsError as err:
                checks.append(Check(BAD, f"{harness} ({scope})", str(err), "fix the file's permissions"))
                continue
            config = None if text is None else self.config(text)
            fix = f"memory-governor install {harness} --scope {scope}"
            if text is None or config is None:
                if self.ours(text):
                    checks.append(Check(BAD, f"{harness} ({scope})", f"{path}: memory-governor's {what}, damaged", fix))
                continue
            commands.append(command_of(harness, config, path))
            if scope == "project":
                runs = [launcher.command(harness, None)] if config.get("launcher") else []
                checks += launcher.doctor(project, harness, path, runs, None)
            missing = [name for name in governed if name not in (config.get("tools") or {})]
            if missing:
                checks.append(Check(BAD, f"{harness} ({scope})", f"{path}: tools not forwarded: "
                                    f"{', '.join(missing[:4])}", fix))  # fmt: skip
            elif text != expected(scope):
                checks.append(Check(WARN, f"{harness} ({scope})", f"{path}: written by another install or version "
                                    "of memory-governor", fix))  # fmt: skip
            else:
                checks.append(Check(OK, f"{harness} ({scope})", f"{path}: {what} for {len(governed)} memory tools"))
        return checks, commands


def run_config(harness: str, scope: str) -> dict[str, Any]:
    """How an installed script runs the governor: at project scope the script the project's hook
    settings run (it finds each machine's governor itself, and runs the committed launcher, found
    from the script's own place, only where there is none, once its digest is checked:
    governor.harnesses.launcher), else this machine's interpreter on the entry file."""
    if scope == "project":
        return {"launcher": LAUNCHER, "script": launcher.script(harness)}
    return {"command": shlex.split(hook_command(harness))}


LAUNCHER = launcher.RELATIVE.replace(os.sep, "/")  # what a project install's script runs, from the project


def command_of(harness: str, config: dict[str, Any], path: str) -> list[str]:
    """The hook command an installed script's CONFIG runs (the script at `path`, two folders below
    the project: `<project>/.opencode/plugin/`, `<project>/.pi/extensions/`), as the script builds it."""
    if config.get("launcher"):
        project = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))
        return ["sh", "-c", str(config.get("script")), "sh", os.path.join(project, str(config["launcher"])), harness]
    command = config.get("command")
    return [str(word) for word in command] if isinstance(command, list) else []


def governor_answers(harness: str, what: str, command: list[str], project: str, payload: dict[str, Any] | None,
                     clamped: Callable[[dict[str, Any]], Any]) -> list[Check]:  # fmt: skip
    """The script's first step (it asks the governor to describe itself), then `payload`, a
    synthetic search with limit 10 (None: the policy governs no tool), through the command it
    falls back to: it must clamp to the ladder (`clamped(answer)`: the limit it gives, or None)."""
    import subprocess

    fix = f"memory-governor install {harness}"
    if len(command) < 2:
        return [Check(BAD, f"{harness} {what}", f"the {what} names no hook command", fix)]
    out = []
    unsafe = isolation(harness, shlex.join(command))
    if unsafe is not None:
        out.append(unsafe)
    try:
        proc = subprocess.run([*command[:-1], "--describe", project], capture_output=True, timeout=30)
        described = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        described = None
    if not isinstance(described, dict) or not described.get("fingerprint"):
        out.append(Check(BAD, f"{harness} {what}", f"the governor the {what} names does not answer ({command[0]}): "
                         "memory calls get what on_error says, closed", fix))  # fmt: skip
        return out
    if payload is None:
        return out
    run = run_hook_command(shlex.join(command), payload)
    limit = clamped(run.answer if isinstance(run.answer, dict) else {})
    if run.returncode == 0 and limit is not None:
        out.append(Check(OK, f"{harness} {what}", f"the governor answers (clamped limit 10 -> {limit}) in "
                         f"{run.millis:.0f} ms"))  # fmt: skip
    else:
        out.append(Check(BAD, f"{harness} {what}", f"the hook command did not clamp a search: {run.last_error}",
                         f"{fix}  (then run doctor again)"))  # fmt: skip
    return out


def timeouts() -> dict[str, int]:
    """The waits every script's CONFIG carries."""
    return {"socketTimeoutMs": SOCKET_TIMEOUT_MS, "processTimeoutMs": PROCESS_TIMEOUT_MS}


class ScriptSetup:
    """The install, uninstall and doctor of a harness whose hooks are one script file (`what`: its
    word for it, "extension", "plugin") at `path(scope, project)`, in the project (committed: it
    runs the launcher) or the user's folder. `spell(server, tool)`: the name the harness gives an
    MCP server's tool; `selftest(name, server, tool, project)`: the message its doctor sends for a
    search with limit 10, and `clamped(answer)`: the limit the answer gives."""

    def __init__(self, harness: str, script: Script, what: str, path: Callable[[str, str], str],
                 spell: Callable[[str, str], str], selftest: Callable[[str, str, str, str], dict[str, Any]],
                 clamped: Callable[[dict[str, Any]], Any]) -> None:  # fmt: skip
        self.harness, self.script, self.what, self.path = harness, script, what, path
        self.spell, self.selftest, self.clamped = spell, selftest, clamped

    def governed_tools(self, policy: dict[str, Any]) -> dict[str, list[str]]:
        """The name the harness gives each tool the policy governs -> [server, tool]."""
        return {name: list(pair) for name, pair in governed_names(policy, self.spell).items()}

    def config(self, policy: dict[str, Any], scope: str) -> dict[str, Any]:
        """The script's CONFIG: how it runs the governor, the governed names, and the other tools
        whose calls it forwards (the policy's dispatch tools and the tools its routes name)."""
        governed = self.governed_tools(policy)
        forward = [name for name in before_tools(policy, list(governed)) if name not in governed]
        return {"harness": self.harness, **run_config(self.harness, scope), "tools": governed, "forward": forward,
                **timeouts()}  # fmt: skip

    def text(self, policy: dict[str, Any], scope: str) -> str:
        return self.script.text(self.config(policy, scope))

    def plan_install(self, policy: dict[str, Any], scope: str, project: str, note: str = "") -> list[Change]:
        done = f"installed the {self.what} for {len(self.governed_tools(policy))} memory tools{note}"
        change = self.script.install(self.path(scope, project), self.config(policy, scope), done)
        return launcher.with_install(scope, project, change)

    def plan_uninstall(self, scope: str, project: str) -> list[Change]:
        change = self.script.uninstall(self.path(scope, project), f"{self.what} removed")
        return launcher.with_uninstall(scope, project, self.harness, change)

    def project_files(self, project: str) -> list[str]:
        """The project-scope files that run the launcher."""
        return [self.path("project", project)]

    def installed(self, scope: str, project: str) -> bool:
        try:
            return self.script.ours(read_text(self.path(scope, project)))
        except ValueError:
            return False

    def doctor(self, project: str, policy: dict[str, Any]) -> tuple[list[Check], int]:
        """Each scope's script, current for this policy; the governor it names answers (a clamp).
        With how many scopes hold one (the harness adds its own checks then)."""
        governed = self.governed_tools(policy)
        files = [(scope, self.path(scope, project)) for scope in ("project", "user")]
        checks, commands = self.script.doctor(self.harness, self.what, project, files,
                                              lambda scope: self.text(policy, scope), governed)  # fmt: skip
        payload = None
        for name, (server, tool) in list(governed.items())[:1]:
            payload = self.selftest(name, server, tool, project)
        for command in {json.dumps(command): command for command in commands}.values():
            checks += governor_answers(self.harness, self.what, command, project, payload, self.clamped)
        return checks, len(commands)
