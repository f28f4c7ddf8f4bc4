"""Token-bounded selection: which ranked entries fit a budget.

One rule set for both uses, a hook trimming a memory-server result and a briefing packed
for a dispatch (governor.engine.briefing):

- `over_budget`: what happens to the first entry that does not fit what is left:
  `omit` (RFC 0113: left out, never cut mid-entry; the default), `truncate` (loomflow: cut
  to what is left with a marker, and packing stops), `keep-top` (the top entry is kept whole
  even over budget; later misfits are omitted).
- `fill`: after a misfit, `stop` (the default: the selection is a prefix of the ranking) or
  `skip` (keep trying smaller entries further down).
- `limit`: at most this many entries (with a budget, whichever yields fewer wins).
- pinned entries go first, count against the budget, and are never dropped.

Hot path: standard library only.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

OVER_BUDGET = ("omit", "truncate", "keep-top")
FILL = ("stop", "skip")
TRUNCATION_MARKER = "…[truncated]"


class Selection:
    __slots__ = ("kept", "omitted", "tokens", "truncate_to", "truncated")

    def __init__(self) -> None:
        self.kept: list[int] = []  # entry indexes, in ranked order
        self.omitted: list[int] = []
        self.tokens = 0
        self.truncated: int | None = None  # the entry cut to fit (over_budget=truncate)
        self.truncate_to = 0  # tokens left for it


def select(
    cost: Callable[[int], int],
    order: list[int],
    budget: int | None,
    *,
    limit: int | None = None,
    over_budget: str = "omit",
    fill: str = "stop",
    pinned: frozenset[int] = frozenset(),
) -> Selection:
    """Choose from entries `order` (ranked best first); `cost(i)` is entry i's tokens.

    `cost` is called only for entries the selection reaches, so with the default stop rule a
    large candidate set costs the count of a prefix, not of every entry."""
    out = Selection()
    for index in order:
        if index in pinned:
            out.kept.append(index)
            out.tokens += cost(index)
    chosen = 0
    stopped = False
    for index in order:
        if index in pinned:
            continue
        if stopped or (limit is not None and chosen >= limit):
            out.omitted.append(index)
            continue
        left = None if budget is None else budget - out.tokens
        size = cost(index)
        if left is None or size <= left:
            out.kept.append(index)
            out.tokens += size
            chosen += 1
            continue
        if over_budget == "truncate" and left is not None and left > 0:
            out.kept.append(index)
            out.truncated, out.truncate_to = index, left
            out.tokens += left
            chosen += 1
            stopped = True
            continue
        if over_budget == "keep-top" and chosen == 0:
            out.kept.append(index)
            out.tokens += size
            chosen += 1
            continue
        out.omitted.append(index)
        if fill == "stop":
            stopped = True
    return out
