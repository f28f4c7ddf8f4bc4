#!/usr/bin/env python3
"""Load: many hook calls across many sessions from concurrent processes, then exact checks.

    python scripts/load.py [--calls 10000] [--sessions 200] [--procs 16] [--mode spawn|worker] [--redis] [--json]

Every turn of every session attempts three L1 searches (PreToolUse, then PostToolUse for the
ones allowed) and one save; all calls of all turns are shuffled and run by --procs
concurrent processes, so a turn's calls race each other. `spawn` starts one hook process
per call (what Claude Code does); `worker` runs --procs long-lived processes that each call
the same decision function in a loop (more calls per second, the same SQLite contention). `--redis` starts Debian's redis-server on a
free loopback port and runs every hook against it (MEMORY_GOVERNOR_LEDGER_URL), half of them on
each of two state directories standing in for two hosts.

One uid plays every session, far past a person's pace: the per-user window is off (a project
policy in the scratch folder). Checks afterwards, from the ledger: in every turn exactly 2
searches were allowed and 1 denied
(no lost or double count), every allowed search committed exactly what the model got of its result, no
hook printed an error, and after `gc --days 0` the state directory (or the Redis) is small again.
Exit 1 if any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENTRY = ROOT / "governor" / "runtime" / "entry.py"
# Each search of a session returns a memory of its own (six-digit ids: every result counts the
# same tokens), so delivered-once never turns one into a pointer and each commits its whole count.
RESULT = (
    "Found 1 memories:\n\n[1] #{ident} (decision) — Load test memory\n    **What**: a short memory body for load.\n"
    "    2026-01-01 10:00:00 | project: load | scope: project\n\n"
)
# What the model gets of it, and each search commits (the shipped L1 snippets_only: the hit without its date line).
DELIVERED = (
    "Found 1 memories:\n\n[1] #{ident} (decision) — Load test memory\n    **What**: a short memory body for load.\n\n"
)
WORKER = """
import json, os, sys
sys.path.insert(0, {root!r})
from governor.runtime.runner import respond
env = dict(os.environ)
errors = 0
for line in sys.stdin:
    task = json.loads(line)
    for payload in task:
        out = respond("claude-code", json.dumps(payload).encode(), env)
        errors += bool(out.errors)
        if payload["hook_event_name"] == "PreToolUse" and out.answer and "permissionDecision" in str(out.answer):
            break  # denied: Claude Code would not run the tool, so no PostToolUse
print(errors)
"""


def calls(sessions: int, turns: int, project: str) -> list[list[dict]]:
    """Each task: one call's PreToolUse and PostToolUse (a search) or a save's, in order."""
    out = []
    for s in range(sessions):
        for t in range(turns):
            base = {"session_id": f"load-{s}", "prompt_id": f"load-{s}-turn-{t}", "cwd": project,
                    "transcript_path": "/dev/null", "permission_mode": "default"}  # fmt: skip
            for c in range(3):
                call = {**base, "tool_name": "mcp__engram__mem_search", "tool_input": {"query": f"q{c}", "limit": 3},
                        "tool_use_id": f"toolu-{s}-{t}-{c}"}  # fmt: skip
                out.append([{**call, "hook_event_name": "PreToolUse"},
                            {**call, "hook_event_name": "PostToolUse", "tool_response": RESULT.format(ident=100_000 + 3 * t + c)}])  # fmt: skip
            save = {**base, "tool_name": "mcp__engram__mem_save", "tool_use_id": f"toolu-{s}-{t}-save",
                    "tool_input": {"title": f"t{s}-{t}", "content": "Use X because Y.", "type": "decision",
                                   "topic_key": "load/test/decision"}}  # fmt: skip
            out.append([{**save, "hook_event_name": "PreToolUse"}, {**save, "hook_event_name": "PostToolUse",
                                                                     "tool_response": "Memory saved"}])  # fmt: skip
    return out


def run_spawn(tasks: list[list[dict]], procs: int, envs: list[dict[str, str]]) -> int:
    def one(numbered: tuple[int, list[dict]]) -> int:
        index, task = numbered
        env = envs[index % len(envs)]
        errors = 0
        for payload in task:
            proc = subprocess.run([sys.executable, "-I", "-S", str(ENTRY), "claude-code"], input=json.dumps(payload).encode(),
                                  capture_output=True, env=env, timeout=60)  # fmt: skip
            errors += proc.returncode != 0 or b"could not decide" in proc.stderr or b"Traceback" in proc.stderr
            if payload["hook_event_name"] == "PreToolUse" and b'"deny"' in proc.stdout:
                break
        return errors

    with ThreadPoolExecutor(max_workers=procs) as pool:
        return sum(pool.map(one, enumerate(tasks)))


def run_workers(tasks: list[list[dict]], procs: int, envs: list[dict[str, str]]) -> int:
    script = WORKER.format(root=str(ROOT))
    workers = [subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=envs[n % len(envs)], text=True) for n in range(procs)]  # fmt: skip
    for index, task in enumerate(tasks):
        assert workers[index % procs].stdin is not None
        workers[index % procs].stdin.write(json.dumps(task) + "\n")  # type: ignore[union-attr]
    return sum(int(w.communicate(timeout=3600)[0].strip() or 0) for w in workers)


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


PER_TURN = (
    "SELECT session, turn, SUM(role='search' AND state IN ('pending','committed')), "
    "SUM(role='search' AND state='denied'), SUM(role='search' AND state='committed'), SUM(tokens) "
    "FROM calls WHERE role IN ('search', 'save') GROUP BY session, turn"
)


def file_counts(state: Path) -> tuple[list[tuple], int]:
    """Per (session, turn): searches granted, denied, committed, tokens; and the hook calls audited."""
    db = sqlite3.connect(state / "ledger.db")
    rows = db.execute(PER_TURN).fetchall()
    hook_calls = db.execute("SELECT COUNT(*) FROM decisions WHERE event IN ('pre_tool', 'post_tool')").fetchone()[0]
    db.close()
    return rows, hook_calls


def redis_counts(url: str) -> tuple[list[tuple], int]:
    """The same, from the Redis ledger: its session rows loaded into SQLite, the same query."""
    import redis

    from governor.engine.ledger import create_tables

    client = redis.Redis.from_url(url, decode_responses=True)
    db = sqlite3.connect(":memory:")
    create_tables(db)
    width = len(db.execute("PRAGMA table_info(calls)").fetchall())
    for name in client.scan_iter("mg:s:*", count=1000):
        rows = [json.loads(v) for f, v in client.hgetall(name).items() if f.startswith("calls|")]
        db.executemany(f"INSERT INTO calls VALUES ({', '.join('?' * width)})", rows)
    audited = sum(
        json.loads(entry["r"])["event"] in ("pre_tool", "post_tool") for _, entry in client.xrange("mg:audit")
    )
    return db.execute(PER_TURN).fetchall(), audited


def start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Debian's redis-server on a free loopback port, no persistence, its files in `folder`."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                               "no", "--dir", str(folder)], stdout=subprocess.DEVNULL)  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    for _ in range(500):
        try:
            redis.Redis.from_url(url).ping()
            return server, url
        except redis.ConnectionError:
            time.sleep(0.02)
    server.kill()
    raise SystemExit("redis-server did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000, help="Hook calls in all (PreToolUse + PostToolUse).")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--mode", choices=["spawn", "worker"], default="spawn")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--warm", action="store_true", help="Let hooks use the warm server (the default install).")
    parser.add_argument("--redis", action="store_true", help="One Redis ledger for two hosts (two state directories).")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    per_turn = 3 * 2 - 1 + 2  # three searches (one denied: no PostToolUse) and a save
    turns = max(1, round(args.calls / per_turn / args.sessions))
    scratch = Path(tempfile.mkdtemp(prefix="memory-governor-load-"))
    state = scratch / "state"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(scratch / "home"), "MEMORY_GOVERNOR_STATE_DIR": str(state),
           "MEMORY_GOVERNOR_WARM_SERVER": "auto" if args.warm else "off",
           "XDG_CONFIG_HOME": str(scratch / "home" / ".config")}  # fmt: skip
    envs = [env]
    server = None
    if args.redis:
        server, url = start_redis(scratch)
        envs = [{**env, "MEMORY_GOVERNOR_LEDGER_URL": url, "MEMORY_GOVERNOR_STATE_DIR": str(scratch / host)}
                for host in ("host-a", "host-b")]  # fmt: skip
    # One uid plays every session: hundreds of turns a minute, far past any person's pace. The checks
    # are per turn, so the per-user window (which would refuse most of them) is off for the load.
    (scratch / ".memory-governor").mkdir()
    (scratch / ".memory-governor" / "policy.yaml").write_text("window:\n" + "".join(
        f"  {name}: {{value: 0, enforce: 'off'}}\n"
        for name in ("max_search_calls", "max_full_fetches", "max_memory_tokens_injected")))  # fmt: skip
    # A folder's first session accepts its policy. It runs in a process of its own, as a person's does:
    # one the load's workers descend from would run a governed session, and every load session nest in it.
    start = {"session_id": "load-start", "cwd": str(scratch), "transcript_path": "/dev/null",
             "hook_event_name": "SessionStart", "source": "startup"}  # fmt: skip
    person = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
    subprocess.run([sys.executable, "-c", person, sys.executable, "-I", "-S", str(ENTRY), "claude-code"],
                   input=json.dumps(start).encode(), capture_output=True, env=envs[0], timeout=60,
                   check=True)  # fmt: skip
    tasks = calls(args.sessions, turns, str(scratch))
    random.Random(args.seed).shuffle(tasks)
    try:
        started = time.perf_counter()
        errors = (run_spawn if args.mode == "spawn" else run_workers)(tasks, args.procs, envs)
        elapsed = time.perf_counter() - started
        if args.warm:
            for each in envs:
                subprocess.run([sys.executable, "-m", "governor", "serve", "--stop"], capture_output=True,
                               env={**each, "PYTHONPATH": str(ROOT)}, cwd=scratch)  # fmt: skip
        per_turn_rows, hook_calls = redis_counts(url) if args.redis else file_counts(state)
        ok, report = check(args, env if not args.redis else envs[0], scratch, turns, per_turn_rows, hook_calls,
                           errors, elapsed)  # fmt: skip
        if server is not None:
            import redis

            keys = [key.decode() for key in redis.Redis.from_url(url).scan_iter(count=1000)]
            accepted = [key for key in keys if key.startswith(("mg:p:", "mg:pp:"))]  # per project: gc keeps them
            report["redis_keys_after_gc"] = len(keys) - len(accepted)
            report["redis_acceptance_keys"] = len(accepted)
            ok = ok and report["redis_keys_after_gc"] <= 4  # the fence, and what expires by itself
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    print(json.dumps(report, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in report.items()))
    return 0 if ok else 1


def check(args: argparse.Namespace, env: dict[str, str], scratch: Path, turns: int, per_turn_rows: list[tuple],
          hook_calls: int, errors: int, elapsed: float) -> tuple[bool, dict]:  # fmt: skip
    state = Path(env["MEMORY_GOVERNOR_STATE_DIR"])
    from governor.engine.tokens import counter

    result_tokens = counter("o200k_base").count(DELIVERED.format(ident=100_000))
    bad_turns = [r for r in per_turn_rows if (r[2], r[3], r[4], r[5]) != (2, 1, 2, 2 * result_tokens)]
    before_gc = size(state)
    gc = subprocess.run([sys.executable, "-m", "governor", "gc", "--days", "0"], capture_output=True, text=True,
                        env={**env, "PYTHONPATH": str(ROOT)}, cwd=scratch)  # fmt: skip
    after_gc = size(state)
    report = {
        "mode": args.mode + (" (warm server)" if args.warm else "") + (" (Redis, two hosts)" if args.redis else ""),
        "procs": args.procs, "sessions": args.sessions, "turns": len(per_turn_rows),
        "hook_calls": hook_calls, "seconds": round(elapsed, 1), "calls_per_second": round(hook_calls / elapsed, 1),
        "hook_errors": errors, "turns_with_wrong_counts": len(bad_turns),
        "expected_turns": args.sessions * turns, "state_bytes_before_gc": before_gc, "state_bytes_after_gc": after_gc,
        "gc": gc.stdout.strip(),
    }  # fmt: skip
    ok = not errors and not bad_turns and len(per_turn_rows) == args.sessions * turns and gc.returncode == 0
    # gc bounds the ledger (per session); the rest of the state (the compiled policy, the accepted
    # record: per project) does not grow with sessions.
    ok = ok and (args.redis or (state / "ledger.db").stat().st_size < 256 * 1024)
    return ok, report


if __name__ == "__main__":
    raise SystemExit(main())
