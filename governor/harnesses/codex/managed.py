"""`install codex --scope managed`: the hooks where the user's files cannot switch them off.

Codex reads admin-enforced requirements from /etc/codex/requirements.toml (Unix; no variable
moves it, CODEX_HOME included). Seen in 0.171.0: hooks in its `[hooks]` tables run as
"managed" without a trust entry; `allow_managed_hooks_only = true` there ignores every user,
project and session hook; and `[features] hooks = true` there keeps them on when the user's
config.toml, the project's .codex/config.toml or `-c features.hooks=false` turns hooks off
(without it each of those switches the managed hooks off too). A `[hooks.state."<key>"]
enabled = false` entry in the user's config.toml leaves a managed hook running.

The layout (every path root-owned, no level group- or world-writable), with the policy files
of governor.harnesses.managed:

  /etc/codex/requirements.toml             the hooks (merged: other keys and hooks kept),
                                           allow_managed_hooks_only = true, [features] hooks = true
  /etc/memory-governor/install-codex.json  what this install created or set, for the uninstall

Cold path.
"""

from __future__ import annotations

import os
from typing import Any

from governor.harnesses import managed as shared
from governor.harnesses.settings import Change, SettingsError, read_toml, with_hooks, without_hooks

SETTINGS = ("etc", "codex", "requirements.toml")
RECORD = "install-codex.json"
ONLY_MANAGED = "allow_managed_hooks_only"
environment_paths = shared.environment_paths
compile_for_install = shared.compile_for_install
table_path = shared.table_path
write_table = shared.write_table


def paths(root: str = "/") -> dict[str, str]:
    return {"settings": os.path.join(root, *SETTINGS), **shared.config_paths(root, RECORD)}


def hook_command(config: str) -> str:
    return shared.hook_command("codex", config)


def read_record(root: str) -> dict[str, Any]:
    return shared.read_record(paths(root)["record"])


def read_requirements(path: str) -> dict[str, Any]:
    """requirements.toml as plain data ({} when absent); refuses a file that is not TOML."""
    return dict(read_toml(path).unwrap())


def toml_text(data: dict[str, Any]) -> str:
    import tomlkit

    return str(tomlkit.dumps(data))


def created_folders(root: str) -> list[str]:
    return [os.path.dirname(paths(root)["settings"]), paths(root)["config"]]


def will_create(root: str, unit: str | None = None) -> list[str]:
    """What an install here creates, with what an earlier one did; `unit`: the policy's token
    unit, whose table it writes."""
    where = paths(root)
    return shared.will_create(where, created_folders(root), [where[k] for k in ("settings", "policy", "compiled",
                                                                                "environment", "record")], unit)  # fmt: skip


def remove_tables(root: str, record: dict[str, Any]) -> list[str]:
    return shared.remove_tables(paths(root), record)


def policy_text(root: str, given: str | None) -> str:
    return shared.policy_text(paths(root), given)


def plan_policy(root: str, text: str) -> Change:
    return shared.plan_policy(paths(root), text)


def plan_environment(root: str, ledger_url: str | None) -> Change:
    return shared.plan_environment(paths(root), ledger_url)


def make_folders(root: str) -> None:
    shared.make_folders(created_folders(root))


def remove_folders(root: str, record: dict[str, Any]) -> list[str]:
    return shared.remove_folders(created_folders(root), record)


def plan_install(root: str, text: str, compiled: dict[str, Any], created: list[str], our_hooks: Any,
                 is_ours: Any) -> list[Change]:  # fmt: skip
    """The compiled policy, the hooks in requirements.toml with hooks pinned on and only managed
    hooks allowed, and the install record. `our_hooks`, `is_ours`: governor.harnesses.codex.setup's."""
    where = paths(root)
    record = read_record(root)
    before = read_requirements(where["settings"])
    after = with_hooks(before, our_hooks(compiled["policy"], hook_command(where["config"])), is_ours)
    features = after.get("features")
    if features is not None and not isinstance(features, dict):
        raise SettingsError(f"{where['settings']}: features is not a table; fix it by hand, nothing was changed")
    set_only = bool(record.get("set_only_managed")) or ONLY_MANAGED not in before
    set_feature = bool(record.get("set_hooks_feature")) or "hooks" not in (features or {})
    after[ONLY_MANAGED] = True
    after["features"] = {**(features or {}), "hooks": True}
    new_record = {"created": created, "set_only_managed": set_only, "set_hooks_feature": set_feature,
                  "command": hook_command(where["config"]), "policy_sha256": shared.digest(text)}  # fmt: skip
    from governor.harnesses.settings import json_text

    return [
        shared.plan_compiled(where, compiled),
        Change(where["settings"], before, after, "managed hooks installed (allow_managed_hooks_only, [features] "
               "hooks = true)", "managed hooks already installed", toml_text),
        Change(where["record"], record or None, new_record, "install record written", "install record as it is",
               json_text, backup=False),
    ]  # fmt: skip


def plan_uninstall(root: str, is_ours: Any) -> list[Change]:
    """Exactly what the install added: its hooks, the two switches if it set them, and the files it
    created (the policy only while it is as the install left it, and no other install uses it)."""
    where = paths(root)
    record = read_record(root)
    before = read_requirements(where["settings"])
    after: Any = without_hooks(before, is_ours)
    if after.get("hooks") == {}:
        del after["hooks"]
    if record.get("set_only_managed"):
        after.pop(ONLY_MANAGED, None)
    if record.get("set_hooks_feature") and isinstance(after.get("features"), dict):
        after["features"] = {k: v for k, v in after["features"].items() if k != "hooks"}
        if not after["features"]:
            del after["features"]
    if not after and where["settings"] in set(record.get("created") or []):
        after = None
    changes = [Change(where["settings"], before, after, "managed hooks removed", "no managed hooks", toml_text)]
    return changes + shared.plan_removals(where, record)


GUARANTEES = (
    "managed: the hooks run whatever the user's or the project's config.toml, hooks.json, "
    "[hooks.state] entries, [features] hooks = false, -c overrides or CODEX_HOME say, only managed "
    "hooks run, and the policy in force is {policy} whatever the project's or the user's files say "
    "(nothing to accept); " + shared.LEDGER + ". Project and user installs: every protection holds "
    "only against the spellings the routes read, because the model can write the user's files"
)


def doctor(root: str, is_ours: Any) -> list[Any]:
    """The managed install, when there is one: every file it runs or reads root-owned and not
    writable by anyone else, readable by every user, the two switches on, and which guarantees hold."""
    from governor.harnesses.checks import BAD, INFO, OK, Check
    from governor.harnesses.settings import hook_groups

    where = paths(root)
    if not os.path.exists(where["settings"]):
        return []
    try:
        settings = read_requirements(where["settings"])
    except SettingsError as err:
        return [Check(BAD, "codex (managed)", str(err), "fix the file by hand")]
    hooks = [hook for groups in hook_groups(settings, is_ours).values() for _, hook in groups]
    if not hooks:
        return []
    files = [where["settings"], *shared.read_files(where), *shared.ran_files(hooks[0]["command"])]
    fix = "sudo memory-governor install codex --scope managed (from a root-owned environment)"
    checks = shared.ownership_checks("codex (managed)", files, fix)
    if settings.get(ONLY_MANAGED) is not True:
        checks.append(Check(BAD, "codex (managed)", f"{where['settings']}: {ONLY_MANAGED} is not true, so user and "
                            "project hooks run beside the managed ones", fix))  # fmt: skip
    features = settings.get("features")
    if not (isinstance(features, dict) and features.get("hooks") is True):
        checks.append(Check(BAD, "codex (managed)", f"{where['settings']}: [features] hooks is not pinned to true, "
                            "so a user's or project's config.toml turns the managed hooks off", fix))  # fmt: skip
    checks += shared.table_checks("codex (managed)", where, fix)
    if not any(c.status == BAD for c in checks):
        checks.append(Check(OK, "codex (managed)", f"{where['settings']}: {len(hooks)} managed hooks; it, the policy, "
                            "the interpreter and the entry file are root-owned and written by root alone"))  # fmt: skip
    checks.append(Check(INFO, "guarantees", GUARANTEES.format(policy=where["policy"])))
    return checks
