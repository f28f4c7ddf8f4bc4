"""What an install leaves behind, for every harness: the same promises (governor.harnesses.settings).

An uninstall leaves a project (and HOME) as the install found it; a file it rewrites keeps its
mode; a backup never overwrites an earlier one, even within the same second.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.conftest import Env

HARNESSES = ["claude-code", "codex", "copilot", "gemini-cli", "opencode"]


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (stat.S_IMODE(p.stat().st_mode), p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*"))}  # fmt: skip


@pytest.mark.parametrize("harness", HARNESSES)
def test_uninstall_leaves_an_empty_project_as_it_found_it(env: Env, harness: str) -> None:
    env.cli("install", harness, check=True)
    assert tree(env.project), "the install wrote something"
    env.cli("uninstall", harness, check=True)
    assert tree(env.project) == {}, "no empty settings, no backup, no folder the install made"
    state = ".local/state"  # the default state directory keeps acceptance records (governor.policy.acceptance)
    assert {p for p in tree(env.home) if not (p == ".local" or p.startswith(state))} == set()


@pytest.mark.parametrize("harness", HARNESSES)
def test_after_an_uninstall_nothing_warns_that_the_hooks_changed(env: Env, harness: str) -> None:
    env.cli("install", harness, check=True)
    env.cli("uninstall", harness, check=True)
    doctor = env.cli("doctor")
    assert "changed since install" not in doctor.stdout, doctor.stdout
    start = {"session_id": "after", "hook_event_name": "SessionStart", "source": "startup", "cwd": str(env.project)}
    told = env.cli("hook", "claude-code", input=json.dumps(start))  # a hook another install still runs
    assert "changed since install" not in told.stdout + told.stderr


@pytest.mark.parametrize(("harness", "relative"), [("claude-code", ".claude/settings.json"),
                                                   ("gemini-cli", ".gemini/settings.json")])  # fmt: skip
def test_a_settings_file_keeps_its_mode_and_every_backup(env: Env, harness: str, relative: str) -> None:
    original = json.dumps({"env": {"A": "1"}}, indent=2) + "\n"
    settings = env.write(relative, original)
    settings.chmod(0o644)
    env.cli("install", harness, check=True)
    assert stat.S_IMODE(settings.stat().st_mode) == 0o644, "a shared settings file stays readable by the team"
    installed = settings.read_text()
    env.cli("uninstall", harness, check=True)  # within the same second as the install, as a script runs them
    assert stat.S_IMODE(settings.stat().st_mode) == 0o644
    assert json.loads(settings.read_text()) == json.loads(original)
    backups = sorted(settings.parent.glob(settings.name + ".bak-*"), key=lambda p: (len(p.name), p.name))
    assert [b.read_text() for b in backups] == [original, installed], "both backups kept, the original first"


def test_an_existing_folder_is_kept_and_a_file_the_user_had_stays(env: Env) -> None:
    env.write(".claude/commands/review.md", "# review\n")
    before = tree(env.project)
    env.cli("install", "claude-code", check=True)
    env.cli("uninstall", "claude-code", check=True)
    assert tree(env.project) == before
