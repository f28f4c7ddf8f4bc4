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


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> tuple[Path, Path]:
    """The lead's environment and a teammate's at another path, made once for the harnesses'
    tests (each test takes the lead's away while the teammate's governor decides)."""
    base = tmp_path_factory.mktemp("machines")
    return machine(base / "lead" / "venv", wheel), machine(base / "dev" / "elsewhere" / "env", wheel)


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
    "copilot": ("COPILOT_PROJECT_DIR", ".github/hooks/memory-governor.json", "preToolUse", "engram-mem_search"),
    # OpenCode runs no hook command: its plugin does, loaded here by node as OpenCode loads it.
    "opencode": ("PWD", ".opencode/plugin/memory-governor.js", "tool.execute.before", "engram_mem_search"),
}
SHELL_TOOL = {"gemini-cli": "run_shell_command", "copilot": "bash", "opencode": "bash"}

# OpenCode's side of its plugin: load it as `opencode run` does, then hand it one event (a
# session's first message, or a tool call), and print what the plugin did with the tool's
# arguments (nothing when it left them alone, or the error it threw). What the plugin says for the user goes to stderr, as it
# does under `opencode run`.
PLUGIN_DRIVER = """
const { MemoryGovernor } = await import(process.env.PLUGIN)
const info = { id: "ses_1", parentID: "", agent: "build", time: { created: Date.now() } }
const client = { session: { get: async () => ({ data: info }) } }
const hooks = await MemoryGovernor({ client, directory: process.env.PROJECT, worktree: process.env.PROJECT })
const step = JSON.parse(process.env.STEP)
if (step.prompt) {
  const output = { message: { id: "msg_1" }, parts: [{ id: "prt_1", type: "text", text: step.prompt }] }
  await hooks["chat.message"]({ sessionID: "ses_1" }, output)
  process.stdout.write(JSON.stringify({ parts: output.parts.length }))
} else {
  const output = { args: { ...step.args } }
  try {
    await hooks["tool.execute.before"]({ tool: step.tool, sessionID: "ses_1", callID: "call_1" }, output)
    const same = JSON.stringify(output.args) === JSON.stringify(step.args)
    process.stdout.write(same ? "" : JSON.stringify({ args: output.args }))
  } catch (err) {
    process.stdout.write(JSON.stringify({ deny: err.message }))
  }
}
"""


def hook(command: str, project: Path, state: Path, path: str, payload: dict[str, Any],
         harness: str = "claude-code") -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The installed command run as the harness runs it (OpenCode: its plugin, in node)."""
    env = {"PATH": path, "HOME": str(state.parent), HARNESSES[harness][0]: str(project), "LANG": "C.UTF-8",
           "MEMORY_GOVERNOR_STATE_DIR": str(state), "MEMORY_GOVERNOR_WARM_SERVER": "off"}  # fmt: skip
    if harness == "opencode":
        node = shutil.which("node")
        if node is None:
            if os.environ.get("CI") == "true":
                pytest.fail("node is required under CI")
            pytest.skip("node is not installed")
        driver = state.parent / "driver.mjs"
        driver.write_text(PLUGIN_DRIVER)
        env.update(PLUGIN=(project / command).as_uri(), PROJECT=str(project), STEP=json.dumps(payload))
        return subprocess.run([node, str(driver), "run"], capture_output=True, text=True, env=env, cwd=project,
                              timeout=60)  # fmt: skip
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True,
                          env=env, cwd=project, timeout=60)  # fmt: skip


def tool_call(project: Path, session: str, harness: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    event = HARNESSES[harness][2]
    if harness == "copilot":  # its own dialect: no event name, no call id
        return {"sessionId": session, "timestamp": 1767225600000, "cwd": str(project), "toolName": tool,
                "toolArgs": tool_input}  # fmt: skip
    if harness == "opencode":
        return {"tool": tool, "args": tool_input}
    extra = {
        "claude-code": {"tool_use_id": "t1", "permission_mode": "default"},
        "codex": {"tool_use_id": "t1", "turn_id": "turn-1", "permission_mode": "default"},
        "gemini-cli": {"timestamp": "2026-01-01T00:00:00.000Z"},
    }[harness]  # fmt: skip
    if harness == "gemini-cli" and tool.startswith("mcp_"):
        extra["mcp_context"] = {"server_name": "engram", "tool_name": "mem_search"}
    return {"session_id": session, "transcript_path": "/t.jsonl", "cwd": str(project), "hook_event_name": event,
            "tool_name": tool, "tool_input": tool_input, **extra}  # fmt: skip


def search(project: Path, session: str, harness: str = "claude-code") -> dict[str, Any]:
    return tool_call(project, session, harness, HARNESSES[harness][3], {"query": "auth", "limit": 10})


def shell(project: Path, session: str, harness: str, command: str) -> dict[str, Any]:
    return tool_call(project, session, harness, SHELL_TOOL.get(harness, "Bash"), {"command": command})


def start(project: Path, session: str, harness: str = "claude-code") -> dict[str, Any]:
    if harness == "copilot":
        return {"sessionId": session, "timestamp": 1767225600000, "cwd": str(project), "source": "new",
                "initialPrompt": "What did we decide about auth?"}  # fmt: skip
    if harness == "opencode":
        return {"prompt": "What did we decide about auth?"}
    return {"session_id": session, "transcript_path": "/t.jsonl", "cwd": str(project),
            "hook_event_name": "SessionStart", "source": "startup"}  # fmt: skip


def answer_of(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """What the hook (or the plugin) answered, with a harness's nesting undone; {} for no answer."""
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout) if run.stdout.strip() else {}
    return {**data, **data.get("hookSpecificOutput", {})}


def clamped_limit(answer: dict[str, Any]) -> Any:
    rewritten = answer.get("updatedInput") or answer.get("tool_input") or answer.get("modifiedArgs") or answer.get(
        "args") or {}  # fmt: skip
    return rewritten.get("limit")


def refusal(answer: dict[str, Any]) -> str | None:
    """The reason of a refusal, in whichever harness's shape; None when the call is not refused."""
    if "deny" in (answer.get("permissionDecision"), answer.get("decision")):
        return str(answer.get("permissionDecisionReason") or answer.get("reason") or "")
    return answer["deny"] if isinstance(answer.get("deny"), str) else None


def installed_commands(project: Path, harness: str = "claude-code") -> set[str]:
    if harness == "opencode":  # the plugin file is what OpenCode runs
        return {HARNESSES[harness][1]}
    settings = json.loads((project / HARNESSES[harness][1]).read_text())
    if harness == "copilot":  # its own format: flat entries, the command under `bash`
        return {entry["bash"] for entries in settings["hooks"].values() for entry in entries}
    return {h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]}


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_a_clone_on_a_machine_whose_governor_lives_elsewhere_is_governed_with_no_edit(
    tmp_path: Path, two_machines: tuple[Path, Path], harness: str
) -> None:
    lead, dev = two_machines
    project = tmp_path / "lead" / "project"
    project.mkdir(parents=True)
    (project / ".memory-governor").mkdir()
    (project / ".memory-governor" / "policy.yaml").write_text("on_error: closed\n")
    env = {"PATH": f"{lead}:{SYSTEM_PATH}", "HOME": str(tmp_path / "lead"),
           "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "lead" / "state")}  # fmt: skip
    subprocess.run([str(lead / "memory-governor"), "install", harness, "--project", str(project)],
                   check=True, capture_output=True, env=env)  # fmt: skip
    committed = {p.relative_to(project): p.read_bytes() for p in project.rglob("*") if p.is_file()}
    written = b"".join(committed.values()).decode()
    assert str(tmp_path) not in written and str(lead.parent) not in written, (
        "the committed files name no machine's path"
    )
    (command,) = installed_commands(project, harness)

    # The teammate's clone: the same files, a governor at another path, the lead's gone.
    clone = tmp_path / "dev" / "clone"
    shutil.copytree(project, clone)
    shutil.rmtree(tmp_path / "lead")
    gone = lead.parent.with_name("gone")
    lead.parent.rename(gone)  # back after the test, for the next harness's
    try:
        _governed_on_the_clone(tmp_path, clone, dev, committed, harness, command)
    finally:
        gone.rename(lead.parent)


def _governed_on_the_clone(tmp_path: Path, clone: Path, dev: Path, committed: dict[Path, bytes], harness: str,
                           command: str) -> None:  # fmt: skip
    state = tmp_path / "dev" / "state"
    answer = hook(command, clone, state, f"{dev}:{SYSTEM_PATH}", search(clone, "dev-1", harness), harness)
    assert clamped_limit(answer_of(answer)) == 3, f"clamped: governed ({answer.stdout} {answer.stderr})"
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
    answers = "ok    opencode plugin" if harness == "opencode" else f"ok    {harness} hook "
    assert answers in doctor.stdout, doctor.stdout  # the installed command answers here
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
    told = hook(command, project, state, SYSTEM_PATH, start(project, "s1", harness), harness)
    said = told.stderr if harness == "opencode" else answer_of(told).get("systemMessage", "")
    assert "memory-governor is not installed on this machine" in said, told
    assert f"on_error: {on_error}" in said, "the user is told what happens to memory calls"
    if harness == "copilot":  # it shows the user nothing a hook prints in -p mode: the model is told, to pass it on
        assert answer_of(told)["additionalContext"].startswith("Tell the user, once: memory-governor is not installed")
    call = answer_of(hook(command, project, state, SYSTEM_PATH, search(project, "s1", harness), harness))
    routed = answer_of(hook(command, project, state, SYSTEM_PATH,
                            shell(project, "s1", harness, "engram search auth --limit 50"), harness))  # fmt: skip
    if on_error == "closed":
        assert "not installed" in (refusal(call) or ""), call
        assert "not installed" in (refusal(routed) or ""), "the memory through the shell is refused too"
    else:
        assert refusal(call) is None and clamped_limit(call) is None, "open: the call passes, as the policy says"
        assert refusal(routed) is None
    other = answer_of(hook(command, project, state, SYSTEM_PATH, shell(project, "s1", harness, "ls src"), harness))
    assert refusal(other) is None, "only memory calls are refused"
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


def test_a_decoy_site_packages_planted_in_the_environment_is_never_run(tmp_path: Path, wheel: Path) -> None:
    """The launcher runs the entry file of the environment's own site-packages, chosen by its
    interpreter's version (pyvenv.cfg here: pip's `#!` names bin/python), not the first
    lib/python3*/ folder a glob finds: a planted lib/python3.0/ (which sorts first) is not run."""
    bin_dir = machine(tmp_path / "venv", wheel)
    decoy = tmp_path / "venv" / "lib" / "python3.0" / "site-packages" / "governor" / "runtime" / "entry.py"
    decoy.parent.mkdir(parents=True)
    decoy.write_text('print(\'{"systemMessage": "decoy"}\')\n')
    project = tmp_path / "project"
    project.mkdir()
    env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "HOME": str(tmp_path), "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "s")}
    subprocess.run([str(bin_dir / "memory-governor"), "install", "claude-code", "--project", str(project)],
                   check=True, capture_output=True, env=env)  # fmt: skip
    (command,) = installed_commands(project)
    answer = hook(command, project, tmp_path / "state", f"{bin_dir}:{SYSTEM_PATH}", search(project, "d1"))
    assert "decoy" not in answer.stdout and clamped_limit(answer_of(answer)) == 3, answer.stdout
    # ... and it is the direct start (the entry file, -I -S), not the slower run of the program.
    traced = subprocess.run(["/bin/sh", "-x", str(project / ".memory-governor" / "hook"), "claude-code"],
                            input=json.dumps(search(project, "d2")), capture_output=True, text=True, cwd=project,
                            env={**env, "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "state")}, timeout=60)  # fmt: skip
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f"-I -S {tmp_path}/venv/lib/python{version}/site-packages/governor/runtime/entry.py" in traced.stderr, (
        traced.stderr
    )


def test_the_launchers_routes_are_the_shipped_routes_to_the_memory() -> None:
    """Without a governor the launcher cannot read the policy: the tools it checks for a route to
    the memory are those of the shipped routes that lead to it (`use:`)."""
    import yaml

    from governor.harnesses import launcher
    from tests.conftest import SHIPPED

    routes = yaml.safe_load(SHIPPED.read_text())["routes"]
    shipped = {tool for route in routes if route.get("use") for tool in route["tools"]}
    assert set(launcher.ROUTE_TOOLS) == shipped


def test_codex_runs_the_launcher_of_the_session_folder_wherever_git_says_the_top_is(
    tmp_path: Path, wheel: Path
) -> None:
    """Codex names no project directory to its hooks and runs them in the session's folder. The
    launcher is found from there, so neither `git config core.worktree DIR` (which moves `git
    rev-parse --show-toplevel` to DIR), nor a `.git` file pointing elsewhere, nor a launcher planted
    below the project runs instead."""
    bin_dir = machine(tmp_path / "venv", wheel)
    project = tmp_path / "project"
    (project / ".memory-governor").mkdir(parents=True)
    (project / ".memory-governor" / "policy.yaml").write_text("on_error: closed\n")
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q", str(project)], check=True, capture_output=True)
    state = tmp_path / "state"
    path = f"{bin_dir}:{SYSTEM_PATH}"
    env = {"PATH": path, "HOME": str(tmp_path), "MEMORY_GOVERNOR_STATE_DIR": str(state)}
    subprocess.run([str(bin_dir / "memory-governor"), "install", "codex", "--project", str(project)], check=True,
                   capture_output=True, env=env)  # fmt: skip
    (command,) = installed_commands(project, "codex")

    def limit(session: str, folder: Path = project) -> Any:
        run = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(search(project, session, "codex")),
                             capture_output=True, text=True, cwd=folder, timeout=60,
                             env={**env, "LANG": "C.UTF-8", "MEMORY_GOVERNOR_WARM_SERVER": "off"})  # fmt: skip
        return clamped_limit(answer_of(run))

    assert limit("before") == 3
    # The model's plant: a launcher that answers nothing, beside a hooks file, in a folder of its choosing.
    elsewhere = tmp_path / "elsewhere"
    for folder in (elsewhere, project / "src"):
        (folder / ".memory-governor").mkdir(parents=True)
        (folder / ".memory-governor" / "hook").write_text("exit 0\n")
    (elsewhere / ".codex").mkdir()
    shutil.copy(project / ".codex" / "hooks.json", elsewhere / ".codex" / "hooks.json")
    subprocess.run([git, "-C", str(project), "config", "core.worktree", str(elsewhere)], check=True)
    top = subprocess.run([git, "rev-parse", "--show-toplevel"], capture_output=True, text=True, cwd=project)
    assert top.stdout.strip() == str(elsewhere), "git now says the top is the model's folder"
    assert limit("worktree") == 3
    assert limit("from-below", project / "src") == 3, "a session in a subfolder finds the project's launcher"

    (project / ".git").rename(tmp_path / "moved.git")  # a `.git` file naming a repository elsewhere
    (project / ".git").write_text(f"gitdir: {tmp_path / 'moved.git'}\n")
    assert limit("git-file") == 3


def _no_governor_project(tmp_path: Path, harness: str, policy: str, git: bool = False) -> tuple[Path, str]:
    """A project with the launcher installed and `policy` as its policy file (committed, `git`),
    and the hook command its settings run, for a machine with no governor."""
    project = tmp_path / "project"
    env = {"PATH": f"{os.path.dirname(sys.executable)}:{SYSTEM_PATH}", "HOME": str(tmp_path),
           "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "state")}  # fmt: skip
    (project / ".memory-governor").mkdir(parents=True)
    (project / ".memory-governor" / "policy.yaml").write_text(policy)
    subprocess.run([sys.executable, "-m", "governor", "install", harness, "--project", str(project)],
                   check=True, capture_output=True, env=env)  # fmt: skip
    if git:
        for args in (
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
        ):
            subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, env=env)
    (command,) = installed_commands(project, harness)
    return project, command


@pytest.mark.parametrize("harness", [h for h in HARNESSES if h != "opencode"])
def test_a_megabyte_payload_is_answered_without_a_governor(tmp_path: Path, harness: str) -> None:
    """The launcher reads a bounded prefix and finds each key in one linear pass: a 1 MB argument
    (Copilot's payloads never name their event) is answered under on_error: closed, the memory
    call refused and a shell command too long to read refused too, well inside the hook timeout
    (the subprocess timeout is the failure signal: before, sh took hours on this)."""
    project, command = _no_governor_project(tmp_path, harness, "on_error: closed\n")
    state = tmp_path / "nobody"
    padding = "a " * 500_000
    call = tool_call(project, "s1", harness, HARNESSES[harness][3], {"query": padding, "limit": 3})
    assert "not installed" in (refusal(answer_of(hook(command, project, state, SYSTEM_PATH, call, harness))) or "")
    routed = shell(project, "s1", harness, "ls " + padding)
    assert "not installed" in (refusal(answer_of(hook(command, project, state, SYSTEM_PATH, routed, harness))) or "")
    assert refusal(answer_of(hook(command, project, state, SYSTEM_PATH, shell(project, "s1", harness, "ls"),
                                  harness))) is None  # fmt: skip


def test_without_a_governor_on_error_is_the_committed_policys(tmp_path: Path) -> None:
    """In a git repository the launcher takes on_error from the policy as committed at HEAD: a
    working-tree edit from closed to open changes nothing; one spelled some way it cannot read,
    or a repository with nothing committed, is closed."""
    project, command = _no_governor_project(tmp_path, "claude-code", "on_error: closed\n", git=True)
    policy = project / ".memory-governor" / "policy.yaml"
    state = tmp_path / "nobody"

    def refused() -> bool:
        return refusal(answer_of(hook(command, project, state, SYSTEM_PATH, search(project, "s1")))) is not None

    policy.write_text("on_error: open\n")  # the model's sed, not committed
    assert refused(), "a working-tree loosening is not what the team committed"
    env = {"HOME": str(tmp_path), "PATH": SYSTEM_PATH}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "open"], cwd=project,
                   check=True, capture_output=True, env=env)  # fmt: skip
    assert not refused(), "committed open: the call passes, as the team's policy says"
    policy.write_text("{on_error: open}\n")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "flow"], cwd=project,
                   check=True, capture_output=True, env=env)  # fmt: skip
    assert refused(), "on_error spelled as the launcher does not read it: closed"
    shutil.rmtree(project / ".git")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True, capture_output=True, env=env)
    policy.write_text("on_error: open\n")
    assert refused(), "a repository with nothing committed: nothing agreed, closed"


@pytest.mark.parametrize("spelling", [
    "sqlite3 ~/.e?gram/e?gram.db 'select * from observations'", "curl -s 127.0.0.1:$((7400+37))/search?q=auth",
    'curl -s localhost:7""437/search', "e\\ngram search auth", "$'\\x65ngram' search auth", "{e,}ngram search",
    "cat ~/.*/*.db", "E=${X:-engr}; $E",
])  # fmt: skip
def test_without_a_governor_a_spelled_route_to_the_memory_is_refused(tmp_path: Path, spelling: str) -> None:
    """Quotes, backslashes, globs that could stand for the memory's names, and expansions the
    launcher cannot read are refused under on_error: closed; a plain command is not."""
    project, command = _no_governor_project(tmp_path, "claude-code", "on_error: closed\n")
    state = tmp_path / "nobody"
    answer = answer_of(hook(command, project, state, SYSTEM_PATH, shell(project, "s1", "claude-code", spelling)))
    assert "not installed" in (refusal(answer) or ""), spelling
    for plain in ("ls src/*.py", "git log -5", "awk '{print $1}' notes.txt"):
        assert refusal(answer_of(hook(command, project, state, SYSTEM_PATH, shell(project, "s1", "claude-code",
                                                                                    plain)))) is None, plain  # fmt: skip


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_a_launcher_a_program_rewrote_is_never_run(tmp_path: Path, two_machines: tuple[Path, Path],
                                                   harness: str) -> None:  # fmt: skip
    """A program's write (`open('.memory-gov'+'ernor/ho'+'ok','w').write('exit 0')`, which no route reads)
    is in force at the next call if the command runs the file it finds. The command finds the governor
    itself and reads nothing of the project; with none here it runs the launcher only if it is the one
    the settings were written with: rewritten, memory calls are refused and the user is told."""
    _, dev = two_machines
    project = tmp_path / "project"
    (project / ".memory-governor").mkdir(parents=True)
    (project / ".memory-governor" / "policy.yaml").write_text("on_error: open\n")
    env = {"PATH": f"{dev}:{SYSTEM_PATH}", "HOME": str(tmp_path), "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "st")}
    subprocess.run([str(dev / "memory-governor"), "install", harness, "--project", str(project)], check=True,
                   capture_output=True, env=env)  # fmt: skip
    (command,) = installed_commands(project, harness)
    launcher = project / ".memory-governor" / "hook"
    with open(launcher, "w") as handle:  # as a program writes it
        handle.write("exit 0\n")
    state = tmp_path / "state"
    governed = answer_of(hook(command, project, state, f"{dev}:{SYSTEM_PATH}", search(project, "s1", harness),
                              harness))  # fmt: skip
    assert clamped_limit(governed) == 3, "a governor here decides: the rewritten file is not what runs"
    launcher.unlink()
    again = answer_of(hook(command, project, state, f"{dev}:{SYSTEM_PATH}", search(project, "s2", harness), harness))
    assert clamped_limit(again) == 3, "nothing of the project is read to find the governor"
    launcher.write_text("exit 0\n")
    # A machine without a governor: the launcher is checked before it runs (the shipped on_error: open
    # would pass memory calls through it, and a rewritten one could do anything else).
    told = hook(command, project, state, SYSTEM_PATH, start(project, "s3", harness), harness)
    said = told.stderr if harness == "opencode" else answer_of(told).get("systemMessage", "") + told.stderr
    assert "is not the launcher these hook settings were installed with" in said, told
    call = answer_of(hook(command, project, state, SYSTEM_PATH, search(project, "s3", harness), harness))
    assert "not the launcher" in (refusal(call) or ""), call
    other = answer_of(hook(command, project, state, SYSTEM_PATH, shell(project, "s3", harness, "ls src"), harness))
    assert refusal(other) is None, "only memory calls are refused"


def test_the_hook_command_starts_no_process_before_the_governor(
    tmp_path: Path, two_machines: tuple[Path, Path]
) -> None:
    """What makes the command cost what the direct one does: from the shell the harness starts to the
    governor's interpreter, no fork and no second sh (traced: every execve and clone of the command)."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    _, dev = two_machines
    project = tmp_path / "project"
    project.mkdir()
    env = {"PATH": f"{dev}:{SYSTEM_PATH}", "HOME": str(tmp_path), "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "st"),
           "MEMORY_GOVERNOR_WARM_SERVER": "off", "CLAUDE_PROJECT_DIR": str(project)}  # fmt: skip
    subprocess.run([str(dev / "memory-governor"), "install", "claude-code", "--project", str(project)], check=True,
                   capture_output=True, env=env)  # fmt: skip
    (command,) = installed_commands(project)
    log = tmp_path / "trace"
    subprocess.run([strace, "-f", "-s", "4096", "-e", "trace=execve,clone,clone3,fork,vfork", "-o", str(log), "/bin/sh", "-c",
                    command], input=json.dumps(search(project, "s1")).encode(), env=env, cwd=project,
                   capture_output=True, timeout=60)  # fmt: skip
    lines = log.read_text().splitlines()
    execs = [line for line in lines if "execve(" in line]
    assert len(execs) == 2, "\n".join(execs)  # sh, then the interpreter
    assert "/bin/python" in execs[1] and '"-I", "-S"' in execs[1] and "entry.py" in execs[1], execs[1]
    before = lines[: lines.index(execs[1])]
    assert not [line for line in before if "clone" in line or "fork" in line], "\n".join(before)
