"""The Gemini CLI hook under the shipped policy, driven as a process with Gemini CLI's real payloads.

The payload shapes are those the pinned binary (0.61.0) sent in tests/e2e (docs/gemini-cli.md):
no turn id, no call id, mcp_context on MCP tools, llmContent as text parts wrapped in
<untrusted_context>, and nothing that names a subagent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governor.engine.stores import open_ledger
from governor.engine.tokens import counter
from governor.runtime.runner import respond
from tests.conftest import ROOT, Env, fixture_text, hook_run
from tests.test_hardening import HOSTILE, JSON, fuzz_env

HOOK = [sys.executable, "-I", "-S", str(ROOT / "governor" / "runtime" / "entry.py"), "gemini-cli"]
SEARCH = fixture_text("engram/search_v1.txt")
OBSERVATION = fixture_text("engram/observation_v1.txt")
CONTEXT = fixture_text("engram/context_v1.txt")
O200K = counter("o200k_base").count


def wrapped(text: str) -> str:
    """An MCP server's text as Gemini CLI hands it to the model and to AfterTool."""
    return f"<untrusted_context>\n{text}\n</untrusted_context>"


def big_search(hits: int, body_words: int = 400) -> str:
    parts = [f"Found {hits} memories:\n\n"]
    for i in range(hits):
        body = " ".join(f"word{i}x{j}" for j in range(body_words))
        parts.append(f"[{i + 1}] #{100 + i} (decision) — Decision number {i}\n    {body}...\n"
                     f"    2025-03-0{1 + i % 9} 10:00:00 | project: app | scope: project\n\n")  # fmt: skip
    return "".join(parts)


class Answer:
    """What one hook process printed, parsed; asserts Gemini CLI's protocol on the way."""

    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        assert proc.returncode == 0, f"hook exited {proc.returncode}: {proc.stderr!r}"
        text = proc.stdout.decode("utf-8")
        self.stderr = proc.stderr.decode("utf-8", "replace")
        assert "Traceback" not in self.stderr, self.stderr
        self.data: dict[str, Any] | None = json.loads(text) if text.strip() else None
        if self.data is not None:
            assert text.count("\n") <= 1, "one JSON object, on one line"
            assert self.data.get("decision") in (None, "deny"), "never decision allow (or ask)"

    @property
    def specific(self) -> dict[str, Any]:
        return (self.data or {}).get("hookSpecificOutput", {})

    @property
    def denied(self) -> bool:
        return (self.data or {}).get("decision") == "deny"

    @property
    def reason(self) -> str:
        return str((self.data or {}).get("reason", ""))

    @property
    def tool_input(self) -> dict[str, Any] | None:
        return self.specific.get("tool_input")

    @property
    def context(self) -> str:
        return str(self.specific.get("additionalContext", ""))

    @property
    def message(self) -> str:
        return str((self.data or {}).get("systemMessage", ""))

    @property
    def silent(self) -> bool:
        return self.data is None


def run_hook(env: Env, payload: Any, raw: bytes | None = None, hook: list[str] = HOOK,
             extra_env: dict[str, str] | None = None) -> Answer:  # fmt: skip
    data = raw if raw is not None else json.dumps(payload).encode()
    proc = hook_run(hook, data, {**env.vars, "GEMINI_PROJECT_DIR": str(env.project), **(extra_env or {})}, env.project)
    return Answer(proc)


class GeminiSession:
    """A Gemini CLI session driven through the hook process, event by event."""

    def __init__(self, env: Env, session_id: str = "5f0c3e1a-gemini", server: str = "engram") -> None:
        self.env = env
        self.id = session_id
        self.server = server

    def payload(self, name: str, **fields: Any) -> dict[str, Any]:
        return {"session_id": self.id, "cwd": str(self.env.project), "hook_event_name": name,
                "transcript_path": str(self.env.home / ".gemini" / "tmp" / "project" / "chats" / "session.jsonl"),
                "timestamp": "2026-12-01T09:52:25.297Z", **fields}  # fmt: skip

    def event(self, name: str, **fields: Any) -> Answer:
        return run_hook(self.env, self.payload(name, **fields))

    def start(self, source: str = "startup") -> Answer:
        return self.event("SessionStart", source=source)

    def prompt(self, text: str) -> Answer:
        return self.event("BeforeAgent", prompt=text)

    def compress(self, trigger: str) -> Answer:
        return self.event("PreCompress", trigger=trigger)

    def tool_fields(self, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        if tool == "invoke_agent":
            return {"tool_name": tool, "tool_input": tool_input}
        context = {"server_name": self.server, "tool_name": tool, "command": "engram", "args": ["mcp"]}
        return {"tool_name": f"mcp_{self.server}_{tool}", "tool_input": tool_input, "mcp_context": context}

    def pre_payload(self, tool: str, **tool_input: Any) -> dict[str, Any]:
        return self.payload("BeforeTool", **self.tool_fields(tool, tool_input))

    def pre(self, tool: str, **tool_input: Any) -> Answer:
        return run_hook(self.env, self.pre_payload(tool, **tool_input))

    def post(self, tool: str, text: str, **tool_input: Any) -> Answer:
        response = {"llmContent": [{"text": wrapped(text)}], "returnDisplay": text}
        return self.event("AfterTool", **self.tool_fields(tool, tool_input), tool_response=response)

    def failed(self, tool: str, message: str, **tool_input: Any) -> Answer:
        response = {"llmContent": message, "returnDisplay": "Error", "error": {"message": message,
                                                                                "type": "mcp_tool_error"}}  # fmt: skip
        return self.event("AfterTool", **self.tool_fields(tool, tool_input), tool_response=response)

    def call(self, tool: str, text: str, **tool_input: Any) -> tuple[Answer, Answer | None]:
        """BeforeTool, then (unless denied) AfterTool with the arguments the server got."""
        before = self.pre(tool, **tool_input)
        if before.denied:
            return before, None
        return before, self.post(tool, text, **(before.tool_input or tool_input))

    def ledger_calls(self) -> list[tuple[str, str]]:
        ledger = open_ledger(str(self.env.state))
        try:
            rows = ledger.q("SELECT role, state FROM calls WHERE role != 'governor' ORDER BY created, rowid")
        finally:
            ledger.close()
        return [(str(role), str(state)) for role, state in rows]


@pytest.fixture
def gemini(env: Env) -> GeminiSession:
    return GeminiSession(env)


# -- no call id: parallel calls still count exactly -------------------------------------------


def test_parallel_identical_searches_let_exactly_the_limit_through(gemini: GeminiSession) -> None:
    gemini.prompt("what did we decide about caching?")
    payload = gemini.pre_payload("mem_search", query="cache", limit=3)
    with ThreadPoolExecutor(max_workers=6) as pool:  # six hook processes at once, one payload
        answers = list(pool.map(lambda _: run_hook(gemini.env, payload), range(6)))
    assert sum(not a.denied for a in answers) == 2, [a.data for a in answers]
    assert all("max_search_calls=2" in a.reason for a in answers if a.denied)
    # The two that ran report back, with the same arguments; the second's hits were just
    # delivered whole, so it goes back (as Gemini takes a replacement) naming them in one line.
    assert gemini.post("mem_search", SEARCH, query="cache", limit=3).silent, "no snippets shaping: no replacement"
    again = gemini.post("mem_search", SEARCH, query="cache", limit=3)
    assert again.denied and "3 more already above in this conversation: #42, #57, #61" in again.reason
    assert sorted(gemini.ledger_calls()) == [("search", "committed")] * 2 + [("search", "denied")] * 4


def test_a_clamp_sends_the_whole_input_and_its_result_is_matched_by_the_new_one(gemini: GeminiSession) -> None:
    gemini.prompt("what did we decide about caching?")
    before, after = gemini.call("mem_search", SEARCH, query="cache", limit=10, project="project")
    # `project` names this session's own folder, so it is kept (another project's is dropped: ladder.L1.other_projects).
    # Gemini replaces the arguments with tool_input (a partial object fails its validation).
    assert before.tool_input == {"query": "cache", "limit": 3, "project": "project"}
    assert before.specific["hookEventName"] == "BeforeTool" and not before.denied
    assert after is not None and after.silent
    assert gemini.ledger_calls() == [("search", "committed")]


def test_a_failed_call_gives_its_slot_back(gemini: GeminiSession) -> None:
    gemini.prompt("what did we decide about caching?")
    gemini.call("mem_search", SEARCH, query="a", limit=3)
    assert not gemini.pre("mem_search", query="b", limit=3).denied
    assert gemini.failed("mem_search", "MCP tool 'mem_search' reported tool error", query="b", limit=3).silent
    assert not gemini.pre("mem_search", query="c", limit=3).denied, "the failed call no longer counts"


# -- results: Gemini's wrapper, and the replacement it allows -------------------------------------


def test_ids_surfaced_through_the_untrusted_context_wrapper_unlock_a_fetch(gemini: GeminiSession) -> None:
    gemini.prompt("what exactly did we decide about JWT?")
    assert gemini.pre("mem_get_observation", id=42).denied
    gemini.call("mem_search", SEARCH, query="jwt", limit=3)
    assert not gemini.pre("mem_get_observation", id=42).denied
    assert gemini.pre("mem_get_observation", id=999).denied


def test_a_trimmed_result_goes_back_as_the_error_text_with_whole_entries(gemini: GeminiSession) -> None:
    gemini.prompt("what did we decide?")
    _, after = gemini.call("mem_search", big_search(3, body_words=150), query="decisions", limit=3)
    assert after is not None and after.denied, "Gemini replaces no result: the trim is an AfterTool deny"
    assert after.reason.startswith("<untrusted_context>\nFound 3 memories:\n\n[1] #100 (decision)")
    assert after.reason.endswith("\n</untrusted_context>")
    inner = after.reason.removeprefix("<untrusted_context>\n").removesuffix("\n</untrusted_context>")
    assert "[memory-governor]" in inner and "held back" in inner
    shown = {n for n in ("#100", "#101", "#102") if n in inner}
    assert shown and shown != {"#100", "#101", "#102"}
    assert O200K(inner) <= 1200
    for held in {"#100", "#101", "#102"} - shown:  # what the model never saw cannot be fetched
        assert gemini.pre("mem_get_observation", id=int(held[1:])).denied


def test_a_result_that_fits_passes_untouched(gemini: GeminiSession) -> None:
    gemini.prompt("what did we decide about auth?")
    _, after = gemini.call("mem_search", SEARCH, query="auth", limit=3)
    assert after is not None and after.silent


# -- turns, mem_context and its triggers ------------------------------------------------------


def test_each_prompt_starts_a_turn_with_advice_in_its_context(gemini: GeminiSession) -> None:
    first = gemini.prompt("what did we decide about caching?")
    assert first.specific["hookEventName"] == "BeforeAgent" and first.context.startswith("memory_need=")
    gemini.call("mem_search", SEARCH, query="a", limit=3)
    gemini.call("mem_search", SEARCH, query="b", limit=3)
    assert gemini.pre("mem_search", query="c", limit=3).denied
    gemini.prompt("and what did we decide about logging?")
    assert not gemini.pre("mem_search", query="logging", limit=3).denied


def test_compress_unlocks_mem_context_once_and_an_automatic_precompress_does_not(gemini: GeminiSession) -> None:
    gemini.start()
    gemini.prompt("work on the parser")
    gemini.compress("auto")  # Gemini fires this before every model call, compressing or not
    assert gemini.pre("mem_context").denied
    assert gemini.compress("manual").silent  # PreCompress can say nothing to the model
    gemini.prompt("/compress")  # `gemini -p /compress` then sends the command as a prompt
    assert not gemini.pre("mem_context").denied
    assert gemini.pre("mem_context").denied, "one use"


def test_a_resume_right_away_does_not_unlock_mem_context(gemini: GeminiSession) -> None:
    gemini.start()
    gemini.prompt("where were we?")
    gemini.start("resume")
    gemini.prompt("pick up where we left off")
    assert gemini.pre("mem_context").denied


def test_an_explicit_recall_prompt_unlocks_mem_context_for_that_turn(gemini: GeminiSession) -> None:
    answer = gemini.prompt("recordar todo lo que sabes del proyecto")
    assert "explicit recall requested" in answer.context
    assert not gemini.pre("mem_context").denied


# -- subagents: known by the invoke_agent window ------------------------------------------------


def test_a_subagents_calls_get_its_tier_while_it_runs(gemini: GeminiSession) -> None:
    gemini.prompt("validate the refresh-token change")
    dispatch = {"agent_name": "validator", "prompt": "Validate src/auth/refresh.ts."}
    assert gemini.pre("invoke_agent", **dispatch).silent
    search = gemini.pre("mem_search", query="token refresh", limit=3)
    assert search.denied and "agent 'validator' is save-only" in search.reason
    assert not gemini.pre("mem_save", title="Refresh ran twice", type="bugfix", content="**What**: retry").denied
    assert gemini.post("invoke_agent", "Subagent 'validator' finished.", **dispatch).silent
    assert not gemini.pre("mem_search", query="token refresh", limit=3).denied, "the parent's own call again"


def test_a_failed_dispatch_ends_its_window_and_so_does_the_next_prompt(gemini: GeminiSession) -> None:
    gemini.prompt("validate it")
    dispatch = {"agent_name": "validator", "prompt": "Validate."}
    gemini.pre("invoke_agent", **dispatch)
    assert gemini.failed("invoke_agent", "Subagent 'validator' failed.", **dispatch).silent
    assert not gemini.pre("mem_search", query="a", limit=3).denied
    gemini.pre("invoke_agent", **dispatch)  # never reports back (a cancelled run)
    assert gemini.pre("mem_search", query="b", limit=3).denied
    gemini.prompt("next question")
    assert not gemini.pre("mem_search", query="c", limit=3).denied


def test_two_running_subagents_give_a_call_the_narrower_tier(env: Env, gemini: GeminiSession) -> None:
    agents = env.home / ".gemini" / "agents"
    agents.mkdir(parents=True)
    (agents / "researcher.md").write_text(
        "---\nname: researcher\ndescription: r\n---\nEngram access tier: search-capable\n"
    )
    gemini.prompt("research and validate")
    gemini.pre("invoke_agent", agent_name="researcher", prompt="Research.")
    assert not gemini.pre("mem_search", query="a", limit=3).denied, "a search-capable subagent searches"
    gemini.pre("invoke_agent", agent_name="validator", prompt="Validate.")
    assert gemini.pre("mem_search", query="b", limit=3).denied, "with a save-only one running too, no"


# -- what is not ours, and the governor's own failures ------------------------------------------


def test_the_server_comes_from_mcp_context_not_from_the_tool_name(env: Env) -> None:
    # Gemini itself splits mcp_<server>_<tool> at the first "_": a server named my_engram would
    # read as server "my". mcp_context names it exactly.
    env.write(".memory-governor/policy.yaml", "tools:\n  - servers: [my_engram]\n    format: engram\n    map:\n"
              "      mem_search: {role: search, limit_param: limit}\n")  # fmt: skip
    session = GeminiSession(env, server="my_engram")
    session.prompt("what did we decide?")
    assert session.pre("mem_search", query="a", limit=10).tool_input == {"query": "a", "limit": 3}
    bare = session.pre_payload("mem_search", query="a", limit=10)
    del bare["mcp_context"]
    assert run_hook(env, bare).silent


def test_other_tools_and_unknown_events_get_no_answer(env: Env, gemini: GeminiSession) -> None:
    gemini.prompt("list the files")
    shell = gemini.payload("BeforeTool", tool_name="run_shell_command", tool_input={"command": "ls"})
    assert run_hook(env, shell).silent
    assert gemini.event("BeforeModel", llm_request={"model": "gemini-2.5-flash", "messages": []}).silent
    assert gemini.event("AfterAgent", prompt="list the files", prompt_response="Done.",
                        stop_hook_active=False).silent  # fmt: skip
    assert gemini.event("SessionEnd", reason="exit").silent


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"null", b"[]", b'{"hook_event_name": 5}', b'{"hook_event_name":"BeforeTool"}']
)
def test_malformed_input_never_crashes_and_says_so(env: Env, raw: bytes) -> None:
    answer = run_hook(env, None, raw=raw)
    assert "memory-governor" in answer.stderr
    assert answer.silent or "could not decide" in answer.message


def test_fail_closed_denies_unreadable_calls_and_withholds_unreadable_results(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "on_error: closed\n")
    raw = b'{"hook_event_name": "BeforeTool", "tool_name": "mcp_engram_mem_search", "tool_input": {"q": 1}'
    answer = run_hook(env, None, raw=raw)
    assert answer.denied and "on_error=closed" in answer.reason
    after = b'{"hook_event_name": "AfterTool", "tool_name": "mcp_engram_mem_search", "tool_response": {'
    withheld = run_hook(env, None, raw=after)
    assert withheld.denied and "on_error=closed" in withheld.reason, "no unchecked memory reaches the model"


def test_monitor_mode_never_blocks_and_says_what_enforce_would_do(env: Env, gemini: GeminiSession) -> None:
    env.write(".memory-governor/policy.yaml", "mode: monitor\n")
    gemini.prompt("what did we decide?")
    clamp = gemini.pre("mem_search", query="a", limit=10)
    assert clamp.tool_input is None and not clamp.denied and "would have clamped" in clamp.message
    assert not gemini.pre("mem_context").denied


def test_a_gemini_payload_sent_to_the_claude_code_hook_is_decided_as_gemini(env: Env, gemini: GeminiSession) -> None:
    # `gemini hooks migrate` copies Claude Code hooks, commands and all, into Gemini's settings.
    claude_hook = [*HOOK[:-1], "claude-code"]
    gemini.prompt("what did we decide?")
    answer = run_hook(env, gemini.pre_payload("mem_search", query="a", limit=10), hook=claude_hook)
    assert answer.tool_input == {"query": "a", "limit": 3}


EVENTS = ["BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "SessionStart", "PreCompress", "SessionEnd",
          "BeforeModel", "PreToolUse", ""]  # fmt: skip
TOOLS = ["mcp_engram_mem_search", "mcp_engram_mem_get_observation", "mcp_engram_mem_context", "mcp_engram_mem_save",
         "invoke_agent", "run_shell_command", "mcp_", "mcp__x"]  # fmt: skip
PARTS = st.lists(st.fixed_dictionaries({}, optional={"text": JSON}) | JSON, max_size=3)
PAYLOADS = st.fixed_dictionaries(
    {},
    optional={
        "session_id": JSON | HOSTILE, "hook_event_name": st.sampled_from(EVENTS) | JSON,
        "tool_name": st.sampled_from(TOOLS) | JSON, "cwd": JSON | HOSTILE, "timestamp": JSON,
        "tool_input": JSON | st.fixed_dictionaries({}, optional={"query": JSON, "limit": JSON, "id": JSON,
                                                                 "agent_name": JSON | HOSTILE, "prompt": JSON}),
        "mcp_context": JSON | st.fixed_dictionaries({}, optional={"server_name": JSON, "tool_name": JSON}),
        "tool_response": JSON | st.fixed_dictionaries({}, optional={"llmContent": PARTS | JSON, "error": JSON}),
        "prompt": JSON, "source": JSON, "trigger": st.sampled_from(["manual", "auto"]) | JSON,
    },
)  # fmt: skip


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(payload=PAYLOADS)
def test_fuzzed_gemini_payloads_always_get_a_valid_answer(tmp_path: Path, payload: dict[str, Any]) -> None:
    raw = json.dumps(payload, default=str).encode("utf-8", "surrogatepass")
    started = time.monotonic()
    out = respond("gemini-cli", raw, fuzz_env(tmp_path)).stdout()
    assert time.monotonic() - started < 10
    if out:
        text = out.decode("utf-8")
        assert text.endswith("\n") and text.count("\n") == 1
        data = json.loads(text)
        assert isinstance(data, dict) and set(data) <= {"decision", "reason", "hookSpecificOutput", "systemMessage"}
        assert data.get("decision") in (None, "deny"), "never allow"
    assert [p.name for p in tmp_path.iterdir() if p.name not in ("home", "state")] == []


# -- install, uninstall, doctor ----------------------------------------------------------------


def test_install_then_uninstall_round_trip(env: Env) -> None:
    settings = env.write(".gemini/settings.json", json.dumps({
        "mcpServers": {"engram": {"command": "engram", "args": ["mcp"]}},
        "hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "mine"}]}]},
    }, indent=2))  # fmt: skip
    original = json.loads(settings.read_text())
    out = env.cli("install", "gemini-cli")
    assert out.returncode == 0 and "trusted folder" in out.stdout, out.stdout + out.stderr
    installed = json.loads(settings.read_text())
    assert installed["mcpServers"] == original["mcpServers"]
    mine, ours = installed["hooks"]["BeforeTool"]
    assert mine["matcher"] == "run_shell_command"
    entry = ours["hooks"][0]
    assert entry["timeout"] == 10_000 and entry["name"] == "memory-governor"  # Gemini's timeouts are ms
    pattern = ours["matcher"]
    # the memory under another server name, and a `mem_` tool no map names, are governed too
    for name in ("mcp_engram_mem_search", "mcp_engram_mem_get_observation", "mcp_plugin_engram_engram_mem_save",
                 "invoke_agent", "run_shell_command", "read_file", "mcp_other_mem_search", "mcp_engram_mem_search_v2"):  # fmt: skip
        assert re.search(pattern, name), f"{name}: a governed tool, a dispatch or a route's tool starts the hook"
    for name in ("xmcp_engram_mem_search", "list_directory", "mcp_other_search", "mcp_github_list_issues"):
        assert not re.search(pattern, name), f"{name}: a tool the policy does not govern starts no hook"
    assert re.search(installed["hooks"]["AfterTool"][0]["matcher"], "invoke_agent")
    assert installed["hooks"]["PreCompress"][0]["matcher"] == "manual"
    assert set(installed["hooks"]) == {"BeforeTool", "AfterTool", "BeforeAgent", "SessionStart", "PreCompress",
                                       "AfterAgent"}  # fmt: skip
    again = env.cli("install", "gemini-cli")
    assert "nothing changed" in again.stdout and json.loads(settings.read_text()) == installed
    assert list(settings.parent.glob("settings.json.bak-*"))
    assert env.cli("uninstall", "gemini-cli").returncode == 0
    assert json.loads(settings.read_text()) == original


def test_install_in_user_scope_and_no_local_scope(env: Env) -> None:
    assert env.cli("install", "gemini-cli", "--scope", "user").returncode == 0
    assert "BeforeTool" in json.loads((env.home / ".gemini" / "settings.json").read_text())["hooks"]
    out = env.cli("install", "gemini-cli", "--scope", "local")
    assert out.returncode == 2 and "no 'local' scope" in out.stderr


def test_install_refuses_a_settings_file_that_is_not_json(env: Env) -> None:
    settings = env.write(".gemini/settings.json", '{"hooks": {}, // a comment Gemini allows\n}')
    out = env.cli("install", "gemini-cli")
    assert out.returncode == 1 and f"{settings}:1:" in out.stderr and "nothing was changed" in out.stderr
    assert env.cli("install", "gemini-cli", "--dry-run", "--scope", "user").returncode == 0
    assert not (env.home / ".gemini" / "settings.json").exists(), "a dry run writes nothing"


def test_doctor_checks_the_install_and_runs_the_hook(env: Env) -> None:
    env.cli("install", "gemini-cli", check=True)
    report = env.cli_json("doctor", "--format", "json")
    rows = {row["check"]: row for row in report}
    assert rows["gemini-cli (project)"]["status"] == "ok", rows
    assert rows["gemini-cli hook"]["status"] == "ok" and "clamped limit 10 -> 3" in rows["gemini-cli hook"]["detail"]
    # A memory server in the user's settings is there in untrusted folders, where project hooks are not.
    env.write("../home/.gemini/settings.json", json.dumps({"mcpServers": {"engram": {"command": "engram"}}}))
    rows = {row["check"]: row for row in env.cli_json("doctor", "--format", "json")}
    assert rows["gemini-cli (trust)"]["status"] == "warn" and "--scope user" in rows["gemini-cli (trust)"]["fix"]


def test_doctor_fails_when_hooks_are_switched_off_or_incomplete(env: Env) -> None:
    env.cli("install", "gemini-cli", check=True)
    path = env.project / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    settings["hooksConfig"] = {"enabled": False}
    del settings["hooks"]["AfterTool"]
    path.write_text(json.dumps(settings))
    out = env.cli("doctor")
    assert out.returncode == 1
    assert "hooksConfig.enabled is false" in out.stdout and "missing events: AfterTool" in out.stdout, out.stdout
