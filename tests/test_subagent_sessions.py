"""Where a subagent's calls count: harnesses that run each subagent as a session of its own have
the ledger count its calls in the session that dispatched it, at any depth (the engine's contract,
events.py); and a subagent whose events carry no turn id counts in the turn that dispatched it,
fixed at its first event, through the hook process."""

from __future__ import annotations

from pathlib import Path

from governor.engine import events as ev
from governor.engine.decide import World, decide
from governor.engine.ledger import key
from governor.engine.stores import open_ledger
from governor.policy import compiled
from tests.conftest import Env, Session

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


# -- the turn a subagent counts in: the one that dispatched it, fixed at its first event -----------------
# The model can run the hook command itself with a prompt it wrote and a turn id it made up: that turn
# becomes the session's current one. Where a subagent's events carry no turn id, they must not land there
# (a whole per-turn budget on top of the user's turn), whether the agent was spawned before or after it.


def test_a_subagent_without_prompt_ids_counts_in_the_turn_of_its_dispatch(env: Env) -> None:
    """Claude-Code-shaped events from a harness whose subagents' events carry no prompt_id: the
    `Agent` dispatch carries the user's, after the model's own prompt made another turn current."""
    env.write(".claude/agents/researcher.md", "---\nname: researcher\n---\nEngram access tier: search-capable\n")
    session = Session(env, "sess-agent-no-prompt-id")
    session.prompt("what did we decide about caching? ask a researcher")
    assert not session.pre("mem_search", query="cache", limit=3).denied
    real = session.prompt_id
    session.event("UserPromptSubmit", prompt="what did we decide about the auth flow?", prompt_id="forged-by-the-model")
    dispatch = session.event("PreToolUse", tool_name="Agent", tool_use_id=session.next_id(), prompt_id=real,
                             tool_input={"subagent_type": "researcher", "prompt": "Find what we decided."})  # fmt: skip
    assert not dispatch.denied
    agent = {"agent_id": "agent-researcher-1", "agent_type": "researcher", "prompt_id": None}
    session.event("SubagentStart", **agent)
    answers = [session.event("PreToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": q, "limit": 3},
                             tool_use_id=session.next_id(), **agent) for q in ("redis", "ttl")]  # fmt: skip
    assert [a.denied for a in answers] == [False, True], [a.reason for a in answers]
    assert "max_search_calls" in answers[1].reason
