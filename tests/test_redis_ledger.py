"""One ledger on Redis for several hosts: hook processes on two state directories ("hosts") and a
real redis-server (tests/redis_server.py); faults (Redis stopped, hung, slow, restarted), leases
and their fencing, persistence, credentials, and the commands that read the ledger."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from governor.engine import events as ev
from governor.engine.decide import World, decide
from governor.engine.ledger import LedgerBusy, LedgerLeaseLost, key
from governor.engine.redis_ledger import masked
from governor.engine.stores import open_ledger
from governor.engine.tokens import counter
from governor.harnesses.checks import BAD, OK
from governor.policy import compiled
from governor.runtime.runner import respond
from tests.conftest import HOOK, ROOT, Answer, Env, Session, assert_raced, fixture_text, fresh_process, hook_run
from tests.harnesses.test_codex import denied
from tests.redis_server import RedisServer, Relay
from tests.test_ledger import WRITER
from tests.test_subagent_sessions import codex_with_a_researcher, forge_prompt, name_as_subagent, new_researcher, spawn

# Hosts sharing one Redis: each hook is a process with its own connections (tests/conftest.py hook_run).
pytestmark = pytest.mark.hook_processes

SEARCH = fixture_text("engram/search_v1.txt")
O200K = counter("o200k_base").count
DEADLINE = 3.0  # runtime.decision_deadline_ms of the shipped policy, in seconds


class Host(Env):
    """A host: its own HOME and state directory, the shared project, the one Redis URL."""

    def __init__(self, tmp: Path, project: Path, url: str, warm: bool = False) -> None:
        super().__init__(tmp)
        self.project = project
        self.vars["MEMORY_GOVERNOR_LEDGER_URL"] = url
        self.vars["MEMORY_GOVERNOR_WARM_SERVER"] = "auto" if warm else "off"

    def stop_server(self) -> None:
        subprocess.run([sys.executable, "-m", "governor", "serve", "--stop"], capture_output=True, timeout=60,
                       env={**self.vars, "PYTHONPATH": str(ROOT)}, cwd=self.project)  # fmt: skip


def hosts(tmp: Path, url: str, warm: bool = False) -> tuple[Host, Host]:
    project = tmp / "project"
    project.mkdir(parents=True, exist_ok=True)
    return Host(tmp / "host-a", project, url, warm), Host(tmp / "host-b", project, url, warm)


def payload(host: Host, session: str, prompt_id: str, event: str, **fields: Any) -> bytes:
    return json.dumps({"session_id": session, "prompt_id": prompt_id, "cwd": str(host.project), "hook_event_name": event,
                       "transcript_path": "/dev/null", "permission_mode": "default", **fields}).encode()  # fmt: skip


def search(host: Host, session: str, prompt_id: str, call: str) -> bytes:
    return payload(host, session, prompt_id, "PreToolUse", tool_name="mcp__engram__mem_search",
                   tool_input={"query": "auth", "limit": 3}, tool_use_id=call)  # fmt: skip


def hook(host: Host, data: bytes) -> Answer:
    proc = hook_run(HOOK, data, host.vars, host.project)
    return Answer(proc)


@pytest.mark.parametrize("warm", [False, True], ids=["in-process", "warm-servers"])
def test_two_hosts_24_parallel_searches_in_one_turn_allow_exactly_2(
    tmp_path: Path, redis_server: RedisServer, warm: bool
) -> None:
    a, b = hosts(tmp_path, redis_server.url, warm)
    try:
        for round_ in range(2):  # the second round is a new turn: its budget is fresh
            prompt_id = f"p-{round_}"
            hook(a, payload(a, "orchestrated", prompt_id, "UserPromptSubmit", prompt="what did we decide about auth?"))
            procs = [subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=host.vars, cwd=host.project)
                     for host in (a, b) * 12]  # fmt: skip
            for index, (proc, host) in enumerate(zip(procs, (a, b) * 12, strict=True)):
                assert proc.stdin is not None
                proc.stdin.write(search(host, "orchestrated", prompt_id, f"toolu-{round_}-{index}"))
                proc.stdin.close()
            answers = []
            for proc in procs:
                assert proc.stdout is not None and proc.stderr is not None
                out, err = proc.stdout.read(), proc.stderr.read()
                answers.append(Answer(subprocess.CompletedProcess(proc.args, proc.wait(timeout=120), out, err)))
            # With warm servers, a hook whose server has not answered within the client's timeout (a
            # loaded machine) decides the call itself, and finds the server's refusal of it: repeated.
            reasons = ("max_search_calls=2", "already refused") if warm else ("max_search_calls=2",)
            assert_raced(answers, 2, reasons)
    finally:
        if warm:
            a.stop_server()
            b.stop_server()


def test_a_hook_imports_redis_py_without_the_telemetry_sdk_it_would_load_for_nothing() -> None:
    """redis-py imports the OpenTelemetry SDK's metrics when installed (this test run has them);
    a hook's process (one thread) does without, and can still import them itself afterwards."""
    import importlib.util

    assert importlib.util.find_spec("opentelemetry.sdk.metrics") is not None, "the test extra installs the SDK"
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from governor.engine import redis_ledger; "
             "redis_ledger._client('redis://127.0.0.1:1/0'); print('opentelemetry.sdk.metrics' in sys.modules, "
             "'redis' in sys.modules); import opentelemetry.sdk.metrics; print('later')")  # fmt: skip
    assert fresh_process(probe).split() == ["False", "True", "later"]


def test_a_hook_on_redis_decides_without_loading_the_telemetry_sdk(tmp_path: Path, redis_server: RedisServer) -> None:
    """The hook process itself, as a harness runs it, on the Redis ledger: redis-py imported, the
    OpenTelemetry SDK not, and the search decided."""
    (host, _) = hosts(tmp_path, redis_server.url)
    hook(host, payload(host, "s-otel", "p-1", "UserPromptSubmit", prompt="what did we decide about auth?"))
    proc = subprocess.run([HOOK[0], "-X", "importtime", *HOOK[1:]], input=search(host, "s-otel", "p-1", "t-1"),
                          capture_output=True, env=host.vars, cwd=host.project, timeout=60)  # fmt: skip
    imported = proc.stderr.decode()
    assert proc.returncode == 0 and not Answer(proc).denied and "| redis\n" in imported, imported[-2000:]
    # The SDK's metrics (and the SDK) never loaded: at most the failed lookup of the one hidden
    # (redis-py still takes the OpenTelemetry API, which is light).
    sdk = [line.rsplit("|", 1)[-1].strip() for line in imported.splitlines() if "opentelemetry.sdk" in line]
    assert sdk in ([], ["opentelemetry.sdk.metrics"]), sdk
    hook(host, search(host, "s-otel", "p-1", "t-2"))
    assert hook(host, search(host, "s-otel", "p-1", "t-3")).denied, "the first search was counted on Redis"


def test_a_turn_counted_on_one_host_is_enforced_on_the_other(tmp_path: Path, redis_server: RedisServer) -> None:
    a, b = hosts(tmp_path, redis_server.url)
    on_a, on_b = Session(a, "shared"), Session(b, "shared")
    on_a.prompt("what did we decide about auth?")
    on_b.prompt_id, on_b.calls = on_a.prompt_id, 100  # the same turn; call ids of its own
    _, after = on_a.call("mem_search", SEARCH, query="auth", limit=3)
    assert after is not None
    assert not on_b.pre("mem_search", query="jwt", limit=3).denied
    third = on_a.pre("mem_search", query="tokens", limit=3)
    assert third.denied and "max_search_calls=2" in third.reason
    assert not (b.state / "ledger.db").exists() and not (a.state / "ledger.db").exists(), "no SQLite file is used"


def test_a_subagent_counts_in_the_turn_that_spawned_it_on_every_host(tmp_path: Path, redis_server: RedisServer) -> None:
    """The turn a subagent is fixed to lives in the shared ledger: a prompt the model forged on one host
    made another turn current before the spawn; the subagent's calls, on either host, count in the
    user's turn (tests/test_subagent_sessions.py plays the same on one host)."""
    a, b = hosts(tmp_path, redis_server.url)
    on_a, on_b = codex_with_a_researcher(a), codex_with_a_researcher(b)
    on_a.prompt("what did we decide about caching? ask the researcher")
    on_b.turn, on_b.calls = on_a.turn, 100  # the same turn; call ids of its own
    assert not denied(on_a.pre("mem_search", query="cache", limit=3))
    forge_prompt(on_b)
    agent = new_researcher(on_a)
    spawn(on_a, agent)
    assert not denied(on_b.pre("mem_search", agent=agent, query="redis", limit=3))
    assert denied(on_a.pre("mem_search", agent=agent, query="ttl", limit=3), "max_search_calls")


def test_a_session_named_as_a_subagent_on_one_host_keeps_its_subagents_on_every_host(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Host B names host A's session as a subagent of a session made up there (mg:a: is shared): the
    session is known on the ledger, so the link is not made and A's subagent counts in A's turn."""
    a, b = hosts(tmp_path, redis_server.url)
    on_a, on_b = codex_with_a_researcher(a), codex_with_a_researcher(b)
    on_a.prompt("what did we decide about caching? ask the researcher")
    name_as_subagent(on_b, on_a.id)
    assert not denied(on_a.pre("mem_search", query="cache", limit=3))
    agent = new_researcher(on_a)
    spawn(on_a, agent)
    assert not denied(on_a.pre("mem_search", agent=agent, query="redis", limit=3))
    assert denied(on_a.pre("mem_search", agent=agent, query="ttl", limit=3), "max_search_calls")


def test_status_and_report_on_one_host_read_what_another_recorded(tmp_path: Path, redis_server: RedisServer) -> None:
    a, b = hosts(tmp_path, redis_server.url)
    plain = Env(tmp_path / "sqlite")  # the same session on the SQLite file: what they must show
    for where in (a, plain):
        sess = Session(where, "reported")
        sess.prompt("what did we decide about retries?")
        sess.call("mem_search", SEARCH, query="retries", limit=3)
        sess.pre("mem_search", query="backoff", limit=3)
    status, expected = (env.cli_json("status", "--format", "json") for env in (b, plain))
    assert status["session"] == "s:reported"
    assert status["limits"] == expected["limits"] and status["turn_number"] == expected["turn_number"] == 1
    assert [p["role"] for p in status["pending"]] == ["search"]
    limits = {item["limit"]: item for item in status["limits"]}
    assert limits["max_search_calls"]["used"] == 2 and limits["max_memory_tokens_injected"]["used"] > 300
    report, wanted = (env.cli_json("report", "--format", "json") for env in (b, plain))
    for data in (report, wanted):
        for turn in data["turns"]:
            turn.pop("started")
    assert report["turns"] == wanted["turns"] and report["totals"] == wanted["totals"]
    assert report["turns"][0]["usage"]["max_search_calls"] == 2


def _respond(host: Host, data: bytes) -> tuple[Any, float]:
    """The hook's decision function, in this process (redis-py already imported): its own time,
    the policy compiled before (a call to a tool nothing governs loads it)."""
    respond("claude-code", payload(host, "warm-up", "p-0", "PreToolUse", tool_name="Read", tool_input={}), host.vars)
    started = time.monotonic()
    outcome = respond("claude-code", data, host.vars)
    return outcome, time.monotonic() - started


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_with_redis_stopped_a_call_is_refused_at_once_and_the_next_turn_is_governed(
    tmp_path: Path, redis_server: RedisServer, on_error: str
) -> None:
    a, _ = hosts(tmp_path, redis_server.url)
    a.write(".memory-governor/policy.yaml", f"on_error: {on_error}\n")
    sess = Session(a, f"outage-{on_error}")
    sess.prompt("what did we decide about caching?")
    assert not sess.pre("mem_search", query="cache", limit=3).denied
    redis_server.stop()
    first = sess.pre("mem_search", query="cache", limit=3)
    again = sess.pre("mem_search", query="eviction", limit=3)
    timed, took = _respond(a, search(a, sess.id, sess.prompt_id or "", "toolu-timed"))
    assert took < DEADLINE, f"{took:.2f} s"
    assert any("cannot be reached" in line for line in timed.errors)
    for answer in (first, again):
        assert "cannot be reached" in answer.stderr and redis_server.url in answer.stderr
        assert answer.denied, "a stopped Redis is one a process of the user's can stop: on_error does not apply"
    assert "could not decide" in first.message, "the user is told"
    assert again.message == "", "once"
    assert "cannot be reached" in (a.state / "errors.log").read_text()
    redis_server.start()
    sess.prompt("and what about the CDN?")
    assert not sess.pre("mem_search", query="cdn", limit=3).denied
    assert not sess.pre("mem_search", query="edge", limit=3).denied
    assert sess.pre("mem_search", query="purge", limit=3).denied, "governed again"


def test_the_warm_server_keeps_deciding_across_a_redis_restart(tmp_path: Path, redis_server: RedisServer) -> None:
    a, _ = hosts(tmp_path, redis_server.url, warm=True)
    a.vars["MEMORY_GOVERNOR_TRACE"] = "1"
    sess = Session(a, "restart")
    try:
        sess.prompt("what did we decide about sessions?")
        deadline = time.monotonic() + 60
        while "answered by the warm server" not in sess.pre("Bash", command="true").stderr:
            assert time.monotonic() < deadline, "no warm server came up"
        assert not sess.pre("mem_search", query="sessions", limit=3).denied
        redis_server.stop()
        gone = sess.pre("mem_search", query="cookies", limit=3)
        assert "answered by the warm server" in gone.stderr and "cannot be reached" in gone.stderr
        redis_server.start()
        sess.prompt("next question")
        answers = [sess.pre("mem_search", query=f"q{n}", limit=3) for n in range(3)]
        assert all("answered by the warm server" in x.stderr for x in answers)
        assert [x.denied for x in answers] == [False, False, True]
    finally:
        a.stop_server()


def test_a_redis_that_accepts_and_never_answers_costs_a_bounded_wait(tmp_path: Path, redis_server: RedisServer) -> None:
    hung = Relay(redis_server.port, delay=30.0)
    try:
        a, _ = hosts(tmp_path, f"redis://127.0.0.1:{hung.port}/0")
        outcome, took = _respond(a, search(a, "hung", "p-1", "toolu-1"))
        assert took < DEADLINE, f"{took:.2f} s"
        assert any("cannot be reached" in line and "Timeout" in line for line in outcome.errors), outcome.errors
    finally:
        hung.close()


def test_a_slow_link_still_decides_within_the_deadline(tmp_path: Path, redis_server: RedisServer) -> None:
    slow = Relay(redis_server.port, delay=0.05)  # +100 ms a round trip
    try:
        a, _ = hosts(tmp_path, f"redis://127.0.0.1:{slow.port}/0")
        respond("claude-code", payload(a, "slow", "p-1", "UserPromptSubmit", prompt="what about auth?"), a.vars)
        outcomes = []
        for n in range(3):
            outcome, took = _respond(a, search(a, "slow", "p-1", f"toolu-{n}"))
            assert took < DEADLINE, f"{took:.2f} s"
            assert not outcome.errors, outcome.errors
            outcomes.append(outcome)
        assert ["deny" in json.dumps(o.answer) for o in outcomes] == [False, False, True]
    finally:
        slow.close()


@pytest.mark.parametrize("appendonly", [True, False], ids=["append-only", "no-persistence"])
def test_what_a_redis_restart_keeps(tmp_path: Path, appendonly: bool) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=appendonly).start()
    try:
        a, _ = hosts(tmp_path, server.url)
        sess = Session(a, "durable")
        advice = sess.prompt("what did we decide about queues?").context
        delivered = O200K(advice)  # the governor's own line counts against the budget too
        for query in ("queues", "retries"):
            _, after = sess.call("mem_search", SEARCH, query=query, limit=3)
            assert after is not None
            delivered += O200K(after.output if after.output is not None else SEARCH)
        server.stop(kill=True)  # no shutdown save: what was written is what the file holds
        server.start()
        third = sess.pre("mem_search", query="dead letters", limit=3)
        status = a.cli_json("status", "--session", "durable", "--format", "json") if appendonly else None
    finally:
        server.stop()
    if appendonly:
        assert third.denied, "every committed count survived the restart"
        assert status is not None
        limits = {item["limit"]: item for item in status["limits"]}
        assert limits["max_search_calls"]["used"] == 2 and limits["max_memory_tokens_injected"]["used"] == delivered
    else:
        assert not third.denied, "without persistence the restart lost the turn's counts (docs/reliability.md)"


# A process that takes the lease on a session, says so, and holds it (or writes, when told).
HOLDER = """
import sys, time
sys.path.insert(0, {root!r})
from governor.engine.stores import open_ledger
ledger = open_ledger(sys.argv[1], int(sys.argv[3]), sys.argv[2])
with ledger.write("s:held"):
    ledger.turn("s:held", "s:t", time.time())
    print("holding", flush=True)
    time.sleep(float(sys.argv[4]))
"""


def _holder(tmp: Path, url: str, busy_ms: int, hold: float) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT)), str(tmp / "holder"), url, str(busy_ms),
                             str(hold)], stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"holding"
    return proc


def test_a_holder_that_dies_releases_within_its_lease(tmp_path: Path, redis_server: RedisServer) -> None:
    holder = _holder(tmp_path, redis_server.url, 2000, 600)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    ledger = open_ledger(str(tmp_path / "waiter"), 2000, redis_server.url)
    started = time.monotonic()
    with ledger.write("s:held"):
        turn, _ = ledger.turn("s:held", "s:t", time.time())
    waited = time.monotonic() - started
    assert turn == "s:t"
    assert waited < ledger.busy_timeout, "the dead holder's lease ran out before the waiter gave up"


def test_a_lease_held_past_the_busy_timeout_is_contention(tmp_path: Path, redis_server: RedisServer) -> None:
    holder = _holder(tmp_path, redis_server.url, 10_000, 30)  # a live holder with a 7.5 s lease
    try:
        ledger = open_ledger(str(tmp_path / "waiter"), 300, redis_server.url)
        with pytest.raises(LedgerBusy, match="held by another decision"), ledger.write("s:held"):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_a_decision_that_outlives_its_lease_writes_nothing(tmp_path: Path, redis_server: RedisServer) -> None:
    slow = open_ledger(str(tmp_path / "slow"), 600, redis_server.url)  # a 500 ms lease
    other = open_ledger(str(tmp_path / "other"), 2000, redis_server.url)
    lease = redis_server.client()
    with pytest.raises(LedgerLeaseLost), slow.write("s:fenced"):
        turn, _ = slow.turn("s:fenced", "s:t", 1000.0)
        slow.reserve("s:fenced", turn, "late", "search", "", ("", ""), 100, 1000.0, 300)
        while lease.exists("mg:l:s:fenced"):
            time.sleep(0.01)  # the lease ran out: the next decision may take the session
        with other.write("s:fenced"):
            turn, _ = other.turn("s:fenced", "s:t", 1001.0)
            other.reserve("s:fenced", turn, "on-time", "search", "", ("", ""), 100, 1001.0, 300)
    with other.read("s:fenced"):
        assert other.call("s:fenced", "late") is None, "the late decision wrote nothing"
        assert other.call("s:fenced", "on-time") is not None


def test_a_decision_that_outlives_its_lease_is_decided_again_on_what_the_other_wrote(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A loaded host: its search's decision is slower than its lease, and another host's two searches
    take the session meanwhile (the turn's limit is 2). Nothing of the slow one was written, so it is
    decided again on the ledger as the other left it: refused by the limit, not for the ledger's sake."""
    policy, _ = compiled.load({"MEMORY_GOVERNOR_STATE_DIR": str(tmp_path)}, str(tmp_path), str(tmp_path))
    slow = open_ledger(str(tmp_path / "slow"), 600, redis_server.url)  # a 500 ms lease
    other = open_ledger(str(tmp_path / "other"), 2000, redis_server.url)
    lease = redis_server.client()
    now = 1_800_000_000.0

    def event(kind: str, call: str = "", **fields: Any) -> ev.Event:
        return ev.Event(kind, "s-slow", call_id=call or None, **fields)

    def search(call: str) -> ev.Event:
        return event(ev.PRE_TOOL, call, tool_name="mcp__engram__mem_search", server="engram", tool="mem_search",
                     tool_input={"query": "auth", "limit": 3})  # fmt: skip

    decide(event(ev.PROMPT, prompt="what did we decide about auth?"), policy, other, World(now, "/p"))
    flush, tries = slow._flush, []  # type: ignore[attr-defined]

    def late_flush() -> None:
        tries.append(1)
        if len(tries) == 1:  # the first try: slower than its lease, while the other host decides
            while lease.exists("mg:l:" + key("s-slow")):
                time.sleep(0.01)
            for call in ("a", "b"):
                assert decide(search(call), policy, other, World(now + 1, "/p")).kind != ev.DENY
        flush()

    slow._flush = late_flush  # type: ignore[attr-defined]
    decision = decide(search("late"), policy, slow, World(now + 1, "/p"))
    assert len(tries) == 2, "decided again"
    assert decision.kind == ev.DENY and "max_search_calls" in decision.code, decision
    with other.read(key("s-slow")):
        assert other.call(key("s-slow"), key("late"))[0] == "denied", "the second try's decision was written"
        assert other.call(key("s-slow"), key("a"))[0] == "pending"


def test_sigkilled_writers_on_two_hosts_leave_a_consistent_ledger(tmp_path: Path, redis_server: RedisServer) -> None:
    import random

    script = WRITER.format(root=str(ROOT))
    rng = random.Random(1234)
    client = redis_server.client()
    for _round in range(4):
        before = client.hlen("mg:s:s:crash")
        procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / f"host-{i % 2}"),
                                   str(rng.randint(0, 10**6)), redis_server.url]) for i in range(4)]  # fmt: skip
        deadline = time.monotonic() + 120
        while client.hlen("mg:s:s:crash") < before + 40 and time.monotonic() < deadline:
            time.sleep(0.01)  # until the writers are writing
        time.sleep(rng.random() * 0.5)
        for proc in procs:
            time.sleep(rng.random() * 0.05)
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait()
    rows = client.hgetall("mg:s:s:crash")
    calls = {json.loads(value)[1]: json.loads(value) for field, value in rows.items() if field.startswith("calls|")}
    audited = {json.loads(entry["r"])["code"] for _, entry in client.xrange("mg:audit")}
    assert calls and set(calls) == audited, "a call and its audit row are written together or not at all"
    per_turn: dict[str, int] = {}
    for row in calls.values():
        if row[7] in ("pending", "committed"):
            per_turn[row[2]] = per_turn.get(row[2], 0) + 1
    assert max(per_turn.values()) <= 3
    assert {row[7] for row in calls.values()} <= {"pending", "committed", "denied"}


def test_credentials_never_reach_a_message_a_log_or_the_audit_trail(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", password="s3cret-pw").start()
    try:
        wrong = server.url.replace("s3cret-pw", "wr0ng-pw")
        a, _ = hosts(tmp_path, wrong)
        sess = Session(a, "secret")
        told = sess.prompt("what about auth?")
        refused = sess.pre("mem_search", query="auth", limit=3)
        assert "could not decide" in told.message and "default:***@" in refused.stderr
        doctor_wrong = a.cli("doctor")
        a.vars["MEMORY_GOVERNOR_LEDGER_URL"] = server.url
        sess.prompt("what about auth, again?")
        assert not sess.pre("mem_search", query="auth", limit=3).denied
        doctor = a.cli("doctor")
        audit = json.dumps(server.client().xrange("mg:audit"))
    finally:
        server.stop()
    ledger_row = next(line for line in doctor.stdout.splitlines() if " ledger " in f" {line} ")
    assert ledger_row.startswith(OK) and masked(server.url) in ledger_row and "session(s)" in ledger_row
    wrong_row = next(line for line in doctor_wrong.stdout.splitlines() if " ledger " in f" {line} ")
    assert wrong_row.startswith(BAD) and "refused the user and password" in wrong_row
    seen = [told.message, told.stderr, refused.stderr, doctor.stdout, doctor_wrong.stdout, audit]
    seen += [p.read_text(errors="replace") for p in a.state.rglob("*") if p.is_file()]
    assert not [text for text in seen if "s3cret-pw" in text or "wr0ng-pw" in text]


def test_doctor_says_which_ledger_is_in_force_and_when_it_does_not_answer(tmp_path: Path,
                                                                          redis_server: RedisServer) -> None:  # fmt: skip
    a, _ = hosts(tmp_path, redis_server.url)
    up = a.cli("doctor").stdout
    redis_server.stop()
    down = a.cli("doctor").stdout
    plain = Env(tmp_path / "plain").cli("doctor").stdout
    assert f"Redis at {redis_server.url}" in up and "persistence: none" in up
    assert "cannot be reached" in down and "unset MEMORY_GOVERNOR_LEDGER_URL" in down
    assert "SQLite file in" in plain


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/0", "127.0.0.1:6379"])
def test_a_url_that_is_not_redis_is_a_visible_error(tmp_path: Path, url: str) -> None:
    a, _ = hosts(tmp_path, url)
    sess = Session(a, "bad-url")
    answer = sess.pre("mem_search", query="auth", limit=3)
    assert "use redis://" in answer.stderr and "could not decide" in answer.message


def test_every_ledger_table_is_shared_or_kept_by_the_redis_store(redis_server: RedisServer, tmp_path: Path) -> None:
    from governor.engine.redis_ledger import AUDIT_TABLE, SHARED_TABLES

    ledger = open_ledger(str(tmp_path), 2000, redis_server.url)
    names = {row[0] for row in ledger.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names == set(ledger.tables) | {AUDIT_TABLE, *SHARED_TABLES, "changed"}  # type: ignore[attr-defined]


def test_the_models_shell_cannot_reach_the_ledgers_redis(tmp_path: Path, redis_server: RedisServer) -> None:
    a, _ = hosts(tmp_path, redis_server.url)
    sess = Session(a, "wiper")
    sess.prompt("the limits are in my way")
    refused = [f"redis-cli -h 127.0.0.1 -p {redis_server.port} FLUSHALL", f"redis-cli -p {redis_server.port} del x",
               'redis-cli -u "$MEMORY_GOVERNOR_LEDGER_URL" flushdb', f"nc localhost {redis_server.port} < wipe.txt",
               f"python -c 'import redis; redis.Redis(port={redis_server.port}).flushall()'"]  # fmt: skip
    allowed = [
        f"redis-cli -p {redis_server.port + 1} get cache-key",
        "redis-cli -h cache.internal get x",
        f"curl 127.0.0.1:{redis_server.port}0",
    ]
    for command in refused + allowed:
        answer = sess.event("PreToolUse", tool_name="Bash", tool_input={"command": command}, tool_use_id=sess.next_id())
        assert answer.denied == (command in refused), command
    assert redis_server.client().exists("mg:s:s:wiper")


def test_a_projects_acceptance_is_shared_by_every_host(tmp_path: Path, redis_server: RedisServer) -> None:
    """Two hosts, one Redis: a loosening an agent writes into the project is held back on the host
    that first saw the project and on one that never did (it used to accept the files as it first
    found them); `policy accept` on one host puts it in force on both. No acceptance file is
    written to either state directory."""
    a, b = hosts(tmp_path, redis_server.url)
    Session(a, "first").prompt("what did we decide about auth?")  # host A sees the project first
    a.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 4, enforce: block}\n")
    for host, name in ((a, "on-a"), (b, "on-b")):
        sess = Session(host, name)
        told = sess.prompt("what did we decide about caching?")
        assert "held back" in told.message, (name, told.message)
        answers = [sess.pre("mem_search", query=q, limit=1) for q in ("a", "b", "c")]
        assert answers[2].denied and "max_search_calls=2" in answers[2].reason, (name, answers[2].reason)
    a.accept("--yes")
    for host, name in ((b, "after-b"), (a, "after-a")):
        sess = Session(host, name)
        sess.prompt("what did we decide about retries?")
        answers = [sess.pre("mem_search", query=q, limit=1) for q in ("a", "b", "c")]
        assert not any(x.denied for x in answers), (name, [x.reason for x in answers])
    assert not list(a.state.glob("accepted/*")) and not list(b.state.glob("accepted/*"))


def test_accepting_with_the_ledgers_redis_down_accepts_nothing_and_names_no_secret(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", password="s3cret-pw").start()
    try:
        a, _ = hosts(tmp_path, server.url)
        Session(a, "first").prompt("what did we decide about auth?")
        a.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 4, enforce: block}\n")
        a.vars["MEMORY_GOVERNOR_LEDGER_URL"] = server.url.replace("s3cret-pw", "wr0ng-pw")
        refused = a.accept("--yes", check=False)
        doctor = a.cli("doctor")
        a.vars["MEMORY_GOVERNOR_LEDGER_URL"] = server.url
        sess = Session(a, "later")
        sess.prompt("what did we decide about caching?")
        answers = [sess.pre("mem_search", query=q, limit=1) for q in ("a", "b", "c")]
    finally:
        server.stop()
    assert refused.returncode != 0 and "nothing was accepted" in refused.stdout, refused.stdout
    assert answers[2].denied, "the loosening is still held back"
    seen = [refused.stdout, doctor.stdout, doctor.stderr] + [p.read_text(errors="replace")
                                                             for p in a.state.rglob("*") if p.is_file()]  # fmt: skip
    assert "default:***@" in refused.stdout and not [t for t in seen if "s3cret-pw" in t or "wr0ng-pw" in t]
