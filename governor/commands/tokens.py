"""`memory-governor count` and `memory-governor brief`: counting and token-bounded briefings."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import click

from governor.engine.briefing import RANKINGS, CandidateError, pack, rank, read_candidates
from governor.engine.packer import FILL, OVER_BUDGET
from governor.engine.rules import CompiledPolicy
from governor.engine.tokens import UNITS, UnitUnavailable, counter
from governor.policy import compiled
from governor.state import state_dir


def _policy() -> CompiledPolicy:
    policy, notices = compiled.load(os.environ, os.getcwd(), state_dir(os.environ))
    for notice in notices:
        click.echo(notice, err=True)
    return policy


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.buffer.read().decode("utf-8", "replace")
    try:
        with open(source, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError as err:
        raise click.ClickException(f"{source}: cannot read it ({err.strerror})") from err


def _counter(unit: str) -> Any:
    try:
        return counter(unit)
    except UnitUnavailable as err:
        raise click.ClickException(str(err)) from err


@click.command("count")
@click.argument("source", default="-")
@click.option("--unit", type=click.Choice(UNITS), help="Default: the policy's token_counter.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def count(source: str, unit: str | None, fmt: str) -> int:
    """Count SOURCE (a file, or - for stdin) in a token unit."""
    chosen = unit or _policy().unit
    text = _read(source)
    tally = _counter(chosen)
    n = tally.count(text)
    if fmt == "json":
        click.echo(json.dumps({"unit": chosen, "tokens": n, "estimate": tally.estimate, "chars": len(text)}))
    else:
        click.echo(f"{n} {chosen}" + (" (an estimate: chars/4)" if tally.estimate else ""))
    return 0


@click.command("brief")
@click.argument("source", default="-")
@click.option("--budget", type=click.IntRange(min=0), help="Token budget (default: the policy's briefing.max_tokens).")
@click.option("--unit", type=click.Choice(UNITS), help="Default: the policy's token_counter.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many memories (with a budget: fewer wins).")
@click.option("--rank", "ranking", type=click.Choice(RANKINGS), default="recency", show_default=True)
@click.option("--half-life", type=click.FloatRange(min=0, min_open=True), help="Decay, in days: older ranks lower.")
@click.option("--over-budget", type=click.Choice(OVER_BUDGET), default="omit", show_default=True)
@click.option("--fill", type=click.Choice(FILL), default="stop", show_default=True)
@click.option("--card-max-tokens", type=click.IntRange(min=0), default=120, show_default=True,
              help="Cap one card so a long body does not ship whole; 0: no cap (whole entries, as RFC 0113).")  # fmt: skip
@click.option("--store", default="default", show_default=True, help="Names the memory store in usage records.")
@click.option("--record-usage/--no-record-usage", default=True, show_default=True,
              help="Bump last_used_at/use_count of the memories injected (only those).")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def brief(source: str, budget: int | None, unit: str | None, limit: int | None, ranking: str, half_life: float | None,
          over_budget: str, fill: str, card_max_tokens: int, store: str, record_usage: bool, fmt: str) -> int:  # fmt: skip
    """Pack ranked memories (JSON Lines, or an `engram export` file) into memory cards within a budget."""
    policy = _policy()
    chosen = unit or policy.unit
    budget = policy.data["briefing"]["max_tokens"]["value"] if budget is None else budget
    try:
        candidates = read_candidates(_read(source), "stdin" if source == "-" else source)
    except CandidateError as err:
        raise click.ClickException(str(err)) from err
    tally = _counter(chosen)
    now = time.time()
    ledger = None
    if ranking == "usage" or record_usage:
        from governor.engine.stores import open_for

        ledger = open_for(os.environ, policy.data["ledger"])
    if ranking == "usage" and ledger is not None:
        recorded = ledger.usage_of([f"{store}/{c.id}" for c in candidates])
        for c in candidates:
            last, uses = recorded.get(f"{store}/{c.id}", (None, 0))
            if last is not None and (c.last_used_at is None or last > c.last_used_at):
                c.last_used_at = last
            c.use_count = max(c.use_count, uses)
    order = rank(candidates, ranking, now, half_life)
    result = pack(candidates, tally.count, chosen, budget=budget, order=order, limit=limit, over_budget=over_budget,
                  fill=fill, card_max_tokens=card_max_tokens or None, estimate=tally.estimate)  # fmt: skip
    if record_usage and ledger is not None and result.selected:
        with ledger.write():
            ledger.bump_usage([f"{store}/{item['id']}" for item in result.selected], now)
    if ledger is not None:
        ledger.close()
    if fmt == "json":
        options = {
            "limit": limit,
            "rank": ranking,
            "half_life_days": half_life,
            "over_budget": over_budget,
            "fill": fill,
        }
        click.echo(json.dumps(result.manifest(options), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(result.text)
        if result.nudge:
            click.echo(result.nudge, err=True)
    return 0
