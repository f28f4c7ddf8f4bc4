"""memory-governor through the real Factory Droid binary: what THE MODEL RECEIVED.

Every test drives `droid exec` (pinned in droid_env.py) in a fresh project where the project's own
installer wrote the hooks, against fake_chat.FakeChat as a custom model, which plays the model's
side from a script and records each request. Droid's MCP tools are deferred: each script loads them
with ToolSearch first, as a model must. Droid applies no rewritten arguments without skipping its
own confirmation and cannot replace a result: a clamp reaches the model as a refusal naming the
limit to call again with, and a result past the budget reaches it whole, counted whole. A control
run with nothing installed shows what the same script does ungoverned.

Run: .venv/bin/python -m pytest tests/e2e/test_droid.py -m e2e -x -q
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.register_assert_rewrite("droid_env")
from droid_env import DroidHarness, load  # noqa: E402
from fake_chat import call, text, tool_uses  # noqa: E402
from sandbox import NOTE, hit_ids, o200k  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("droid_env",)


def name(tool: str) -> str:
    return f"engram___{tool}"


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    return call(name(tool), tool_input)


def denied(result: Any, *fragments: str) -> bool:
    """A call the governor refused: Droid gives the model "Error: <reason>"."""
    return result.text.startswith("Error: memory-governor") and all(f in result.text for f in fragments)


def test_a_clamp_is_a_refusal_naming_the_limit_the_retry_runs_and_the_cap_holds(droid: DroidHarness) -> None:
    run = droid.run("What did we decide about auth and search?",
                    main=[load(name("mem_search")),
                          tool_uses(engram("mem_search", query="jwt auth", limit=10)),
                          tool_uses(engram("mem_search", query="jwt auth", limit=3)),
                          tool_uses(engram("mem_search", query="fts5", limit=3)),
                          tool_uses(engram("mem_search", query="sqlite", limit=3)), text("Summarised.")])  # fmt: skip
    clamp, retried, second, third = run.results_of("mem_search")
    assert denied(clamp, '{"limit": 3}', "counts nothing"), clamp.text
    assert not denied(retried) and 0 < len(hit_ids(retried.text)) <= 3, retried.text
    assert not denied(second), second.text
    assert denied(third, "max_search_calls=2"), "the refused clamp took no slot; the third real search is over"
    assert [c["arguments"]["limit"] for c in droid.calls("mem_search")] == [3, 3], "the refused calls never ran"
    assert sorted(droid.ledger_calls()) == [("search", "committed")] * 2 + [("search", "denied")] * 2


def test_a_guessed_fetch_is_denied_a_result_past_the_budget_is_counted_whole_and_routes_are_refused(
    droid: DroidHarness,
) -> None:
    run = droid.run("What did we decide about storage? Show the full SQLite memory.",
                    main=[load(name("mem_search"), name("mem_get_observation")),
                          tool_uses(engram("mem_get_observation", id=62)),  # not surfaced yet
                          tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
                          tool_uses(engram("mem_get_observation", id=62)),  # 4,800 characters: ~1,080 tokens
                          tool_uses(engram("mem_search", query="wal mode", limit=1)),
                          tool_uses(call("Execute", {"command": "engram search sqlite --limit 50",
                                                     "riskLevelReason": "reads only", "riskLevel": "low"}),
                                    call("Read", {"file_path": str(droid.home / ".engram" / "engram.db")})),
                          text("Done.")])  # fmt: skip
    guessed, fetched = run.results_of("mem_get_observation")
    assert denied(guessed, "id=62 was not surfaced"), guessed.text
    first, after = run.results_of("mem_search")
    assert NOTE not in fetched.text and o200k(first.text) + o200k(fetched.text) > 1200, "Droid cannot cut it"
    assert denied(after, "budget is spent"), "counted whole: the turn has nothing left for another search"
    assert [c["arguments"] for c in droid.calls("mem_get_observation")] == [{"id": 62}]
    shell, read = run.results(prefix="")[-2:]
    assert (shell.name, read.name) == ("Execute", "Read"), run.describe()
    assert denied(shell, "route 'engram-cli'"), shell.text
    assert denied(read, "route 'engram-database'"), read.text
    [row] = [r for r in droid.decisions("post_tool") if r["tool"] == "engram/mem_get_observation"]
    assert row["code"] == "trimmed_uncut" and row["tokens_delivered"] == row["tokens_counted"] > 800, row


def test_mem_context_stays_locked_in_droid_exec_which_sends_no_prompt(droid: DroidHarness) -> None:
    run = droid.run("give me all context", main=[load(name("mem_context")),
                                                 tool_uses(engram("mem_context", project="myapp")), text("OK.")])  # fmt: skip
    [locked] = run.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), "the recall prompt never reached the hooks"
    assert droid.calls("mem_context") == []


def test_a_project_install_runs_the_launcher_and_doctor_checks_it(droid: DroidHarness) -> None:
    droid.scope = "project"
    droid.install()
    assert ".memory-governor/hook" in droid.settings.read_text() and str(droid.tmp) not in droid.settings.read_text()
    run = droid.run("What did we decide about auth?", main=[load(name("mem_search")),
                                                           tool_uses(engram("mem_search", query="auth", limit=10)),
                                                           text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert denied(result, '{"limit": 3}') and droid.calls("mem_search") == [], result.text
    doctor = droid.governor("doctor", check=False)
    assert "droid (project)" in doctor.stdout and "limit 10 refused" in doctor.stdout, doctor.stdout


def test_without_the_install_every_call_goes_through(droid: DroidHarness) -> None:
    droid.hooks = False
    run = droid.run("What did we decide about auth and storage?",
                    main=[load(name("mem_search"), name("mem_get_observation")),
                          tool_uses(engram("mem_search", query="jwt auth", limit=10),
                                    engram("mem_search", query="sqlite", limit=3),
                                    engram("mem_search", query="fts5", limit=3)),
                          tool_uses(engram("mem_get_observation", id=62)), text("Everything.")])  # fmt: skip
    assert not any(denied(r) for r in run.results()), run.describe()
    assert sorted(c["arguments"]["limit"] for c in droid.calls("mem_search")) == [3, 3, 10]
    assert len(droid.calls("mem_get_observation")) == 1
