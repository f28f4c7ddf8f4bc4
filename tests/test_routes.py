"""Every route to the memory is governed, through the hook process fed each harness's payloads:
the memory server registered again under another name is known by its tools, a tool of it that
the policy does not map is counted and trimmed, and a search widened to every project is clamped."""

from __future__ import annotations

import re
from typing import Any

import pytest

from governor.engine.tokens import counter
from tests.conftest import HOOK, Env, Session, fixture_text

SEARCH = fixture_text("engram/search_v1.txt")
NOTE = "[memory-governor]"
O200K = counter("o200k_base").count
# What Engram v2's mem_review (a tool no shipped map names) returns for a wide review: ~6,000 tokens.
REVIEW = "Review queue (40 observations):\n\n" + "".join(
    f"- #{1000 + i} [decision] Entry {i}: " + "the cache layer keeps its own clock and retries " * 12 + "\n"
    for i in range(40)
)


def _ledger_roles(env: Env) -> list[tuple[str, str]]:
    from governor.engine.stores import open_ledger

    ledger = open_ledger(str(env.state))
    try:
        return [(str(r[0]), str(r[1])) for r in ledger.q("SELECT role, state FROM calls ORDER BY created")]
    finally:
        ledger.close()


# -- 1. the memory server under another name ------------------------------------------------------


def test_the_memory_server_under_another_name_is_governed_as_itself(env: Env) -> None:
    """The model adds `.mcp.json` with the same server as `mem` and calls it: the same ladder, the
    same caps, the same locked mem_context as under the name the policy lists."""
    session = Session(env, server="mem")
    session.prompt("what did we decide about auth?")
    first, after = session.call("mem_search", SEARCH, query="auth", limit=20)
    assert first.updated_input == {"query": "auth", "limit": 3}, first.specific
    assert after is not None
    second, _ = session.call("mem_search", SEARCH, query="jwt", limit=20)
    assert not second.denied
    third = session.pre("mem_search", query="tokens", limit=20)
    assert third.denied and "max_search_calls=2" in third.reason
    context = session.pre("mem_context")
    assert context.denied and "whole-memory dump" in context.reason
    fetch = session.pre("mem_get_observation", id=999)
    assert fetch.denied and "was not surfaced" in fetch.reason


def test_a_server_split_oddly_by_its_harness_is_still_known_by_its_tools(env: Env) -> None:
    """`mcp__team__memory__mem_search` splits at the first `__` as server `team`, tool
    `memory__mem_search`: the tool is still mem_search."""
    session = Session(env)
    session.prompt("what did we decide about auth?")
    answer = session.pre("mcp__team__memory__mem_search", query="auth", limit=20)
    assert answer.updated_input == {"query": "auth", "limit": 3}, answer.specific


def test_an_unmapped_tool_of_the_memory_is_counted_and_trimmed(env: Env) -> None:
    """Engram v2's mem_review (and mem_judge, mem_compare, mem_pin, ...) is no tool the policy maps:
    its result is cut to what the turn's budget has left, and counted."""
    assert O200K(REVIEW) > 3000
    for server in ("engram", "mem"):
        session = Session(env, session_id=f"sess-{server}", server=server)
        session.prompt("review what we decided")
        before, after = session.call("mem_review", REVIEW, limit=40)
        assert not before.denied, before.reason
        assert after is not None and after.output is not None, f"{server}: passed untouched"
        assert O200K(after.output) <= 1200 and NOTE in after.output, (server, O200K(after.output))
        small, told = session.call("mem_pin", "Pinned #1001.", id=1001)
        assert not small.denied and told is not None and told.silent, "a result that fits passes as it is"
    assert _ledger_roles(env).count(("other", "committed")) == 4


def test_a_tool_of_another_server_is_left_alone(env: Env) -> None:
    session = Session(env, server="github")
    session.prompt("list the open issues")
    before, after = session.call("list_issues", REVIEW, state="open")
    assert before.silent and after is not None and after.silent


def test_a_search_of_every_project_is_clamped_to_this_one(env: Env) -> None:
    session = Session(env)
    session.prompt("what did we decide about auth?")
    wide = session.pre("mem_search", query="auth", limit=3, all_projects=True)
    assert wide.updated_input == {"query": "auth", "limit": 3, "all_projects": False}, wide.specific
    other = session.pre("mem_search", query="auth", limit=3, project="billing-service")
    assert other.updated_input == {"query": "auth", "limit": 3}, other.specific
    session.prompt("and in this project?")
    own = session.pre("mem_search", query="auth", limit=3, project=env.project.name)
    assert own.silent, "the session's own project is kept as it was asked"


def test_a_team_may_let_sessions_read_other_projects(env: Env) -> None:
    env.write(
        ".memory-governor/policy.yaml", "ladder:\n  L1: {expected_tokens: 100, max_limit: 3, other_projects: true}\n"
    )
    session = Session(env)
    session.prompt("what did we decide about auth?")
    assert session.pre("mem_search", query="auth", limit=3, all_projects=True).silent


def test_every_harness_governs_a_renamed_memory_server_by_its_own_tool_names(env: Env) -> None:
    from tests.harnesses.test_codex import Codex
    from tests.harnesses.test_codex import denied as codex_denied
    from tests.harnesses.test_copilot import Copilot
    from tests.harnesses.test_gemini_cli import GeminiSession
    from tests.harnesses.test_opencode import OpenCodeSession

    codex = Codex(env)
    codex.prompt("what did we decide?")
    answers: list[Any] = []
    for n in range(3):
        payload = codex.payload("PreToolUse", tool_name="mcp__mem__mem_search", tool_input={"query": "x", "limit": 20},
                                tool_use_id=f"call_mem_{n}")  # fmt: skip
        answers.append(codex.hook(payload))
    specific = (answers[0] or {}).get("hookSpecificOutput", {})
    assert specific.get("updatedInput") == {"query": "x", "limit": 3}, answers[0]
    assert codex_denied(answers[2], "max_search_calls"), "codex"

    copilot = Copilot(env)
    copilot.prompt("what did we decide?")
    replies = [copilot.send("preToolUse", toolName="mem-mem_search", toolArgs={"query": "x", "limit": 20})
               for _ in range(3)]  # fmt: skip
    assert replies[0].args == {"query": "x", "limit": 3} and replies[2].denied, "copilot"

    gemini = GeminiSession(env, server="mem")
    gemini.prompt("what did we decide?")
    told = [gemini.pre("mem_search", query="x", limit=20) for _ in range(3)]
    assert told[0].tool_input == {"query": "x", "limit": 3} and told[2].denied, "gemini"
    bare = gemini.event("BeforeTool", tool_name="mcp_my_mem_mem_context", tool_input={})
    assert bare.denied, "gemini, a server key with `_` and no mcp_context"

    opencode = OpenCodeSession(env, server="mem")
    opencode.prompt("what did we decide?")
    sent = [opencode.before("mem_search", query="x", limit=20) for _ in range(3)]
    assert sent[0].args == {"query": "x", "limit": 3} and sent[2].denied, "opencode"


# -- 2. disguised transcripts saved -------------------------------------------------------------


def _disguises() -> list[tuple[str, str]]:
    import json as _json

    from tests.conftest import ROOT

    rows = [_json.loads(line) for line in (ROOT / "tests/fixtures/saves/attacks.jsonl").read_text().splitlines()]
    return [(row["rule"], row["content"]) for row in rows[-11:]]  # the structure-only disguises, added last


def test_a_transcript_or_tool_output_disguised_by_its_labels_or_shape_is_not_saved(env: Env) -> None:
    """Speaker labels in other languages or as emoji, a table of turns, raw `ls -la` and pytest
    output: caught by their structure (the shipped speaker labels name none of them)."""
    session = Session(env)
    session.prompt("save what we found")
    for rule, content in _disguises():
        answer = session.pre("mem_save", title="Login fix", type="bugfix", content=content)
        assert answer.denied and f"never_save:{rule}" not in answer.reason, "the code is not shown to the model"
        assert ("raw transcript" if rule == "raw_transcript" else "raw tool output") in answer.reason, (rule, content)


def test_a_real_memory_with_a_table_or_yaml_is_saved(env: Env) -> None:
    session = Session(env)
    session.prompt("save the decision")
    table = "| Option | Why |\n|---|---|\n| Redis | no retries |\n| SQS | retries and a DLQ |\n| Kafka | too heavy |"
    assert not session.pre("mem_save", title="Queue", type="decision", content=table).denied
    flags = "- name: new_checkout\n  owner: payments\n- name: dark_mode\n  owner: web\n"
    assert not session.pre("mem_save", title="Flags", type="pattern", content=flags).denied


# -- 3. shell routes to Engram's data that a model plausibly types ---------------------------------


SPELLINGS = [
    ("engram-cli", "engram --project billing search jwt"),
    ("engram-cli", "engram -p billing --json search jwt"),
    ("engram-cli", '"engram" --data-dir=/tmp/e get 42'),
    ("engram-http-api", "curl -s 'http://127.1:7437/search?q=jwt'"),
    ("engram-http-api", "curl http://127.0.1:7437/context"),
    ("engram-http-api", "curl 'http://[0:0:0:0:0:0:0:1]:7437/search?q=jwt'"),
    ("engram-http-api", "curl http://[::ffff:127.0.0.1]:7437/search"),
    ("engram-http-api", "curl http://0x7f000001:7437/search"),
    ("engram-http-api", "curl http://LOCALHOST:7437/search"),
    ("engram-http-api", "printf 'GET /search?q=jwt HTTP/1.0\\r\\n\\r\\n' | nc 127.0.0.1 7437"),
    ("engram-http-api", "python3 -c \"import socket; socket.create_connection(('127.1', 7437))\""),
    ("engram-database", "cd ~/.engram && strings eng*.db | grep jwt"),
    ("engram-database", "sqlite3 /srv/data/eng*.db 'select * from observations'"),
    ("engram-database", "python3 -c \"import glob; print(glob.glob('/srv/.engr*/*.db'))\""),
]


def test_the_memory_reached_by_a_spelling_a_model_plausibly_types_is_refused(env: Env) -> None:
    """Engram with global flags before its verb, the HTTP API on any loopback spelling, its
    database through a glob that matches nothing yet: refused as the route they take."""
    (env.home / ".engram").mkdir()
    (env.home / ".engram" / "engram.db").write_bytes(b"SQLite format 3\x00")
    session = Session(env)
    session.prompt("what did we decide about JWT?")
    for route, command in SPELLINGS:
        answer = session.pre("Bash", command=command)
        assert answer.denied and f"route '{route}'" in answer.reason, (route, command, answer.reason)


def test_commands_that_only_look_alike_are_left_alone(env: Env) -> None:
    session = Session(env)
    session.prompt("look around")
    for command in ("engram --help", "pip install engram-tools", "ls english*.txt", "curl http://example.com:7437/",
                    "python -m http.server 8000", "grep -rn 127.0.0.1 config/"):  # fmt: skip
        assert session.pre("Bash", command=command).silent, command


# -- 1b. the installed matchers start the hooks for the memory under another name ------------------

# harness -> (the file `install --scope project` writes, its before-tool event, how the harness
# names the renamed server's search, another server's tool, and how it applies a matcher)
MATCHERS = {
    "claude-code": (".claude/settings.json", "PreToolUse", "mcp__mem__mem_search", "mcp__github__list_issues",
                    lambda m, name: re.search(m, name) is not None if re.search(r"[^\w|-]", m) else name in m.split("|")),
    "codex": (".codex/hooks.json", "PreToolUse", "mcp__mem__mem_search", "mcp__github__list_issues",
              lambda m, name: re.search(m, name) is not None),
    "copilot": (".github/hooks/memory-governor.json", "preToolUse", "mem-mem_search", "github-list_issues",
                lambda m, name: re.fullmatch(m, name) is not None),
    "gemini-cli": (".gemini/settings.json", "BeforeTool", "mcp_mem_mem_search", "mcp_github_list_issues",
                   lambda m, name: re.search(m, name) is not None),
    "droid": (".factory/settings.json", "PreToolUse", "mem___mem_search", "github___list_issues",
              lambda m, name: re.search(m, name) is not None),
    "qwen-code": (".qwen/settings.json", "PreToolUse", "mcp__mem__mem_search", "mcp__github__list_issues",
                  lambda m, name: re.search(m, name) is not None),
}  # fmt: skip


@pytest.mark.parametrize("harness", sorted(MATCHERS))
def test_the_installed_matchers_catch_the_memory_under_another_name(env: Env, harness: str) -> None:
    import json

    path, event, renamed, other, applies = MATCHERS[harness]
    env.cli("install", harness, "--scope", "project", check=True)
    groups = json.loads((env.project / path).read_text())["hooks"][event]
    matchers = [str(g.get("matcher") or next(h for h in g["hooks"]).get("matcher", "")) for g in groups]
    unmapped = renamed.replace("mem_search", "mem_review").replace("mem", "engram", 1)  # Engram v2's, unmapped
    for name in (renamed, unmapped):
        assert any(applies(m, name) for m in matchers), (harness, name, matchers)
    assert not any(applies(m, other) for m in matchers), (harness, other)


# -- 6. from the newest versions ---------------------------------------------------------------------


def _observation_with_history(versions: int = 3) -> str:
    """What Engram v2's mem_get_observation returns with include_history: true (its envelope, the
    observation, then every earlier version, oldest first, in the text and in `history`)."""
    import json as _json

    old = [f"Auth design, revision {v}: " + "the gateway validates tokens and refreshes them on expiry " * 20
           for v in range(1, versions + 1)]  # fmt: skip
    text = ("#42 [decision] Switched from sessions to JWT\nOAuth2 via the gateway.\nSession: s1\nProject: myapp\n"
            f"Scope: project\nTopic: decision/auth-model\nDuplicates: 1\nRevisions: {versions}\nCreated: 2025-03-01 14:22:05"
            f"\n\nHistory ({versions} previous versions):")  # fmt: skip
    history = []
    for v, content in enumerate(old, start=1):
        text += f"\n\n--- Version {v} (2025-02-0{v}10:00:00) ---\nAuth architecture\n{content}"
        history.append({"version": v, "title": "Auth architecture", "content": content, "created_at": f"2025-02-0{v}"})
    return _json.dumps({"project": "myapp", "result": text, "version_count": versions, "history": history})


def test_a_fetch_with_its_history_keeps_the_observation_and_the_newest_versions_that_fit(env: Env) -> None:
    """1,170 of 1,200 tokens left was enough for the observation, not for all its history: the
    history is trimmed (oldest first), never the observation refused whole."""
    import json as _json

    result = _observation_with_history()
    assert O200K(result) > 1200
    session = Session(env)
    session.prompt("what did we decide about auth?")
    session.call("mem_search", SEARCH, query="auth", limit=3)
    before, after = session.call("mem_get_observation", result, id=42, include_history=True)
    assert not before.denied, before.reason
    assert after is not None and after.output is not None
    delivered = _json.loads(after.output)
    text = delivered["result"]
    assert text.startswith("#42 [decision] Switched from sessions to JWT\nOAuth2 via the gateway."), text[:200]
    assert "--- Version 3 " in text and "--- Version 1 " not in text, "the newest version first, the oldest dropped"
    assert [item["version"] for item in delivered["history"]] == [v for v in (1, 2, 3) if f"--- Version {v} " in text]
    assert "earlier versions of this observation held back" in text
    assert O200K(after.output) <= 1200 - 245, O200K(after.output)


def test_a_search_that_only_fits_cut_to_nothing_is_refused_before_it_runs(env: Env) -> None:
    """About 110 tokens left: a search lowered to limit 1 used to run, cost a search, and come back held
    back whole (its one hit and the note did not fit). It is refused before it runs instead, and
    the turn keeps its search for a narrower ask."""
    env.write(".memory-governor/policy.yaml", "limits:\n  max_memory_tokens_injected: {value: 130, enforce: block}\n")
    one_hit = "Found 1 memories:\n\n" + SEARCH.split("\n\n")[2].replace("[2] #57", "[1] #57", 1) + "\n"
    session = Session(env)
    session.prompt("what did we decide about the search endpoint?")
    before, after = session.call("mem_search", one_hit, query="fts5", limit=3)
    assert before.denied and "budget is spent" in before.reason, (before.specific, after and after.output)
    assert ("search", "denied") in _ledger_roles(env) and ("search", "committed") not in _ledger_roles(env)


def _context_of(size: int) -> str:
    """Engram's mem_context, grown with observations and cut to `size` bytes as v2 cuts it."""
    base = fixture_text("engram/context_v1.txt")
    head, tail = base.split("\n---\nMemory stats:", 1)
    more = "".join(f"- [decision] **Entry {i}**: the cache layer keeps its own clock and retries twice\n"
                   for i in range(400))  # fmt: skip
    whole = f"{head.rstrip()}\n{more}\n---\nMemory stats:{tail}"
    data = whole.encode()
    return (
        whole
        if len(data) <= size
        else data[: size - len("\n[truncated]\n")].decode("utf-8", "ignore") + "\n[truncated]\n"
    )


def test_an_allowed_mem_context_asks_the_server_for_what_fits(env: Env) -> None:
    """The user asked for everything remembered: the call goes with max_bytes near what the turn
    has left and compact, so what comes back fits instead of 16 KiB trimmed afterwards."""
    session = Session(env)
    session.prompt("recordar todo lo del proyecto")
    before = session.pre("mem_context", call_id="toolu_ctx")
    asked = before.updated_input or {}
    assert asked.get("compact") is True, before.specific
    assert 2000 <= asked.get("max_bytes", 0) <= 3600, asked
    after = session.post("mem_context", "toolu_ctx", _context_of(asked["max_bytes"]), **asked)
    assert after.silent, f"what the server sent for that size fits: {after.output and after.output[-200:]}"
    assert O200K(_context_of(16384)) > 3000, "what it would have sent unasked"
    session.prompt("recordar todo lo que tengas guardado")
    smaller = session.pre("mem_context", max_bytes=500)
    assert smaller.updated_input == {"max_bytes": 500, "compact": True}, smaller.specific


def test_an_allowed_mem_context_reads_this_projects_memory_only(env: Env) -> None:
    """L1's other_projects is off: a mem_context naming another project is asked without it (the
    server reads the session's own), as a search is; this project's own name stays."""
    session = Session(env)
    session.prompt("recordar todo lo del proyecto")
    other = session.pre("mem_context", project="billing-service", max_bytes=500)
    assert other.updated_input == {"max_bytes": 500, "compact": True}, other.specific
    session.prompt("recordar todo lo que tengas guardado")
    own = session.pre("mem_context", project=env.project.name, max_bytes=500)
    assert own.updated_input == {"project": env.project.name, "max_bytes": 500, "compact": True}, own.specific


def test_an_ordinary_shell_command_or_file_tool_hook_loads_no_regex_and_no_ledger(env: Env) -> None:
    """A cold hook for Bash or Read that takes no route decides with the least work: the command is
    read without `re` or `shlex` (a route's pattern is compiled only where one of its words is in
    the call), no save detector is loaded, and no ledger is opened. A protected target is still
    refused (and the refusal goes through the ledger)."""
    import json
    import subprocess

    session = Session(env)
    session.prompt("tidy the notes")
    command = [HOOK[0], "-X", "importtime", *HOOK[1:]]
    heavy = {"governor.engine.saves", "fnmatch", "re", "shlex", "_sqlite3", "governor.engine.sqlite_ledger"}
    for tool, tool_input, denied in [
        ("Bash", {"command": "echo x > notes/out.txt && cp a.txt /tmp/b.txt"}, False),
        ("Bash", {"command": 'git commit -m "release $(date +%F)" && grep -n "def .*(" src/app/main.py'}, False),
        ("Bash", {"command": "echo {} > .claude/settings.local.json"}, True),  # a protected target, written
        ("Read", {"file_path": str(env.project / "README.md")}, False),
    ]:
        payload = {"session_id": session.id, "transcript_path": str(session.transcript),
                   "cwd": str(env.project), "hook_event_name": "PreToolUse", "permission_mode": "default",
                   "tool_name": tool, "tool_input": tool_input, "tool_use_id": session.next_id()}  # fmt: skip
        proc = subprocess.run(command, input=json.dumps(payload).encode(), capture_output=True, timeout=60,
                              env=env.vars, cwd=str(env.project))  # fmt: skip
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
        assert "governor.engine.routes" in imported, "the routes were not checked at all"
        answer = json.loads(proc.stdout) if proc.stdout.strip() else {}
        assert (answer.get("hookSpecificOutput", {}).get("permissionDecision") == "deny") == denied, (
            tool_input,
            answer,
        )
        if not denied:
            assert not imported & heavy, (tool_input, imported & heavy)
