"""Deciding a governed call before it runs: the retrieval ladder (L1 clamp and cap, L2/L3
only for a surfaced id, the L3 cap), mem_context's triggers, subagent tiers, save discipline,
the per-user window, the token budget's pre-check, and the reservation; routes around the
memory's tools and subagent dispatches (briefing budget, no raw L3 body).

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine import window
from governor.engine.arguments import is_count, own_project, refused, rewritten
from governor.engine.budgets import budget_left, spent
from governor.engine.events import Decision
from governor.engine.ledger import key
from governor.engine.rules import FIXED_LINES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.engine.case import Case


RETRIEVAL = ("search", "timeline", "fetch", "context")


LAYER_OF = {"search": "L1", "timeline": "L2", "fetch": "L3"}


SERVER_DEFAULT_LIMIT = 10  # what Engram's mem_search returns when no limit is given


SERVER_MAX_LIMIT = 20  # the most hits Engram's mem_search returns, whatever it is asked


SERVER_DEFAULT_NEIGHBOURS = 5  # what Engram's mem_timeline shows before and after when not told


MAX_IDS = 20  # ids one timeline or fetch call may name (Engram reads one)


AGENT_WINDOW_SECONDS = 3600  # a running subagent's window, when no after event closes it; a new turn ends it too


RAW_LINES = 3  # lines of an earlier full fetch found verbatim in a dispatch prompt


def pre_tool(case: Case) -> Decision:
    spec = case.spec()
    if spec is None:
        if case.event.spilled is not None and _governs_spill(case, case.event.spilled):
            return _route(case, "spilled-result", "That file holds memory results the harness kept whole: what of "
                          "them fit the turn's budget was delivered as the calls' results. Search (limit<=3) for what "
                          "you still need.")  # fmt: skip
        route = case.prepared.get("route")
        if route is not None:
            return _route(case, route["name"], f"Use the memory server's {route['use']} tool instead.",
                          route.get("reason"), route.get("why", ""))  # fmt: skip
        return _dispatch(case) if is_dispatch(case) else Decision()
    role = spec["role"]
    ledger, event, now = case.ledger, case.event, case.world.now
    if event.call_id:
        # A call seen before is answered before any turn is looked up: a second observer of the
        # same call (an MCP proxy behind a client whose hooks decided it) must not move the turn.
        prior = ledger.call(case.session, key(event.call_id))
        repeat = _observed(case, prior) if event.observer else _repeat(prior, event.twin)
        if repeat is not None:
            return repeat
    case.enter_turn()
    _attribute(case)
    call_id = case.new_call_id()
    repeat = _repeat(ledger.call(case.session, call_id)) if not event.call_id else None
    if repeat is not None:
        return repeat
    decision, expected = _judge(case, spec)
    if event.no_rewrite and decision.kind == ev.REWRITE:
        decision = refused(event, decision)
    if decision.kind == ev.DENY and case.policy.mode == "enforce":
        ledger.deny(case.session, case.turn, call_id, role, event.tool or "", case.agent, now)
    else:
        ttl = case.policy.data["ledger"]["reservation_ttl_seconds"]
        ledger.reserve(case.session, case.turn, call_id, role, event.tool or "", case.agent, expected, now, ttl)
        window.charge(case, searches=int(role == "search"), fetches=int(role == "fetch"))
        if event.call_key and decision.kind == ev.REWRITE and decision.updated_input is not None:
            rewritten = key(ev.call_key(event.tool_name, decision.updated_input))
            ledger.also_known_as(case.session, rewritten, call_id)
    if event.observer and event.call_id:
        ledger.also_known_as(case.session, _observed_key(event.call_id), call_id)
    extra = case.add_context(["static:save_over_limit"]) if decision.code == "save_over_limit" else 0
    case.record(decision, role, call_id, counted=expected, delivered=extra)
    return decision


def _repeat(prior: Any, twin: bool = False) -> Decision | None:
    """The same call seen again counts once; a refusal stays a refusal. A twin (the other observer
    of the same call) adds no answer: the first observer's refusal, in its words, is the one the
    model gets (the harness blocks on any one deny, and shows one reason)."""
    if prior is None:
        return None
    if prior[0] == "denied" and not twin:
        return Decision(ev.DENY, "repeat", "memory-governor: this call was already refused; do not retry it.")
    return Decision(code="repeat")


def _observed_key(call_id: str) -> str:
    return key(f"observed:{call_id}")


def _observed(case: Case, prior: Any) -> Decision | None:
    """A second observer's look at a call id seen before: defer only to a live reservation that no
    observer has used (the client's hook reserved it, this call is its way to the server). Any
    other repeat (a reservation expired or spent, a call answered or refused, one this observer
    made itself) is no licence to pass uncounted: 'reused_id', decide it again under a new id."""
    if prior is None:
        return None
    observed = _observed_key(case.event.call_id or "")
    live = prior[0] == "pending" and prior[5] > case.world.now
    if live and case.ledger.pending_by_key(case.session, observed) is None:
        case.ledger.also_known_as(case.session, observed, key(case.event.call_id or ""))
        return Decision(code="repeat")
    return Decision(code="reused_id")


def _governs_spill(case: Case, name: str) -> bool:
    """Could `<server>-<tool>` (or a prefix of it: '' is any) be a result of a governed server?"""
    return any(name.startswith(f"{server}-") or f"{server}-".startswith(name) for server in case.policy.tools)


def _route(case: Case, name: str, instead: str, reason: str | None = None, why: str = "") -> Decision:
    """A way to the memory around its tools, or to the governor's own files: refused, so that what
    the model reads is counted. `why`: what the call does that takes the route."""
    from governor.engine.routes import refusal

    case.enter_turn()
    decision = refusal({"name": name, "reason": reason, "why": why}, case.event.tool_name, instead)
    case.record(decision, "route")
    return decision


def is_dispatch(case: Case) -> bool:
    """A tool that starts a subagent: one the policy lists, or one the adapter says starts one."""
    return case.event.dispatches is not None or case.event.tool_name in case.policy.data["briefing"]["dispatch_tools"]


def _dispatch(case: Case) -> Decision:
    """A subagent dispatch: memory cards within the briefing budget, and no raw L3 body."""
    case.enter_turn()
    if case.event.call_id:  # the agent may run in the background and report back later
        case.ledger.remember_launch(case.session, key(case.event.call_id), case.turn)
    if not (case.nested or case.event.agent_unknown):  # the agent it starts counts in this turn (Case.enter_turn)
        case.ledger.remember_dispatch(case.session, case.turn, case.world.now)
    briefing = case.policy.data["briefing"]
    tokens = case.prepared["card_tokens"]
    limit = briefing["max_tokens"]
    raw = case.prepared["raw_pasted"] or case.ledger.fetched_among(case.session, case.prepared["digests"]) >= RAW_LINES
    decision = Decision(code="dispatch")
    if raw and briefing["raw_l3_body"] != "off":
        why = (
            "memory-governor: this dispatch pastes a raw mem_get_observation body. Summarize it into a memory card "
            "(one line: id, type, the decision) instead of passing the raw body across waves."
        )
        if briefing["raw_l3_body"] == "block":
            decision = Decision(ev.DENY, "raw_l3_body", why)
        else:
            decision = Decision(ev.CONTEXT, "raw_l3_body", context=why).tell_user(why)
    if decision.kind != ev.DENY and tokens > limit["value"] and limit["enforce"] != "off":
        why = (
            f"memory-governor: the memory cards in this dispatch are {tokens} {case.policy.unit} tokens, over the "
            f"briefing budget of {limit['value']}. Pack them with `memory-governor brief --budget {limit['value']}`."
        )
        if limit["enforce"] == "block":
            decision = Decision(ev.DENY, "briefing_budget", why)
        else:
            decision.code = "briefing_budget" if decision.code == "dispatch" else decision.code
            decision.tell_user(why)
    refused = decision.kind == ev.DENY and case.policy.mode == "enforce"
    if case.event.dispatches is not None and case.event.agent_unknown and not refused:  # a window: _attribute
        ttl = max(case.policy.data["ledger"]["reservation_ttl_seconds"], AGENT_WINDOW_SECONDS)
        case.ledger.open_agent(case.session, case.turn, case.new_call_id(), case.event.tool_name,
                               case.event.dispatches, case.world.now, ttl)  # fmt: skip
    if decision.kind != ev.DENY:
        from governor.engine.prompt import arm_on_dispatch

        armed = arm_on_dispatch(case)
        if armed and decision.code == "dispatch":
            decision.code = f"dispatch:{armed}"
    case.record(decision, "dispatch", key(case.event.call_id) if case.event.call_id else None, counted=tokens)
    return decision


def _attribute(case: Case) -> None:
    """A call from a harness that does not say which agent made it: the subagent a dispatch in
    this turn started and that is still running, the most restrictive when several are."""
    event = case.event
    if not event.agent_unknown or event.agent_id or case.agent[0]:  # known, or a nested session's own
        return
    running = case.ledger.running_agents(case.session, case.turn, case.world.now)
    if not running:
        return

    subagents = case.policy.data["subagents"]

    def reach(agent: tuple[str, str]) -> int:
        return len(subagents["tiers"][case.tier(agent[1])]["roles"])

    window, agent_type = min(running, key=reach)
    event.agent_id, event.agent_type = f"dispatch:{window}", agent_type
    case.agent = (key(event.agent_id), agent_type)


def _judge(case: Case, spec: dict[str, Any]) -> tuple[Decision, int]:
    """The decision for a governed call before it runs, and the tokens to reserve for it."""
    role = spec["role"]
    refusal = _tier_refusal(case, role)
    if refusal is not None:
        return refusal, 0
    if (
        role in RETRIEVAL
        and case.policy.data["memory_needs"]["on_none"] == "deny"
        and case.ledger.memory_need(case.session, case.turn) == "none"
    ):
        return Decision(
            ev.DENY,
            "memory_need_none",
            "memory-governor: memory is off this turn (memory_need=none). Go ahead without it.",
        ), 0
    if role in ("save", "summary"):
        return _judge_save(case, spec), 0
    held, warning = window.check(case, role)  # before a turn's rules spend anything (a trigger)
    if held is not None:
        return held, 0
    decision, expected = _judge_retrieval(case, spec, role)
    if warning:
        decision.tell_user(warning)
    return decision, expected


def _judge_retrieval(case: Case, spec: dict[str, Any], role: str) -> tuple[Decision, int]:
    usage = case.ledger.usage(case.session, case.turn, case.world.now)
    if role == "other":
        return _judge_other(case, usage), 0
    if role == "search":
        return _judge_search(case, spec, usage)
    if role in ("timeline", "fetch"):
        return _judge_by_id(case, spec, usage)
    from governor.engine.whole_memory import judge_context

    return judge_context(case, usage)


def _tier_refusal(case: Case, role: str) -> Decision | None:
    if not case.event.agent_id:
        return None

    subagents = case.policy.data["subagents"]
    agent = case.event.agent_type or "subagent"
    if role == "summary" or (role == "save" and _save_type(case) in case.policy.data["save"]["orchestrator_only"]):
        return Decision(
            ev.DENY,
            "orchestrator_only",
            f"memory-governor: only the orchestrator saves {_save_type(case) or 'session_summary'}. Report your "
            "findings to it instead.",
        )
    tier = case.tier(case.event.agent_type)
    allowed = subagents["tiers"][tier]["roles"]
    if (role if role != "other" else "search") in allowed:  # a tool the map does not name reads, as a search does
        return None
    can = ", ".join(allowed) or "no memory tools"
    return Decision(
        ev.DENY,
        f"tier:{tier}",
        f"memory-governor: agent '{agent}' is {tier} (may use: {can}), so it may not call {case.event.tool}. "
        "Use the memory cards in your briefing"
        + ("; save what you learn with mem_save." if "save" in allowed else "."),
    )


def _judge_search(case: Case, spec: dict[str, Any], usage: dict[str, int]) -> tuple[Decision, int]:
    layer = case.policy.ladder["L1"]
    per_result = layer["expected_tokens"]
    cap, enforce = case.limit("max_search_calls")
    searches = usage.get("search", 0)
    warn = ""
    tier_cap = _tier_search_cap(case)
    if tier_cap is not None:
        mine = case.ledger.usage(case.session, case.turn, case.world.now, agent_id=case.agent[0]).get("search", 0)
        if mine >= tier_cap:
            return Decision(
                ev.DENY,
                "tier_search_cap",
                f"memory-governor: this agent's {tier_cap} search(es) this turn are used. Work from your briefing and "
                "results.",
            ), 0
    if enforce != "off" and searches >= cap:
        if enforce == "block":
            return Decision(
                ev.DENY,
                "max_search_calls",
                f"memory-governor: max_search_calls={cap} reached this turn; use the results you have, do not retry.",
            ), 0
        warn = f"memory-governor: search {searches + 1} this turn is over max_search_calls={cap}."
    max_limit: int | None = layer.get("max_limit")
    limit_param = spec.get("limit_param")
    asked = case.event.tool_input.get(limit_param) if limit_param else None
    requested = int(asked) if asked is not None and is_count(asked) else None
    if requested is None:
        count = max_limit if max_limit is not None else SERVER_DEFAULT_LIMIT
    else:
        count = requested if max_limit is None else min(requested, max_limit)
    shaped = layer.get("max_tokens")  # L1 shaped by tokens: its hits are cut at this after it runs
    if shaped is not None:
        count = min(count, SERVER_MAX_LIMIT)
    expected = count * per_result if shaped is None else min(count * per_result, shaped)
    left, budget, budget_enforce = budget_left(case, usage)
    if budget_enforce == "block" and expected > left:
        # Lowered to what fits, with room for the header and note around its hits: a search cut to
        # fewer hits than the turn can then hold would run, cost a search, and deliver nothing.
        frame = case.text_tokens("static:search_frame")
        fits = max(0, (left - frame) // per_result) if per_result else count
        if fits < 1:
            return spent(case, budget - left, budget, per_result + frame), 0
        if shaped is None:
            count = fits
        expected = min(expected, left)
    decision = Decision(code="allow")
    updated = dict(case.event.tool_input)
    changed = own_project(case, spec, updated)
    # The search's slots go to entries this context does not hold yet: the server is asked for as
    # many more as it may find again, and those come back as one line (post_tool), so `count` new ones can
    # pass. Not where a harness cannot replace a result in place: cutting the extra would turn the result
    # into a block or an error there.
    shapes = case.event.replace_in_place and not case.event.no_rewrite  # a rewrite, and the result cut, apply
    again = _shown_hits(case) if limit_param and shapes else 0
    ask = max(count, min(SERVER_MAX_LIMIT, count + again))
    if limit_param and requested != ask:
        updated[limit_param] = ask
        changed.insert(0, f"{limit_param} {asked if asked is not None else '(unset)'} -> {ask}"
                      + (f" ({count} new, {again} already shown)" if ask != count else ""))  # fmt: skip
    form: str | None = spec.get("format_param")
    compact = bool(form and shapes and layer.get("snippets_only") and updated.get(form) != "compact"
                   and case.ledger.form_of(case.session, case.event.server or "") == "v2")  # fmt: skip
    if form and compact:  # snippets only: the compact form of a server that has one (its results so far were v2's)
        changed.append(f"{form} {updated.get(form, '(unset)')} -> compact")
        updated[form] = "compact"
    if changed:
        code = ("clamp_limit" if limit_param and requested != count
                else "new_entries" if limit_param and requested != ask
                else "clamp_project" if len(changed) > compact else "snippets")  # fmt: skip
        decision = Decision(ev.REWRITE, code, updated_input=updated)
        decision.reason = "; ".join(changed)
    if warn:
        decision.tell_user(warn)
        decision.code = decision.code if decision.kind == ev.REWRITE else "max_search_calls_warn"
    return decision, expected


def _shown_hits(case: Case) -> int:
    """How many search hits this call's context holds whole (delivered-once on, the context known)."""
    from governor.engine.delivery import context_of, shown_hits

    context = context_of(case)
    return 0 if context is None else shown_hits(case.ledger, case.session, context, case.event.server or "")


def _judge_other(case: Case, usage: dict[str, int]) -> Decision:
    """A tool of a governed server that the policy does not map: it runs while the turn has budget
    left, and its result is counted and trimmed against it afterwards (post_tool)."""
    left, budget, enforce = budget_left(case, usage)
    if enforce == "block" and left <= 0:
        return spent(case, budget - left, budget, 1)
    return Decision(code="unmapped")


def _tier_search_cap(case: Case) -> int | None:
    if not case.event.agent_id:
        return None
    subagents = case.policy.data["subagents"]
    cap = subagents["tiers"][case.tier(case.event.agent_type)].get("max_search_calls")
    return int(cap) if cap is not None else None


def _ids(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(int(v)) if isinstance(v, float) and v == int(v) else str(v) for v in value]
    if isinstance(value, float) and value == int(value):
        return [str(int(value))]
    return [] if value is None else [str(value).lstrip("#")]


def _judge_by_id(case: Case, spec: dict[str, Any], usage: dict[str, int]) -> tuple[Decision, int]:
    role = spec["role"]
    layer_name = LAYER_OF[role]
    layer = case.policy.ladder[layer_name]
    tool = case.event.tool
    if role == "fetch":
        from governor.engine.delivery import fetch_pointer

        pointer = fetch_pointer(case, spec)
        if pointer is not None:
            return Decision(ev.DENY, "delivered_once", pointer), 0
        cap, enforce = case.limit("max_full_fetches")
        if enforce == "block" and usage.get("fetch", 0) >= cap:
            return Decision(
                ev.DENY,
                "max_full_fetches",
                f"memory-governor: max_full_fetches={cap} reached this turn; use the search previews.",
            ), 0
    id_param = spec.get("id_param")
    if layer.get("requires_surfaced_id") and id_param:
        asked = case.event.tool_input.get(id_param)
        if isinstance(asked, list) and len(asked) > MAX_IDS:
            return Decision(ev.DENY, f"{layer_name.lower()}_too_many_ids",
                            f"memory-governor: {tool} names {len(asked)} ids; ask for one at a time.") , 0  # fmt: skip
        wanted = _ids(asked)
        missing = [i for i in wanted if not case.ledger.surfaced(case.session, case.turn, i)]
        if not wanted or missing:
            shown = ", ".join(missing) or "(none given)"
            return Decision(
                ev.DENY,
                f"{layer_name.lower()}_needs_surfaced_id",
                f"memory-governor: {id_param}={shown} was not surfaced this turn. Search first (limit<=3) and use an "
                "id it returns.",
            ), 0
    expected = layer["expected_tokens"]
    left, budget, enforce = budget_left(case, usage)
    if enforce == "block" and expected > left:
        return spent(case, budget - left, budget, expected), 0
    return _clamp_neighbours(case, spec, layer), expected


def _clamp_neighbours(case: Case, spec: dict[str, Any], layer: dict[str, Any]) -> Decision:
    """L2: how many neighbours a timeline shows before and after, clamped to the ladder's
    max_before/max_after (a larger or missing count is rewritten, never refused)."""
    updated = dict(case.event.tool_input)
    for param_key, max_key in (("before_param", "max_before"), ("after_param", "max_after")):
        param, most = spec.get(param_key), layer.get(max_key)
        if not param or most is None:
            continue
        asked = updated.get(param)
        count = int(asked) if asked is not None and is_count(asked) else SERVER_DEFAULT_NEIGHBOURS
        if asked is None and count <= most:
            continue
        if asked is None or not is_count(asked) or count > most:
            updated[param] = min(count, most)
    return rewritten(case, "allow", "clamp_neighbours", updated)


def _save_type(case: Case) -> str | None:
    spec = case.spec() or {}
    if spec.get("role") == "summary":
        return "session_summary"
    param = spec.get("type_param")
    value = case.event.tool_input.get(param) if param else None
    if value is None:
        return spec.get("default_type")
    return str(value)


def _judge_save(case: Case, spec: dict[str, Any]) -> Decision:
    from governor.engine import saves

    save = case.policy.data["save"]
    kind = _save_type(case)
    if spec["role"] == "save" and kind is not None and kind not in save["allowed_types"]:
        return Decision(
            ev.DENY,
            "save_type",
            f"memory-governor: a save of type '{kind}' is not allowed. Save only deltas, with type one of: "
            f"{', '.join(save['allowed_types'])}.",
        )
    warnings: list[str] = []
    for rule in case.prepared["findings"]:
        if rule == "topic_key":
            continue  # reported below, with the namespaces
        enforce = save["max_chars"]["enforce"] if rule == "oversize" else save["never_save"][rule]
        if enforce == "block":
            return Decision(ev.DENY, f"never_save:{rule}", f"memory-governor: this save {saves.REASONS[rule]}.")
        if enforce == "warn":
            warnings.append(f"memory-governor: a save {saves.REASONS[rule]}.")
    title_param = spec.get("title_param")
    title = case.event.tool_input.get(title_param) if title_param else None
    topic_param = spec.get("topic_key_param")
    topic = case.event.tool_input.get(topic_param) if topic_param else None
    duplicate = save["never_save"]["duplicate"]
    if (
        isinstance(title, str)
        and not topic
        and duplicate != "off"
        and case.ledger.saved_before(case.session, saves.title_digest(title))
    ):
        if duplicate == "block":
            return Decision(
                ev.DENY, "never_save:duplicate", f"memory-governor: this save {saves.REASONS['duplicate']}."
            )
        warnings.append(f"memory-governor: a save {saves.REASONS['duplicate']}.")
    if "topic_key" in case.prepared["findings"]:
        namespaces = case.policy.blob["index"]["topic_namespaces"]
        examples = ", ".join(n["example"] for n in namespaces[:4])
        shown = str(topic)[:80]
        text = f"memory-governor: topic_key '{shown}' is outside the namespace contract (e.g. {examples})."
        if save["topic_keys"] == "block":
            return Decision(ev.DENY, "topic_key", text + " Choose a key in one of those namespaces.")
        warnings.append(text)
    cap, enforce = case.limit("max_save_calls_per_turn")
    saves_so_far = sum(
        count for role, count in case.ledger.usage(case.session, case.turn, case.world.now).items()
        if role in ("save", "summary")
    )  # fmt: skip
    if enforce != "off" and saves_so_far >= cap:
        if enforce == "block":
            return Decision(
                ev.DENY,
                "max_save_calls_per_turn",
                f"memory-governor: this turn already saved {cap} time(s) (max_save_calls_per_turn={cap}). Save the "
                "rest next turn, or fold it into one memory with topic_key.",
            )
        decision = Decision(ev.CONTEXT, "save_over_limit", context=FIXED_LINES["save_over_limit"])
        decision.tell_user(f"memory-governor: save {saves_so_far + 1} this turn is over max_save_calls_per_turn={cap}.")
        for line in warnings:
            decision.tell_user(line)
        return decision
    decision = Decision(code="warn" if warnings else "allow")
    for line in warnings:
        decision.tell_user(line)
    return decision
