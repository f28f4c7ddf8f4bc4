"""Team telemetry: the audit trail read after a position, and what the governor did, exported over
OpenTelemetry from the long-lived processes to a real OTLP receiver (tests/otlp_receiver.py)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from governor.engine.ledger import AUDIT_COLUMNS
from governor.engine.stores import open_ledger
from governor.runtime.signals import (
    ATTRIBUTES,
    CALLS,
    DECISION_EVENT,
    DECISIONS,
    DURATION,
    FORGET_SECONDS,
    METRICS,
    OPEN_SECONDS,
    SERVICE_NAME,
    TOKEN_KINDS,
    TOKENS,
    TURNS,
    WAITING_FIELDS,
    Observed,
    Settings,
    expire,
    observe,
    status,
    waiting_calls,
)
from tests.conftest import ROOT, Answer, Env, Session, fixture_text, installed_hook
from tests.otlp_receiver import GrpcReceiver, HttpReceiver, SilentReceiver, closed_port

SEARCH = fixture_text("engram/search_v1.txt")


def _row(ts: float, session: str = "s:a", **fields: object) -> dict[str, object]:
    return {"ts": ts, "session": session, "turn": "s:p-1", "event": "pre_tool", "decision": "allow", **fields}


# -- the audit trail, read after a position ------------------------------------------------------


def test_audit_rows_are_read_once_each_after_a_position(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        for i in range(5):
            ledger.record(_row(float(i), role="search", harness="claude-code", call_id=f"s:c{i}"))
    rows, position = ledger.audit_after("", 3)
    assert [r["ts"] for r in rows] == [0.0, 1.0, 2.0] and rows[0]["harness"] == "claude-code"
    assert "detail" not in rows[0], "the column that may hold text is never handed out"
    more, position = ledger.audit_after(position, 3)
    assert [r["ts"] for r in more] == [3.0, 4.0]
    none, same = ledger.audit_after(position, 3)
    assert none == [] and same == position
    with ledger.write():
        ledger.record(_row(5.0))
    assert [r["ts"] for r in ledger.audit_after(position, 3)[0]] == [5.0]
    assert [r["ts"] for r in ledger.audit_after("", 10, since=3.5)[0]] == [4.0, 5.0]
    assert len(ledger.audit_after("not a position", 10)[0]) == 6, "an unreadable position starts from the first row"


def test_a_position_survives_gc_and_ids_reused_after_the_trail_was_emptied(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        for i in range(4):
            ledger.record(_row(100.0 + i))
    _, position = ledger.audit_after("", 10)
    with ledger.write():
        ledger.q("DELETE FROM decisions WHERE ts<102")  # gc drops the oldest rows: the position holds
        ledger.record(_row(200.0))
    assert [r["ts"] for r in ledger.audit_after(position, 10)[0]] == [200.0]
    _, position = ledger.audit_after(position, 10)
    with ledger.write():
        ledger.q("DELETE FROM decisions")  # `gc --days 0`: SQLite counts ids from 1 again
        ledger.record(_row(300.0))
    assert [r["ts"] for r in ledger.audit_after(position, 10)[0]] == [300.0], "a new row behind the position"
    with ledger.write():
        for i in range(6):
            ledger.record(_row(301.0 + i))
    rows, _ = ledger.audit_after(position, 10)
    assert [r["ts"] for r in rows] == [300.0 + i for i in range(7)], "an id reused by another row is no position"


def test_a_version_6_ledger_upgrades_in_place(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        ledger.record(_row(1.0, code="allow"))
    for column in ("harness", "memory_need", "duration_ms", "call_id"):
        ledger.q(f"ALTER TABLE decisions DROP COLUMN {column}")
    ledger.q("PRAGMA user_version=6")
    ledger.close()
    again = open_ledger(str(tmp_path))
    with again.write():
        again.record(_row(2.0, harness="codex", memory_need="similar_issue", duration_ms=1.5, call_id="s:x"))
    rows, _ = again.audit_after("", 10)
    assert [(r["ts"], r["harness"], r["call_id"]) for r in rows] == [(1.0, "", ""), (2.0, "codex", "s:x")]
    assert rows[1]["memory_need"] == "similar_issue" and rows[1]["duration_ms"] == 1.5


def test_every_audit_row_names_its_harness_need_duration_and_call(env: Env, session: Session) -> None:
    session.prompt("how did we fix the jwt refresh bug last time?")
    session.call("mem_search", SEARCH, query="jwt", limit=10)
    db = sqlite3.connect(env.state / "ledger.db")
    rows = db.execute("SELECT event, harness, memory_need, duration_ms, call_id FROM decisions ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["prompt", "pre_tool", "post_tool"]
    assert {r[1] for r in rows} == {"claude-code"}
    assert {r[2] for r in rows} == {"similar_issue"}, "every row of the turn carries its memory need"
    assert all(r[3] > 0 for r in rows)
    assert rows[0][4] == "" and rows[1][4] == rows[2][4] == f"s:toolu_{session.id}_1", "a call's rows share its id"


# -- a governed session through the installed hooks, the warm server exporting ---------------------

QUERY = "ZEBRA-QUERY-4471 refresh tokens"
PROMPT = "how did we fix the ZEBRA-PROMPT-7731 jwt refresh bug last time?"
MEMORY = "ZEBRA-MEMORY-5521"
TITLE = "ZEBRA-TITLE-0932 refresh rotation"
BODY = "ZEBRA-BODY-6610: rotate the refresh token on every use"
SECRETS = [QUERY, PROMPT, MEMORY, TITLE, BODY, "ZEBRA"]
BIG = "Found 3 memories:\n\n" + "".join(
    f"[{i}] #{300 + i} (decision) — {MEMORY} part {i}\n    {'word ' * 400}\n"
    "    2025-03-01 10:00:00 | project: a | scope: project\n\n"
    for i in range(1, 4)
)


def telemetry_env(endpoint: str, protocol: str = "http/protobuf", **extra: str) -> dict[str, str]:
    return {"MEMORY_GOVERNOR_ENABLE_TELEMETRY": "1", "MEMORY_GOVERNOR_WARM_SERVER": "auto",
            "MEMORY_GOVERNOR_TRACE": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_METRIC_EXPORT_INTERVAL": "250",
            "OTEL_BLRP_SCHEDULE_DELAY": "100", "OTEL_RESOURCE_ATTRIBUTES": "team=core,developer=ada", **extra}  # fmt: skip


@pytest.fixture
def stop_servers(env: Env) -> Iterator[list[dict[str, str]]]:
    """Environments whose warm server the test leaves running: stopped at the end, whatever happened."""
    started: list[dict[str, str]] = []
    yield started
    for extra in started:
        env.cli("serve", "--stop", env=extra)


def governed_session(session: Session) -> list[Answer]:
    """Refusals, a clamp, a trim and a save, with texts that must never leave the machine."""
    session.start()
    session.prompt(PROMPT)
    clamp, _ = session.call("mem_search", SEARCH.replace("Replaced express-session", f"Replaced {MEMORY}"),
                            query=QUERY, limit=10)  # fmt: skip
    _, trim = session.call("mem_search", BIG, query=QUERY, limit=3)
    over = session.pre("mem_search", query=QUERY, limit=3)
    assert clamp.updated_input == {"query": QUERY, "limit": 3} and trim is not None and trim.output is not None
    assert over.denied
    return [clamp, over]


def second_turn(session: Session) -> list[Answer]:
    session.prompt("now fix the typo in README")
    answers = [session.pre("mem_context"), session.pre("mem_get_observation", id=999)]
    answers.append(session.pre("mem_save", title=TITLE, content=f"User: {BODY}\nAssistant: ok\nUser: thanks",
                               type="bugfix"))  # fmt: skip
    saved = session.pre("mem_save", title=TITLE, content=BODY, type="bugfix")
    assert all(a.denied for a in answers) and not saved.denied
    return [*answers, saved]


EXPECTED_CALLS = {"clamped": 1, "trimmed": 1, "denied": 4, "allowed": 1}  # 7 governed calls


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_governed_session_through_the_installed_hooks_reaches_the_collector(
    env: Env, stop_servers: list[dict[str, str]], protocol: str
) -> None:
    receiver = HttpReceiver() if protocol == "http/protobuf" else GrpcReceiver()
    try:
        extra = telemetry_env(receiver.endpoint, protocol)
        stop_servers.append(extra)
        env.write(".memory-governor/policy.yaml", "ledger:\n  record_contents: true\n")
        session = Session(env, "sess-otel", command=installed_hook(env), extra_env=extra)
        first = governed_session(session)
        env.cli("serve", "--stop", env=extra)  # the next hooks decide in their own process...
        rest = second_turn(session)
        paths = {a.stderr.strip().splitlines()[-1] for a in first + rest}
        assert "memory-governor: decided in this process" in paths and len(paths) == 2, paths
        (env.state / "run" / "spawned").unlink()
        session.event("Stop")  # ...and this one starts the warm server that sends what they left
        got = receiver.received
        assert got.wait(lambda r: r.total(CALLS) >= 7 and len(r.records()) >= 7), (
            got.series(CALLS),
            status(str(env.state)),
            sorted((env.state / "telemetry").iterdir()),
        )
        env.cli("serve", "--stop", env=extra)  # it flushes as it stops: anything sent twice would show now
        assert {d: got.total(CALLS, decision=d) for d in EXPECTED_CALLS} == EXPECTED_CALLS
        assert got.total(CALLS, decision="denied", reason="max_search_calls") == 1
        assert got.total(CALLS, decision="denied", reason="never_save:raw_transcript") == 1
        assert got.total(TOKENS, kind="injected") > 0 and got.total(TOKENS, kind="held_back") > 0
        assert got.total(TURNS, memory_need="similar_issue") == 1 and got.total(TURNS) == 2
        assert got.total(DURATION, harness="claude-code") >= 13, "every decision's duration"
        events = [r for r in got.records() if r["event_name"] == DECISION_EVENT]
        assert len(events) == 7 and len({e["attributes"]["call.id"] for e in events}) == 7, "one event per call"
        trimmed = next(e["attributes"] for e in events if e["attributes"]["decision"] == "trimmed")
        assert trimmed["session.id"] == "sess-otel" and trimmed["turn.id"] == "sess-otel-prompt-1"
        assert (
            trimmed["tokens.held_back"] > 0 and trimmed["tokens.injected"] > 0 and trimmed["harness"] == "claude-code"
        )
        assert trimmed["memory_need"] == "similar_issue" and len(trimmed["policy.digest"]) == 16
        resources = got.resources()
        assert {r["service.name"] for r in resources} == {"memory-governor"}
        assert {(r["team"], r["developer"]) for r in resources} == {("core", "ada")}
        assert len({r["service.instance.id"] for r in resources}) == 2, "two warm servers sent, one after the other"
        assert got.metric_names() <= set(METRICS) and {TURNS, CALLS, TOKENS, DURATION} <= got.metric_names()
        for name in METRICS:
            assert {tuple(sorted(dict(key))) for key in got.series(name)} == {tuple(sorted(ATTRIBUTES[name]))}
        exported = got.everything()
        ledger = (env.state / "ledger.db").read_bytes()
        for secret in SECRETS:
            assert secret.encode() in ledger, "the local audit trail holds the texts (record_contents: true)"
            assert secret.encode() not in exported, f"{secret} left the machine"
        assert env.cli_json("report", "--format", "json")["totals"]["denied"] == 4, "report reads the local trail"
    finally:
        receiver.stop()


def short_session(env: Env, extra: dict[str, str]) -> None:
    """Four searches, a result and a mem_context through the installed hooks (the first hooks decide
    in their own process while the warm server starts), then `serve --stop` right after."""
    session = Session(env, "sess-short", command=installed_hook(env), extra_env=extra)
    session.start()
    session.prompt("what did we decide about the cache?")
    calls = [session.next_id() for _ in range(4)]
    searches = [session.pre("mem_search", call_id=c, query=f"cache {n}", limit=10) for n, c in enumerate(calls)]
    assert [s.denied for s in searches] == [False, False, True, True]
    session.post("mem_search", calls[0], SEARCH, query="cache 0", limit=3)
    assert session.pre("mem_context").denied
    env.cli("serve", "--stop", env=extra)


SLOW = {"OTEL_METRIC_EXPORT_INTERVAL": "600000", "OTEL_BLRP_SCHEDULE_DELAY": "600000"}  # nothing sent before the stop


def test_a_short_session_reaches_a_slow_collector_by_the_time_the_server_has_stopped(
    env: Env, stop_servers: list[dict[str, str]]
) -> None:
    """Every call that closed is in the collector once `serve --stop` returns, from a collector that
    takes a second and a half to answer each export; the call still waiting for its result is
    what doctor says."""
    receiver = HttpReceiver(delay=1.5)
    try:
        extra = telemetry_env(receiver.endpoint, **SLOW)
        stop_servers.append(extra)
        short_session(env, extra)
        got = receiver.received
        closed = {"clamped": 1, "denied": 3}  # the second clamped search waits for its result
        assert {d: got.total(CALLS, decision=d) for d in closed} == closed, (got.series(CALLS), status(str(env.state)))
        assert len([r for r in got.records() if r["event_name"] == DECISION_EVENT]) == 4
        export = {row["check"]: row for row in env.cli_json("doctor", "--format", "json", env=extra)}[
            "telemetry export"
        ]
        assert export["status"] == "ok" and "1 call(s) waiting for their result" in export["detail"], export
    finally:
        receiver.stop()


def test_what_a_silent_collector_never_got_at_the_stop_doctor_counts(
    env: Env, stop_servers: list[dict[str, str]]
) -> None:
    silent = SilentReceiver()
    try:
        extra = telemetry_env(silent.endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="1", **SLOW)
        stop_servers.append(extra)
        short_session(env, extra)
        export = {row["check"]: row for row in env.cli_json("doctor", "--format", "json", env=extra)}[
            "telemetry export"
        ]
        assert export["status"] == "warn", export
        assert (
            "4 event(s) dropped" in export["detail"] and "4 call(s) never in a sent metric export" in export["detail"]
        )
    finally:
        silent.stop()


def test_only_names_the_policy_knows_reach_the_collector(env: Env, stop_servers: list[dict[str, str]]) -> None:
    """A server the model registers and a subagent definition it writes name themselves: their names
    are exported as `other`, the policy's own (engram, mem_search, validator) as they are."""
    receiver = HttpReceiver()
    try:
        extra = telemetry_env(receiver.endpoint)
        stop_servers.append(extra)
        session = Session(env, "sess-names", command=installed_hook(env), extra_env=extra)
        session.start()
        session.prompt("what did we decide about the cache?")
        session.call("mcp__leak-the-api-key__mem_search", SEARCH, query="cache", limit=3)  # any_server: governed
        session.pre("mem_sneak_a_secret_out", query="cache")  # tool_prefix mem_: governed, unmapped
        for agent in ("validator", "leak-the-password"):
            session.event("PreToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": "q"},
                          tool_use_id=session.next_id(), agent_id=f"a-{agent}", agent_type=agent)  # fmt: skip
        env.cli("serve", "--stop", env=extra)
        got = receiver.received
        assert got.wait(lambda r: len(r.records()) >= 3), got.records()
        events = [r["attributes"] for r in got.records() if r["event_name"] == DECISION_EVENT]
        assert {e["tool"] for e in events} >= {"other/mem_search", "engram/other", "engram/mem_search"}, events
        assert {e.get("agent.type") for e in events} >= {"validator", "other"}, events
        assert b"leak" not in got.everything() and b"sneak" not in got.everything()
    finally:
        receiver.stop()


def eventually(check: Callable[[], bool], timeout: float = 90.0) -> bool:
    """Until `check()` holds (the exporters write their status on their own threads), or `timeout`."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("collector", ["down", "silent"])
def test_a_collector_down_or_silent_loses_no_audit_row_and_doctor_counts_what_was_dropped(
    env: Env, stop_servers: list[dict[str, str]], collector: str
) -> None:
    silent = SilentReceiver() if collector == "silent" else None
    try:
        extra = telemetry_env(silent.endpoint if silent else closed_port(), OTEL_EXPORTER_OTLP_TIMEOUT="1")
        stop_servers.append(extra)
        session = Session(env, "sess-down", command=installed_hook(env), extra_env=extra)
        answers = governed_session(session)  # every answer as without telemetry (asserted in there)
        assert any("answered by the warm server" in a.stderr for a in answers)
        state = str(env.state)
        assert eventually(lambda: status(state).get("dropped_events", 0) >= 3), status(state)
        report = env.cli_json("report", "--format", "json")
        assert report["totals"]["denied"] == 1 and report["totals"]["trimmed"] == 1, "every decision's audit row"
        rows = {row["check"]: row for row in env.cli_json("doctor", "--format", "json", env=extra)}
        export = rows["telemetry export"]
        assert export["status"] == "warn" and "3 event(s) dropped" in export["detail"], export
        assert "collector" in export["fix"]
        assert rows["telemetry"]["status"] == "ok" and "metrics otlp (http/protobuf)" in rows["telemetry"]["detail"]
    finally:
        if silent:
            silent.stop()


IMPORTS = re.compile(rb"import time:\s+\d+ \|\s+\d+ \|\s+(\S+)")


@pytest.mark.parametrize("path", ["in-process", "warm server"])
def test_no_hook_imports_opentelemetry_whether_telemetry_is_on_or_off(
    env: Env, stop_servers: list[dict[str, str]], path: str
) -> None:
    receiver = HttpReceiver()
    try:
        extra = telemetry_env(receiver.endpoint)
        if path == "in-process":
            extra["MEMORY_GOVERNOR_WARM_SERVER"] = "off"
        stop_servers.append(extra)
        command = installed_hook(env, scope="local")  # the interpreter itself, to take -X importtime
        probe = Session(env, "sess-imports", command=command, extra_env=extra)
        probe.prompt(PROMPT)
        if path == "warm server":
            assert eventually(lambda: (env.state / "run" / "governor.sock").exists())
        for on in (True, False):
            variables = extra if on else {k: v for k, v in extra.items() if k != "MEMORY_GOVERNOR_ENABLE_TELEMETRY"}
            timed = Session(env, "sess-imports", command=[*command[:1], "-X", "importtime", *command[1:]],
                            extra_env=variables)  # fmt: skip
            timed.prompt_id = probe.prompt_id
            answer = timed.pre("mem_search", query=QUERY, limit=3)
            modules = {m.decode() for m in IMPORTS.findall(answer.stderr.encode())}
            assert ("answered by the warm server" in answer.stderr) == (path == "warm server")
            assert "governor.runtime.client" in modules or "governor.runtime.runner" in modules, (
                "the probe sees imports"
            )
            loaded = sorted(m for m in modules if m.split(".")[0] in ("opentelemetry", "grpc", "google", "requests"))
            assert loaded == [], f"telemetry {'on' if on else 'off'}: the hook imported {loaded}"
    finally:
        receiver.stop()


# -- the MCP proxy, and the in-process entry an SDK integration calls --------------------------------


@pytest.mark.parametrize("exporter", ["otlp", "console"])
def test_the_proxy_sends_its_decisions_and_keeps_stdout_for_the_client(env: Env, exporter: str) -> None:
    from tests.harnesses.test_mcp_proxy import Wire

    receiver = HttpReceiver()
    extra = {**telemetry_env(receiver.endpoint), "MEMORY_GOVERNOR_WARM_SERVER": "off",
             "OTEL_METRICS_EXPORTER": exporter, "OTEL_LOGS_EXPORTER": exporter}  # fmt: skip
    wire = Wire(env, extra_env=extra)
    try:
        wire.initialize()  # every line the client reads is parsed as JSON-RPC: a console line there would fail it
        assert not wire.call("mem_search", query="jwt auth", limit=10).get("isError")
        assert not wire.call("mem_search", query="fts5 search", limit=3).get("isError")
        assert wire.call("mem_search", query="sqlite storage", limit=3).get("isError")
        if exporter == "otlp":
            got = receiver.received
            assert got.wait(lambda r: len(r.records()) >= 3 and r.total(CALLS, harness="mcp-proxy") >= 3)
            assert got.total(CALLS, harness="mcp-proxy", decision="denied", reason="max_search_calls") == 1
            assert got.total(TOKENS, harness="mcp-proxy", kind="injected") > 0
            assert {r["attributes"]["call.closed_by"] for r in got.records()} == {"post_tool", "pre_tool"}
        code, stderr = wire.close()
        assert code == 0
        if exporter == "console":
            assert '"memory_governor.decision"' in stderr and '"memory_governor.calls"' in stderr, stderr[-2000:]
            assert receiver.received.raw == []
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()
        receiver.stop()


SDK_PROCESS = """
import json, os, sys
sys.path.insert(0, {root!r})
from governor.runtime import telemetry
from governor.runtime.runner import respond

exporter = telemetry.start(os.environ)  # what an SDK integration does once, at start
search = open({search!r}).read()
who = sys.argv[1]

def hook(**payload):
    payload = {{"session_id": who, "cwd": os.getcwd(), "prompt_id": who + "-p", **payload}}
    return respond("claude-code", json.dumps(payload).encode(), os.environ).answer or {{}}

hook(hook_event_name="UserPromptSubmit", prompt="how did we fix the jwt bug last time?")
for n in range(3):
    call = dict(tool_name="mcp__engram__mem_search", tool_input={{"query": "jwt", "limit": 3}}, tool_use_id=f"{{who}}-{{n}}")
    if "deny" not in json.dumps(hook(hook_event_name="PreToolUse", **call)):
        hook(hook_event_name="PostToolUse", tool_response=search, **call)
exporter.stop(timeout=10)
"""


def test_two_exporting_processes_send_each_call_once(env: Env, tmp_path: Path) -> None:
    receiver = HttpReceiver()
    try:
        script = tmp_path / "sdk.py"
        script.write_text(SDK_PROCESS.format(root=str(ROOT), search=str(ROOT / "tests/fixtures/engram/search_v1.txt")))
        variables = {**env.vars, **telemetry_env(receiver.endpoint), "MEMORY_GOVERNOR_WARM_SERVER": "off"}
        procs = [subprocess.Popen([sys.executable, str(script), f"sdk-{n}"], env=variables, cwd=env.project,
                                  stderr=subprocess.PIPE) for n in range(2)]  # fmt: skip
        for proc in procs:
            assert proc.wait(120) == 0, proc.stderr.read() if proc.stderr else ""
        got = receiver.received
        assert got.wait(lambda r: len(r.records()) >= 6)
        events = [r["attributes"] for r in got.records()]
        assert sorted(e["call.id"] for e in events) == sorted(f"sdk-{n}-{i}" for n in range(2) for i in range(3))
        assert got.total(CALLS) == 6 and got.total(CALLS, decision="denied") == 2 and got.total(TURNS) == 2
    finally:
        receiver.stop()


# -- the mapping's edges: a result that never comes, monitor mode ------------------------------------


def _audit(
    event: str, decision: str, code: str, call: str = "s:c1", ts: float = 1000.0, **fields: object
) -> dict[str, object]:
    row = {name: "" for name in AUDIT_COLUMNS}
    row.update(ts=ts, session="s:a", turn="s:p", event=event, role="search", decision=decision, code=code,
               mode="enforce", harness="codex", call_id=call, tokens_counted=0, tokens_delivered=0, tokens_saved=0,
               tokens_deduped=0, duration_ms=1.0)  # fmt: skip
    row.update(fields)
    return row


def _calls(out: Observed) -> list[tuple[str, str]]:
    return [(attrs["decision"], attrs["reason"]) for name, _, attrs in out.points if name == CALLS]


def test_a_call_whose_result_never_comes_is_counted_once_when_it_has_waited_long_enough() -> None:
    waiting: dict[str, dict[str, object]] = {}
    out = Observed()
    observe(_audit("pre_tool", "rewrite", "clamp_limit"), waiting, out)
    expire(waiting, 1000.0 + OPEN_SECONDS - 1, out)
    assert _calls(out) == [] and out.events == []
    expire(waiting, 1000.0 + OPEN_SECONDS + 1, out)
    assert _calls(out) == [("clamped", "clamp_limit")] and out.events[0]["attributes"]["call.closed_by"] == "timeout"
    late = Observed()
    observe(_audit("post_tool", "replace", "trimmed", tokens_delivered=50, tokens_saved=30), waiting, late)
    assert _calls(late) == [] and late.events == [], "a late result is not a second call"
    assert [p[2]["kind"] for p in late.points if p[0] == TOKENS] == ["injected", "held_back"], "its tokens still count"
    expire(waiting, 1000.0 + FORGET_SECONDS + 1, Observed())
    assert waiting == {}


def test_monitor_mode_counts_what_enforce_would_have_decided_once() -> None:
    waiting: dict[str, dict[str, object]] = {}
    out = Observed()
    observe(_audit("pre_tool", "deny", "max_search_calls", mode="monitor"), waiting, out)
    observe(_audit("post_tool", "none", "counted", mode="monitor", tokens_delivered=80), waiting, out)
    assert _calls(out) == [("denied", "max_search_calls")]
    assert out.events[0]["attributes"]["mode"] == "monitor"


def test_the_standard_variables_are_read_as_claude_code_reads_them() -> None:
    default = Settings({})
    assert default.exporters == {"metrics": ("otlp",), "logs": ("otlp",)} and default.problems == []
    assert default.protocols == {"metrics": "http/protobuf", "logs": "http/protobuf"}
    shared = Settings({"OTEL_METRICS_EXPORTER": "otlp,prometheus", "OTEL_LOGS_EXPORTER": "none",
                       "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf"})  # fmt: skip
    assert shared.exporters == {"metrics": ("otlp",), "logs": ()} and shared.sends
    assert shared.protocols == {"metrics": "grpc", "logs": "http/protobuf"}
    assert len(shared.problems) == 1 and "'prometheus'" in shared.problems[0]
    json_only = Settings({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_LOGS_EXPORTER": "console,otlp"})
    assert json_only.exporters == {"metrics": (), "logs": ("console",)}
    assert [p.split(" for ")[0] for p in json_only.problems] == ["OTLP protocol 'http/json'"] * 2
    assert not Settings({"OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}).sends


# -- the lead's queries and dashboard name only what the contract exports ------------------------------

DOCS = ROOT / "docs" / "telemetry.md"
DASHBOARD = ROOT / "docs" / "telemetry-dashboard.json"
LEZER_PROMQL = {"@prometheus-io/lezer-promql": "0.315.0"}  # Prometheus's own PromQL grammar
PARSE = """
const {parser} = require('@prometheus-io/lezer-promql');
const out = JSON.parse(require('fs').readFileSync(0, 'utf8')).map(expr => {
  const found = {errors: 0, metrics: [], labels: []};
  parser.parse(expr).iterate({enter(node) {
    if (node.type.isError) found.errors++;
    if (node.name === 'Identifier' && node.node.parent && node.node.parent.name === 'VectorSelector') found.metrics.push(expr.slice(node.from, node.to));
    if (node.name === 'LabelName') found.labels.push(expr.slice(node.from, node.to));
  }});
  return found;
});
console.log(JSON.stringify(out));
"""
RESOURCE_LABELS = {"team", "developer", "job", "instance", "service_name"}  # what docs/telemetry.md sets and joins on
GRAFANA = {"$__range": "1d", "$__rate_interval": "5m", "$__interval": "1m"}


def prometheus_names() -> set[str]:
    """The contract's metrics as a Prometheus-backed collector names them: dots to underscores, the
    unit's name appended (braces dropped), `_total` on counters, a histogram's three series."""
    names: set[str] = set()
    for name, (kind, unit, _) in METRICS.items():
        base = name.replace(".", "_") + ("_milliseconds" if unit == "ms" else "")
        names |= {f"{base}_total"} if kind == "counter" else {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return names


def queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every query the dashboard and docs/telemetry.md show."""
    found: list[tuple[str, str]] = []
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for panel in dashboard["panels"]:
        found += [(f"panel {panel['title']!r}", target["expr"]) for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # label_values(<selector>, <label>): a selector and a label
            selector, label = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["query"]["query"]).groups()
            found += [
                (f"variable {variable['name']}", selector),
                (f"variable {variable['name']}", f"sum by ({label}) ({selector})"),
            ]
    found += [("docs/telemetry.md", block) for block in re.findall(r"```promql\n(.*?)```", DOCS.read_text(), re.S)]
    out = []
    for where, expr in found:
        for variable, value in GRAFANA.items():
            expr = expr.replace(variable, value)
        out.append((where, expr))
    return out


def test_every_query_parses_and_names_only_what_the_contract_exports() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import npm

    folder = npm.install("promql", LEZER_PROMQL, lambda where: (where / "node_modules" / "@prometheus-io").exists())
    shown = queries()
    assert len(shown) >= 15 and sum(where == "docs/telemetry.md" for where, _ in shown) >= 5
    proc = subprocess.run(["node", "-e", PARSE], input=json.dumps([e for _, e in shown]), capture_output=True,
                          text=True, cwd=folder, timeout=120, check=True)  # fmt: skip
    labels = set().union(*ATTRIBUTES.values()) | {"le"} | RESOURCE_LABELS
    used: set[str] = set()
    for (where, expr), parsed in zip(shown, json.loads(proc.stdout), strict=True):
        assert parsed["errors"] == 0, f"{where}: {expr} does not parse"
        assert parsed["metrics"] and set(parsed["metrics"]) <= prometheus_names(), f"{where}: {parsed['metrics']}"
        assert set(parsed["labels"]) <= labels, f"{where}: labels {set(parsed['labels']) - labels} are not exported"
        used |= set(parsed["metrics"])
    for name in METRICS:
        assert any(series.startswith(name.replace(".", "_") + "_") for series in used), f"no query shows {name}"
    broken = subprocess.run(["node", "-e", PARSE], input=json.dumps(["sum(memory_governor_calls_total{decision=}"]),
                            capture_output=True, text=True, cwd=folder, timeout=120, check=True)  # fmt: skip
    assert json.loads(broken.stdout)[0]["errors"] > 0, "the grammar catches a broken query"


def test_the_contract_page_names_every_metric_and_attribute() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for name, attributes in ATTRIBUTES.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        kind, unit, _ = METRICS[name]
        assert f"{kind}, `{unit}`" in row and all(f"`{a}`" in row for a in attributes), row
    for value in (*DECISIONS, *TOKEN_KINDS, DECISION_EVENT, SERVICE_NAME):
        assert f"`{value}`" in text


def test_a_cursor_file_edited_by_hand_does_not_stop_the_exporter() -> None:
    good = {"counted": False, "decision": "clamped", "reason": "clamp_limit", "ms": 1.0,
            "row": {name: _audit("pre_tool", "rewrite", "clamp_limit")[name] for name in WAITING_FIELDS}}  # fmt: skip
    saved = {"a": good, "b": {"counted": True, "row": {"ts": 5}}, "c": {"counted": False, "row": {"ts": 1}},
             "d": "not an entry", "e": {"row": {"ts": "soon"}, "counted": True}}  # fmt: skip
    assert sorted(waiting_calls(saved)) == ["a", "b"] and waiting_calls(["not", "a", "dict"]) == {}


def test_the_warm_servers_console_exporter_writes_beside_the_cursor(
    env: Env, stop_servers: list[dict[str, str]]
) -> None:
    extra = {**telemetry_env(closed_port()), "OTEL_METRICS_EXPORTER": "console", "OTEL_LOGS_EXPORTER": "console"}
    stop_servers.append(extra)
    session = Session(env, "sess-console", command=installed_hook(env), extra_env=extra)
    session.prompt(PROMPT)
    before, after = session.call("mem_search", SEARCH, query=QUERY, limit=3)
    assert not before.denied and after is not None
    log = env.state / "telemetry" / "console.log"
    assert eventually(lambda: log.exists() and '"memory_governor.decision"' in log.read_text()), status(str(env.state))
    assert eventually(lambda: '"memory_governor.turns"' in log.read_text())
    assert QUERY not in log.read_text() and "ZEBRA" not in log.read_text()


def test_on_the_redis_ledger_the_audit_stream_is_sent_once(env: Env, tmp_path: Path, redis_server: Any) -> None:
    receiver = HttpReceiver()
    try:
        script = tmp_path / "sdk.py"
        script.write_text(SDK_PROCESS.format(root=str(ROOT), search=str(ROOT / "tests/fixtures/engram/search_v1.txt")))
        variables = {**env.vars, **telemetry_env(receiver.endpoint), "MEMORY_GOVERNOR_WARM_SERVER": "off",
                     "MEMORY_GOVERNOR_LEDGER_URL": redis_server.url}  # fmt: skip
        for who in ("redis-a", "redis-b"):  # one after the other: the second carries on from the first's position
            proc = subprocess.run([sys.executable, str(script), who], env=variables, cwd=env.project,
                                  capture_output=True, timeout=120)  # fmt: skip
            assert proc.returncode == 0, proc.stderr.decode()
        assert not (env.state / "ledger.db").exists(), "the rows were in Redis"
        got = receiver.received
        assert got.wait(lambda r: len(r.records()) >= 6)
        assert sorted(r["attributes"]["call.id"] for r in got.records()) == sorted(
            f"redis-{w}-{i}" for w in "ab" for i in range(3)
        )
        assert got.total(CALLS, decision="denied") == 2 and got.total(TURNS) == 2
    finally:
        receiver.stop()
