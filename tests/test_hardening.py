"""Hostile input, faults, isolation, secrets and load: the hook keeps deciding and loses nothing."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governor.engine.decide import World, decide
from governor.engine.events import PRE_TOOL, Event
from governor.engine.stores import open_ledger
from governor.runtime.runner import respond
from tests.conftest import HOOK, NO_WINDOW, ROOT, Env, Session, fixture_text, run_hook

EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact",
          "SubagentStart", "SubagentStop", "Stop", "Notification", "", "pretooluse"]  # fmt: skip
TOOLS = ["mcp__engram__mem_search", "mcp__engram__mem_get_observation", "mcp__engram__mem_context",
         "mcp__engram__mem_save", "mcp__plugin_engram_engram__mem_timeline", "Agent", "Bash", "mcp__", "mcp____x"]  # fmt: skip
HOSTILE = st.sampled_from(["../x", "/etc/passwd", "a" * 5000, "nul\x00byte", "", "\ud800", "C:\\Windows", "~root"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40) | HOSTILE,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
PAYLOADS = st.fixed_dictionaries(
    {},
    optional={
        "session_id": JSON | HOSTILE, "hook_event_name": st.sampled_from(EVENTS) | JSON, "tool_name": st.sampled_from(TOOLS) | JSON,
        "tool_input": JSON | st.fixed_dictionaries({}, optional={"query": JSON, "limit": JSON, "id": JSON,
                                                                 "content": JSON, "type": JSON, "prompt": JSON}),
        "tool_response": JSON, "tool_use_id": JSON | HOSTILE, "prompt_id": JSON | HOSTILE, "prompt": JSON,
        "agent_id": JSON | HOSTILE, "agent_type": JSON | HOSTILE, "source": JSON, "cwd": JSON | HOSTILE,
    },
)  # fmt: skip


def check_answer(answer: bytes) -> None:
    """One JSON object or nothing; a PreToolUse may be denied, nothing is ever `allow`."""
    if not answer:
        return
    text = answer.decode("utf-8")
    assert text.endswith("\n") and text.count("\n") == 1
    data = json.loads(text)
    assert isinstance(data, dict) and set(data) <= {"hookSpecificOutput", "systemMessage"}
    specific = data.get("hookSpecificOutput", {})
    assert specific.get("permissionDecision") in (None, "deny"), "never `allow`"


def fuzz_env(tmp: Path) -> dict[str, str]:
    return {"HOME": str(tmp / "home"), "MEMORY_GOVERNOR_STATE_DIR": str(tmp / "state"), "PATH": os.environ["PATH"],
            "MEMORY_GOVERNOR_WARM_SERVER": "off", "XDG_CONFIG_HOME": str(tmp / "home" / ".config")}  # fmt: skip


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(payload=PAYLOADS)
def test_fuzzed_payloads_always_get_a_valid_answer(tmp_path: Path, payload: dict[str, Any]) -> None:
    env = fuzz_env(tmp_path)
    raw = json.dumps(payload, default=str).encode("utf-8", "surrogatepass")
    started = time.monotonic()
    out = respond("claude-code", raw, env)
    assert time.monotonic() - started < 10
    check_answer(out.stdout())
    outside = [p for p in tmp_path.iterdir() if p.name not in ("home", "state")]
    assert outside == [], "nothing written outside the state directory"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300) | st.text(max_size=300).map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_fuzzed_bytes_never_crash(tmp_path: Path, raw: bytes) -> None:
    out = respond("claude-code", raw, fuzz_env(tmp_path))
    check_answer(out.stdout())


@pytest.mark.hook_processes  # the process itself: reading its input, its exit, its one answer
@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100000 + b"]" * 100000,  # deep nesting
        json.dumps(
            {
                "session_id": "s",
                "hook_event_name": "PostToolUse",
                "tool_name": "mcp__engram__mem_search",
                "tool_use_id": "t",
                "tool_response": "x" * 5_000_000,
            }
        ).encode(),  # a 5 MB result
        b'{"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "\xff\xfe invalid utf-8"}',
        json.dumps(
            {
                "session_id": "s" * 100000,
                "hook_event_name": "PreToolUse",
                "tool_name": "mcp__engram__mem_search",
                "tool_input": {"query": "q", "limit": 10**30},
                "tool_use_id": "t",
            }
        ).encode(),
    ],
    ids=["deep-nesting", "5MB-result", "invalid-utf8", "huge-id-and-limit"],
)
def test_hostile_inputs_through_the_real_process(env: Env, raw: bytes) -> None:
    started = time.monotonic()
    answer = run_hook(env, None, raw=raw)
    assert time.monotonic() - started < 30
    check_answer(answer.raw.encode())
    outside = {p.name for p in env.tmp.iterdir()} - {"home", "state", "project"}
    assert not outside


def test_a_5mb_result_is_trimmed_to_the_budget(env: Env, session: Session) -> None:
    session.prompt("what did we decide?")
    _, after = session.call(
        "mem_search", "Found 1 memories:\n\n[1] #9 (decision) — Big\n    " + "w " * 2_500_000, query="q"
    )
    assert after is not None and after.output is not None and len(after.output) < 2000


# -- faults -----------------------------------------------------------------------------------------


def test_hooks_killed_mid_write_leave_a_consistent_ledger(env: Env) -> None:
    """Hook processes SIGKILLed at random moments; the ledger stays consistent and usable."""
    env.write(".memory-governor/policy.yaml", NO_WINDOW)  # 48 searches of one user in seconds
    Session(env, "first").start()  # the folder's first session accepts it, before any hook is killed
    rng = random.Random(5)
    for round_ in range(6):
        procs = []
        for i in range(8):
            payload = {"session_id": f"kill-{i % 3}", "hook_event_name": "PreToolUse", "prompt_id": f"p{round_}",
                       "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "q", "limit": 3},
                       "tool_use_id": f"t-{round_}-{i}", "cwd": str(env.project)}  # fmt: skip
            proc = subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    env=env.vars)  # fmt: skip
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(payload).encode())
            proc.stdin.close()
            procs.append(proc)
        time.sleep(rng.random() * 0.05)
        for proc in procs:
            if rng.random() < 0.6:
                proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait()
    db = sqlite3.connect(env.state / "ledger.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    over = db.execute("SELECT session, turn, COUNT(*) FROM calls WHERE role='search' AND state IN ('pending','committed') "
                      "GROUP BY session, turn HAVING COUNT(*) > 2").fetchall()  # fmt: skip
    assert over == []
    reserved = {r[0] for r in db.execute("SELECT call_id FROM calls")}
    audited = db.execute("SELECT COUNT(*) FROM decisions WHERE event='pre_tool'").fetchone()[0]
    assert audited == len(reserved), "a reservation and its audit row are written together or not at all"
    survivor = Session(env, "after-kill")
    survivor.prompt("what did we decide?")
    assert survivor.pre("mem_search", query="q", limit=10).updated_input == {"query": "q", "limit": 3}


def _in_private_mount(env: Env, script: str) -> subprocess.CompletedProcess[str]:
    """Run a shell script in a private mount namespace, with the state directory on a tmpfs."""
    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespaces here (unshare -rm)")
    env.state.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["unshare", "-rm", "sh", "-euc", script], capture_output=True, text=True, env=env.vars,
                          timeout=120)  # fmt: skip


def _hook_line(env: Env, payload: dict[str, Any]) -> str:
    return f"printf '%s' '{json.dumps(payload)}' | {' '.join(HOOK)}"


PRE_SEARCH = {"session_id": "disk", "hook_event_name": "PreToolUse", "prompt_id": "p1", "tool_name": "mcp__engram__mem_search",
              "tool_input": {"query": "q", "limit": 10}, "tool_use_id": "t2"}  # fmt: skip


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_a_full_disk_refuses_memory_calls_whatever_on_error_says(env: Env, on_error: str) -> None:
    """A process running as the user can fill the disk: it never opens the gate."""
    env.write(".memory-governor/policy.yaml", f"on_error: {on_error}\n")
    first = {**PRE_SEARCH, "tool_use_id": "t1", "cwd": str(env.project)}
    script = (
        f"mount -t tmpfs -o size=512k tmpfs {env.state}\n"
        f"{_hook_line(env, first)} > /dev/null\n"
        f"dd if=/dev/zero of={env.state}/fill bs=4k 2>/dev/null || true\n"
        f"{_hook_line(env, {**PRE_SEARCH, 'cwd': str(env.project)})}\n"
    )
    proc = _in_private_mount(env, script)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "could not decide" in answer["systemMessage"] and "full" in answer["systemMessage"]
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "on_error does not apply" in answer["systemMessage"]


def test_a_read_only_state_directory_refuses_memory_calls(env: Env) -> None:
    first = {**PRE_SEARCH, "tool_use_id": "t1", "cwd": str(env.project)}
    script = (
        f"mount -t tmpfs -o size=4m tmpfs {env.state}\n"
        f"{_hook_line(env, first)} > /dev/null\n"
        f"mount -o remount,ro {env.state}\n"
        f"{_hook_line(env, {**PRE_SEARCH, 'cwd': str(env.project)})}\n"
    )
    proc = _in_private_mount(env, script)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "could not decide" in answer["systemMessage"] and "read-only" in answer["systemMessage"]
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny", "the shipped on_error: open does not apply"


def test_an_unusable_state_directory_is_reported_not_crashed_on(env: Env) -> None:
    shutil.rmtree(env.state)  # the sandbox's, with its tokenizer tables
    env.state.write_text("a file where the state directory should be")
    answer = run_hook(env, {**PRE_SEARCH, "cwd": str(env.project)})
    assert "could not decide" in answer.message and answer.denied
    assert env.state.read_text() == "a file where the state directory should be"


@pytest.mark.hook_processes  # hooks that leave the ledger open at exit, its WAL not checkpointed
def test_a_ledger_corrupted_mid_session_is_moved_aside(env: Env, session: Session) -> None:
    session.prompt("what did we decide?")
    session.pre("mem_search", query="q", limit=3)
    db = env.state / "ledger.db"
    for extra in ("ledger.db-wal", "ledger.db-shm"):
        (env.state / extra).unlink(missing_ok=True)
    with db.open("r+b") as handle:
        handle.seek(100)
        handle.write(os.urandom(4000))
    answer = session.pre("mem_search", query="q", limit=10)
    assert answer.updated_input == {"query": "q", "limit": 3}
    assert "corrupt" in answer.message or "could not decide" in answer.message
    follow = session.pre("mem_search", query="r", limit=10)
    assert follow.updated_input == {"query": "r", "limit": 3} and "could not decide" not in follow.message


def test_clock_skew_never_frees_a_slot_early(tmp_path: Path) -> None:
    """A clock that jumps back or forward never frees a call slot: a granted call counts for its
    whole turn (past its TTL it stops holding only its expected tokens)."""
    from governor.policy import compiled

    policy, _ = compiled.load({"MEMORY_GOVERNOR_STATE_DIR": str(tmp_path)}, str(tmp_path), str(tmp_path))
    ledger = open_ledger(str(tmp_path))

    def search(call: str, now: float) -> str:
        event = Event(PRE_TOOL, "skew", turn_id="p1", server="engram", tool="mem_search", tool_name="mcp__engram__mem_search",
                      tool_input={"query": "q", "limit": 3}, call_id=call)  # fmt: skip
        return decide(event, policy, ledger, World(now, str(tmp_path))).kind

    now = 1_800_000_000.0
    assert search("a", now) != "deny" and search("b", now) != "deny"
    assert search("c", now - 3600) == "deny", "an hour back: both reservations still count"
    assert search("d", now + 299) == "deny", "within the reservation TTL"
    assert search("e", now + 301) == "deny", "past the TTL an unreported call still took its slot"


# -- isolation --------------------------------------------------------------------------------------------


def test_two_projects_and_two_sessions_do_not_share_budgets_or_triggers(env: Env, tmp_path: Path) -> None:
    other_project = tmp_path / "other-project"
    other_project.mkdir()
    a, b = Session(env, "project-a-session"), Session(env, "project-b-session")
    a.prompt("work on A")
    a.start("compact")
    b.sandbox.project = env.project  # same machine, same state directory
    b.prompt("recordar todo del proyecto B")
    for _ in range(2):
        a.pre("mem_search", query="a", limit=3)
    assert a.pre("mem_search", query="a", limit=3).denied
    assert not b.pre("mem_search", query="b", limit=3).denied
    a.prompt("continue A")
    assert not a.pre("mem_context").denied, "A's compaction trigger is A's"
    c = Session(env, "project-c-session")
    c.prompt("continue C")
    assert c.pre("mem_context").denied, "no trigger leaks to another session"


# -- secrets -------------------------------------------------------------------------------------------------

SECRETS = ["sk-ant-api03-Z9xQ7mLkP2vR8tY4wN6bH1cJ5dF3gA0sE", "ghp_4fG7hJ2kL9mN1pQ3rS5tU8vW0xY6zA2bC4dE",
           "AKIAIOSFODNN7EXAMPLE", "password=hunter2-correct-horse", "xoxb-1234567890-abcdefghijkl"]  # fmt: skip


def test_no_secret_reaches_any_file_under_the_state_directory(env: Env, session: Session) -> None:
    session.prompt(f"deploy with {SECRETS[0]} and {SECRETS[3]}")
    search = fixture_text("engram/search_v1.txt").replace("Replaced express-session", f"Stored {SECRETS[1]} in vault")
    session.call("mem_search", search, query=f"token {SECRETS[2]}", limit=10)
    session.pre(
        "mem_save",
        title=f"key {SECRETS[4]}",
        content=f"User: use {SECRETS[0]}\nAssistant: ok\nUser: thx",
        type="bugfix",
    )
    session.call("mem_get_observation", f"#42 [decision] x\n{SECRETS[1]}\nSession: s\nScope: p\nCreated: x", id=42)
    run_hook(env, None, raw=f'{{"session_id": "{SECRETS[2]}", "hook_event_name": "PreToolUse", broken'.encode())
    big = "Found 2 memories:\n\n" + "".join(
        f"[{i}] #{90 + i} (decision) — {SECRETS[i]}\n    {'w ' * 700}\n    2025-01-01 00:00:00 | project: p | scope: project\n\n"
        for i in (1, 2)
    )
    _, trimmed = session.call("mem_search", big, query="x", limit=3)
    assert trimmed is not None and trimmed.output is not None and SECRETS[2] not in trimmed.output
    assert "#92" not in trimmed.output, "a trimmed result never reveals what was held back"
    files = [p for p in env.state.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret[:8]}… found in {path}"


# -- load (bounded here; the full run is scripts/load.py) --------------------------------------------------


@pytest.mark.parametrize(("mode", "calls", "sessions"), [("worker", 1000, 20), ("spawn", 350, 10)])
def test_load_has_no_lost_or_double_counts(mode: str, calls: int, sessions: int) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "load.py"), "--calls", str(calls), "--sessions",
                           str(sessions), "--procs", "16", "--mode", mode, "--json", *(["--warm"] if mode == "spawn" else [])],
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["hook_errors"] == 0 and report["turns_with_wrong_counts"] == 0
    assert report["turns"] == report["expected_turns"]
    assert report["state_bytes_after_gc"] < report["state_bytes_before_gc"]


def test_load_on_one_redis_for_two_hosts_has_no_lost_or_double_counts() -> None:
    from tests.redis_server import require

    require()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "load.py"), "--calls", "700", "--sessions", "20",
                           "--procs", "8", "--mode", "worker", "--redis", "--json"],
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["hook_errors"] == 0 and report["turns_with_wrong_counts"] == 0
    assert report["turns"] == report["expected_turns"] and report["redis_keys_after_gc"] <= 4
