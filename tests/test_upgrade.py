"""Releases: the version a build says (and the commit it was built from), and an upgrade over a
running install, which keeps every count, the accepted policy and the turn in progress.

The package is installed from its wheel into a virtual environment (tests/harnesses/
test_committed_install.py `machine`), as pip or pipx installs it for a user; the hooks run as Claude
Code runs them, through the project's committed launcher.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from governor import __version__, checkout_commit
from tests.conftest import ROOT, build_wheel
from tests.harnesses.test_committed_install import SYSTEM_PATH, machine

COPY_IGNORE = shutil.ignore_patterns(".venv", ".git", ".cache", "tests", "build", "*.egg-info", "__pycache__",
                                     "node_modules", "docs")  # fmt: skip


def source_copy(where: Path, version: str | None = None, git: bool = False) -> Path:
    """A copy of the source tree (at another `version`; in a git repository of its own, committed)."""
    shutil.copytree(ROOT, where, ignore=COPY_IGNORE)
    if version is not None:
        init = where / "governor" / "__init__.py"
        init.write_text(init.read_text().replace(f'"{__version__}"', f'"{version}"', 1))
    if git:
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "release"]):
            subprocess.run(["git", "-c", "user.name=Team", "-c", "user.email=team@example.com", *args], cwd=where,
                           check=True, capture_output=True, timeout=60)  # fmt: skip
    return where


def governor(bin_dir: Path, *args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "memory-governor"), *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)  # fmt: skip


def test_the_version_says_the_commit_a_build_was_made_from(tmp_path: Path) -> None:
    released = machine(tmp_path / "released", build_wheel(tmp_path / "plain"))  # built outside any checkout
    env = {"PATH": SYSTEM_PATH, "HOME": str(tmp_path), "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "state")}
    said = governor(released, "--version", cwd=tmp_path, env=env)
    assert said.returncode == 0 and said.stdout == f"memory-governor {__version__}\n", said.stdout + said.stderr

    checkout = source_copy(tmp_path / "checkout", git=True)
    commit = checkout_commit(str(checkout))
    assert commit is not None and len(commit) == 12 and not commit.endswith(".dirty"), commit
    wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path / "built"), str(checkout)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert wheel.returncode == 0, wheel.stderr
    from_checkout = machine(tmp_path / "from-checkout", next((tmp_path / "built").glob("*.whl")))
    said = governor(from_checkout, "--version", cwd=tmp_path, env=env)
    assert said.stdout == f"memory-governor {__version__} (commit {commit})\n", said.stdout + said.stderr
    rows = {row["check"]: row for row in json.loads(governor(from_checkout, "doctor", "--format", "json",
                                                             cwd=tmp_path, env=env).stdout)}  # fmt: skip
    assert rows["memory-governor"]["detail"].startswith(f"{__version__}+g{commit} in "), rows["memory-governor"]
    report = json.loads(governor(from_checkout, "report", "--format", "json", cwd=tmp_path, env=env).stdout)
    assert report["governor"] == f"{__version__}+g{commit}"


def test_this_checkout_says_its_own_commit() -> None:
    commit = checkout_commit(str(ROOT))
    if commit is None:
        pytest.skip("this copy of the project is no git checkout")
    said = subprocess.run([sys.executable, "-m", "governor", "--version"], capture_output=True, text=True, cwd="/")
    clean = commit.removesuffix(".dirty")
    assert said.stdout.startswith(f"memory-governor {__version__} (commit {clean}"), said.stdout


def test_the_changelog_describes_this_release_for_someone_about_to_upgrade() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = [line.split()[1] for line in text.splitlines() if line.startswith("## ")]
    assert releases and releases[0] == __version__, f"CHANGELOG.md's newest release is not {__version__}: {releases}"
    newest = text.split(f"## {__version__}", 1)[1].split("\n## ", 1)[0]
    for section in ("### What the policy means now", "### What an upgrade does"):
        assert section in newest, f"the {__version__} entry has no {section!r}"
    for subject in ("ledger", "accepted polic"):
        assert subject in newest.split("### What an upgrade does", 1)[1], f"the upgrade notes say nothing of {subject}"


# -- an upgrade over a running install ---------------------------------------------------------


def _hook(project: Path, bin_dir: Path, home: Path, payload: dict[str, Any]) -> dict[str, Any]:
    command = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]["PreToolUse"][0]["hooks"][0]
    env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "HOME": str(home), "CLAUDE_PROJECT_DIR": str(project),
           "LANG": "C.UTF-8", "MEMORY_GOVERNOR_TRACE": "1"}  # fmt: skip
    base = {"session_id": "sess-up", "transcript_path": str(home / "t.jsonl"), "cwd": str(project),
            "permission_mode": "default", "prompt_id": "p-1"}  # fmt: skip
    run = subprocess.run(["/bin/sh", "-c", command["command"]], input=json.dumps({**base, **payload}),
                         capture_output=True, text=True, env=env, cwd=project, timeout=60)  # fmt: skip
    assert run.returncode == 0 and "could not decide" not in run.stdout + run.stderr, run.stderr
    return {"answer": json.loads(run.stdout) if run.stdout.strip() else {}, "stderr": run.stderr}


def _search(project: Path, bin_dir: Path, home: Path, n: int) -> dict[str, Any]:
    return _hook(project, bin_dir, home, {"hook_event_name": "PreToolUse", "tool_name": "mcp__engram__mem_search",
                                          "tool_input": {"query": f"q{n}", "limit": 3}, "tool_use_id": f"t{n}"})  # fmt: skip


def _denied(found: dict[str, Any]) -> bool:
    return found["answer"].get("hookSpecificOutput", {}).get("permissionDecision") == "deny"


def _running(bin_dir: Path, cwd: Path, env: dict[str, str]) -> str:
    for _ in range(150):
        out = governor(bin_dir, "serve", "--status", cwd=cwd, env=env)
        if out.returncode == 0:
            return out.stdout
        time.sleep(0.1)
    raise AssertionError("no warm server started")


def _gone(pid: int) -> bool:
    import os

    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_an_upgrade_over_a_running_install_keeps_every_count(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "project"
    (project / ".memory-governor").mkdir(parents=True)
    (project / ".memory-governor" / "policy.yaml").write_text("limits:\n  max_search_calls: 4\n")
    bin_dir = machine(tmp_path / "venv", build_wheel(tmp_path / "old"))
    env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "HOME": str(home), "LANG": "C.UTF-8"}
    assert governor(bin_dir, "install", "claude-code", cwd=project, env=env).returncode == 0
    _hook(project, bin_dir, home, {"hook_event_name": "SessionStart", "source": "startup"})
    _hook(project, bin_dir, home, {"hook_event_name": "UserPromptSubmit", "prompt": "what did we decide?"})
    running = _running(bin_dir, project, env)  # started by the first hook, as in every session
    assert [_denied(_search(project, bin_dir, home, n)) for n in range(2)] == [False, False]
    assert "answered by the warm server" in _search(project, bin_dir, home, 2)["stderr"]
    before = json.loads(governor(bin_dir, "report", "--format", "json", cwd=project, env=env).stdout)

    upgrade = subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "--quiet",
                              "--no-deps", "--no-index", "--upgrade",
                              str(build_wheel(tmp_path / "new", source_copy(tmp_path / "next", "99.0.0")))],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert upgrade.returncode == 0, upgrade.stderr
    assert governor(bin_dir, "--version", cwd=project, env=env).stdout == "memory-governor 99.0.0\n"

    # The same turn goes on under the new version: three searches were counted, the fourth is the last.
    fourth, fifth = _search(project, bin_dir, home, 3), _search(project, bin_dir, home, 4)
    assert (_denied(fourth), _denied(fifth)) == (False, True), (fourth, fifth)
    assert "held back" not in fourth["stderr"] + json.dumps(fourth["answer"]), "the accepted policy is still in force"
    after = json.loads(governor(bin_dir, "report", "--format", "json", cwd=project, env=env).stdout)
    (turn_before,), (turn_after,) = before["turns"], after["turns"]
    assert turn_before["usage"]["max_search_calls"] == 3 and turn_after["usage"]["max_search_calls"] == 4
    assert after["totals"]["denied"] == before["totals"]["denied"] + 1
    old = int(running.split("pid ")[1].rstrip(")\n"))
    assert _gone(old), "the old version's server retired at the new code's first request"
    doctor = json.loads(governor(bin_dir, "doctor", "--format", "json", cwd=project, env=env).stdout)
    rows = {row["check"]: row for row in doctor}
    assert rows["accepted policy"]["status"] == "ok" and rows["memory-governor"]["detail"].startswith("99.0.0 in ")
    governor(bin_dir, "serve", "--stop", cwd=project, env=env)
