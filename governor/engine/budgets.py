"""Budgets by memory need: the turn's limits for the class its prompt was classified into; what
the turn's memory budget has left, and the refusal when a call does not fit.

A class under `memory_needs.classes` may set its own `max_memory_tokens_injected`,
`max_search_calls` and `max_full_fetches`; each replaces that limit's value for a turn of the
class (the limit's `enforce` stays). A turn with no class (no prompt yet), or a class that sets
none, gets the limit itself. A local override may only tighten these like every other limit
(governor.policy.diff compares a class's value with what it inherits). The advice line the
prompt gets names the class's budget when it has one of its own.

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Decision

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


CLASS_LIMITS = ("max_memory_tokens_injected", "max_search_calls", "max_full_fetches")
_WORDS = {"max_memory_tokens_injected": "{} {unit} tokens", "max_search_calls": "{} search(es)",
          "max_full_fetches": "{} full fetch(es)"}  # fmt: skip


def class_limits(policy_data: dict[str, Any], need: str | None) -> dict[str, int]:
    """The limits class `need` sets for itself (none for an unknown or unset class)."""
    spec = policy_data["memory_needs"]["classes"].get(need or "") or {}
    return {name: int(spec[name]) for name in CLASS_LIMITS if spec.get(name) is not None}


def turn_limit(case: Any, name: str) -> tuple[int, str]:
    """(value, enforce) of limit `name` for this event's turn: its class's value where it sets one."""
    value, enforce = case.policy.limit(name)
    if name not in CLASS_LIMITS or not case.turn:
        return value, enforce
    if "need" not in case.prepared:
        case.prepared["need"] = case.ledger.memory_need(case.session, case.turn)
    own = class_limits(case.policy.data, case.prepared["need"]).get(name)
    return (own, enforce) if own is not None else (value, enforce)


def narrower(policy_data: dict[str, Any], need: str, than: str) -> bool:
    """Does a turn of class `need` get less than one of class `than`: no limit larger, one smaller?"""

    def values(name: str | None) -> list[int]:
        own = class_limits(policy_data, name)
        return [own.get(limit, int(policy_data["limits"][limit]["value"])) for limit in CLASS_LIMITS]

    pairs = list(zip(values(need), values(than), strict=True))
    return all(a <= b for a, b in pairs) and any(a < b for a, b in pairs)


def largest_budget(policy_data: dict[str, Any]) -> int:
    """The largest token budget any turn may have: how far a result is counted before its turn is known."""
    values = [policy_data["limits"]["max_memory_tokens_injected"]["value"]]
    for spec in policy_data["memory_needs"]["classes"].values():
        if spec.get("max_memory_tokens_injected") is not None:
            values.append(spec["max_memory_tokens_injected"])
    return int(max(values))


def advice_line(policy_data: dict[str, Any], need: str) -> str:
    """The line a prompt of class `need` is told: the class's advice, and its budget when it has one."""
    spec = policy_data["memory_needs"]["classes"].get(need) or {}
    advice = str(spec.get("advice") or "")
    own = class_limits(policy_data, need)
    if not own:
        return advice
    unit = policy_data["token_counter"]
    budget = ", ".join(_WORDS[name].format(value, unit=unit) for name, value in own.items())
    head = advice.rstrip() if advice else f"memory_need={need}:"
    return f"{head} This turn's memory budget: {budget}."


def budget_left(case: Any, usage: dict[str, int]) -> tuple[int, int, str]:
    """(tokens left, the budget, its enforce) of this turn's memory budget, by `usage` so far."""
    budget, enforce = case.limit("max_memory_tokens_injected")
    return budget - usage["tokens"], budget, enforce


def spent(case: Any, used: int, budget: int, need: int) -> Decision:
    """The refusal of a call the turn's memory budget cannot hold."""
    unit = case.policy.unit
    return Decision(
        ev.DENY,
        "token_budget",
        f"memory-governor: this turn's memory budget is spent ({used} of {budget} {unit} tokens; this call needs "
        f"~{need}). Work with what you have.",
    )
