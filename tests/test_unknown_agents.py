"""Harnesses whose events do not say which agent made a call: a call before is the subagent's
that a dispatch in this turn started and has not ended (the engine's contract, Event.agent_unknown
and Event.dispatches)."""

from __future__ import annotations

from pathlib import Path

from governor.engine import events as ev
from governor.engine.decide import World, decide
from governor.engine.stores import open_ledger
from governor.policy import compiled

NOW = 1_800_000_000.0


def _setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    policy, _ = compiled.load({"MEMORY_GOVERNOR_STATE_DIR": str(tmp_path)}, str(tmp_path), str(tmp_path))
    return policy, open_ledger(str(tmp_path)), World(NOW, str(tmp_path))


def _search(query: str) -> ev.Event:
    tool_input = {"query": query, "limit": 3}
    return ev.Event(ev.PRE_TOOL, "anon", server="engram", tool="mem_search", tool_name="engram.mem_search",
                    tool_input=tool_input, call_key=ev.call_key("engram.mem_search", tool_input), agent_unknown=True)  # fmt: skip


def _dispatch(kind: str, agent: str) -> ev.Event:
    tool_input = {"agent": agent, "prompt": "go"}
    return ev.Event(kind, "anon", tool_name="start_agent", tool_input=tool_input, dispatches=agent,
                    call_key=ev.call_key("start_agent", tool_input), agent_unknown=True)  # fmt: skip


def test_a_call_while_a_dispatch_runs_is_the_subagents_and_after_it_the_parents(tmp_path: Path) -> None:
    policy, ledger, world = _setup(tmp_path)
    decide(ev.Event(ev.PROMPT, "anon", prompt="validate the change"), policy, ledger, world)
    assert decide(_dispatch(ev.PRE_TOOL, "validator"), policy, ledger, world).kind == ev.NONE
    during = decide(_search("a"), policy, ledger, world)
    assert during.kind == ev.DENY and during.code == "tier:save-only"
    decide(_dispatch(ev.POST_TOOL, "validator"), policy, ledger, world)
    assert decide(_search("b"), policy, ledger, world).kind == ev.NONE
    assert ledger.q("SELECT state FROM calls WHERE role='dispatch'") == [("committed",)]


def test_a_window_belongs_to_its_turn(tmp_path: Path) -> None:
    policy, ledger, world = _setup(tmp_path)
    decide(ev.Event(ev.PROMPT, "anon", prompt="validate the change"), policy, ledger, world)
    decide(_dispatch(ev.PRE_TOOL, "validator"), policy, ledger, world)  # never reports back
    decide(ev.Event(ev.PROMPT, "anon", prompt="and now search"), policy, ledger, world)
    assert decide(_search("a"), policy, ledger, world).kind == ev.NONE


def test_without_the_flag_nothing_is_attributed(tmp_path: Path) -> None:
    policy, ledger, world = _setup(tmp_path)
    decide(ev.Event(ev.PROMPT, "anon", prompt="validate the change"), policy, ledger, world)
    decide(_dispatch(ev.PRE_TOOL, "validator"), policy, ledger, world)
    known = _search("a")
    known.agent_unknown = False  # a harness that names its agents: no agent id means the parent
    assert decide(known, policy, ledger, world).kind == ev.NONE
