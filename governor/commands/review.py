"""For team leads: `report`, `replay` and `test` — what a policy does, did, and would do."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from typing import Any

import click

from governor import described_version
from governor.policy import compiled, history
from governor.state import state_dir


@click.command("report")
@click.option("--session", "session_id", help="One session (default: all).")
@click.option("--since", help="Only decisions from this date on (YYYY-MM-DD or ISO 8601).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "html"]), default="table")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
def report(session_id: str | None, since: str | None, fmt: str, output: str | None) -> int:
    """Per-turn usage against each limit, denials by reason, tokens trimmed and saved."""
    from governor.commands.policy import managed_install
    from governor.engine.ledger import key
    from governor.engine.stores import open_for
    from governor.review import report as reporting

    managed = managed_install()
    env = managed.env if managed else os.environ  # a managed hook's ledger is the one in its own environment
    if managed is not None:
        found, notices = managed.load()
        if found is None:
            raise click.ClickException(f"{managed.says()}: " + "; ".join(notices))
        policy = found
    else:
        policy, notices = compiled.load(env, os.getcwd(), state_dir(env))
    for notice in notices:
        click.echo(notice, err=True)
    moment = None
    if since:
        try:
            parsed = datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError:
            raise click.BadParameter(f"{since!r} is not a date: use YYYY-MM-DD", param_hint="--since") from None
        moment = (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()
    ledger = open_for(env, policy.data["ledger"])
    try:
        state = state_dir(env)
        data = reporting.build(ledger, policy.limits, policy.unit, key(session_id) if session_id else None, moment,
                               lambda digest: history.limits_of(state, digest), policy.data["window"])  # fmt: skip
    finally:
        ledger.close()
    data["in_force"] = {"digest": policy.digest, "managed": managed.policy if managed else None}
    data["governor"] = described_version()  # which build reports: a release, or the commit it was built from
    text = (
        json.dumps(data, indent=2) + "\n"
        if fmt == "json"
        else reporting.page(data)
        if fmt == "html"
        else reporting.table(data)
    )
    if managed is not None and fmt == "table":
        text = f"{managed.says()} (digest {policy.digest[:12]}), the ledger in {state}\n{text}"
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text)
    return 0


def _replay_table(result: dict[str, Any]) -> str:
    lines = [f"replay of {result['transcript']} under {result['policy']} (digest {result['policy_digest']}, {result['unit']})",
             f"{'turn':>4} {'calls':>5} {'denied':>6} {'clamped':>7} {'trimmed':>7} {'before':>7} {'after':>7} {'saved':>7} "
             f"{'deduped':>7}"]  # fmt: skip
    for t in result["turns"]:
        lines.append(f"{t['turn']:>4} {t['calls']:>5} {t['denied']:>6} {t['clamped']:>7} {t['trimmed']:>7} "
                     f"{t['tokens_before']:>7} {t['tokens_after']:>7} {t['tokens_saved']:>7} {t['tokens_deduped']:>7}")  # fmt: skip
    s = result["totals"]
    lines.append(f"{'all':>4} {s['calls']:>5} {s['denied']:>6} {s['clamped']:>7} {s['trimmed']:>7} {s['tokens_before']:>7} "
                 f"{s['tokens_after']:>7} {s['tokens_saved']:>7} {s['tokens_deduped']:>7}")  # fmt: skip
    return "\n".join(lines)


@click.command("replay")
@click.argument("transcript", type=click.Path(exists=True, dir_okay=False))
@click.option("--policy", type=click.Path(exists=True, dir_okay=False), help="Default: the effective policy here.")
@click.option("--compare", type=click.Path(exists=True, dir_okay=False), help="A second policy, side by side.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def replay(transcript: str, policy: str | None, compare: str | None, fmt: str) -> int:
    """What a policy would have denied, clamped or trimmed in a recorded session (Claude Code, Codex CLI, Copilot CLI, Gemini CLI)."""
    from governor.review.replay import TranscriptError
    from governor.review.replay import replay as run

    try:
        results = [run(transcript, policy)] + ([run(transcript, compare)] if compare else [])
    except TranscriptError as err:
        raise click.ClickException(str(err)) from err
    if fmt == "json":
        click.echo(json.dumps(results[0] if len(results) == 1 else {"policies": results}, indent=2))
        return 0
    for result in results:
        for notice in result["notices"]:
            click.echo(notice, err=True)
        click.echo(_replay_table(result))
        click.echo()
    if compare:
        a, b = results[0]["totals"], results[1]["totals"]
        click.echo("compare: " + ", ".join(f"{k} {a[k]} -> {b[k]}" for k in a))
    return 0


@click.command("test")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--junit", type=click.Path(dir_okay=False), help="Also write a JUnit XML report here.")
@click.option("--shipped", is_flag=True, help="Run them against the shipped default policy, whatever they name.")
def test(files: tuple[str, ...], junit: str | None, shipped: bool) -> int:
    """Run policy scenario files (docs/scenarios.md); exit 1 on any mismatch, 2 on an invalid file."""
    from governor.policy.sources import shipped_policy_path
    from governor.review import scenarios

    loaded = [scenarios.load(path) for path in files]
    for file in loaded if shipped else ():
        file.policy = shipped_policy_path()
    invalid = [problem for file in loaded for problem in file.problems]
    for problem in invalid:
        click.echo(str(problem), err=True)
    if invalid:
        return 2
    results = [result for file in loaded for result in scenarios.run(file)]
    for result in results:
        click.echo(f"{'PASS' if result.passed else 'FAIL'}  {result.scenario.name}  ({result.scenario.where})")
        for failure in result.failures:
            click.echo(f"      {failure}")
    failed = sum(not r.passed for r in results)
    click.echo(f"\n{len(results) - failed} passed, {failed} failed")
    if junit:
        with open(junit, "w", encoding="utf-8") as handle:
            handle.write(scenarios.junit(results))
    return 1 if failed else 0
