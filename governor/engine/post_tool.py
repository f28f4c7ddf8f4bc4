"""Deciding a governed call after it ran: count the real result in the policy's unit, record
the ids it surfaced, replace entries this context already holds by pointers (delivered-once),
trim it to the turn's token budget, or what the user's window has left (whole entries), commit;
a failed call releases its reservation; a dispatch's end closes its subagent's window.

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Decision

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.engine.case import Case


def post_tool(case: Case) -> Decision:
    spec = case.spec()
    if spec is None:
        return _agent_ended(case, True) if case.event.dispatches is not None else Decision()
    role = spec["role"]
    case.enter_turn()
    ledger, event, now = case.ledger, case.event, case.world.now
    call_id = case.known_call_id()
    prior = ledger.call(case.session, call_id) if call_id else None
    if event.twin and prior is not None and prior[0] == "committed":
        return Decision(code="repeat")  # the other observer of this result counted it
    if role in ("save", "summary"):
        topic_param = spec.get("topic_key_param")
        topic = event.tool_input.get(topic_param) if topic_param else None
        if isinstance(topic, str) and 0 < len(topic) <= 200 and not any(c.isspace() for c in topic):
            ledger.remember_topics([topic], now)
        if prior is None:
            ledger.add_committed(case.session, case.turn, call_id or f"anon:{now}", role, event.tool or "", case.agent,
                                 0, now)  # fmt: skip
        else:
            ledger.commit(case.session, call_id or "", 0, now)
        decision = Decision(code="saved")
        case.record(decision, role, call_id)
        return decision
    return _count_and_trim(case, spec, call_id, prior)


def _agent_ended(case: Case, finished: bool) -> Decision:
    """A dispatch tool's after (or failure) event: the subagent it started is no longer running."""
    case.enter_turn()
    call_id = case.known_call_id()
    if call_id:
        if finished:
            case.ledger.commit(case.session, call_id, 0, case.world.now)
        else:
            case.ledger.release(case.session, call_id, case.world.now)
    decision = Decision(code="subagent_ended")
    case.record(decision, "dispatch", call_id)
    return decision


def _count_and_trim(case: Case, spec: dict[str, Any], call_id: str | None, prior: Any) -> Decision:
    from governor.engine import results
    from governor.engine.packer import select

    role, event, ledger, now = spec["role"], case.event, case.ledger, case.world.now
    tally = case.prepared["tally"]
    text = event.tool_result or ""
    parsed = case.prepared["parsed"]
    total = case.prepared["total"]
    usage = ledger.usage(case.session, case.turn, now)
    own = 0  # what this call already holds in `usage`: its committed count, or its live reservation
    if prior is not None and prior[2] == case.turn:
        state, reserved, tokens, expires = prior[0], prior[3], prior[4], prior[5]
        own = tokens if state == "committed" else reserved if state == "pending" and expires > now else 0
    budget, enforce = case.limit("max_memory_tokens_injected")
    left = max(0, budget - (usage["tokens"] - own))
    from governor.engine import window

    window_left = window.tokens_left(case)
    if window_left is not None and (enforce != "block" or window_left < left):  # the window holds less
        left, enforce = window_left, "block"
        case.prepared["window_binds"] = True
    max_entries = case.policy.ladder["L1"].get("max_limit") if role == "search" else None
    too_many = max_entries is not None and len(parsed.entries) > max_entries
    from governor.engine import delivery

    context = delivery.context_of(case, call_id) if "prints" in case.prepared else None
    repeats, deduped = _point_repeats(case, parsed, context, tally)
    over = total - deduped > left
    decision = Decision(code="counted")
    delivered, kept_all = total, set(range(len(parsed.entries)))
    whole = set(kept_all)  # what reaches the model whole: a later repeat of it becomes a pointer
    if (over and enforce == "block") or too_many or event.result_elsewhere or repeats:
        trim = case.policy.data["trimming"]
        order = parsed.ranked()
        costs, frame = case.parts()
        room = left if enforce == "block" else None
        note_room = tally.count(_note(case, len(parsed.entries), len(parsed.entries), left, budget, total))
        fits = None if room is None else max(0, room - note_room - frame)
        chosen = select(costs.__getitem__, order, fits, limit=max_entries, over_budget=trim["over_budget"],
                        fill=trim["fill"])  # fmt: skip
        kept = list(chosen.kept)
        if role == "fetch" and 0 not in kept:
            kept = []  # an earlier version of an observation is never delivered without the observation
        if chosen.truncated is not None:
            _truncate(parsed, chosen.truncated, chosen.truncate_to, tally)
        rendered, delivered, kept = _render_within(case, parsed, kept, room, budget, tally, total)
        kept_all = set(kept)
        code = ("window_trimmed" if over and case.prepared.get("window_binds") else "trimmed" if over
                and enforce == "block" else "l1_max_results" if too_many
                else "delivered_in_place" if event.result_elsewhere else "deduped")  # fmt: skip
        decision = Decision(ev.REPLACE, code, updated_output=rendered)
        deduped = sum(case.prepared["saved_by"].get(i, 0) for i in kept_all)
        whole = kept_all - set(repeats) - {chosen.truncated}
    elif over and enforce == "warn":
        decision = Decision(code="token_budget_warn").tell_user(
            f"memory-governor: this turn's memory reached {budget - left + total} of {budget} "
            f"{case.policy.unit} tokens (over budget; warn only)."
        )
    if case.policy.mode == "monitor" or event.whole_result:
        delivered, kept_all = total, set(range(len(parsed.entries)))  # the model got the whole result
        whole, deduped = set(kept_all), 0
        if event.whole_result and decision.kind == ev.REPLACE:
            decision = Decision(code=f"{decision.code}_uncut")
            if over:
                decision.tell_user(f"memory-governor: {event.tool} returned {total} {case.policy.unit} tokens, past "
                                   "what this turn had left; this harness cannot cut a result, so all of it reached "
                                   "the model and was counted.")  # fmt: skip
    if context is not None:
        shown = kept_all - set(repeats) if role == "search" else None  # a new preview, cut or not
        delivery.remember(ledger, case.session, context, parsed, case.prepared["prints"], whole, event.server or "",
                          role, case.seq, now, shown)  # fmt: skip
    if call_id and prior is not None:
        ledger.commit(case.session, call_id, delivered, now)
    else:
        ledger.add_committed(case.session, case.turn, call_id or f"anon:{now}", role, event.tool or "", case.agent,
                             delivered, now)  # fmt: skip
    window.charge(case, tokens=delivered)
    if case.prepared.get("topics"):  # what the memory holds, whatever of it was delivered
        ledger.remember_topics(case.prepared["topics"], now)
    if role in ("search", "timeline"):
        ledger.surface(case.session, case.turn, results.surfaced(parsed, kept_all))
    if role == "fetch" and kept_all:
        delivered_text = decision.updated_output if decision.kind == ev.REPLACE and decision.updated_output else text
        from governor.engine.screening import line_digests

        ledger.remember_fetched(case.session, line_digests(delivered_text))
    case.record(decision, role, call_id, counted=total, delivered=delivered, saved=max(0, total - delivered),
                deduped=min(deduped, max(0, total - delivered)))  # fmt: skip
    return decision


def _point_repeats(case: Case, parsed: Any, context: str | None, tally: Any) -> tuple[list[int], int]:
    """Delivered-once: the entries this context already holds whole become pointer lines, costed
    as such (governor.engine.delivery); (their indexes, the tokens that saves, as estimated)."""
    case.prepared["saved_by"] = {}
    if context is None:
        return [], 0
    from governor.engine.delivery import replace_repeats

    # Each entry's cost is what a pointer saves: asked for before any entry becomes one.
    repeats = replace_repeats(case.ledger, case.session, context, parsed, case.prepared["prints"], case.parts)
    if not repeats:
        return [], 0
    costs, _ = case.parts()
    for index in repeats:
        pointer = tally.count(parsed.entries[index].text)
        case.prepared["saved_by"][index] = max(0, costs[index] - pointer)
        costs[index] = pointer
    return repeats, sum(case.prepared["saved_by"].values())


def _note(case: Case, held: int, total: int, left: int, budget: int, size: int = 0) -> str:
    unit = case.policy.unit
    if case.prepared.get("window_binds") and size > left:
        from governor.engine.window import note

        return note(case, held, total, left)
    max_limit = case.policy.ladder["L1"].get("max_limit")
    if (case.spec() or {}).get("role") == "search" and max_limit is not None and size <= left and total > max_limit:
        return (
            f"[memory-governor] {held} of {total} entries held back: a search returns at most {max_limit} results "
            "(the retrieval ladder). Narrow the query for others."
        )
    if case.event.tool and (case.spec() or {}).get("role") == "fetch" and held < total:
        return (
            f"[memory-governor] {held} of {total - 1} earlier versions of this observation held back: this turn's "
            f"memory budget is {budget} {unit} tokens. The newest are above; ask for the rest next turn."
        )
    if case.event.tool and (case.spec() or {}).get("role") == "fetch" and held == total:
        return (
            f"[memory-governor] this observation (~{size} {unit} tokens) is held back: {left} of this turn's "
            f"{budget}-token memory budget are left. Work from the search preview, or fetch it next turn."
        )
    return (
        f"[memory-governor] {held} of {total} entries held back: this turn's memory budget is {budget} "
        f"{unit} tokens. Narrow the query, or ask again next turn."
    )


def _render_within(
    case: Case, parsed: Any, kept: list[int], left: int | None, budget: int, tally: Any, size: int
) -> tuple[str, int, list[int]]:
    """Render the kept entries plus the note; drop the lowest-ranked until the exact count fits.
    A frame (headers, envelope) that alone exceeds what is left is never rendered. Returns the
    text, its count and the entries it holds."""
    from governor.engine.results import render

    kept = list(kept)
    _, frame = case.parts()
    if left is not None and frame > left:
        kept = []
    while kept or left is None or frame <= left:
        held = len(parsed.entries) - len(kept)
        note = _note(case, held, len(parsed.entries), left or 0, budget, size) if held else ""
        text = render(parsed, set(kept), note)
        if left is None:
            return text, tally.count(text), kept
        tokens = tally.count_upto(text, left)
        if tokens <= left:
            return text, tokens, kept
        if not kept:
            break
        kept.pop()
    held = len(parsed.entries)
    short = f"[memory-governor: {held} entries held back, memory budget spent]"
    tokens = tally.count(short)
    return (short, tokens, []) if left is None or tokens <= left else ("", 0, [])


def _truncate(parsed: Any, index: int, tokens: int, tally: Any) -> None:
    """Cut one entry to about `tokens` (over_budget: truncate), marking the cut."""
    from governor.engine.packer import TRUNCATION_MARKER

    entry = parsed.entries[index]
    text = entry.text
    keep = min(len(text), 8 * (tokens + 1))  # no token is shorter than one character: start near the answer
    while keep > 0 and tally.count_upto(text[:keep] + TRUNCATION_MARKER, tokens) > tokens:
        keep = keep * 3 // 4
    cut = text[:keep] + TRUNCATION_MARKER + ("\n" if text.endswith("\n") else "")
    for segment in parsed.segments:
        if segment.entry == index:
            segment.text = cut
    entry.text = cut


def tool_failed(case: Case) -> Decision:
    spec = case.spec()
    if spec is None:
        return _agent_ended(case, False) if case.event.dispatches is not None else Decision()
    case.enter_turn()
    call_id = case.known_call_id()
    if case.event.twin and call_id:
        prior = case.ledger.call(case.session, call_id)
        if prior is not None and prior[0] != "pending":
            return Decision(code="repeat")  # the other observer decided this call's end (a result, a release)
    if call_id:
        case.ledger.release(case.session, call_id, case.world.now)
    decision = Decision(code="released")
    case.record(decision, spec["role"], call_id)
    return decision
