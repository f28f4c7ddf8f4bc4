"""The ledger: exact counts across real concurrent processes, crashes, hostile ids, corruption."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from governor.engine.ledger import LedgerBusy, key
from governor.engine.stores import open_ledger
from tests.conftest import NO_WINDOW, ROOT, Env, Session, fixture_text, run_hook

# A worker process: waits for the start signal, then tries one reservation in one transaction.
# With a URL, on the Redis ledger there, its state directory standing in for its host.
RESERVE = """
import os, sys, time
sys.path.insert(0, {root!r})
from governor.engine.stores import open_ledger
state, go, call, url = sys.argv[1], sys.argv[2], sys.argv[6], sys.argv[7] or None
role_limit, tokens_limit, expected = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ledger = open_ledger(state, 10000, url)
ledger.check()  # connected before the start, so that the race is the decisions'
open(go + "." + call, "w").close()  # ready
while not os.path.exists(go):
    time.sleep(0.001)
now = time.time()
with ledger.write("s:race"):
    turn, _ = ledger.turn("s:race", "s:turn-1", now)
    usage = ledger.usage("s:race", turn, now)
    ok = usage.get("search", 0) < role_limit and usage["tokens"] + expected <= tokens_limit
    if ok:
        ledger.reserve("s:race", turn, call, "search", "mem_search", ("", ""), expected, now, 300)
print("granted" if ok else "refused")
"""


def _race(tmp: Path, workers: int, role_limit: int, tokens_limit: int, expected: int, url: str = "") -> list[str]:
    """`workers` processes reserve at once; on Redis, half of them on each of two hosts."""
    hosts = [tmp / "host-a", tmp / "host-b"] if url else [tmp / "state"]
    tmp.mkdir(parents=True, exist_ok=True)
    for state in hosts:
        open_ledger(str(state), 2000, url or None).close()
    go = tmp / "go"
    if go.exists():
        go.unlink()
    script = RESERVE.format(root=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(hosts[i % len(hosts)]), str(go), str(role_limit), str(tokens_limit),
             str(expected), f"call-{i}-{random.random()}", url],
            stdout=subprocess.PIPE,
        )
        for i in range(workers)
    ]  # fmt: skip
    deadline = time.monotonic() + 120
    while len(list(tmp.glob("go.*"))) < workers and time.monotonic() < deadline:
        time.sleep(0.01)  # until every worker waits at the barrier, its ledger open
    go.touch()
    return [p.communicate(timeout=60)[0].decode().strip() for p in procs]


def _store(request: pytest.FixtureRequest, store: str) -> str:
    """The URL of the ledger under test: '' the SQLite file, else a real redis-server's."""
    return request.getfixturevalue("redis_server").url if store == "redis" else ""


# Fewer rounds on Redis: each of its workers imports redis-py, which costs a 2-core machine seconds.
ROUNDS = [("sqlite", n) for n in range(8)] + [("redis", n) for n in range(2)]


@pytest.mark.parametrize(("store", "repetition"), ROUNDS)
def test_parallel_reserves_never_overshoot_a_count_limit(
    tmp_path: Path, repetition: int, store: str, request: pytest.FixtureRequest
) -> None:
    url = _store(request, store)
    outcomes = _race(tmp_path / str(repetition), workers=24, role_limit=2, tokens_limit=10**9, expected=1, url=url)
    assert outcomes.count("granted") == 2, outcomes
    assert outcomes.count("refused") == 22


@pytest.mark.parametrize(("store", "repetition"), ROUNDS[4:])
def test_parallel_reserves_never_overshoot_a_token_budget(
    tmp_path: Path, repetition: int, store: str, request: pytest.FixtureRequest
) -> None:
    url = _store(request, store)
    outcomes = _race(tmp_path / str(repetition), workers=24, role_limit=100, tokens_limit=1200, expected=300, url=url)
    assert outcomes.count("granted") == 4, outcomes


def test_same_call_id_counts_once(session: Session) -> None:
    session.prompt("what did we decide about auth?")
    first = session.pre("mem_search", "toolu_same", query="auth", limit=3)
    again = session.pre("mem_search", "toolu_same", query="auth", limit=3)
    assert not first.denied and not again.denied
    third = session.pre("mem_search", query="auth", limit=3)
    assert not third.denied, "the repeated id must not have used the second slot"
    assert session.pre("mem_search", query="auth", limit=3).denied


def test_an_expired_reservation_frees_its_tokens_but_not_its_call_slot(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    now = 1000.0
    with ledger.write():
        turn, _ = ledger.turn("s:a", "s:t1", now)
        ledger.reserve("s:a", turn, "c1", "search", "mem_search", ("", ""), 300, now, ttl=60)
        assert ledger.usage("s:a", turn, now + 59) == {"search": 1, "tokens": 300}
        assert ledger.usage("s:a", turn, now + 61) == {"search": 1, "tokens": 0}


def _usage_by_rows(rows: list[tuple[str, str, str, int, int, float]], now: float, agent: str | None) -> dict[str, int]:
    """What usage means, call by call: (role, state, agent, reserved, tokens, expires) of one turn."""
    counts: dict[str, int] = {}
    for role, state, who, _, _, _ in rows:
        if state in ("committed", "pending") and (agent is None or who == agent):
            counts[role] = counts.get(role, 0) + 1
    counts["tokens"] = sum(
        tokens if state == "committed" else reserved if state == "pending" and expires > now else 0
        for _, state, _, reserved, tokens, expires in rows
    )
    return counts


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_usage_counts_a_mixed_turn_as_its_calls_say(tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("redis_server").url if store == "redis" else None
    ledger = open_ledger(str(tmp_path / "host"), 2000, url)
    rng = random.Random(7)
    now = 1000.0
    rows: list[tuple[str, str, str, int, int, float]] = []
    with ledger.write("s:a"):
        turn, _ = ledger.turn("s:a", "s:t1", now)
        other, _ = ledger.turn("s:a", "s:t2", now)
        ledger.reserve("s:a", other, "elsewhere", "search", "", ("", ""), 999, now, 60)  # another turn: not counted
        for n in range(60):
            role = rng.choice(["search", "fetch", "save", "other"])
            agent = rng.choice(["", "agent-1", "agent-2"])
            expected, ttl = rng.randrange(1, 500), rng.choice([5.0, 60.0])
            ledger.reserve("s:a", turn, f"c{n}", role, "", (agent, ""), expected, now, ttl)
            state, tokens = rng.choice(["committed", "pending", "released"]), rng.randrange(0, 800)
            if state == "committed":
                ledger.commit("s:a", f"c{n}", tokens, now)
            elif state == "released":
                ledger.release("s:a", f"c{n}", now)
            rows.append((role, state, agent, expected, tokens if state == "committed" else 0, now + ttl))
        ledger.deny("s:a", turn, "refused", "search", "", ("agent-1", ""), now)
        rows.append(("search", "denied", "agent-1", 0, 0, now))
        for at in (now, now + 10, now + 100):
            for agent in (None, "", "agent-1", "agent-3"):
                assert ledger.usage("s:a", turn, at, agent_id=agent) == _usage_by_rows(rows, at, agent), (at, agent)
    ledger.close()


def test_commit_replaces_the_reservation_and_release_frees_it(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    now = 1000.0
    with ledger.write():
        turn, _ = ledger.turn("s:a", "s:t1", now)
        ledger.reserve("s:a", turn, "c1", "search", "", ("", ""), 300, now, 60)
        ledger.reserve("s:a", turn, "c2", "fetch", "", ("", ""), 500, now, 60)
        ledger.commit("s:a", "c1", 120, now)
        ledger.release("s:a", "c2", now)
        assert ledger.usage("s:a", turn, now) == {"search": 1, "tokens": 120}


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_a_call_committed_again_keeps_the_most_it_was_counted_at(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    """A result sent again for a call already counted (a second hook file, or the model running
    the hook itself with a smaller result) never lowers what the turn has spent; a larger one raises it."""
    url = request.getfixturevalue("redis_server").url if store == "redis" else None
    ledger = open_ledger(str(tmp_path / "host"), 2000, url)
    now = 1000.0
    with ledger.write("s:a"):
        turn, _ = ledger.turn("s:a", "s:t1", now)
        ledger.reserve("s:a", turn, "c1", "search", "", ("", ""), 300, now, 60)
        ledger.commit("s:a", "c1", 5, now)  # a first result, tiny (sent before the real one)
        ledger.commit("s:a", "c1", 900, now)  # the real one
        ledger.commit("s:a", "c1", 0, now)  # sent again, empty
    with ledger.write("s:a"):
        assert ledger.usage("s:a", turn, now) == {"search": 1, "tokens": 900}
        assert ledger.call("s:a", "c1")[4] == 900
    ledger.close()


def test_turns_follow_the_harness_turn_id_or_a_counter(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        assert ledger.turn("s:a", None, 1.0) == ("", 0)
        assert ledger.turn("s:a", None, 2.0, new=True) == ("seq:1", 1)
        assert ledger.turn("s:a", None, 3.0) == ("seq:1", 1)
        assert ledger.turn("s:a", "s:p-9", 4.0) == ("s:p-9", 2)
        assert ledger.turn("s:a", "s:p-9", 5.0, new=True) == ("s:p-9", 2)  # the same prompt id is the same turn
        assert ledger.turn("s:a", None, 6.0) == ("s:p-9", 2)


def test_a_joined_turn_id_counts_in_the_turn_it_joined(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        assert ledger.turn("s:a", "s:p-1", 1.0, new=True) == ("s:p-1", 1)
        ledger.remember_launch("s:a", "s:toolu-1", "s:p-1")
        assert ledger.turn("s:a", "s:p-2", 2.0, new=True) == ("s:p-2", 2)
        assert ledger.launched_in("s:a", "s:toolu-1") == "s:p-1"
        assert ledger.launched_in("s:a", "s:toolu-2") is None
        ledger.join_turn("s:a", "s:n-1", "s:p-1")
        assert ledger.turn("s:a", "s:n-1", 3.0) == ("s:p-1", 1)
        assert ledger.turn("s:a", None, 4.0) == ("s:p-2", 2), "joining does not move the current turn"
        assert ledger.launched_in("s:b", "s:toolu-1") is None, "another session's launch is not this one's"


def test_an_older_ledger_file_upgrades_in_place(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        ledger.turn("s:a", "s:p-1", 1.0, new=True)
        ledger.reserve("s:a", "s:p-1", "c1", "search", "mem_search", ("", ""), 100, 1.0, 300)
    ledger.q("DROP TABLE turn_links")  # what a file written before the table existed lacks
    ledger.q("PRAGMA user_version=3")
    ledger.close()
    again = open_ledger(str(tmp_path))
    with again.write():
        again.join_turn("s:a", "s:n-1", "s:p-1")
        assert again.turn("s:a", "s:n-1", 2.0) == ("s:p-1", 1)
        assert again.usage("s:a", "s:p-1", 2.0) == {"search": 1, "tokens": 100}, "the older rows are kept"


def test_trigger_scopes(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        ledger.arm("s:a", "explicit_user_recall", "this_turn", 1, 3, "s:t3", 1.0)
        ledger.arm("s:a", "post_compact", "next_turn", 1, 3, "s:t3", 1.0)
        ledger.arm("s:a", "session_resume", "once", 2, 3, "s:t3", 1.0)
        assert ledger.armed("s:a", 3, "s:t3") == ["explicit_user_recall", "post_compact", "session_resume"]
        assert ledger.armed("s:a", 4, "s:t4") == ["post_compact", "session_resume"]
        assert ledger.armed("s:a", 5, "s:t5") == ["session_resume"]
        ledger.consume("s:a", "session_resume")
        ledger.consume("s:a", "session_resume")
        assert ledger.armed("s:a", 9, "s:t9") == []


def test_sessions_cannot_see_each_others_rows(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        turn, _ = ledger.turn("s:a", "s:t", 1.0)
        ledger.reserve("s:a", turn, "c1", "search", "", ("", ""), 300, 1.0, 60)
        ledger.surface("s:a", turn, ["42"])
        ledger.arm("s:a", "post_compact", "once", 1, 1, turn, 1.0)
        other, _ = ledger.turn("s:b", "s:t", 1.0)
        assert ledger.usage("s:b", other, 1.0) == {"tokens": 0}
        assert not ledger.surfaced("s:b", other, "42")
        assert ledger.armed("s:b", 1, other) == []


HOSTILE_IDS = ["../x", "../../etc/passwd", "/etc/passwd", "a" * 5000, "nul\x00byte", "a/b", "a_b", "\ud800", "C:\\x"]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_hostile_session_ids_stay_inside_the_state_dir_and_apart(env: Env) -> None:
    before = _tree(env.tmp)
    for session_id in HOSTILE_IDS:
        sess = Session(env, session_id)
        sess.prompt("what did we decide about the cache?")
        assert not sess.pre("mem_search", query="cache", limit=3).denied
        assert not sess.pre("mem_search", query="cache", limit=3).denied
        assert sess.pre("mem_search", query="cache", limit=3).denied, f"{session_id!r} shares a budget"
    created = _tree(env.tmp) - before
    assert created, "the state directory was written"
    # The default state directory keeps the acceptance anchor too (named by the project, never by a session).
    anchor = "home/.local/state/memory-governor/accepted"
    outside = {path for path in created if not (path == "state" or path.startswith("state/"))}
    assert all(anchor.startswith(path) or path.startswith(anchor + "/") for path in outside), outside
    ledger = open_ledger(str(env.state))
    sessions = [row[0] for row in ledger.q("SELECT session FROM sessions")]
    assert len(sessions) == len(set(sessions)) == len(HOSTILE_IDS)


def test_two_long_ids_differing_in_the_last_character_are_two_sessions(env: Env) -> None:
    first, second = Session(env, "x" * 4999 + "1"), Session(env, "x" * 4999 + "2")
    for sess in (first, second):
        sess.prompt("where did we leave off?")
        assert not sess.pre("mem_search", query="q", limit=3).denied
        assert not sess.pre("mem_search", query="q", limit=3).denied
    assert key("x" * 4999 + "1") != key("x" * 4999 + "2")


@pytest.mark.parametrize("bad", ["", None, 7, ["a"]])
def test_missing_or_malformed_session_id_is_a_visible_error(env: Env, bad: object) -> None:
    payload = {"session_id": bad, "hook_event_name": "PreToolUse", "tool_name": "mcp__engram__mem_search",
               "tool_input": {"query": "x"}, "tool_use_id": "t1", "cwd": str(env.project)}  # fmt: skip
    answer = run_hook(env, payload)
    assert "session_id" in answer.stderr
    assert "let through (on_error: open)" in answer.message


WRITER = """
import os, sys, random, time
sys.path.insert(0, {root!r})
from governor.engine.stores import open_ledger
state, seed, url = sys.argv[1], int(sys.argv[2]), (sys.argv[3:] or [""])[0] or None
rng = random.Random(seed)
ledger = open_ledger(state, 2000 if url else 30000, url)  # on Redis a dead holder's lease is 3/4 of it
n = 0
while True:
    now = time.time()
    with ledger.write("s:crash"):
        turn, _ = ledger.turn("s:crash", "s:turn-%d" % (n // 20), now)
        usage = ledger.usage("s:crash", turn, now)
        call = "w%d-%d" % (seed, n)
        granted = usage.get("search", 0) < 3
        if granted:
            ledger.reserve("s:crash", turn, call, "search", "t", ("", ""), 10, now, 3600)
        else:
            ledger.deny("s:crash", turn, call, "search", "t", ("", ""), now)
        ledger.record({{"ts": now, "session": "s:crash", "turn": turn, "event": "pre_tool", "decision": "x",
                       "code": call}})
        if granted and rng.random() < 0.5:
            ledger.commit("s:crash", call, rng.randint(1, 10), now)
    n += 1
"""


def test_sigkilled_writers_leave_a_consistent_ledger(tmp_path: Path) -> None:
    state = tmp_path / "state"
    open_ledger(str(state)).close()
    script = WRITER.format(root=str(ROOT))
    rng = random.Random(1234)
    for _round in range(6):
        procs = [subprocess.Popen([sys.executable, "-c", script, str(state), str(rng.randint(0, 10**6))])
                 for _ in range(4)]  # fmt: skip
        time.sleep(0.3 + rng.random() * 0.5)
        for proc in procs:
            time.sleep(rng.random() * 0.05)
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait()
    db = sqlite3.connect(state / "ledger.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    calls = {row[0] for row in db.execute("SELECT call_id FROM calls")}
    audited = {row[0] for row in db.execute("SELECT code FROM decisions WHERE session='s:crash'")}
    assert calls and calls == audited, "a call and its audit row are written together or not at all"
    over = db.execute(
        "SELECT turn, COUNT(*) FROM calls WHERE state IN ('pending','committed') GROUP BY turn HAVING COUNT(*) > 3"
    ).fetchall()
    assert over == []
    states = {row[0] for row in db.execute("SELECT DISTINCT state FROM calls")}
    assert states <= {"pending", "committed", "denied"}


def test_a_corrupt_ledger_is_moved_aside_and_the_hook_keeps_deciding(env: Env, session: Session) -> None:
    env.state.mkdir(parents=True, exist_ok=True)
    (env.state / "ledger.db").write_bytes(b"this is not a database" * 100)
    first = session.prompt("what did we decide about logging?")
    assert "moved to" in first.message and "corrupt" in first.message
    aside = [p.name for p in env.state.iterdir() if ".corrupt-" in p.name]
    assert aside and (env.state / "ledger.db").exists()
    answer = session.pre("mem_search", query="logging", limit=10)
    assert answer.updated_input == {"query": "logging", "limit": 3}
    assert "corrupt" not in answer.message


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    code = (
        "import sqlite3, sys, time\n"
        f"db = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        f"time.sleep({seconds})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"locked"
    return proc


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_a_ledger_held_by_another_process_waits_then_refuses_whatever_on_error_says(env: Env, on_error: str) -> None:
    env.write(".memory-governor/policy.yaml", f"on_error: {on_error}\nledger:\n  busy_timeout_ms: 200\n  "
              "reservation_ttl_seconds: 300\n  retention_days: 14\n")  # fmt: skip
    sess = Session(env)
    sess.prompt("what do we know about the deploy?")
    holder = _hold_lock(env.state / "ledger.db", 5)
    try:
        started = time.monotonic()
        answer = sess.pre("mem_search", query="deploy", limit=3)
        elapsed = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert elapsed < 4, "bounded wait"
    assert "locked" in answer.stderr
    # Contention a model can cause at will (a background process holding the lock) never opens the gate.
    assert answer.denied and "holds the ledger" in answer.reason, answer.raw
    assert "contention" in answer.message and "let through" not in answer.message, answer.message
    log = (env.state / "errors.log").read_text()
    assert "locked" in log


def test_status_reports_the_turn_against_each_limit(env: Env, session: Session) -> None:
    session.prompt("what did we decide about retries?")
    session.call("mem_search", fixture_search(), query="retries", limit=3)
    session.pre("mem_search", query="backoff", limit=3)
    report = env.cli_json("status", "--session", session.id, "--format", "json")
    limits = {item["limit"]: item for item in report["limits"]}
    assert limits["max_search_calls"]["used"] == 2 and limits["max_search_calls"]["value"] == 2
    assert limits["max_memory_tokens_injected"]["used"] > 300
    assert [p["role"] for p in report["pending"]] == ["search"]
    assert report["memory_need"] is not None


def fixture_search() -> str:
    return fixture_text("engram/search_v1.txt")


def test_gc_prunes_old_sessions(env: Env) -> None:
    ledger = open_ledger(str(env.state))
    with ledger.write():
        for n in range(30):
            ledger.turn(f"s:old-{n}", "s:t", time.time() - 40 * 86400)
        ledger.turn("s:fresh", "s:t", time.time())
    ledger.close()
    out = env.cli("gc")
    assert out.returncode == 0 and "removed 30 session(s)" in out.stdout
    ledger = open_ledger(str(env.state))
    assert [r[0] for r in ledger.q("SELECT session FROM sessions")] == ["s:fresh"]


def test_busy_is_reported_as_a_ledger_error(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path), busy_timeout_ms=50)
    holder = _hold_lock(tmp_path / "ledger.db", 3)
    try:
        with pytest.raises(LedgerBusy), ledger.write():
            pass
    finally:
        holder.kill()
        holder.wait()


def test_ledger_file_is_private(tmp_path: Path) -> None:
    open_ledger(str(tmp_path / "state")).close()
    assert (tmp_path / "state").stat().st_mode & 0o077 == 0
    assert os.path.exists(tmp_path / "state" / "ledger.db")


def test_a_hook_process_loads_sqlite_without_functools_and_keeps_the_real_one_for_later():
    """_sqlite3 takes functools.lru_cache at import; a process without functools lends it a stand-in
    for that import only: its statement cache works, and a later `import functools` is the real one."""
    from tests.conftest import fresh_process

    out = fresh_process(
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from governor.engine import ledger\n"
        "print('functools' in sys.modules, 'collections' in sys.modules)\n"
        "db = ledger.sqlite3.connect(':memory:')\n"
        "print(sum(db.execute('SELECT ?', (i % 300,)).fetchone()[0] for i in range(1000)))\n"
        "import functools\n"
        "print(functools.reduce(lambda a, b: a + b, [1, 2, 3]), hasattr(functools, 'partial'))\n"
    )
    assert out.split("\n")[:3] == ["False False", str(sum(i % 300 for i in range(1000))), "6 True"]


@pytest.mark.hook_processes
def test_hooks_deciding_alone_keep_the_wal_short_and_every_decision(env: Env) -> None:
    """A hook that decides in its own process exits without closing the ledger (no checkpoint in its
    way), and the next one to open the file alone reads the whole WAL: left so, the WAL grew by
    every decision and every cold hook's time with it. Past WAL_LIMIT the hook that finds it long
    checkpoints it after its answer; no decision is lost doing so."""
    import json

    from governor.engine.sqlite_ledger import WAL_LIMIT
    from tests.conftest import HOOK

    env.write(".memory-governor/policy.yaml", NO_WINDOW)  # 60 sessions of one user in seconds
    wal = env.state / "ledger.db-wal"
    largest = 0
    for n in range(60):  # ~37 KB of WAL a decision here: past the limit about once every 28
        payload = {"session_id": f"wal-{n}", "cwd": str(env.project), "hook_event_name": "PreToolUse",
                   "transcript_path": "/dev/null", "tool_name": "mcp__engram__mem_search",
                   "tool_input": {"query": "auth", "limit": 20}, "tool_use_id": f"t-{n}"}  # fmt: skip
        proc = subprocess.run(HOOK, input=json.dumps(payload).encode(), capture_output=True, env=env.vars,
                              cwd=str(env.project), timeout=60)  # fmt: skip
        assert json.loads(proc.stdout)["hookSpecificOutput"]["updatedInput"]["limit"] == 3, proc.stderr
        largest = max(largest, wal.stat().st_size if wal.exists() else 0)
    assert largest <= WAL_LIMIT + 256 * 1024, largest  # one decision's pages past the limit, at most
    ledger = open_ledger(str(env.state))
    try:
        assert ledger.one("SELECT COUNT(*) FROM calls")[0] == 60
    finally:
        ledger.close()


@pytest.mark.hook_processes
def test_a_reader_holding_the_wal_costs_the_hooks_no_wait_and_no_decision(env: Env) -> None:
    """Another process holding a read snapshot (a database browser, a backup) keeps the checkpoint
    from truncating the WAL: the hook gives up at once, never waits on it, and loses nothing."""
    import json

    from governor.engine.sqlite_ledger import WAL_LIMIT
    from tests.conftest import HOOK

    def hook(n: int) -> float:
        payload = {"session_id": f"reader-{n}", "cwd": str(env.project), "hook_event_name": "PreToolUse",
                   "transcript_path": "/dev/null", "tool_name": "mcp__engram__mem_search",
                   "tool_input": {"query": "auth", "limit": 20}, "tool_use_id": f"t-{n}"}  # fmt: skip
        started = time.monotonic()
        proc = subprocess.run(HOOK, input=json.dumps(payload).encode(), capture_output=True, env=env.vars,
                              cwd=str(env.project), timeout=60)  # fmt: skip
        assert json.loads(proc.stdout)["hookSpecificOutput"]["updatedInput"]["limit"] == 3, proc.stderr
        return time.monotonic() - started

    env.write(".memory-governor/policy.yaml", NO_WINDOW)  # 40 sessions of one user in seconds
    hook(0)
    reader = sqlite3.connect(str(env.state / "ledger.db"), isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM calls").fetchall()  # a snapshot held open
        slowest = max(hook(n) for n in range(1, 40))  # ~37 KB of WAL each: past the limit from ~28 on
        assert (env.state / "ledger.db-wal").stat().st_size > WAL_LIMIT  # it could not be truncated
    finally:
        reader.close()
    assert slowest < 1.5, slowest  # the ledger's own busy timeout is 2 s: no hook waited on the reader
    ledger = open_ledger(str(env.state))
    try:
        assert ledger.one("SELECT COUNT(*) FROM calls")[0] == 40
        assert ledger.one("PRAGMA integrity_check")[0] == "ok"
    finally:
        ledger.close()
