"""Harnesses that run each subagent as a session of its own: the ledger counts the subagent's
calls in the session that dispatched it, at any depth (the engine's contract, events.py)."""

from __future__ import annotations

from pathlib import Path

from governor.engine import events as ev
from governor.engine.decide import World, decide
from governor.engine.ledger import key
from governor.engine.stores import open_ledger
from governor.policy import compiled

NOW = 1_800_000_000.0


def _search(session: str, agent: str, query: str) -> ev.Event:
    name = "engram-mem_search"
    tool_input = {"query": query, "limit": 3}
    return ev.Event(ev.PRE_TOOL, session, agent_id=agent or None, agent_type="researcher" if agent else None, server="engram", tool="mem_search",
                    tool_name=name, tool_input=tool_input, call_key=ev.call_key(name, tool_input))  # fmt: skip


def test_nested_subagents_count_in_the_dispatching_turn(tmp_path: Path) -> None:
    policy, _ = compiled.load({"MEMORY_GOVERNOR_STATE_DIR": str(tmp_path)}, str(tmp_path), str(tmp_path))
    policy.data["subagents"]["agents"]["researcher"] = "search-capable"
    ledger = open_ledger(str(tmp_path))
    world = World(NOW, "/p")
    decide(ev.Event(ev.PROMPT, "root", prompt="what did we decide about jwt?"), policy, ledger, world)
    # The root dispatches agent A; A dispatches B (whose events name A as their session).
    decide(ev.Event(ev.SUBAGENT_START, "root", agent_id="A", agent_type="validator"), policy, ledger, world)
    own = decide(_search("root", "", "zero"), policy, ledger, world)  # the main agent's own search
    first = decide(_search("A", "B", "one"), policy, ledger, world)
    second = decide(_search("A", "B", "two"), policy, ledger, world)
    assert own.kind != ev.DENY and first.kind != ev.DENY, (own, first)
    assert second.kind == ev.DENY and second.code == "max_search_calls", second
    assert ledger.dispatching_session(key("B")) == key("root")
    turn = ledger.one("SELECT turn FROM sessions WHERE session=?", key("root"))[0]
    assert ledger.usage(key("root"), turn, NOW)["search"] == 2
    assert ledger.one("SELECT COUNT(*) FROM sessions WHERE session IN (?, ?)", key("A"), key("B"))[0] == 0


def test_a_loop_of_agent_ids_resolves_and_ends(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        ledger.remember_agent("x", "y")
        ledger.remember_agent("y", "x")  # a harness that names them in a circle
        ledger.remember_agent("z", "z")  # and one that names itself
    assert ledger.dispatching_session("y") in ("x", "y")
    assert ledger.dispatching_session("z") == "z"
