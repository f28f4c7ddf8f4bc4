"""Replay a recorded session under a policy: what would have been denied, clamped or
trimmed, and the tokens it would have saved.

Each harness reads its own session logs into steps (`governor.harnesses.<name>.transcripts`);
the first whose reader recognises the file plays it. Steps are played through the same code
the hook runs (governor.review.player), with what that harness's results can be (a replaced
result in place, or only as an error: its adapter's DELIVERY), so a replay decides as the live
hooks would have.

Replay assumes the session would have made the same calls. A clamped search gets the first
results of the recorded one, as the server would have returned fewer.
"""

from __future__ import annotations

from typing import Any

from governor.harnesses.transcript import Call, Step, TranscriptError, read_jsonl
from governor.review.player import Outcome, Player

__all__ = ["TranscriptError", "replay", "steps"]


def steps(path: str) -> list[Step]:
    """The steps of a recorded session, read by the harness whose log format it is."""
    return read(path)[1]


def read(path: str) -> tuple[str, list[Step]]:
    """The harness whose log format `path` is, and the steps of the session it recorded."""
    from governor import harnesses

    records = read_jsonl(path)
    for name in harnesses.names():
        reader = harnesses.part(name, "transcripts")
        if reader is not None and reader.recognise(records):
            return name, list(reader.steps(path, records))
    known = ", ".join(harnesses.names())
    raise TranscriptError(f"{path}: not a session log of any supported harness ({known})")


class Turn:
    def __init__(self, number: int, prompt: str, prompt_id: str = "") -> None:
        self.number = number
        self.prompt = prompt
        self.prompt_id = prompt_id
        self.outcomes: list[Outcome] = []
        self.before = 0
        self.after = 0
        self.deduped = 0  # of the tokens saved, those saved by not delivering an entry twice

    def as_dict(self) -> dict[str, Any]:
        governed = [o for o in self.outcomes if o.governed]
        return {
            "turn": self.number,
            "prompt_chars": len(self.prompt),
            "calls": len(governed),
            "denied": sum(o.decision == "deny" for o in governed),
            "clamped": sum(o.decision == "clamp" for o in governed),
            "trimmed": sum(o.trimmed for o in governed),
            "tokens_before": self.before,
            "tokens_after": self.after,
            "tokens_saved": self.before - self.after,
            "tokens_deduped": self.deduped,
            "decisions": [o.as_dict() for o in governed],
        }


def replay(path: str, policy: str | None = None) -> dict[str, Any]:
    """Play a transcript under `policy` (default: the effective policy here)."""
    from governor import harnesses
    from governor.engine.results import parse, render
    from governor.engine.tokens import counter
    from governor.policy import compiled

    harness, plan = read(path)
    # Played as Claude Code's events, delivered as the recording harness delivers a replaced result.
    delivery = getattr(harnesses.adapter(harness), "DELIVERY", None)
    with Player(policy=policy, session_id="replay", delivery=delivery) as player:
        effective, notices = compiled.load(player.env, player.project, player.env["MEMORY_GOVERNOR_STATE_DIR"])
        count = counter(effective.unit).count
        turns: list[Turn] = [Turn(0, "")]
        open_calls: dict[str, Outcome] = {}
        for step in plan:
            player.now = step.when
            if step.kind == "start":
                player.start(step.args[0])
            elif step.kind == "prompt":
                turns.append(Turn(len(turns), step.args[0], step.args[1]))
                answer = player.prompt(step.args[0], step.args[1])
                context = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
                turns[-1].after += count(context) if context else 0
            elif step.kind == "pre":
                call: Call = step.args[0]
                outcome = player.pre(call)
                spec = _spec(effective, call.tool_name)
                outcome.governed = spec is not None
                outcome.role = spec["role"] if spec else None
                turns[-1].outcomes.append(outcome)
                open_calls[call.call_id] = outcome
            elif step.kind == "post":
                call_id, text, is_error = step.args
                if call_id not in open_calls:
                    continue
                outcome = open_calls.pop(call_id)
                turn = next(t for t in reversed(turns) if outcome in t.outcomes)
                memory = outcome.governed and outcome.role not in ("save", "summary")
                if memory and not is_error:
                    turn.before += count(text)
                if outcome.decision == "deny":
                    continue
                outcome.call.is_error = is_error
                if outcome.decision == "clamp" and outcome.role == "search" and outcome.updated_input:
                    text = _as_if_clamped(text, outcome, parse, render)
                player.post(outcome, text)
                if memory and not is_error and outcome.delivered is not None:
                    turn.after += count(outcome.delivered)
        digest = effective.digest
        _count_deduped(player, turns)
    result_turns = [t.as_dict() for t in turns if t.number > 0 or t.outcomes]
    keys = ("calls", "denied", "clamped", "trimmed", "tokens_before", "tokens_after", "tokens_saved", "tokens_deduped")
    totals = {k: sum(t[k] for t in result_turns) for k in keys}
    return {"transcript": path, "policy": policy or "effective", "policy_digest": digest[:16], "unit": effective.unit,
            "notices": notices, "turns": result_turns, "totals": totals}  # fmt: skip


def _count_deduped(player: Player, turns: list[Turn]) -> None:
    """What delivered-once saved in each turn, from the audit trail of the replay's scratch ledger."""
    from governor.engine.ledger import key
    from governor.engine.stores import open_ledger

    ledger = open_ledger(player.env["MEMORY_GOVERNOR_STATE_DIR"])
    try:
        rows = ledger.q("SELECT turn, SUM(tokens_deduped) FROM decisions GROUP BY turn")
    finally:
        ledger.close()
    by_turn = {str(turn): int(tokens or 0) for turn, tokens in rows}
    for turn in turns:
        if turn.prompt_id:
            turn.deduped = by_turn.pop(key(turn.prompt_id), 0)
    turns[0].deduped += sum(by_turn.values())


def _spec(policy: Any, tool_name: str) -> dict[str, Any] | None:
    from governor.harnesses.tool_names import split_tool_name

    server, tool = split_tool_name(tool_name)
    return policy.tool(server, tool) if server and tool else None


def _as_if_clamped(text: str, outcome: Outcome, parse: Any, render: Any) -> str:
    """The recorded search as a clamped call would have returned it: its first results."""
    assert outcome.updated_input is not None
    limit = next((v for k, v in outcome.updated_input.items() if outcome.call.tool_input.get(k) != v), None)
    if not isinstance(limit, int):
        return text
    parsed = parse(text, "search")
    if len(parsed.entries) <= limit:
        return text
    return str(render(parsed, set(range(limit)), ""))
