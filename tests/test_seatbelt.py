"""The seatbelt: what a model running as the user can do to the governor's own state, and what holds.

The model's shell runs as the user, so it can make the ledger and the state directory unusable:
the ledger replaced by a folder, a FIFO or an unreadable file, the state directory by a file, a
FIFO at errors.log, a Redis paused or locked. Each is a failure the governor did not cause, so
none opens the gate, whatever `on_error` says: the governed call is refused, the user is told, a
call the routes would refuse is refused without the ledger too, and ordinary work is untouched.
Whatever blocks, the hook answers before its harness's timeout (the wall-clock watchdog).
Each hook here is a real process fed a real Claude Code payload.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import HOOK, ROOT, Env, Session, run_hook

pytestmark = pytest.mark.hook_processes  # each attack is on what one hook process opens and waits on

BOUND = 6.0  # seconds: well inside the 10 s a harness gives a hook


def _plant(env: Env, attack: str) -> None:
    """Make the state unusable as a model's one `python3 -c` line would."""
    state = env.state
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        (state / name).unlink(missing_ok=True)
    if attack == "ledger a folder":
        (state / "ledger.db").mkdir()
    elif attack == "ledger a FIFO":
        os.mkfifo(state / "ledger.db")
    elif attack == "WAL a FIFO":
        os.mkfifo(state / "ledger.db-wal")
    elif attack == "FIFOs at the ledger and errors.log":
        os.mkfifo(state / "ledger.db")
        (state / "errors.log").unlink(missing_ok=True)
        os.mkfifo(state / "errors.log")
    elif attack == "state directory a file":
        shutil.rmtree(state)
        state.write_text("not a folder")
    else:
        raise AssertionError(attack)


def _mend(env: Env) -> None:
    if env.state.is_file():
        env.state.unlink()
        env.state.mkdir()
    for name in ("ledger.db", "ledger.db-wal", "errors.log"):
        path = env.state / name
        if path.is_dir():
            path.rmdir()
        elif path.exists() and not path.is_file():
            path.unlink()


ATTACKS = ["ledger a folder", "ledger a FIFO", "WAL a FIFO", "FIFOs at the ledger and errors.log",
           "state directory a file"]  # fmt: skip


@pytest.mark.parametrize("on_error", ["open", "closed"])
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_ledger_made_unusable_refuses_memory_calls_whatever_on_error_says(env: Env, attack: str,
                                                                           on_error: str) -> None:  # fmt: skip
    env.write(".memory-governor/policy.yaml", f"on_error: {on_error}\n")
    sess = Session(env, f"unusable-{on_error}")
    sess.prompt("what did we decide about caching?")
    assert sess.pre("mem_search", query="cache", limit=10).updated_input == {"query": "cache", "limit": 3}
    _plant(env, attack)
    started = time.monotonic()
    refused = sess.pre("mem_search", query="eviction", limit=10)
    assert time.monotonic() - started < BOUND, "answered in bounded time, whatever was planted"
    assert refused.denied, refused.raw
    assert "on_error does not apply" in refused.stderr and "refused" in refused.stderr
    assert "could not decide" in refused.message, "the user is told"
    ordinary = sess.pre("Bash", command="ls -la")
    assert not ordinary.denied, "ordinary work is never refused"
    # Mended: the next turn is governed again.
    _mend(env)
    sess.prompt("and the CDN?")
    answers = [sess.pre("mem_search", query=q, limit=10) for q in ("cdn", "edge", "purge")]
    assert [a.denied for a in answers] == [False, False, True]


def test_while_the_ledger_is_unusable_the_routes_still_refuse_reading_the_memory(env: Env) -> None:
    """A model that made the ledger unusable does not get the memory's database through the shell."""
    sess = Session(env, "route-while-broken")
    sess.prompt("what did we decide about caching?")
    _plant(env, "ledger a FIFO")
    answer = sess.pre("Bash", command="sqlite3 ~/.engram/engram.db 'select * from observations'")
    assert answer.denied, answer.raw
    assert not sess.pre("Bash", command="git status").denied


def _unprivileged() -> list[str]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv, to run the hook as a user whom chmod 000 stops")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def test_an_unreadable_ledger_refuses_memory_calls() -> None:
    """chmod 000 on the ledger (root reads it anyway, so the hook runs as nobody, in a sandbox of its own)."""
    import tempfile

    drop = _unprivileged()
    top = Path(tempfile.mkdtemp(prefix="mg-unreadable-"))
    try:
        os.chmod(top, 0o755)
        env = Env(top)
        shutil.rmtree(env.state)  # the shared caches are linked in: not to be handed to another user
        env.write(".memory-governor/policy.yaml", "on_error: open\n")
        for path in [top, *top.rglob("*")]:
            os.lchown(path, 65534, 65534)
        _refused_when_unreadable(env, drop)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _refused_when_unreadable(env: Env, drop: list[str]) -> None:
    sess = Session(env, "unreadable", command=[*drop, *HOOK])
    sess.prompt("what did we decide about caching?")
    assert sess.pre("mem_search", query="cache", limit=10).updated_input == {"query": "cache", "limit": 3}
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        if (env.state / name).exists():
            os.chmod(env.state / name, 0)
    refused = sess.pre("mem_search", query="eviction", limit=10)
    assert refused.denied and "on_error does not apply" in refused.stderr, refused.raw + refused.stderr


def test_a_redis_paused_or_locked_from_the_models_shell_refuses_memory_calls(env: Env, redis_server) -> None:  # type: ignore[no-untyped-def]
    """One RESP line from the model's shell (CLIENT PAUSE, then CONFIG SET requirepass): each makes
    every Redis call fail, which a process of the user's can cause: refused, never on_error."""
    env.write(".memory-governor/policy.yaml", "on_error: open\n")
    sess = Session(env, "paused", extra_env={"MEMORY_GOVERNOR_LEDGER_URL": redis_server.url})
    sess.prompt("what did we decide about caching?")
    assert sess.pre("mem_search", query="cache", limit=10).updated_input == {"query": "cache", "limit": 3}
    client = redis_server.client()
    client.execute_command("CLIENT", "PAUSE", "20000", "ALL")
    started = time.monotonic()
    paused = sess.pre("mem_search", query="eviction", limit=10)
    assert time.monotonic() - started < BOUND
    assert paused.denied and "on_error does not apply" in paused.stderr, paused.raw + paused.stderr
    client.execute_command("CLIENT", "UNPAUSE")
    client.config_set("requirepass", "the-models-own")
    locked = sess.pre("mem_search", query="storage", limit=10)
    assert locked.denied and "on_error does not apply" in locked.stderr, locked.raw + locked.stderr


def test_under_the_governors_own_redis_user_every_call_is_governed_and_no_ledger_can_be_stopped(
    env: Env, redis_server
) -> None:  # type: ignore[no-untyped-def]
    """The ACL user doctor tells the administrator to make (ACL_RULES): a turn, a save, the policy's
    first acceptance, status, report, gc and doctor's ledger check all work through it (Redis
    refuses it nothing they run), and every command a model holding its URL
    would stop, lock, flush or reconfigure the Redis with is refused by Redis itself. Doctor warns
    of a URL whose user can do more, and names the rules."""
    import redis

    from governor.engine.redis_access import ACL_RULES

    admin = redis_server.client()
    admin.execute_command("ACL", "SETUSER", "memory-governor", "on", ">its-own", *ACL_RULES.split())
    url = f"redis://memory-governor:its-own@127.0.0.1:{redis_server.port}/0"
    sess = Session(env, "acl", extra_env={"MEMORY_GOVERNOR_LEDGER_URL": url})
    sess.start()
    sess.prompt("what did we decide about caching?")
    first, second, third = (sess.pre("mem_search", query=q, limit=10) for q in ("cache", "eviction", "ttl"))
    assert first.updated_input == {"query": "cache", "limit": 3} and second.updated_input is not None, first.raw
    assert third.denied and "could not" not in third.stderr, third.raw + third.stderr  # the limit's, not a failure
    assert not sess.pre("mem_save", title="t", content="Use X because Y.", type="decision").denied
    with_url = {**env.vars, "MEMORY_GOVERNOR_LEDGER_URL": url}
    for command in (["status"], ["report", "--format", "json"], ["gc"]):
        assert env.cli(*command, env=with_url).returncode == 0, command
    assert admin.execute_command("ACL", "LOG") == [], "nothing the governor runs is refused to its own user"
    limited = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5)
    for command in (["CLIENT", "PAUSE", "20000", "ALL"], ["CONFIG", "SET", "requirepass", "x"], ["SHUTDOWN", "NOSAVE"],
                    ["FLUSHALL"], ["FLUSHDB"], ["KEYS", "*"], ["CLIENT", "KILL", "TYPE", "normal"],
                    ["ACL", "SETUSER", "memory-governor", "+@all"], ["SET", "not-ours", "1"]):  # fmt: skip
        with pytest.raises(redis.exceptions.NoPermissionError):
            limited.execute_command(*command)
    assert admin.ping() and admin.dbsize() > 0, "the Redis and the ledger's rows are still there"

    def ledger_rows(which: str) -> list[dict[str, str]]:
        rows = env.cli_json("doctor", "--format", "json", env={**env.vars, "MEMORY_GOVERNOR_LEDGER_URL": which})
        return [row for row in rows if row["check"] == "ledger"]

    own = ledger_rows(url)
    assert [row["status"] for row in own] == ["ok"], own
    wide = ledger_rows(redis_server.url)
    assert [row["status"] for row in wide] == ["ok", "warn"], wide
    assert "CONFIG" in wide[1]["detail"] and ACL_RULES in wide[1]["fix"], wide


def test_a_hook_blocked_anywhere_answers_before_its_harness_gives_up(env: Env, tmp_path: Path) -> None:
    """A FIFO planted where the hook reads (here a module's bytecode in the user's own copy of the
    package, which the model can write) blocks an open() that uses no CPU: the wall-clock watchdog
    refuses the memory call at 8 s, under the 10 s Claude Code waits, with the shipped on_error: open."""
    copy = tmp_path / "site"
    shutil.copytree(ROOT / "governor", copy / "governor", ignore=shutil.ignore_patterns("hook-modules.*"))
    for data in ("rules", "schemas"):  # beside the package, as in a checkout
        shutil.copytree(ROOT / data, copy / data)
    entry = copy / "governor" / "runtime" / "entry.py"
    subprocess.run([sys.executable, "-I", "-S", str(entry), "claude-code"], input=b"{}", capture_output=True,
                   env=env.vars, timeout=60)  # fmt: skip  # its bytecode written once
    blocked = next((copy / "governor" / "engine" / "__pycache__").glob("pre_tool.*.pyc"))
    blocked.unlink()
    os.mkfifo(blocked)
    os.chmod(copy / "governor" / "engine" / "pre_tool.py", 0o644)
    os.utime(copy / "governor" / "engine" / "pre_tool.py", (1, 1))  # the FIFO is newer: it is what Python opens
    sess = Session(env, "blocked", command=[sys.executable, "-I", "-S", str(entry), "claude-code"])
    sess.prompt("what did we decide about caching?")
    started = time.monotonic()
    answer = sess.pre("mem_search", query="cache", limit=10)
    took = time.monotonic() - started
    assert 7.5 < took < 9.5, f"{took:.1f} s"
    assert answer.denied, answer.raw + answer.stderr
    assert "Unanswered" in answer.stderr and "on_error does not apply" in answer.message
    started = time.monotonic()
    ordinary = sess.pre("Bash", command="ls")
    assert not ordinary.denied and time.monotonic() - started < 9.5, "nothing to refuse: answered with nothing"


def test_a_harness_that_never_closes_stdin_gets_no_answer_and_no_hang(env: Env) -> None:
    proc = subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env.vars, cwd=env.project)  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"session_id": "s", "hook_event_name": "PreToolUse"}).encode())
    proc.stdin.flush()
    started = time.monotonic()
    try:
        code = proc.wait(timeout=15)
    finally:
        proc.kill()
    assert code == 0 and time.monotonic() - started < 10, "the watchdog ends it before the harness's 10 s"
    assert proc.stdout is not None and proc.stdout.read() == b"", "nothing read: nothing to answer"


def test_the_watchdogs_answer_is_the_decisions_so_far(env: Env) -> None:
    """What the watchdog answers, from how far the decision got: a memory call refused, a route refused,
    anything else nothing; no error log or notice written (the state directory may be what blocked)."""
    from governor.runtime.runner import Outcome, unanswered

    def late(tool: str, tool_input: dict[str, object]) -> Outcome:
        raw = json.dumps({"session_id": "late", "hook_event_name": "PreToolUse", "tool_name": tool,
                          "tool_input": tool_input, "tool_use_id": "t", "cwd": str(env.project)}).encode()  # fmt: skip
        return unanswered("claude-code", raw, env.vars, None, 8.0)

    memory = late("mcp__engram__mem_search", {"query": "q"})
    assert memory.answer and memory.answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    route = late("Bash", {"command": "cat ~/.engram/engram.db"})
    assert route.answer and route.answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    plain = late("Bash", {"command": "ls"})
    assert plain.answer is None or "hookSpecificOutput" not in plain.answer
    assert not (env.state / "errors.log").exists() and not (env.state / "notices").exists()


def test_no_state_file_is_followed_through_a_link(env: Env, tmp_path: Path) -> None:
    """errors.log linked to a file elsewhere: nothing is written through the link."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched\n")
    (env.state / "errors.log").unlink(missing_ok=True)
    (env.state / "errors.log").symlink_to(target)
    _plant(env, "ledger a folder")
    answer = run_hook(env, {"session_id": "link", "hook_event_name": "PreToolUse", "cwd": str(env.project),
                            "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "q"},
                            "tool_use_id": "t"})  # fmt: skip
    assert answer.denied
    assert target.read_text() == "untouched\n"
