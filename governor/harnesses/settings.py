"""Installing into a harness's settings files, with one set of promises for every harness.

- Idempotent: a second install computes the same file and changes nothing.
- Atomic: the new file replaces the old in one rename; a reader never sees half of it.
- Backed up: the file it replaces is copied to `<file>.bak-<time>` first, under a name no
  earlier backup has (an install and an uninstall in the same second keep both).
- Modes kept: a file it rewrites keeps its permissions; a new one gets the usual (umask) ones.
- Leaves no trace: a file the install created and the uninstall empties of ours is removed
  (`Change.created`), and so is a folder left empty that the install made.
- Other hooks kept: only entries whose command is ours are added or removed.
- Refuses what it cannot read: a settings file that is not valid JSON is left untouched and
  the error says where (file:line:col).

A harness's setup module describes the change (`Change`: a path, what it holds now, what it
should hold, None for a file that should not be there); `apply` shows or writes it. JSON files with Claude-style hook groups
(`{"hooks": {Event: [{"matcher": M, "hooks": [{"type": "command", "command": C}]}]}}`) are
merged by `with_hooks` / `without_hooks`; other formats bring their own merge.

Cold path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Sequence
from typing import Any

from governor.state import ensure_dir, state_dir, write_atomic


class SettingsError(ValueError):
    """A settings file that cannot be read or written; the message says where and what to do."""


class Change:
    """One settings file: what it holds (`before`) and what it should hold (`after`)."""

    def __init__(self, path: str, before: Any, after: Any, done: str, same: str, render: Callable[[Any], str],
                 mode: int = 0o644, backup: bool = True) -> None:  # fmt: skip
        self.path = path
        self.mode = mode  # a new file's permissions, before the umask
        self.backup = backup  # False: what it replaces is ours alone (a generated file)
        self.before = before
        self.after = after
        self.done = done  # what applying it did, in words
        self.same = same  # why nothing changes, in words
        self.render = render  # the file's text for a value

    @property
    def changes(self) -> bool:
        return bool(self.after != self.before)


def route_tools(policy: dict[str, Any]) -> list[str]:
    """The tools the policy's routes go through (Bash, run_shell_command, ...): a harness's
    before-tool hook must see them too, or a route around the memory tools is open there."""
    return list(dict.fromkeys(t for route in policy.get("routes", []) for t in route["tools"]))


def before_tools(policy: dict[str, Any], tools: list[str], *more: str) -> list[str]:
    """The tools a harness's before-tool hook must see, each once: the governed `tools`, the
    policy's dispatch tools, `more` (the harness's own), and the tools its routes go through."""
    return list(dict.fromkeys([*tools, *policy["briefing"]["dispatch_tools"], *more, *route_tools(policy)]))


def governed_names(policy: dict[str, Any], spell: Callable[[str, str], str]) -> dict[str, tuple[str, str]]:
    """The name a harness gives each tool the policy governs (`spell(server, tool)`) -> (server,
    tool), in the policy's order. Where two pairs get one name, the first the policy lists is the
    one it stands for."""
    names: dict[str, tuple[str, str]] = {}
    for mapping in policy["tools"]:
        for server in mapping["servers"]:
            for tool in mapping["map"]:
                names.setdefault(spell(server, tool), (server, tool))
    return names


def ours(harness: str, *more: str) -> re.Pattern[str]:
    """What marks a hook command as memory-governor's for `harness`, whichever install (path,
    venv, layout) wrote it: the entry file, the `memory-governor hook` command or the project's
    launcher, each followed by the harness's name; `more`: other spellings of older installs."""
    name = re.escape(harness) + r"\b"
    spellings = [rf"governor[/\\](?:runtime[/\\])?entry\.py\"?\s+{name}", rf"memory-governor\"?\s+hook\s+{name}",
                 rf"\.memory-governor[/\\]hook\"?\s+{name}", *more]  # fmt: skip
    return re.compile("|".join(spellings))


def command_is(pattern: re.Pattern[str]) -> Callable[[Any], bool]:
    """Is a hook entry (`{"command": ...}`) one whose command `pattern` finds?"""
    return lambda hook: (
        isinstance(hook, dict) and isinstance(hook.get("command"), str) and bool(pattern.search(hook["command"]))
    )


def any_server_patterns(policy: dict[str, Any], before: str, between: str) -> list[str]:
    """Regexes of the tools the policy governs on any server (a mapping's `any_server`: by their
    own names or its `tool_prefix`), as a harness names an MCP tool: `before`<server>`between`<tool>.
    A hook matcher with them starts the hook for the memory registered under another name too."""
    out = []
    for mapping in policy["tools"]:
        if not mapping.get("any_server"):
            continue
        prefix = mapping.get("tool_prefix")
        names = [re.escape(prefix) + ".*"] if prefix else []
        names += [re.escape(tool) for tool in mapping["map"] if not (prefix and tool.startswith(prefix))]
        if names:
            out.append(f"{re.escape(before)}.+{re.escape(between)}(?:{'|'.join(names)})")
    return out


def exact_matcher(names: list[str], patterns: list[str] | None = None) -> str:
    """An anchored regex of exactly these names, and of `patterns` (regexes of their own)."""
    return "^(?:" + "|".join([*(re.escape(name) for name in names), *(patterns or [])]) + ")$"


def matcher_names(matcher: str) -> set[str]:
    """The names an exact_matcher was made of (a pattern's parts come along as names no tool has)."""
    inner = matcher.removeprefix("^(?:").removesuffix(")$")
    return {re.sub(r"\\(.)", r"\1", name) for name in inner.split("|")}


def json_text(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"


def read_text(path: str) -> str | None:
    """A file the installer rewrites whole (a plugin, a module), None if it does not exist."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise SettingsError(f"{path}: cannot read it ({err.strerror})") from err


def read_json(path: str, what: str = "settings") -> dict[str, Any]:
    """A JSON object from `path` ({} if it does not exist or is empty); refuses anything else."""
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
        raise SettingsError(f"{path}:1:1: {what} must be a JSON object; nothing was changed")
    return data


def apply(change: Change, dry_run: bool, echo: Callable[[str], None]) -> None:
    """Show, or write (atomically, with a backup of what it replaces), one settings file."""
    if not change.changes:
        echo(f"{change.path}: {change.same}, nothing changed")
        return
    if dry_run:
        if change.after is None:
            echo(f"{change.path} would be removed")
            return
        echo(f"{change.path} would become:")
        echo(change.render(change.after).rstrip("\n"))
        return
    folder = os.path.dirname(change.path)
    made = _make_folders(folder)
    backup = None
    try:
        mode = stat.S_IMODE(os.stat(change.path).st_mode)
    except FileNotFoundError:
        mode = change.mode & ~_umask()
    existed = os.path.exists(change.path)
    if existed and change.backup and not _ours_alone(change):
        backup = _backup_name(change.path)
        shutil.copy2(change.path, backup)
    if change.after is None:
        os.unlink(change.path)
        _record(drop=[change.path])
        _remove_empty(folder)
    else:
        write_atomic(change.path, change.render(change.after).encode())
        os.chmod(change.path, mode)
        if made or not existed:
            _record(add=[*made, *([] if existed else [change.path])])
    echo(f"{change.path}: {change.done}")
    if backup:
        echo(f"previous settings saved as {backup}")


def removal(path: str, after: Any, empty: Callable[[Any], bool] = lambda data: not data) -> Any:
    """What a file should hold after an uninstall: None (remove it) when what is left is `empty`
    and the install created it, so a project without the file is left without it."""
    gone = empty(after) and os.path.exists(path) and _created_by_us(path)
    return None if gone else after


def _backup_name(path: str) -> str:
    """`<path>.bak-<time>`, with `-2`, `-3`, ... where a backup of that second exists."""
    stem = f"{path}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    name, n = stem, 1
    while os.path.exists(name):
        n += 1
        name = f"{stem}-{n}"
    return name


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Files and folders an install created, kept in the state directory (nothing beside them in the
# project), so the uninstall on this machine can leave the project as it found it.
_CREATED = "installed-files.json"


def _created() -> dict[str, str]:
    try:
        with open(os.path.join(state_dir(os.environ), _CREATED), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _record(add: Sequence[str] = (), drop: Sequence[str] = ()) -> None:
    data = _created()
    data.update({os.path.abspath(p): "created" for p in add})
    for p in drop:
        data.pop(os.path.abspath(p), None)
    try:
        ensure_dir(state_dir(os.environ))
        write_atomic(os.path.join(state_dir(os.environ), _CREATED), json.dumps(data, indent=1).encode())
    except OSError:
        pass  # no state directory here: the install stands; its uninstall then keeps what it made


def _created_by_us(path: str) -> bool:
    return os.path.abspath(path) in _created()


def _ours_alone(change: Change) -> bool:
    """A file the install created is not backed up when its uninstall removes it."""
    return change.after is None and _created_by_us(change.path)


def _make_folders(folder: str) -> list[str]:
    """Create `folder` and its missing parents; the ones created."""
    made = []
    while folder and not os.path.isdir(folder):
        made.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(made):
        os.makedirs(path, exist_ok=True)
    return made


def _remove_empty(folder: str) -> None:
    """Remove `folder` (and its parents) while empty and made by an install."""
    while folder and _created_by_us(folder):
        try:
            os.rmdir(folder)
        except OSError:
            return
        _record(drop=[folder])
        folder = os.path.dirname(folder)


# -- Claude-style hook groups ---------------------------------------------------------------


def read_toml(path: str) -> Any:
    """A TOML file as a tomlkit document (an empty one when absent); refuses a file that is not TOML."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return tomlkit.document()
    except OSError as err:
        raise SettingsError(f"{path}: cannot read it ({err.strerror})") from err
    try:
        return tomlkit.parse(text)
    except ParseError as err:
        raise SettingsError(f"{path}:{err.line}:{err.col}: not valid TOML ({err}); fix it by hand, nothing was "
                            "changed") from err  # fmt: skip


def without_hooks(settings: dict[str, Any], ours: Callable[[Any], bool]) -> dict[str, Any]:
    """The settings with every hook entry `ours` recognises removed, and groups or events left
    empty dropped. Everything else is kept as it was."""
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
                remaining = [h for h in group["hooks"] if not ours(h)]
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


def with_hooks(settings: dict[str, Any], groups: dict[str, list[dict[str, Any]]],
               ours: Callable[[Any], bool]) -> dict[str, Any]:  # fmt: skip
    """The settings with our hook groups in place of any earlier ones of ours."""
    out = without_hooks(settings, ours)
    hooks = dict(out.get("hooks") or {})
    for event, added in groups.items():
        hooks[event] = [*hooks.get(event, []), *added]
    out["hooks"] = hooks
    return out


def hook_groups(settings: Any, ours: Callable[[Any], bool]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Our hook entries in a settings object: event -> [(matcher, hook entry)]."""
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    for event, groups in (hooks or {}).items() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else []:
            hooks_of = group.get("hooks") if isinstance(group, dict) else None
            for hook in hooks_of if isinstance(hooks_of, list) else []:
                if ours(hook):
                    found.setdefault(event, []).append((str(group.get("matcher", "")), hook))
    return found
