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
    own = 0  # what this call already holds in `usage`: its committed count (never lowered), or its live reservation
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
    granted = _granted(case, prior) if role == "search" else None
    from governor.engine import delivery

    context = delivery.context_of(case, call_id) if "prints" in case.prepared else None
    listed = role == "search" and results.hits(parsed)  # its slots go to new entries; repeats are named in a line
    above = _above(case, parsed, context) if listed else []
    repeats, deduped = _point_repeats(case, parsed, None if listed else context, tally)
    if above:
        costs, _ = case.parts()
        deduped = sum(costs[i] for i in above)
    fresh = len(parsed.entries) - len(above)
    too_many = granted is not None and fresh > granted
    passed = case.prepared.get("whole", total)  # what the model gets of it whole (its snippets, snippets only)
    over = passed - deduped > left
    cap = case.policy.ladder["L1"].get("max_tokens") if role == "search" else None  # L1 shaped by tokens
    over_cap = cap is not None and passed - deduped > cap
    decision = Decision(code="counted")
    delivered, kept_all = total, set(range(len(parsed.entries)))
    whole = set(kept_all)  # what reaches the model whole: a later repeat of it becomes a pointer
    shaped = bool(case.prepared.get("snipped"))
    if (over and enforce == "block") or too_many or over_cap or event.result_elsewhere or repeats or above or shaped:
        trim = case.policy.data["trimming"]
        order = [i for i in parsed.ranked() if i not in above]
        costs, frame = case.parts()
        room = left if enforce == "block" else None
        if cap is not None:
            room = cap if room is None else min(room, cap)
        shown_above = [parsed.entries[i].idents[0] for i in above]
        note_room = tally.count(_note(case, fresh, fresh, left, budget, passed, shown_above, granted, cap))
        fits = None if room is None else max(0, room - note_room - frame)
        chosen = select(costs.__getitem__, order, fits, limit=granted, over_budget=trim["over_budget"],
                        fill=trim["fill"])  # fmt: skip
        kept = list(chosen.kept)
        if role == "fetch" and 0 not in kept:
            kept = []  # an earlier version of an observation is never delivered without the observation
        if chosen.truncated is not None:
            _truncate(parsed, chosen.truncated, chosen.truncate_to, tally)
        size = passed - deduped if above else passed  # what the new entries would have cost whole
        rendered, delivered, kept = _render_within(case, parsed, kept, room, budget, tally, size, above, shown_above,
                                                   granted, cap)  # fmt: skip
        kept_all = set(kept)
        code = ("window_trimmed" if over and case.prepared.get("window_binds") else "trimmed" if over
                and enforce == "block" and (cap is None or left < cap) else "l1_max_results" if too_many
                else "l1_max_tokens" if over_cap else "delivered_in_place" if event.result_elsewhere
                else "deduped" if repeats or above else "snippets")  # fmt: skip
        decision = Decision(ev.REPLACE, code, updated_output=rendered)
        deduped = sum(case.prepared["saved_by"].get(i, 0) for i in kept_all) + sum(costs[i] for i in above)
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
    counted_before = 0  # a result sent again for a call already counted: only what it adds, if more
    if call_id and prior is not None:
        counted_before = int(prior[4]) if prior[0] == "committed" else 0
        ledger.commit(case.session, call_id, delivered, now)  # keeps the most it was counted at
    else:
        ledger.add_committed(case.session, case.turn, call_id or f"anon:{now}", role, event.tool or "", case.agent,
                             delivered, now)  # fmt: skip
    window.charge(case, tokens=max(0, delivered - counted_before))
    if role == "search" and parsed.kind.startswith("v2:"):  # a server with a compact form: asked for it from now on
        ledger.remember_form(case.session, event.server or "", "v2")
    if case.prepared.get("topics"):  # what the memory holds, whatever of it was delivered
        ledger.remember_topics(case.prepared["topics"], now)
    if role in ("search", "timeline") and prior is not None:  # a hit this context already holds, found again,
        # may be read on; a result for a call never seen before it ran (no reservation) surfaces nothing
        ledger.surface(case.session, case.turn, results.surfaced(parsed, kept_all | set(above)))
    if role == "fetch" and kept_all:
        delivered_text = decision.updated_output if decision.kind == ev.REPLACE and decision.updated_output else text
        from governor.engine.screening import line_digests

        ledger.remember_fetched(case.session, line_digests(delivered_text))
    case.record(decision, role, call_id, counted=total, delivered=delivered, saved=max(0, total - delivered),
                deduped=min(deduped, max(0, total - delivered)))  # fmt: skip
    return decision


def _granted(case: Case, prior: Any) -> int | None:
    """How many new hits a search may pass: the count it was granted before it ran (its reservation
    holds that many hits' expected tokens; it may have asked the server for more, to find new ones
    past those this context holds), else the ladder's max_limit. None where L1 is shaped by tokens."""
    layer = case.policy.ladder["L1"]
    most: int | None = layer.get("max_limit")
    per_hit = int(layer["expected_tokens"])
    reserved = int(prior[3]) if prior is not None and prior[2] == case.turn else 0
    if layer.get("max_tokens") is not None or reserved <= 0 or per_hit <= 0:
        return most
    return reserved // per_hit if most is None else min(most, reserved // per_hit)


def _above(case: Case, parsed: Any, context: str | None) -> list[int]:
    """A search's hits (each with its id) this context already holds whole (delivered-once): left
    out of what it passes, named in one line instead, so its slots go to entries not yet delivered."""
    if context is None:
        return []
    from governor.engine.delivery import repeats

    return repeats(case.ledger, case.session, context, case.prepared["prints"])


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


def _note(case: Case, held: int, total: int, left: int, budget: int, size: int = 0, above: list[str] | None = None,
          most: int | None = None, cap: int | None = None) -> str:  # fmt: skip
    """The governor's one short line under a result it changed: what was held back and why, what to
    do instead; and the hits this conversation already holds (`above`: their ids). `most`: the hits
    a search passes; `cap`: the tokens it passes (L1 shaped by tokens)."""
    unit = case.policy.unit
    role = (case.spec() or {}).get("role")
    parts = []
    if held and case.prepared.get("window_binds") and size > left:
        from governor.engine.window import note

        parts.append(note(case, held, total, left))
    elif held and role == "search" and most is not None and size <= left and total > most:
        parts.append(f"{held} of {total} entries held back: a search passes {most} (the retrieval ladder); "
                     "narrow the query for others")  # fmt: skip
    elif held and role == "search" and cap is not None and cap <= left:
        parts.append(f"{held} of {total} entries held back: a search passes {cap} {unit} tokens (the retrieval "
                     "ladder); narrow the query for others")  # fmt: skip
    elif held and role == "fetch" and held < total:
        parts.append(f"{held} of {total - 1} earlier versions of this observation held back (this turn's budget: "
                     f"{budget} {unit} tokens); ask for them next turn")  # fmt: skip
    elif held and role == "fetch":
        parts.append(f"this observation (~{size} {unit} tokens) is held back: {left} of this turn's {budget}-token "
                     "budget are left. Use the search preview, or fetch it next turn")  # fmt: skip
    elif held:
        parts.append(f"{held} of {total} entries held back (this turn's budget: {budget} {unit} tokens); narrow the "
                     "query or ask next turn")  # fmt: skip
    if above:
        shown = ", ".join(f"#{ident}" for ident in above[:MAX_NAMED])
        parts.append(f"{len(above)} more already above in this conversation: {shown}"
                     + (", …" if len(above) > MAX_NAMED else ""))  # fmt: skip
    return f"[memory-governor] {'; '.join(parts)}." if parts else ""


MAX_NAMED = 8  # ids a note names of the hits already above


def _render_within(case: Case, parsed: Any, kept: list[int], left: int | None, budget: int, tally: Any, size: int,
                   above: list[int] | None = None, above_ids: list[str] | None = None, most: int | None = None,
                   cap: int | None = None) -> tuple[str, int, list[int]]:  # fmt: skip
    """Render the kept entries plus the note; drop the lowest-ranked until the exact count fits.
    A frame (headers, envelope) that alone exceeds what is left is never rendered. Returns the
    text, its count and the entries it holds. `above`: entries left out as already delivered."""
    from governor.engine.results import render

    kept = list(kept)
    _, frame = case.parts()
    if left is not None and frame > left:
        kept = []
    fresh = len(parsed.entries) - len(above or ())
    while kept or left is None or frame <= left:
        held = fresh - len(kept)
        note = _note(case, held, fresh, left or 0, budget, size, above_ids, most, cap)
        text = render(parsed, set(kept), note)
        if left is None:
            return text, tally.count(text), kept
        tokens = tally.count_upto(text, left)
        if tokens <= left:
            return text, tokens, kept
        if not kept:
            break
        kept.pop()
    short = f"[memory-governor: {len(parsed.entries)} entries held back, memory budget spent]"
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
