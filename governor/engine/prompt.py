"""Deciding a prompt and the session's own events: a turn starts, its memory need is
classified and advised, explicit recall arms mem_context; a session start (compaction, resume)
arms the other triggers; compaction and subagent events are recorded (and empty a context).

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.case import GOVERNOR_ROLE
from governor.engine.events import Decision
from governor.engine.ledger import key
from governor.engine.rules import FIXED_LINES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.engine.case import Case


def prompt(case: Case) -> Decision:
    if case.event.machine_made or case.nested:
        return _machine_prompt(case)
    case.enter_turn(new=True)
    had = case.ledger.memory_need(case.session, case.turn) if case.event.turn_id else None
    if had is not None:  # the turn's prompt again: the other observer of it, or one a process of the user's sent
        return _again(case, had)
    policy = case.policy
    verdict = case.prepared["verdict"]
    case.ledger.set_memory_need(case.session, case.turn, verdict.need)
    case.prepared["need"] = verdict.need  # what this decision's limits and audit row read
    lines: list[str] = []
    names: list[str] = []
    recall = policy.data["mem_context"]["unlocked_by"].get("explicit_user_recall")
    if recall and case.prepared["recall"].unlocks and _may_arm(case):
        case.ledger.arm(case.session, "explicit_user_recall", recall["scope"], recall["uses"], case.seq, case.turn,
                        case.world.now)  # fmt: skip
        lines.append(FIXED_LINES["recall_armed"])
        names.append("static:recall_armed")
    from governor.engine.budgets import advice_line

    advice = advice_line(policy.data, verdict.need)
    if advice:
        lines.append(advice)
        names.append(f"advice:{verdict.need}")
    decision = Decision(ev.CONTEXT if lines else ev.NONE, code=f"memory_need:{verdict.need}", context="\n".join(lines))
    tokens = case.add_context(names) if lines else 0
    case.record(decision, GOVERNOR_ROLE, delivered=tokens)
    return decision


def _again(case: Case, had: str) -> Decision:
    """A prompt under the id of a turn that has had one. Which of them the harness sent cannot be
    told (a harness whose ids can be guessed lets a process of the user's send the next turn's
    first), so the turn gets the least any of them asks for: its need only narrows (to a class
    with smaller limits), and the explicit recall armed in it stays only while each asks for it."""
    if case.event.twin:
        return Decision(code="repeat")  # the other observer of this prompt started its turn
    from governor.engine.budgets import narrower

    need = case.prepared["verdict"].need
    if need != had and narrower(case.policy.data, need, had):
        case.ledger.set_memory_need(case.session, case.turn, need)
    if not case.prepared["recall"].unlocks:
        armed = [row for row in case.ledger.triggers(case.session) if row[0] == "explicit_user_recall"]
        if armed and armed[0][4] == case.turn:
            case.ledger.disarm(case.session, "explicit_user_recall")
    decision = Decision(code="repeat")
    case.record(decision, GOVERNOR_ROLE)
    return decision


def _machine_prompt(case: Case) -> Decision:
    """A prompt the harness wrote (a background task reporting back), or a nested session's (the
    model wrote it: governor.engine.nesting), is no user request: no advice, nothing armed from
    its text, and no budget of its own. Its turn joins the turn that launched the task, else the
    session's current turn (a nested session's: the turn fixed at its first event, Case.enter_turn),
    so what it spends comes out of that turn's remainder: launching work that reports back, or
    starting another agent, never opens a fresh budget."""
    event, ledger = case.event, case.ledger
    if case.nested:
        case.enter_turn()
        decision = Decision(code="nested_prompt")
        case.record(decision)
        return decision
    launched = ledger.launched_in(case.session, key(event.origin_call_id)) if event.origin_call_id else None
    current, _ = ledger.touch_session(case.session, case.world.now)
    joined = launched or current
    if event.turn_id and joined:
        ledger.join_turn(case.session, key(event.turn_id), joined)
    case.enter_turn()
    decision = Decision(code="machine_prompt:launching_turn" if launched else "machine_prompt:current_turn")
    case.record(decision)
    return decision


def _may_arm(case: Case) -> bool:
    if case.nested:  # the model started it: nothing it does unlocks mem_context (governor.engine.nesting)
        return False
    return not case.event.agent_id or bool(case.policy.data["mem_context"]["subagents_may_arm"])


_SOURCE_TRIGGERS = {"compact": "post_compact", "resume": "session_resume"}


def session_start(case: Case) -> Decision:
    if case.nested:  # another agent started under a governed session: it arms nothing, empties its own context
        return observe(case)
    info = case.ledger.session_info(case.session)
    case.enter_turn()
    from governor.engine.delivery import reset

    reset(case)
    policy = case.policy
    triggers = policy.data["mem_context"]["unlocked_by"]
    by_dispatch = triggers.get("session_resume", {}).get("armed_by") == "dispatch"
    if by_dispatch:
        case.ledger.disarm(case.session, "session_resume")  # the first dispatch after this start arms it
    trigger_name = _SOURCE_TRIGGERS.get(case.event.source or "")
    trigger = triggers.get(trigger_name or "")
    if trigger_name == "session_resume" and by_dispatch:
        trigger = None
    idle = trigger.get("min_idle_minutes", 0) if trigger else 0
    if trigger and idle and (info is None or case.world.now - info[2] < idle * 60):
        # A session the ledger has never seen (a fork gets a new id) had no idle time it can show.
        why = "unknown_session" if info is None else f"idle_under_{idle}m"
        decision = Decision(code=f"not_armed:{trigger_name}:{why}")
        case.record(decision)
        return decision
    if case.event.source in ("startup", None):
        case.ledger.prune(policy.data["ledger"]["retention_days"], case.world.now, max_sessions=20)
    if not trigger_name or not trigger or not _may_arm(case):
        decision = Decision(code=f"session_start:{case.event.source or 'unknown'}")
        case.record(decision)
        return decision
    assert trigger_name is not None
    missing = _missing_topic(case, trigger)
    if missing:
        decision = Decision(code=f"not_armed:{trigger_name}:no_topic:{missing}")
        case.record(decision)
        return decision
    case.ledger.arm(case.session, trigger_name, trigger["scope"], trigger["uses"], case.seq, case.turn, case.world.now)
    advice = policy.data["memory_needs"]["classes"].get("continuation", {}).get("advice", "")
    decision = Decision(ev.CONTEXT if advice else ev.NONE, code=f"armed:{trigger_name}", context=advice)
    tokens = case.add_context(["advice:continuation"]) if advice else 0
    case.record(decision, GOVERNOR_ROLE, delivered=tokens)
    return decision


def _missing_topic(case: Case, trigger: dict[str, Any]) -> str | None:
    """The prefix a trigger requires that no topic the governor has seen is under, or None."""
    prefix = trigger.get("requires_topic")
    return prefix if prefix and case.ledger.topic_under(prefix) is None else None


def arm_on_dispatch(case: Case) -> str | None:
    """The seed's session resume: the session's first subagent dispatch (since it started) arms
    session_resume when a saved wave state exists (`armed_by: dispatch`, `requires_topic`).
    Returns the code recorded with the dispatch, or None when the policy does not arm so."""
    trigger = case.policy.data["mem_context"]["unlocked_by"].get("session_resume")
    if not trigger or trigger.get("armed_by") != "dispatch" or not _may_arm(case):
        return None
    if any(row[0] == "session_resume" for row in case.ledger.triggers(case.session)):
        return None  # not the first dispatch
    missing = _missing_topic(case, {"requires_topic": trigger.get("requires_topic") or "state/wave/"})
    # A first dispatch with no saved wave state is still the first: later ones do not arm either.
    uses = 0 if missing else trigger["uses"]
    case.ledger.arm(case.session, "session_resume", trigger["scope"], uses, case.seq, case.turn, case.world.now)
    return f"not_armed:session_resume:no_topic:{missing}" if missing else "armed:session_resume"


def observe(case: Case) -> Decision:
    """Events recorded for the audit trail only (compaction, subagent start/stop, stop); compaction
    and a subagent's start also empty a conversation context (governor.engine.delivery)."""
    case.enter_turn()
    if case.event.kind in (ev.PRE_COMPACT, ev.SUBAGENT_START, ev.SESSION_START):
        from governor.engine.delivery import reset

        reset(case)
    decision = Decision(code=f"nested_{case.event.kind}" if case.nested else case.event.kind)
    case.record(decision)
    return decision
