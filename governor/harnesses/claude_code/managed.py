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
  /etc/memory-governor/environment.json    what every managed hook gets from the administrator
                                           (--ledger-url: the ledger's Redis), never from the user
  /etc/memory-governor/install.json        what this install created or set, for the uninstall
  /etc/memory-governor/<unit>-<env>.bpe    the tokenizer table a managed hook counts with
                                           (governor.engine.bpe); it reads no table from the
                                           user's state directory, and without this one it
                                           counts with tiktoken (slower, as exact)
  the governor's own environment           e.g. /opt/memory-governor (a venv made by root): the
                                           hook command runs its interpreter `-I -S` on its entry
                                           file with `--managed /etc/memory-governor`

`root` (tests) puts the two /etc folders under another prefix; the command names them there.
ROOT is where the review tools (`policy explain`, `check`, `accept`, `doctor`, `report`) look
for the install: `/`, or the prefix the CLI's `--managed-root` names (a staging tree, a test).
No hook reads it: a managed hook is told its folder by its command line alone.
Files are written 0644 and folders made 0755 whatever the umask (every user's hook reads
them); a file replaced keeps its mode and is backed up (governor.harnesses.settings).

Cold path.
"""

from __future__ import annotations

import os
from typing import Any

from governor.harnesses import managed as shared
from governor.harnesses.settings import Change, json_text, read_json, with_hooks, without_hooks
from governor.policy import managed as policy_managed

SETTINGS = ("etc", "claude-code", "managed-settings.json")
RECORD = "install.json"
ONLY_MANAGED = "allowManagedHooksOnly"
EMPTY_POLICY = shared.EMPTY_POLICY
environment_paths = shared.environment_paths
compile_for_install = shared.compile_for_install
table_path = shared.table_path
write_table = shared.write_table


ROOT = "/"


def paths(root: str = "/") -> dict[str, str]:
    return {"settings": os.path.join(root, *SETTINGS), **shared.config_paths(root, RECORD)}


def hook_command(config: str) -> str:
    return shared.hook_command("claude-code", config)


def in_force(root: str, is_ours: Any) -> str | None:
    """The folder whose policy Claude Code's managed hooks on this machine enforce (the one their
    command names after --managed), or None when the managed settings hold none of ours.
    `is_ours`: the setup module's. A managed settings file that cannot be read: Claude Code
    reads none of its hooks either, so None (doctor names the file)."""
    import shlex

    try:
        settings = read_json(paths(root)["settings"])
    except ValueError:
        return None
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    for groups in (hooks or {}).values() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            for hook in (group.get("hooks") or []) if isinstance(group, dict) else ():
                if not is_ours(hook):
                    continue
                try:
                    words = shlex.split(hook["command"])
                except ValueError:
                    continue
                if policy_managed.FLAG in words[:-1]:
                    return os.path.abspath(words[words.index(policy_managed.FLAG) + 1])
    return None


def read_record(root: str) -> dict[str, Any]:
    return shared.read_record(paths(root)["record"])


def will_create(root: str, unit: str | None = None) -> list[str]:
    """What an install here creates (before it writes anything), with what an earlier one did;
    `unit`: the policy's token unit, whose table it writes."""
    where = paths(root)
    return shared.will_create(where, created_folders(root), [where[k] for k in ("settings", "policy", "compiled",
                                                                                "environment", "record")], unit)  # fmt: skip


def remove_tables(root: str, record: dict[str, Any]) -> list[str]:
    return shared.remove_tables(paths(root), record)


def policy_text(root: str, given: str | None) -> str:
    """The policy the install puts in force: the one given, else the one there, else an empty one."""
    return shared.policy_text(paths(root), given)


def plan_policy(root: str, text: str) -> Change:
    return shared.plan_policy(paths(root), text)


def plan_environment(root: str, ledger_url: str | None) -> Change:
    return shared.plan_environment(paths(root), ledger_url)


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
                  "policy_sha256": shared.digest(text)}  # fmt: skip
    return [
        shared.plan_compiled(where, compiled),
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
    return changes + shared.plan_removals(where, record)


def created_folders(root: str) -> list[str]:
    return [os.path.dirname(paths(root)["settings"]), paths(root)["config"]]


def make_folders(root: str) -> None:
    """The two /etc folders, 0755 whatever the umask."""
    shared.make_folders(created_folders(root))


def remove_folders(root: str, record: dict[str, Any]) -> list[str]:
    """The folders the install made, when nothing else is in them now."""
    return shared.remove_folders(created_folders(root), record)


GUARANTEES = (
    "managed: the hooks run whatever user, project or local settings say (disableAllHooks, emptied "
    "hooks, an env entry, --setting-sources), only managed hooks run, and the policy in force is "
    "{policy} whatever the project's or the user's files say (nothing to accept); " + shared.LEDGER + ". Project, "
    "local and user installs: every protection holds only against the spellings the routes read, "
    "because the model can write the user's files"
)


def doctor(root: str, is_ours: Any) -> list[Any]:
    """The managed install, when there is one: every file it runs or reads root-owned and not
    writable by anyone else, readable by every user, and which guarantees hold. `is_ours`: what
    marks a hook entry as the governor's (the setup module's; it calls this)."""
    from governor.harnesses.checks import BAD, INFO, OK, Check

    where = paths(root)
    try:
        settings = read_json(where["settings"])
    except ValueError as err:
        return [Check(BAD, "claude-code (managed)", str(err), "fix the file by hand")]
    hooks = [h for groups in (settings.get("hooks") or {}).values() if isinstance(groups, list)
             for g in groups if isinstance(g, dict) for h in g.get("hooks") or [] if is_ours(h)]  # fmt: skip
    if not hooks:
        return []
    files = [where["settings"], *shared.read_files(where), *shared.ran_files(hooks[0]["command"])]
    fix = "sudo memory-governor install claude-code --scope managed (from a root-owned environment)"
    checks = shared.ownership_checks("claude-code (managed)", files, fix)
    if settings.get(ONLY_MANAGED) is not True:
        checks.append(Check(BAD, "claude-code (managed)", f"{where['settings']}: {ONLY_MANAGED} is not true, so "
                            "project and user hooks run beside the managed ones", fix))  # fmt: skip
    checks += shared.table_checks("claude-code (managed)", where, fix)
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
