"""decide(event, policy, ledger, world) -> Decision: every rule memory-governor enforces.

The engine knows no harness. Each event is decided inside one ledger write transaction, so
what it counts, compares and reserves is one atomic step across concurrent hook processes.

- prompt: starts a turn, classifies its memory need, arms explicit recall, advises the agent;
  a machine-made prompt (a background task reporting back) does none of that and joins the
  turn that launched the task.
- session_start: compaction and resume arm the triggers that unlock mem_context.
- pre_tool: the ladder (L1 clamp and cap, L2/L3 only for a surfaced id, L3 cap), mem_context
  triggers, subagent tiers, save discipline, and the token budget's pre-check; reserves.
- post_tool: counts the real result, records the ids it surfaced, trims it to the turn's
  token budget (whole entries), commits.
- tool_failed: releases the reservation.

In monitor mode the same decisions are recorded, and the user is told what enforce mode
would have done, but nothing is denied, rewritten or replaced.

Hot path: standard library only; the token counter and classifier load only when needed.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Decision, Event
from governor.engine.ledger import key
from governor.engine.rules import FIXED_LINES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.engine.ledger import Ledger
    from governor.engine.rules import CompiledPolicy

RETRIEVAL = ("search", "timeline", "fetch", "context")
GOVERNOR_ROLE = "governor"  # text the governor itself adds to the model's context
LAYER_OF = {"search": "L1", "timeline": "L2", "fetch": "L3"}
SERVER_DEFAULT_LIMIT = 10  # what Engram's mem_search returns when no limit is given
SERVER_DEFAULT_NEIGHBOURS = 5  # what Engram's mem_timeline shows before and after when not told
MAX_IDS = 20  # ids one timeline or fetch call may name (Engram reads one)


class DecisionTimeout(Exception):
    """A decision ran past its deadline: the policy's on_error applies to this call only."""


AGENT_WINDOW_SECONDS = 3600  # a running subagent's window, when no after event closes it; a new turn ends it too


FINGERPRINT_WHOLE = 1 << 20  # characters of a text fingerprinted whole in the audit trail


class World:
    """What a decision needs from outside the event: the time, the project, the folders where
    the harness keeps subagent definitions (which may declare an access tier), and the
    deadline, in this thread's CPU seconds (so a busy machine never trips it; only work does)."""

    __slots__ = ("agent_dirs", "deadline", "now", "project")

    def __init__(self, now: float, project: str, agent_dirs: list[str] | None = None,
                 deadline: float | None = None) -> None:  # fmt: skip
        self.now = now
        self.project = project
        self.agent_dirs = agent_dirs or []
        self.deadline = deadline

    def check(self) -> None:
        """Between the slow steps of a decision: stop once its CPU time is spent."""
        if self.deadline is not None:
            import time

            if time.thread_time() > self.deadline:
                raise DecisionTimeout("the decision ran past its deadline")


class _Case:
    """One event being decided: its ids as ledger keys, and the turn it belongs to."""

    __slots__ = ("agent", "event", "ledger", "notices", "policy", "prepared", "seq", "session", "turn", "world")

    def __init__(self, event: Event, policy: CompiledPolicy, ledger: Ledger, world: World) -> None:
        self.event = event
        self.policy = policy
        self.ledger = ledger
        self.world = world
        self.session = key(event.session_id)
        self.agent = (key(event.agent_id) if event.agent_id else "", event.agent_type or "")
        self.turn = ""
        self.seq = 0
        self.prepared: dict[str, Any] = {}  # work done before the transaction (see _prepare)
        self.notices: list[str] = []  # for the user, once per session (Decision.notices)

    def enter_turn(self, new: bool = False) -> None:
        turn_id = key(self.event.turn_id) if self.event.turn_id else None
        self.turn, self.seq = self.ledger.turn(self.session, turn_id, self.world.now, new=new)

    def record(self, decision: Decision, role: str = "", **tokens: int) -> None:
        event = self.event
        tool = f"{event.server}/{event.tool}" if event.server else event.tool_name
        self.ledger.record(
            {
                "ts": self.world.now,
                "session": self.session,
                "turn": self.turn,
                "agent_id": self.agent[0],
                "agent_type": self.agent[1],
                "event": event.kind,
                "tool": tool,
                "role": role,
                "decision": decision.kind if decision.kind != ev.NONE else "warn" if decision.user_message else "allow",
                "code": decision.code,
                "mode": self.policy.mode,
                "policy": self.policy.digest[:16],
                "tokens_counted": tokens.get("counted", 0),
                "tokens_delivered": tokens.get("delivered", 0),
                "tokens_saved": tokens.get("saved", 0),
                "tokens_deduped": tokens.get("deduped", 0),
                "detail": self.prepared.get("detail", ""),
            }
        )

    def detail(self) -> str:
        """What the event carried, as a size and a fingerprint; the text itself only if the policy opts in."""
        event = self.event
        if event.kind == ev.PROMPT:
            text = event.prompt or ""
        elif event.kind == ev.POST_TOOL:
            text = event.tool_result or ""
        elif event.kind == ev.PRE_TOOL:
            import json

            text = json.dumps(event.tool_input, ensure_ascii=False, sort_keys=True)
        else:
            return ""
        if self.policy.data["ledger"]["record_contents"]:
            return text[:65536]
        from zlib import crc32

        if len(text) > FINGERPRINT_WHOLE:  # a huge text: its length and its ends (bounded work)
            ends = (text[: FINGERPRINT_WHOLE // 2] + text[-FINGERPRINT_WHOLE // 2 :]).encode("utf-8", "surrogatepass")
            return f"{len(text)} chars crc32(ends):{crc32(ends):08x}"
        raw = text.encode("utf-8", "surrogatepass")
        return f"{len(raw)} bytes crc32:{crc32(raw):08x}"

    def new_call_id(self) -> str:
        """This call's ledger id, before it runs: the harness's id, else one per call by key."""
        event = self.event
        if event.call_id:
            return key(event.call_id)
        if event.call_key:
            return self.ledger.keyed_call(self.session, key(event.call_key))
        return f"anon:{self.world.now}:{id(event)}"

    def tier(self, agent_type: str | None) -> str:
        """The access tier of a subagent of `agent_type`; a declaration held back is said once."""
        from governor.engine.tiers import tier_of

        tier, source = tier_of(agent_type, self.policy.data["subagents"], self.world.agent_dirs,
                               self.policy.accepted_at)  # fmt: skip
        if source.startswith("held:"):
            self.notices.append(
                f"memory-governor: {source[5:]} was changed since the policy was last accepted and declares a wider "
                f"memory tier for '{agent_type}'; it is held back ({tier} applies). If you made it, run "
                "`memory-governor policy accept`."
            )
        return tier

    def known_call_id(self) -> str | None:
        """The ledger id of the call this result or failure belongs to, if it was seen before."""
        event = self.event
        if event.call_id:
            return key(event.call_id)
        if event.call_key:
            return self.ledger.pending_by_key(self.session, key(event.call_key), self.turn)
        return None

    def text_tokens(self, name: str) -> int:
        return int(self.policy.blob["index"]["text_tokens"].get(name, 0))


def decide(event: Event, policy: CompiledPolicy, ledger: Ledger, world: World) -> Decision:
    handler = _HANDLERS.get(event.kind)
    if handler is None:
        return Decision()
    case = _Case(event, policy, ledger, world)
    _prepare(case)
    with ledger.write():
        if event.agent_id:  # a subagent's own session id counts as the session that dispatched it
            case.session = ledger.dispatching_session(case.session)
            ledger.remember_agent(case.session, case.agent[0])
        decision = handler(case)
    if policy.mode == "monitor":
        decision = _as_monitor(decision)
    decision.notices = list(dict.fromkeys(case.notices))
    return decision


def _prepare(case: _Case) -> None:
    """The slow parts of a decision, done before the write lock is taken: loading the token
    counter, counting and parsing a result, looking inside a save or a dispatch, classifying a
    prompt. Each is bounded in its input (see governor.engine.screening and tokens); inside the
    transaction only reads, arithmetic, small renders and writes remain, so concurrent hooks
    wait microseconds, not seconds, whatever one of them was sent."""
    event, policy = case.event, case.policy
    case.prepared["detail"] = case.detail()
    if event.kind == ev.PROMPT and event.machine_made:
        return  # nothing of its text is used
    if event.kind == ev.PROMPT:
        from governor.engine.classify import classify, recall_phrase

        prompt = event.prompt or ""
        case.prepared["verdict"] = classify(prompt, policy.data["memory_needs"])
        case.world.check()
        case.prepared["recall"] = recall_phrase(prompt, policy.recall_phrases)
        return
    spec = _spec(case)
    if event.kind == ev.POST_TOOL and spec is not None and spec["role"] not in ("save", "summary"):
        _prepare_result(case, spec)
    elif event.kind == ev.PRE_TOOL and spec is not None and spec["role"] in ("save", "summary"):
        from governor.engine.screening import save_findings

        topic_param = spec.get("topic_key_param")
        topic = event.tool_input.get(topic_param) if topic_param else None
        namespaces = policy.blob["index"]["topic_namespaces"]
        case.prepared["findings"] = save_findings(event.tool_input, policy.data["save"], topic, namespaces)
    elif event.kind == ev.PRE_TOOL and spec is None and policy.routes_for(event.tool_name):
        from governor.engine.screening import route_taken

        routes = policy.routes_for(event.tool_name)
        case.prepared["route"] = route_taken(event.tool_input, routes, case.ledger.state_dir)
    if event.kind == ev.PRE_TOOL and spec is None and _is_dispatch(case):
        from governor.engine.briefing import card_blocks
        from governor.engine.screening import line_digests, raw_observation
        from governor.engine.tokens import counter

        brief = event.tool_input.get("prompt")
        text = brief if isinstance(brief, str) else ""
        tally = counter(policy.unit)
        cap = policy.data["briefing"]["max_tokens"]["value"] + 1
        case.prepared["card_tokens"] = sum(tally.count_upto(block, cap) for block in card_blocks(text))
        case.world.check()
        case.prepared["raw_pasted"] = raw_observation(text)
        case.prepared["digests"] = line_digests(text)
    case.world.check()


COUNT_CAP = 16  # a result is counted exactly up to this many times the turn's budget; beyond, a lower bound


def _prepare_result(case: _Case, spec: dict[str, Any]) -> None:
    """Parse a result into entries and count it, the entries, and its frame (what is kept
    whatever is held back), each only as far as the budget needs."""
    from governor.engine import results
    from governor.engine.budgets import largest_budget
    from governor.engine.delivery import enabled
    from governor.engine.tokens import counter

    tally = counter(case.policy.unit)
    text = case.event.tool_result or ""
    budget = largest_budget(case.policy.data)
    parsed = results.parse(text, spec["role"], spec.get("format", "auto"))
    case.world.check()
    if enabled(case.policy.data):
        case.prepared["prints"] = results.fingerprints(parsed, case.event.server or "")
    case.prepared["tally"] = tally
    case.prepared["parsed"] = parsed
    case.prepared["total"] = tally.count_upto(text, max(COUNT_CAP * budget, 65_536))
    case.world.check()
    case.prepared["costs"] = [tally.count_upto(entry.text, budget + 1) for entry in parsed.entries]
    case.prepared["frame"] = tally.count_upto(results.render(parsed, set(), ""), budget + 1)


def _as_monitor(decision: Decision) -> Decision:
    """Monitor mode: the decision is recorded; the user hears what enforce would have done."""
    verbs = {ev.DENY: "denied", ev.REWRITE: "clamped", ev.REPLACE: "trimmed", ev.CONTEXT: "advised"}
    verb = verbs.get(decision.kind)
    if verb is None:
        return decision
    what = decision.reason or decision.context or decision.code
    out = Decision(code=decision.code)
    return out.tell_user(f"memory-governor (monitor): enforce mode would have {verb} this: {what}")


# -- prompts and sessions ----------------------------------------------------------------


def _prompt(case: _Case) -> Decision:
    if case.event.machine_made:
        return _machine_prompt(case)
    case.enter_turn(new=True)
    policy = case.policy
    verdict = case.prepared["verdict"]
    case.ledger.set_memory_need(case.session, case.turn, verdict.need)
    lines: list[str] = []
    names: list[str] = []
    recall = policy.data["mem_context"]["unlocked_by"].get("explicit_user_recall")
    if recall and case.prepared["recall"] and _may_arm(case):
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
    tokens = _add_context(case, names) if lines else 0
    case.record(decision, GOVERNOR_ROLE, delivered=tokens)
    return decision


def _machine_prompt(case: _Case) -> Decision:
    """A prompt the harness wrote (a background task reporting back) is no user request: no
    advice, nothing armed from its text, and no budget of its own. Its turn joins the turn that
    launched the task, else the session's current turn, so what it spends comes out of that
    turn's remainder: launching work that reports back never opens a fresh budget."""
    event, ledger = case.event, case.ledger
    launched = ledger.launched_in(case.session, key(event.origin_call_id)) if event.origin_call_id else None
    current, _ = ledger.touch_session(case.session, case.world.now)
    joined = launched or current
    if event.turn_id and joined:
        ledger.join_turn(case.session, key(event.turn_id), joined)
    case.enter_turn()
    decision = Decision(code="machine_prompt:launching_turn" if launched else "machine_prompt:current_turn")
    case.record(decision)
    return decision


def _add_context(case: _Case, names: list[str]) -> int:
    """Count lines the governor adds to the model's context against the turn's budget."""
    tokens = sum(case.text_tokens(name) for name in names)
    call_id = f"governor:{case.event.kind}:{case.turn}:{case.world.now}"
    case.ledger.add_committed(case.session, case.turn, call_id, GOVERNOR_ROLE, "", case.agent, tokens, case.world.now)
    return tokens


def _may_arm(case: _Case) -> bool:
    return not case.event.agent_id or bool(case.policy.data["mem_context"]["subagents_may_arm"])


_SOURCE_TRIGGERS = {"compact": "post_compact", "resume": "session_resume"}


def _session_start(case: _Case) -> Decision:
    seen = case.ledger.one("SELECT seen FROM sessions WHERE session=?", case.session)
    case.enter_turn()
    from governor.engine.delivery import reset

    reset(case)
    policy = case.policy
    trigger_name = _SOURCE_TRIGGERS.get(case.event.source or "")
    trigger = policy.data["mem_context"]["unlocked_by"].get(trigger_name or "")
    idle = trigger.get("min_idle_minutes", 0) if trigger else 0
    if trigger and idle and (seen is None or case.world.now - seen[0] < idle * 60):
        # A session the ledger has never seen (a fork gets a new id) had no idle time it can show.
        why = "unknown_session" if seen is None else f"idle_under_{idle}m"
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
    case.ledger.arm(case.session, trigger_name, trigger["scope"], trigger["uses"], case.seq, case.turn, case.world.now)
    advice = policy.data["memory_needs"]["classes"].get("continuation", {}).get("advice", "")
    decision = Decision(ev.CONTEXT if advice else ev.NONE, code=f"armed:{trigger_name}", context=advice)
    tokens = _add_context(case, ["advice:continuation"]) if advice else 0
    case.record(decision, GOVERNOR_ROLE, delivered=tokens)
    return decision


def _observe(case: _Case) -> Decision:
    """Events recorded for the audit trail only (compaction, subagent start/stop, stop); compaction
    and a subagent's start also empty a conversation context (governor.engine.delivery)."""
    case.enter_turn()
    if case.event.kind in (ev.PRE_COMPACT, ev.SUBAGENT_START):
        from governor.engine.delivery import reset

        reset(case)
    decision = Decision(code=case.event.kind)
    case.record(decision)
    return decision


# -- before a tool call ------------------------------------------------------------------


def _spec(case: _Case) -> dict[str, Any] | None:
    event = case.event
    if event.server is None or event.tool is None:
        return None
    return case.policy.tool(event.server, event.tool)


def _pre_tool(case: _Case) -> Decision:
    spec = _spec(case)
    if spec is None:
        if case.event.spilled is not None and _governs_spill(case, case.event.spilled):
            return _route(case, "spilled-result", "That file holds a memory result: what of it fits this turn's budget "
                          "was delivered as the call's result. Search (limit<=3) for what you still need.")  # fmt: skip
        route = case.prepared.get("route")
        if route is not None:
            return _route(case, route["name"], f"Use the memory server's {route['use']} tool instead.",
                          route.get("reason"))  # fmt: skip
        return _dispatch(case) if _is_dispatch(case) else Decision()
    role = spec["role"]
    ledger, event, now = case.ledger, case.event, case.world.now
    if event.call_id:
        # A call seen before is answered before any turn is looked up: a second observer of the
        # same call (an MCP proxy behind a client whose hooks decided it) must not move the turn.
        repeat = _repeat(ledger.call(case.session, key(event.call_id)))
        if repeat is not None:
            return repeat
    case.enter_turn()
    _attribute(case)
    call_id = case.new_call_id()
    repeat = _repeat(ledger.call(case.session, call_id)) if not event.call_id else None
    if repeat is not None:
        return repeat
    decision, expected = _judge(case, spec)
    if decision.kind == ev.DENY and case.policy.mode == "enforce":
        ledger.deny(case.session, case.turn, call_id, role, event.tool or "", case.agent, now)
    else:
        ttl = case.policy.data["ledger"]["reservation_ttl_seconds"]
        ledger.reserve(case.session, case.turn, call_id, role, event.tool or "", case.agent, expected, now, ttl)
        if event.call_key and decision.kind == ev.REWRITE and decision.updated_input is not None:
            rewritten = key(ev.call_key(event.tool_name, decision.updated_input))
            ledger.also_known_as(case.session, rewritten, call_id)
    extra = _add_context(case, ["static:save_over_limit"]) if decision.code == "save_over_limit" else 0
    case.record(decision, role, counted=expected, delivered=extra)
    return decision


def _repeat(prior: Any) -> Decision | None:
    """The same call seen again counts once; a refusal stays a refusal."""
    if prior is None:
        return None
    if prior[0] == "denied":
        return Decision(ev.DENY, "repeat", "memory-governor: this call was already refused; do not retry it.")
    return Decision(code="repeat")


RAW_LINES = 3  # lines of an earlier full fetch found verbatim in a dispatch prompt


def _governs_spill(case: _Case, name: str) -> bool:
    """Could `<server>-<tool>` (or a prefix of it: '' is any) be a result of a governed server?"""
    return any(name.startswith(f"{server}-") or f"{server}-".startswith(name) for server in case.policy.tools)


def _route(case: _Case, name: str, instead: str, reason: str | None = None) -> Decision:
    """A way to the memory around its tools: refused, so that what the model reads is counted."""
    case.enter_turn()
    said = (
        f"{reason} (route '{name}')"
        if reason
        else (
            f"this {case.event.tool_name} call reads the memory outside its tools (route '{name}'), where this "
            f"turn's memory limits cannot count it. {instead}"
        )
    )
    decision = Decision(ev.DENY, f"route:{name}", f"memory-governor: {said}")
    case.record(decision, "route")
    return decision


def _is_dispatch(case: _Case) -> bool:
    """A tool that starts a subagent: one the policy lists, or one the adapter says starts one."""
    return case.event.dispatches is not None or case.event.tool_name in case.policy.data["briefing"]["dispatch_tools"]


def _dispatch(case: _Case) -> Decision:
    """A subagent dispatch: memory cards within the briefing budget, and no raw L3 body."""
    case.enter_turn()
    if case.event.call_id:  # the agent may run in the background and report back later
        case.ledger.remember_launch(case.session, key(case.event.call_id), case.turn)
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
    if case.event.dispatches is not None and not (decision.kind == ev.DENY and case.policy.mode == "enforce"):
        ttl = max(case.policy.data["ledger"]["reservation_ttl_seconds"], AGENT_WINDOW_SECONDS)
        case.ledger.open_agent(case.session, case.turn, case.new_call_id(), case.event.tool_name,
                               case.event.dispatches, case.world.now, ttl)  # fmt: skip
    case.record(decision, "dispatch", counted=tokens)
    return decision


def _attribute(case: _Case) -> None:
    """A call from a harness that does not say which agent made it: the subagent a dispatch in
    this turn started and that is still running, the most restrictive when several are."""
    event = case.event
    if not event.agent_unknown or event.agent_id:
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


def _agent_ended(case: _Case, finished: bool) -> Decision:
    """A dispatch tool's after (or failure) event: the subagent it started is no longer running."""
    case.enter_turn()
    call_id = case.known_call_id()
    if call_id:
        if finished:
            case.ledger.commit(case.session, call_id, 0, case.world.now)
        else:
            case.ledger.release(case.session, call_id, case.world.now)
    decision = Decision(code="subagent_ended")
    case.record(decision, "dispatch")
    return decision


def _judge(case: _Case, spec: dict[str, Any]) -> tuple[Decision, int]:
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
            "memory-governor: this turn's task needs no memory (memory_need=none); memory retrieval is off "
            "for this turn. Go ahead without it.",
        ), 0
    if role in ("save", "summary"):
        return _judge_save(case, spec), 0
    usage = case.ledger.usage(case.session, case.turn, case.world.now)
    if role == "search":
        return _judge_search(case, spec, usage)
    if role in ("timeline", "fetch"):
        return _judge_by_id(case, spec, usage)
    return _judge_context(case, usage)


def _tier_refusal(case: _Case, role: str) -> Decision | None:
    if not case.event.agent_id:
        return None

    subagents = case.policy.data["subagents"]
    agent = case.event.agent_type or "subagent"
    if role == "summary" or (role == "save" and _save_type(case) in case.policy.data["save"]["orchestrator_only"]):
        return Decision(
            ev.DENY,
            "orchestrator_only",
            f"memory-governor: only the orchestrator saves {_save_type(case) or 'session_summary'}. Report your "
            "findings to the orchestrator instead.",
        )
    tier = case.tier(case.event.agent_type)
    allowed = subagents["tiers"][tier]["roles"]
    if role in allowed:
        return None
    can = ", ".join(allowed) or "no memory tools"
    return Decision(
        ev.DENY,
        f"tier:{tier}",
        f"memory-governor: agent '{agent}' is {tier} (may use: {can}), so it may not call {case.event.tool}. "
        "Use the memory cards in your briefing"
        + ("; save what you learn with mem_save." if "save" in allowed else "."),
    )


def _limit(case: _Case, name: str) -> tuple[int, str]:
    from governor.engine.budgets import turn_limit

    return turn_limit(case, name)


def _budget_left(case: _Case, usage: dict[str, int]) -> tuple[int, int, str]:
    budget, enforce = _limit(case, "max_memory_tokens_injected")
    return budget - usage["tokens"], budget, enforce


def _spent(case: _Case, used: int, budget: int, need: int) -> Decision:
    unit = case.policy.unit
    return Decision(
        ev.DENY,
        "token_budget",
        f"memory-governor: this turn's memory budget is spent ({used} of {budget} {unit} tokens used; this call "
        f"needs ~{need}). Work with what you have; the budget resets next turn.",
    )


def _judge_search(case: _Case, spec: dict[str, Any], usage: dict[str, int]) -> tuple[Decision, int]:
    layer = case.policy.ladder["L1"]
    per_result = layer["expected_tokens"]
    cap, enforce = _limit(case, "max_search_calls")
    searches = usage.get("search", 0)
    warn = ""
    tier_cap = _tier_search_cap(case)
    if tier_cap is not None:
        mine = case.ledger.usage(case.session, case.turn, case.world.now, agent_id=case.agent[0]).get("search", 0)
        if mine >= tier_cap:
            return Decision(
                ev.DENY,
                "tier_search_cap",
                f"memory-governor: this agent's tier allows {tier_cap} memory search(es) per turn and it has used "
                "them. Work from your briefing and the results you have.",
            ), 0
    if enforce != "off" and searches >= cap:
        if enforce == "block":
            return Decision(
                ev.DENY,
                "max_search_calls",
                f"memory-governor: this turn already used its {cap} memory search(es) (max_search_calls={cap}). "
                "Work with the results you have, or search again next turn; do not retry.",
            ), 0
        warn = f"memory-governor: search {searches + 1} this turn is over max_search_calls={cap}."
    max_limit: int | None = layer.get("max_limit")
    limit_param = spec.get("limit_param")
    asked = case.event.tool_input.get(limit_param) if limit_param else None
    requested = int(asked) if asked is not None and _is_count(asked) else None
    if requested is None:
        count = max_limit if max_limit is not None else SERVER_DEFAULT_LIMIT
    else:
        count = requested if max_limit is None else min(requested, max_limit)
    left, budget, budget_enforce = _budget_left(case, usage)
    if budget_enforce == "block" and count * per_result > left:
        fits = max(0, left // per_result) if per_result else count
        if fits < 1:
            return _spent(case, budget - left, budget, per_result), 0
        count = fits
    decision = Decision(code="allow")
    if limit_param and requested != count:
        decision = Decision(ev.REWRITE, "clamp_limit", updated_input={**case.event.tool_input, limit_param: count})
        decision.reason = f"{limit_param} {asked if asked is not None else '(unset)'} -> {count}"
    if warn:
        decision.tell_user(warn)
        decision.code = decision.code if decision.kind == ev.REWRITE else "max_search_calls_warn"
    return decision, count * per_result


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 and value == int(value)


def _tier_search_cap(case: _Case) -> int | None:
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


def _judge_by_id(case: _Case, spec: dict[str, Any], usage: dict[str, int]) -> tuple[Decision, int]:
    role = spec["role"]
    layer_name = LAYER_OF[role]
    layer = case.policy.ladder[layer_name]
    tool = case.event.tool
    if role == "fetch":
        from governor.engine.delivery import fetch_pointer

        pointer = fetch_pointer(case, spec)
        if pointer is not None:
            return Decision(ev.DENY, "delivered_once", pointer), 0
        cap, enforce = _limit(case, "max_full_fetches")
        if enforce == "block" and usage.get("fetch", 0) >= cap:
            return Decision(
                ev.DENY,
                "max_full_fetches",
                f"memory-governor: this turn already fetched {cap} full observation(s) (max_full_fetches={cap}). "
                "Use the search previews, or fetch it next turn.",
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
                f"memory-governor: {tool} {id_param}={shown} was not surfaced by a search or timeline result in this "
                "turn. Search first (limit<=3) and use an id it returns; do not guess ids.",
            ), 0
    expected = layer["expected_tokens"]
    left, budget, enforce = _budget_left(case, usage)
    if enforce == "block" and expected > left:
        return _spent(case, budget - left, budget, expected), 0
    return _clamp_neighbours(case, spec, layer), expected


def _clamp_neighbours(case: _Case, spec: dict[str, Any], layer: dict[str, Any]) -> Decision:
    """L2: how many neighbours a timeline shows before and after, clamped to the ladder's
    max_before/max_after (a larger or missing count is rewritten, never refused)."""
    updated = dict(case.event.tool_input)
    for param_key, max_key in (("before_param", "max_before"), ("after_param", "max_after")):
        param, most = spec.get(param_key), layer.get(max_key)
        if not param or most is None:
            continue
        asked = updated.get(param)
        count = int(asked) if asked is not None and _is_count(asked) else SERVER_DEFAULT_NEIGHBOURS
        if asked is None and count <= most:
            continue
        if asked is None or not _is_count(asked) or count > most:
            updated[param] = min(count, most)
    if updated == case.event.tool_input:
        return Decision(code="allow")
    changed = ", ".join(f"{k} {case.event.tool_input.get(k, '(unset)')} -> {v}" for k, v in updated.items()
                        if case.event.tool_input.get(k) != v)  # fmt: skip
    decision = Decision(ev.REWRITE, "clamp_neighbours", updated_input=updated)
    decision.reason = changed
    return decision


def _judge_context(case: _Case, usage: dict[str, int]) -> tuple[Decision, int]:
    ctx = case.policy.data["mem_context"]
    code = "allow"
    armed: list[str] = []
    if not ctx["allow"]:
        armed = [n for n in case.ledger.armed(case.session, case.seq, case.turn) if n in ctx["unlocked_by"]]
        if not armed:
            search = _tool_for_role(case, "search")
            return Decision(
                ev.DENY,
                "mem_context_locked",
                f"memory-governor: {case.event.tool} (the whole-memory dump) is off outside post-compaction recovery, "
                f"a resumed session, or an explicit request to recall everything. Use {search} with a topic prefix "
                f"(limit<={case.policy.ladder['L1'].get('max_limit') or 3}) instead.",
            ), 0
    expected = ctx["expected_tokens"]
    left, budget, enforce = _budget_left(case, usage)
    if enforce == "block" and expected > left:
        return _spent(case, budget - left, budget, expected), 0  # refused before the trigger is spent
    if armed:
        case.ledger.consume(case.session, armed[0])
        code = f"unlocked_by:{armed[0]}"
    return Decision(code=code), expected


def _tool_for_role(case: _Case, role: str) -> str:
    """The tool of the same server that plays `role` (for advice that names real tools)."""
    tools = case.policy.tools.get(case.event.server or "", {})
    return next((name for name, spec in tools.items() if spec["role"] == role), "the search tool")


def _save_type(case: _Case) -> str | None:
    spec = _spec(case) or {}
    if spec.get("role") == "summary":
        return "session_summary"
    param = spec.get("type_param")
    value = case.event.tool_input.get(param) if param else None
    if value is None:
        return spec.get("default_type")
    return str(value)


def _judge_save(case: _Case, spec: dict[str, Any]) -> Decision:
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
    cap, enforce = _limit(case, "max_save_calls_per_turn")
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


# -- after a tool call -------------------------------------------------------------------


def _post_tool(case: _Case) -> Decision:
    spec = _spec(case)
    if spec is None:
        return _agent_ended(case, True) if case.event.dispatches is not None else Decision()
    role = spec["role"]
    case.enter_turn()
    ledger, event, now = case.ledger, case.event, case.world.now
    call_id = case.known_call_id()
    prior = ledger.call(case.session, call_id) if call_id else None
    if role in ("save", "summary"):
        if prior is None:
            ledger.add_committed(case.session, case.turn, call_id or f"anon:{now}", role, event.tool or "", case.agent,
                                 0, now)  # fmt: skip
        else:
            ledger.commit(case.session, call_id or "", 0, now)
        decision = Decision(code="saved")
        case.record(decision, role)
        return decision
    return _count_and_trim(case, spec, call_id, prior)


def _count_and_trim(case: _Case, spec: dict[str, Any], call_id: str | None, prior: Any) -> Decision:
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
    budget, enforce = _limit(case, "max_memory_tokens_injected")
    left = max(0, budget - (usage["tokens"] - own))
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
        costs = case.prepared["costs"]
        room = left if enforce == "block" else None
        note_room = tally.count(_note(case, len(parsed.entries), len(parsed.entries), left, budget, total))
        fits = None if room is None else max(0, room - note_room - case.prepared["frame"])
        chosen = select(costs.__getitem__, order, fits, limit=max_entries, over_budget=trim["over_budget"],
                        fill=trim["fill"])  # fmt: skip
        kept = list(chosen.kept)
        if chosen.truncated is not None:
            _truncate(parsed, chosen.truncated, chosen.truncate_to, tally)
        rendered, delivered, kept = _render_within(case, parsed, kept, room, budget, tally, total)
        kept_all = set(kept)
        code = ("trimmed" if over and enforce == "block" else "l1_max_results" if too_many
                else "delivered_in_place" if event.result_elsewhere else "deduped")  # fmt: skip
        decision = Decision(ev.REPLACE, code, updated_output=rendered)
        deduped = sum(case.prepared["saved_by"].get(i, 0) for i in kept_all)
        whole = kept_all - set(repeats) - {chosen.truncated}
    elif over and enforce == "warn":
        decision = Decision(code="token_budget_warn").tell_user(
            f"memory-governor: this turn's memory reached {budget - left + total} of {budget} "
            f"{case.policy.unit} tokens (over budget; warn only)."
        )
    if case.policy.mode == "monitor":
        delivered, kept_all = total, set(range(len(parsed.entries)))  # the model got the whole result
        whole, deduped = set(kept_all), 0
    if context is not None:
        delivery.remember(ledger, case.session, context, parsed, case.prepared["prints"], whole, event.server or "",
                          role, case.seq, now)  # fmt: skip
    if call_id and prior is not None:
        ledger.commit(case.session, call_id, delivered, now)
    else:
        ledger.add_committed(case.session, case.turn, call_id or f"anon:{now}", role, event.tool or "", case.agent,
                             delivered, now)  # fmt: skip
    if role in ("search", "timeline"):
        ledger.surface(case.session, case.turn, results.surfaced(parsed, kept_all))
    if role == "fetch" and kept_all:
        delivered_text = decision.updated_output if decision.kind == ev.REPLACE and decision.updated_output else text
        from governor.engine.screening import line_digests

        ledger.remember_fetched(case.session, line_digests(delivered_text))
    case.record(decision, role, counted=total, delivered=delivered, saved=max(0, total - delivered),
                deduped=min(deduped, max(0, total - delivered)))  # fmt: skip
    return decision


def _point_repeats(case: _Case, parsed: Any, context: str | None, tally: Any) -> tuple[list[int], int]:
    """Delivered-once: the entries this context already holds whole become pointer lines, costed
    as such (governor.engine.delivery); (their indexes, the tokens that saves, as estimated)."""
    case.prepared["saved_by"] = {}
    if context is None:
        return [], 0
    from governor.engine.delivery import replace_repeats

    repeats = replace_repeats(case.ledger, case.session, context, parsed, case.prepared["prints"])
    costs = case.prepared["costs"]
    for index in repeats:
        pointer = tally.count(parsed.entries[index].text)
        case.prepared["saved_by"][index] = max(0, costs[index] - pointer)
        costs[index] = pointer
    return repeats, sum(case.prepared["saved_by"].values())


def _note(case: _Case, held: int, total: int, left: int, budget: int, size: int = 0) -> str:
    unit = case.policy.unit
    max_limit = case.policy.ladder["L1"].get("max_limit")
    if (_spec(case) or {}).get("role") == "search" and max_limit is not None and size <= left and total > max_limit:
        return (
            f"[memory-governor] {held} of {total} entries held back: a search returns at most {max_limit} results "
            "(the retrieval ladder). Narrow the query for others."
        )
    if case.event.tool and (_spec(case) or {}).get("role") == "fetch" and held == total:
        return (
            f"[memory-governor] this observation (~{size} {unit} tokens) is held back: {left} of this turn's "
            f"{budget}-token memory budget are left. Work from the search preview, or fetch it next turn."
        )
    return (
        f"[memory-governor] {held} of {total} entries held back: this turn's memory budget is {budget} "
        f"{unit} tokens. Narrow the query, or ask again next turn."
    )


def _render_within(
    case: _Case, parsed: Any, kept: list[int], left: int | None, budget: int, tally: Any, size: int
) -> tuple[str, int, list[int]]:
    """Render the kept entries plus the note; drop the lowest-ranked until the exact count fits.
    A frame (headers, envelope) that alone exceeds what is left is never rendered. Returns the
    text, its count and the entries it holds."""
    from governor.engine.results import render

    kept = list(kept)
    if left is not None and case.prepared["frame"] > left:
        kept = []
    while kept or left is None or case.prepared["frame"] <= left:
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


def _tool_failed(case: _Case) -> Decision:
    spec = _spec(case)
    if spec is None:
        return _agent_ended(case, False) if case.event.dispatches is not None else Decision()
    case.enter_turn()
    call_id = case.known_call_id()
    if call_id:
        case.ledger.release(case.session, call_id, case.world.now)
    decision = Decision(code="released")
    case.record(decision, spec["role"])
    return decision


_HANDLERS = {
    ev.PROMPT: _prompt,
    ev.SESSION_START: _session_start,
    ev.PRE_TOOL: _pre_tool,
    ev.POST_TOOL: _post_tool,
    ev.TOOL_FAILED: _tool_failed,
    ev.PRE_COMPACT: _observe,
    ev.SUBAGENT_START: _observe,
    ev.SUBAGENT_STOP: _observe,
    ev.STOP: _observe,
}
