"""Delivered-once: no memory entry is paid for twice in one conversation context.

A conversation context is what one model holds: the main agent's, or one subagent's (its
`agent_id`). The ledger remembers, per context, the fingerprints of the memory entries
(`governor.engine.results.fingerprints`: server, id, a digest of the text) delivered to it
whole, and when. When a later result repeats one of them, the entry is replaced by one short
line naming it and when it was shown (`results.point`), and only that line counts against the
turn's budget. A full fetch (L3) of an id the context already holds whole is refused before it
runs with the same pointer as its reason only while the entry is known unchanged: no save since
then, and no search since then showing it with a preview this context had not seen (another
process may have changed it). Otherwise the call runs and its result is compared after it,
like any other.

What the model holds is never guessed upwards: only an entry delivered whole is remembered (a
trimmed-away or truncated entry is not, nor one shown as a pointer; in monitor mode the model
gets every result whole, so all of it is), a pointer needs the same fingerprint in the same
context, and
where the harness cannot say which agent made a call (the engine guessed a running subagent)
nothing is remembered or replaced. What empties a context resets it: compaction (its PreCompact
and the SessionStart after it), `/clear` and a new session (every context of the session). A
resume keeps it: the harness resumes the same transcript, so the model holds what it held; a
resume under a new session id (a fork) starts empty, which only ever delivers more whole.

Hot path: standard library only.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from governor.engine.ledger import Ledger
    from governor.engine.results import Parsed

# SessionStart sources that empty every context of the session; compaction empties the main one.
RESET_ALL = ("clear", "startup")
RESET_MAIN = ("compact",)


def enabled(policy_data: dict[str, Any]) -> bool:
    delivery = policy_data.get("delivery")
    return isinstance(delivery, dict) and delivery.get("dedupe") == "on"


GUESSED = "s:dispatch:"  # the ledger key of an agent the engine guessed (decide._attribute)


def context_of(case: Any, call_id: str | None = None) -> str | None:
    """The conversation context this event's call is in ('' the main agent, else the agent's key),
    or None where it cannot be known: the harness sees no resets or agents, or the engine only
    guessed which agent made the call."""
    event = case.event
    if event.context_unseen or not enabled(case.policy.data):
        return None
    agent = str(case.agent[0])
    if not event.agent_unknown:
        return agent
    if agent:
        return None if agent.startswith(GUESSED) else agent
    made_by = case.ledger.agent_of(case.session, call_id) if call_id else None
    if made_by is not None:
        return None if made_by.startswith(GUESSED) else made_by
    return None if case.ledger.running_agents(case.session, case.turn, case.world.now) else ""


def reset(case: Any) -> None:
    """What empties a context: compaction (PreCompact, SessionStart compact), /clear and a new
    session (all of a session's contexts; a subagent's own start, its context only)."""
    event, ledger = case.event, case.ledger
    agent = case.agent[0]
    if event.kind == "session_start":
        if event.source in RESET_ALL:
            ledger.forget_delivered(case.session, agent or None)
        elif event.source in RESET_MAIN:
            ledger.forget_delivered(case.session, agent)
    elif event.kind == "pre_compact" or (event.kind == "subagent_start" and agent):
        ledger.forget_delivered(case.session, agent)


def fetch_pointer(case: Any, spec: dict[str, Any]) -> str | None:
    """Before a full fetch: the pointer it is refused with when this context already holds the
    body whole (one id asked, nothing else that could change what comes back)."""
    id_param = spec.get("id_param")
    inputs = case.event.tool_input
    if not id_param or set(inputs) - {id_param, "project"}:
        return None
    asked = inputs.get(id_param)
    if isinstance(asked, float) and asked == int(asked):
        asked = int(asked)
    if isinstance(asked, bool) or not isinstance(asked, (int, str)):
        return None
    context = context_of(case)
    if context is None:
        return None
    return fetch_held(case.ledger, case.session, context, case.event.server or "", str(asked).lstrip("#"))


def shown_at(seq: int, ts: float) -> str:
    """When an entry was shown, as the model is told it."""
    return f"at {time.strftime('%H:%M', time.gmtime(ts))} UTC, turn {seq} of this session"


def repeats(ledger: Ledger, session: str, context: str, prints: list[str]) -> list[int]:
    """The entries (indexes) this context already holds whole."""
    held = ledger.delivered_among(session, context, sorted(set(prints)))
    return [index for index, mark in enumerate(prints) if mark in held]


def replace_repeats(ledger: Ledger, session: str, context: str, parsed: Parsed, prints: list[str],
                    before: Callable[[], object] | None = None) -> list[int]:  # fmt: skip
    """Replace the entries this context already holds whole by their pointer lines; their indexes.
    `before`: called once, before the first entry is replaced, when one will be."""
    from governor.engine.results import point

    held = ledger.delivered_among(session, context, sorted(set(prints)))
    if held and before is not None:
        before()
    return [index for index, mark in enumerate(prints) if mark in held and point(parsed, index, shown_at(*held[mark]))]


def shown_hits(ledger: Ledger, session: str, context: str, server: str) -> int:
    """How many search hits of `server` this context holds whole: how many a search may find again
    (a search asks the server for that many more, so its slots go to entries not yet delivered)."""
    return ledger.delivered_count(session, context, server, "search")


PREVIEW = "preview"  # the role of a row saying only that a search showed this text of an entry (cut or not)


def remember(ledger: Ledger, session: str, context: str, parsed: Parsed, prints: list[str], whole: set[int],
             server: str, role: str, seq: int, now: float, shown: set[int] | None = None) -> None:  # fmt: skip
    """Entries `whole` reached the model whole: later repeats in this context become pointers.
    Entries `shown` in part (a search preview cut to the budget) are remembered as seen only, under
    a fingerprint no result can repeat: a full fetch after a new preview runs (fetch_held)."""
    rows = []
    for index in sorted(whole):
        idents = parsed.entries[index].idents
        rows.append((prints[index], server, idents[0] if idents else "", role))
    for index in sorted((shown or set()) - whole):
        idents = parsed.entries[index].idents
        if idents:
            rows.append((f"seen:{prints[index]}", server, idents[0], PREVIEW))
    ledger.remember_delivered(session, context, rows, seq, now)


def fetch_held(ledger: Ledger, session: str, context: str, server: str, ident: str) -> str | None:
    """The pointer a full fetch of `ident` gets when this context already holds its whole body and
    the entry is known unchanged since: no save in this session, and no search preview of it that
    this context had not seen before (a repeated preview is a pointer and remembers nothing new;
    a changed one is remembered when shown). Else None: the call runs, and its result is compared."""
    held = ledger.delivered_ident(session, context, server, ident, "fetch")
    if held is None or ledger.saved_since(session, held[1]):
        return None
    for role in ("search", PREVIEW):
        shown = ledger.delivered_ident(session, context, server, ident, role)
        if shown is not None and shown[1] > held[1]:
            return None
    return (
        f"memory-governor: #{ident} was already delivered in full {shown_at(*held)}; it is above in this conversation."
    )
