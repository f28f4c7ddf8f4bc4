"""The Codex CLI hook under the shipped policy, driven as a process with the payloads Codex 0.171.0
sends (docs/codex.md), and its installer as a command."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from governor.engine.tokens import counter
from governor.harnesses.codex import setup
from tests.conftest import ROOT, Env, fixture_text, hook_run

HOOK = [sys.executable, "-I", "-S", str(ROOT / "governor" / "runtime" / "entry.py"), "codex"]
SEARCH = fixture_text("engram/search_v1.txt")
O200K = counter("o200k_base").count
NOTE = "[memory-governor]"


def big_search(hits: int, body_words: int = 120) -> str:
    parts = [f"Found {hits} memories:\n\n"]
    for i in range(hits):
        body = " ".join(f"word{i}x{j}" for j in range(body_words))
        parts.append(f"[{i + 1}] #{100 + i} (decision) — Decision number {i}\n    {body}...\n"
                     f"    2025-03-0{1 + i % 9} 10:00:00 | project: app | scope: project\n\n")  # fmt: skip
    return "".join(parts)


class Codex:
    """A Codex session driven through the hook process, event by event, with Codex's own fields."""

    def __init__(self, env: Env, session_id: str = "01a23104-183e-7f53-a834-476a2242cdda") -> None:
        self.env = env
        self.id = session_id
        self.turn = ""
        self.calls = 0

    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        base = {"session_id": self.id, "transcript_path": f"/home/u/.codex/sessions/rollout-{self.id}.jsonl",
                "cwd": str(self.env.project), "hook_event_name": event, "model": "gpt-5.1-codex",
                "permission_mode": "bypassPermissions"}  # fmt: skip
        if event != "SessionStart" and self.turn:
            base["turn_id"] = self.turn
        return {**base, **fields}

    def hook(self, payload: dict[str, Any] | None = None, raw: bytes | None = None) -> dict[str, Any] | None:
        data = raw if raw is not None else json.dumps(payload).encode()
        proc = hook_run(HOOK, data, self.env.vars, self.env.project)
        assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
        text = proc.stdout.decode()
        assert text.count("\n") <= 1, "one JSON object, on one line"
        answer = json.loads(text) if text.strip() else None
        specific = (answer or {}).get("hookSpecificOutput", {})
        if specific.get("permissionDecision") == "allow":  # only ever to carry a rewrite
            assert set(specific) == {"hookEventName", "permissionDecision", "updatedInput"}, answer
        return answer

    def prompt(self, text: str, turn: str | None = None) -> dict[str, Any] | None:
        self.turn = turn or f"01a23104-1876-7e83-a131-{len(text):012d}"
        return self.hook(self.payload("UserPromptSubmit", prompt=text))

    def pre(self, tool: str, agent: dict[str, str] | None = None, **tool_input: Any) -> dict[str, Any] | None:
        self.calls += 1
        return self.hook(self.payload("PreToolUse", tool_name=f"mcp__engram__{tool}", tool_input=tool_input,
                                      tool_use_id=f"call_{self.calls:032x}", **(agent or {})))  # fmt: skip

    def post(self, tool: str, result: str, agent: dict[str, str] | None = None, **tool_input: Any) -> Any:
        response = {"content": [{"type": "text", "text": result}], "structuredContent": None, "isError": False}
        return self.hook(self.payload("PostToolUse", tool_name=f"mcp__engram__{tool}", tool_input=tool_input,
                                      tool_use_id=f"call_{self.calls:032x}", tool_response=response,
                                      **(agent or {})))  # fmt: skip


def denied(answer: dict[str, Any] | None, *fragments: str) -> bool:
    specific = (answer or {}).get("hookSpecificOutput", {})
    reason = str(specific.get("permissionDecisionReason", ""))
    return (
        specific.get("permissionDecision") == "deny"
        and reason.startswith("memory-governor:")
        and all(f in reason for f in fragments)
    )


@pytest.fixture
def codex(env: Env) -> Codex:
    return Codex(env)


# -- clamp and cap --------------------------------------------------------------------------


def test_a_clamp_is_allow_with_updated_input_and_no_objection_is_no_output(codex: Codex) -> None:
    codex.prompt("what did we decide about caching?")
    answer = codex.pre("mem_search", query="cache", limit=10)
    assert answer == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                             "updatedInput": {"query": "cache", "limit": 3}}}  # fmt: skip
    assert codex.pre("mem_search", query="redis", limit=3) is None


def test_parallel_batch_of_searches_lets_exactly_the_limit_through(codex: Codex) -> None:
    codex.prompt("what did we decide about caching?")
    payloads = [codex.payload("PreToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": f"q{i}", "limit": 3},
                              tool_use_id=f"call_parallel_{i}") for i in range(6)]  # fmt: skip
    with ThreadPoolExecutor(max_workers=6) as pool:  # six hook processes at once, as Codex runs a batch
        answers = list(pool.map(codex.hook, payloads))
    assert sum(not denied(a) for a in answers) == 2
    assert all(denied(a, "max_search_calls") for a in answers if a is not None)


# -- the trim: a PostToolUse block whose reason is the result --------------------------------


def test_a_result_over_the_budget_comes_back_as_a_block_whose_reason_is_the_trimmed_result(codex: Codex) -> None:
    codex.prompt("what did we decide about caching?")
    result = big_search(8)
    assert codex.pre("mem_search", query="cache", limit=3) is None
    answer = codex.post("mem_search", result, query="cache", limit=3)
    assert answer is not None and set(answer) == {"decision", "reason"}, answer
    assert answer["decision"] == "block"
    trimmed = answer["reason"]
    assert O200K(trimmed) <= 1200 < O200K(result)
    assert trimmed.startswith("Found ") and NOTE in trimmed and "entries held back" in trimmed


def test_a_result_within_the_budget_gets_no_answer(codex: Codex) -> None:
    codex.prompt("what did we decide about caching?")
    codex.pre("mem_search", query="cache", limit=3)
    assert codex.post("mem_search", SEARCH, query="cache", limit=3) is None


# -- subagents -------------------------------------------------------------------------------


def test_a_subagents_own_turn_id_does_not_open_a_fresh_budget(codex: Codex) -> None:
    (codex.env.project / ".codex" / "agents").mkdir(parents=True)
    (codex.env.project / ".codex" / "agents" / "researcher.toml").write_text(
        'name = "researcher"\ndescription = "Research."\ndeveloper_instructions = "Engram access tier: search-capable"\n'
    )
    codex.prompt("what did we decide about caching? ask the researcher")
    assert not denied(codex.pre("mem_search", query="cache", limit=3))
    agent = {"agent_id": "01a23105-984e-7971-b703-2d34f9a72885", "agent_type": "researcher",
             "turn_id": "01a23105-9852-7682-a7d2-beb6c4f87e57"}  # fmt: skip
    # Codex sends the subagent's task as a UserPromptSubmit of its own: not a user prompt.
    task = codex.payload("UserPromptSubmit", prompt="give me all context", **agent)
    assert codex.hook(task) is None
    assert not denied(codex.pre("mem_search", agent=agent, query="redis", limit=3))
    assert denied(codex.pre("mem_search", agent=agent, query="ttl", limit=3), "max_search_calls")
    assert denied(codex.pre("mem_context", agent=agent), "mem_context")


def test_a_save_only_role_may_save_but_not_search(codex: Codex) -> None:
    codex.prompt("validate the change")
    agent = {"agent_id": "01a23105-aaaa", "agent_type": "validator", "turn_id": "01a23105-bbbb"}
    assert denied(codex.pre("mem_search", agent=agent, query="x", limit=3), "save-only", "validator")
    save = {"title": "Refresh ran twice", "type": "bugfix", "content": "**What**: a retry re-sent it"}
    assert not denied(codex.pre("mem_save", agent=agent, **save))


# -- events, bad input ----------------------------------------------------------------------


def test_a_compaction_unlocks_mem_context_for_the_next_turn(codex: Codex) -> None:
    codex.prompt("continue the auth work")
    assert denied(codex.pre("mem_context", project="myapp"), "is off outside post-compaction recovery")
    for event, extra in (("PreCompact", {"trigger": "auto"}), ("SessionStart", {"source": "resume"}),
                         ("SessionStart", {"source": "compact"})):  # fmt: skip
        codex.hook(codex.payload(event, **extra))
    codex.prompt("where were we?", turn="01a23106-ef3c-7b71-8ea1-2199fa1b9d29")
    allowed = codex.pre("mem_context", project="myapp")  # asked for what fits: max_bytes near what is left, compact
    assert not denied(allowed) and allowed["hookSpecificOutput"]["updatedInput"]["compact"] is True
    assert 0 < allowed["hookSpecificOutput"]["updatedInput"]["max_bytes"] <= 65_536
    assert denied(codex.pre("mem_context", project="myapp"))


@pytest.mark.parametrize("raw", [b"{not json", b"[]", b'{"hook_event_name": "PreToolUse"}', b""])
def test_bad_input_never_crashes_and_fails_open_by_default(codex: Codex, raw: bytes) -> None:
    answer = codex.hook(raw=raw)  # nothing to refuse; the user is told, once, that it was let through
    assert answer is None or (set(answer) == {"systemMessage"} and "let through (on_error: open)" in str(answer))


def test_events_it_does_not_govern_get_no_answer(codex: Codex) -> None:
    codex.prompt("hello")
    assert codex.hook(codex.payload("PermissionRequest", tool_name="exec_command", tool_input={})) is None
    assert codex.hook(codex.payload("PreToolUse", tool_name="exec_command", tool_input={"cmd": "ls"},
                                    tool_use_id="call_x")) is None  # fmt: skip


# -- the installer ----------------------------------------------------------------------------

# A hook and the trusted_hash Codex 0.171.0 itself computed for it (codex app-server, hooks/list).
SEEN_HOOK = {"matcher": "mcp__engram__mem_search",
             "hooks": [{"type": "command", "command": "python3 /tmp/cx/loghook.py pre", "timeout": 10}]}  # fmt: skip
SEEN_HASH = "sha256:080a95a8c9050093f9ef902f26e4209bae9089aaea880bbc42d8ef99e99fbd9e"


def test_trusted_hash_is_computed_as_codex_computes_it() -> None:
    assert setup.hook_hash("PreToolUse", SEEN_HOOK, SEEN_HOOK["hooks"][0]) == SEEN_HASH


def _codex_env(env: Env) -> dict[str, str]:
    env.vars["CODEX_HOME"] = str(env.home / ".codex")
    return env.vars


def test_install_writes_hooks_and_their_trust_keeping_everything_else(env: Env) -> None:
    _codex_env(env)
    config = env.home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('# mine\nmodel = "o3"  # my model\n\n[hooks.state."/elsewhere/hooks.json:stop:0:0"]\n'
                      'trusted_hash = "sha256:theirs"\n')  # fmt: skip
    hooks = env.project / ".codex" / "hooks.json"
    hooks.parent.mkdir()
    theirs = {"type": "command", "command": "notify-send done"}
    hooks.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [theirs]}]}}))
    out = env.cli("install", "codex", "--project", str(env.project))
    assert out.returncode == 0, out.stderr
    written = json.loads(hooks.read_text())
    assert written["hooks"]["Stop"][0] == {"hooks": [theirs]}
    [pre] = written["hooks"]["PreToolUse"]
    assert pre["matcher"].startswith("^(?:mcp__engram__mem_search|") and pre["matcher"].endswith(")$")
    assert "spawn_agent" in setup.matched_tools(pre["matcher"]), "a spawn's turn is the one its subagent counts in"
    text = config.read_text()
    assert text.startswith('# mine\nmodel = "o3"  # my model\n') and 'trusted_hash = "sha256:theirs"' in text
    entries = setup.trust_entries(str(hooks), written)
    assert len(entries) == 8 and f"{hooks}:stop:1:0" in entries  # our Stop hook comes after theirs
    assert all(f'[hooks.state."{key}"]\ntrusted_hash = "{value}"' in text for key, value in entries.items())
    # A second install changes nothing; uninstall takes exactly ours away.
    again = env.cli("install", "codex", "--project", str(env.project))
    assert again.stdout.count("nothing changed") == 3, again.stdout  # the launcher, the hooks, their trust
    assert env.cli("uninstall", "codex", "--project", str(env.project)).returncode == 0
    assert json.loads(hooks.read_text()) == {"hooks": {"Stop": [{"hooks": [theirs]}]}}
    assert "trusted_hash" in config.read_text() and not any(key in config.read_text() for key in entries)


def test_doctor_asks_for_the_install_again_where_spawns_are_not_hooked(env: Env) -> None:
    """An install from before spawn_agent was hooked: its subagents would count in whatever turn is
    current when they start, so doctor fails it and names the install that writes it whole."""
    _codex_env(env)
    assert env.cli("install", "codex", "--project", str(env.project)).returncode == 0
    hooks = env.project / ".codex" / "hooks.json"
    written = json.loads(hooks.read_text())
    [pre] = written["hooks"]["PreToolUse"]
    pre["matcher"] = pre["matcher"].replace("|spawn_agent", "")
    hooks.write_text(json.dumps(written))
    doctor = env.cli("doctor")
    assert doctor.returncode == 1 and "tools not matched: spawn_agent" in doctor.stdout, doctor.stdout
    assert "memory-governor install codex --scope project" in doctor.stdout


def test_install_says_when_codex_does_not_trust_the_project(env: Env) -> None:
    _codex_env(env)
    out = env.cli("install", "codex", "--project", str(env.project))
    assert "is not trusted yet" in out.stdout and "--scope user" in out.stdout, out.stdout
    doctor = env.cli("doctor")
    assert doctor.returncode == 1 and "Codex ignores .codex/ in a project it does not trust" in doctor.stdout


def test_user_scope_and_dry_run(env: Env) -> None:
    _codex_env(env)
    dry = env.cli("install", "codex", "--scope", "user", "--dry-run")
    assert dry.returncode == 0 and "would become" in dry.stdout
    assert not (env.home / ".codex" / "hooks.json").exists() and not (env.home / ".codex" / "config.toml").exists()
    assert env.cli("install", "codex", "--scope", "user").returncode == 0
    assert "PreToolUse" in json.loads((env.home / ".codex" / "hooks.json").read_text())["hooks"]
    assert env.cli("install", "codex", "--scope", "local").returncode != 0  # Codex has no local scope


def test_install_refuses_a_config_that_is_not_toml_and_changes_nothing(env: Env) -> None:
    _codex_env(env)
    config = env.home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("model = \n")
    out = env.cli("install", "codex", "--scope", "user")
    assert out.returncode != 0 and "config.toml:1" in out.stderr and "not valid TOML" in out.stderr
    assert config.read_text() == "model = \n" and not (env.home / ".codex" / "hooks.json").exists()


def test_a_spawns_brief_is_checked_as_a_dispatch_briefing(env: Env) -> None:
    """spawn_agent hands its subagent `message`: memory cards in it count against the briefing
    budget, and a fetched body pasted whole into it is flagged, as in any dispatch's brief."""
    from tests.test_briefing import memory, write_candidates

    rows = [memory(i, 100, created_at=f"2026-02-{i + 1:02d}") for i in range(8)]
    cards = env.cli("brief", str(write_candidates(env, rows)), "--budget", "3000", "--card-max-tokens", "900",
                    "--no-record-usage").stdout  # fmt: skip
    codex = Codex(env)
    codex.prompt("split this across two researchers")

    def spawn(message: str) -> dict[str, Any] | None:
        return codex.hook(codex.payload("PreToolUse", tool_name="spawn_agent", tool_use_id=f"call_{len(message)}",
                                        tool_input={"agent_type": "researcher", "message": message}))  # fmt: skip

    assert "over the briefing budget of 600" in json.dumps(spawn(f"Do it.\n{cards}"))
    assert "Summarize it into a memory card" in json.dumps(
        spawn("Implement:\n" + fixture_text("engram/observation_v1.txt"))
    )
    assert spawn("Find what we decided about caching.") is None
