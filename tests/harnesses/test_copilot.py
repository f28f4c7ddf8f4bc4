"""The Copilot CLI hook under the shipped policy, driven as a process with the payloads Copilot
1.0.102 sends (recorded from the real binary; both its own dialect and the Claude-style one it
uses for the hooks of a project's .claude/settings.json), and its installer and doctor."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Env, fixture_text, hook_run, snippets

SEARCH = fixture_text("engram/search_v1.txt")
OBSERVATION = fixture_text("engram/observation_v1.txt")
CONTEXT = fixture_text("engram/context_v1.txt")
ENTRY = str(ROOT / "governor" / "runtime" / "entry.py")
ROOT_SESSION = "3807c2f7-e6c7-4113-bcbb-05295bcf86f6"


class Reply:
    """What one hook process printed; asserts Copilot's protocol on the way."""

    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        assert proc.returncode == 0, f"hook exited {proc.returncode}: {proc.stderr!r}"  # non-zero would deny
        text = proc.stdout.decode("utf-8")
        self.stderr = proc.stderr.decode("utf-8", "replace")
        assert "Traceback" not in self.stderr, self.stderr
        self.data: dict[str, Any] | None = json.loads(text) if text.strip() else None
        if self.data is not None:
            assert text.count("\n") <= 1, "one JSON object, on one line"
            assert '"allow"' not in text, "never permissionDecision allow"
            assert "hookSpecificOutput" not in self.data, "Copilot reads its answers at the top level"

    @property
    def denied(self) -> bool:
        return (self.data or {}).get("permissionDecision") == "deny"

    @property
    def reason(self) -> str:
        return str((self.data or {}).get("permissionDecisionReason", ""))

    @property
    def args(self) -> dict[str, Any] | None:
        return (self.data or {}).get("modifiedArgs")

    @property
    def result(self) -> str | None:
        modified = (self.data or {}).get("modifiedResult")
        if modified is None:
            return None
        assert modified["resultType"] == "success"
        return str(modified["textResultForLlm"])

    @property
    def context(self) -> str:
        return str((self.data or {}).get("additionalContext", ""))

    @property
    def silent(self) -> bool:
        return self.data is None


def hook(env: Env, payload: Any, harness: str = "copilot", extra_env: dict[str, str] | None = None,
         raw: bytes | None = None) -> Reply:  # fmt: skip
    data = raw if raw is not None else json.dumps(payload).encode()
    proc = hook_run([sys.executable, "-I", "-S", ENTRY, harness], data, {**env.vars, **(extra_env or {})}, env.project)
    return Reply(proc)


class Copilot:
    """A Copilot session driven through the hook process, in its own dialect or the Claude-style one."""

    def __init__(self, env: Env, session_id: str = ROOT_SESSION, claude_style: bool = False) -> None:
        self.env = env
        self.id = session_id
        self.claude_style = claude_style
        self.hook_env = {"COPILOT_CLI": "1", "COPILOT_PROJECT_DIR": str(env.project),
                         "CLAUDE_PROJECT_DIR": str(env.project)}  # fmt: skip
        if not claude_style:
            self.hook_env["COPILOT_HOOK_DIR"] = str(env.project / ".github" / "hooks")

    def send(self, event: str, agent: tuple[str, str, str] | None = None, **fields: Any) -> Reply:
        """`event` in Copilot's own spelling; `agent` = (agentId, agentType, parentAgentId) inside a subagent."""
        if self.claude_style:
            names = {"sessionStart": "SessionStart", "userPromptSubmitted": "UserPromptSubmit",
                     "preToolUse": "PreToolUse", "postToolUse": "PostToolUse",
                     "postToolUseFailure": "PostToolUseFailure", "preCompact": "PreCompact"}  # fmt: skip
            snake = {"toolName": "tool_name", "toolArgs": "tool_input", "toolResult": "tool_result",
                     "initialPrompt": "initial_prompt"}  # fmt: skip
            payload: dict[str, Any] = {"hook_event_name": names[event], "session_id": agent[0] if agent else self.id,
                                       "timestamp": "2026-12-01T09:50:31.421Z", "cwd": str(self.env.project)}  # fmt: skip
            if agent:
                payload.update(agent_id=agent[0], agent_type=agent[1], parent_agent_id=agent[2])
            for name, value in fields.items():
                if name == "toolResult":
                    value = {"result_type": value["resultType"], "text_result_for_llm": value["textResultForLlm"]}
                payload[snake.get(name, name)] = value
            return hook(self.env, payload, "claude-code", self.hook_env)
        payload = {"sessionId": agent[0] if agent else self.id, "timestamp": 1796118631421, "cwd": str(self.env.project),
                   **fields}  # fmt: skip
        if agent:
            payload.update(agentId=agent[0], agentType=agent[1], parentAgentId=agent[2])
        return hook(self.env, payload, "copilot", self.hook_env)

    def start(self, source: str = "new") -> Reply:
        return self.send("sessionStart", source=source, initialPrompt="hello")

    def prompt(self, text: str, agent: tuple[str, str, str] | None = None) -> Reply:
        return self.send("userPromptSubmitted", agent, prompt=text)

    def pre(self, tool: str, agent: tuple[str, str, str] | None = None, **args: Any) -> Reply:
        return self.send("preToolUse", agent, toolName=f"engram-{tool}", toolArgs=args)

    def post(self, tool: str, text: str, agent: tuple[str, str, str] | None = None, **args: Any) -> Reply:
        result = {"resultType": "success", "textResultForLlm": text}
        return self.send("postToolUse", agent, toolName=f"engram-{tool}", toolArgs=args, toolResult=result)

    def call(
        self, tool: str, text: str, agent: tuple[str, str, str] | None = None, **args: Any
    ) -> tuple[Reply, Reply | None]:
        before = self.pre(tool, agent, **args)
        if before.denied:
            return before, None
        return before, self.post(tool, text, agent, **(before.args or args))


def ledger_states(env: Env) -> list[str]:
    with sqlite3.connect(env.state / "ledger.db") as db:
        return [r[0] for r in db.execute("SELECT state FROM calls WHERE role != 'governor' ORDER BY created, rowid")]


@pytest.fixture(params=["own", "claude-style"])
def copilot(env: Env, request: pytest.FixtureRequest) -> Copilot:
    return Copilot(env, claude_style=request.param == "claude-style")


# -- the ladder, in either dialect -----------------------------------------------------------


def test_searches_are_clamped_then_capped(copilot: Copilot) -> None:
    assert "memory_need=" in copilot.prompt("what did we decide about caching?").context
    first = copilot.pre("mem_search", query="cache", limit=10)
    second = copilot.pre("mem_search", query="redis")  # no limit: Engram's default is 10
    third = copilot.pre("mem_search", query="ttl", limit=3)
    assert first.args == {"query": "cache", "limit": 3} and second.args == {"query": "redis", "limit": 3}
    assert third.denied and third.reason.startswith("memory-governor:") and "max_search_calls=2" in third.reason


def test_identical_calls_in_one_batch_count_apart_and_each_result_finds_its_call(copilot: Copilot, env: Env) -> None:
    # Copilot runs the preToolUse hooks of a batch one after another, then the calls, then the
    # postToolUse hooks, which carry the arguments the call ran with (here the clamped ones).
    copilot.prompt("what exactly did we decide about JWT?")
    same = {"query": "jwt", "limit": 10}
    answers = [copilot.pre("mem_search", **same) for _ in range(3)]
    assert [a.args for a in answers[:2]] == [{"query": "jwt", "limit": 3}] * 2 and answers[2].denied
    first = copilot.post("mem_search", SEARCH, query="jwt", limit=3)
    assert first.result == snippets(SEARCH)
    again = copilot.post("mem_search", SEARCH, query="jwt", limit=3)  # its hits were just delivered whole
    assert again.result is not None and "already above in this conversation: #42, #57, #61" in again.result
    assert ledger_states(env) == ["committed", "committed", "denied"], "no call left pending"
    assert not copilot.pre("mem_get_observation", id=42).denied, "the matched results surfaced #42"


def test_a_fetch_needs_an_id_a_search_surfaced_this_turn(copilot: Copilot) -> None:
    copilot.prompt("what exactly did we decide about JWT?")
    before = copilot.pre("mem_get_observation", id=42)
    assert before.denied and "id=42 was not surfaced" in before.reason
    copilot.call("mem_search", SEARCH, query="jwt", limit=3)
    assert not copilot.pre("mem_get_observation", id=42).denied
    copilot.prompt("and the one after that?")
    assert copilot.pre("mem_get_observation", id=42).denied, "a new prompt is a new turn"


def test_a_result_over_the_budget_is_replaced_with_whole_entries(copilot: Copilot) -> None:
    copilot.prompt("what did we decide?")
    big = "".join(
        f"[{i + 1}] #{100 + i} (decision) — Decision {i}\n    {' '.join(f'w{i}x{j}' for j in range(400))}...\n"
        f"    2025-03-01 10:00:00 | project: app | scope: project\n\n"
        for i in range(3)
    )
    _, after = copilot.call("mem_search", f"Found 3 memories:\n\n{big}", query="decisions", limit=3)
    assert after is not None and after.result is not None
    assert "[memory-governor]" in after.result and "entries held back" in after.result


def test_reading_the_session_log_back_is_refused(copilot: Copilot, env: Env) -> None:
    """Copilot's events.jsonl keeps every result untrimmed (`detailedContent`): its own view, grep
    and bash may not read it back, by any path aimed at it; other files of ~/.copilot, listing
    names and a search of the whole home folder are left alone (docs/reliability.md)."""
    log = env.home / ".copilot" / "session-state" / ROOT_SESSION / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"type": "tool.execution_complete", "data": {"detailedContent": "Found 20 memories: ..."}}\n')
    copilot.prompt("what did we decide about caching?")
    own = not copilot.claude_style
    reads = [("view" if own else "Read", {"path" if own else "file_path": str(log)}),
             ("bash" if own else "Bash", {"command": "grep -r detailedContent ~/.copilot"}),
             ("bash" if own else "Bash", {"command": "cd ~/.copilot && tail -n 50 session-state/*/events.jsonl"}),
             ("grep" if own else "Grep", {"pattern": "Found", "path": str(env.home / ".copilot" / "se*")}),
             ("grep" if own else "Grep", {"pattern": "Found", "path": str(env.home / ".copilot")}),
             # found under the home folder by its name, and read
             ("bash" if own else "Bash", {"command": "find $HOME -name events.jsonl -exec cat {} +"})]  # fmt: skip
    for tool, args in reads:
        answer = copilot.send("preToolUse", toolName=tool, toolArgs=args)
        assert answer.denied and "spilled-result" in answer.reason, (tool, args, answer.data)
    for tool, args in (
        ("view" if own else "Read", {"path" if own else "file_path": str(env.home / ".copilot" / "mcp-config.json")}),
        ("view" if own else "Read", {"path" if own else "file_path": str(env.project / "events.jsonl")}),
        ("bash" if own else "Bash", {"command": "grep -rn cache ~/src/app ~/.config/app"}),
        # names listed are no contents read; a search of the whole home folder is no aim at the log
        ("glob" if own else "Glob", {"pattern": "**/events.jsonl", "path": str(log.parent.parent)}),
        ("bash" if own else "Bash", {"command": "find ~ -name events.jsonl"}),
        ("grep" if own else "Grep", {"pattern": "TODO", "path": str(env.home)}),
    ):
        assert copilot.send("preToolUse", toolName=tool, toolArgs=args).silent, (tool, args)  # fmt: skip


def test_a_failed_call_releases_its_reservation(env: Env) -> None:
    copilot = Copilot(env)
    copilot.prompt("show #99999")
    copilot.pre("mem_search", query="a", limit=3)
    failed = copilot.send("postToolUseFailure", toolName="engram-mem_search", toolArgs={"query": "a", "limit": 3},
                          error="MCP server 'engram': boom")  # fmt: skip
    assert failed.silent
    assert ledger_states(env) == ["released"]


def test_mem_context_is_locked_until_a_compaction_or_a_recall_prompt(copilot: Copilot) -> None:
    copilot.start()
    copilot.prompt("let's keep working on the parser")
    assert copilot.pre("mem_context").denied
    copilot.send("preCompact", trigger="manual", customInstructions="", transcriptPath="/x/events.jsonl")
    copilot.prompt("continue")
    assert not copilot.pre("mem_context").denied
    assert copilot.pre("mem_context").denied, "one use"
    recall = copilot.prompt("give me all context")
    assert "mem_context is allowed once this turn" in recall.context
    assert not copilot.pre("mem_context").denied


def test_a_resume_after_a_break_unlocks_mem_context(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "version: 1\nmem_context:\n  unlocked_by:\n    session_resume: "
              "{scope: next_turn, uses: 1, min_idle_minutes: 0}\n")  # fmt: skip
    copilot = Copilot(env)
    copilot.start()
    copilot.prompt("where were we?")
    assert copilot.pre("mem_context").denied
    copilot.start("resume")  # `copilot -p … --resume=ID`
    copilot.prompt("pick up where we left off")
    assert not copilot.pre("mem_context").denied


# -- subagents: sessions of their own, counted in the dispatcher's turn -------------------------

VALIDATOR = ("87ccf094-e23e-49a2-8b00-920930f28510", "validator", ROOT_SESSION)
RESEARCHER = ("e13434cf-2113-4a72-b2d8-cdbed4754973", "researcher", VALIDATOR[0])  # dispatched by the validator


def test_a_save_only_subagent_cannot_search_and_its_prompt_is_no_turn(copilot: Copilot) -> None:
    copilot.prompt("validate the refresh-token change")
    assert copilot.prompt("Validate the change in src/auth/refresh.ts.", VALIDATOR).silent, "a dispatch prompt"
    search = copilot.pre("mem_search", VALIDATOR, query="token", limit=3)
    assert search.denied and "save-only" in search.reason and "validator" in search.reason
    save = copilot.pre("mem_save", VALIDATOR, title="Refresh ran twice", type="bugfix", project="myapp",
                       content="**What**: a retry re-sent the refresh\n**Why**: no key\n**Where**: refresh.ts")  # fmt: skip
    assert not save.denied


def test_nested_subagents_share_the_dispatching_turn(env: Env) -> None:
    env.write(".github/agents/researcher.agent.md", "---\nname: researcher\ndescription: Research.\n"
              "engram_access_tier: search-capable\n---\nYou research project history.\n")  # fmt: skip
    copilot = Copilot(env)
    copilot.prompt("what did we decide about auth? ask the validator")
    copilot.send("subagentStart", VALIDATOR, agentName="validator", transcriptPath="/x/events.jsonl")
    assert not copilot.pre("mem_search", query="auth", limit=3).denied
    # The validator dispatches the researcher: its events name the validator as their parent.
    copilot.send("subagentStart", ("e13434cf-2113-4a72-b2d8-cdbed4754973", "researcher", VALIDATOR[0]),
                 agentName="researcher", transcriptPath="/x/events.jsonl")  # fmt: skip
    assert copilot.prompt("Find what we decided about search.", RESEARCHER).silent
    first, _ = copilot.call("mem_search", SEARCH, RESEARCHER, query="search", limit=3)
    second = copilot.pre("mem_search", RESEARCHER, query="fts5", limit=3)
    assert not first.denied, "search-capable by its .agent.md front matter"
    assert second.denied and "max_search_calls" in second.reason, "no fresh budget two levels down"


# -- one decider when the hooks are installed twice --------------------------------------------


def test_the_claude_code_hooks_answer_nothing_under_copilot_while_its_own_are_installed(env: Env) -> None:
    env.cli("install", "copilot", check=True)
    claude = Copilot(env, claude_style=True)
    assert claude.prompt("what did we decide about caching?").silent
    assert claude.pre("mem_search", query="cache", limit=10).silent
    own = Copilot(env)
    assert "memory_need=" in own.prompt("what did we decide about caching?").context
    assert own.pre("mem_search", query="cache", limit=10).args == {"query": "cache", "limit": 3}
    assert not (env.state / "errors.log").exists()


def test_the_project_install_defers_to_the_users(env: Env) -> None:
    env.cli("install", "copilot", check=True)
    env.cli("install", "copilot", "--scope", "user", check=True)
    project = Copilot(env)
    assert project.pre("mem_search", query="cache", limit=10).silent
    user = Copilot(env)
    user.hook_env["COPILOT_HOOK_DIR"] = str(env.home / ".copilot" / "hooks")
    assert user.pre("mem_search", query="cache", limit=10).args == {"query": "cache", "limit": 3}


def test_a_project_hook_looks_at_the_users_hooks_file_without_re_unless_it_names_copilot(env: Env) -> None:
    """To know whether it defers (above), a project hook reads the user's hooks file: `re`, ~5 ms of
    a cold hook with everything it imports, only for a file that names copilot at all."""
    from governor.harnesses.copilot import HOOKS_FILE

    env.cli("install", "copilot", check=True)
    session = Copilot(env)
    users = env.home / ".copilot" / "hooks" / HOOKS_FILE
    command = [sys.executable, "-X", "importtime", "-I", "-S", ENTRY, "copilot"]
    for text in (None, '{"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "./lint.sh"}]}}'):
        if text is not None:
            users.parent.mkdir(parents=True, exist_ok=True)
            users.write_text(text)
        payload = {"sessionId": session.id, "timestamp": 1796118631421, "cwd": str(env.project),
                   "toolName": "engram-mem_search", "toolArgs": {"query": "cache", "limit": 10}}  # fmt: skip
        proc = subprocess.run(command, input=json.dumps(payload).encode(), capture_output=True, timeout=60,
                              env={**env.vars, **session.hook_env}, cwd=str(env.project))  # fmt: skip
        assert Reply(proc).args == {"query": "cache", "limit": 3}
        assert not [line for line in Reply(proc).stderr.splitlines() if line.split("|")[-1].strip() == "re"]
    env.cli("install", "copilot", "--scope", "user", check=True)
    assert session.pre("mem_search", query="cache", limit=10).silent, "the user's install decides"


# -- the governor's own failures follow on_error, never Copilot's deny-on-crash ---------------


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_input_it_cannot_read_follows_on_error(env: Env, on_error: str) -> None:
    env.write(".memory-governor/policy.yaml", f"version: 1\non_error: {on_error}\n")
    raw = (
        b'{"sessionId": "s", "cwd": "'
        + str(env.project).encode()
        + b'", "toolName": "engram-mem_search", "toolArgs": {'
    )
    answer = hook(env, None, raw=raw, extra_env={"COPILOT_PROJECT_DIR": str(env.project)})
    assert answer.denied == (on_error == "closed")
    assert "could not decide" in answer.stderr


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_the_installed_command_exits_as_on_error_says_when_python_is_gone(env: Env, on_error: str) -> None:
    env.write(".memory-governor/policy.yaml", f"version: 1\non_error: {on_error}\n")
    env.cli("install", "copilot", "--scope", "user", check=True)  # the scope that names this machine's interpreter
    hooks = json.loads((env.home / ".copilot" / "hooks" / "memory-governor.json").read_text())
    command = hooks["hooks"]["preToolUse"][0]["bash"]
    broken = '"/nonexistent/python"' + command[command.index(" -I -S ") :]
    proc = subprocess.run(["bash", "-c", broken], input=b"{}", capture_output=True, timeout=30)
    # Copilot denies a call whose preToolUse hook exits non-zero: that is on_error closed.
    assert (proc.returncode == 0) == (on_error == "open"), proc
    assert proc.stdout == b""
    # The project scope's command (a script that execs the governor it finds), that governor's interpreter
    # gone: the same exit.
    env.cli("install", "copilot", check=True)
    project = json.loads((env.project / ".github" / "hooks" / "memory-governor.json").read_text())
    program = env.tmp / "gone" / "memory-governor"
    program.parent.mkdir()
    program.write_text("#!/nonexistent/python\n")
    program.chmod(0o755)
    proc = subprocess.run(["bash", "-c", project["hooks"]["preToolUse"][0]["bash"]], input=b"{}", capture_output=True,
                          timeout=30, env={**os.environ, "COPILOT_PROJECT_DIR": str(env.project),
                                           "MEMORY_GOVERNOR": str(program)})  # fmt: skip
    assert (proc.returncode == 0) == (on_error == "open"), proc


# -- install, uninstall, doctor -------------------------------------------------------------------

HOOKS = Path(".github") / "hooks" / "memory-governor.json"


def test_install_then_uninstall_round_trip(env: Env) -> None:
    path = env.write(str(HOOKS), json.dumps({"version": 1, "hooks": {"preToolUse": [
        {"type": "command", "bash": "echo mine", "matcher": "bash"}]}}))  # fmt: skip
    original = path.read_text()
    assert env.cli("install", "copilot").returncode == 0
    installed = json.loads(path.read_text())
    assert installed["version"] == 1
    mine, ours = installed["hooks"]["preToolUse"]
    assert mine["bash"] == "echo mine"
    assert set(ours["matcher"].split("|")) >= {"engram-mem_search", "plugin_engram_engram-mem_get_observation", "task"}
    # committed: the project's launcher, no machine's path
    assert ours["timeoutSec"] == 10 and ours["bash"].startswith(
        '(set -- "${COPILOT_PROJECT_DIR:-.}/.memory-governor/hook"'
    )
    assert ours["bash"].endswith(") || true"), "the shipped policy is on_error: open"
    assert str(env.tmp) not in ours["bash"]
    assert set(installed["hooks"]) >= {"postToolUse", "postToolUseFailure", "userPromptSubmitted", "sessionStart",
                                       "preCompact", "subagentStart", "subagentStop", "agentStop"}  # fmt: skip
    assert "matcher" not in installed["hooks"]["userPromptSubmitted"][0]
    again = env.cli("install", "copilot")
    assert "nothing changed" in again.stdout and json.loads(path.read_text()) == installed
    assert env.cli("uninstall", "copilot").returncode == 0
    assert json.loads(path.read_text()) == json.loads(original)


def test_install_user_scope_dry_run_and_refusals(env: Env) -> None:
    dry = env.cli("install", "copilot", "--scope", "user", "--dry-run")
    assert dry.returncode == 0 and "would become" in dry.stdout
    user_file = env.home / ".copilot" / "hooks" / "memory-governor.json"
    assert not user_file.exists()
    env.cli("install", "copilot", "--scope", "user", check=True)
    assert "copilot" in user_file.read_text()
    assert env.cli("install", "copilot", "--scope", "local").returncode != 0, "Copilot has no local scope"
    broken = env.write(str(HOOKS), '{"hooks": {,}')
    out = env.cli("install", "copilot")
    assert out.returncode == 1 and f"{broken}:1:" in out.stderr and broken.read_text() == '{"hooks": {,}'


def test_doctor_checks_the_install_and_on_error(env: Env) -> None:
    env.cli("install", "copilot", check=True)
    out = env.cli("doctor")
    assert out.returncode == 0, out.stdout
    assert "ok    copilot (project)" in out.stdout
    assert "copilot hook       the installed command answers (clamped limit 10 -> 3)" in out.stdout
    env.write(".memory-governor/policy.yaml", "version: 1\non_error: closed\n")
    out = env.cli("doctor")
    assert "warn  copilot (project)" in out.stdout and "on_error: closed" in out.stdout


def test_doctor_says_the_claude_code_install_leaves_copilots_memory_calls_ungoverned(env: Env) -> None:
    env.cli("install", "claude-code", check=True)
    quiet = env.cli("doctor")
    assert quiet.returncode == 0 and "copilot" not in quiet.stdout, "no Copilot CLI here: nothing to say of it"
    (env.home / ".copilot").mkdir()  # this user runs Copilot CLI
    out = env.cli("doctor")
    assert "warn  copilot" in out.stdout and "not governed" in out.stdout
    assert "fix: memory-governor install copilot" in out.stdout
    env.cli("install", "copilot", check=True)
    out = env.cli("doctor")
    assert "answer nothing while this install decides" in out.stdout and "not governed" not in out.stdout


def test_server_keys_are_spelled_as_copilot_spells_them(env: Env) -> None:
    # A server key `my.engram` reaches the model as `my-engram-mem_search`; split at its last dash.
    env.write(".memory-governor/policy.yaml", "tools:\n  - servers: [my.engram, my-engram]\n    format: engram\n"
              "    map:\n      mem_search: {role: search, limit_param: limit}\n")  # fmt: skip
    env.cli("install", "copilot", check=True)
    hooks = json.loads((env.project / HOOKS).read_text())
    assert hooks["hooks"]["postToolUse"][0]["matcher"] == "my-engram-mem_search"
    copilot = Copilot(env)
    answer = copilot.send("preToolUse", toolName="my-engram-mem_search", toolArgs={"query": "q", "limit": 10})
    assert answer.args == {"query": "q", "limit": 3}
    assert copilot.pre("mem_search", query="q", limit=10).silent, "engram is not this policy's server"


# -- replay: Copilot's session log ----------------------------------------------------------------


def test_session_log_steps_follow_subagents_and_play_what_the_server_returned(tmp_path: Path) -> None:
    from governor.harnesses.copilot import transcripts

    def record(kind: str, **data: Any) -> dict[str, Any]:
        return {"type": kind, "data": data, "timestamp": "2026-12-01T09:56:21.000Z"}

    records = [  # the fields Copilot 1.0.102 writes (events.jsonl), trimmed to what replay reads
        record("session.start", sessionId="s", producer="copilot-agent", copilotVersion="1.0.102"),
        record("user.message", content="Validate the change.", messageId="m1"),
        record("tool.execution_start", toolCallId="c1", toolName="engram-mem_search", arguments={"query": "a"},
               mcpServerName="engram", mcpToolName="mem_search"),
        record("tool.execution_complete", toolCallId="c1", success=True,
               result={"content": "REPLACED BY A HOOK", "detailedContent": SEARCH}),
        record("tool.execution_start", toolCallId="t1", toolName="task", arguments={"agent_type": "validator"}),
        record("subagent.started", toolCallId="t1", agentName="validator"),
        record("user.message", content="Do it.", source="agent-s", messageId="m2"),
        record("tool.execution_start", toolCallId="c2", toolName="engram-mem_search", arguments={"query": "b"},
               mcpServerName="engram", mcpToolName="mem_search", parentToolCallId="t1"),
        record("tool.execution_complete", toolCallId="c2", success=False,
               error={"message": "Denied by preToolUse hook: no", "code": "denied"}),
        record("session.resume", resumeTime="2026-12-01T10:00:00Z"),
        record("session.compaction_start", trigger="manual"),
    ]  # fmt: skip
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert transcripts.recognise(records)
    plan = transcripts.steps(str(path))
    assert [s.kind for s in plan] == ["start", "prompt", "pre", "post", "pre", "pre", "start", "start"]
    assert plan[1].args[0] == "Validate the change.", "a subagent's dispatch prompt is no prompt"
    assert plan[2].args[0].tool_name == "mcp__engram__mem_search" and plan[3].args[1] == SEARCH
    assert plan[5].args[0].agent == ("agent-t1", "validator")
    assert [s.args[0] for s in plan if s.kind == "start"] == ["startup", "resume", "compact"]
