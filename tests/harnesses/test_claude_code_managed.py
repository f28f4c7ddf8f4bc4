"""`install claude-code --scope managed` (under a --root prefix), its uninstall, the managed hook's
environment, and doctor's ownership checks. The real binary run as another user against a
managed install: tests/e2e/test_claude_code_managed.py."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from governor.harnesses.checks import BAD
from governor.harnesses.claude_code import managed
from governor.harnesses.claude_code.setup import is_ours
from governor.policy import managed as policy_managed
from governor.policy.files import check_files

MANAGED = "version: 1\nlimits:\n  max_search_calls: {value: 1}\n"  # the administrator's
TEAM = "version: 1\nlimits:\n  max_search_calls: {value: 9}\n"  # a project's, loosening 2 -> 9
LOCAL = "version: 1\nlimits:\n  max_search_calls: {value: 5}\n"  # its local override, tightening 9 -> 5
SEATBELT = ("--scope", "managed", "--no-service")  # the managed install without the wall (tests/test_service.py)


def governor(*args: str, env: dict[str, str], check: bool = True, cwd: Path | None = None
             ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "governor", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=cwd)  # fmt: skip
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}


def tree(root: Path) -> dict[str, object]:
    return {
        str(p.relative_to(root)): (json.loads(p.read_text()) if p.is_file() else "/") for p in sorted(root.rglob("*"))
    }


def test_install_writes_root_readable_files_and_uninstall_removes_exactly_what_it_added(tmp_path, env):
    root = tmp_path / "r"
    (root / "etc" / "claude-code").mkdir(parents=True)
    existing = root / "etc" / "claude-code" / "managed-settings.json"
    existing.write_text(json.dumps({"permissions": {"deny": ["WebFetch"]}}))
    os.chmod(existing, 0o640)
    before = tree(root)
    old = os.umask(0o077)  # a root umask that would hide the files from every user
    try:
        out = governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    finally:
        os.umask(old)
    where = managed.paths(str(root))
    settings = json.loads(existing.read_text())
    assert settings["permissions"] == {"deny": ["WebFetch"]} and settings["allowManagedHooksOnly"] is True
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command.endswith(f'claude-code --managed "{where["config"]}"') and " -I -S " in command
    assert stat.S_IMODE(existing.stat().st_mode) == 0o640, "a file it rewrites keeps its mode"
    assert "saved as" in out.stdout and list(existing.parent.glob("managed-settings.json.bak-*"))
    for key in ("policy", "compiled", "record"):
        assert stat.S_IMODE(os.stat(where[key]).st_mode) == 0o644, key
    assert stat.S_IMODE(os.stat(where["config"]).st_mode) == 0o755
    again = governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    assert "nothing changed" in again.stdout and "saved as" not in again.stdout, again.stdout
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    for backup in existing.parent.glob("managed-settings.json.bak-*"):
        backup.unlink()
    assert tree(root) == before


def test_install_pins_what_runs_code_around_a_hook_keeps_the_administrators_and_uninstall_takes_back_its_own(
    tmp_path, env
):
    """A user's settings.json `env` runs a program in or around every hook (the loader's variables,
    Claude Code's shell prefix); the managed file's `env` wins, so the install pins each one empty,
    keeps a value the administrator set there, doctor says when one is not pinned, and the
    uninstall takes back exactly the pins it added."""
    root = tmp_path / "r"
    (root / "etc" / "claude-code").mkdir(parents=True)
    settings_path = root / "etc" / "claude-code" / "managed-settings.json"
    settings_path.write_text(json.dumps({"env": {"LD_LIBRARY_PATH": "/opt/cuda/lib", "TEAM": "x"}}))
    before = json.loads(settings_path.read_text())
    governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    settings = json.loads(settings_path.read_text())
    assert settings["env"] == {"LD_LIBRARY_PATH": "/opt/cuda/lib", "TEAM": "x", "LD_PRELOAD": "", "LD_AUDIT": "",
                               "CLAUDE_CODE_SHELL_PREFIX": ""}  # fmt: skip
    assert not [c for c in managed.doctor(str(root), is_ours) if c.status == BAD and "env" in c.detail]
    del settings["env"]["CLAUDE_CODE_SHELL_PREFIX"]
    settings_path.write_text(json.dumps(settings))
    unpinned = [c.detail for c in managed.doctor(str(root), is_ours) if c.status == BAD and "env" in c.detail]
    assert unpinned and "CLAUDE_CODE_SHELL_PREFIX" in unpinned[0] and "LD_PRELOAD" not in unpinned[0], unpinned
    governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    assert json.loads(settings_path.read_text())["env"]["CLAUDE_CODE_SHELL_PREFIX"] == ""
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    assert json.loads(settings_path.read_text()) == before


def test_uninstall_keeps_a_policy_the_administrator_changed_since(tmp_path, env):
    root = tmp_path / "r"
    governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    policy = Path(managed.paths(str(root))["policy"])
    policy.write_text(policy.read_text() + "# ours now\n")
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    assert policy.exists() and not (root / "etc" / "claude-code").exists()


def test_an_invalid_managed_policy_is_refused_and_nothing_written(tmp_path, env):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nlimits: {default: {max_search_calls: lots}}\n")
    out = governor("install", "claude-code", *SEATBELT, "--root", str(tmp_path / "r"), "--policy",
                   str(bad), env=env, check=False)  # fmt: skip
    assert out.returncode != 0 and "invalid" in out.stderr and not (tmp_path / "r").exists()


def test_without_root_the_managed_install_refuses(tmp_path, env):
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv to drop to another user")
        nobody = pwd.getpwnam("nobody")
        prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", "--"]
    else:
        prefix = []
    out = subprocess.run([*prefix, sys.executable, "-m", "governor", "install", "claude-code", *SEATBELT],
                         env={**env, "MEMORY_GOVERNOR_STATE_DIR": "/nonexistent"}, capture_output=True, text=True,
                         timeout=120, cwd="/")  # fmt: skip
    assert out.returncode != 0 and "run it as root" in out.stderr, out.stderr


def test_a_managed_hook_takes_nothing_from_the_environment():
    policy_managed.enter("/etc/memory-governor")
    try:
        env = policy_managed.environment({"MEMORY_GOVERNOR_STATE_DIR": "/tmp/fresh", "MEMORY_GOVERNOR_POLICY": "/x",
                                          "MEMORY_GOVERNOR_LEDGER_URL": "redis://x", "XDG_STATE_HOME": "/tmp/s",
                                          "HOME": "/tmp/h", "PATH": "/usr/bin"})  # fmt: skip
    finally:
        policy_managed._config = None
    assert env["HOME"] == pwd.getpwuid(os.getuid()).pw_dir and env["PATH"] == "/usr/bin"
    assert env["MEMORY_GOVERNOR_WARM_SERVER"] == "off" and "XDG_STATE_HOME" not in env
    assert not {"MEMORY_GOVERNOR_STATE_DIR", "MEMORY_GOVERNOR_POLICY", "MEMORY_GOVERNOR_LEDGER_URL"} & set(env)


def test_the_managed_policy_ignores_the_projects_files(tmp_path, env):
    root = tmp_path / "r"
    governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    project = tmp_path / "p"
    (project / ".memory-governor").mkdir(parents=True)
    loose = TEAM  # a valid loosening (2 -> 9): an ordinary install would enforce it
    (project / ".memory-governor" / "policy.yaml").write_text(loose)
    (project / ".memory-governor" / "policy.local.yaml").write_text(loose)
    assert check_files([str(project / ".memory-governor" / "policy.yaml")]).dumped()["limits"]["max_search_calls"][
        "value"] == 9  # fmt: skip
    policy_managed.enter(managed.paths(str(root))["config"])
    try:
        policy, notices = policy_managed.load({"MEMORY_GOVERNOR_POLICY": str(project / ".memory-governor" /
                                                                            "policy.yaml")}, str(project))  # fmt: skip
    finally:
        policy_managed._config = None
    assert notices == [] and policy is not None
    assert policy.data["limits"]["max_search_calls"]["value"] == 2
    assert policy.forms is None, "no patterns cache from the user's state directory (its digest is unkeyed)"


def test_doctor_names_a_managed_file_someone_else_can_write(tmp_path, env):
    root = tmp_path / "r"
    governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    good = managed.doctor(str(root), is_ours)
    problems = [c.detail for c in good if c.status == BAD]
    if policy_managed.ownership_problems([str(tmp_path)]):  # pytest's tmp folders are not root's alone
        assert problems and all("root" in p or "writable" in p for p in problems)
    policy = managed.paths(str(root))["policy"]
    os.chmod(policy, 0o666)
    bad = [c.detail for c in managed.doctor(str(root), is_ours) if c.status == BAD]
    assert any(f"{policy}: mode 0666 is group- or world-writable" in d for d in bad), bad
    assert any(c.what == "guarantees" for c in good)


def test_ownership_of_a_path_and_every_folder_above_it(tmp_path):
    folder = tmp_path / "a"
    folder.mkdir()
    target = folder / "f"
    target.write_text("x")
    os.chmod(folder, 0o775)
    found = policy_managed.ownership_problems([str(target)])
    assert any(p.startswith(f"{folder}: mode 0775") for p in found), found
    assert policy_managed.ownership_problems(["/usr/bin/env"]) == [] or os.stat("/usr").st_uid != 0


def test_a_sticky_folder_two_levels_up_is_not_a_way_in_but_one_level_up_is(tmp_path):
    # /tmp is root's and sticky: no one else can rename or remove root's entries in it, so a
    # governor in /tmp/x/.venv is root's alone; a file directly in it is not (its name could be planted).
    sticky, plain = tmp_path / "sticky", tmp_path / "plain"
    for top in (sticky, plain):
        (top / "venv").mkdir(parents=True)
        (top / "venv" / "python").write_text("x")
        (top / "loose").write_text("x")
    os.chmod(sticky, 0o1777)
    os.chmod(plain, 0o777)
    mine = [p for p in policy_managed.ownership_problems([str(tmp_path)])]  # the test's own folders
    deep = [p for p in policy_managed.ownership_problems([str(sticky / "venv" / "python")]) if p not in mine]
    assert deep == [] or os.geteuid() != 0, deep
    shallow = policy_managed.ownership_problems([str(sticky / "loose")])
    assert f"{sticky}: mode 1777 is group- or world-writable" in shallow, shallow
    plain_deep = policy_managed.ownership_problems([str(plain / "venv" / "python")])
    assert f"{plain}: mode 0777 is group- or world-writable" in plain_deep, plain_deep


# -- the review tools under a managed install: they say what its hooks enforce -----------------


@pytest.fixture
def installed(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """A managed install under a prefix (its policy: 1 search a turn), and a project whose own team
    policy (9) and local override (5) a managed hook does not read."""
    root = tmp_path / "r"
    (tmp_path / "managed.yaml").write_text(MANAGED)
    governor("install", "claude-code", *SEATBELT, "--root", str(root), "--policy",
             str(tmp_path / "managed.yaml"), env=env)  # fmt: skip
    project = tmp_path / "p"
    (project / ".memory-governor").mkdir(parents=True)
    (project / ".memory-governor" / "policy.yaml").write_text(TEAM)
    (project / ".memory-governor" / "policy.local.yaml").write_text(LOCAL)
    return root, project


def searches(explained: dict[str, object]) -> str:
    rules = explained["rules"]
    assert isinstance(rules, list)
    return next(r["statement"] for r in rules if r["key"] == "limits.max_search_calls")


def test_policy_explain_shows_the_managed_policy_and_the_projects_files_as_not_in_force(installed, env):
    root, project = installed
    where = managed.paths(str(root))
    team, local = (str(project / ".memory-governor" / name) for name in ("policy.yaml", "policy.local.yaml"))
    out = governor("--managed-root", str(root), "policy", "explain", "--format", "json", env=env, cwd=project)
    explained = json.loads(out.stdout)
    hooks_enforce = json.loads(Path(where["compiled"]).read_text())  # what every managed hook decides with
    assert explained["digest"] == hooks_enforce["digest"] and explained["in_force"] == "managed"
    assert explained["managed"] == where["policy"] and "at most 1 " in searches(explained), searches(explained)
    assert [layer["layer"] for layer in explained["layers"]] == ["default", "managed"]
    assert explained["not_in_force"] == [{"file": f, "why": "ignored under the managed install"} for f in (team, local)]
    text = governor("--managed-root", str(root), "policy", "explain", env=env, cwd=project).stdout
    assert f"(digest {hooks_enforce['digest'][:12]})" in text and f"managed: {where['policy']}" in text, text
    assert f"Not in force (ignored under the managed install):\n  {team}\n  {local}\n" in text, text
    assert f"from managed: {where['policy']}:3" in text, text
    # The project's own policy, for another harness's hooks (not managed); and no managed install, no change.
    own = json.loads(governor("--managed-root", str(root), "policy", "explain", "--unmanaged", "--format", "json",
                              env=env, cwd=project).stdout)  # fmt: skip
    bare = json.loads(governor("--managed-root", str(root / "none"), "policy", "explain", "--format", "json",
                               env=env, cwd=project).stdout)  # fmt: skip
    for ordinary in (own, bare):
        assert ordinary["in_force"] != "managed" and ordinary["managed"] is None and ordinary["not_in_force"] == []
        assert ordinary["digest"] != explained["digest"] and "at most 5 " in searches(ordinary)


def test_policy_check_checks_the_managed_policy_and_names_the_projects_files_not_in_force(installed, env):
    root, project = installed
    where = managed.paths(str(root))
    out = governor("--managed-root", str(root), "policy", "check", env=env, cwd=project)
    first, second = out.stdout.splitlines()
    assert first.endswith(f"< {where['policy']}: ok"), first
    assert "policy.local.yaml: ok (not in force: ignored under the managed install, managed: " in second, second
    checked = json.loads(governor("--managed-root", str(root), "policy", "check", "--format", "json", env=env,
                                  cwd=project).stdout)  # fmt: skip
    assert checked["managed"] == where["policy"] and [c["in_force"] for c in checked["checked"]] == [True, False]
    local = governor("--managed-root", str(root), "policy", "check", ".memory-governor/policy.local.yaml", env=env,
                     cwd=project).stdout  # fmt: skip
    assert local.startswith(".memory-governor/policy.local.yaml: ok (not in force: ignored under the managed"), local
    # A broken managed policy fails the check even when the project's files are fine.
    Path(where["policy"]).write_text("version: 1\nlimits:\n  max_search_calls: {value: lots}\n")
    broken = governor("--managed-root", str(root), "policy", "check", env=env, cwd=project, check=False)
    assert broken.returncode == 1 and f"{where['policy']}:3" in broken.stderr, broken.stderr


def test_policy_accept_under_a_managed_install_has_nothing_to_accept_and_records_nothing(installed, env):
    root, project = installed
    state = Path(env["MEMORY_GOVERNOR_STATE_DIR"])
    before = sorted(state.rglob("*")) if state.exists() else []
    out = governor("--managed-root", str(root), "policy", "accept", "--yes", env=env, cwd=project)
    assert out.stdout.startswith(f"nothing to accept: managed: {managed.paths(str(root))['policy']} is in force"), out
    assert "ignored under the managed install" in out.stdout
    assert (sorted(state.rglob("*")) if state.exists() else []) == before
    # --unmanaged takes the ordinary route: a person at a terminal, which this is not.
    own = governor("--managed-root", str(root), "policy", "accept", "--unmanaged", "--yes", env=env, cwd=project,
                   check=False)  # fmt: skip
    assert own.returncode != 0 and "confirm in your own terminal" in own.stderr, own.stderr


class AsUser:
    """Commands run as a user made for the test, as a managed hook runs: its state directory is that
    user's own (~/.local/state/memory-governor from the password database), never this machine's
    real user's. Each runs in a private mount namespace whose /root is an overlay opened to
    traversal only (the interpreter may live under it); the user is removed after, with its home."""

    def __init__(self, base: Path, name: str) -> None:
        self.base, self.user = base, pwd.getpwnam(name)
        self.home = Path(self.user.pw_dir)
        self.state = self.home / ".local" / "state" / "memory-governor"

    def run(self, args: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
        for path in [self.home, *self.home.rglob("*"), *(self.base / "p").rglob("*"), self.base / "p"]:
            try:
                os.lchown(path, self.user.pw_uid, self.user.pw_gid)
            except FileNotFoundError:  # gone since the walk: the ledger's -shm, when its last connection closed
                pass
        layers = self.base / "layers"
        mount = f"mount -t overlay overlay -o lowerdir=/root,upperdir={layers}/up,workdir={layers}/work /root"
        drop = ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--init-groups", "--"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.base / "elsewhere"),
               "MEMORY_GOVERNOR_STATE_DIR": str(self.base / "elsewhere"),  # the model's variables: not read
               "MEMORY_GOVERNOR_LEDGER_URL": "redis://127.0.0.1:1/0"}  # fmt: skip
        return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", f'{mount} && exec "$@"', "sh",
                               *drop, *args], input=stdin, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=120)  # fmt: skip


@pytest.fixture
def as_user() -> Iterator[AsUser]:
    tools = ("unshare", "setpriv", "useradd", "userdel")
    if os.geteuid() != 0 or any(shutil.which(p) is None for p in tools) or subprocess.run(
            ["unshare", "-m", "--propagation", "private", "true"], capture_output=True).returncode != 0:  # fmt: skip
        reason = "needs root, a private mount namespace, setpriv and useradd: a user of its own runs the managed hook"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    name = f"mgreview{os.getpid()}"
    subprocess.run(["userdel", "-r", name], capture_output=True)  # a test killed mid-way
    base = Path(tempfile.mkdtemp(prefix="mg-managed-review-"))
    try:
        os.chmod(base, 0o755)
        for level in ("layers/up", "layers/work", "p/.memory-governor"):
            (base / level).mkdir(parents=True)
        os.chmod(base / "layers" / "up", 0o711)
        subprocess.run(["useradd", "-M", "-d", str(base / "home"), "-s", "/bin/sh", name], check=True,
                       capture_output=True)  # fmt: skip
        user = AsUser(base, name)
        user.home.mkdir()  # no tokenizer tables in it: a managed hook counts with the install's
        yield user
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def managed_hook(as_user: AsUser, root: Path, session_id: str = "sess-m") -> Callable[..., Any]:
    """The hook command the managed install wrote, run as the user on one event of `session_id`."""
    where = managed.paths(str(root))
    project = as_user.base / "p"
    command = json.loads(Path(where["settings"]).read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]

    def hook(name: str, **fields: object) -> subprocess.CompletedProcess[str]:
        payload = {"session_id": session_id, "transcript_path": str(project / "t.jsonl"), "cwd": str(project),
                   "hook_event_name": name, "permission_mode": "default", "prompt_id": f"{session_id}-1",
                   **fields}  # fmt: skip
        return as_user.run(["sh", "-c", command], project, json.dumps(payload))

    return hook


def managed_turn(as_user: AsUser, root: Path) -> list[subprocess.CompletedProcess[str]]:
    """A prompt and two searches through the hook command the managed install wrote, as the user."""
    hook = managed_hook(as_user, root)
    hook("UserPromptSubmit", prompt="what did we decide about the cache?")
    return [hook("PreToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": f"cache {n}"},
                 tool_use_id=f"toolu_{n}") for n in (1, 2)]  # fmt: skip


def test_report_and_doctor_read_the_ledger_a_managed_hook_writes_against_its_limits(as_user, env):
    root = as_user.base / "r"
    (as_user.base / "managed.yaml").write_text(MANAGED)
    governor("install", "claude-code", *SEATBELT, "--root", str(root), "--policy",
             str(as_user.base / "managed.yaml"), env=env)  # fmt: skip
    where = managed.paths(str(root))
    project = as_user.base / "p"
    (project / ".memory-governor" / "policy.yaml").write_text(TEAM)
    answers = managed_turn(as_user, root)
    assert "deny" not in answers[0].stdout and '"deny"' in answers[1].stdout, [a.stdout for a in answers]
    assert (as_user.state / "ledger.db").exists() and not (as_user.base / "elsewhere").exists()
    decided_under = json.loads(Path(where["compiled"]).read_text())["digest"]
    # The administrator widens the policy: the turn decided before is still shown against its own limit.
    (as_user.base / "managed.yaml").write_text(MANAGED.replace("value: 1", "value: 3"))
    governor("install", "claude-code", *SEATBELT, "--root", str(root), "--policy",
             str(as_user.base / "managed.yaml"), env=env)  # fmt: skip
    cli = [sys.executable, "-m", "governor", "--managed-root", str(root)]
    out = as_user.run([*cli, "report", "--format", "json"], project)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    compiled = json.loads(Path(where["compiled"]).read_text())
    assert data["in_force"] == {"digest": compiled["digest"], "managed": where["policy"]}
    assert data["limits"]["max_search_calls"] == 3
    (turn,) = data["turns"]
    assert turn["limits"]["max_search_calls"] == 1 and turn["usage"]["max_search_calls"] == 1 and turn["denied"] == 1
    assert turn["policy"] and decided_under.startswith(turn["policy"]) and decided_under != compiled["digest"]
    table = as_user.run([*cli, "report"], project).stdout
    assert table.startswith(f"managed: {where['policy']} (digest {compiled['digest'][:12]}), the ledger in "
                            f"{as_user.state}\n"), table  # fmt: skip
    assert "    1/1 " in table, table
    doctor = as_user.run([*cli, "doctor", "--format", "json"], project)
    rows = {(r["check"], r["status"]): r["detail"] for r in json.loads(doctor.stdout)}
    assert rows[("policy", "ok")] == f"valid (default < managed: {where['policy']})", rows
    assert rows[("policy (not in force)", "info")] == f"{project}/.memory-governor/policy.yaml: ignored under the " \
        "managed install"  # fmt: skip
    assert rows[("accepted policy", "ok")].startswith("nothing to accept"), rows
    assert rows[("ledger", "ok")].startswith(f"SQLite file in {as_user.state}: 1 session(s)"), rows
    assert rows[("warm server", "info")].startswith("off under the managed install"), rows


def test_the_administrators_ledger_url_is_every_managed_hooks_and_no_variable_moves_it(as_user, env, redis_server):
    root = as_user.base / "r"
    (as_user.base / "managed.yaml").write_text(MANAGED)
    url = redis_server.url
    out = governor("install", "claude-code", *SEATBELT, "--root", str(root), "--policy",
                   str(as_user.base / "managed.yaml"), "--ledger-url", url, env=env)  # fmt: skip
    where = managed.paths(str(root))
    assert json.loads(Path(where["environment"]).read_text()) == {"MEMORY_GOVERNOR_LEDGER_URL": url}
    assert stat.S_IMODE(os.stat(where["environment"]).st_mode) == 0o644 and "Redis at" in out.stdout
    answers = managed_turn(as_user, root)  # the user's own MEMORY_GOVERNOR_LEDGER_URL names a dead port
    assert "deny" not in answers[0].stdout and '"deny"' in answers[1].stdout, [a.stdout + a.stderr for a in answers]
    assert redis_server.client().dbsize() > 0 and not (as_user.state / "ledger.db").exists()
    cli = [sys.executable, "-m", "governor", "--managed-root", str(root)]
    (turn,) = json.loads(as_user.run([*cli, "report", "--format", "json"], as_user.base / "p").stdout)["turns"]
    assert turn["usage"]["max_search_calls"] == 1 and turn["denied"] == 1
    doctor = json.loads(as_user.run([*cli, "doctor", "--format", "json"], as_user.base / "p").stdout)
    ledger, wide = [r for r in doctor if r["check"] == "ledger"]
    assert ledger["status"] == "ok" and ledger["detail"].startswith(f"Redis at {url}"), ledger
    assert wide["status"] == "warn" and "ACL SETUSER memory-governor" in wide["fix"], wide  # the default user
    # Kept by an install that does not name it; "" takes it away; the uninstall removes the file.
    governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    assert json.loads(Path(where["environment"]).read_text()) == {"MEMORY_GOVERNOR_LEDGER_URL": url}
    governor("install", "claude-code", *SEATBELT, "--root", str(root), "--ledger-url", "", env=env)
    assert not os.path.exists(where["environment"])
    governor("install", "claude-code", *SEATBELT, "--root", str(root), "--ledger-url", url, env=env)
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    assert not os.path.exists(where["environment"]) and not (root / "etc" / "claude-code").exists()


def test_a_ledger_url_that_is_no_redis_url_is_refused_and_nothing_written(tmp_path, env):
    out = governor("install", "claude-code", *SEATBELT, "--root", str(tmp_path / "r"), "--ledger-url",
                   "http://user:secret@host/", env=env, check=False)  # fmt: skip
    assert out.returncode != 0 and "no Redis URL" in out.stderr and "secret" not in out.stderr, out.stderr
    assert not (tmp_path / "r").exists()
    ordinary = governor("install", "claude-code", "--ledger-url", "redis://x", env=env, check=False, cwd=tmp_path)
    assert ordinary.returncode != 0 and "only the managed scope" in ordinary.stderr, ordinary.stderr


def test_telemetry_under_a_managed_install_is_one_sender_the_administrator_runs_beside_the_redis(
    as_user, env, redis_server, tmp_path
):
    """A managed hook never sends (no warm server), and reads no telemetry variable: the audit rows
    every user's hooks write to the administrator's Redis are sent by one process of the
    administrator's own (`memory-governor serve` with that ledger and telemetry on)."""
    from tests.otlp_receiver import HttpReceiver
    from tests.test_telemetry import CALLS, DECISION_EVENT, telemetry_env

    root = as_user.base / "r"
    (as_user.base / "managed.yaml").write_text(MANAGED)
    governor("install", "claude-code", *SEATBELT, "--root", str(root), "--policy",
             str(as_user.base / "managed.yaml"), "--ledger-url", redis_server.url, env=env)  # fmt: skip
    receiver = HttpReceiver()
    sender = {**env, **telemetry_env(receiver.endpoint), "MEMORY_GOVERNOR_LEDGER_URL": redis_server.url,
              "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "sender")}  # fmt: skip
    serve = subprocess.Popen([sys.executable, "-m", "governor", "serve", "--idle-exit", "120"], env=sender,
                             cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        answers = managed_turn(as_user, root)
        assert '"deny"' in answers[1].stdout, [a.stdout + a.stderr for a in answers]
        got = receiver.received
        # The denial is sent; the search let through is counted when its result reports back (none here).
        assert got.wait(lambda r: r.total(CALLS, decision="denied") >= 1 and bool(r.records())), got.series(CALLS)
        events = [r["attributes"] for r in got.records() if r["event_name"] == DECISION_EVENT]
        assert [(e["call.id"], e["session.id"], e["decision"]) for e in events] == [("toolu_2", "sess-m", "denied")]
    finally:
        governor("serve", "--stop", env=sender, check=False)
        serve.wait(timeout=30)
        receiver.stop()


def counted_search(as_user: AsUser, root: Path, session_id: str) -> tuple[int, str]:
    """One memory search and its result through the managed hook command, run as the user: the
    tokens the user's ledger counted for it, and the text the model got (the result's snippets)."""
    import sqlite3

    from tests.conftest import fixture_text, snippets

    hook = managed_hook(as_user, root, session_id)
    result = fixture_text("engram/search_v1.txt")
    call = {"tool_name": "mcp__engram__mem_search", "tool_input": {"query": "auth", "limit": 3},
            "tool_use_id": f"toolu_{session_id}"}  # fmt: skip
    hook("UserPromptSubmit", prompt="what did we decide about auth?")
    before = hook("PreToolUse", **call)
    assert before.returncode == 0 and '"deny"' not in before.stdout, before.stdout + before.stderr
    after = hook("PostToolUse", **call, tool_response=result, duration_ms=5)
    assert after.returncode == 0, after.stderr
    with sqlite3.connect(as_user.state / "ledger.db") as db:
        counted = [row[0] for row in db.execute("SELECT tokens FROM calls WHERE call_id LIKE ?",
                                                ("%" + call["tool_use_id"],))]  # fmt: skip
    assert len(counted) == 1, counted
    return counted[0], snippets(result)


def test_a_managed_hook_counts_with_the_installs_table_never_the_users(as_user, env):
    """The install builds the tokenizer table into the root-owned configuration folder. A managed
    hook run as the user counts with it, exactly; a table in the user's state directory whose
    head names the user's code is neither run nor read, and the hook writes no table there."""
    import tiktoken

    from governor.engine import tokens
    from tests.conftest import tokenizer_tables

    root = as_user.base / "r"
    governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    config = managed.paths(str(root))["config"]
    (table,) = Path(config).glob("o200k_base-*.bpe")
    assert stat.S_IMODE(table.stat().st_mode) == 0o644 and table.stat().st_uid == 0
    assert str(table) in managed.read_record(str(root))["created"]
    cache = as_user.state / "cache"
    cache.mkdir(parents=True)
    marker, code = as_user.home / "ran", as_user.home / "split.py"
    code.write_text(f"open({str(marker)!r}, 'w').close()\nimport os\nos._exit(0)\n")
    for shared in tokenizer_tables():  # the user's own tables, their heads naming the user's code
        head, _, body = shared.read_bytes().partition(b"\n")
        fields = json.loads(head)
        for name in ("split", "merge"):
            fields["sources"][name] = [str(code), code.stat().st_size, code.stat().st_mtime_ns]
        (cache / shared.name).write_bytes(json.dumps(fields).encode() + b"\n" + body)
    before = {p.name: p.read_bytes() for p in cache.iterdir()}
    reference = tiktoken.Encoding(**tokens._spec("o200k_base"))
    counted, result = counted_search(as_user, root, "with-table")
    assert not marker.exists(), "the managed hook ran code named by the user's tokenizer table"
    assert counted == len(reference.encode_ordinary(result))
    assert {p.name: p.read_bytes() for p in cache.iterdir()} == before, "the managed hook wrote the user's cache"
    assert not list(cache.parent.rglob("*.forms")), "a managed hook keeps no patterns cache there"
    table.unlink()  # no table where the install puts it: tiktoken counts, as exactly, and none is written
    counted, _ = counted_search(as_user, root, "without-table")
    assert counted == len(reference.encode_ordinary(result)) and not marker.exists()
    assert not list(Path(config).glob("*.bpe")) and {p.name for p in cache.iterdir()} == set(before)
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    assert not root.joinpath("etc", "memory-governor").exists()
