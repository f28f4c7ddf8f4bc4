"""memory-governor in orchestrators on the OpenAI Agents SDK and on LangChain / LangGraph, their
real packages from PyPI (orchestrators_env.py), governed in-process by a three-line govern().

Each test runs an orchestrator program (openai_agents_driver.py: `govern(lead)`;
langchain_driver.py: `govern(client)`) against a loopback model stand-in and the Engram
stand-in, and asserts what the model received and what reached the server: parallel searches
counted exactly and clamped, an unsurfaced fetch refused, `mem_context` off by default and
unlocked once by the user's explicit recall, a result trimmed to the turn's budget in whole
entries, and a save-only subagent known by its name. The same runs without govern() break every
one of those rules (the control).

Run: .venv/bin/python -m pytest tests/e2e/test_orchestrators.py -x -q
"""

from __future__ import annotations

from typing import Any

import pytest
from script import call, text, tool_uses
from test_claude_code import hit_ids, o200k

pytestmark = pytest.mark.e2e
pytest_plugins = ["orchestrators_env"]

HARNESS = {"openai_agents": "openai-agents", "langchain": "langchain"}


@pytest.fixture(params=list(HARNESS))
def orchestrator(request: pytest.FixtureRequest) -> Any:
    harness = request.getfixturevalue(request.param)
    harness.name = HARNESS[request.param]
    return harness


def search(query: str, limit: int = 3) -> dict[str, Any]:
    return call("mem_search", {"query": query, "limit": limit})


def four_searches() -> dict[str, Any]:
    return tool_uses(*[search(q, 10) for q in ("jwt auth", "fts5 search", "repository errors", "sqlite storage")])


def dispatch(orchestrator: Any, agent: str, task: str) -> dict[str, Any]:
    """The lead's call of a subagent it runs as a tool (the Agents SDK's as_tool() takes `input`)."""
    field = "input" if orchestrator.name == "openai-agents" else "task"
    return tool_uses(call(f"run_{agent}", {field: task}))


def refused(result: Any, *fragments: str) -> bool:
    return result.text.startswith("memory-governor:") and all(f in result.text for f in fragments)


def served(result: Any) -> bool:
    return not result.text.startswith("memory-governor:") and "error" not in result.text.lower()[:40]


def test_parallel_searches_two_of_four_reach_the_server_clamped_to_3(orchestrator):
    run = orchestrator.run("What did we decide about auth, search, the repository layer and storage?",
                           main=[four_searches(), text("Summarised.")])  # fmt: skip
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    assert sum(refused(r, "max_search_calls") for r in results) == 2, run.describe()
    real = [r for r in results if r.text.startswith("Found ")]
    assert len(real) == 2 and all(0 < len(hit_ids(r.text)) <= 3 for r in real), run.describe()
    assert [c["arguments"]["limit"] for c in orchestrator.calls("mem_search")] == [3, 3]
    assert {row["harness"] for row in orchestrator.decisions("pre_tool")} == {orchestrator.name}


def test_an_unsurfaced_fetch_and_mem_context_are_refused(orchestrator):
    run = orchestrator.run("Show me the full sanitizeFTS memory and pick up where we left off.",
                           main=[tool_uses(call("mem_get_observation", {"id": 58})),
                                 tool_uses(call("mem_context", {"project": "myapp"})), text("Without memory then.")])  # fmt: skip
    [fetch] = run.results_of("mem_get_observation")
    assert refused(fetch, "not surfaced", "58"), fetch.text
    [context] = run.results_of("mem_context")
    assert refused(context, "is off outside"), context.text
    assert orchestrator.calls() == []


def test_the_users_explicit_recall_unlocks_mem_context_once(orchestrator):
    run = orchestrator.run("Tell me everything you remember about this project.",
                           main=[tool_uses(call("mem_context", {"project": "myapp"})),
                                 tool_uses(call("mem_context", {"project": "myapp"})), text("That is all.")])  # fmt: skip
    first, second = run.results_of("mem_context")
    assert first.text.startswith("## Memory from Previous Sessions"), first.text
    assert refused(second, "is off outside"), second.text
    assert len(orchestrator.calls("mem_context")) == 1
    [prompt] = orchestrator.decisions("prompt")
    assert prompt["harness"] == orchestrator.name, prompt


def test_a_result_past_the_turns_budget_is_trimmed_to_whole_entries(orchestrator):
    run = orchestrator.run("What did we decide about storage? Show the full SQLite memory.",
                           main=[tool_uses(search("sqlite storage wal")),
                                 tool_uses(call("mem_get_observation", {"id": 62})), text("Done.")])  # fmt: skip
    memory = run.results()
    assert len(memory) == 2, run.describe()
    assert sum(o200k(r.text) for r in memory) <= 1200, run.describe()
    [search_result, fetch] = memory
    assert 62 in hit_ids(search_result.text), search_result.text
    assert "[memory-governor]" in fetch.text and "Note 20 on sqlite storage" not in fetch.text, fetch.text
    assert [c["arguments"] for c in orchestrator.calls("mem_get_observation")] == [{"id": 62}]


def test_a_save_only_subagent_is_known_by_its_name(orchestrator):
    # `validator` is an agent defined in code: the shipped policy's subagents.agents makes it save-only.
    marker = "LANE-VALIDATOR"
    orchestrator.define_agent("validator", f"You are the validator. Record the bugs you find. {marker}")
    run = orchestrator.run("Validate the refresh-token change.",
                           main=[dispatch(orchestrator, "validator", "Validate src/auth/refresh.ts."),
                                 text("The validator is done.")],
                           lanes={marker: [tool_uses(search("token refresh")), text("Validation done.")]})  # fmt: skip
    [result] = run.results_of("mem_search", lane=marker)
    assert refused(result, "save-only", "validator"), result.text
    assert orchestrator.calls("mem_search") == []
    [row] = [r for r in orchestrator.decisions("pre_tool") if r["tool"] == "engram/mem_search"]
    assert row["agent_type"] == "validator", row


def test_without_govern_every_rule_is_broken(orchestrator):
    # The control: the same calls in a program that did not call govern().
    marker = "LANE-VALIDATOR"
    orchestrator.define_agent("validator", f"You are the validator. {marker}")
    run = orchestrator.run(
        "What did we decide about auth, search, the repository layer and storage? Show the full SQLite memory.",
        main=[four_searches(), tool_uses(call("mem_get_observation", {"id": 58})),
              tool_uses(call("mem_get_observation", {"id": 62})), tool_uses(call("mem_context", {"project": "myapp"})),
              dispatch(orchestrator, "validator", "Validate src/auth/refresh.ts."), text("Done.")],
        lanes={marker: [tool_uses(search("token refresh")), text("Validated.")]},
        govern=False,
    )  # fmt: skip
    searches = [c["arguments"]["limit"] for c in orchestrator.calls("mem_search")]
    assert searches == [10, 10, 10, 10, 3], searches  # four at limit 10, then the save-only validator's
    assert [c["arguments"]["id"] for c in orchestrator.calls("mem_get_observation")] == [58, 62]
    assert len(orchestrator.calls("mem_context")) == 1
    assert sum(o200k(r.text) for r in run.results()) > 1200, run.describe()
    assert all(served(r) for r in run.results()), run.describe()
    assert orchestrator.decisions() == []
