"""What every harness's managed install shares (`install <harness> --scope managed`).

A harness with a settings layer no user file can switch off (Claude Code's managed settings,
Codex's /etc/codex/requirements.toml) has a `managed` module beside its setup that says where
that layer is and how our hooks go in it; this module is the rest, written once:

  /etc/memory-governor/policy.yaml         the administrator's policy, over the shipped default
                                           (one for the machine, whichever harnesses enforce it)
  /etc/memory-governor/policy.json         it compiled, with the signature a hook compares
  /etc/memory-governor/<record>            what one harness's install created or set, for its
                                           uninstall (install.json: Claude Code's)
  /etc/memory-governor/<unit>-<env>.bpe    the tokenizer table every managed hook counts with
                                           (governor.engine.bpe), whatever the harness; it reads
                                           no table from the user's state directory, and without
                                           this one it counts with tiktoken (slower, as exact)
  the governor's own environment           e.g. /opt/memory-governor (a venv made by root): the
                                           hook command runs its interpreter `-I -S` on its entry
                                           file with `--managed /etc/memory-governor`

The policy, its compiled form and the table are removed by the last harness's uninstall only. Files are
written 0644 and folders made 0755 whatever the umask (every user's hook reads them).

Cold path.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Any

from governor.harnesses.settings import Change, json_text, read_json, read_text
from governor.policy import managed as policy_managed

CONFIG = ("etc", "memory-governor")
RECORDS = "install*.json"  # every harness's install record in CONFIG
EMPTY_POLICY = (
    "# memory-governor: the managed policy, layered over the shipped default.\n"
    "# Every user's hooks enforce it; no project or user file changes it.\n"
    "# Edit it (as root), then run `memory-governor install <harness> --scope managed` again.\n"
    "version: 1\n"
)

LEDGER = (  # what every managed install's guarantees say of the ledger (each harness's GUARANTEES)
    "tokens are counted with the install's own table. Behind the wall (the default) the ledger is "
    "the decision service's, which no user can reach. Without it (--no-service, the seatbelt) the "
    "ledger is in each user's own state directory and holds grants as well as counts, so a model "
    "that gets a shell command past the routes can delete it (a turn's counts restart) or write it "
    "(arm mem_context without its trigger, mark ids surfaced so unsurfaced fetches pass)"
)


def config_paths(root: str, record: str) -> dict[str, str]:
    config = os.path.join(root, *CONFIG)
    return {
        "config": config,
        "policy": policy_managed.policy_path(config),
        "compiled": policy_managed.compiled_path(config),
        "environment": policy_managed.environment_path(config),
        "record": os.path.join(config, record),
    }


def hook_command(harness: str, config: str) -> str:
    from governor.harnesses import hook_command as command

    return f'{command(harness)} {policy_managed.FLAG} "{config}"'


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


def read_record(path: str) -> dict[str, Any]:
    try:
        return read_json(path, "the install record")
    except ValueError:
        return {}


def others_installed(where: dict[str, str]) -> bool:
    """Does another harness's managed install still use this policy?"""
    return any(p != where["record"] for p in glob.glob(os.path.join(where["config"], RECORDS)))


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


def will_create(where: dict[str, str], folders: list[str], files: list[str], unit: str | None = None) -> list[str]:
    """What an install creates (before it writes anything), with what an earlier one did;
    `unit`: the policy's token unit, whose table it writes."""
    created = list(read_record(where["record"]).get("created") or [])
    tables = [table_path(where["config"], unit)] if unit else []
    for path in [*folders, *files, *tables]:
        if not os.path.exists(path) and path not in created:
            created.append(path)
    return created


def policy_text(where: dict[str, str], given: str | None) -> str:
    """The policy the install puts in force: the one given, else the one there, else an empty one."""
    if given is not None:
        return given
    there = read_text(where["policy"])
    return there if there is not None else EMPTY_POLICY


def plan_policy(where: dict[str, str], text: str) -> Change:
    path = where["policy"]
    return Change(path, read_text(path), text, "the managed policy", "the managed policy is as given", lambda t: t)


def plan_compiled(where: dict[str, str], compiled: dict[str, Any]) -> Change:
    import json

    return Change(where["compiled"], read_json(where["compiled"]), compiled, "the managed policy compiled",
                  "compiled as it is", lambda data: json.dumps(data) + "\n", backup=False)  # fmt: skip


def plan_environment(where: dict[str, str], ledger_url: str | None) -> Change:
    """What every managed hook gets from the administrator: `ledger_url` given sets the ledger's
    Redis ("" takes it away: each user's SQLite file); None keeps what is there."""
    path = where["environment"]
    before = read_json(path, "the managed hooks' environment") if os.path.exists(path) else None
    after = dict(before or {})
    if ledger_url:
        after[policy_managed.LEDGER_URL] = ledger_url
    elif ledger_url == "":
        after.pop(policy_managed.LEDGER_URL, None)
    url = after.get(policy_managed.LEDGER_URL)
    done = f"the ledger for every user: Redis at {_masked(url)}" if url else "the ledger: each user's own SQLite file"
    return Change(path, before, after or None, done, "the managed hooks' environment as it is", json_text,
                  backup=False)  # fmt: skip


def _masked(url: str) -> str:
    from governor.engine.redis_ledger import masked

    return masked(url)


def plan_removals(where: dict[str, str], record: dict[str, Any]) -> list[Change]:
    """The files the install created: its record; the policy and its compiled form only when no
    other harness's install uses them (the policy only while it is as the install left it)."""
    created = set(record.get("created") or [])
    keys = ("record",) if others_installed(where) else ("compiled", "policy", "environment", "record")
    changes = []
    for key in keys:
        text = read_text(where[key])
        if where[key] not in created or text is None:
            continue
        if key == "policy" and digest(text) != record.get("policy_sha256"):
            continue  # changed since the install: the administrator's now, kept
        changes.append(Change(where[key], text, None, "removed", "not there", lambda t: t, backup=False))
    return changes


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


def remove_tables(where: dict[str, str], record: dict[str, Any]) -> list[str]:
    """The tables the install wrote (they are rebuilt from the package at every install), unless
    another harness's install still counts with them."""
    if others_installed(where):
        return []
    made = record.get("created") or []
    return remove_files([p for p in made if p.endswith(".bpe") and os.path.dirname(p) == where["config"]])


def remove_files(paths: list[str]) -> list[str]:
    """Remove each of `paths` that is there; the ones removed."""
    removed = []
    for path in paths:
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:
            pass
    return removed


def tables(config: str) -> list[str]:
    """The tokenizer tables in `config` (doctor checks their ownership with the rest)."""
    try:
        names = os.listdir(config)
    except OSError:
        return []
    return sorted(os.path.join(config, n) for n in names if n.endswith(".bpe"))


def table_checks(label: str, where: dict[str, str], fix: str) -> list[Any]:
    """A WARN when the installed policy's unit has no table in the config folder; [] otherwise."""
    from governor.engine.tokens import TIKTOKEN_UNITS
    from governor.harnesses.checks import WARN, Check

    try:
        unit = read_json(where["compiled"])["policy"]["token_counter"]
    except (ValueError, KeyError, TypeError):
        return []
    if unit not in TIKTOKEN_UNITS or table_path(where["config"], unit) in tables(where["config"]):
        return []
    return [Check(WARN, label, f"no tokenizer table for {unit} in {where['config']}: every hook that counts "
                  "starts tiktoken (~0.25 s)", fix)]  # fmt: skip


def digest(text: str) -> str:
    from hashlib import sha256

    return sha256(text.encode()).hexdigest()


def make_folders(folders: list[str]) -> None:
    """The install's folders, 0755 whatever the umask."""
    for folder in folders:
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o755, exist_ok=True)
            os.chmod(folder, 0o755)


def remove_folders(folders: list[str], record: dict[str, Any]) -> list[str]:
    """The folders the install made, when nothing else is in them now."""
    removed = []
    for folder in folders:
        if folder in (record.get("created") or []):
            try:
                os.rmdir(folder)
                removed.append(folder)
            except OSError:
                pass
    return removed


def ownership_checks(label: str, files: list[str], fix: str, read: list[str] | None = None) -> list[Any]:
    """BAD checks for every file a managed hook runs or reads that someone other than root can
    change, or that another user cannot read (of `read`, when only those are read by every user);
    [] when there is none."""
    from governor.harnesses.checks import BAD, Check

    checks = []
    unsafe = policy_managed.ownership_problems(files)
    unreadable = [p for p in (files if read is None else read) if os.path.exists(p) and not os.stat(p).st_mode & 0o004]
    if unsafe:
        checks.append(Check(BAD, label, "someone other than root can change what every hook runs or enforces: "
                            + "; ".join(unsafe[:4]), fix))  # fmt: skip
    if unreadable:
        checks.append(Check(BAD, label, f"not readable by other users: {', '.join(unreadable)}", "chmod 0644 them"))
    return checks


def credential_checks(label: str, where: dict[str, str], walled: bool) -> list[Any]:
    """The administrator's environment holds the ledger's Redis URL: under the wall no user may read it
    (BAD when they can); without it every user's hook reads it, so every user can (WARN)."""
    from governor.harnesses.checks import BAD, WARN, Check

    if policy_managed.LEDGER_URL not in policy_managed.settings(where["config"]):
        return []
    readable = bool(os.stat(where["environment"]).st_mode & 0o004)
    if walled and readable:
        return [Check(BAD, label, f"{where['environment']} holds the ledger's Redis URL and every user can read it",
                      f"chmod 0640 {where['environment']} (root, the service's group)")]  # fmt: skip
    if not walled:
        return [Check(WARN, label, f"{where['environment']} holds the ledger's Redis URL: every user's hook reads it, "
                      "so every user (and their model) can use its credentials",
                      "install --scope managed without --no-service (the wall): only the decision service holds them")]  # fmt: skip
    return []


def read_files(where: dict[str, str]) -> list[str]:
    """What every managed hook reads from the config folder: the policy, it compiled, the
    administrator's environment when there is one, and the tokenizer tables."""
    environment = [where["environment"]] if os.path.exists(where["environment"]) else []
    return [where["policy"], where["compiled"], *environment, *tables(where["config"])]


def ran_files(command: str) -> list[str]:
    """The interpreter and the entry file a hook command runs."""
    import shlex

    words = shlex.split(command)
    return words[:1] + [w for w in words if w.endswith("entry.py")]


class Layout:
    """One harness's managed settings layer: a subclass says what differs (where the file is, how
    it reads and writes, the key that lets only managed hooks run, any switch beside it, what its
    guarantees are); the install, uninstall and doctor around it are these methods, alike for all.
    `root` (tests) puts the /etc folders under another prefix."""

    harness: str  # its name, as the CLI spells it
    settings: tuple[str, ...]  # the managed settings file, below the root
    record: str  # its install record, in CONFIG
    only_managed: str  # the key that, true, keeps every other hook from running
    others: str  # whose hooks run beside the managed ones without it (doctor says so)
    installed: str  # what the install says it did to the settings file
    guarantees: str  # what a managed install guarantees ({policy}: its policy file)

    # -- what a subclass says -------------------------------------------------------------

    def read(self, path: str) -> dict[str, Any]:
        """The settings file as plain data ({} when absent); ValueError (SettingsError) for one it
        cannot read. JSON here."""
        return read_json(path)

    def text(self, data: Any) -> str:
        """The settings file's text. JSON here."""
        return json_text(data)

    def pinned(self, path: str, after: dict[str, Any], record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Switches the install sets beside `only_managed` in the settings file `path` (`after`:
        what it will hold): (what the record keeps of them, the keys they set). None here."""
        return {}, {}

    def unpinned(self, after: dict[str, Any], record: dict[str, Any]) -> None:
        """The uninstall takes back what `pinned` set (as `record` says it did), in `after`."""

    def pin_checks(self, label: str, path: str, settings: dict[str, Any], fix: str) -> list[Any]:
        """BAD checks for a switch of `pinned` that is not as the install set it in `path`."""
        return []

    # -- the rest, alike for every harness ------------------------------------------------

    def paths(self, root: str = "/") -> dict[str, str]:
        return {"settings": os.path.join(root, *self.settings), **config_paths(root, self.record)}

    def hook_command(self, config: str) -> str:
        return hook_command(self.harness, config)

    def read_record(self, root: str) -> dict[str, Any]:
        return read_record(self.paths(root)["record"])

    def created_folders(self, root: str) -> list[str]:
        return [os.path.dirname(self.paths(root)["settings"]), self.paths(root)["config"]]

    def will_create(self, root: str, unit: str | None = None) -> list[str]:
        """What an install here creates (before it writes anything), with what an earlier one did;
        `unit`: the policy's token unit, whose table it writes."""
        where = self.paths(root)
        files = [where[k] for k in ("settings", "policy", "compiled", "environment", "record")]
        return will_create(where, self.created_folders(root), files, unit)

    def policy_text(self, root: str, given: str | None) -> str:
        return policy_text(self.paths(root), given)

    def plan_policy(self, root: str, text: str) -> Change:
        return plan_policy(self.paths(root), text)

    def plan_environment(self, root: str, ledger_url: str | None) -> Change:
        return plan_environment(self.paths(root), ledger_url)

    def make_folders(self, root: str) -> None:
        make_folders(self.created_folders(root))

    def remove_folders(self, root: str, record: dict[str, Any]) -> list[str]:
        return remove_folders(self.created_folders(root), record)

    def remove_tables(self, root: str, record: dict[str, Any]) -> list[str]:
        return remove_tables(self.paths(root), record)

    def plan_install(self, root: str, text: str, compiled: dict[str, Any], created: list[str], our_hooks: Any,
                     is_ours: Any) -> list[Change]:  # fmt: skip
        """The compiled policy, the hooks in the managed settings with only managed hooks allowed
        (and the harness's other switches), and the install record. `our_hooks`, `is_ours`: the
        harness's setup module's."""
        from governor.harnesses.settings import with_hooks

        where = self.paths(root)
        record = self.read_record(root)
        before = self.read(where["settings"])
        command = self.hook_command(where["config"])
        after = with_hooks(before, our_hooks(compiled["policy"], command), is_ours)
        kept, switches = self.pinned(where["settings"], after, record)
        set_only = bool(record.get("set_only_managed")) or self.only_managed not in before
        after[self.only_managed] = True
        after.update(switches)
        new_record = {"created": created, "set_only_managed": set_only, **kept, "command": command,
                      "policy_sha256": digest(text)}  # fmt: skip
        return [
            plan_compiled(where, compiled),
            Change(where["settings"], before, after, self.installed, "managed hooks already installed", self.text),
            Change(where["record"], record or None, new_record, "install record written", "install record as it is",
                   json_text, backup=False),
        ]  # fmt: skip

    def plan_uninstall(self, root: str, is_ours: Any) -> list[Change]:
        """Exactly what the install added: its hooks, the switches it set, and the files it created
        (the policy only while it is as the install left it, and no other install uses it)."""
        from governor.harnesses.settings import without_hooks

        where = self.paths(root)
        record = self.read_record(root)
        before = self.read(where["settings"])
        after: Any = without_hooks(before, is_ours)
        if record.get("set_only_managed"):
            after.pop(self.only_managed, None)
        self.unpinned(after, record)
        if not after and where["settings"] in set(record.get("created") or []):
            after = None
        changes = [Change(where["settings"], before, after, "managed hooks removed", "no managed hooks", self.text)]
        return changes + plan_removals(where, record)

    def doctor(self, root: str, is_ours: Any) -> list[Any]:
        """The managed install, when there is one: every file it runs or reads root-owned and not
        writable by anyone else, readable by every user, its switches on, and which guarantees
        hold. `is_ours`: what marks a hook entry as the governor's (the setup module's)."""
        from governor.harnesses.checks import BAD, INFO, OK, Check
        from governor.harnesses.settings import hook_groups

        where = self.paths(root)
        label = f"{self.harness} (managed)"
        if not os.path.exists(where["settings"]):
            return []
        try:
            settings = self.read(where["settings"])
        except ValueError as err:
            return [Check(BAD, label, str(err), "fix the file by hand")]
        hooks = [hook for groups in hook_groups(settings, is_ours).values() for _, hook in groups]
        if not hooks:
            return []
        files = [where["settings"], *read_files(where), *ran_files(hooks[0]["command"])]
        fix = f"sudo memory-governor install {self.harness} --scope managed (from a root-owned environment)"
        walled = policy_managed.service(where["config"]) is not None  # only the service reads environment.json
        checks = ownership_checks(label, files, fix, [f for f in files if not walled or f != where["environment"]])
        checks += credential_checks(label, where, walled)
        if settings.get(self.only_managed) is not True:
            checks.append(Check(BAD, label, f"{where['settings']}: {self.only_managed} is not true, so {self.others} "
                                "hooks run beside the managed ones", fix))  # fmt: skip
        checks += self.pin_checks(label, where["settings"], settings, fix)
        checks += table_checks(label, where, fix)
        if not any(c.status == BAD for c in checks):
            checks.append(Check(OK, label, f"{where['settings']}: {len(hooks)} managed hooks; it, the policy, the "
                                "interpreter and the entry file are root-owned and written by root alone"))  # fmt: skip
        checks.append(Check(INFO, "guarantees", self.guarantees.format(policy=where["policy"])))
        return checks
