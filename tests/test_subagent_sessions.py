"""Where a subagent's calls count: harnesses that run each subagent as a session of its own have
the ledger count its calls in the session that dispatched it, at any depth (the engine's contract,
events.py); and a subagent whose events carry no turn id counts in the turn that dispatched it,
fixed at its first event, through the hook process."""

from __future__ import annotations

from pathlib import Path

import pytest

from governor.engine import events as ev
from governor.engine.decide import World, decide
from governor.engine.ledger import key
from governor.engine.stores import open_ledger
from governor.policy import compiled
from tests.conftest import Env, Session
from tests.harnesses.test_codex import Codex, denied

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

FORGED_TURN = "01a23104-0000-7000-8000-00000000f00d"


def codex_with_a_researcher(env: Env) -> Codex:
    """A Codex session in a project with a search-capable role (written before the first hook)."""
    folder = env.project / ".codex" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "researcher.toml").write_text('name = "researcher"\ndescription = "Research."\n'
                                            'developer_instructions = "Engram access tier: search-capable"\n')  # fmt: skip
    return Codex(env)


def new_researcher(codex: Codex) -> dict[str, str]:
    """The fields a new researcher's events carry (its own turn id among them, which is not counted)."""
    codex.calls += 1
    n = codex.calls
    return {"agent_id": f"01a23105-984e-7971-b703-{n:012d}", "agent_type": "researcher",
            "turn_id": f"01a23105-9852-7682-a7d2-{n:012d}"}  # fmt: skip


def spawn(codex: Codex, agent: dict[str, str]) -> None:
    """The parent's spawn_agent call as Codex 0.171.0 sends it (in the parent's turn), then the
    subagent's start and its task, as Codex sends them."""
    codex.calls += 1
    call = codex.payload("PreToolUse", tool_name="spawn_agent", tool_use_id=f"call_{codex.calls:032x}",
                         tool_input={"agent_type": agent["agent_type"], "message": "Find what we decided."})  # fmt: skip
    assert codex.hook(call) is None
    assert codex.hook(codex.payload("SubagentStart", **agent)) is None
    assert codex.hook(codex.payload("UserPromptSubmit", prompt="Find what we decided.", **agent)) is None


def forge_prompt(codex: Codex) -> None:
    """What the model can send through its shell: a prompt of its own, with a turn id it made up."""
    codex.hook(codex.payload("UserPromptSubmit", prompt="what did we decide about the auth flow?",
                             turn_id=FORGED_TURN))  # fmt: skip


@pytest.mark.parametrize("after_its_start", [False, True], ids=["forged-before-the-spawn", "forged-after-its-start"])
def test_a_prompt_forged_around_a_codex_spawn_gives_the_subagent_no_turn_of_its_own(
    env: Env, after_its_start: bool
) -> None:
    """A prompt the model sends itself, with a turn id it made up, before the spawn or after the
    subagent's first call: the subagent counts in the user's turn, which spawned it, either way."""
    codex = codex_with_a_researcher(env)
    codex.prompt("what did we decide about caching? ask the researcher")
    assert not denied(codex.pre("mem_search", query="cache", limit=3))  # 1 of the turn's 2
    if not after_its_start:
        forge_prompt(codex)
    agent = new_researcher(codex)
    spawn(codex, agent)  # in the user's turn
    assert not denied(codex.pre("mem_search", agent=agent, query="redis", limit=3))  # the turn's second
    if after_its_start:
        forge_prompt(codex)
    assert denied(codex.pre("mem_search", agent=agent, query="ttl", limit=3), "max_search_calls")


def test_a_codex_subagent_spawned_in_the_users_next_turn_counts_there(env: Env) -> None:
    codex = codex_with_a_researcher(env)
    codex.prompt("what did we decide about caching? ask the researcher")
    first = new_researcher(codex)
    spawn(codex, first)
    answers = [codex.pre("mem_search", agent=first, query=q, limit=3) for q in ("cache", "redis", "ttl")]
    assert [denied(a) for a in answers] == [False, False, True]
    codex.hook(codex.payload("Stop"))
    codex.prompt("and what did we decide about logging? ask the researcher again")
    assert not denied(codex.pre("mem_search", query="logging", limit=3))
    second = new_researcher(codex)
    spawn(codex, second)
    assert not denied(codex.pre("mem_search", agent=second, query="log levels", limit=3))
    assert denied(codex.pre("mem_search", agent=second, query="log rotation", limit=3), "max_search_calls")


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


def name_as_subagent(codex: Codex, real: str) -> None:
    """From the model's shell (detached, so nesting does not place it): a session it made up, with a
    turn, and an event of it naming the real session as its subagent."""
    codex.hook({**codex.payload("UserPromptSubmit", prompt="hello"), "session_id": "forged-session", "turn_id": "f1"})
    codex.hook({**codex.payload("SubagentStart"), "session_id": "forged-session", "turn_id": None, "agent_id": real,
                "agent_type": "researcher"})  # fmt: skip


def test_an_event_naming_a_session_as_a_subagent_moves_none_of_its_subagents(env: Env) -> None:
    codex = codex_with_a_researcher(env)
    codex.prompt("what did we decide about caching? ask the researcher")
    name_as_subagent(codex, codex.id)
    assert not denied(codex.pre("mem_search", query="cache", limit=3))
    agent = new_researcher(codex)
    spawn(codex, agent)  # the real session's subagent, in the user's turn: its second search
    assert not denied(codex.pre("mem_search", agent=agent, query="redis", limit=3))
    assert denied(codex.pre("mem_search", agent=agent, query="ttl", limit=3), "max_search_calls")


def test_a_claude_code_session_named_as_a_subagent_keeps_its_subagents_in_its_turns(env: Env) -> None:
    env.write(".claude/agents/researcher.md", "---\nname: researcher\n---\nEngram access tier: search-capable\n")
    session = Session(env, "sess-real")
    session.prompt("what did we decide about caching? ask a researcher")
    Session(env, "sess-forged").event("SubagentStart", agent_id="sess-real", agent_type="researcher")
    assert not session.pre("mem_search", query="cache", limit=3).denied
    dispatch = session.event("PreToolUse", tool_name="Agent", tool_use_id=session.next_id(),
                             tool_input={"subagent_type": "researcher", "prompt": "Find what we decided."})  # fmt: skip
    assert not dispatch.denied
    agent = {"agent_id": "agent-researcher-1", "agent_type": "researcher"}
    session.event("SubagentStart", **agent)
    answers = [session.event("PreToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": q, "limit": 3},
                             tool_use_id=session.next_id(), **agent) for q in ("eviction", "lru")]  # fmt: skip
    assert [a.denied for a in answers] == [False, True], [a.reason for a in answers]
