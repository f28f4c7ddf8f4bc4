"""`memory-governor install claude-code` / `uninstall claude-code`: hooks in a settings file.

Idempotent (a second run changes nothing), atomic (a new file replaces the old in one
rename), with a timestamped backup of what it replaced, keeping every hook that is not
ours, and refusing to touch a settings file that is not valid JSON. Matchers are narrow:
the exact tool names the policy governs, so other tools never start a hook process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from typing import Any

import click

from governor import compiled
from governor.state import state_dir, write_atomic

ENTRY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "entry.py")
TIMEOUT_SECONDS = 10
# What marks a hook entry as ours, whichever install (path, venv) wrote it.
OURS = re.compile(
    r"governor[/\\]entry\.py\"?\s+claude-code|memory-governor\"?\s+hook\s+claude-code|sdd-memory-budget\.sh"
)
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
SESSION_EVENTS = ("UserPromptSubmit", "SessionStart", "PreCompact", "SubagentStart", "SubagentStop", "Stop")


def settings_path(scope: str, project: str) -> str:
    if scope == "user":
        return os.path.join(os.path.expanduser("~"), ".claude", "settings.json")
    name = "settings.local.json" if scope == "local" else "settings.json"
    return os.path.join(project, ".claude", name)


def hook_command() -> str:
    """An absolute command: this interpreter, without site (faster start), the entry file."""
    return f'"{sys.executable}" -S "{ENTRY}" claude-code'


def governed_tools(policy: dict[str, Any]) -> list[str]:
    names = []
    for mapping in policy["tools"]:
        for server in mapping["servers"]:
            for tool in mapping["map"]:
                name = f"mcp__{server}__{tool}"
                if name not in names:
                    names.append(name)
    return names


def our_hooks(policy: dict[str, Any], command: str) -> dict[str, list[dict[str, Any]]]:
    entry = {"type": "command", "command": command, "timeout": TIMEOUT_SECONDS}
    tools = governed_tools(policy)
    pre_matcher = "|".join(tools + [t for t in policy["briefing"]["dispatch_tools"] if t not in tools])
    out: dict[str, list[dict[str, Any]]] = {
        "PreToolUse": [{"matcher": pre_matcher, "hooks": [entry]}],
        "PostToolUse": [{"matcher": "|".join(tools), "hooks": [entry]}],
        "PostToolUseFailure": [{"matcher": "|".join(tools), "hooks": [entry]}],
    }
    for event in SESSION_EVENTS:
        out[event] = [{"hooks": [entry]}]
    return out


def _is_ours(hook: Any) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and bool(OURS.search(hook["command"]))


def without_ours(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings with every hook of ours removed, and groups or events left empty dropped."""
    out = dict(settings)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return out
    kept_events: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept_events[event] = groups
            continue
        kept_groups = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                remaining = [h for h in group["hooks"] if not _is_ours(h)]
                if remaining:
                    kept_groups.append({**group, "hooks": remaining})
                elif not group["hooks"]:
                    kept_groups.append(group)
            else:
                kept_groups.append(group)
        if kept_groups:
            kept_events[event] = kept_groups
    if kept_events:
        out["hooks"] = kept_events
    else:
        out.pop("hooks", None)
    return out


def with_ours(settings: dict[str, Any], ours: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out = without_ours(settings)
    hooks = dict(out.get("hooks") or {})
    for event, groups in ours.items():
        hooks[event] = [*hooks.get(event, []), *groups]
    out["hooks"] = hooks
    return out


class SettingsError(click.ClickException):
    pass


def read_settings(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise SettingsError(f"{path}: cannot read it ({err.strerror})") from err
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise SettingsError(
            f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg}); fix it by hand, nothing was changed"
        ) from err
    if not isinstance(data, dict):
        raise SettingsError(f"{path}:1:1: settings must be a JSON object; nothing was changed")
    return data


def write_settings(path: str, before: dict[str, Any], after: dict[str, Any], existed: bool) -> str | None:
    """Write atomically, backing up the file it replaces; the backup's path."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    backup = None
    if existed:
        backup = f"{path}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
        shutil.copy2(path, backup)
    write_atomic(path, (json.dumps(after, indent=2) + "\n").encode())
    return backup


def _project(project: str | None) -> str:
    return os.path.abspath(project or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


@click.command("install")
@click.argument("harness", type=click.Choice(["claude-code"]))
@click.option("--scope", type=click.Choice(["project", "user", "local"]), default="project", show_default=True,
              help="project: .claude/settings.json (committed); local: .claude/settings.local.json; user: ~/.claude.")  # fmt: skip
@click.option("--project", type=click.Path(file_okay=False), help="The project directory (default: here).")
@click.option("--dry-run", is_flag=True, help="Show the settings that would be written; change nothing.")
def install(harness: str, scope: str, project: str | None, dry_run: bool) -> int:
    """Install the hooks into Claude Code's settings."""
    root = _project(project)
    path = settings_path(scope, root)
    before = read_settings(path)
    policy, notices = compiled.load(os.environ, root, state_dir(os.environ))
    for notice in notices:
        click.echo(notice, err=True)
    after = with_ours(before, our_hooks(policy.data, hook_command()))
    tools = len(governed_tools(policy.data))
    return _apply(path, before, after, dry_run, "already installed",
                  f"installed hooks for {tools} memory tools and {len(SESSION_EVENTS)} session events")  # fmt: skip


def _apply(path: str, before: dict[str, Any], after: dict[str, Any], dry_run: bool, same: str, done: str) -> int:
    """Show, or write (atomically, with a backup of what it replaces), the new settings."""
    if after == before:
        click.echo(f"{path}: {same}, nothing changed")
        return 0
    if dry_run:
        click.echo(f"{path} would become:")
        click.echo(json.dumps(after, indent=2))
        return 0
    backup = write_settings(path, before, after, os.path.exists(path))
    click.echo(f"{path}: {done}")
    if backup:
        click.echo(f"previous settings saved as {backup}")
    return 0


@click.command("uninstall")
@click.argument("harness", type=click.Choice(["claude-code"]))
@click.option("--scope", type=click.Choice(["project", "user", "local"]), default="project", show_default=True)
@click.option("--project", type=click.Path(file_okay=False), help="The project directory (default: here).")
@click.option("--dry-run", is_flag=True, help="Show the settings that would be written; change nothing.")
def uninstall(harness: str, scope: str, project: str | None, dry_run: bool) -> int:
    """Remove memory-governor's hooks from Claude Code's settings, keeping all others."""
    path = settings_path(scope, _project(project))
    before = read_settings(path)
    return _apply(path, before, without_ours(before), dry_run, "not installed", "hooks removed")
