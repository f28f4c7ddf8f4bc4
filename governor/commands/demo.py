"""`memory-governor demo`: the main job of the README, on the embedded default policy."""

from __future__ import annotations

import click


@click.command("demo")
def command() -> int:
    """Play a short scripted Claude Code session through the real hook and show each decision."""
    from governor.review.demo import main

    return main(click.echo)
