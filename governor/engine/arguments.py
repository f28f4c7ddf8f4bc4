"""A governed call's arguments: whether one holds a count, and the decision that rewrites them
(its reason naming each change).

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
