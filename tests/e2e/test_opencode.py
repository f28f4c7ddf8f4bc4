"""memory-governor through the real OpenCode binary: what THE MODEL RECEIVED.

Every test drives `opencode run` (pinned in opencode_env.py) in a fresh project where the
project's own installer wrote the plugin, against fake_chat.FakeChat as a custom provider,
which plays the model's side from a script and records each request. Assertions read the tool
messages the model was sent, what the Engram stand-in (engram_mcp.py) received, and the ledger.
A run takes ~10 s (the file ~1 min on 2 cores): each test makes the most of one or two.

Run: .venv/bin/python -m pytest tests/e2e/test_opencode.py -m e2e -x -q
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.register_assert_rewrite("opencode_env")
from conftest import PYTHON  # noqa: E402
from fake_chat import Reply, call, text, tool_uses  # noqa: E402
from opencode_env import OpenCodeHarness  # noqa: E402

from governor.engine.tokens import counter  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("opencode_env",)  # its fixtures: oc (hook processes), oc_warm (the warm server)

NOTE = "[memory-governor]"
HIT = re.compile(r"^\[\d+\] #(\d+) \(", re.M)


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    """A tool call as OpenCode names an MCP tool to the model: <server>_<tool>."""
    return call(f"engram_{tool}", tool_input)


def dispatch(agent: str, prompt: str) -> Reply:
    """The reply that starts a subagent with OpenCode's `task` tool."""
    return tool_uses(call("task", {"description": f"Run {agent}", "prompt": prompt, "subagent_type": agent}))


def o200k(text_: str) -> int:
    return counter("o200k_base").count(text_)


def hit_ids(result_text: str) -> list[int]:
    return [int(i) for i in HIT.findall(result_text)]


def denied(result: Any, *fragments: str) -> bool:
    """A call the governor refused: the plugin throws, and OpenCode gives the model the message."""
    return result.text.startswith("memory-governor") and all(f in result.text for f in fragments)


FOUR_SEARCHES = tool_uses(engram("mem_search", query="jwt auth", limit=10), engram("mem_search", query="fts5"),
                          engram("mem_search", query="repository errors", limit=3),
                          engram("mem_search", query="sqlite", limit=3))  # fmt: skip


# -- L1: the cap and the clamp, in one parallel batch, through the warm server's socket ---------------


def test_parallel_searches_get_two_clamped_results_and_two_denials(oc_warm: OpenCodeHarness) -> None:
    run = oc_warm.run("What did we decide about auth, search, the repository layer and storage?",
                      main=[FOUR_SEARCHES, text("Summarised.")])  # fmt: skip
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    # OpenCode runs one reply's tool calls concurrently: which two come first is a race.
    real = [r for r in results if not denied(r)]
    assert len(real) == 2, run.describe()
    for r in real:
        assert r.text.startswith("Found ") and 0 < len(hit_ids(r.text)) <= 3, r.text
    for r in results:
        if r not in real:
            assert denied(r, "max_search_calls=2"), r.text
    # The clamp reached the server (limit 10, and Engram's default 10, -> 3); the refused calls never did.
    logged = sorted((c["arguments"] for c in oc_warm.calls("mem_search")), key=lambda a: a["query"])
    assert [a["query"] for a in logged] == sorted(r.input["query"] for r in real), logged
    # Clamped to 3; one decided after the other's result asks 3 more, for the 3 hits it may find again.
    assert sorted(a["limit"] for a in logged) in ([3, 3], [3, 6]) and all(set(a) == {"query", "limit"} for a in logged)
    assert sorted(oc_warm.ledger_calls()) == [("search", "committed")] * 2 + [("search", "denied")] * 2
    assert (oc_warm.state / "run" / "governor.sock").exists(), "the plugin reached the warm server"
    # The prompt's memory-need line reached the model with the user's message (a synthetic part).
    assert "memory_need=" in run.lane()[0].first_user_text


# -- fetches, the token ceiling, and the routes around the memory tools ------------------------------


def test_a_guessed_fetch_is_denied_the_turn_ceiling_holds_and_engram_itself_is_out_of_reach(
    oc: OpenCodeHarness,
) -> None:
    run = oc.run(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[
            tool_uses(engram("mem_get_observation", id=62)),  # guessed: not surfaced yet
            tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
            tool_uses(engram("mem_get_observation", id=62)),  # 4,800 characters: ~1,080 tokens
            tool_uses(
                call("bash", {"command": "engram search sqlite --limit 50", "description": "search"}),
                call("read", {"filePath": str(oc.home / ".engram" / "engram.db")}),
            ),
            text("Done."),
        ],
    )
    guessed, fetched = run.results_of("mem_get_observation")
    assert denied(guessed, "id=62 was not surfaced"), guessed.text
    [search] = run.results_of("mem_search")
    assert 62 in hit_ids(search.text), search.text
    received = o200k(search.text) + o200k(fetched.text)
    assert received <= 1200, f"{received} tokens of memory reached the model\n{run.describe()}"
    # The server returned the whole observation; the model got the governor's replacement.
    assert NOTE in fetched.text and "Note 20 on sqlite storage" not in fetched.text, fetched.text
    assert [c["arguments"] for c in oc.calls("mem_get_observation")] == [{"id": 62}]
    shell, read = run.results(prefix="")[-2:]
    assert (shell.name, read.name) == ("bash", "read"), run.describe()
    assert denied(shell, "route 'engram-cli'"), shell.text
    assert denied(read, "route 'engram-database'"), read.text


# -- mem_context: locked, then allowed once by a recall prompt in the next turn ----------------------


def test_mem_context_is_locked_until_a_recall_prompt_then_allowed_once(oc_warm: OpenCodeHarness) -> None:
    first = oc_warm.run("Continue with the auth work where we left off.",
                        main=[tool_uses(engram("mem_context", project="myapp")), text("Continuing without it.")])  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    context = tool_uses(engram("mem_context", project="myapp"))
    again = oc_warm.run("give me all context", session=first.session_id, main=[context, context, text("Recovered.")])
    assert again.session_id == first.session_id
    allowed, second = again.results_of("mem_context")
    assert not denied(allowed) and allowed.text.startswith("## Memory from Previous Sessions"), allowed.text
    assert o200k(allowed.text) <= 1200 and NOTE in allowed.text, "the dump is cut to whole entries"
    assert denied(second, "is off outside post-compaction recovery"), second.text
    assert len(oc_warm.calls("mem_context")) == 1
    assert "explicit recall requested" in again.lane()[0].all_text()


# -- subagents: child sessions, counted in the dispatching turn -------------------------------------


def test_subagent_tiers_and_the_turn_budget_subagents_share(oc: OpenCodeHarness) -> None:
    # A subagent is a child session (parentID: the dispatcher's); in 1.18.33 it has no `task` tool
    # of its own (seen: "Model tried to call unavailable tool 'task'"), so no nesting to test.
    validator, researcher = "LANE-VALIDATOR", "LANE-RESEARCHER"
    oc.agent("validator", f"You are the validator. Check the change and record bugs. {validator}")
    oc.agent("researcher", f"You research project history. {researcher}",
             front={"engram_access_tier": "search-capable"})  # fmt: skip
    bug = {"title": "Refresh ran twice on slow networks", "type": "bugfix", "project": "myapp",
           "content": "**What**: a retry re-sent the refresh\n**Why**: no idempotency key\n**Where**: refresh.ts"}  # fmt: skip
    run = oc.run(
        "Validate the refresh-token change, and check what we decided about auth.",
        main=[tool_uses(engram("mem_search", query="auth", limit=3)),
              dispatch("validator", f"Validate the change in src/auth/refresh.ts. {validator}"),
              dispatch("researcher", f"Find what we decided about search. {researcher}"),
              text("The validator recorded the bug.")],
        lanes={
            validator: [tool_uses(engram("mem_search", query="token refresh", limit=3)),
                        tool_uses(engram("mem_save", **bug)),
                        text("Validation done; one bug saved.")],
            researcher: [tool_uses(engram("mem_search", query="search", limit=3)),
                         tool_uses(engram("mem_search", query="fts5", limit=3)),
                         text("Search decisions found.")],
        },
    )  # fmt: skip
    [main_search] = run.results_of("mem_search", lane="main")
    [refused] = run.results_of("mem_search", lane=validator)
    [save] = run.results_of("mem_save", lane=validator)
    allowed, capped = run.results_of("mem_search", lane=researcher)
    assert not denied(main_search), main_search.text
    assert denied(refused, "save-only", "validator"), refused.text
    assert save.text.startswith('Memory saved: "Refresh ran twice on slow networks" (bugfix)'), save.text
    assert not denied(allowed), "search-capable by its front matter"
    assert denied(capped, "max_search_calls=2"), "the researcher's searches count in the user's turn"
    assert [c["arguments"]["query"] for c in oc.calls("mem_search")] == ["auth", "search"]
    reports = [r.text for r in run.results(lane="main", prefix="task")]
    assert any("Validation done; one bug saved." in r for r in reports), reports


# -- when no governor answers: on_error, visibly ----------------------------------------------------


def test_a_governor_that_cannot_run_refuses_memory_calls_and_says_so(oc: OpenCodeHarness) -> None:
    oc.install("--scope", "user")  # the scope that names this machine's interpreter
    plugin = oc.user_plugin.read_text()  # the interpreter the plugin names is gone (a removed virtualenv)
    oc.user_plugin.write_text(plugin.replace(json.dumps(PYTHON), json.dumps("/nonexistent/python3"), 1))
    run = oc.run("What did we decide about auth?",
                 main=[tool_uses(engram("mem_search", query="auth", limit=3), call("bash", {"command": "echo hi",
                       "description": "greet"})), text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert result.text.startswith("memory-governor could not check this memory call"), result.text
    assert "on_error=closed" in result.text
    assert oc.calls("mem_search") == []
    [shell] = [r for r in run.results(prefix="bash")]
    assert "hi" in shell.text, "other tools are never blocked by it"
    assert "memory-governor could not be reached" in run.stderr and "on_error: closed" in run.stderr, run.stderr


def test_the_committed_plugin_governs_and_with_no_governor_says_so_and_refuses_under_closed(
    oc: OpenCodeHarness,
) -> None:
    """The project's plugin runs the committed launcher beside it: with memory-governor on PATH the
    search is capped; with none on this machine the user is told at session start (`opencode run`
    shows it on stderr) and, under on_error: closed, memory calls are refused with that reason."""
    oc.team_policy("version: 1\non_error: closed\n")
    oc.install()
    plugin = oc.plugin.read_text()
    assert '"launcher": ".memory-governor/hook"' in plugin and str(oc.tmp) not in plugin
    run = oc.run("What did we decide about auth?",
                 main=[tool_uses(engram("mem_search", query="auth", limit=10)), text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert not denied(result) and [c["arguments"]["limit"] for c in oc.calls("mem_search")] == [3], result.text
    oc.env["PATH"] = "/usr/bin:/bin"  # this machine has no governor (node is in /usr/bin)
    run = oc.run("And about sessions?",
                 main=[tool_uses(engram("mem_search", query="sessions", limit=3)), text("Without memory.")])  # fmt: skip
    assert "memory-governor is not installed on this machine" in run.stderr, run.stderr[-2000:]
    assert "on_error: closed" in run.stderr
    [result] = run.results_of("mem_search")
    assert result.text.startswith("memory-governor is not installed"), result.text
    assert len(oc.calls("mem_search")) == 1
