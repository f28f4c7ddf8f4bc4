"""`memory-governor count` and `memory-governor brief`: counting and token-bounded briefings."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from governor.engine.briefing import RANKINGS, CandidateError
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
@click.option(
    "--query", help="What the briefing is for: scores candidates that carry no relevance (for --rank relevance)."
)
@click.option("--budget", type=click.IntRange(min=0), help="Token budget (default: the policy's briefing.max_tokens).")
@click.option("--unit", type=click.Choice(UNITS), help="Default: the policy's token_counter.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many memories (with a budget: fewer wins).")
@click.option("--rank", "ranking", type=click.Choice(RANKINGS), default="recency", show_default=True)
@click.option("--half-life", type=click.FloatRange(min=0, min_open=True), help="Decay, in days: older ranks lower.")
@click.option("--over-budget", type=click.Choice(OVER_BUDGET), default="omit", show_default=True)
@click.option("--fill", type=click.Choice(FILL), default="stop", show_default=True)
@click.option("--card-max-tokens", type=click.IntRange(min=0), default=120, show_default=True,
              help="Cap one card so a long body does not ship whole; 0: no cap (whole entries, each in or left out).")  # fmt: skip
@click.option("--store", default="default", show_default=True, help="Names the memory store in usage records.")
@click.option("--record-usage/--no-record-usage", default=True, show_default=True,
              help="Bump last_used_at/use_count of the memories injected (only those).")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def brief(source: str, query: str | None, budget: int | None, unit: str | None, limit: int | None, ranking: str,
          half_life: float | None, over_budget: str, fill: str, card_max_tokens: int, store: str, record_usage: bool,
          fmt: str) -> int:  # fmt: skip
    """Pack ranked memories (JSON Lines, an `engram export` file, or a mem_search result) into memory
    cards within a budget. The same function as governor.sdk.briefing.brief (docs/orchestrators.md)."""
    from governor.sdk.briefing import brief as pack_briefing

    for notice in compiled.load(os.environ, os.getcwd(), state_dir(os.environ))[1]:
        click.echo(notice, err=True)
    try:
        manifest = pack_briefing(_read(source), query=query, budget=budget, unit=unit, limit=limit, ranking=ranking,
                                 half_life_days=half_life, over_budget=over_budget, fill=fill,
                                 card_max_tokens=card_max_tokens, record_usage=record_usage, store=store,
                                 source="stdin" if source == "-" else source)  # fmt: skip
    except CandidateError as err:
        raise click.ClickException(str(err)) from err
    except UnitUnavailable as err:
        raise click.ClickException(str(err)) from err
    if fmt == "json":
        click.echo(json.dumps(manifest, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(manifest["text"])
        if manifest["nudge"]:
            click.echo(manifest["nudge"], err=True)
    return 0
