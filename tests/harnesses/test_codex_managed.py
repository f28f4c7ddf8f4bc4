"""`install codex --scope managed` (under a --root prefix): requirements.toml with the hooks, the
two switches a user's file cannot turn off, its uninstall, sharing the policy with Claude Code's
managed install, and doctor. The real binary run as another user against a managed install:
tests/e2e/test_codex_managed.py."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit

from governor.harnesses import managed as shared_managed
from governor.harnesses.checks import BAD
from governor.harnesses.codex import managed
from governor.harnesses.codex.setup import SESSION_EVENTS, TOOL_EVENTS, is_ours

SEATBELT = ("--scope", "managed", "--no-service")  # the managed install without the wall (tests/test_service.py)


def governor(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "governor", *args], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): (p.read_text() if p.is_file() else "/") for p in sorted(root.rglob("*"))}


def test_install_pins_hooks_on_and_managed_only_and_uninstall_removes_exactly_what_it_added(tmp_path, env):
    root = tmp_path / "r"
    (root / "etc" / "codex").mkdir(parents=True)
    existing = root / "etc" / "codex" / "requirements.toml"
    existing.write_text('allowed_sandbox_modes = ["read-only"]\n\n[features]\nweb_search = false\n')
    before = tree(root)
    old = os.umask(0o077)
    try:
        governor("install", "codex", *SEATBELT, "--root", str(root), env=env)
    finally:
        os.umask(old)
    where = managed.paths(str(root))
    data = tomlkit.parse(existing.read_text()).unwrap()
    assert data["allowed_sandbox_modes"] == ["read-only"], "the administrator's own requirements are kept"
    assert data["allow_managed_hooks_only"] is True and data["features"] == {"web_search": False, "hooks": True}
    assert set(data["hooks"]) == {*TOOL_EVENTS, *SESSION_EVENTS}
    command = data["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command.endswith(f'codex --managed "{where["config"]}"') and " -I -S " in command
    for key in ("policy", "compiled", "record"):
        assert stat.S_IMODE(os.stat(where[key]).st_mode) == 0o644, key
    again = governor("install", "codex", *SEATBELT, "--root", str(root), env=env)
    assert "managed hooks already installed, nothing changed" in again.stdout, again.stdout
    governor("uninstall", "codex", "--scope", "managed", "--root", str(root), env=env)
    for backup in existing.parent.glob("requirements.toml.bak-*"):
        backup.unlink()
    after = tree(root)
    assert tomlkit.parse(after.pop("etc/codex/requirements.toml")).unwrap() == tomlkit.parse(
        before.pop("etc/codex/requirements.toml")).unwrap()  # fmt: skip
    assert after == before


def test_a_requirements_file_the_install_created_goes_with_its_folders(tmp_path, env):
    root = tmp_path / "r"
    governor("install", "codex", *SEATBELT, "--root", str(root), env=env)
    assert (root / "etc" / "codex" / "requirements.toml").exists()
    governor("uninstall", "codex", "--scope", "managed", "--root", str(root), env=env)
    assert not (root / "etc").exists() or not any((root / "etc").rglob("*"))


def test_the_policy_stays_while_another_harness_managed_install_uses_it(tmp_path, env):
    root = tmp_path / "r"
    governor("install", "claude-code", *SEATBELT, "--root", str(root), env=env)
    governor("install", "codex", *SEATBELT, "--root", str(root), env=env)
    where = managed.paths(str(root))
    (table,) = Path(where["config"]).glob("*.bpe")  # one table, Claude Code's install's: both count with it
    governor("uninstall", "codex", "--scope", "managed", "--root", str(root), env=env)
    assert Path(where["policy"]).exists() and Path(where["compiled"]).exists() and table.exists()
    assert not Path(where["record"]).exists() and not (root / "etc" / "codex").exists()
    governor("uninstall", "claude-code", "--scope", "managed", "--root", str(root), env=env)
    assert not (root / "etc" / "memory-governor").exists()


def test_doctor_fails_when_a_switch_is_off_or_a_file_is_writable(tmp_path, env):
    root = tmp_path / "r"
    governor("install", "codex", *SEATBELT, "--root", str(root), env=env)
    where = managed.paths(str(root))
    assert any(c.what == "guarantees" for c in managed.doctor(str(root), is_ours))
    path = Path(where["settings"])
    data = tomlkit.parse(path.read_text()).unwrap()
    data["features"]["hooks"] = False
    del data["allow_managed_hooks_only"]
    path.write_text(tomlkit.dumps(data))
    os.chmod(where["policy"], 0o666)
    Path(where["environment"]).write_text('{"MEMORY_GOVERNOR_LEDGER_URL": "redis://elsewhere/0"}\n')
    os.chmod(where["environment"], 0o666)  # every managed hook's ledger, rewritable by anyone
    bad = [c.detail for c in managed.doctor(str(root), is_ours) if c.status == BAD]
    assert any("hooks is not pinned to true" in d for d in bad), bad
    assert any("allow_managed_hooks_only is not true" in d for d in bad), bad
    assert any(f"{where['policy']}: mode 0666 is group- or world-writable" in d for d in bad), bad
    assert any(f"{where['environment']}: mode 0666 is group- or world-writable" in d for d in bad), bad


def test_the_install_writes_the_tokenizer_table_every_managed_hook_counts_with_and_uninstall_removes_it(
    tmp_path, env, monkeypatch
):
    """The managed hook reads tables only from the configuration folder, whatever the harness: the
    Codex install builds the policy's unit's table there (root's, 0644, in its record), doctor
    checks it with the rest and warns when it is missing, and its uninstall removes it."""
    from governor.engine import bpe, tokens
    from governor.harnesses.checks import WARN

    root = tmp_path / "r"
    out = governor("install", "codex", *SEATBELT, "--root", str(root), env=env)
    where = managed.paths(str(root))
    table = Path(shared_managed.table_path(where["config"], "o200k_base"))
    assert f"{table}: the tokenizer table every hook counts with" in out.stdout, out.stdout
    assert bpe.read(str(table), "o200k_base") is not None and stat.S_IMODE(table.stat().st_mode) == 0o644
    assert str(table) in managed.read_record(str(root))["created"]
    monkeypatch.setattr(tokens, "_counters", {})
    monkeypatch.setattr(tokens, "_quick_folder", None)
    monkeypatch.setattr(tokens, "_quick_builds", True)
    tokens.load_quickly(where["config"], build=False)  # as a managed hook loads its tables
    assert tokens.counter("o200k_base").quick, "a managed hook counts with the install's table"
    assert not [c for c in managed.doctor(str(root), is_ours) if c.status == WARN]
    os.chmod(table, 0o666)
    bad = [c.detail for c in managed.doctor(str(root), is_ours) if c.status == BAD]
    assert any(f"{table}: mode 0666 is group- or world-writable" in d for d in bad), bad
    table.unlink()
    warned = [c.detail for c in managed.doctor(str(root), is_ours) if c.status == WARN]
    assert warned == [f"no tokenizer table for o200k_base in {where['config']}: every hook that counts starts "
                      "tiktoken (~0.25 s)"], warned  # fmt: skip
    governor("install", "codex", *SEATBELT, "--root", str(root), env=env)
    assert table.exists(), "a second install builds it again"
    out = governor("uninstall", "codex", "--scope", "managed", "--root", str(root), env=env)
    assert f"{table}: removed" in out.stdout and not table.exists(), out.stdout
    assert not (root / "etc" / "memory-governor").exists()


def test_a_harness_without_a_managed_layer_is_refused(tmp_path, env):
    out = governor("install", "gemini-cli", "--scope", "managed", "--root", str(tmp_path / "r"), env=env, check=False)
    assert out.returncode != 0 and "has no managed scope" in out.stderr and "codex" in out.stderr, out.stderr
    assert not (tmp_path / "r").exists()
