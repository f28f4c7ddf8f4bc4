"""The per-user window: the memory one user's sessions take in a rolling period, whatever started them.

Per-turn limits are kept per (session, turn). A session the governor can tie to the session it
was started under is charged to that session's turn (governor.engine.nesting); the window is the
backstop for one it cannot tie (a run detached and stripped of its environment), and a limit a
team can set on its own ("memory tokens per developer per hour"), as API gateways rate-limit by
key. The policy's `window` (`minutes`; `max_search_calls`, `max_full_fetches`,
`max_memory_tokens_injected`, each with its `enforce`) is counted across every session and
harness of one user on this ledger (the SQLite file of one machine; the Redis of every host),
keyed by `World.user` (the runtime's name for the caller's OS user, never what an event says).

A call past it is refused like a per-turn limit: the model is told why (and that sessions it
starts count in the same window), the user once per session. A result is trimmed to what the
window has left when that is less than what the turn has left.

Counts are kept in buckets of 1/60 of the window (at least a minute), in rows of the user's own
(`window_use`, whose `session` column holds the window's key), so the Redis store leases the
user's window with the session and the check and the charge are one atomic step across hosts,
as a turn's are. A bucket counts while any of it lies inside the window: a call is counted for
at most one bucket longer than the window, never shorter.

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Decision
from governor.engine.ledger import key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.engine.case import Case

LIMITS = ("max_search_calls", "max_full_fetches", "max_memory_tokens_injected")
COUNTED = ("search", "timeline", "fetch", "context", "other")  # roles whose results reach the model
_WHAT = {"max_search_calls": "searches", "max_full_fetches": "full fetches", "max_memory_tokens_injected": "tokens"}


def enabled(policy_data: dict[str, Any]) -> bool:
    spec = policy_data.get("window")
    return isinstance(spec, dict) and any(spec[name]["enforce"] != "off" for name in LIMITS)


def user_key(user: str) -> str:
    """The ledger key of `user`'s window (apart from every session key: those start `s:` or `h:`)."""
    return "w" + key(user.replace("@", ":"))


def key_for(case: Case) -> str:
    """The window this event is counted in ('' none): a governed call whose result reaches the
    model, under a policy whose window is on, for a known user."""
    event = case.event
    if event.kind not in (ev.PRE_TOOL, ev.POST_TOOL) or not case.world.user or not enabled(case.policy.data):
        return ""
    spec = case.spec()
    return user_key(case.world.user) if spec is not None and spec["role"] in COUNTED else ""


def span(policy_data: dict[str, Any]) -> tuple[float, int]:
    """(the window's length, one bucket's), in seconds."""
    length = float(policy_data["window"]["minutes"]) * 60
    return length, max(60, int(length) // 60)


def used(case: Case) -> dict[str, Any]:
    """What the window holds now, read once per decision (inside the lock)."""
    if "window_used" not in case.prepared:
        case.prepared["window_used"] = read(case.ledger, case.window, case.policy.data, case.world.now)
    found: dict[str, Any] = case.prepared["window_used"]
    return found


def read(ledger: Any, window: str, policy_data: dict[str, Any], now: float) -> dict[str, Any]:
    """The window's counts against each limit, and when its oldest bucket leaves it (None: empty)."""
    length, width = span(policy_data)
    searches, fetches, tokens, oldest = ledger.window_used(window, now - length - width)
    frees = None if oldest is None else oldest + width + length
    return {"max_search_calls": searches, "max_full_fetches": fetches, "max_memory_tokens_injected": tokens,
            "frees_at": frees}  # fmt: skip


def check(case: Case, role: str) -> tuple[Decision | None, str]:
    """Before a governed call: (its refusal, or None; a warning for the user, or ''), by the window."""
    if not case.window:
        return None, ""
    spec = case.policy.data["window"]
    counts = used(case)
    names = ["max_memory_tokens_injected"]
    if role == "search":
        names.insert(0, "max_search_calls")
    elif role == "fetch":
        names.insert(0, "max_full_fetches")
    for name in names:
        limit, enforce = spec[name]["value"], spec[name]["enforce"]
        if enforce == "off" or counts[name] < limit:
            continue
        said = _said(case, name, counts)
        if enforce == "warn":
            return None, f"memory-governor: {said} (window.{name}={limit}, warn only)."
        if case.policy.mode == "enforce":  # monitor mode tells the user what enforce would have done
            case.notices.append(
                f"memory-governor: {said}; memory calls in every session of yours are refused until it frees up "
                "(`memory-governor status` shows it)."
            )
        return Decision(
            ev.DENY,
            f"window:{name}",
            f"memory-governor: {said} (window.{name}={limit}). Sessions you start count in the same window. Work "
            f"with what you have{_frees(case, counts)}; do not retry.",
        ), ""
    return None, ""


def charge(case: Case, searches: int = 0, fetches: int = 0, tokens: int = 0) -> None:
    """Count granted calls (before they run) or a result's delivered tokens (after) in the window."""
    if not case.window or not (searches or fetches or tokens):
        return
    length, width = span(case.policy.data)
    now = case.world.now
    bucket = int(now // width) * width
    case.ledger.charge_window(case.window, bucket, searches, fetches, tokens, now - length - width)
    counts = case.prepared.get("window_used")
    if counts is not None:
        counts["max_search_calls"] += searches
        counts["max_full_fetches"] += fetches
        counts["max_memory_tokens_injected"] += tokens


def tokens_left(case: Case) -> int | None:
    """The tokens the window has left, where it caps a result (enforce: block); else None."""
    if not case.window:
        return None
    spec = case.policy.data["window"]["max_memory_tokens_injected"]
    if spec["enforce"] != "block":
        return None
    return max(0, int(spec["value"]) - int(used(case)["max_memory_tokens_injected"]))


def note(case: Case, held: int, total: int, left: int) -> str:
    """What the line under a result trimmed to the window's remainder says (post_tool writes the line)."""
    spec = case.policy.data["window"]
    return (
        f"{held} of {total} entries held back: your memory window "
        f"({spec['max_memory_tokens_injected']['value']} {case.policy.unit} tokens per {spec['minutes']} minutes, "
        f"across every session of yours) has {left} left; work with what you have"
    )


def _said(case: Case, name: str, counts: dict[str, Any]) -> str:
    spec = case.policy.data["window"]
    unit = f" {case.policy.unit}" if name == "max_memory_tokens_injected" else ""
    return (
        f"your memory window is spent: {counts[name]}{unit} {_WHAT[name]} of {spec[name]['value']} in the last "
        f"{spec['minutes']} minutes, across every session and harness of yours"
    )


def _frees(case: Case, counts: dict[str, Any]) -> str:
    frees = counts.get("frees_at")
    if frees is None:
        return ""
    minutes = max(1, round((frees - case.world.now) / 60))
    return f"; the oldest of it leaves the window in about {minutes} minute(s)"
