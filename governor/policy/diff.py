"""What a policy change does: every value tightened, loosened or just changed.

Used by `policy diff` (a CI job requires review when anything is loosened) and by layering
(a local override may only tighten). Both compare the full dumped policies, so a key left
out of a file compares as its inherited value.
"""

from __future__ import annotations

import math
from typing import Any

Path = tuple[str, ...]

TIGHTENED, LOOSENED, CHANGED = "tightened", "loosened", "changed"

# Values listed from the tightest to the loosest.
_ORDERS: dict[Path, list[Any]] = {
    ("mode",): ["enforce", "monitor"],
    ("on_error",): ["closed", "open"],
    ("limits", "*", "enforce"): ["block", "warn", "off"],
    ("window", "*", "enforce"): ["block", "warn", "off"],
    ("save", "never_save", "*"): ["block", "warn", "off"],
    ("save", "topic_keys"): ["block", "warn", "off"],
    ("save", "max_chars", "enforce"): ["block", "warn", "off"],
    ("briefing", "raw_l3_body"): ["block", "warn", "off"],
    ("briefing", "max_tokens", "enforce"): ["block", "warn", "off"],
    ("memory_needs", "on_none"): ["deny", "advise"],
    ("trimming", "over_budget"): ["omit", "truncate", "keep-top"],
    ("trimming", "fill"): ["stop", "skip"],
    ("mem_context", "unlocked_by", "*", "scope"): ["this_turn", "next_turn", "once"],
    # The first dispatch arms resume only where a saved wave state exists: narrower than any resume.
    ("mem_context", "unlocked_by", "*", "armed_by"): ["dispatch", "session_start"],
    ("ladder", "*", "snippets_only"): [True, False],
    ("ladder", "*", "requires_surfaced_id"): [True, False],
    ("ladder", "*", "other_projects"): [False, True],
    # A server known by its tools on any server, and its unmapped tools counted, govern more.
    ("tools", "*", "any_server"): [True, False],
    ("tools", "*", "unmapped"): ["count", "pass"],
    ("mem_context", "allow"): [False, True],
    ("mem_context", "outside_triggers"): ["deny", "budgeted"],
    ("mem_context", "subagents_may_arm"): [False, True],
    ("subagents", "honor_front_matter"): [False, True],
    ("ledger", "record_contents"): [False, True],
    # off delivers an entry the model already holds again, at full price.
    ("delivery", "dedupe"): ["on", "off"],
    # Text admitted per unit: a char admits less text than a token.
    ("token_counter",): ["chars", {"o200k_base", "cl100k_base", "chars_div4"}],
}
_HIGHER_IS_LOOSER: list[Path] = [
    ("limits", "*", "value"),
    ("window", "*", "value"),
    ("ladder", "*", "max_limit"),
    ("ladder", "*", "max_tokens"),
    ("ladder", "*", "max_before"),
    ("ladder", "*", "max_after"),
    ("mem_context", "unlocked_by", "*", "uses"),
    ("briefing", "max_tokens", "value"),
    ("subagents", "tiers", "*", "max_search_calls"),
    ("save", "max_chars", "value"),
    # A class's own limit, compared with what it inherits when unset (see _class_limits).
    ("memory_needs", "classes", "*", "max_memory_tokens_injected"),
    ("memory_needs", "classes", "*", "max_search_calls"),
    ("memory_needs", "classes", "*", "max_full_fetches"),
]
CLASS_LIMITS = ("max_memory_tokens_injected", "max_search_calls", "max_full_fetches")
_LOWER_IS_LOOSER: list[Path] = [
    # The same counts over a shorter window admit more memory an hour.
    ("window", "minutes"),
    ("ladder", "*", "expected_tokens"),
    ("mem_context", "expected_tokens"),
    ("mem_context", "unlocked_by", "*", "min_idle_minutes"),
    # A lower bar lets the model or fewer cue words lift a prompt out of the default (none: no memory).
    ("memory_needs", "model_threshold"),
    ("memory_needs", "cue_threshold"),
]
# A condition set where there was none permits less (a topic the memory must hold).
_NONE_IS_LOOSER: list[Path] = [("mem_context", "unlocked_by", "*", "requires_topic")]
# Sets where an added member permits more.
_ADDED_IS_LOOSER: list[Path] = [
    ("save", "allowed_types"),
    ("mem_context", "unlocked_by", "*", "phrases"),
    ("subagents", "tiers", "*", "roles"),
    ("loosen_allowed",),
]
_ADDED_IS_TIGHTER: list[Path] = [
    ("save", "orchestrator_only"),
    ("briefing", "dispatch_tools"),
    ("save", "speakers", "human"),
    ("save", "speakers", "machine"),
    ("routes", "*", "tools"),
]
# Mappings where an added key permits more (a new trigger unlocks mem_context more often).
_KEY_ADDED_IS_LOOSER: list[Path] = [("mem_context", "unlocked_by")]


class Change:
    __slots__ = ("kind", "new", "note", "old", "path")

    def __init__(self, path: str, kind: str, old: Any, new: Any, note: str = "") -> None:
        self.path, self.kind, self.old, self.new, self.note = path, kind, old, new, note

    def __str__(self) -> str:
        text = f"{self.kind:9} {self.path}: {_show(self.old)} -> {_show(self.new)}"
        return f"{text}  ({self.note})" if self.note else text

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "old": self.old, "new": self.new, "note": self.note}


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, set, frozenset)):
        return "[" + ", ".join(str(v) for v in sorted(value, key=str)) + "]"
    return str(value)


def _matches(path: Path, pattern: Path) -> bool:
    return len(path) == len(pattern) and all(p == "*" or p == q for q, p in zip(path, pattern, strict=True))


def _find(path: Path, patterns: list[Path]) -> bool:
    return any(_matches(path, p) for p in patterns)


def _dotted(path: Path) -> str:
    return ".".join(path)


def _rank(order: list[Any], value: Any) -> int | None:
    for index, item in enumerate(order):
        if value == item or (isinstance(item, set) and value in item):
            return index
    return None


def _scalar(path: Path, old: Any, new: Any) -> Change:
    where = _dotted(path)
    for pattern, order in _ORDERS.items():
        if _matches(path, pattern):
            a, b = _rank(order, old), _rank(order, new)
            if a is not None and b is not None and a != b:
                return Change(where, LOOSENED if b > a else TIGHTENED, old, new)
            return Change(where, CHANGED, old, new)
    if _find(path, _NONE_IS_LOOSER) and (old is None) != (new is None):
        return Change(where, LOOSENED if new is None else TIGHTENED, old, new)
    if _find(path, _HIGHER_IS_LOOSER) or _find(path, _LOWER_IS_LOOSER):
        before = math.inf if old is None else float(old)
        after = math.inf if new is None else float(new)
        looser = after > before if _find(path, _HIGHER_IS_LOOSER) else after < before
        return Change(where, LOOSENED if looser else TIGHTENED, old, new)
    return Change(where, CHANGED, old, new)


def _sets(path: Path, old: list[Any], new: list[Any]) -> list[Change]:
    added = sorted(set(new) - set(old), key=str)
    removed = sorted(set(old) - set(new), key=str)
    where = _dotted(path)
    if _find(path, _ADDED_IS_LOOSER):
        add_kind, remove_kind = LOOSENED, TIGHTENED
    elif _find(path, _ADDED_IS_TIGHTER):
        add_kind, remove_kind = TIGHTENED, LOOSENED
    else:
        if old == new:
            return []
        return [Change(where, CHANGED, old, new)]
    out = [Change(where, add_kind, None, item, "added") for item in added]
    out += [Change(where, remove_kind, item, None, "removed") for item in removed]
    return out


def _walk(path: Path, old: Any, new: Any, out: list[Change]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            child = (*path, str(key))
            if key not in old or key not in new:
                present = key in new
                if _find(path, _KEY_ADDED_IS_LOOSER):
                    kind = LOOSENED if present else TIGHTENED
                else:
                    kind = CHANGED
                out.append(Change(_dotted(child), kind, old.get(key), new.get(key), "added" if present else "removed"))
                continue
            _walk(child, old[key], new[key], out)
        return
    if isinstance(old, list) and isinstance(new, list):
        out.extend(_sets(path, old, new))
        return
    if old != new:
        out.append(_scalar(path, old, new))


def _tool_table(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for mapping in tools:
        for server in mapping["servers"]:
            whole: dict[str, Any] = {k: mapping[k] for k in ("any_server", "tool_prefix", "unmapped") if k in mapping}
            for tool, spec in mapping["map"].items():
                table[f"{server}/{tool}"] = {"format": mapping["format"], **whole, **spec}
    return table


def _tier_roles(policy: dict[str, Any], tier: str) -> set[str]:
    return set(policy["subagents"]["tiers"].get(tier, {}).get("roles", []))


def _agent_tiers(old: dict[str, Any], new: dict[str, Any], out: list[Change]) -> None:
    """An agent's effective tier, compared by what the tier lets it do."""
    old_sub, new_sub = old["subagents"], new["subagents"]
    agents = sorted(set(old_sub["agents"]) | set(new_sub["agents"]) | {"(default)"})
    for agent in agents:
        if agent == "(default)":
            a, b = old_sub["default_tier"], new_sub["default_tier"]
            where = "subagents.default_tier"
        else:
            a = old_sub["agents"].get(agent, old_sub["default_tier"])
            b = new_sub["agents"].get(agent, new_sub["default_tier"])
            where = f"subagents.agents.{agent}"
        if a == b:
            continue  # a change to the tier itself is reported under subagents.tiers
        ra, rb = _tier_roles(old, a), _tier_roles(new, b)
        if ra == rb:
            kind = CHANGED
        elif rb >= ra:
            kind = LOOSENED
        elif rb <= ra:
            kind = TIGHTENED
        else:
            kind = LOOSENED  # gains some roles and loses others: it can do something it could not
        out.append(Change(where, kind, a, b, f"roles {_show(ra)} -> {_show(rb)}"))


def _class_limits(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Copies where a class limit set on one side only is, on the other, the turn limit it inherits:
    a class budget added above the turn's limit loosens, below it tightens (unset is not unlimited)."""
    sides = []
    for side, other in ((old, new), (new, old)):
        side = {**side, "memory_needs": {**side["memory_needs"], "classes": dict(side["memory_needs"]["classes"])}}
        classes = side["memory_needs"]["classes"]
        for name, spec in classes.items():
            there = other["memory_needs"]["classes"].get(name) or {}
            filled = dict(spec)
            for limit in CLASS_LIMITS:
                if filled.get(limit) is None and there.get(limit) is not None:
                    filled[limit] = side["limits"][limit]["value"]
            classes[name] = filled
        sides.append(side)
    return sides[0], sides[1]


def _with_window(policy: dict[str, Any]) -> dict[str, Any]:
    """A policy dumped before the per-user window existed had none: the model's unset window."""
    if "window" in policy:
        return policy
    from governor.policy.model import Window

    return {**policy, "window": Window().model_dump()}


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every difference between two full (dumped) policies, classified."""
    old, new = _class_limits(_with_window(old), _with_window(new))
    out: list[Change] = []
    old_tools, new_tools = _tool_table(old["tools"]), _tool_table(new["tools"])
    for name in sorted(set(old_tools) | set(new_tools)):
        where = f"tools.{name}"
        if name not in new_tools:
            out.append(Change(where, LOOSENED, old_tools[name]["role"], None, "no longer governed"))
        elif name not in old_tools:
            out.append(Change(where, TIGHTENED, None, new_tools[name]["role"], "now governed"))
        else:
            _walk(("tools", name), old_tools[name], new_tools[name], out)
    _agent_tiers(old, new, out)
    old_routes = {r["name"]: r for r in old.get("routes", [])}
    new_routes = {r["name"]: r for r in new.get("routes", [])}
    for name in sorted(set(old_routes) | set(new_routes)):
        where = f"routes.{name}"
        if name not in new_routes:
            out.append(Change(where, LOOSENED, route_summary(old_routes[name]), None, "no longer refused"))
        elif name not in old_routes:
            out.append(Change(where, TIGHTENED, None, route_summary(new_routes[name]), "now refused"))
        else:
            _walk(("routes", name), old_routes[name], new_routes[name], out)
    rest_old = {k: v for k, v in old.items() if k not in ("tools", "routes")}
    rest_new = {k: v for k, v in new.items() if k not in ("tools", "routes")}
    for side in (rest_old, rest_new):
        side["subagents"] = {k: v for k, v in side["subagents"].items() if k not in ("agents", "default_tier")}
    _walk((), rest_old, rest_new, out)
    return out


def route_summary(route: dict[str, Any]) -> str:
    """What a route refuses, in a few words: its pattern, and how many files and commands it protects."""
    parts = [f"pattern {route['pattern']}"] if route.get("pattern") else []
    parts += [f"{len(route[k])} {k} target(s)" for k in ("writes", "runs") if route.get(k)]
    return "; ".join(parts)


def is_allowed(change: Change, allowed: list[str]) -> bool:
    return any(change.path == key or change.path.startswith(key + ".") for key in allowed)
