"""`memory-governor classify "PROMPT"`: the memory need of a prompt, as the hook would see it."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from governor.engine.classify import ModelOpinion, Verdict, ask_model, fold
from governor.engine.recall import judge
from governor.policy import compiled
from governor.state import state_dir


def _opinion(opinion: ModelOpinion) -> dict[str, Any]:
    return {
        "probabilities": {name: round(p, 4) for name, p in opinion.probabilities.items()},
        "threshold": opinion.threshold,
        "decides": opinion.decides,
        "error": opinion.error,
    }


def _rule(verdict: Verdict, opinion: ModelOpinion, needs: dict[str, Any]) -> dict[str, Any]:
    if verdict.via == "recall":
        return {"via": "recall", "pattern": None, "matched": verdict.matched}
    if verdict.via == "pattern":
        return {"via": "pattern", "pattern": verdict.pattern, "matched": verdict.matched}
    best = opinion.best
    if verdict.via == "model" and best is not None:
        return {"via": "model", "pattern": None, "score": round(best[1], 4), "threshold": opinion.threshold}
    if verdict.via == "cues":
        return {"via": "cues", "pattern": None, "cues": verdict.pattern, "threshold": needs["cue_threshold"]}
    return {"via": "default", "pattern": None, "matched": None, "default": f"no pattern matched, {_abstained(opinion)} "
            f"and too few cue words: the default class ({needs['default']})"}  # fmt: skip


def _abstained(opinion: ModelOpinion) -> str:
    best = opinion.best
    if best is None:
        return f"the model is {opinion.error}"
    return f"the model abstained ({best[0]} {best[1]:.2f} < {opinion.threshold})"


def _model_line(opinion: ModelOpinion) -> str:
    if opinion.best is None:
        return f"model: {opinion.error}"
    ranked = ", ".join(f"{name} {p:.2f}" for name, p in opinion.probabilities.items())
    return f"model: {ranked} (decides at {opinion.threshold} or more, when no pattern matches)"


@click.command("classify")
@click.argument("prompt")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--explain", is_flag=True, help="Also show which part decided, the model's scores, and what matched.")
def command(prompt: str, fmt: str, explain: bool) -> int:
    """Classify PROMPT into the policy's memory needs and give the recommended action."""
    policy, notices = compiled.load(os.environ, os.getcwd(), state_dir(os.environ))
    for notice in notices:
        click.echo(notice, err=True)
    needs = policy.data["memory_needs"]
    verdict, recall = judge(prompt, needs, policy.recall_phrases, policy.pattern_words)
    need = needs["classes"][verdict.need]
    trigger = "explicit_user_recall" in policy.data["mem_context"]["unlocked_by"]
    unlocks = recall.unlocks and trigger
    why = (
        recall.why
        if trigger or not recall.unlocks
        else f"{recall.why}, but the policy has no explicit_user_recall trigger"
    )
    report: dict[str, Any] = {
        "memory_need": verdict.need,
        "action": need["action"],
        "namespaces": need["namespaces"],
        "advice": need["advice"],
        "unlocks_mem_context": unlocks,
    }
    # The hook asks the model only when no pattern matched; --explain shows its opinion anyway.
    opinion = verdict.model or ask_model(fold(prompt), needs)
    if explain:
        report["rule"] = _rule(verdict, opinion, needs)
        report["model"] = _opinion(opinion)
        report["precedence"] = needs["precedence"]
        report["recall"] = {"unlocks": unlocks, "why": why, "words": recall.phrase}
    if fmt == "json":
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    click.echo(f"memory_need: {verdict.need}")
    click.echo(f"action: {need['action']}")
    if need["namespaces"]:
        click.echo(f"namespaces: {', '.join(need['namespaces'])}")
    if unlocks or explain:
        click.echo(f"unlocks mem_context: {'yes' if unlocks else 'no'} ({why})")
    if explain:
        best = opinion.best
        if verdict.via == "recall":
            click.echo(f"decided by: the ask for everything remembered ({recall.why})")
        elif verdict.via == "pattern":
            click.echo(f"decided by: pattern {verdict.pattern} (matched {verdict.matched!r})")
        elif verdict.via == "model" and best is not None:
            click.echo(
                f"decided by: model, no pattern matched; {best[0]} {best[1]:.2f} >= threshold {opinion.threshold}"
            )
        elif verdict.via == "cues":
            click.echo(f"decided by: cue words {verdict.pattern} (at least {needs['cue_threshold']}); "
                       f"no pattern matched and {_abstained(opinion)}")  # fmt: skip
        else:
            click.echo(f"decided by: nothing; no pattern matched, {_abstained(opinion)}, too few cue words: "
                       f"{verdict.need} is the policy's default")  # fmt: skip
        click.echo(_model_line(opinion))
        click.echo(f"precedence: {' > '.join(needs['precedence'])}")
    return 0
