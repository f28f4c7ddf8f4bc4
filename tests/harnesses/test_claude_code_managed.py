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
from collections.abc import Iterator
from pathlib import Path

import pytest

from governor.harnesses.checks import BAD
from governor.harnesses.claude_code import managed
from governor.harnesses.claude_code.setup import is_ours
from governor.policy import managed as policy_managed


def governor(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "governor", *args], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
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
        out = governor("install", "claude-code", "--scope", "managed", "--root", str(root), env=env)
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
    again = governor("install", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    assert "nothing changed" in again.stdout and "saved as" not in again.stdout, again.stdout
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    for backup in existing.parent.glob("managed-settings.json.bak-*"):
        backup.unlink()
    assert tree(root) == before


def test_uninstall_keeps_a_policy_the_administrator_changed_since(tmp_path, env):
    root = tmp_path / "r"
    governor("install", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    policy = Path(managed.paths(str(root))["policy"])
    policy.write_text(policy.read_text() + "# ours now\n")
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    assert policy.exists() and not (root / "etc" / "claude-code").exists()


def test_an_invalid_managed_policy_is_refused_and_nothing_written(tmp_path, env):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nlimits: {default: {max_search_calls: lots}}\n")
    out = governor("install", "claude-code", "--scope", "managed", "--root", str(tmp_path / "r"), "--policy",
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
    out = subprocess.run([*prefix, sys.executable, "-m", "governor", "install", "claude-code", "--scope", "managed"],
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
    governor("install", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    project = tmp_path / "p"
    (project / ".memory-governor").mkdir(parents=True)
    loose = "version: 1\nlimits:\n  default:\n    max_search_calls: 9\n"
    (project / ".memory-governor" / "policy.yaml").write_text(loose)
    (project / ".memory-governor" / "policy.local.yaml").write_text(loose)
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
    governor("install", "claude-code", "--scope", "managed", "--root", str(root), env=env)
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


def _free_uid() -> int:
    """A uid with no password entry: a managed hook run as it finds its home from HOME."""
    for uid in range(61000, 65000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise AssertionError("no free uid")


@pytest.fixture
def as_user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """A folder every user can traverse, and the prefix that runs a command as a user of its
    own (no password entry; its home is the folder's home/, which it owns)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("this needs root and setpriv (to run the hook as an unprivileged user)")
        pytest.skip("needs root and setpriv (to run the hook as an unprivileged user)")
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="mg-managed-hook-"))
    try:
        os.chmod(folder, 0o755)
        uid = _free_uid()
        (folder / "home").mkdir()
        os.chown(folder / "home", uid, uid)
        yield folder, ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _search_as_the_user(folder: Path, prefix: list[str], config: str, session_id: str) -> tuple[int, str]:
    """One memory search and its result through the managed hook command, run as the user: the
    tokens the user's ledger counted for it, and the result's text."""
    import shlex
    import sqlite3

    from tests.conftest import Env, Session, fixture_text

    box = Env(folder / f"box-{session_id}")
    os.chmod(box.tmp, 0o755)
    os.chmod(box.project, 0o755)
    command = [*prefix, *shlex.split(managed.hook_command(config))]
    home = folder / "home"
    session = Session(box, session_id=session_id, command=command, extra_env={"HOME": str(home)})
    session.start()
    session.prompt("what did we decide about auth?")
    call = session.next_id()
    result = fixture_text("engram/search_v1.txt")
    assert not session.pre("mem_search", call_id=call, query="auth", limit=3).denied
    session.post("mem_search", call, result, query="auth", limit=3)
    with sqlite3.connect(home / ".local" / "state" / "memory-governor" / "ledger.db") as db:
        counted = [row[0] for row in db.execute("SELECT tokens FROM calls WHERE call_id LIKE ?", ("%" + call,))]
    assert len(counted) == 1, counted
    return counted[0], result


def test_a_managed_hook_counts_with_the_installs_table_never_the_users(as_user, env):
    """The install builds the tokenizer table into the root-owned configuration folder. A managed
    hook run as the user counts with it, exactly; a table in the user's state directory whose
    head names the user's code is neither run nor read, and the hook writes no table there."""
    import json as json_module

    import tiktoken

    from governor.engine import tokens
    from tests.conftest import tokenizer_tables

    folder, prefix = as_user
    root = folder / "r"
    governor("install", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    config = managed.paths(str(root))["config"]
    (table,) = Path(config).glob("o200k_base-*.bpe")
    assert stat.S_IMODE(table.stat().st_mode) == 0o644 and table.stat().st_uid == 0
    assert str(table) in managed.read_record(str(root))["created"]
    cache = folder / "home" / ".local" / "state" / "memory-governor" / "cache"
    cache.mkdir(parents=True)
    marker, code = folder / "home" / "ran", folder / "home" / "split.py"
    code.write_text(f"open({str(marker)!r}, 'w').close()\nimport os\nos._exit(0)\n")
    for shared in tokenizer_tables():  # the user's own tables, their heads naming the user's code
        head, _, body = shared.read_bytes().partition(b"\n")
        fields = json_module.loads(head)
        for name in ("split", "merge"):
            fields["sources"][name] = [str(code), code.stat().st_size, code.stat().st_mtime_ns]
        (cache / shared.name).write_bytes(json_module.dumps(fields).encode() + b"\n" + body)
    for path in [*cache.parents[2].rglob("*")]:
        os.lchown(path, (folder / "home").stat().st_uid, (folder / "home").stat().st_gid)
    before = {p.name: p.read_bytes() for p in cache.iterdir()}
    reference = tiktoken.Encoding(**tokens._spec("o200k_base"))
    counted, result = _search_as_the_user(folder, prefix, config, "with-table")
    assert not marker.exists(), "the managed hook ran code named by the user's tokenizer table"
    assert counted == len(reference.encode_ordinary(result))
    assert {p.name: p.read_bytes() for p in cache.iterdir()} == before, "the managed hook wrote the user's cache"
    assert not list(cache.parent.rglob("*.forms")), "a managed hook keeps no patterns cache there"
    table.unlink()  # no table where the install puts it: tiktoken counts, as exactly, and none is written
    counted, _ = _search_as_the_user(folder, prefix, config, "without-table")
    assert counted == len(reference.encode_ordinary(result)) and not marker.exists()
    assert not list(Path(config).glob("*.bpe")) and {p.name for p in cache.iterdir()} == set(before)
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    assert not root.joinpath("etc", "memory-governor").exists()
