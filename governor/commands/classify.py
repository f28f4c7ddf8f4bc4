"""`memory-governor classify "PROMPT"`: the memory need of a prompt, as the hook would see it."""

from __future__ import annotations

import json
import os

import click

from governor.engine.classify import classify, recall_phrase
from governor.policy import compiled
from governor.state import state_dir


@click.command("classify")
@click.argument("prompt")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--explain", is_flag=True, help="Also show the rule that matched.")
def command(prompt: str, fmt: str, explain: bool) -> int:
    """Classify PROMPT into the policy's memory needs and give the recommended action."""
    policy, notices = compiled.load(os.environ, os.getcwd(), state_dir(os.environ))
    for notice in notices:
        click.echo(notice, err=True)
    needs = policy.data["memory_needs"]
    verdict = classify(prompt, needs)
    need = needs["classes"][verdict.need]
    recall = recall_phrase(prompt, policy.recall_phrases)
    report = {
        "memory_need": verdict.need,
        "action": need["action"],
        "namespaces": need["namespaces"],
        "advice": need["advice"],
        "unlocks_mem_context": recall is not None,
    }
    if explain:
        if verdict.via == "pattern":
            report["rule"] = {"via": "pattern", "pattern": verdict.pattern, "matched": verdict.matched}
        elif verdict.via == "cues":
            report["rule"] = {
                "via": "cues",
                "pattern": None,
                "cues": verdict.pattern,
                "threshold": needs["cue_threshold"],
            }
        else:
            report["rule"] = {"via": "default", "pattern": None, "matched": None,
                              "default": f"no pattern matched and too few cue words: the default class ({needs['default']})"}  # fmt: skip
        report["precedence"] = needs["precedence"]
        report["recall_phrase"] = recall
    if fmt == "json":
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    click.echo(f"memory_need: {verdict.need}")
    click.echo(f"action: {need['action']}")
    if need["namespaces"]:
        click.echo(f"namespaces: {', '.join(need['namespaces'])}")
    if recall:
        click.echo(f'unlocks mem_context: yes (explicit recall phrase "{recall}")')
    if explain:
        if verdict.via == "pattern":
            click.echo(f"matched: {verdict.matched!r} by pattern {verdict.pattern}")
        elif verdict.via == "cues":
            click.echo(f"matched: no pattern; cue words {verdict.pattern} (at least {needs['cue_threshold']})")
        else:
            click.echo(f"matched: nothing; {verdict.need} is the policy's default")
        click.echo(f"precedence: {' > '.join(needs['precedence'])}")
    return 0
