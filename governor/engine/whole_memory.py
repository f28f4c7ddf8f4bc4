"""Deciding a mem_context call (the whole-memory dump) before it runs: locked unless a trigger is
armed (a compaction, a resume after a break, an explicit recall) or the policy serves it as a
budgeted read (`outside_triggers: budgeted`), the budget's pre-check before a trigger is spent,
and, once allowed, asking the server for what fits (Engram v2's `max_bytes` near what the turn
has left, and `compact`). Whatever the server sends is then cut to what the turn has left, in
whole entries of its sections (post_tool): Engram v1.7 ignores `max_bytes`. Split from
governor.engine.pre_tool, which calls it.

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.arguments import is_count, own_project, rewritten
from governor.engine.budgets import budget_left, spent
from governor.engine.events import Decision

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.engine.case import Case


def _unlocks(triggers: dict[str, Any]) -> str:
    """What else unlocks mem_context in this policy, in the words of the refusal."""
    compact = triggers.get("post_compact") or {}
    head = f" (when the memory holds a {compact['requires_topic']}* topic)" if compact.get("requires_topic") else ""
    ways = []
    resume = triggers.get("session_resume")
    if resume is not None and resume.get("armed_by") == "dispatch":
        ways.append(f"the first dispatch after a saved {resume.get('requires_topic') or 'state/wave/'}* wave state")
    elif resume is not None:
        idle = resume.get("min_idle_minutes") or 0
        ways.append("a resumed session" + (f" after {idle} idle minutes" if idle else ""))
    if "explicit_user_recall" in triggers:
        ways.append("a turn where the user's own prompt asks for everything remembered "
                    '("recall everything stored for this project", "recordar todo")')  # fmt: skip
    if not ways:
        return head
    return head + ", " + (", ".join(ways[:-1]) + " or " if len(ways) > 1 else "") + ways[-1]


def judge_context(case: Case, usage: dict[str, int]) -> tuple[Decision, int]:
    ctx = case.policy.data["mem_context"]
    code = "allow"
    armed: list[str] = []
    budgeted = False  # a budgeted read: outside its triggers, served within what the turn has left
    if not ctx["allow"]:
        armed = [n for n in case.ledger.armed(case.session, case.seq, case.turn) if n in ctx["unlocked_by"]]
        # A trigger unlocks at most its `uses` calls in any one turn, however often it is armed in it: a
        # compaction's SessionStart or a prompt sent again (by the harness, or by the model running the
        # hook itself) arms it anew, and must not unlock the whole memory again in the same turn.
        done = usage.get((case.spec() or {}).get("role", "context"), 0)  # this turn's calls granted so far
        again = bool(armed)
        armed = [n for n in armed if done < int(ctx["unlocked_by"][n].get("uses", 1))]
        again = again and not armed
        budgeted = not armed and ctx.get("outside_triggers") == "budgeted"
        if not armed and not budgeted:
            search = _tool_for_role(case, "search")
            limit = case.policy.ladder["L1"].get("max_limit") or 3
            if again:
                return Decision(
                    ev.DENY,
                    "mem_context_used_this_turn",
                    f"memory-governor: {case.event.tool} (the whole-memory dump) was already used in this turn, as "
                    f"often as what unlocks it allows in one turn. Use {search} (limit<={limit}) instead.",
                ), 0
            case.notices.append(
                f"memory-governor: {case.event.tool} (the whole-memory dump) is off outside post-compaction recovery"
                f"{_unlocks(ctx['unlocked_by'])}; the agent was told to use {search} (limit<={limit}) instead."
            )
            return Decision(
                ev.DENY,
                "mem_context_locked",
                f"memory-governor: {case.event.tool} (the whole-memory dump) is off outside post-compaction recovery. "
                f"Use {search} (limit<={limit}) instead.",
            ), 0
    expected = ctx["expected_tokens"]
    left, budget, enforce = budget_left(case, usage)
    if budgeted:  # whatever is left is what it gets, while that holds more than its frame
        code, expected = "budgeted_read", min(expected, max(0, left))
        need = case.text_tokens("static:search_frame") + 1
        if enforce == "block" and left < need:
            return spent(case, budget - left, budget, need), 0
    elif enforce == "block" and expected > left:
        return spent(case, budget - left, budget, expected), 0  # refused before the trigger is spent
    code = f"unlocked_by:{armed[0]}" if armed else code
    decision = _ask_to_fit(case, code, left if enforce == "block" else None)
    if armed and not (case.event.no_rewrite and decision.kind == ev.REWRITE):  # a refused clamp spends nothing
        case.ledger.consume(case.session, armed[0])
    return decision, expected


# Bytes per token of the policy's unit, at the low end for memory text (so what the server sends
# fits), and the most Engram v2's mem_context returns.
BYTES_PER_TOKEN = {"chars": 1, "chars_div4": 4}
BPE_BYTES_PER_TOKEN = 3
MAX_CONTEXT_BYTES = 65536


def _ask_to_fit(case: Case, code: str, left: int | None) -> Decision:
    """An allowed mem_context asks the server for what fits (where the map names the arguments):
    `max_bytes` near what the turn has left, less room for the governor's note, and `compact`; the
    result is still counted and trimmed after it. A smaller max_bytes the model asked for stays.
    With L1's other_projects off, it reads this session's project only, as a search does."""
    spec = case.spec() or {}
    size, compact = spec.get("max_bytes_param"), spec.get("compact_param")
    updated = dict(case.event.tool_input)
    own_project(case, spec, updated)
    if size and left is not None:
        room = max(1, left - case.text_tokens("static:search_frame"))
        most = min(MAX_CONTEXT_BYTES, room * BYTES_PER_TOKEN.get(case.policy.unit, BPE_BYTES_PER_TOKEN))
        asked = updated.get(size)
        if not (is_count(asked) and 0 < int(asked or 0) <= most):
            updated[size] = most
    if compact and updated.get(compact) is not True:
        updated[compact] = True
    return rewritten(case, code, code, updated)


def _tool_for_role(case: Case, role: str) -> str:
    """The tool of the same server that plays `role` (for advice that names real tools)."""
    tools = case.policy.tools.get(case.event.server or "", {})
    return next((name for name, spec in tools.items() if spec["role"] == role), "the search tool")
