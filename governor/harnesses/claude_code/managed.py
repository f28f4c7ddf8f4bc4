"""`install claude-code --scope managed`: the hooks where the user's files cannot switch them off.

Claude Code reads managed settings from /etc/claude-code/managed-settings.json (Linux; Seen in
2.1.197 and 2.1.332): hooks there run whatever the user, project or local settings say
(`disableAllHooks` outside that file leaves them running) and whatever `--setting-sources`
says. With `allowManagedHooksOnly: true` there, no other file's hooks run at all.

The layout (every path root-owned, no level group- or world-writable):

  /etc/claude-code/managed-settings.json   the hooks (merged: other keys and hooks kept),
                                           allowManagedHooksOnly: true, and `env` pinning the
                                           variables that run code in or around a hook (PINNED_ENV)
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
from governor.harnesses.settings import SettingsError, read_json
from governor.policy import managed as policy_managed

ONLY_MANAGED = "allowManagedHooksOnly"
# Set in a user's own settings.json `env` (which the model can write), each of these runs a program
# of the user's in or around every hook, managed ones included, from the next session: the dynamic
# loader's (a shared object in the hook's /bin/sh and interpreter) and Claude Code's prefix for
# every command it runs through a shell, hooks too (Seen in 2.1.197). The managed file's `env` wins
# over the user's, so the install pins each one empty there; a value the administrator set there is
# kept. PYTHON* need no pin: the hook's interpreter runs -I, which reads none of them.
PINNED_ENV = ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "CLAUDE_CODE_SHELL_PREFIX")

ROOT = "/"

GUARANTEES = (
    "managed: the hooks run whatever user, project or local settings say (disableAllHooks, emptied "
    "hooks, an env entry, --setting-sources), only managed hooks run, no user env entry puts a program "
    "in or around them (" + ", ".join(PINNED_ENV) + " pinned), and the policy in force is "
    "{policy} whatever the project's or the user's files say (nothing to accept); " + shared.LEDGER + ". Project, "
    "local and user installs: every protection holds only against the spellings the routes read, "
    "because the model can write the user's files"
)


class Layout(shared.Layout):
    harness = "claude-code"
    settings = ("etc", "claude-code", "managed-settings.json")
    record = "install.json"
    only_managed = ONLY_MANAGED
    others = "project and user"
    installed = "managed hooks installed (allowManagedHooksOnly: only managed hooks run)"
    guarantees = GUARANTEES

    def pinned(self, path: str, after: dict[str, Any], record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        env = after.get("env")
        if env is not None and not isinstance(env, dict):
            raise SettingsError(f"{path}: env is not an object; fix it by hand, nothing was changed")
        env = env or {}
        added = [name for name in PINNED_ENV if name not in env]
        kept = [name for name in record.get("set_env") or [] if name in PINNED_ENV]
        return {"set_env": sorted({*kept, *added})}, {"env": {**env, **dict.fromkeys(added, "")}}

    def unpinned(self, after: dict[str, Any], record: dict[str, Any]) -> None:
        env = after.get("env")
        if not isinstance(env, dict):
            return
        for name in record.get("set_env") or []:
            if env.get(name) == "":
                del env[name]
        if not env:
            del after["env"]

    def pin_checks(self, label: str, path: str, settings: dict[str, Any], fix: str) -> list[Any]:
        from governor.harnesses.checks import BAD, Check

        env = settings.get("env")
        unpinned = [name for name in PINNED_ENV if not isinstance(env, dict) or name not in env]
        if not unpinned:
            return []
        return [Check(BAD, label, f"{path}: env does not pin {', '.join(unpinned)}, so a user's settings.json can "
                      "put a program in or around every managed hook", fix)]  # fmt: skip


LAYOUT = Layout()
paths = LAYOUT.paths
read_record = LAYOUT.read_record
doctor = LAYOUT.doctor


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
