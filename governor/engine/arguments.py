"""A governed call's arguments: whether one holds a count, the project it may read, and the
decision that rewrites them (its reason naming each change).

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Decision

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 and value == int(value)


def rewritten(case: Any, code: str, rewrite_code: str, updated: dict[str, Any]) -> Decision:
    """The call as it was asked (`code`), or rewritten to `updated`, its reason naming each change."""
    if updated == case.event.tool_input:
        return Decision(code=code)
    changed = ", ".join(f"{k} {case.event.tool_input.get(k, '(unset)')} -> {v}" for k, v in updated.items()
                        if case.event.tool_input.get(k) != v)  # fmt: skip
    decision = Decision(ev.REWRITE, rewrite_code, updated_input=updated)
    decision.reason = changed
    return decision


def refused(event: Any, decision: Decision) -> Decision:
    """A rewrite the harness cannot apply (`Event.no_rewrite`), as a refusal naming the arguments
    to call again with: what the rewrite changed, and what it dropped."""
    import json

    updated = decision.updated_input or {}
    again = {k: v for k, v in updated.items() if event.tool_input.get(k) != v}
    dropped = [k for k in event.tool_input if k not in updated]
    asked = json.dumps(again, ensure_ascii=False, sort_keys=True)
    without = f" and without {', '.join(dropped)}" if dropped else ""
    out = Decision(ev.DENY, decision.code, f"memory-governor: call {event.tool_name} again with {asked}{without}, "
                   f"the other arguments as they were ({decision.reason}). This call did not run and counts "
                   "nothing.")  # fmt: skip
    out.user_message, out.context = decision.user_message, decision.context
    return out


def own_project(case: Any, spec: dict[str, Any], updated: dict[str, Any]) -> list[str]:
    """L1 with other_projects off: a search (or a mem_context) reads the session's project only.
    `all_projects` is clamped to false; a `project` other than the session's folder name is dropped,
    so the server reads the project it detects for the session. What changed, for the decision's
    reason."""
    if case.policy.ladder["L1"].get("other_projects", True):
        return []
    changed = []
    wide, named = spec.get("all_projects_param"), spec.get("project_param")
    if wide and wide in updated and updated[wide] is not False:
        changed.append(f"{wide} {updated[wide]} -> false")
        updated[wide] = False
    if named and named in updated:
        import os

        own = os.path.basename(os.path.normpath(case.world.project or "")).casefold()
        asked = updated[named]
        if not isinstance(asked, str) or asked.strip().casefold() != own:
            changed.append(f"{named} {asked!r} dropped (this session's project only)")
            del updated[named]
    return changed
