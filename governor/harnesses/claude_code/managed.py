"""`install claude-code --scope managed`: the hooks where the user's files cannot switch them off.

Claude Code reads managed settings from /etc/claude-code/managed-settings.json (Linux; Seen in
2.1.197 and 2.1.332): hooks there run whatever the user, project or local settings say
(`disableAllHooks` outside that file leaves them running) and whatever `--setting-sources`
says. With `allowManagedHooksOnly: true` there, no other file's hooks run at all.

The layout (every path root-owned, no level group- or world-writable):

  /etc/claude-code/managed-settings.json   the hooks (merged: other keys and hooks kept), and
                                           allowManagedHooksOnly: true
  /etc/memory-governor/policy.yaml         the administrator's policy, over the shipped default
  /etc/memory-governor/policy.json         it compiled, with the signature a hook compares
  /etc/memory-governor/install.json        what this install created or set, for the uninstall
  /etc/memory-governor/<unit>-<env>.bpe    the tokenizer table a managed hook counts with
                                           (governor.engine.bpe); it reads no table from the
                                           user's state directory, and without this one it
                                           counts with tiktoken (slower, as exact)
  the governor's own environment           e.g. /opt/memory-governor (a venv made by root): the
                                           hook command runs its interpreter `-I -S` on its entry
                                           file with `--managed /etc/memory-governor`

`root` (tests) puts the two /etc folders under another prefix; the command names them there.
Files are written 0644 and folders made 0755 whatever the umask (every user's hook reads
them); a file replaced keeps its mode and is backed up (governor.harnesses.settings).

Cold path.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from governor.harnesses.settings import Change, json_text, read_json, read_text, with_hooks, without_hooks
from governor.policy import managed as policy_managed

SETTINGS = ("etc", "claude-code", "managed-settings.json")
CONFIG = ("etc", "memory-governor")
RECORD = "install.json"
ONLY_MANAGED = "allowManagedHooksOnly"
EMPTY_POLICY = (
    "# memory-governor: the managed policy, layered over the shipped default.\n"
    "# Every user's hooks enforce it; no project or user file changes it.\n"
    "# Edit it (as root), then run `memory-governor install claude-code --scope managed` again.\n"
    "version: 1\n"
)


def paths(root: str = "/") -> dict[str, str]:
    config = os.path.join(root, *CONFIG)
    return {
        "settings": os.path.join(root, *SETTINGS),
        "config": config,
        "policy": policy_managed.policy_path(config),
        "compiled": policy_managed.compiled_path(config),
        "record": os.path.join(config, RECORD),
    }


def hook_command(config: str) -> str:
    from governor.harnesses import hook_command as command

    return f'{command("claude-code")} {policy_managed.FLAG} "{config}"'


def environment_paths() -> list[str]:
    """What a managed hook runs: the interpreter (and its standard library), the governor's
    package, and the site-packages it loads third-party packages from (their .pth files run)."""
    import site

    import governor

    package = os.path.dirname(os.path.abspath(governor.__file__))
    out = [sys.executable, os.path.dirname(os.__file__), package]
    for folder, _, files in os.walk(package):
        out += [folder, *(os.path.join(folder, f) for f in files)]
    out += [p for p in site.getsitepackages() if os.path.isdir(p)]
    return out


def read_record(root: str) -> dict[str, Any]:
    try:
        data = read_json(paths(root)["record"], "the install record")
    except ValueError:
        return {}
    return data


def compile_for_install(config_dir: str) -> tuple[dict[str, Any] | None, list[str]]:
    """What the install writes to CONFIG_DIR/policy.json: the managed policy compiled, with the
    signature a hook compares with the files."""
    from governor.policy.compiled import CACHE_FORMAT
    from governor.policy.files import compile_sources

    found = policy_managed.sources({}, config_dir, config_dir)
    blob, problems = compile_sources(found)
    if blob is not None:
        blob["format"], blob["signature"] = CACHE_FORMAT, found.signature()
    return blob, problems


def table_path(config: str, unit: str) -> str:
    """The tokenizer table a managed hook counts `unit` with (governor.engine.tokens.load_quickly)."""
    from governor.engine import bpe

    return os.path.join(config, bpe.file_name(unit))


def write_table(config: str, unit: str) -> str | None:
    """The table for `unit` built into `config`, readable by every user; its path, or None when
    `unit` needs none or it cannot be built here (the hooks then count with tiktoken)."""
    from governor.engine import tokens

    if unit not in tokens.TIKTOKEN_UNITS or not tokens.prepare_quickly(unit, config):
        return None
    path = table_path(config, unit)
    os.chmod(path, 0o644)  # built 0600, as a state file is: every user's hook reads this one
    return path


def remove_tables(root: str, record: dict[str, Any]) -> list[str]:
    """The tables the install wrote (they are rebuilt from the package at every install)."""
    removed = []
    for path in record.get("created") or []:
        if path.endswith(".bpe") and os.path.dirname(path) == paths(root)["config"]:
            try:
                os.unlink(path)
                removed.append(path)
            except FileNotFoundError:
                pass
    return removed


def will_create(root: str, unit: str | None = None) -> list[str]:
    """What an install here creates (before it writes anything), with what an earlier one did;
    `unit`: the policy's token unit, whose table it writes."""
    created = list(read_record(root).get("created") or [])
    where = paths(root)
    tables = [table_path(where["config"], unit)] if unit else []
    for path in [*created_folders(root), *(where[k] for k in ("settings", "policy", "compiled", "record")), *tables]:
        if not os.path.exists(path) and path not in created:
            created.append(path)
    return created


def policy_text(root: str, given: str | None) -> str:
    """The policy the install puts in force: the one given, else the one there, else an empty one."""
    if given is not None:
        return given
    there = read_text(paths(root)["policy"])
    return there if there is not None else EMPTY_POLICY


def plan_policy(root: str, text: str) -> Change:
    path = paths(root)["policy"]
    return Change(path, read_text(path), text, "the managed policy", "the managed policy is as given", lambda t: t)


def plan_install(root: str, text: str, compiled: dict[str, Any], created: list[str], our_hooks: Any,
                 is_ours: Any) -> list[Change]:  # fmt: skip
    """The compiled policy, the hooks in the managed settings, and the install record.
    `our_hooks`, `is_ours`: the setup module's (governor.harnesses.claude_code.setup)."""
    where = paths(root)
    record = read_record(root)
    before = read_json(where["settings"])
    after = with_hooks(before, our_hooks(compiled["policy"], hook_command(where["config"])), is_ours)
    set_only = bool(record.get("set_only_managed")) or ONLY_MANAGED not in before
    after[ONLY_MANAGED] = True
    new_record = {"created": created, "set_only_managed": set_only, "command": hook_command(where["config"]),
                  "policy_sha256": _digest(text)}  # fmt: skip
    return [
        Change(where["compiled"], read_json(where["compiled"]), compiled, "the managed policy compiled",
               "compiled as it is", lambda data: json.dumps(data) + "\n", backup=False),
        Change(where["settings"], before, after, "managed hooks installed (allowManagedHooksOnly: only managed "
               "hooks run)", "managed hooks already installed", json_text),
        Change(where["record"], record or None, new_record, "install record written", "install record as it is",
               json_text, backup=False),
    ]  # fmt: skip


def plan_uninstall(root: str, is_ours: Any) -> list[Change]:
    """Exactly what the install added: its hooks, allowManagedHooksOnly if it set it, and the
    files it created (the policy only while it is as the install left it)."""
    where = paths(root)
    record = read_record(root)
    created = set(record.get("created") or [])
    before = read_json(where["settings"])
    after: Any = without_hooks(before, is_ours)
    if record.get("set_only_managed"):
        after.pop(ONLY_MANAGED, None)
    if not after and where["settings"] in created:
        after = None
    changes = [Change(where["settings"], before, after, "managed hooks removed", "no managed hooks", json_text)]
    for key in ("compiled", "policy", "record"):
        text = read_text(where[key])
        if where[key] not in created or text is None:
            continue
        if key == "policy" and _digest(text) != record.get("policy_sha256"):
            continue  # changed since the install: the administrator's now, kept
        changes.append(Change(where[key], text, None, "removed", "not there", lambda t: t, backup=False))
    return changes


def _digest(text: str) -> str:
    from hashlib import sha256

    return sha256(text.encode()).hexdigest()


def created_folders(root: str) -> list[str]:
    return [os.path.dirname(paths(root)["settings"]), paths(root)["config"]]


def make_folders(root: str) -> None:
    """The two /etc folders, 0755 whatever the umask."""
    for folder in created_folders(root):
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o755, exist_ok=True)
            os.chmod(folder, 0o755)


def remove_folders(root: str, record: dict[str, Any]) -> list[str]:
    """The folders the install made, when nothing else is in them now."""
    removed = []
    for folder in created_folders(root):
        if folder in (record.get("created") or []):
            try:
                os.rmdir(folder)
                removed.append(folder)
            except OSError:
                pass
    return removed


GUARANTEES = (
    "managed: the hooks run whatever user, project or local settings say (disableAllHooks, emptied "
    "hooks, an env entry, --setting-sources), only managed hooks run, and the policy in force is "
    "{policy} whatever the project's or the user's files say (nothing to accept); tokens are counted "
    "with the install's own table. Not a wall: the ledger is in each user's own state directory and "
    "holds grants as well as counts, so a model that gets a shell command past the routes can delete "
    "it (a turn's counts restart) or write it (arm mem_context without its trigger, mark ids surfaced "
    "so unsurfaced fetches pass); only a root-owned ledger service would make that a wall. Project, "
    "local and user installs: every protection holds only against the spellings the routes read, "
    "because the model can write the user's files"
)


def doctor(root: str, is_ours: Any) -> list[Any]:
    """The managed install, when there is one: every file it runs or reads root-owned and not
    writable by anyone else, readable by every user, and which guarantees hold. `is_ours`: what
    marks a hook entry as the governor's (the setup module's; it calls this)."""
    import shlex

    from governor.harnesses.checks import BAD, INFO, OK, WARN, Check

    where = paths(root)
    try:
        settings = read_json(where["settings"])
    except ValueError as err:
        return [Check(BAD, "claude-code (managed)", str(err), "fix the file by hand")]
    hooks = [h for groups in (settings.get("hooks") or {}).values() if isinstance(groups, list)
             for g in groups if isinstance(g, dict) for h in g.get("hooks") or [] if is_ours(h)]  # fmt: skip
    if not hooks:
        return []
    checks = []
    words = shlex.split(hooks[0]["command"])
    ran = [w for w in words[:1] + [w for w in words if w.endswith("entry.py")]]
    tables = sorted(os.path.join(where["config"], n) for n in _names(where["config"]) if n.endswith(".bpe"))
    files = [where["settings"], where["policy"], where["compiled"], *ran, *tables]
    unsafe = policy_managed.ownership_problems(files)
    unreadable = [p for p in files if os.path.exists(p) and not os.stat(p).st_mode & 0o004]
    fix = "sudo memory-governor install claude-code --scope managed (from a root-owned environment)"
    if unsafe:
        checks.append(Check(BAD, "claude-code (managed)", "someone other than root can change what every hook runs "
                            "or enforces: " + "; ".join(unsafe[:4]), fix))  # fmt: skip
    if unreadable:
        checks.append(Check(BAD, "claude-code (managed)", f"not readable by other users: {', '.join(unreadable)}",
                            "chmod 0644 them"))  # fmt: skip
    if settings.get(ONLY_MANAGED) is not True:
        checks.append(Check(BAD, "claude-code (managed)", f"{where['settings']}: {ONLY_MANAGED} is not true, so "
                            "project and user hooks run beside the managed ones", fix))  # fmt: skip
    unit = _unit(where["compiled"])
    if unit is not None and table_path(where["config"], unit) not in tables:
        checks.append(Check(WARN, "claude-code (managed)", f"no tokenizer table for {unit} in {where['config']}: "
                            "every hook that counts starts tiktoken (~0.25 s)", fix))  # fmt: skip
    if not any(c.status == BAD for c in checks):
        checks.append(
            Check(
                OK,
                "claude-code (managed)",
                f"{where['settings']}: {len(hooks)} managed hooks; it, the "
                "policy, the interpreter and the entry file are root-owned and written by root alone",
            )
        )
    checks.append(Check(INFO, "guarantees", GUARANTEES.format(policy=where["policy"])))
    return checks


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _unit(compiled: str) -> str | None:
    """The token unit of the installed compiled policy, when it is one a table is built for."""
    from governor.engine.tokens import TIKTOKEN_UNITS

    try:
        unit = read_json(compiled)["policy"]["token_counter"]
    except (ValueError, KeyError, TypeError):
        return None
    return unit if unit in TIKTOKEN_UNITS else None
