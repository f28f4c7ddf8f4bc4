"""`memory-governor status` and `gc`: what the ledger holds, and pruning it."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import click

from governor.engine.ledger import Ledger, key
from governor.engine.rules import CompiledPolicy
from governor.engine.stores import open_for
from governor.policy import compiled
from governor.policy.projects import prune
from governor.state import state_dir


def _open() -> tuple[Ledger, CompiledPolicy]:
    env = os.environ
    policy, notices = compiled.load(env, os.getcwd(), state_dir(env))
    for notice in notices:
        click.echo(notice, err=True)
    return open_for(env, policy.data["ledger"]), policy


def session_status(ledger: Ledger, policy: CompiledPolicy, session: str, now: float) -> dict[str, Any]:
    """The current turn of `session` (a ledger key) against each limit."""
    info = ledger.session_info(session)
    if info is None:
        raise click.ClickException("no such session in the ledger")
    turn, seq, seen = info
    usage = ledger.usage(session, turn, now)
    saves = usage.get("save", 0) + usage.get("summary", 0)
    used = {
        "max_search_calls": usage.get("search", 0),
        "max_full_fetches": usage.get("fetch", 0),
        "max_memory_tokens_injected": usage["tokens"],
        "max_save_calls_per_turn": saves,
    }
    limits = [
        {"limit": name, "used": used[name], "value": spec["value"], "enforce": spec["enforce"]}
        for name, spec in policy.limits.items()
    ]
    pending = [
        {"call": call_id, "role": role, "tool": tool, "reserved_tokens": reserved, "expires_in_s": round(exp - now, 1)}
        for call_id, role, tool, reserved, exp in ledger.pending(session, turn, now)
    ]
    triggers = [
        {"trigger": name, "scope": scope, "uses_left": uses, "armed_in_turn": armed_seq, "usable_now": usable}
        for name, scope, uses, armed_seq, _turn, _ts in ledger.triggers(session)
        for usable in [name in ledger.armed(session, seq, turn)]
    ]
    return {
        "session": session,
        "turn": turn,
        "turn_number": seq,
        "memory_need": ledger.memory_need(session, turn),
        "unit": policy.unit,
        "limits": limits,
        "pending": pending,
        "triggers": triggers,
        "last_seen": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seen)),
    }


def window_status(ledger: Ledger, policy: CompiledPolicy, user: str, now: float) -> dict[str, Any]:
    """`user`'s window (every session and harness of theirs on this ledger) against each of its limits."""
    from governor.engine.window import LIMITS, read, user_key

    spec = policy.data["window"]
    used = read(ledger, user_key(user), policy.data, now)
    frees = used["frees_at"]
    return {
        "user": user,
        "minutes": spec["minutes"],
        "limits": [
            {"limit": name, "used": used[name], "value": spec[name]["value"], "enforce": spec[name]["enforce"]}
            for name in LIMITS
        ],
        "oldest_leaves_in_s": None if frees is None else max(0, round(frees - now)),
    }


@click.command("status")
@click.option("--session", "session_id", help="A session id (default: the most recently active session).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def status(session_id: str | None, fmt: str) -> int:
    """The current turn's usage against each limit, pending reservations and armed triggers, and
    your window (every session and harness of yours on this ledger) against its limits."""
    from governor.engine.window import user_key
    from governor.runtime.runner import user_name

    ledger, policy = _open()
    user = user_name(os.getuid())
    try:
        latest = key(session_id) if session_id is not None else ledger.latest_session()
        if latest is None:
            click.echo("no sessions recorded yet", err=True)
            return 1
        with ledger.read(latest, user_key(user)):
            report = session_status(ledger, policy, latest, time.time())
            report["window"] = window_status(ledger, policy, user, time.time())
    finally:
        ledger.close()
    if fmt == "json":
        click.echo(json.dumps(report, indent=2))
        return 0
    click.echo(f"session {report['session']}  turn {report['turn_number']} ({report['turn'] or 'before any prompt'})")
    if report["memory_need"]:
        click.echo(f"memory_need: {report['memory_need']}")
    for item in report["limits"]:
        unit = f" {report['unit']}" if item["limit"] == "max_memory_tokens_injected" else ""
        click.echo(f"  {item['limit']:28} {item['used']:>6} / {item['value']}{unit}  ({item['enforce']})")
    for item in report["pending"]:
        click.echo(f"  pending {item['role']} {item['tool']}: {item['reserved_tokens']} tokens held")
    for item in report["triggers"]:
        state = "usable now" if item["usable_now"] else "not usable now"
        click.echo(f"  trigger {item['trigger']} ({item['scope']}, {item['uses_left']} use(s) left): {state}")
    window = report["window"]
    click.echo(f"window ({window['minutes']} min, every session of {window['user']}):")
    for item in window["limits"]:
        unit = f" {report['unit']}" if item["limit"] == "max_memory_tokens_injected" else ""
        click.echo(f"  {item['limit']:28} {item['used']:>6} / {item['value']}{unit}  ({item['enforce']})")
    if window["oldest_leaves_in_s"] is not None:
        click.echo(f"  the oldest of it leaves the window in {window['oldest_leaves_in_s'] // 60 + 1} min")
    return 0


@click.command("gc")
@click.option("--days", type=float, help="Keep sessions seen within this many days (default: the policy's).")
@click.option("--vacuum/--no-vacuum", default=True, help="Give the freed space back to the disk.")
def gc(days: float | None, vacuum: bool) -> int:
    """Prune sessions and audit records older than the retention period."""
    ledger, policy = _open()
    try:
        keep = days if days is not None else policy.data["ledger"]["retention_days"]
        removed = ledger.gc(keep, time.time())
        prune(state_dir(os.environ), time.time() - keep * 86400)
        if vacuum:
            ledger.vacuum()
    finally:
        ledger.close()
    where = ledger.where()
    if not os.path.isfile(where):  # Redis: its keys expire by themselves too
        click.echo(f"removed {removed} session(s) older than {keep:g} day(s) from {where}")
        return 0
    size = os.path.getsize(where)  # after close: the last checkpoint is what shrinks the file
    click.echo(f"removed {removed} session(s) older than {keep:g} day(s); ledger is {size} bytes")
    return 0
