"""Three newcomers' journeys, from a fresh clone, each as its person follows the docs.

    python scripts/journeys.py                        # all three
    python scripts/journeys.py developer lead author  # some of them

- **developer** (README.md): install memory-governor isolated (`pipx install`), install it into a
  project for Claude Code, check it with `doctor`, feed the hook the README's payloads (with a warm
  server started from another project), run a Claude Code session against Engram, read `report`,
  `uninstall`.
- **lead** (docs/teams.md): write the team policy, check, diff and test it, install and commit the
  hooks, accept the policy; a teammate's clone on another machine is governed with no edit; a
  tightening is in force at once and a loosening waits for the teammate's `policy accept`; a
  managed install (into a staging root); the ledger on Redis shared by two hosts; telemetry to a
  collector.
- **author** (README.md "Orchestrators", docs/claude-agent-sdk.md): a program on the Claude Agent
  SDK governs its agents with `govern()`.

Each person has a HOME of their own (so a state directory of their own) in a temporary folder; the
clone is `git clone` of this checkout at HEAD, with its uncommitted changes to tracked files. Every
command runs as a process, as the person types it; each check says what it checked. The first that
fails ends that journey, and the run exits 1. The real components run: the pinned Claude Code
(tests/e2e's cache), the Claude Agent SDK from PyPI, Debian's redis-server, pipx. What pipx and pip
install comes from a folder of wheels in tests/e2e's cache, fetched from the package index the first
time (so later runs are offline). A component missing: the journey is skipped with the reason
(exit 0), except under CI=true (exit 1). `./scripts/test.sh` installs them;
tests/e2e/test_journeys.py runs this script.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / "tests" / "e2e"
sys.path[:0] = [str(ROOT), str(E2E)]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PROMPT = "What did we decide about auth, search, the repository layer and storage?"
TOPICS = ("jwt auth", "fts5 search", "repository errors", "sqlite storage")


class Failed(Exception):
    """A step did not do what the docs say."""


class Unavailable(Exception):
    """A component a journey needs is not on this machine."""


def say(line: str = "") -> None:
    print(line, flush=True)


def check(holds: bool, what: str, detail: Any = "") -> None:
    if not holds:
        raise Failed(f"{what}\n{textwrap.indent(str(detail), '    ')}" if detail != "" else what)
    say(f"  ok: {what}")


def need(condition: bool, reason: str) -> None:
    if not condition:
        raise Unavailable(reason)


def wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


class Person:
    """Someone at a shell: a HOME of their own, memory-governor on PATH as pipx put it there."""

    def __init__(self, base: Path, name: str, bin_dir: Path, **env: str) -> None:
        self.name = name
        self.home = base / name
        self.home.mkdir(parents=True, exist_ok=True)
        self.env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "HOME": str(self.home), "LANG": "C.UTF-8", "TERM": "dumb",
                    "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": f"{name}@example.com",
                    "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": f"{name}@example.com", **env}  # fmt: skip

    def run(self, command: str, cwd: Path, code: int | None = 0, stdin: str = "", env: dict[str, str] | None = None,
            show: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """`command` typed at this person's shell in `cwd`; its exit code must be `code` (None: any)."""
        say(f"{self.name}:{cwd.name}$ {command}")
        proc = subprocess.run(["sh", "-c", command], cwd=cwd, env={**self.env, **(env or {})}, input=stdin,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
        if show:
            lines = (proc.stdout + proc.stderr).rstrip("\n").splitlines()
            for line in lines[:12]:
                say(f"    {line[:160]}")
            if len(lines) > 12:
                say(f"    ... ({len(lines) - 12} more lines)")
        if code is not None and proc.returncode != code:
            raise Failed(f"`{command}` exited {proc.returncode}, not {code}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def at_terminal(self, command: str, cwd: Path, typed: str = "y\n") -> str:
        """`command` in this person's own terminal (a pty: `policy accept` asks a person)."""
        from tests.terminal import at_a_terminal

        say(f"{self.name}:{cwd.name}$ {command}    (in a terminal, answering {typed.strip()!r})")
        out = at_a_terminal(["sh", "-c", command], cwd, self.env, typed)
        for line in out.stdout.strip().splitlines()[:8]:
            say(f"    {line[:160]}")
        if out.returncode != 0:
            raise Failed(f"`{command}` exited {out.returncode}:\n{out.stdout}")
        return out.stdout

    def hook(self, project: Path, payload: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
        """One Claude Code event through the hook command the project's settings hold, as Claude Code
        runs it (the shell, in the project, CLAUDE_PROJECT_DIR set); its answer, with `_stderr`."""
        settings = json.loads((project / ".claude" / "settings.json").read_text())
        command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        base = {"session_id": "s", "transcript_path": str(self.home / "t.jsonl"), "cwd": str(project),
                "permission_mode": "default"}  # fmt: skip
        proc = subprocess.run(["sh", "-c", command], cwd=project, input=json.dumps({**base, **payload}),
                              env={**self.env, "CLAUDE_PROJECT_DIR": str(project), **(env or {})},
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        if proc.returncode != 0 or "Traceback" in proc.stderr:
            raise Failed(f"the hook exited {proc.returncode}: {proc.stderr}")
        answer = json.loads(proc.stdout) if proc.stdout.strip() else {}
        return {**answer, "_stderr": proc.stderr}

    def searches(self, project: Path, session: str, turn: str, count: int, env: dict[str, str] | None = None,
                 first: int = 0) -> list[dict[str, Any]]:  # fmt: skip
        """`count` searches in turn `turn` of `session` (a new turn's prompt first, unless `first` says
        the turn has had searches already): each one's answer."""
        if not first:
            self.hook(project, {"session_id": session, "prompt_id": turn, "hook_event_name": "UserPromptSubmit",
                                "prompt": "what did we decide about the cache?"}, env)  # fmt: skip
        return [self.hook(project, {"session_id": session, "prompt_id": turn, "hook_event_name": "PreToolUse",
                                    "tool_name": "mcp__engram__mem_search", "tool_use_id": f"{turn}-{n}",
                                    "tool_input": {"query": f"q{n}", "limit": 1}}, env)
                for n in range(first, first + count)]  # fmt: skip


def refused(answer: dict[str, Any]) -> bool:
    return answer.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"


def refusals(answers: list[dict[str, Any]]) -> list[bool]:
    return [refused(a) for a in answers]


def told(answer: dict[str, Any]) -> str:
    return str(answer.get("systemMessage", "")) + answer.get("_stderr", "")


def doctor_rows(person: Person, project: Path, *options: str) -> dict[str, dict[str, str]]:
    out = person.run(f"memory-governor {' '.join(options)} doctor --format json".replace("  ", " "), project,
                     code=None, show=False)  # fmt: skip
    rows = json.loads(out.stdout)
    for row in rows:
        say(f"    {row['status']:5} {row['check']:20} {row['detail'][:120]}")
    return {row["check"]: row for row in rows}


# -- the fresh clone and the install the README gives -----------------------------------------------------


def fresh_clone(where: Path) -> Path:
    """`git clone` of this checkout at HEAD, with its uncommitted changes to tracked files (a commit
    `git stash create` makes of them, which changes nothing here)."""
    clone = where / "memory-governor"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    pending = subprocess.run(["git", "-C", str(ROOT), "stash", "create"], capture_output=True, text=True).stdout.strip()
    if pending:
        subprocess.run(["git", "-C", str(clone), "fetch", "--quiet", str(ROOT), pending], check=True,
                       capture_output=True, timeout=300)  # fmt: skip
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", pending], check=True, capture_output=True)
    return clone


EXTRAS = "redis,telemetry"  # what the lead's journey uses (docs/teams.md): the ledger on Redis, telemetry


def wheels() -> Path:
    """A folder of wheels of everything the journeys install (the package's dependencies with the
    extras they use, pip and setuptools to build it), in tests/e2e's cache: fetched from the
    package index the first time, so later runs install offline."""
    import npm

    folder = npm.cache_root() / "journey-wheels"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def offline(install: Callable[[dict[str, str]], subprocess.CompletedProcess[str]], clone: Path
            ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run `install` (given pip's environment) from the wheels folder alone; when something is
    missing there, fetch it (the package index) and try once more."""
    folder = wheels()
    pip_env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(folder), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = install(pip_env)
    if done.returncode == 0:
        return done
    python = shutil.which("python3", path=SYSTEM_PATH) or sys.executable  # what pipx and `python3 -m venv` run
    fetched = subprocess.run([python, "-m", "pip", "download", "--quiet", "--dest", str(folder),
                              f"{clone}[{EXTRAS},sdk]", "pip", "setuptools>=64", "wheel"], capture_output=True,
                             text=True, timeout=1800)  # fmt: skip
    need(fetched.returncode == 0, f"the wheels the journeys install could not be fetched: {fetched.stderr[-1500:]}")
    return install(pip_env)


def pipx_install(base: Path, clone: Path) -> Path:
    """`pipx install` from the clone, as the README says, into a pipx home of this run's own; the
    folder of the `memory-governor` it puts on PATH."""
    need(shutil.which("pipx") is not None, "pipx is not installed (apt-get install pipx)")
    env = {**os.environ, "PIPX_HOME": str(base / "pipx"), "PIPX_BIN_DIR": str(base / "bin"),
           "PIPX_MAN_DIR": str(base / "man")}  # fmt: skip
    say(f"{clone.name}$ pipx install '.[{EXTRAS}]'")
    done = offline(lambda pip: subprocess.run(["pipx", "install", "--force", f".[{EXTRAS}]"], cwd=clone,
                                              env={**env, **pip}, capture_output=True, text=True, timeout=900),
                   clone)  # fmt: skip
    if done.returncode != 0:
        raise Failed(f"pipx install failed:\n{done.stdout}\n{done.stderr}")
    return base / "bin"


# -- the developer (README.md) -----------------------------------------------------------------------


def developer(base: Path, bin_dir: Path) -> None:
    dev = Person(base, "dev", bin_dir)
    version = dev.run("memory-governor --version", dev.home)
    commit = subprocess.run(["git", "-C", str(base / "memory-governor"), "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    check(f"(commit {commit}" in version.stdout, "--version names the release and the commit it was built from",
          version.stdout)  # fmt: skip
    project = dev.home / "shop"
    project.mkdir()
    dev.run("git init -q", project)
    dev.run("memory-governor install claude-code", project)
    check((project / ".memory-governor" / "hook").exists(), "the launcher is written beside the settings")
    rows = doctor_rows(dev, project)
    bad = {name: row for name, row in rows.items() if row["status"] in ("warn", "fail")}
    check(not bad, "doctor has nothing to warn of in a fresh Claude Code project", bad)
    check(not any("copilot" in name for name in rows), "doctor says nothing of Copilot, which is not here")

    # Another project of the same developer, with a stricter policy, starts the warm server.
    other = dev.home / "tools"
    (other / ".memory-governor").mkdir(parents=True)
    (other / ".memory-governor" / "policy.yaml").write_text("limits:\n  max_search_calls: 1\n")
    dev.run("git init -q && memory-governor install claude-code", other, show=False)
    dev.hook(other, {"session_id": "elsewhere", "hook_event_name": "SessionStart", "source": "startup"})
    check(wait_for(lambda: dev.run("memory-governor serve --status", other, code=None, show=False).returncode == 0),
          "the first hook in the other project started the warm server")  # fmt: skip
    # The README's payloads, by hand, in the developer's own project ("cwd": ".").
    payload = {"session_id": "try-1", "hook_event_name": "PreToolUse", "cwd": ".",
               "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "cache", "limit": 10}}  # fmt: skip
    answers = [dev.run(f"echo '{json.dumps({**payload, 'tool_use_id': f't{n}'})}' | memory-governor hook claude-code",
                       project) for n in (1, 2)]  # fmt: skip
    limits = [json.loads(a.stdout)["hookSpecificOutput"].get("updatedInput", {}).get("limit") for a in answers]
    check(limits == [3, 3], "both README searches are clamped to 3 under this project's (shipped) policy, not "
          "refused under the other project's, whose server answered", limits)  # fmt: skip

    with claude_code() as (claude, model):
        run = claude.session(dev, project, model, PROMPT, four_searches(10))
        results = [r for r in run if r.name and r.name.endswith("__mem_search")]
        real, denied = [r for r in results if not r.is_error], [r for r in results if r.is_error]
        check(len(real) == 2 and len(denied) == 2, "in Claude Code, two of four parallel searches return results",
              [(r.is_error, r.text[:80]) for r in results])  # fmt: skip
        check(all("max_search_calls=2" in r.text and "do not retry" in r.text for r in denied),
              "the model is told why the other two were refused, and what to do instead",
              [r.text for r in denied])  # fmt: skip
        check([c["arguments"]["limit"] for c in claude.engram_calls()] == [3, 3],
              "only two searches reached Engram, each clamped to 3")  # fmt: skip
    table = dev.run("memory-governor report", project)
    check(re.search(r"\s2/2\s", table.stdout) is not None, "report shows the turn's 2 of 2 searches", table.stdout)
    dev.run("memory-governor report --format html -o report.html", project)
    check("<svg" in (project / "report.html").read_text(), "the HTML report is written")
    dev.run("memory-governor serve --stop", project)
    dev.run("memory-governor uninstall claude-code", project)
    rows = doctor_rows(dev, project)
    check(not any("changed since install" in row["detail"] for row in rows.values()),
          "after uninstall nothing warns that the hooks changed since install")  # fmt: skip


def four_searches(limit: int) -> Any:
    from fake_model import engram, tool_uses

    return tool_uses(*[engram("mem_search", query=q, limit=limit) for q in TOPICS])


class ClaudeCode:
    """The pinned Claude Code (tests/e2e's cache) against the model stand-in and the Engram stand-in."""

    def __init__(self, tools: Any, folder: Path) -> None:
        import seed

        self.tools = tools
        self.folder = folder
        self.call_log = folder / "engram-calls.jsonl"
        self.engram = {"command": sys.executable, "args": [str(E2E / "engram_mcp.py")],
                       "env": {"ENGRAM_SEED": str(seed.write_engram_seed(folder / "seed.json")),
                               "ENGRAM_STORE": str(folder / "store.json"), "ENGRAM_CALL_LOG": str(self.call_log)}}  # fmt: skip

    def engram_calls(self, tool: str = "mem_search") -> list[dict[str, Any]]:
        if not self.call_log.exists():
            return []
        rows = [json.loads(line) for line in self.call_log.read_text().splitlines() if line.strip()]
        return [r for r in rows if r["tool"] == tool]

    def model_env(self, model: Any) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-journey-fake",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1"}  # fmt: skip

    def session(self, person: Person, project: Path, model: Any, prompt: str, *steps: Any) -> list[Any]:
        """`claude -p PROMPT` in the project with Engram configured; every tool result the model got."""
        from fake_model import text

        config = self.folder / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"engram": self.engram}}))
        model.script([*steps, text("Done.")])
        mark = model.mark()
        allowed = ",".join(f"mcp__engram__{t}" for t in ("mem_search", "mem_get_observation", "mem_context"))
        person.run(f"claude -p '{prompt}' --mcp-config {config} --output-format json --allowedTools {allowed}", project,
                   env={**self.model_env(model), "PATH": f"{self.tools.claude.parent}:{person.env['PATH']}"},
                   show=False, timeout=180)  # fmt: skip
        left = {lane: n for lane, n in model.remaining().items() if n}
        if model.errors or left:
            raise Failed(f"the model stand-in's script was not played out: {model.errors} {left}")
        return list(model.results_since(mark))


@contextmanager
def claude_code() -> Iterator[tuple[ClaudeCode, Any]]:
    from fake_model import FakeModel

    tools = e2e_component(lambda: __import__("conftest").install_tools(__import__("conftest").CLAUDE_CODE_RECENT))
    folder = Path(tempfile.mkdtemp(prefix="journey-claude-"))
    try:
        with FakeModel() as model:
            yield ClaudeCode(tools, folder), model
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def e2e_component(install: Callable[[], Any]) -> Any:
    """A pinned component from tests/e2e's cache, installed there once; Unavailable when it cannot be."""
    import pytest

    try:
        return install()
    except (pytest.skip.Exception, pytest.fail.Exception) as err:
        raise Unavailable(str(err)) from None


# -- the team lead (docs/teams.md) ----------------------------------------------------------------------


TEAM_POLICY = "limits:\n  max_search_calls: 3\n  max_memory_tokens_injected: 800\n"


def lead(base: Path, bin_dir: Path) -> None:
    lead = Person(base, "lead", bin_dir)
    project = lead.home / "shop"
    (project / ".memory-governor" / "scenarios").mkdir(parents=True)
    lead.run("git init -q", project)
    (project / ".memory-governor" / "policy.yaml").write_text(TEAM_POLICY)
    scenario = re.search(r"```yaml\n(.*?)```", (ROOT / "docs" / "scenarios.md").read_text(), re.S)
    assert scenario is not None
    (project / ".memory-governor" / "scenarios" / "team.yaml").write_text(scenario.group(1))
    lead.run("memory-governor policy check .memory-governor/policy.yaml", project)
    lead.run("memory-governor policy diff --shipped .memory-governor/policy.yaml", project, code=3)
    lead.run("memory-governor test .memory-governor/scenarios/team.yaml", project)
    lead.run("memory-governor install claude-code", project)
    lead.run("echo .memory-governor/policy.local.yaml >> .gitignore", project)
    lead.run("git add .memory-governor/ .claude/settings.json .gitignore && "
             "git commit -qm 'memory-governor: the team policy and its hooks'", project)  # fmt: skip
    accepted = lead.at_terminal("memory-governor policy accept", project)
    check("accepted" in accepted, "the lead accepts the team policy in their own terminal", accepted)
    rows = doctor_rows(lead, project)
    check(rows["accepted policy"]["status"] == "ok", "doctor: the lead's own policy is in force, nothing held back",
          rows["accepted policy"])  # fmt: skip
    lead.hook(project, {"session_id": "lead-1", "hook_event_name": "SessionStart", "source": "startup"})
    check(refusals(lead.searches(project, "lead-1", "p1", 4)) == [False, False, False, True],
          "the lead's session: 3 searches, the team's limit")  # fmt: skip

    # A teammate clones the project on a machine of their own: governed with no edit.
    mate = Person(base, "mate", bin_dir)
    clone = mate.home / "shop"
    mate.run(f"git clone -q {project} {clone.name}", mate.home)
    first = mate.hook(clone, {"session_id": "mate-1", "hook_event_name": "SessionStart", "source": "startup"})
    check(not told(first).strip(), "the teammate's first session starts with nothing to be told", told(first))
    check(refusals(mate.searches(clone, "mate-1", "p1", 4)) == [False, False, False, True],
          "the committed team policy is in force on the teammate's clone")  # fmt: skip
    rows = doctor_rows(mate, clone)
    bad = {name: row for name, row in rows.items() if row["status"] in ("warn", "fail")}
    check(not bad, "doctor on the teammate's clone: the launcher, the hooks, the policy, all ok", bad)

    # Tightening: in force at the teammate's next session, with nothing to accept.
    (project / ".memory-governor" / "policy.yaml").write_text(TEAM_POLICY.replace("3", "2"))
    lead.run("git commit -qam 'memory-governor: two searches a turn'", project)
    mate.run("git pull -q", clone)
    tightened = mate.hook(clone, {"session_id": "mate-2", "hook_event_name": "SessionStart", "source": "startup"})
    check(not told(tightened).strip(), "a tightening needs no word to the teammate", told(tightened))
    check(refusals(mate.searches(clone, "mate-2", "p1", 3)) == [False, False, True], "a tightening is in force at once")

    # Loosening: held back on the teammate's clone until they accept it.
    (project / ".memory-governor" / "policy.yaml").write_text(TEAM_POLICY.replace("3", "4"))
    lead.run("git commit -qam 'memory-governor: four searches a turn'", project)
    lead.at_terminal("memory-governor policy accept", project)  # the lead's own clone holds it back too
    mate.run("git pull -q", clone)
    held = mate.hook(clone, {"session_id": "mate-3", "hook_event_name": "SessionStart", "source": "startup"})
    check("the team committed a policy change" in told(held) and "If you made it" not in told(held),
          "the teammate is told once that the team committed a loosening, and what to do", told(held))  # fmt: skip
    later = mate.searches(clone, "mate-3", "p1", 3)
    check(refusals(later) == [False, False, True] and not any("held back" in told(a) for a in later),
          "until accepted the accepted 2 hold, and no later hook repeats the notice")  # fmt: skip
    explained = mate.run("memory-governor policy explain --format json", clone, show=False)
    check([c["path"] for c in json.loads(explained.stdout)["held_back"]] == ["limits.max_search_calls.value"],
          "policy explain shows the held-back change beside the value in force")  # fmt: skip
    for command in ("memory-governor report", "memory-governor status"):
        quiet = mate.run(command, clone, show=False)
        check("held back" not in quiet.stderr, f"`{command}` does not repeat the notice", quiet.stderr)
    mate.at_terminal("memory-governor policy accept", clone)
    after = mate.searches(clone, "mate-3", "p2", 5)
    check(refusals(after) == [False] * 4 + [True], "accepted by the teammate, the loosening is in force", after)

    managed_install(lead, project)
    redis_ledger(base, bin_dir, project)
    telemetry(base, bin_dir, project)


def managed_install(lead: Person, project: Path) -> None:
    """docs/teams.md's managed install, into a staging root (--root) instead of /etc; without the
    wall (--no-service), whose system user this machine need not have."""
    stage = lead.home / "stage"
    managed = "limits:\n  max_search_calls: 1\n"
    (lead.home / "team-policy.yaml").write_text(managed)
    said = lead.run(f"memory-governor install claude-code --scope managed --no-service --root {stage} --policy "
                    "../team-policy.yaml", project)  # fmt: skip
    check("--no-service: the seatbelt tier" in said.stdout, "the install says it is the seatbelt tier", said.stdout)
    settings = json.loads((stage / "etc" / "claude-code" / "managed-settings.json").read_text())
    check(settings.get("allowManagedHooksOnly") is True, "the managed settings allow managed hooks only")
    explained = json.loads(lead.run(f"memory-governor --managed-root {stage} policy explain --format json", project,
                                    show=False).stdout)  # fmt: skip
    check(explained["in_force"] == "managed" and explained["not_in_force"],
          "policy explain: the managed policy is in force, the project's files are not", explained["in_force"])  # fmt: skip
    rows = doctor_rows(lead, project, f"--managed-root {stage}")
    check(rows["policy"]["detail"].startswith("valid (default < managed: "), "doctor names the managed policy",
          rows["policy"])  # fmt: skip
    check("the seatbelt tier" in rows["decision service"]["detail"], "doctor names the tier in force",
          rows["decision service"])  # fmt: skip
    accepted = lead.run(f"memory-governor --managed-root {stage} policy accept", project)
    check("nothing to accept" in accepted.stdout, "under a managed install there is nothing to accept")
    lead.run(f"memory-governor uninstall claude-code --scope managed --root {stage}", project)
    left = [str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file() and ".bak-" not in p.name]
    check(not left, "the managed uninstall removes what it wrote", left)


def redis_ledger(base: Path, bin_dir: Path, project: Path) -> None:
    """Two hosts on one Redis count one turn together (README "Several hosts on one turn")."""
    from tests.redis_server import RedisServer

    server = e2e_component(lambda: RedisServer(base / "redis")).start()  # Debian's redis-server
    try:
        # docs/teams.md: the governor gets a Redis user of its own that can do nothing else
        admin = Person(base, "redis-admin", bin_dir)
        admin.run(f"redis-cli -p {server.port} ACL SETUSER memory-governor on '>PASSWORD' resetkeys '~mg:*' "
                  "resetchannels -@all +@read +@write +@scripting +@transaction +@connection -@dangerous +info +time",
                  base)  # fmt: skip
        url = {"MEMORY_GOVERNOR_LEDGER_URL": f"redis://memory-governor:PASSWORD@127.0.0.1:{server.port}/0"}
        host_a, host_b = Person(base, "host-a", bin_dir, **url), Person(base, "host-b", bin_dir, **url)
        rows = doctor_rows(host_a, project)
        check(rows["ledger"]["status"] == "ok" and "Redis" in rows["ledger"]["detail"],
              "doctor: the ledger in force is that Redis, it answers, and its user administers nothing",
              rows["ledger"])  # fmt: skip
        first = host_a.searches(project, "fanned-out", "p1", 3)
        second = host_b.searches(project, "fanned-out", "p1", 2, first=3)
        check(refusals(first + second) == [False, False, False, False, True],
              "host B's searches are counted with host A's: one turn, the team's 4")  # fmt: skip
    finally:
        server.stop()


def telemetry(base: Path, bin_dir: Path, project: Path) -> None:
    """docs/telemetry.md: a developer turns telemetry on; the warm server their hooks start sends what
    the hooks decided to the team's collector."""
    from tests.otlp_receiver import HttpReceiver

    receiver = HttpReceiver()
    member = Person(base, "member", bin_dir, MEMORY_GOVERNOR_ENABLE_TELEMETRY="1",
                    OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_RESOURCE_ATTRIBUTES="team=shop,developer=ada")  # fmt: skip
    clone = member.home / "shop"
    try:
        member.run(f"git clone -q {project} {clone.name}", member.home)
        member.hook(clone, {"session_id": "otel", "hook_event_name": "SessionStart", "source": "startup"})
        answers = member.searches(clone, "otel", "p1", 5)
        answers.append(member.hook(clone, {"session_id": "otel", "prompt_id": "p1", "hook_event_name": "PreToolUse",
                                           "tool_name": "mcp__engram__mem_context", "tool_use_id": "ctx",
                                           "tool_input": {}}))  # fmt: skip
        check(refusals(answers) == [False] * 4 + [True, True], "five searches and a mem_context decided")
        member.run("memory-governor serve --stop", clone)
        got = receiver.received
        check(got.total("memory_governor.calls", decision="denied") == 2,
              "the collector has every refused call by the time the server has stopped",
              got.series("memory_governor.calls"))  # fmt: skip
        rows = doctor_rows(member, clone)
        export = rows["telemetry export"]
        check(export["status"] == "ok" and "4 call(s) waiting for their result" in export["detail"],
              "doctor says what was sent, and that the four searches let through wait for their results", export)  # fmt: skip
    finally:
        receiver.stop()


# -- the orchestrator author (README.md "Orchestrators", docs/claude-agent-sdk.md) -----------------------


PROGRAM = """
import asyncio, json, os, sys
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query
from governor.sdk.claude_agent import govern

repo = sys.argv[1]
options = govern(ClaudeAgentOptions(cwd=repo, setting_sources=[], mcp_servers=json.loads(os.environ["SERVERS"]),
                                    allowed_tools=os.environ["ALLOWED"].split(","), env=json.loads(os.environ["MODEL"])))

async def main():
    async for message in query(prompt=sys.argv[2], options=options):
        if isinstance(message, ResultMessage):
            print(message.subtype)

asyncio.run(main())
"""


def author(base: Path, bin_dir: Path) -> None:
    author = Person(base, "author", bin_dir)
    clone = base / "memory-governor"
    author.run("python3 -m venv program", author.home)
    say(f"author:{author.home.name}$ program/bin/pip install '{clone}[sdk]'")
    installed = offline(lambda pip: subprocess.run([str(author.home / "program" / "bin" / "pip"), "install", "--quiet",
                                                    f"{clone}[sdk]"], cwd=author.home, env={**author.env, **pip},
                                                   capture_output=True, text=True, timeout=900), clone)  # fmt: skip
    if installed.returncode != 0:
        raise Failed(f"pip install of memory-governor[sdk] failed:\n{installed.stderr}")
    (author.home / "orchestrate.py").write_text(PROGRAM)
    repo = author.home / "repo"
    repo.mkdir()
    with claude_code() as (claude, model):
        model.script([four_searches(10), __import__("fake_model").text("Summarised.")])
        mark = model.mark()
        allowed = ",".join(f"mcp__engram__{t}" for t in ("mem_search", "mem_get_observation"))
        env = {"SERVERS": json.dumps({"engram": claude.engram}), "ALLOWED": allowed,
               "MODEL": json.dumps(claude.model_env(model))}  # fmt: skip
        out = author.run(f"program/bin/python orchestrate.py {repo} '{PROMPT}'", author.home, env=env, timeout=300)
        check(out.stdout.strip().endswith("success"), "the program's agent ran to its end", out.stdout)
        results = [r for r in model.results_since(mark) if r.name and r.name.endswith("__mem_search")]
        check(sorted(r.is_error for r in results) == [False, False, True, True],
              "govern(): two of four parallel searches ran, two were refused", [r.text[:80] for r in results])  # fmt: skip
        check([c["arguments"]["limit"] for c in claude.engram_calls()] == [3, 3],
              "only two reached Engram, clamped from 10 to 3")  # fmt: skip
        check("memory-governor:" not in out.stderr, "the program's stderr holds nothing of the governor's",
              out.stderr[-2000:])  # fmt: skip
    report = json.loads(author.run("memory-governor report --format json", repo, show=False).stdout)
    check(report["totals"]["denied"] == 2 and report["turns"][0]["usage"]["max_search_calls"] == 2,
          "report on the author's machine shows the program's turn", report["totals"])  # fmt: skip


JOURNEYS: dict[str, Callable[[Path, Path], None]] = {"developer": developer, "lead": lead, "author": author}


def main(argv: list[str]) -> int:
    chosen = argv or list(JOURNEYS)
    unknown = [name for name in chosen if name not in JOURNEYS]
    if unknown:
        say(f"no journey named {', '.join(unknown)}: choose from {', '.join(JOURNEYS)}")
        return 2
    ci = os.environ.get("CI", "").lower() == "true"
    status = 0
    with tempfile.TemporaryDirectory(prefix="memory-governor-journeys-") as scratch:
        base = Path(scratch)
        try:
            say(f"# a fresh clone of {ROOT}")
            clone = fresh_clone(base)
            bin_dir = pipx_install(base, clone)
        except Unavailable as err:
            say(f"skipped every journey: {err}")
            return 1 if ci else 0
        except Failed as err:
            say(f"FAILED before any journey: {err}")
            return 1
        for name in chosen:
            say(f"\n# the {name}'s journey")
            try:
                JOURNEYS[name](base, bin_dir)
                say(f"# the {name}'s journey: passed")
            except Unavailable as err:
                say(f"# the {name}'s journey: skipped: {err}")
                status = max(status, 1 if ci else 0)
            except Failed as err:
                say(f"# the {name}'s journey: FAILED: {err}")
                status = 1
            finally:
                for person in base.iterdir():  # every warm server a person's hooks started
                    if (person / ".local" / "state" / "memory-governor" / "run").exists():
                        subprocess.run([str(bin_dir / "memory-governor"), "serve", "--stop"], capture_output=True,
                                       env={"HOME": str(person), "PATH": f"{bin_dir}:{SYSTEM_PATH}"}, timeout=60)  # fmt: skip
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
