"""The MCP proxy as a process, spoken to as an MCP client speaks: one JSON-RPC object per line.

Behind it runs the Engram-shaped server of the e2e tests (tests/e2e/engram_mcp.py, which logs
every tools/call it receives) or, where a test needs a server that misbehaves, a small stub.
Assertions read what the client received and what the server received.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from governor.engine.stores import open_ledger
from governor.engine.tokens import counter
from tests.conftest import ROOT, Env, Session

sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import seed

PROXY = ROOT / "governor" / "runtime" / "proxy.py"
ENGRAM = ROOT / "tests" / "e2e" / "engram_mcp.py"
NOTE = "[memory-governor]"
O200K = counter("o200k_base").count
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
# A server that answers only what a test tells it to (env STUB_RULES, or a file named by STUB_RULES_FILE:
# method -> "silent" | "exit" | a result).
STUB = """
import json, os, sys
rules = json.loads(open(os.environ["STUB_RULES_FILE"]).read() if "STUB_RULES_FILE" in os.environ
                   else os.environ.get("STUB_RULES", "{}"))
for line in sys.stdin:
    message = json.loads(line)
    rule = rules.get(message.get("method"))
    if rule == "exit":
        sys.exit(3)
    if "id" in message and rule != "silent":
        result = rule if rule is not None else {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
        sys.stdout.flush()
"""


class Wire:
    """One client connection to a proxy process."""

    def __init__(self, env: Env, server: list[str] | None = None, extra_env: dict[str, str] | None = None) -> None:
        self.env = env
        self.seed = seed.write_engram_seed(env.tmp / "engram-seed.json")
        self.call_log = env.tmp / "engram-calls.jsonl"
        command = server or [sys.executable, str(ENGRAM)]
        variables = {**env.vars, "ENGRAM_SEED": str(self.seed), "ENGRAM_CALL_LOG": str(self.call_log),
                     **(extra_env or {})}  # fmt: skip
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(PROXY), "--name", "engram", "--", *command],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=variables, cwd=env.project)  # fmt: skip
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.answers: dict[Any, dict[str, Any]] = {}
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(message if isinstance(message, bytes) else (json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, **({"params": params} if params else {})})
        return self.next_id

    def answer(self, ident: Any, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while ident not in self.answers:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            message = json.loads(line)
            self.answers[message.get("id")] = message
        return self.answers.pop(ident)

    def initialize(self) -> dict[str, Any]:
        answer = self.answer(self.request("initialize", INIT))
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def call(self, tool: str, meta: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
        return self.answer(self.request("tools/call", _params(tool, arguments, meta)))["result"]

    def server_calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.call_log.exists():
            return []
        rows = [json.loads(line) for line in self.call_log.read_text().splitlines()]
        return [row for row in rows if tool is None or row["tool"] == tool]

    def close(self, timeout: float = 30) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        code = self.proc.wait(timeout)
        return code, self.proc.stderr.read().decode("utf-8", "replace")


def _params(tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments, **({"_meta": meta} if meta else {})}


def text(result: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in result["content"] if block.get("type") == "text")


def denied(result: dict[str, Any], *fragments: str) -> bool:
    return (
        bool(result.get("isError"))
        and text(result).startswith("memory-governor:")
        and all(f in text(result) for f in fragments)
    )


@pytest.fixture
def wire(env: Env) -> Any:
    opened: list[Wire] = []

    def start(**kw: Any) -> Wire:
        opened.append(Wire(env, **kw))
        return opened[-1]

    yield start
    for w in opened:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()


def ledger_calls(env: Env) -> list[tuple[str, str, str, int]]:
    ledger = open_ledger(str(env.state))
    try:
        return ledger.q("SELECT session, role, state, tokens FROM calls ORDER BY created")
    finally:
        ledger.close()


# -- the ladder through the proxy ------------------------------------------------------------


def test_a_search_asking_for_ten_reaches_the_server_clamped_to_three(env: Env, wire: Any) -> None:
    w = wire()
    w.initialize()
    result = w.call("mem_search", query="jwt auth", limit=10)
    assert not result.get("isError") and text(result).startswith("Found 3 memories")
    assert [c["arguments"] for c in w.server_calls()] == [{"query": "jwt auth", "limit": 3}]


def test_parallel_calls_on_one_connection_keep_exact_counts(env: Env, wire: Any) -> None:
    w = wire()
    w.initialize()
    ids = [w.request("tools/call", _params("mem_search", {"query": q, "limit": 3}))
           for q in ("jwt auth", "fts5 search", "repository errors", "sqlite storage")]  # fmt: skip
    results = [w.answer(i)["result"] for i in ids]
    assert sum(not r.get("isError") for r in results) == 2, results
    assert sum(denied(r, "max_search_calls=2") for r in results) == 2, results
    assert len(w.server_calls("mem_search")) == 2
    committed = [row for row in ledger_calls(env) if row[2] == "committed" and row[1] == "search"]
    assert len(committed) == 2 and all(tokens > 0 for *_, tokens in committed), ledger_calls(env)


def test_a_guessed_id_is_denied_with_what_to_do_instead_and_never_reaches_the_server(env: Env, wire: Any) -> None:
    w = wire()
    w.initialize()
    result = w.call("mem_get_observation", id=42)
    assert denied(result, "id=42 was not surfaced", "Search first"), result
    assert w.server_calls() == []
    found = w.call("mem_search", query="jwt", limit=3)
    first = int(text(found).split("#", 1)[1].split(" ", 1)[0])
    fetched = w.call("mem_get_observation", id=first)
    assert not fetched.get("isError") and text(fetched).startswith(f"#{first} [")


def test_a_result_over_the_budget_is_cut_to_whole_entries_and_counted_as_delivered(env: Env, wire: Any) -> None:
    env.write(
        ".memory-governor/policy.yaml",
        "limits:\n  max_memory_tokens_injected: {value: 200, enforce: block}\n"
        "ladder:\n  L1: {expected_tokens: 10, max_limit: 3, snippets_only: true}\n",
    )  # 3 hits asked, 2 fit
    w = wire()
    w.initialize()
    result = w.call("mem_search", query="auth tokens session", limit=3)
    delivered = text(result)
    assert NOTE in delivered and "held back" in delivered, delivered
    assert delivered.startswith("Found ") and delivered.count("\n[") >= 1
    assert O200K(delivered) <= 200
    [(_, _, state, tokens)] = [row for row in ledger_calls(env) if row[1] == "search"]
    assert state == "committed" and tokens == O200K(delivered)


def test_a_result_of_megabytes_is_cut_to_the_budget(env: Env, wire: Any) -> None:
    hits = "".join(f"[{i}] #{1000 + i} (decision) — Entry {i}\n    {'detail ' * 400}\n    2025-01-01 | scope: project\n\n"
                   for i in range(1, 1200))  # fmt: skip
    huge = {"content": [{"type": "text", "text": f"Found 1199 memories:\n\n{hits}"}]}
    assert len(json.dumps(huge)) > 3_000_000
    rules = env.tmp / "rules.json"
    rules.write_text(json.dumps({"tools/call": huge}))
    w = wire(server=[sys.executable, "-c", STUB], extra_env={"STUB_RULES_FILE": str(rules)})
    w.initialize()
    delivered = text(w.call("mem_search", query="entry", limit=3))
    assert delivered.startswith("Found 1199 memories") and NOTE in delivered
    assert O200K(delivered) <= 1200


def test_a_quiet_gap_starts_a_new_turn(env: Env, wire: Any) -> None:
    env.write(".memory-governor/policy.yaml", "proxy:\n  turn_gap_seconds: 1\n")
    w = wire()
    w.initialize()
    assert not w.call("mem_search", query="jwt", limit=3).get("isError")
    assert not w.call("mem_search", query="fts5", limit=3).get("isError")
    assert denied(w.call("mem_search", query="sqlite", limit=3), "max_search_calls")
    time.sleep(1.5)
    assert not w.call("mem_search", query="sqlite", limit=3).get("isError"), "a new turn after the quiet gap"


# -- sharing the ledger with the client's hooks -------------------------------------------------


def test_a_call_the_hooks_reserved_is_passed_through_and_counted_once(env: Env, wire: Any) -> None:
    hooks = Session(env, session_id="cc-session")
    hooks.prompt("what did we decide about auth?")
    before = hooks.pre("mem_search", "toolu_hooked", query="jwt", limit=10)
    assert before.updated_input == {"query": "jwt", "limit": 3}
    w = wire(extra_env={"CLAUDE_CODE_SESSION_ID": "cc-session"})
    w.initialize()
    passed = w.call("mem_search", {"claudecode/toolUseId": "toolu_hooked"}, query="jwt", limit=3)
    assert text(passed).startswith("Found 3 memories") and NOTE not in text(passed)
    rows = ledger_calls(env)
    assert [(r[0], r[2]) for r in rows if r[1] == "search"] == [("s:cc-session", "pending")], rows
    hooks.post("mem_search", "toolu_hooked", passed["content"], query="jwt", limit=3)
    # A call no hook saw is the proxy's to decide, in the hooks' turn: the second search of it.
    second = w.call("mem_search", {"claudecode/toolUseId": "toolu_unhooked"}, query="fts5", limit=3)
    assert not second.get("isError")
    third = hooks.pre("mem_search", "toolu_third", query="sqlite", limit=3)
    assert third.denied and "max_search_calls=2" in third.reason
    assert len(w.server_calls("mem_search")) == 2


def test_a_repeated_client_call_id_is_decided_and_counted_each_time(env: Env, wire: Any) -> None:
    """A client that sends one `_meta` tool-use id on every call gets no call past the limit: an id
    seen before is deferred to only while it is a live reservation no observer has used."""
    w = wire(extra_env={"CLAUDE_CODE_SESSION_ID": "cc-repeat"})
    w.initialize()
    meta = {"claudecode/toolUseId": "toolu_same"}
    assert not w.call("mem_search", meta, query="jwt", limit=3).get("isError")
    assert not w.call("mem_search", meta, query="fts5", limit=3).get("isError")
    assert denied(w.call("mem_search", meta, query="sqlite", limit=3), "max_search_calls")
    assert len(w.server_calls("mem_search")) == 2
    searches = [row for row in ledger_calls(env) if row[1] == "search"]
    assert [row[2] for row in searches] == ["committed", "committed", "denied"], searches
    assert all(row[3] > 0 for row in searches[:2]), "each result was counted"


def test_a_hook_reservation_is_deferred_to_once(env: Env, wire: Any) -> None:
    hooks = Session(env, session_id="cc-once")
    hooks.prompt("what did we decide about auth?")
    assert not hooks.pre("mem_search", "toolu_once", query="jwt", limit=3).denied
    w = wire(extra_env={"CLAUDE_CODE_SESSION_ID": "cc-once"})
    w.initialize()
    meta = {"claudecode/toolUseId": "toolu_once"}
    first = w.call("mem_search", meta, query="jwt", limit=3)
    assert NOTE not in text(first), "the hooks' call: passed through untouched"
    again = w.call("mem_search", meta, query="fts5", limit=3)  # the same id while the reservation is live
    assert not again.get("isError")
    searches = [row for row in ledger_calls(env) if row[1] == "search"]
    assert len(searches) == 2, f"the second use of the id is a call of its own: {searches}"
    assert denied(w.call("mem_search", meta, query="sqlite", limit=3), "max_search_calls")


def test_one_claude_code_print_run_is_one_turn_whatever_its_pauses(env: Env, wire: Any) -> None:
    """`claude -p` starts its servers with CLAUDE_CODE_ENTRYPOINT=sdk-cli (seen, 2.1.197 and 2.1.332):
    a model that sleeps past the quiet gap inside one run gets no second budget."""
    env.write(".memory-governor/policy.yaml", "proxy:\n  turn_gap_seconds: 1\n")
    w = wire(extra_env={"CLAUDE_CODE_SESSION_ID": "cc-print", "CLAUDE_CODE_ENTRYPOINT": "sdk-cli"})
    w.initialize()
    assert not w.call("mem_search", query="jwt", limit=3).get("isError")
    assert not w.call("mem_search", query="fts5", limit=3).get("isError")
    time.sleep(1.5)
    assert denied(w.call("mem_search", query="sqlite", limit=3), "max_search_calls"), "still the run's one turn"


# -- passing everything else through -----------------------------------------------------------


def test_what_it_does_not_govern_passes_through_byte_for_byte(env: Env, wire: Any) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/list"},
        {"jsonrpc": "2.0", "id": "five", "method": "no/such/method", "params": {"x": 1}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "mem_stats", "arguments": {}}},
    ]
    raw = b"".join((json.dumps(m) + "\n").encode() for m in lines) + b"this is not json\n"
    variables = {**env.vars, "ENGRAM_SEED": str(seed.write_engram_seed(env.tmp / "seed.json"))}
    bare = subprocess.run([sys.executable, str(ENGRAM)], input=raw, capture_output=True, env=variables, timeout=60)
    proxied = subprocess.run([sys.executable, "-I", "-S", str(PROXY), "--name", "engram", "--", sys.executable,
                              str(ENGRAM)], input=raw, capture_output=True, env=variables, timeout=60)  # fmt: skip
    assert proxied.returncode == 0, proxied.stderr
    assert sorted(proxied.stdout.splitlines()) == sorted(bare.stdout.splitlines())
    assert len(bare.stdout.splitlines()) == 7  # six answers and the server's own parse error


def test_a_governed_tool_loses_its_output_schema_and_structured_content(env: Env, wire: Any) -> None:
    structured = {"entities": [{"name": "AuthService", "entityType": "service", "observations": ["uses JWT"]}]}
    rules = {
        "initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "s"}},
        "tools/list": {"tools": [{"name": "mem_search", "inputSchema": {"type": "object"}, "outputSchema": {"type":
                       "object"}}, {"name": "other", "inputSchema": {"type": "object"}, "outputSchema": {}}]},
        "tools/call": {"content": [], "structuredContent": structured},
    }  # fmt: skip
    w = wire(server=[sys.executable, "-c", STUB], extra_env={"STUB_RULES": json.dumps(rules)})
    w.initialize()
    tools = {t["name"]: t for t in w.answer(w.request("tools/list"))["result"]["tools"]}
    # `other` is a tool of the governed server that the policy does not map: governed too (counted, trimmed).
    assert "outputSchema" not in tools["mem_search"] and "outputSchema" not in tools["other"]
    result = w.call("mem_search", query="auth", limit=3)
    assert "structuredContent" not in result
    assert json.loads(text(result)) == structured  # the model reads what was counted


# -- faults --------------------------------------------------------------------------------------


def test_bad_arguments_never_crash_it_and_on_error_is_visible(env: Env, wire: Any) -> None:
    found = {"content": [{"type": "text", "text": "Found 1 memories:\n\n[1] #7 (decision) — X\n    y\n"}]}
    w = wire(server=[sys.executable, "-c", STUB], extra_env={"STUB_RULES": json.dumps({"tools/call": found})})
    w.initialize()
    odd = w.answer(w.request("tools/call", {"name": "mem_search", "arguments": "not an object"}))
    assert odd["result"] == found  # on_error: open, so the server answered it
    assert not w.call("mem_search", query="jwt", limit=3).get("isError"), "the proxy still governs"
    # Its result was counted all the same (the model read it), so a third search is one too many.
    assert denied(w.call("mem_search", query="x", limit=3), "max_search_calls")
    code, stderr = w.close()
    assert code == 0
    assert stderr.count("could not decide") == 1, stderr  # said once, not once more as the user's notice
    assert "let through (on_error: open)" in stderr
    assert "could not decide" in (env.state / "errors.log").read_text()


def test_on_error_closed_refuses_what_it_cannot_check(env: Env, wire: Any) -> None:
    env.write(".memory-governor/policy.yaml", "on_error: closed\n")
    w = wire()
    w.initialize()
    odd = w.answer(w.request("tools/call", {"name": "mem_search", "arguments": "not an object"}))["result"]
    assert odd["isError"] and "on_error=closed" in text(odd)
    assert w.server_calls() == []


def test_when_the_server_dies_open_requests_get_an_error_and_the_proxy_exits(env: Env, wire: Any) -> None:
    w = wire(server=[sys.executable, "-c", STUB], extra_env={"STUB_RULES": json.dumps({"tools/call": "exit"})})
    w.initialize()
    ident = w.request("tools/call", _params("mem_search", {"query": "jwt", "limit": 3}))
    error = w.answer(ident)["error"]
    assert "exited with code 3" in error["message"]
    code, stderr = w.close()
    assert code == 1 and "exited with code 3; closing the connection" in stderr
    assert [row[2] for row in ledger_calls(env)] == ["released"]  # the reservation does not linger


def test_when_the_client_goes_away_the_server_is_stopped(env: Env, wire: Any) -> None:
    w = wire()
    w.initialize()
    w.call("mem_search", query="jwt", limit=3)
    [logged] = w.server_calls()
    code, _ = w.close()
    assert code == 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(logged["pid"]):
        time.sleep(0.05)
    assert not _alive(logged["pid"])


def test_cancelling_a_call_frees_its_reservation(env: Env, wire: Any) -> None:
    w = wire(server=[sys.executable, "-c", STUB], extra_env={"STUB_RULES": json.dumps({"tools/call": "silent"})})
    w.initialize()
    ident = w.request("tools/call", _params("mem_search", {"query": "jwt", "limit": 3}))
    deadline = time.monotonic() + 30
    while not ledger_calls(env) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [row[2] for row in ledger_calls(env)] == ["pending"]
    w.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident}})
    while ledger_calls(env)[0][2] == "pending" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [row[2] for row in ledger_calls(env)] == ["released"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_usage_is_printed_without_a_command(env: Env) -> None:
    out = env.cli("proxy", "--name", "engram")
    assert out.returncode != 0 and "COMMAND" in (out.stderr + out.stdout)
