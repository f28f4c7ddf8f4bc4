"""GitHub Copilot CLI: where its hooks live, installing memory-governor's there, and checking it.

`install copilot` writes one hooks file of Copilot's own format, `{"version": 1, "hooks":
{event: [entry]}}`: `.github/hooks/memory-governor.json` in the project (`--scope project`,
loaded by Copilot in a trusted folder) or `~/.copilot/hooks/memory-governor.json`
(`--scope user`, `$COPILOT_HOME/hooks` when set; always loaded). Tool hooks get a matcher of
the exact tool names the policy governs, as Copilot spells them (`engram-mem_search`, a regex
Copilot matches whole), plus the dispatch tools.

The project scope is committed, so its command finds each machine's governor (and runs the project's
launcher `${COPILOT_PROJECT_DIR:-.}/.memory-governor/hook` where there is none: governor.harnesses.launcher);
the user scope names this machine's interpreter.

A preToolUse hook that exits non-zero makes Copilot deny the call. The hook process always
exits 0, but a missing interpreter cannot: with `on_error: open` the command ends in `|| true`
(the project scope's, a script, in a subshell first), so even that lets the call through; with `on_error: closed` it does not, and the
call is denied as closed asks. `doctor` says when the policy and the installed command
disagree.

Copilot also runs the hooks of the project's `.claude/settings*.json`, so a Claude Code install
fires under Copilot too; its matchers name Claude Code's tools and match none of Copilot's. The
Copilot adapter decides those payloads only while no Copilot install of ours is present, and
`doctor` says what that leaves ungoverned.

Cold path.
"""

from __future__ import annotations

import os
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.checks import BAD, INFO, OK, WARN, Check, coverage, installs, run_hook_command
from governor.harnesses.copilot import HOOKS_FILE, NAME, server_name, user_hooks_dir
from governor.harnesses.settings import (
    Change,
    SettingsError,
    any_server_patterns,
    governed_names,
    ours,
    read_json,
    removal,
    route_tools,
)

SCOPES = ("project", "user")
TIMEOUT_SECONDS = 10
FAIL_OPEN = " || true"
# What marks a hook entry as ours, whichever install (path, venv, layout) wrote it.
OURS = ours(NAME)
PROJECT_VARIABLE = "COPILOT_PROJECT_DIR"  # set for every hook (Seen, 1.0.102); the project scope's launcher names it
TOOL_EVENTS = ("preToolUse", "postToolUse", "postToolUseFailure")
SESSION_EVENTS = ("sessionStart", "userPromptSubmitted", "preCompact", "subagentStart", "subagentStop", "agentStop")


def hooks_path(scope: str, project: str) -> str:
    if scope == "user":
        return os.path.join(user_hooks_dir(os.environ), HOOKS_FILE)
    return os.path.join(project, ".github", "hooks", HOOKS_FILE)


def governed_tools(policy: dict[str, Any]) -> list[str]:
    """The MCP tool names, as Copilot spells them, of every tool the policy governs."""
    return list(governed_names(policy, lambda server, tool: f"{server_name(server)}-{tool}"))


def command_for(policy: dict[str, Any], scope: str) -> str:
    command = launcher.hook_command_for(scope, NAME, PROJECT_VARIABLE)
    if policy["on_error"] != "open":
        return command
    return (f"({command})" if scope == "project" else command) + FAIL_OPEN  # the script's exec, in a subshell


def bare(command: str) -> str:
    """The installed command without what makes it fail open."""
    if not command.endswith(FAIL_OPEN):
        return command
    command = command.removesuffix(FAIL_OPEN)
    return command[1:-1] if command.startswith("(") and command.endswith(")") else command


def _command_of(entry: Any) -> str | None:
    if isinstance(entry, dict):
        for key in ("bash", "command"):
            if isinstance(entry.get(key), str):
                return str(entry[key])
    return None


def is_ours(entry: Any) -> bool:
    command = _command_of(entry)
    return command is not None and bool(OURS.search(command))


def _literal(name: str) -> str:
    """A tool name as a regex that matches only it (Copilot matches the whole name)."""
    return "".join(c if c.isalnum() or c in "_-" else "\\" + c for c in name)


def our_hooks(policy: dict[str, Any], scope: str) -> dict[str, list[dict[str, Any]]]:
    command = command_for(policy, scope)
    tools = governed_tools(policy)
    dispatch = [t for t in policy["briefing"]["dispatch_tools"] if t not in tools]

    anywhere = any_server_patterns(policy, "", "-")  # the memory registered under another name

    def entry(matcher: list[str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "command", "bash": command, "timeoutSec": TIMEOUT_SECONDS}
        if matcher is not None:
            out["matcher"] = "|".join([*(_literal(name) for name in matcher), *anywhere])
        return out

    routes = [t for t in route_tools(policy) if t not in tools + dispatch]
    hooks = {"preToolUse": [entry(tools + dispatch + routes)], "postToolUse": [entry(tools)],
             "postToolUseFailure": [entry(tools)]}  # fmt: skip
    for event in SESSION_EVENTS:
        hooks[event] = [entry()]
    return hooks


def without_ours(data: dict[str, Any]) -> dict[str, Any]:
    """The hooks file with our entries removed (flat entries, or inside Claude-style groups)."""
    out = dict(data)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return out
    kept: dict[str, Any] = {}
    for event, entries in hooks.items():
        if not isinstance(entries, list):
            kept[event] = entries
            continue
        remaining = []
        for entry in entries:
            if is_ours(entry):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("hooks"), list):
                inner = [h for h in entry["hooks"] if not is_ours(h)]
                if not inner and entry["hooks"]:
                    continue
                entry = {**entry, "hooks": inner}
            remaining.append(entry)
        if remaining:
            kept[event] = remaining
    out["hooks"] = kept
    return out


def with_ours(data: dict[str, Any], policy: dict[str, Any], scope: str) -> dict[str, Any]:
    out = without_ours(data)
    hooks = dict(out.get("hooks") or {})
    for event, added in our_hooks(policy, scope).items():
        hooks[event] = [*hooks.get(event, []), *added]
    return {"version": out.get("version", 1), **out, "hooks": hooks}


def our_entries(data: Any) -> dict[str, list[dict[str, Any]]]:
    """Our hook entries in a hooks file: event -> entries (a group's matcher carried onto its hooks)."""
    found: dict[str, list[dict[str, Any]]] = {}
    hooks = data.get("hooks") if isinstance(data, dict) else None
    for event, entries in hooks.items() if isinstance(hooks, dict) else ():
        for entry in entries if isinstance(entries, list) else []:
            if is_ours(entry):
                found.setdefault(event, []).append(entry)
            elif isinstance(entry, dict) and isinstance(entry.get("hooks"), list):
                for hook in entry["hooks"]:
                    if is_ours(hook):
                        found.setdefault(event, []).append({**hook, "matcher": entry.get("matcher", "")})
    return found


def _read(path: str) -> dict[str, Any]:
    return read_json(path, what="a Copilot hooks file")


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    path = hooks_path(scope, project)
    before = _read(path)
    after = with_ours(before, policy, scope)
    done = f"installed hooks for {len(governed_tools(policy))} memory tools and {len(SESSION_EVENTS)} session events"
    return launcher.hooks_installed(scope, project, path, before, after, done)


def project_files(project: str) -> list[str]:
    """The project-scope files whose hooks run the launcher."""
    return [hooks_path("project", project)]


def plan_uninstall(scope: str, project: str) -> list[Change]:
    path = hooks_path(scope, project)
    before = _read(path)
    after = removal(path, without_ours(before) if before else before, lambda data: not data.get("hooks"))
    return launcher.hooks_removed(scope, project, NAME, path, before, after)


def _matched(entries: list[dict[str, Any]]) -> set[str]:
    names: set[str] = set()
    for entry in entries:
        matcher = entry.get("matcher")
        if not matcher:
            return {"*"}  # no matcher: every tool
        names.update(part.replace("\\", "") for part in str(matcher).split("|"))
    return names


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the install complete for this policy, do its exits follow on_error, does it answer, and
    what does Copilot make of a Claude Code install here?"""
    checks: list[Check] = []
    tools = governed_tools(policy)
    commands: list[str] = []
    installed: list[str] = []
    paths = [(scope, hooks_path(scope, project)) for scope in SCOPES]
    for scope, path, events in installs(NAME, paths, lambda path: our_entries(_read(path)), checks):
        if not events:
            continue
        installed.append(scope)
        scope_commands = [c for entries in events.values() for e in entries if (c := _command_of(e))]
        commands += scope_commands
        if scope == "project":
            checks += launcher.doctor(project, NAME, path, [bare(c) for c in scope_commands], PROJECT_VARIABLE)
        missing = [e for e in (*TOOL_EVENTS, *SESSION_EVENTS) if e not in events]
        matched = _matched(events.get("preToolUse", []))
        uncovered = [t for t in tools if t not in matched and "*" not in matched]
        fix = f"memory-governor install copilot --scope {scope}"
        checks.append(coverage(NAME, scope, path, events, missing, uncovered, len(tools)))
        fails_open = all(c.endswith(FAIL_OPEN) for c in scope_commands)
        if fails_open != (policy["on_error"] == "open"):
            said = "lets calls through" if fails_open else "denies calls"
            checks.append(Check(WARN, f"copilot ({scope})", f"when the hook cannot start at all the installed command "
                                f"{said}, but the policy says on_error: {policy['on_error']}", fix))  # fmt: skip
    if len(installed) == 2:
        checks.append(Check(INFO, "copilot", "installed in both scopes: the user's hooks decide, the project's "
                            "answer nothing (Copilot runs both)"))  # fmt: skip
    checks += _claude_code_hooks(project, bool(installed))
    if commands and tools:
        checks.append(_selftest(commands[0], tools[0], project))
    return checks


def _claude_code_hooks(project: str, installed: bool) -> list[Check]:
    """Copilot runs the project's Claude Code hooks too: say what that means here."""
    from governor.harnesses.claude_code.setup import is_ours as claude_ours
    from governor.harnesses.settings import hook_groups

    found = []
    for name in ("settings.json", "settings.local.json"):
        path = os.path.join(project, ".claude", name)
        try:
            if os.path.exists(path) and hook_groups(read_json(path), claude_ours):
                found.append(path)
        except SettingsError:
            continue
    if not found:
        return []
    if installed:
        return [Check(INFO, "copilot", f"Copilot CLI also runs the Claude Code hooks in {found[0]}; under Copilot "
                      "they answer nothing while this install decides")]  # fmt: skip
    import shutil

    if not os.path.isdir(os.path.dirname(user_hooks_dir(os.environ))) and shutil.which("copilot") is None:
        return []  # no Copilot CLI on this machine: nothing to say in a Claude Code project
    return [Check(WARN, "copilot", f"Copilot CLI runs the Claude Code hooks in {found[0]}: its prompts reach the "
                  "governor, but those matchers name Claude Code's tools (mcp__engram__…), not Copilot's "
                  "(engram-mem_search, …), so its memory calls are not governed", "memory-governor install copilot")]  # fmt: skip


def _selftest(command: str, tool: str, project: str) -> Check:
    """Run the installed command on a synthetic search with limit 10: it must clamp to the ladder."""
    payload = {"sessionId": "doctor", "timestamp": 0, "cwd": project, "toolName": tool,
               "toolArgs": {"query": "doctor", "limit": 10}}  # fmt: skip
    run = run_hook_command(bare(command), payload, {PROJECT_VARIABLE: os.path.abspath(project)},
                           os.path.abspath(project))  # fmt: skip
    answer = run.answer if isinstance(run.answer, dict) else {}
    clamped = (answer.get("modifiedArgs") or {}).get("limit")
    if run.returncode == 0 and clamped is not None:
        return Check(OK, "copilot hook", f"the installed command answers (clamped limit 10 -> {clamped}) in "
                     f"{run.millis:.0f} ms")  # fmt: skip
    return Check(BAD, "copilot hook", f"the installed command did not clamp a search: {run.last_error}",
                 "memory-governor install copilot  (then run doctor again)")  # fmt: skip
