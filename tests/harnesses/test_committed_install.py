"""A committed install on every clone: the project's settings run the same launcher everywhere,
and each machine's launcher finds that machine's governor, or says there is none.

Two virtual environments at different paths stand for two developers' machines (the package
installed from its wheel, as pip installs it for a user); a third machine has no governor. The
hook runs as Claude Code runs it: the settings' command in a shell, CLAUDE_PROJECT_DIR set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Env, build_wheel

SYSTEM_PATH = "/usr/bin:/bin"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def machine(where: Path, wheel: Path) -> Path:
    """A virtual environment at `where` with the governor installed from its wheel; its
    dependencies are this test run's (a .pth file), so nothing is downloaded."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True)  # fmt: skip
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    Path(site, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return where / "bin"


# harness -> (its project directory variable, its settings file, its before-tool event, a memory tool's name)
HARNESSES = {
    "claude-code": ("CLAUDE_PROJECT_DIR", ".claude/settings.json", "PreToolUse", "mcp__engram__mem_search"),
    "gemini-cli": ("GEMINI_PROJECT_DIR", ".gemini/settings.json", "BeforeTool", "mcp_engram_mem_search"),
    "codex": ("PWD", ".codex/hooks.json", "PreToolUse", "mcp__engram__mem_search"),  # Codex sets no project variable
}


def hook(command: str, project: Path, state: Path, path: str, payload: dict[str, Any],
         harness: str = "claude-code") -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {"PATH": path, "HOME": str(state.parent), HARNESSES[harness][0]: str(project), "LANG": "C.UTF-8",
           "MEMORY_GOVERNOR_STATE_DIR": str(state), "MEMORY_GOVERNOR_WARM_SERVER": "off"}  # fmt: skip
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True,
                          env=env, cwd=project, timeout=60)  # fmt: skip


def search(project: Path, session: str, harness: str = "claude-code") -> dict[str, Any]:
    _, _, event, tool = HARNESSES[harness]
    extra = {
        "claude-code": {"tool_use_id": "t1", "permission_mode": "default"},
        "codex": {"tool_use_id": "t1", "turn_id": "turn-1", "permission_mode": "default"},
        "gemini-cli": {"timestamp": "2026-01-01T00:00:00.000Z",
                       "mcp_context": {"server_name": "engram", "tool_name": "mem_search"}},
    }[harness]  # fmt: skip
    return {"session_id": session, "transcript_path": "/t.jsonl", "cwd": str(project), "hook_event_name": event,
            "tool_name": tool, "tool_input": {"query": "auth", "limit": 10}, **extra}  # fmt: skip


def start(project: Path, session: str) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/t.jsonl", "cwd": str(project),
            "hook_event_name": "SessionStart", "source": "startup"}  # fmt: skip


def installed_commands(project: Path, harness: str = "claude-code") -> set[str]:
    settings = json.loads((project / HARNESSES[harness][1]).read_text())
    return {h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]}


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_a_clone_on_a_machine_whose_governor_lives_elsewhere_is_governed_with_no_edit(
    tmp_path: Path, wheel: Path, harness: str
) -> None:
    lead = machine(tmp_path / "lead" / "venv", wheel)
    project = tmp_path / "lead" / "project"
    project.mkdir()
    (project / ".memory-governor").mkdir()
    (project / ".memory-governor" / "policy.yaml").write_text("on_error: closed\n")
    env = {"PATH": f"{lead}:{SYSTEM_PATH}", "HOME": str(tmp_path / "lead"),
           "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "lead" / "state")}  # fmt: skip
    subprocess.run([str(lead / "memory-governor"), "install", harness, "--project", str(project)],
                   check=True, capture_output=True, env=env)  # fmt: skip
    committed = {p.relative_to(project): p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert str(tmp_path) not in b"".join(committed.values()).decode(), "the committed files name no machine's path"
    (command,) = installed_commands(project, harness)

    # The teammate's clone: the same files, a governor at another path, the lead's gone.
    clone = tmp_path / "dev" / "clone"
    shutil.copytree(project, clone)
    dev = machine(tmp_path / "dev" / "elsewhere" / "env", wheel)
    shutil.rmtree(tmp_path / "lead")
    state = tmp_path / "dev" / "state"
    answer = hook(command, clone, state, f"{dev}:{SYSTEM_PATH}", search(clone, "dev-1", harness), harness)
    assert answer.returncode == 0 and answer.stdout, answer.stderr
    clamped = json.loads(answer.stdout)["hookSpecificOutput"]
    assert clamped.get("updatedInput", clamped.get("tool_input", {}))["limit"] == 3, "clamped: governed"
    assert (state / "ledger.db").exists(), "decided by this machine's governor, in its own state"
    # Installing on the clone (Codex records its hook trust per machine) changes no committed file.
    dev_env = {"PATH": f"{dev}:{SYSTEM_PATH}", "HOME": str(tmp_path / "dev"), "MEMORY_GOVERNOR_STATE_DIR": str(state)}
    subprocess.run([str(dev / "memory-governor"), "install", harness], cwd=clone, env=dev_env, check=True,
                   capture_output=True)  # fmt: skip
    assert {p.relative_to(clone): p.read_bytes() for p in clone.rglob("*") if p.is_file()} == committed
    doctor = subprocess.run([str(dev / "memory-governor"), "doctor"], capture_output=True, cwd=clone,
                            text=True, env={"PATH": f"{dev}:{SYSTEM_PATH}", "HOME": str(tmp_path / "dev"),
                                            "MEMORY_GOVERNOR_STATE_DIR": str(state)})  # fmt: skip
    assert "hook launcher" in doctor.stdout and f"runs {dev}/memory-governor" in doctor.stdout, doctor.stdout
    assert f"ok    {harness} hook " in doctor.stdout, doctor.stdout  # the installed command answers here
    assert "ok    hook launcher" in doctor.stdout, doctor.stdout


@pytest.mark.parametrize("harness", list(HARNESSES))
@pytest.mark.parametrize("on_error", ["closed", "open"])
def test_a_clone_on_a_machine_without_a_governor_says_so_and_applies_on_error(
    tmp_path: Path, on_error: str, harness: str
) -> None:
    project = tmp_path / "project"
    env = {"PATH": f"{os.path.dirname(sys.executable)}:{SYSTEM_PATH}", "HOME": str(tmp_path),
           "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "state")}  # fmt: skip
    (project / ".memory-governor").mkdir(parents=True)
    (project / ".memory-governor" / "policy.yaml").write_text(f"on_error: {on_error}  # the team's choice\n")
    subprocess.run([sys.executable, "-m", "governor", "install", harness, "--project", str(project)],
                   check=True, capture_output=True, env=env)  # fmt: skip
    (command,) = installed_commands(project, harness)
    assert str(tmp_path) not in command
    state = tmp_path / "nobody"
    told = hook(command, project, state, SYSTEM_PATH, start(project, "s1"), harness)
    assert (
        told.returncode == 0
        and "memory-governor is not installed on this machine" in json.loads(told.stdout)["systemMessage"]
    )
    assert f"on_error: {on_error}" in told.stdout, "the user is told what happens to memory calls"
    call = hook(command, project, state, SYSTEM_PATH, search(project, "s1", harness), harness)
    assert call.returncode == 0
    if on_error == "closed":
        refused = json.loads(call.stdout)
        refused = refused.get("hookSpecificOutput", refused)
        assert "deny" in (refused.get("permissionDecision"), refused.get("decision")), refused
        assert "not installed" in (refused.get("permissionDecisionReason") or refused.get("reason") or "")
    else:
        assert call.stdout == "", "open: the call passes, as the policy says"
    other = {**search(project, "s1", harness), "tool_name": "run_shell_command" if harness == "gemini-cli" else "Bash",
             "tool_input": {"command": "echo mcp__engram__mem_search"}}  # fmt: skip
    assert hook(command, project, state, SYSTEM_PATH, other, harness).stdout == "", "only memory calls are refused"
    assert not state.exists(), "nothing written on a machine without the governor"


def test_doctor_warns_when_the_committed_settings_name_this_machines_interpreter(env: Env) -> None:
    env.cli("install", "claude-code", "--scope", "local", check=True)  # what an older project install wrote
    local = env.project / ".claude" / "settings.local.json"
    local.rename(env.project / ".claude" / "settings.json")
    out = env.cli("doctor")
    assert "warn  hook launcher" in out.stdout and "names this machine's interpreter" in out.stdout, out.stdout
    env.cli("install", "claude-code", check=True)
    fixed = env.cli("doctor").stdout
    assert "ok    hook launcher" in fixed and "names this machine's interpreter" not in fixed, fixed


def test_a_governor_program_that_is_not_a_python_script_is_run_as_it_is(tmp_path: Path) -> None:
    """pip writes a `#!/bin/sh` exec line for an interpreter path too long for `#!`; a wrapper
    script in the user's PATH looks the same: the launcher runs the program itself."""
    project = tmp_path / "project"
    project.mkdir()
    env = {"PATH": SYSTEM_PATH, "HOME": str(tmp_path), "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "state")}
    subprocess.run([sys.executable, "-m", "governor", "install", "claude-code", "--project", str(project)],
                   check=True, capture_output=True, env=env)  # fmt: skip
    (command,) = installed_commands(project)
    program = tmp_path / "bin" / "memory-governor"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m governor "$@"\n')
    program.chmod(0o755)
    answer = hook(command, project, tmp_path / "dev-state", f"{program.parent}:{SYSTEM_PATH}", search(project, "w1"))
    assert json.loads(answer.stdout)["hookSpecificOutput"]["updatedInput"]["limit"] == 3, answer.stderr
    pointed = hook(command, project, tmp_path / "dev-state2", SYSTEM_PATH, search(project, "w2"))
    assert pointed.stdout == "", "no governor on PATH: nothing decided (on_error: open)"
