"""Harnesses whose events carry no call id: calls are matched by a key of the tool and its
arguments, and identical calls in one batch still count apart (the engine's contract)."""

from __future__ import annotations

from pathlib import Path

from governor.engine import events as ev
from governor.engine.decide import World, decide
from governor.engine.stores import open_ledger
from governor.policy import compiled

SEARCH = "Found 1 memories:\n\n[1] #42 (decision) — JWT\n    short tokens...\n    2026-01-01 10:00:00 | project: p | scope: project\n\n"


def _setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    policy, _ = compiled.load({"MEMORY_GOVERNOR_STATE_DIR": str(tmp_path)}, str(tmp_path), str(tmp_path))
    return policy, open_ledger(str(tmp_path))


def _event(kind: str, tool_input: dict[str, object], result: str | None = None) -> ev.Event:
    name = "engram-mem_search"
    return ev.Event(kind, "keyed", server="engram", tool="mem_search", tool_name=name, tool_input=tool_input,
                    tool_result=result, call_key=ev.call_key(name, tool_input))  # fmt: skip


def test_identical_calls_in_one_batch_count_apart(tmp_path: Path) -> None:
    policy, ledger = _setup(tmp_path)
    now = 1_800_000_000.0
    decide(ev.Event(ev.PROMPT, "keyed", prompt="what did we decide about jwt?"), policy, ledger, World(now, "/p"))
    same = {"query": "jwt", "limit": 3}
    kinds = [decide(_event(ev.PRE_TOOL, same), policy, ledger, World(now, "/p")).kind for _ in range(4)]
    assert kinds.count(ev.DENY) == 2, kinds
    assert ledger.usage("s:keyed", ledger.one("SELECT turn FROM sessions")[0], now)["search"] == 2


def test_a_result_commits_the_oldest_pending_call_with_its_key_and_a_failure_releases(tmp_path: Path) -> None:
    policy, ledger = _setup(tmp_path)
    now = 1_800_000_000.0
    world = World(now, "/p")
    decide(ev.Event(ev.PROMPT, "keyed", prompt="what did we decide about jwt?"), policy, ledger, world)
    same = {"query": "jwt", "limit": 3}
    decide(_event(ev.PRE_TOOL, same), policy, ledger, world)
    decide(_event(ev.PRE_TOOL, same), policy, ledger, world)
    decide(_event(ev.POST_TOOL, same, SEARCH), policy, ledger, world)
    states = [row[0] for row in ledger.q("SELECT state FROM calls WHERE role='search' ORDER BY created, rowid")]
    assert states == ["committed", "pending"]
    decide(_event(ev.TOOL_FAILED, same), policy, ledger, world)
    states = [row[0] for row in ledger.q("SELECT state FROM calls WHERE role='search' ORDER BY created, rowid")]
    assert states == ["committed", "released"]


def test_a_clamped_call_is_found_by_its_rewritten_arguments(tmp_path: Path) -> None:
    policy, ledger = _setup(tmp_path)
    now = 1_800_000_000.0
    world = World(now, "/p")
    decide(ev.Event(ev.PROMPT, "keyed", prompt="what did we decide about jwt?"), policy, ledger, world)
    before = decide(_event(ev.PRE_TOOL, {"query": "jwt", "limit": 10}), policy, ledger, world)
    assert before.kind == ev.REWRITE and before.updated_input == {"query": "jwt", "limit": 3}
    decide(_event(ev.POST_TOOL, {"query": "jwt", "limit": 3}, SEARCH), policy, ledger, world)
    assert [row[0] for row in ledger.q("SELECT state FROM calls WHERE role='search'")] == ["committed"]
    assert ledger.surfaced("s:keyed", ledger.one("SELECT turn FROM sessions")[0], "42")


def test_a_result_goes_to_its_own_turns_call_before_an_older_one_left_pending(tmp_path: Path) -> None:
    policy, ledger = _setup(tmp_path)
    now = 1_800_000_000.0
    world = World(now, "/p")
    same = {"query": "jwt", "limit": 3}
    decide(ev.Event(ev.PROMPT, "keyed", prompt="what did we decide about jwt?"), policy, ledger, world)
    decide(_event(ev.PRE_TOOL, same), policy, ledger, world)  # never reports back (its hook was killed)
    decide(ev.Event(ev.PROMPT, "keyed", prompt="and now, what about jwt?"), policy, ledger, world)
    decide(_event(ev.PRE_TOOL, same), policy, ledger, world)
    decide(_event(ev.POST_TOOL, same, SEARCH), policy, ledger, world)
    rows = ledger.q("SELECT t.seq, c.state FROM calls c JOIN turns t ON t.session=c.session AND t.turn=c.turn "
                    "WHERE c.role='search' ORDER BY t.seq")  # fmt: skip
    assert rows == [(1, "pending"), (2, "committed")]
