"""decide(event, policy, ledger, world) -> Decision: every rule memory-governor enforces.

The engine knows no harness. Each event is decided inside one ledger write transaction, so
what it counts, compares and reserves is one atomic step across concurrent hook processes.

- prompt: starts a turn, classifies its memory need, arms explicit recall, advises the agent;
  a machine-made prompt (a background task reporting back) or a nested session's (one started
  under a governed session: governor.engine.nesting) does none of that and joins a turn.
- session_start: compaction and resume arm the triggers that unlock mem_context.
- pre_tool: the ladder (L1 clamp and cap, L2/L3 only for a surfaced id, L3 cap), mem_context
  triggers, subagent tiers, save discipline, and the token budget's pre-check; reserves.
- post_tool: counts the real result, records the ids it surfaced, trims it to the turn's
  token budget (whole entries), commits.
- tool_failed: releases the reservation.

In monitor mode the same decisions are recorded, and the user is told what enforce mode
would have done, but nothing is denied, rewritten or replaced.

The rules live in one module per kind of event: governor.engine.prompt (prompts and sessions),
governor.engine.pre_tool (before a tool) and governor.engine.post_tool (after it); this module
is the one entry, and does the slow work of every event before the write lock is taken.

Hot path: standard library only; the token counter and classifier load only when needed.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.case import Case, DecisionTimeout, PartsUncounted, World
from governor.engine.events import Decision, Event
from governor.engine.ledger import LedgerLeaseLost
from governor.engine.nesting import place, record
from governor.engine.window import key_for as window_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.engine.ledger import Ledger
    from governor.engine.rules import CompiledPolicy

__all__ = ["DecisionTimeout", "World", "decide"]


def decide(event: Event, policy: CompiledPolicy, ledger: Ledger, world: World) -> Decision:
    where = _HANDLERS.get(event.kind)
    if where is None:
        return Decision()
    handler = getattr(where[0](), where[1])  # only the module this event needs is imported
    case = Case(event, policy, ledger, world)
    place(case)  # the session it counts in: a subagent's dispatcher's, a nested session's parent's
    _prepare(case)
    case.window = window_key(case)
    tried: set[type[Exception]] = set()
    while True:
        try:
            decision = _locked(case, handler)
            break
        # Decided again, once for each, from what the ledger holds then: a trim needs each entry's cost
        # (counted outside the lock); a shared ledger's lease ran out while this decision was slow (a
        # loaded host) and another decision took the session, so nothing of this one was written.
        except (PartsUncounted, LedgerLeaseLost) as err:
            if type(err) in tried:
                raise
            tried.add(type(err))
            world.check()
            case = _again(case)
            if isinstance(err, PartsUncounted):
                _count_parts(case)
    if policy.mode == "monitor":
        decision = _as_monitor(decision)
    decision.notices = list(dict.fromkeys(case.notices))
    return decision


# What a decision's first try read or set inside its transaction.
_READ_IN_LOCK = ("need", "saved_by", "window_used", "window_binds")


def _again(case: Case) -> Case:
    """A fresh case for deciding `case`'s event again: placed once, and its audit row times the
    whole decision; what the first try read or set inside its transaction is left behind."""
    again = Case(case.event, case.policy, case.ledger, case.world)
    again.session, again.started, again.agent = case.session, case.started, case.agent
    again.nested, again.window = case.nested, case.window
    again.prepared = {k: v for k, v in case.prepared.items() if k not in _READ_IN_LOCK}
    return again


def _locked(case: Case, handler: Any) -> Decision:
    with case.ledger.write(case.session, *((case.window,) if case.window else ())):
        if case.event.agent_id:
            case.ledger.remember_agent(case.session, case.agent[0])
        record(case)
        decision: Decision = handler(case)
    return decision


def _prepare(case: Case) -> None:
    """The slow parts of a decision, done before the write lock is taken: loading the token
    counter, counting and parsing a result, looking inside a save or a dispatch, classifying a
    prompt. Each is bounded in its input (see governor.engine.screening and tokens); inside the
    transaction only reads, arithmetic, small renders and writes remain, so concurrent hooks
    wait microseconds, not seconds, whatever one of them was sent."""
    event, policy = case.event, case.policy
    case.prepared["detail"] = case.detail()
    if event.kind == ev.PROMPT and (event.machine_made or case.nested):
        return  # nothing of its text is used
    if event.kind == ev.PROMPT:
        from governor.engine import patterns
        from governor.engine.recall import judge, sources

        needs, phrases = policy.data["memory_needs"], policy.recall_phrases
        patterns.use(policy.forms, policy.digest, lambda: sources(needs, phrases), policy.shared_forms)
        case.prepared["verdict"], case.prepared["recall"] = judge(event.prompt or "", needs, phrases,
                                                                  policy.pattern_words)  # fmt: skip
        case.world.check()
        return
    spec = case.spec()
    if event.kind == ev.POST_TOOL and spec is not None and spec["role"] not in ("save", "summary"):
        _prepare_result(case, spec)
    elif event.kind == ev.PRE_TOOL and spec is not None and spec["role"] in ("save", "summary"):
        from governor.engine.screening import save_findings

        topic_param = spec.get("topic_key_param")
        topic = event.tool_input.get(topic_param) if topic_param else None
        namespaces = policy.blob["index"]["topic_namespaces"]
        case.prepared["findings"] = save_findings(event.tool_input, policy.data["save"], topic, namespaces)
    elif event.kind == ev.PRE_TOOL and spec is None and policy.routes_for(event.tool_name):
        from governor.engine.routes import route_of

        case.prepared["route"] = route_of(event, policy, case.ledger.state_dir, case.ledger.where(), case.world.env)
    if event.kind == ev.PRE_TOOL and spec is None and _is_dispatch(case):
        from governor.engine.briefing import card_blocks
        from governor.engine.screening import line_digests, raw_observation
        from governor.engine.tokens import counter

        brief = event.prompt if event.prompt is not None else event.tool_input.get("prompt")
        text = brief if isinstance(brief, str) else ""
        tally = counter(policy.unit)
        cap = policy.data["briefing"]["max_tokens"]["value"] + 1
        case.prepared["card_tokens"] = sum(tally.count_upto(block, cap) for block in card_blocks(text))
        case.world.check()
        case.prepared["raw_pasted"] = raw_observation(text)
        case.prepared["digests"] = line_digests(text)
    case.world.check()


COUNT_CAP = 16  # a result is counted exactly up to this many times the turn's budget; beyond, a lower bound


def _prepare_result(case: Case, spec: dict[str, Any]) -> None:
    """Parse a result into entries and count it, only as far as the budget needs. Its entries
    and frame are counted here too when a trim is likely (more entries than a search may
    return, a result the harness keeps elsewhere, or more than the largest budget); otherwise
    a trim that turns out to be needed inside the lock asks for them (Case.parts)."""
    from governor.engine import results
    from governor.engine.budgets import largest_budget
    from governor.engine.delivery import enabled
    from governor.engine.tokens import counter

    tally = counter(case.policy.unit)
    text = case.event.tool_result or ""
    budget = largest_budget(case.policy.data)
    parsed = results.parse(text, spec["role"], spec.get("format", "auto"))
    search = spec["role"] == "search"
    if search and case.policy.ladder["L1"].get("snippets_only") and case.event.replace_in_place:
        case.prepared["snipped"] = results.snip(parsed)
    case.world.check()
    if enabled(case.policy.data):
        case.prepared["prints"] = results.fingerprints(parsed, case.event.server or "")
    case.prepared["tally"] = tally
    case.prepared["parsed"] = parsed
    case.prepared["topics"] = results.topic_keys(text)
    cap = max(COUNT_CAP * budget, 65_536)
    case.prepared["total"] = tally.count_upto(text, cap)
    if case.prepared.get("snipped"):  # what passing it whole costs: its snippets
        case.prepared["whole"] = tally.count_upto(results.render(parsed, set(range(len(parsed.entries))), ""), cap)
    case.world.check()
    max_entries = case.policy.ladder["L1"].get("max_limit") if search else None
    too_many = max_entries is not None and len(parsed.entries) > max_entries
    shaped = case.prepared.get("snipped")  # replaced whatever else happens: its parts are needed
    if shaped or too_many or case.event.result_elsewhere or case.prepared["total"] > budget:
        _count_parts(case)


def _count_parts(case: Case) -> None:
    """What each entry of the prepared result costs, and its frame, each only as far as the
    largest budget needs (outside the lock: Case.parts)."""
    from governor.engine import results
    from governor.engine.budgets import largest_budget

    tally, parsed = case.prepared["tally"], case.prepared["parsed"]
    budget = largest_budget(case.policy.data)
    case.prepared["costs"] = [tally.count_upto(entry.text, budget + 1) for entry in parsed.entries]
    case.prepared["frame"] = tally.count_upto(results.render(parsed, set(), ""), budget + 1)
    case.world.check()


def _as_monitor(decision: Decision) -> Decision:
    """Monitor mode: the decision is recorded; the user hears what enforce would have done."""
    verbs = {ev.DENY: "denied", ev.REWRITE: "clamped", ev.REPLACE: "trimmed", ev.CONTEXT: "advised"}
    verb = verbs.get(decision.kind)
    if verb is None:
        return decision
    what = decision.reason or decision.context or decision.code
    out = Decision(code=decision.code)
    return out.tell_user(f"memory-governor (monitor): enforce mode would have {verb} this: {what}")


def _prompts() -> Any:
    from governor.engine import prompt

    return prompt


def _before() -> Any:
    from governor.engine import pre_tool

    return pre_tool


def _after() -> Any:
    from governor.engine import post_tool

    return post_tool


_HANDLERS = {  # event kind -> (its module, imported when needed; the function deciding it)
    ev.PROMPT: (_prompts, "prompt"),
    ev.SESSION_START: (_prompts, "session_start"),
    ev.PRE_TOOL: (_before, "pre_tool"),
    ev.POST_TOOL: (_after, "post_tool"),
    ev.TOOL_FAILED: (_after, "tool_failed"),
    ev.PRE_COMPACT: (_prompts, "observe"),
    ev.SUBAGENT_START: (_prompts, "observe"),
    ev.SUBAGENT_STOP: (_prompts, "observe"),
    ev.STOP: (_prompts, "observe"),
}


def _is_dispatch(case: Case) -> bool:
    from governor.engine.pre_tool import is_dispatch

    return is_dispatch(case)
