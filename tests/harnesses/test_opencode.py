"""The OpenCode hook under the shipped policy, driven as a process with the messages its plugin sends.

The plugin (governor/harnesses/opencode/plugin.js) builds each message from what OpenCode 1.18.33
hands its hooks (docs/opencode.md): `chat.message` with the message's parts, `tool.execute.before`
and `.after` with the tool's name, OpenCode's callID and the args, an MCP result's content
blocks, and, from OpenCode's session info, the parentID (empty for a session of its own) and the
agent of the session. The ids here have OpenCode's shapes (ses_…, call_…, msg_…).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governor.engine.stores import open_ledger
from governor.engine.tokens import counter
from governor.harnesses.opencode import result_text, run_args, tool_name
from governor.runtime.runner import respond
from tests.conftest import ROOT, Env, fixture_text, hook_run, snippets
from tests.test_hardening import HOSTILE, JSON, fuzz_env

HOOK = [sys.executable, "-I", "-S", str(ROOT / "governor" / "runtime" / "entry.py"), "opencode"]
SEARCH = fixture_text("engram/search_v1.txt")
CONTEXT = fixture_text("engram/context_v1.txt")
O200K = counter("o200k_base").count
ANSWER_KEYS = {"deny", "args", "content", "context", "systemMessage"}


def big_search(hits: int, body_words: int = 400) -> str:
    parts = [f"Found {hits} memories:\n\n"]
    for i in range(hits):
        body = " ".join(f"word{i}x{j}" for j in range(body_words))
        parts.append(f"[{i + 1}] #{100 + i} (decision) — Decision number {i}\n    {body}...\n"
                     f"    2025-03-0{1 + i % 9} 10:00:00 | project: app | scope: project\n\n")  # fmt: skip
    return "".join(parts)


class Answer:
    """What one hook process printed, parsed; asserts the plugin's protocol on the way."""

    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        assert proc.returncode == 0, f"hook exited {proc.returncode}: {proc.stderr!r}"
        text = proc.stdout.decode("utf-8")
        self.stderr = proc.stderr.decode("utf-8", "replace")
        assert "Traceback" not in self.stderr, self.stderr
        self.data: dict[str, Any] | None = json.loads(text) if text.strip() else None
        if self.data is not None:
            assert text.count("\n") <= 1, "one JSON object, on one line"
            assert set(self.data) <= ANSWER_KEYS, self.data

    @property
    def denied(self) -> bool:
        return isinstance((self.data or {}).get("deny"), str)

    @property
    def reason(self) -> str:
        return str((self.data or {}).get("deny", ""))

    @property
    def args(self) -> dict[str, Any] | None:
        return (self.data or {}).get("args")

    @property
    def content(self) -> list[dict[str, Any]] | None:
        return (self.data or {}).get("content")

    @property
    def context(self) -> str:
        return str((self.data or {}).get("context", ""))

    @property
    def message(self) -> str:
        return str((self.data or {}).get("systemMessage", ""))

    @property
    def silent(self) -> bool:
        return self.data is None


def run_hook(env: Env, payload: Any, raw: bytes | None = None, extra_env: dict[str, str] | None = None) -> Answer:
    data = raw if raw is not None else json.dumps(payload).encode()
    proc = hook_run(HOOK, data, {**env.vars, **(extra_env or {})}, env.project)
    return Answer(proc)


class OpenCodeSession:
    """An OpenCode session as the plugin reports it, message by message."""

    def __init__(self, env: Env, session_id: str = "ses_dce92bbaaffepgv7gpIMV924Di", parent: str = "",
                 agent: str = "build", server: str = "engram") -> None:  # fmt: skip
        self.env = env
        self.id = session_id
        self.parent = parent
        self.agent = agent
        self.server = server

    def message(self, hook: str, **fields: Any) -> dict[str, Any]:
        return {"hook": hook, "sessionID": self.id, "parentID": self.parent, "agent": self.agent,
                "directory": str(self.env.project), "worktree": "/", **fields}  # fmt: skip

    def send(self, hook: str, **fields: Any) -> Answer:
        return run_hook(self.env, self.message(hook, **fields))

    def start(self, source: str = "startup") -> Answer:
        return self.send("session.start", source=source)

    def prompt(self, text: str, synthetic: bool = False, run_args: bool = False) -> Answer:
        parts = [{"type": "text", "text": text, "synthetic": synthetic}]
        return self.send("chat.message", messageID="msg_2316d45ba001BQxqSt2uvoTX91", parts=parts, runArgs=run_args)

    def compacting(self) -> Answer:
        return self.send("session.compacting")

    def subagent(self, session_id: str, agent: str) -> OpenCodeSession:
        """The child session a `task` call dispatches from this one."""
        return OpenCodeSession(self.env, session_id, parent=self.id, agent=agent, server=self.server)

    def tool_fields(self, tool: str, args: dict[str, Any], call_id: str | None) -> dict[str, Any]:
        if call_id is None:  # the provider's id for the call, as OpenCode passes it on
            call_id = f"call_{uuid.uuid4().hex[:24]}"
        if tool in ("task", "bash", "read", "webfetch", "grep", "glob", "write", "edit"):
            return {"tool": tool, "callID": call_id, "args": args, "mcp": None}
        return {"tool": tool_name(self.server, tool), "callID": call_id, "args": args,
                "mcp": {"server": self.server, "tool": tool}}  # fmt: skip

    def before_message(self, tool: str, call_id: str | None = None, **args: Any) -> dict[str, Any]:
        return self.message("tool.execute.before", **self.tool_fields(tool, args, call_id))

    def before(self, tool: str, call_id: str | None = None, **args: Any) -> Answer:
        return run_hook(self.env, self.before_message(tool, call_id, **args))

    def after(self, tool: str, call_id: str, text: str, **args: Any) -> Answer:
        fields = self.tool_fields(tool, args, call_id)
        return self.send("tool.execute.after", **fields, content=[{"type": "text", "text": text}])

    def failed(self, tool: str, call_id: str, **args: Any) -> Answer:
        return self.send("tool.failed", **self.tool_fields(tool, args, call_id))

    def call(self, tool: str, text: str, **args: Any) -> tuple[Answer, Answer | None]:
        """Before, then (unless denied) after with the arguments the server got."""
        message = self.before_message(tool, **args)
        before = run_hook(self.env, message)
        if before.denied:
            return before, None
        return before, self.after(tool, message["callID"], text, **(before.args or args))

    def ledger_calls(self) -> list[tuple[str, str]]:
        ledger = open_ledger(str(self.env.state))
        try:
            rows = ledger.q("SELECT role, state FROM calls WHERE role != 'governor' ORDER BY created, rowid")
        finally:
            ledger.close()
        return [(str(role), str(state)) for role, state in rows]


@pytest.fixture
def opencode(env: Env) -> OpenCodeSession:
    return OpenCodeSession(env)


# -- the per-turn search cap, with OpenCode's call ids; the clamp ------------------------------


def test_parallel_searches_let_exactly_the_limit_through(opencode: OpenCodeSession) -> None:
    opencode.prompt("what did we decide about caching?")
    messages = [opencode.before_message("mem_search", query="cache", limit=3) for _ in range(6)]
    with ThreadPoolExecutor(max_workers=6) as pool:  # six hook processes at once
        answers = list(pool.map(lambda m: run_hook(opencode.env, m), messages))
    allowed = [m for m, a in zip(messages, answers, strict=True) if not a.denied]
    assert len(allowed) == 2, [a.data for a in answers]
    assert all("max_search_calls=2" in a.reason for a in answers if a.denied)
    first, second = (opencode.after("mem_search", m["callID"], SEARCH, query="cache", limit=3) for m in allowed)
    assert first.data == {"content": [{"type": "text", "text": snippets(SEARCH)}]}, "every hit, as its snippet"
    assert "already above in this conversation" in json.dumps(second.data), "the same entries again: named in one line"
    assert sorted(opencode.ledger_calls()) == [("search", "committed")] * 2 + [("search", "denied")] * 4


def test_a_clamp_sends_the_whole_new_arguments(opencode: OpenCodeSession) -> None:
    opencode.prompt("what did we decide about caching?")
    before, after = opencode.call("mem_search", SEARCH, query="cache", limit=10, project="project")
    assert before.args == {"query": "cache", "limit": 3, "project": "project"}  # the plugin replaces them in place
    assert after is not None and "held back" not in json.dumps(after.data), "nothing held back"
    missing = opencode.before("mem_search", query="cache")  # Engram's default is 10
    assert missing.args == {"query": "cache", "limit": 6}, "3, and as many more as may come back already shown"


def test_the_same_call_seen_again_counts_once(opencode: OpenCodeSession) -> None:
    # Two copies of the plugin (both scopes) would send each call twice: one call id, one count.
    opencode.prompt("what did we decide?")
    message = opencode.before_message("mem_search", query="a", limit=3)
    assert not run_hook(opencode.env, message).denied
    assert run_hook(opencode.env, message).silent
    assert opencode.ledger_calls() == [("search", "pending")]


def test_a_failed_call_gives_its_slot_back(opencode: OpenCodeSession) -> None:
    opencode.prompt("what did we decide about caching?")
    opencode.call("mem_search", SEARCH, query="a", limit=3)
    message = opencode.before_message("mem_search", query="b", limit=3)
    assert not run_hook(opencode.env, message).denied
    assert opencode.failed("mem_search", message["callID"], query="b", limit=3).silent
    assert not opencode.before("mem_search", query="c", limit=3).denied, "the failed call no longer counts"


# -- results: OpenCode's content blocks ------------------------------------------------------------


def test_result_text_is_what_opencode_gives_the_model() -> None:
    blocks = [
        {"type": "text", "text": "one"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "x://y", "text": "two"}},
        {"type": "text", "text": "three"},
    ]
    assert result_text(blocks) == "one\n\ntwo\n\nthree"
    assert result_text("plain") == "plain" and result_text(None) == ""


def test_a_trimmed_result_replaces_the_content_with_whole_entries(opencode: OpenCodeSession) -> None:
    opencode.prompt("what did we decide?")
    _, after = opencode.call("mem_search", big_search(3, body_words=150), query="decisions", limit=3)
    assert after is not None and after.content is not None
    [block] = after.content
    assert block["type"] == "text" and block["text"].startswith("Found 3 memories:\n\n[1] #100 (decision)")
    assert "[memory-governor]" in block["text"] and "held back" in block["text"]
    shown = {n for n in ("#100", "#101", "#102") if n in block["text"]}
    assert shown and shown != {"#100", "#101", "#102"}
    assert O200K(block["text"]) <= 1200
    for held in {"#100", "#101", "#102"} - shown:  # what the model never saw cannot be fetched
        assert opencode.before("mem_get_observation", id=int(held[1:])).denied


def test_ids_surfaced_by_a_search_unlock_a_fetch(opencode: OpenCodeSession) -> None:
    opencode.prompt("what exactly did we decide about JWT?")
    assert opencode.before("mem_get_observation", id=42).denied
    opencode.call("mem_search", SEARCH, query="jwt", limit=3)
    assert not opencode.before("mem_get_observation", id=42).denied
    assert opencode.before("mem_get_observation", id=999).denied


# -- turns, context, mem_context and its triggers ------------------------------------------------


def test_each_user_message_starts_a_turn_with_advice_for_the_model(opencode: OpenCodeSession) -> None:
    first = opencode.prompt("what did we decide about caching?")
    assert first.context.startswith("memory_need="), first.data  # the plugin adds it as a synthetic part
    opencode.call("mem_search", SEARCH, query="a", limit=3)
    opencode.call("mem_search", SEARCH, query="b", limit=3)
    assert opencode.before("mem_search", query="c", limit=3).denied
    opencode.prompt("and what did we decide about logging?")
    assert not opencode.before("mem_search", query="logging", limit=3).denied


def test_a_message_opencode_made_itself_is_no_new_turn(opencode: OpenCodeSession) -> None:
    # A background task's result comes back as a message whose every part is synthetic.
    opencode.prompt("what did we decide?")
    opencode.call("mem_search", SEARCH, query="a", limit=3)
    opencode.call("mem_search", SEARCH, query="b", limit=3)
    injected = opencode.prompt('<task id="ses_x" state="completed">\n<task_result>\ndone\n</task_result>\n</task>',
                               synthetic=True)  # fmt: skip
    assert injected.silent
    assert opencode.before("mem_search", query="c", limit=3).denied, "no fresh budget"


def test_compaction_unlocks_mem_context_once(opencode: OpenCodeSession) -> None:
    opencode.start()
    opencode.prompt("work on the parser")
    assert opencode.before("mem_context").denied
    answer = opencode.compacting()
    assert "mem_context is allowed once" in answer.context  # held for the session's next message
    opencode.prompt("continue")
    assert not opencode.before("mem_context").denied
    assert opencode.before("mem_context").denied, "one use"


def test_a_resume_unlocks_mem_context_only_after_a_break(env: Env, opencode: OpenCodeSession) -> None:
    opencode.start()
    opencode.prompt("where were we?")
    opencode.start("resume")  # the plugin's first sight of a session made before OpenCode started
    opencode.prompt("pick up where we left off")
    assert opencode.before("mem_context").denied, "30 idle minutes in the shipped policy"
    env.write(".memory-governor/policy.yaml",
              "mem_context:\n  unlocked_by:\n    session_resume: {scope: next_turn, uses: 1, min_idle_minutes: 0}\n")  # fmt: skip
    env.accept()  # a loosening written mid-session waits for the user
    opencode.start("resume")
    opencode.prompt("pick up where we left off")
    assert not opencode.before("mem_context").denied


def test_an_explicit_recall_prompt_unlocks_mem_context_for_that_turn(opencode: OpenCodeSession) -> None:
    answer = opencode.prompt("recordar todo lo que sabes del proyecto")
    assert "explicit recall requested" in answer.context
    allowed = opencode.before_message("mem_context", project="myapp")
    assert not run_hook(opencode.env, allowed).denied
    after = opencode.after("mem_context", allowed["callID"], CONTEXT, project="myapp")
    assert after.silent or O200K(after.content[0]["text"]) <= 1200  # type: ignore[index]


def test_opencode_runs_quotes_are_undone_so_its_prompt_is_no_quotation(opencode: OpenCodeSession) -> None:
    # `opencode run "give me all context"` gives the model `"give me all context"` (seen, 1.18.33).
    assert run_args('"give me all context"') == "give me all context"
    assert run_args('fix "the \\"a b\\" bug" now') == 'fix the "a b" bug now'
    assert run_args('say"a b"') == 'say"a b"', "only whole arguments were quoted"
    quoted = opencode.prompt('"give me all context"')
    assert "explicit recall requested" not in (quoted.context or ""), "typed in the TUI, quotes are a quotation"
    answer = OpenCodeSession(opencode.env, session_id="ses_dce5af371ffet7utEGUBrNVrHg").prompt(
        '"give me all context"', run_args=True
    )
    assert "explicit recall requested" in (answer.context or "")


# -- subagents: child sessions, counted in the dispatching turn ------------------------------------


def test_a_subagents_dispatch_prompt_is_no_turn_and_its_default_tier_cannot_search(opencode: OpenCodeSession) -> None:
    opencode.prompt("look up what we decided about auth")
    opencode.call("mem_search", SEARCH, query="auth", limit=3)
    assert opencode.before("task", description="look up", prompt="Find jwt.", subagent_type="general").silent
    child = opencode.subagent("ses_dce8fa4e6ffeTwdCvqgTjsSA0A", "general")
    assert child.prompt("Find jwt.").silent, "a dispatch prompt: no turn, no fresh budget"
    search = child.before("mem_search", query="jwt", limit=3)
    assert search.denied and "'general'" in search.reason and "briefing" in search.reason, search.reason
    saved = child.before("mem_save", title="JWT rotation", type="decision", content="**What**: rotate refresh tokens")
    assert not saved.denied


def test_a_search_capable_subagent_shares_the_dispatching_turn_budget(env: Env, opencode: OpenCodeSession) -> None:
    env.write(".opencode/agent/researcher.md", "---\ndescription: Researches.\nmode: subagent\n"
              "engram_access_tier: search-capable\n---\nYou research.\n")  # fmt: skip
    opencode.prompt("research auth and search")
    opencode.call("mem_search", SEARCH, query="auth", limit=3)
    child = opencode.subagent("ses_dce8b790affeYtvRkoyoX4HbvU", "researcher")
    child.prompt("Find what we decided about search.")
    assert not child.call("mem_search", SEARCH, query="search", limit=3)[0].denied
    assert child.before("mem_search", query="fts5", limit=3).denied, "two searches in the user's turn"
    grandchild = child.subagent("ses_dce8b7aaaffeYtvRkoyoX4HbvV", "researcher")  # a subagent's own subagent
    assert grandchild.before("mem_search", query="sqlite", limit=3).denied
    assert opencode.before("mem_search", query="errors", limit=3).denied


def test_a_memory_call_from_a_session_of_unknown_lineage_gets_on_error(env: Env, opencode: OpenCodeSession) -> None:
    message = opencode.before_message("mem_search", query="a", limit=3)
    message["parentID"] = None  # OpenCode's session info could not be read
    opened = run_hook(env, message)
    assert not opened.denied and "could not decide" in opened.message and "on_error: open" in opened.message
    env.write(".memory-governor/policy.yaml", "on_error: closed\n")
    closed = run_hook(env, {**message, "callID": "call_other"})
    assert closed.denied and "on_error=closed" in closed.reason
    # Other tools are never blocked by it.
    shell = opencode.message("tool.execute.before", tool="bash", callID="call_b", args={"command": "ls"}, mcp=None)
    assert run_hook(env, {**shell, "parentID": None}).silent


# -- routes around the memory tools ---------------------------------------------------------------


def test_opencode_shell_read_and_fetch_calls_to_engram_itself_are_refused(opencode: OpenCodeSession) -> None:
    opencode.prompt("what did we decide?")
    cli = opencode.before("bash", command="engram search jwt --limit 50", description="search")
    assert cli.denied and "route 'engram-cli'" in cli.reason, cli.data
    api = opencode.before("webfetch", url="http://127.0.0.1:7437/search?q=jwt", format="text")
    assert api.denied and "route 'engram-http-api'" in api.reason
    db = opencode.before("read", filePath=str(opencode.env.home / ".engram" / "engram.db"))
    assert db.denied and "route 'engram-database'" in db.reason
    assert opencode.before("bash", command="ls -la", description="list").silent


def test_tool_names_follow_opencode_and_the_message_names_the_server(env: Env) -> None:
    assert tool_name("engram", "mem_search") == "engram_mem_search"
    assert tool_name("my.engram", "mem_search") == "my_engram_mem_search"
    # A server whose name has "_" in it: the name alone cannot say where it ends; the message does.
    env.write(".memory-governor/policy.yaml", "tools:\n  - servers: [my_engram]\n    format: engram\n    map:\n"
              "      mem_search: {role: search, limit_param: limit}\n")  # fmt: skip
    session = OpenCodeSession(env, server="my_engram")
    session.prompt("what did we decide?")
    assert session.before("mem_search", query="a", limit=10).args == {"query": "a", "limit": 3}
    bare = session.before_message("mem_search", query="a", limit=10)
    bare["mcp"] = None
    assert run_hook(env, bare).silent, "a name the plugin does not map is no memory tool"


# -- malformed messages and the governor's own failures --------------------------------------------


@pytest.mark.parametrize("raw", [b"", b"{", b"null", b"[]", b'{"hook": 5}', b'{"hook": "tool.execute.before"}'])
def test_malformed_input_never_crashes_and_says_so(env: Env, raw: bytes) -> None:
    answer = run_hook(env, None, raw=raw)
    assert "memory-governor" in answer.stderr
    assert answer.silent or "could not decide" in answer.message


def test_fail_closed_denies_unreadable_calls_and_withholds_unreadable_results(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "on_error: closed\n")
    raw = b'{"hook": "tool.execute.before", "tool": "engram_mem_search", "args": {"q": 1}'
    answer = run_hook(env, None, raw=raw)
    assert answer.denied and "on_error=closed" in answer.reason
    after = b'{"hook": "tool.execute.after", "tool": "engram_mem_search", "content": ['
    withheld = run_hook(env, None, raw=after)
    assert withheld.content is not None and "on_error=closed" in withheld.content[0]["text"], withheld.data


def test_monitor_mode_never_blocks_and_says_what_enforce_would_do(env: Env, opencode: OpenCodeSession) -> None:
    env.write(".memory-governor/policy.yaml", "mode: monitor\n")
    opencode.prompt("what did we decide?")
    clamp = opencode.before("mem_search", query="a", limit=10)
    assert clamp.args is None and not clamp.denied and "would have clamped" in clamp.message
    assert not opencode.before("mem_context").denied


HOOKS = ["chat.message", "tool.execute.before", "tool.execute.after", "tool.failed", "session.start",
         "session.compacting", "event", ""]  # fmt: skip
TOOLS = ["engram_mem_search", "engram_mem_get_observation", "engram_mem_context", "engram_mem_save", "task", "bash",
         "read"]  # fmt: skip
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "hook": st.sampled_from(HOOKS) | JSON, "sessionID": JSON | HOSTILE, "parentID": JSON | HOSTILE,
        "agent": JSON | HOSTILE, "directory": JSON | HOSTILE, "tool": st.sampled_from(TOOLS) | JSON,
        "callID": JSON | HOSTILE, "source": JSON,
        "args": JSON | st.fixed_dictionaries({}, optional={"query": JSON, "limit": JSON, "id": JSON, "prompt": JSON,
                                                           "command": JSON, "subagent_type": JSON | HOSTILE}),
        "mcp": JSON | st.fixed_dictionaries({}, optional={"server": JSON, "tool": st.sampled_from(
            ["mem_search", "mem_context", "mem_save"]) | JSON}),
        "content": JSON | st.lists(st.fixed_dictionaries({}, optional={"type": JSON, "text": JSON}), max_size=3),
        "parts": JSON | st.lists(st.fixed_dictionaries({}, optional={"type": JSON, "text": JSON,
                                                                     "synthetic": JSON}), max_size=3),
    },
)  # fmt: skip


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(message=MESSAGES)
def test_fuzzed_plugin_messages_always_get_a_valid_answer(tmp_path: Path, message: dict[str, Any]) -> None:
    raw = json.dumps(message, default=str).encode("utf-8", "surrogatepass")
    started = time.monotonic()
    out = respond("opencode", raw, fuzz_env(tmp_path)).stdout()
    assert time.monotonic() - started < 10
    if out:
        text = out.decode("utf-8")
        assert text.endswith("\n") and text.count("\n") == 1
        data = json.loads(text)
        assert isinstance(data, dict) and set(data) <= ANSWER_KEYS, data
    assert [p.name for p in tmp_path.iterdir() if p.name not in ("home", "state")] == []


# -- the plugin's first step: describing the governor -----------------------------------------------


def test_describe_gives_the_stamp_the_server_checks_and_the_policy_on_error(env: Env) -> None:
    from governor import stamp

    env.write(".memory-governor/policy.yaml", "on_error: closed\n")
    proc = subprocess.run([*HOOK[:-1], "--describe", str(env.project)], capture_output=True, env=env.vars, timeout=60)
    assert proc.returncode == 0, proc.stderr
    described = json.loads(proc.stdout)
    assert described["fingerprint"] == stamp().decode() and described["protocol"] == "MG1"
    assert described["socket"] == str(env.state / "run" / "governor.sock")
    assert described["on_error"] == "closed" and described["state"] == str(env.state)
    compiled = json.loads(Path(described["policy"]).read_text())  # read when no governor answers
    assert compiled["policy"]["on_error"] == "closed"


# -- install, uninstall, doctor --------------------------------------------------------------------


def plugin_config(path: Path) -> dict[str, Any]:
    from governor.harnesses.opencode.setup import installed_config

    config = installed_config(path.read_text())
    assert config is not None
    return config


def test_install_writes_a_plain_plugin_with_no_dependencies_and_is_idempotent(env: Env) -> None:
    out = env.cli("install", "opencode", check=True)
    plugin = env.project / ".opencode" / "plugin" / "memory-governor.js"
    assert "installed the plugin for" in out.stdout and plugin.exists()
    text = plugin.read_text()
    imports = [line for line in text.splitlines() if line.startswith("import ")]
    assert imports and all('from "node:' in line for line in imports), imports  # no package to install
    config = plugin_config(plugin)
    # Committed: it runs the project's launcher (found beside the plugin file), no machine's path.
    assert config["launcher"] == ".memory-governor/hook" and "command" not in config, config
    assert (env.project / ".memory-governor" / "hook").exists() and str(env.tmp) not in text
    assert config["tools"]["engram_mem_search"] == ["engram", "mem_search"]
    assert config["tools"]["plugin_engram_engram_mem_context"] == ["plugin_engram_engram", "mem_context"]
    assert {"task", "bash", "read", "webfetch"} <= set(config["forward"])
    if shutil.which("node"):
        check = subprocess.run(["node", "--check", str(plugin)], capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stderr
    again = env.cli("install", "opencode", check=True)
    assert "already installed, nothing changed" in again.stdout
    assert plugin.read_text() == text and not list(plugin.parent.glob("*.bak-*"))


def test_install_after_a_policy_change_rewrites_it_backed_up_and_dry_run_changes_nothing(env: Env) -> None:
    env.cli("install", "opencode", check=True)
    plugin = env.project / ".opencode" / "plugin" / "memory-governor.js"
    env.write(".memory-governor/policy.yaml", "tools:\n  - servers: [memory]\n    format: engram\n    map:\n"
              "      mem_search: {role: search, limit_param: limit}\n")  # fmt: skip
    before = plugin.read_text()
    dry = env.cli("install", "opencode", "--dry-run", check=True)
    assert "would become" in dry.stdout and plugin.read_text() == before
    env.cli("install", "opencode", check=True)
    assert "memory_mem_search" in plugin_config(plugin)["tools"]
    [backup] = plugin.parent.glob("memory-governor.js.bak-*")
    assert backup.read_text() == before and not backup.name.endswith((".js", ".ts")), "OpenCode loads *.js only"


def test_install_refuses_a_plugin_of_that_name_that_is_not_ours(env: Env) -> None:
    mine = env.write(".opencode/plugin/memory-governor.js", "export const Mine = async () => ({})\n")
    out = env.cli("install", "opencode")
    assert out.returncode != 0 and "not memory-governor's" in out.stderr
    assert mine.read_text() == "export const Mine = async () => ({})\n"
    assert "memory-governor.js: not installed, nothing changed\n" in env.cli("uninstall", "opencode", check=True).stdout
    assert mine.exists()


def test_uninstall_removes_only_our_plugin(env: Env) -> None:
    other = env.write(".opencode/plugin/other.js", "export const Other = async () => ({})\n")
    env.cli("install", "opencode", check=True)
    out = env.cli("uninstall", "opencode", check=True)
    assert "plugin removed" in out.stdout
    assert not (env.project / ".opencode" / "plugin" / "memory-governor.js").exists() and other.exists()


def test_user_scope_goes_to_opencodes_config_folder(env: Env) -> None:
    out = env.cli("install", "opencode", "--scope", "user", check=True)
    plugin = env.home / ".config" / "opencode" / "plugin" / "memory-governor.js"
    assert str(plugin) in out.stdout and plugin.exists()
    assert plugin_config(plugin)["command"] == [sys.executable, "-I", "-S",
                                                str(ROOT / "governor" / "runtime" / "entry.py"), "opencode"]  # fmt: skip
    assert not (env.project / ".memory-governor" / "hook").exists(), "no launcher for a per-machine scope"
    assert env.cli("install", "opencode", "--scope", "local").returncode != 0


def _doctor(env: Env, extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    out = env.cli("doctor", "--format", "json", env=extra)
    return [row for row in json.loads(out.stdout) if row["check"].startswith(("opencode", "memory server"))]


def test_doctor_passes_a_fresh_install_and_runs_the_governor_the_plugin_names(env: Env) -> None:
    env.cli("install", "opencode", check=True)
    rows = {row["check"]: row for row in _doctor(env)}
    assert rows["opencode (project)"]["status"] == "ok", rows
    assert rows["opencode plugin"]["status"] == "ok" and "clamped limit 10 -> 3" in rows["opencode plugin"]["detail"]


def _load_plugin(env: Env, plugin: Path, cwd: Path, pwd: Path) -> subprocess.CompletedProcess[str]:
    """Node loads the plugin as OpenCode does under `opencode run` (argv[2] is `run`), in `cwd`
    with an inherited PWD of `pwd`."""
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is required under CI")
        pytest.skip("node is not installed")
    probe = env.tmp / "probe.mjs"
    probe.write_text("const { MemoryGovernor } = await import(process.env.PLUGIN)\n"
                     "await MemoryGovernor({ client: {}, directory: process.env.PWD, worktree: process.env.PWD })\n")  # fmt: skip
    return subprocess.run([node, str(probe), "run"], capture_output=True, text=True, timeout=60, cwd=str(cwd),
                          env={**env.vars, "PLUGIN": plugin.as_uri(), "PWD": str(pwd)})  # fmt: skip


def test_a_stale_pwd_is_said_by_the_plugin_and_by_doctor(env: Env) -> None:
    """OpenCode takes its directory from an inherited $PWD before its working directory: started
    with a stale PWD, a project-scope plugin governs nothing. The plugin says so when it loads,
    and doctor says so when run with one."""
    env.cli("install", "opencode", "--scope", "user", check=True)
    plugin = env.home / ".config" / "opencode" / "plugin" / "memory-governor.js"
    elsewhere = env.tmp / "elsewhere"
    elsewhere.mkdir()
    stale = _load_plugin(env, plugin, env.project, elsewhere)
    assert stale.returncode == 0, stale.stderr
    assert f"took its project from PWD={elsewhere}" in stale.stderr and str(env.project) in stale.stderr, stale.stderr
    fine = _load_plugin(env, plugin, env.project, env.project)
    assert fine.returncode == 0 and "PWD" not in fine.stderr, fine.stderr

    rows = [row for row in _doctor(env, {"PWD": str(elsewhere)}) if "$PWD" in row["detail"]]
    assert rows and rows[0]["status"] == "warn" and str(elsewhere) in rows[0]["detail"], rows
    assert not [row for row in _doctor(env, {"PWD": str(env.project)}) if "$PWD" in row["detail"]]


def test_doctor_flags_a_stale_plugin_a_missing_interpreter_and_an_unmapped_memory_server(env: Env) -> None:
    env.cli("install", "opencode", check=True)
    plugin = env.project / ".opencode" / "plugin" / "memory-governor.js"
    env.write(".memory-governor/policy.yaml", "tools:\n  - servers: [memory]\n    format: engram\n    map:\n"
              "      mem_search: {role: search, limit_param: limit}\n")  # fmt: skip
    env.write("opencode.jsonc", '{\n  // the team\'s servers\n  "mcp": {"mem0": {"type": "local", "command": '
              '["uvx", "mem0-mcp"]},},\n}\n')  # fmt: skip
    rows = {row["check"]: row for row in _doctor(env)}
    assert (
        rows["opencode (project)"]["status"] == "FAIL" and "memory_mem_search" in rows["opencode (project)"]["detail"]
    )
    assert rows["memory server"]["status"] == "warn" and "'mem0'" in rows["memory server"]["detail"]
    env.cli("uninstall", "opencode", check=True)
    env.cli("install", "opencode", "--scope", "user", check=True)  # the scope that names this machine's interpreter
    plugin = env.home / ".config" / "opencode" / "plugin" / "memory-governor.js"
    text = plugin.read_text().replace(sys.executable, "/nonexistent/python3")
    plugin.write_text(text)
    rows = {row["check"]: row for row in _doctor(env)}
    assert rows["opencode plugin"]["status"] == "FAIL" and "does not answer" in rows["opencode plugin"]["detail"]


def test_nothing_installed_means_no_opencode_rows(env: Env) -> None:
    assert _doctor(env) == []


RENAMED = """
const { MemoryGovernor } = await import(process.env.PLUGIN)
const client = { session: { get: async ({ path }) => ({ data: { id: path.id, parentID: "", agent: "build",
  time: { created: Date.now() } } }) } }
const hooks = await MemoryGovernor({ client, directory: process.cwd(), worktree: process.cwd() })
const seen = []
for (const [i, tool] of ["mem_mem_search", "mem_mem_search", "mem_mem_search", "github_list_issues"].entries()) {
  const output = { args: { query: "cache", limit: 10 } }
  try { await hooks["tool.execute.before"]({ tool, sessionID: "ses_1", callID: `call_${i}` }, output); seen.push(output.args.limit) }
  catch (err) { seen.push("denied") }
}
console.log(JSON.stringify(seen))
"""


def test_the_memory_under_another_server_name_is_governed_by_the_plugin(env: Env) -> None:
    """The model's own `mcp` entry in opencode.json names the server `mem`: OpenCode calls its tools
    `mem_mem_search`, which the policy does not list; the plugin judges them by what they are."""
    env.cli("install", "opencode", check=True)
    plugin = env.project / ".opencode" / "plugin" / "memory-governor.js"
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is required under CI")
        pytest.skip("node is not installed")
    probe = env.write("renamed.mjs", RENAMED)
    out = subprocess.run([node, str(probe), "run"], capture_output=True, text=True, timeout=60, cwd=str(env.project),
                         env={**env.vars, "PLUGIN": plugin.as_uri(), "MEMORY_GOVERNOR_WARM_SERVER": "off"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [3, 3, "denied", 10], out.stdout + out.stderr
