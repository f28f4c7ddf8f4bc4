"""brief(candidates, ...): a dispatch briefing's memory cards, packed to a token budget, from code.

    from governor.sdk.briefing import brief

    cards = brief(search_result_text, query="refresh token retries", rank="relevance", budget=400)
    prompt = f"{task}\n\n{cards['text']}"

The same selection as `memory-governor brief` (which calls this function): candidates in, the
token-bounded text and its manifest out, with no subprocess. Candidates are dicts in the JSON
Lines schema (docs/orchestrators.md: `id` and `content` required; `title`, `type`, `scope`,
`created_at`, `last_used_at`, `use_count`, `relevance`, `pinned`), or text: JSON Lines, an
`engram export` document, or a `mem_search` result as the server returned it (its hits, in the
server's order). The budget and the token unit default to the policy's (`briefing.max_tokens`,
`token_counter`), found from `project` as the hooks find it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from governor.engine.briefing import Candidate, CandidateError, pack, rank, read_candidates
from governor.engine.tokens import UnitUnavailable, counter

__all__ = ["CandidateError", "UnitUnavailable", "brief"]


def brief(
    candidates: str | Iterable[Mapping[str, Any]],
    *,
    query: str | None = None,
    budget: int | None = None,
    unit: str | None = None,
    limit: int | None = None,
    ranking: str = "recency",
    half_life_days: float | None = None,
    over_budget: str = "omit",
    fill: str = "stop",
    card_max_tokens: int | None = 120,
    record_usage: bool = False,
    store: str = "default",
    project: str | None = None,
    env: Mapping[str, str] | None = None,
    source: str = "candidates",
) -> dict[str, Any]:
    """The briefing's manifest: `text` (the memory-cards block, exactly what was counted),
    `tokens_used`, `selected` (id, tokens, pinned, truncated), `omitted` and `truncated` ids,
    `nudge`, and the options used. Raises `CandidateError` (a ValueError) naming the bad
    candidate, `ValueError` for an unknown ranking, and `UnitUnavailable` for a unit that cannot
    count here.

    `ranking`: recency, relevance (the server's order or score; `query` scores candidates that
    carry none), usage (what was briefed most recently and often: the ledger's record, bumped
    only with `record_usage` for what was injected), scope (org-wide first)."""
    from governor.policy import compiled
    from governor.state import state_dir

    environ = os.environ if env is None else env
    policy, _ = compiled.load(environ, project or os.getcwd(), state_dir(environ))
    chosen = unit or policy.unit
    budget = policy.data["briefing"]["max_tokens"]["value"] if budget is None else budget
    if isinstance(candidates, str):
        found = read_candidates(candidates, source)
    else:
        found = [Candidate(dict(data), i, f"{source}[{i}]") for i, data in enumerate(candidates)]
    tally = counter(chosen)
    now = time.time()
    ledger = None
    if ranking == "usage" or record_usage:
        from governor.engine.stores import open_for

        ledger = open_for(environ, policy.data["ledger"])
    try:
        if ranking == "usage" and ledger is not None:
            recorded = ledger.usage_of([f"{store}/{c.id}" for c in found])
            for c in found:
                last, uses = recorded.get(f"{store}/{c.id}", (None, 0))
                if last is not None and (c.last_used_at is None or last > c.last_used_at):
                    c.last_used_at = last
                c.use_count = max(c.use_count, uses)
        order = rank(found, ranking, now, half_life_days, query)
        result = pack(found, tally.count, chosen, budget=budget, order=order, limit=limit, over_budget=over_budget,
                      fill=fill, card_max_tokens=card_max_tokens or None, estimate=tally.estimate,
                      query=query)  # fmt: skip
        if record_usage and ledger is not None and result.selected:
            with ledger.write():
                ledger.bump_usage([f"{store}/{item['id']}" for item in result.selected], now)
    finally:
        if ledger is not None:
            ledger.close()
    options = {"limit": limit, "rank": ranking, "query": query, "half_life_days": half_life_days,
               "over_budget": over_budget, "fill": fill}  # fmt: skip
    return result.manifest(options)
