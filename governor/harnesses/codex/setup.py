"""Codex CLI: where its hooks live, installing them there trusted, and checking the install.

`install codex` writes hooks into the project's `.codex/hooks.json` (`--scope user`:
`$CODEX_HOME/hooks.json`, `~/.codex` by default) with narrow matchers: an anchored regex of
the exact tool names the policy governs, so no other tool starts a hook process.

Codex runs a user or project hook only once it is trusted: `$CODEX_HOME/config.toml` holds
`[hooks.state."<hooks.json path>:<event>:<group>:<handler>"] trusted_hash = "sha256:..."`,
the hash of the hook's normalised definition; an untrusted or changed hook is skipped
silently. Codex writes that entry when a user reviews the hook; running `install` is that
review for the hooks it writes, so it writes the same entries (`trusted_hash`, computed as
Codex computes it, below) for exactly its own hooks, and `uninstall` removes them. Other
entries and the rest of config.toml are kept as they are (tomlkit keeps comments and
layout). Project hooks load only in a project Codex trusts: `install` says so when this one
is not, and `doctor` fails.

`doctor` checks each install, recomputes the hashes against config.toml, and, when a `codex`
binary is on PATH, asks Codex itself (`codex app-server`, `hooks/list`) whether it would run
them.

Cold path.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from governor.harnesses import launcher
from governor.harnesses.checks import BAD, INFO, OK, WARN, Check, coverage, installs, isolations, run_hook_command
from governor.harnesses.codex import DISPATCH_TOOL
from governor.harnesses.settings import (
    Change,
    SettingsError,
    any_server_patterns,
    command_is,
    exact_matcher,
    governed_names,
    hook_groups,
    matcher_names,
    ours,
    read_json,
    read_toml,
    removal,
    route_tools,
    with_hooks,
    without_hooks,
)

NAME = "codex"
SCOPES = ("project", "user")
TIMEOUT_SECONDS = 10
# What marks a hook entry as ours, whichever install (path, venv, layout) wrote it.
OURS = ours(NAME)
PROJECT_VARIABLE = None  # Codex sets no project directory for hooks: the launcher is found from the session folder up
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
SESSION_EVENTS = ("SessionStart", "UserPromptSubmit", "PreCompact", "SubagentStart", "SubagentStop", "Stop")
# The labels Codex keys hook state with (codex-rs/hooks: hook_event_key_label).
EVENT_LABELS = {"PreToolUse": "pre_tool_use", "PermissionRequest": "permission_request", "PostToolUse": "post_tool_use",
                "PreCompact": "pre_compact", "PostCompact": "post_compact", "SessionStart": "session_start",
                "SessionEnd": "session_end", "UserPromptSubmit": "user_prompt_submit",
                "SubagentStart": "subagent_start", "SubagentStop": "subagent_stop", "Stop": "stop"}  # fmt: skip
# Events whose matcher Codex ignores (and leaves out of the hash).
NO_MATCHER = ("UserPromptSubmit", "Stop")
DEFAULT_TIMEOUT = 600


def codex_home(env: dict[str, str] | None = None) -> str:
    env = dict(os.environ) if env is None else env
    return os.path.abspath(env.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex"))


def hooks_path(scope: str, project: str) -> str:
    if scope == "user":
        return os.path.join(codex_home(), "hooks.json")
    return os.path.join(os.path.abspath(project), ".codex", "hooks.json")


def config_path() -> str:
    return os.path.join(codex_home(), "config.toml")


def governed_tools(policy: dict[str, Any]) -> list[str]:
    """The MCP tool names, as Codex names them to hooks, of every tool the policy governs."""
    return list(governed_names(policy, "mcp__{}__{}".format))


def tool_matcher(tools: list[str], policy: dict[str, Any]) -> str:
    """An anchored regex of exactly these names and of the memory under any server name (Codex
    matchers are regexes)."""
    return exact_matcher(tools, any_server_patterns(policy, "mcp__", "__"))


matched_tools = matcher_names


is_ours = command_is(OURS)


def our_hooks(policy: dict[str, Any], command: str) -> dict[str, list[dict[str, Any]]]:
    entry = {"type": "command", "command": command, "timeout": TIMEOUT_SECONDS}
    matcher = tool_matcher(governed_tools(policy), policy)
    out: dict[str, list[dict[str, Any]]] = {event: [{"matcher": matcher, "hooks": [entry]}] for event in TOOL_EVENTS}
    routes = [t for t in route_tools(policy) if t not in governed_tools(policy)]
    # A route around the memory tools goes through these: refused before they run. A spawn is seen
    # before its subagent's first event: that subagent counts in the spawn's turn.
    before = [*governed_tools(policy), *routes, DISPATCH_TOOL]
    out["PreToolUse"] = [{"matcher": tool_matcher(list(dict.fromkeys(before)), policy), "hooks": [entry]}]
    for event in SESSION_EVENTS:
        out[event] = [{"hooks": [entry]}]
    return out


# -- trust, as Codex computes it ----------------------------------------------------------


def hook_hash(event: str, group: dict[str, Any], handler: dict[str, Any]) -> str:
    """Codex's trusted_hash of one command handler (codex-rs/hooks discovery: command_hook_hash):
    sha256 of the compact, key-sorted JSON of {event_name, matcher, hooks: [the normalised
    handler]}, where unset optional fields are left out and the timeout is always present."""
    normalised: dict[str, Any] = {"type": "command", "command": handler.get("command"),
                                  "timeout": max(1, int(handler.get("timeout") or DEFAULT_TIMEOUT)),
                                  "async": bool(handler.get("async", False))}  # fmt: skip
    if handler.get("statusMessage") is not None:
        normalised["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [normalised]}
    if event not in NO_MATCHER and group.get("matcher") is not None:
        identity["matcher"] = group["matcher"]
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def trust_entries(path: str, settings: dict[str, Any]) -> dict[str, str]:
    """{state key: trusted_hash} for each of our handlers in the hooks file at `path`."""
    out: dict[str, str] = {}
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        if event not in EVENT_LABELS or not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if is_ours(handler):
                    out[f"{path}:{EVENT_LABELS[event]}:{g}:{h}"] = hook_hash(event, group, handler)
    return out


def toml_text(doc: Any) -> str:
    import tomlkit

    return str(tomlkit.dumps(doc))


def _table(value: Any) -> dict[str, Any]:
    """A TOML table (tomlkit's are dicts) or, for anything else, an empty one."""
    return value if isinstance(value, dict) else {}


def states(doc: Any) -> dict[str, Any]:
    return dict(_table(_table(_table(doc).get("hooks")).get("state")))


def with_trust(doc: Any, drop: dict[str, str], add: dict[str, str]) -> Any:
    """A copy of config.toml without the entries `drop` (key -> the hash we wrote there: an
    entry whose hash is not ours is someone's own review and stays) and with `add`."""
    import tomlkit

    out = tomlkit.parse(tomlkit.dumps(doc))
    state = states(out)
    for key, written in drop.items():
        if key not in add and _table(state.get(key)).get("trusted_hash") == written:
            del out["hooks"]["state"][key]
    for key, trusted in add.items():
        entry = _table(state.get(key))
        if entry.get("trusted_hash") == trusted:
            continue
        if "hooks" not in out:
            out["hooks"] = tomlkit.table(is_super_table=True)
        if "state" not in out["hooks"]:
            out["hooks"]["state"] = tomlkit.table(is_super_table=True)
        table = tomlkit.table()
        if entry.get("enabled") is not None:
            table["enabled"] = entry["enabled"]  # the user's own switch stays theirs
        table["trusted_hash"] = trusted
        out["hooks"]["state"][key] = table
    hooks = out.get("hooks")
    if hooks is not None and "state" in hooks and not len(hooks["state"]):
        del hooks["state"]
    if hooks is not None and not len(hooks):
        del out["hooks"]
    return out


def project_trusted(doc: Any, project: str) -> bool:
    """Does config.toml trust `project` or a folder above it (Codex loads .codex/ only then)?"""
    projects = _table(_table(doc).get("projects"))
    folder = os.path.abspath(project)
    while True:
        if _table(projects.get(folder)).get("trust_level") == "trusted":
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent


# -- install, uninstall -------------------------------------------------------------------


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    path = hooks_path(scope, project)
    before = read_json(path)
    after = with_hooks(before, our_hooks(policy, launcher.hook_command_for(scope, NAME, PROJECT_VARIABLE)), is_ours)
    config = read_toml(config_path())
    trusted = with_trust(config, trust_entries(path, before), trust_entries(path, after))
    tools = len(governed_tools(policy))
    done = f"installed hooks for {tools} memory tools and {len(SESSION_EVENTS)} session events"
    if scope == "project" and not project_trusted(config, project):
        done += (f"; Codex reads {os.path.dirname(path)} only in a trusted project, and {os.path.abspath(project)} is "
                 "not trusted yet: start `codex` there once and trust it, or install with --scope user")  # fmt: skip
    return [
        *launcher.hooks_installed(scope, project, path, before, after, done),
        Change(config_path(), config, trusted, "trusted the memory-governor hooks (hooks.state)", "hooks already trusted",
               toml_text),
    ]  # fmt: skip


def project_files(project: str) -> list[str]:
    """The project-scope files whose hooks run the launcher."""
    return [hooks_path("project", project)]


def plan_uninstall(scope: str, project: str) -> list[Change]:
    path = hooks_path(scope, project)
    before = read_json(path)
    changes = launcher.hooks_removed(scope, project, NAME, path, before, removal(path, without_hooks(before, is_ours)))
    if os.path.exists(config_path()):
        config = read_toml(config_path())
        untrusted = removal(config_path(), with_trust(config, trust_entries(path, before), {}))
        changes.append(Change(config_path(), config, untrusted, "hook trust removed", "no hook trust of ours",
                              toml_text))  # fmt: skip
    return changes


# -- doctor -------------------------------------------------------------------------------


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Is the install complete for this policy, trusted, and does the installed command answer?"""
    checks: list[Check] = []
    tools = governed_tools(policy)
    commands: list[str] = []
    try:
        config, unreadable = read_toml(config_path()), ""
    except SettingsError as err:  # only ours to report when our hooks are installed
        config, unreadable = {}, str(err)
    state = states(config)
    installed: list[str] = []
    for scope, path, settings in installs(NAME, [(scope, hooks_path(scope, project)) for scope in SCOPES], read_json,
                                          checks):  # fmt: skip
        events = hook_groups(settings, is_ours)
        if not events:
            continue
        installed.append(path)
        fix = f"memory-governor install codex --scope {scope}"
        commands += [hook["command"] for groups in events.values() for _, hook in groups]
        if scope == "project":
            checks += launcher.doctor(project, NAME, path, commands, PROJECT_VARIABLE)
        missing = [e for e in (*TOOL_EVENTS, *SESSION_EVENTS) if e not in events]
        matched = set().union(*(matched_tools(m) for m, _ in events.get("PreToolUse", []))) if events.get(
            "PreToolUse") else set()  # fmt: skip
        uncovered = [t for t in [*tools, DISPATCH_TOOL] if t not in matched]
        untrusted = [key.rsplit(":", 3)[1] for key, trusted in trust_entries(path, settings).items()
                     if _table(state.get(key)).get("trusted_hash") != trusted]  # fmt: skip
        if missing or uncovered:
            checks.append(coverage(NAME, scope, path, events, missing, uncovered, len(tools)))
        elif untrusted:
            checks.append(Check(BAD, f"codex ({scope})", f"{path}: Codex skips untrusted hooks silently, and "
                                f"{len(untrusted)} of ours are not trusted in {config_path()} "
                                f"({', '.join(sorted(set(untrusted)))})", fix))  # fmt: skip
        elif scope == "project" and not project_trusted(config, project):
            checks.append(Check(BAD, f"codex ({scope})", f"{path}: Codex ignores .codex/ in a project it does not "
                                f"trust, and {os.path.abspath(project)} is not trusted in {config_path()}",
                                "start `codex` in the project once and trust it, or: memory-governor install codex "
                                "--scope user"))  # fmt: skip
        else:
            checks.append(Check(OK, f"codex ({scope})", f"{path}: {len(events)} hook events, {len(tools)} memory "
                                "tools, trusted"))  # fmt: skip
    if installed and unreadable:
        checks.append(Check(BAD, "codex config", unreadable, "fix the file by hand: Codex cannot read it either"))
    if installed:
        checks.append(codex_verdict(project, installed))
    walled = _managed_doctor()
    checks += walled
    if commands and not walled:
        checks.append(Check(INFO, "guarantees", "not managed: the hooks, their trust and the policy are in files the "
                            "user, and so the model, can write; the routes refuse the plain ways to change them. A "
                            "wall: sudo memory-governor install codex --scope managed"))  # fmt: skip
    checks += isolations(NAME, commands)
    if commands and tools:
        checks.append(_selftest(commands[0], tools[0], project))
    return checks


def _managed_doctor() -> list[Check]:
    """The managed install's checks (governor.harnesses.codex.managed)."""
    from governor.harnesses.codex import managed

    return list(managed.doctor("/", is_ours))


def codex_verdict(project: str, paths: list[str], timeout: float = 15) -> Check:
    """What Codex itself says of our hooks (`codex app-server`, `hooks/list`), when it is on PATH."""
    import shutil
    import subprocess

    binary = shutil.which("codex")
    if binary is None:
        return Check(WARN, "codex hooks", "no `codex` on PATH to ask whether it runs the hooks; trust was checked "
                     "from config.toml only")  # fmt: skip
    requests = [{"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "memory-governor", "version": "0"}}},
                {"method": "initialized"},
                {"id": 1, "method": "hooks/list", "params": {"cwds": [os.path.abspath(project)]}}]  # fmt: skip
    try:
        with subprocess.Popen([binary, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, cwd=os.path.abspath(project)) as proc:  # fmt: skip
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
            proc.stdin.flush()
            answer = _read_answer(proc.stdout, 1, timeout)
            proc.kill()
    except OSError as err:
        return Check(WARN, "codex hooks", f"could not ask {binary}: {err}")
    if answer is None:
        return Check(WARN, "codex hooks", f"{binary} app-server gave no hooks/list answer in {timeout:.0f} s")
    hooks = [h for entry in answer.get("result", {}).get("data", []) for h in entry.get("hooks", [])
             if h.get("sourcePath") in paths and is_ours(h)]  # fmt: skip
    skipped = [h for h in hooks if not h.get("enabled") or h.get("trustStatus") not in ("trusted", "managed")]
    if not hooks:
        return Check(BAD, "codex hooks", f"Codex does not load the installed hooks ({', '.join(paths)}): in a project "
                     "it does not trust, it ignores .codex/", "start `codex` in the project once and trust it, or: "
                     "memory-governor install codex --scope user")  # fmt: skip
    if skipped:
        status = sorted({f"{h.get('eventName')}: {h.get('trustStatus')}" for h in skipped})
        return Check(BAD, "codex hooks", f"Codex skips {len(skipped)} of our {len(hooks)} hooks ({', '.join(status)})",
                     "memory-governor install codex  (then run doctor again)")  # fmt: skip
    return Check(OK, "codex hooks", f"Codex ({binary}) runs all {len(hooks)} installed hooks: trusted")


def _read_answer(stream: Any, wanted: int, timeout: float) -> dict[str, Any] | None:
    import select
    import time

    deadline = time.monotonic() + timeout
    buffered = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            break
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == wanted:
                return message
    return None


def _selftest(command: str, tool: str, project: str) -> Check:
    """Run the installed command on a synthetic search with limit 10: it must clamp to the ladder."""
    payload = {"session_id": "doctor", "turn_id": "doctor-turn", "hook_event_name": "PreToolUse", "cwd": os.getcwd(),
               "tool_name": tool, "tool_input": {"query": "doctor", "limit": 10}, "tool_use_id": "doctor-1"}  # fmt: skip
    run = run_hook_command(command, payload, {}, os.path.abspath(project))
    answer = run.answer if isinstance(run.answer, dict) else {}
    specific = answer.get("hookSpecificOutput", {})
    clamped = specific.get("updatedInput", {}).get("limit") if specific.get("permissionDecision") == "allow" else None
    if run.returncode == 0 and clamped is not None:
        return Check(OK, "codex hook", f"the installed command answers (clamped limit 10 -> {clamped}) in "
                     f"{run.millis:.0f} ms")  # fmt: skip
    return Check(BAD, "codex hook", f"the installed command did not clamp a search: {run.last_error}",
                 "memory-governor install codex  (then run doctor again)")  # fmt: skip
