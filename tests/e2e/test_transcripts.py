"""The recorded transcripts in tests/fixtures/transcripts/ are current and well-formed."""

from __future__ import annotations

import difflib
import json

import pytest
from record_transcripts import OUT, record_all

pytestmark = pytest.mark.e2e


def _records(name: str) -> list[dict]:
    return [json.loads(line) for line in (OUT / name).read_text(encoding="utf-8").splitlines()]


def _tool_uses(records: list[dict]) -> list[str]:
    return [block["name"] for r in records if r.get("type") == "assistant"
            for block in r["message"]["content"] if block.get("type") == "tool_use"]  # fmt: skip


def test_recorded_transcripts_are_small_and_complete():
    for path in OUT.glob("*.jsonl"):
        assert path.stat().st_size < 200_000, path
    ungoverned = _tool_uses(_records("ungoverned-session.jsonl"))
    assert ungoverned.count("mcp__engram__mem_search") == 3
    for tool in ("mem_get_observation", "mem_context", "mem_save"):
        assert ungoverned.count(f"mcp__engram__{tool}") == 1, ungoverned
    main = _records("subagent-session.jsonl")
    agent = _records("subagent-session.agent-validator.jsonl")
    assert "Agent" in _tool_uses(main) or "Task" in _tool_uses(main)
    assert _tool_uses(agent) == ["mcp__engram__mem_search", "mcp__engram__mem_save"]
    assert all(r.get("isSidechain") for r in agent if "isSidechain" in r)


def _canonical(data: bytes) -> list[str]:
    """The records, with the results of one parallel batch in tool-use order.

    Parallel tool calls finish in whichever order they finish, and Claude Code writes their
    results in that order (each with its own uuid, parent and time). Everything else must match."""
    records = [json.loads(line) for line in data.decode().splitlines()] if data.strip().startswith(b"{") else None
    if records is None:
        return [data.decode()]

    def result_of(record: dict) -> str | None:
        content = record.get("message", {}).get("content") if isinstance(record.get("message"), dict) else None
        if (
            record.get("type") == "user"
            and isinstance(content, list)
            and content
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        ):
            return content[0]["tool_use_id"]
        return None

    out: list[str] = []
    batch: list[dict] = []
    for record in [*records, {}]:
        if result_of(record) is not None:
            batch.append(record)
            continue
        for item in sorted(batch, key=lambda r: result_of(r) or ""):
            stable = {
                k: v for k, v in item.items() if k not in ("uuid", "parentUuid", "timestamp", "sourceToolAssistantUUID")
            }
            out.append(json.dumps(stable, sort_keys=True))
        batch = []
        if record:
            stable = {k: v for k, v in record.items() if k not in ("uuid", "parentUuid", "timestamp")}
            out.append(json.dumps(stable, sort_keys=True))
    return out


def test_recorded_transcripts_are_reproducible(tools, tmp_path):
    fresh = {p.name: p.read_bytes() for p in record_all(tmp_path)}
    kept = {p.name: p.read_bytes() for p in OUT.iterdir() if p.name != "README.md"}
    assert sorted(fresh) == sorted(kept)
    stale = [name for name in fresh if _canonical(fresh[name]) != _canonical(kept[name])]
    diff = [
        line
        for name in stale
        for line in difflib.unified_diff(
            _canonical(kept[name]), _canonical(fresh[name]), name, "fresh", n=1, lineterm=""
        )
    ][:40]  # what changed, in the failure itself: a difference seen once under load is still diagnosable
    assert not stale, f"{stale} differ from a fresh recording: run tests/e2e/record_transcripts.py and review the " + (
        "diff\n" + "\n".join(diff)
    )


def _live_decisions(state) -> list[list[tuple[str, str]]]:
    """Per turn, sorted (tool, decision) of every governed call, from the live hook's audit trail.

    A PreToolUse deny is "deny", a rewrite "clamp", else "allow"; a PostToolUse that replaced a
    result turns one of that tool's allowed calls into "trim", and leaves a rewritten one "clamp"
    (as replay reports them: a search asked for new hits is rewritten, then cut to them)."""
    import sqlite3

    rows = sqlite3.connect(state / "ledger.db").execute(
        "SELECT turn, event, tool, decision FROM decisions WHERE event IN ('pre_tool', 'post_tool') "
        "AND role NOT IN ('', 'dispatch') ORDER BY id"
    )
    turns: dict[str, list[list[str]]] = {}
    for turn, event, tool, decision in rows:
        calls = turns.setdefault(turn, [])
        name = tool.split("/")[-1]
        if event == "pre_tool":
            calls.append([name, {"deny": "deny", "rewrite": "clamp"}.get(decision, "allow")])
        elif decision == "replace":
            allowed = [c for c in calls if c == [name, "allow"]]
            assert allowed or [name, "clamp"] in calls, (turn, name, calls)
            if allowed:
                allowed[0][1] = "trim"
    return [sorted((name, decision) for name, decision in calls) for calls in turns.values()]


def test_replay_of_the_recording_decides_as_the_live_hook_did(cc):
    """The recorded ungoverned session, run again governed through Claude Code: the live hook's
    decisions equal what `memory-governor replay` says of the recording."""
    from record_transcripts import play_memory_session

    play_memory_session(cc)
    live = _live_decisions(cc.state)
    replayed = json.loads(cc.governor("replay", str(OUT / "ungoverned-session.jsonl"), "--format", "json").stdout)
    expected = [sorted((d["tool"].split("__")[-1], d["decision"]) for d in t["decisions"]) for t in replayed["turns"]]
    assert live == expected
    assert any(decision != "allow" for turn in expected for _, decision in turn), "something was governed"
