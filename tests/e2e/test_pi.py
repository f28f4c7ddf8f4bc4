"""memory-governor through the real Pi binary: what THE MODEL RECEIVED.

Every test drives `pi -p` (pinned in pi_env.py) in a fresh project where the project's own
installer wrote the extension, against fake_chat.FakeChat as a models.json provider, which plays the
model's side from a script and records each request. Assertions read the tool messages the model
was sent, what the Engram stand-in (engram_mcp.py) received, and the ledger. A run takes ~5-10 s:
each test makes the most of one or two, and a control run with nothing installed shows what the
same script does ungoverned.

Run: .venv/bin/python -m pytest tests/e2e/test_pi.py -m e2e -x -q
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.register_assert_rewrite("pi_env")
import scenarios  # noqa: E402
from fake_chat import call, text, tool_uses  # noqa: E402
from pi_env import PiHarness  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("pi_env",)  # its fixtures: pi (hook processes), pi_warm (the warm server)


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    """A tool call as Pi names an MCP tool to the model: mcp__<server>__<tool>."""
    return call(f"mcp__engram__{tool}", tool_input)


def denied(result: Any, *fragments: str) -> bool:
    """A call the governor refused: the extension blocks it, and Pi gives the model the reason."""
    return result.text.startswith("memory-governor") and all(f in result.text for f in fragments)


def name(tool: str) -> str:
    return f"mcp__engram__{tool}"


def test_parallel_searches_are_capped_and_clamped_and_the_next_prompt_has_a_fresh_budget(pi_warm: PiHarness) -> None:
    scenarios.parallel_searches_then_a_fresh_turn(pi_warm, name, denied)
    assert (pi_warm.state / "run" / "governor.sock").exists(), "the extension reached the warm server"


def test_a_guessed_fetch_is_denied_the_turn_ceiling_holds_and_engram_itself_is_out_of_reach(pi: PiHarness) -> None:
    scenarios.fetches_ceiling_and_routes(pi, name, denied, call("bash", {"command": "engram search sqlite --limit 50"}),
                                         call("read", {"path": str(pi.home / ".engram" / "engram.db")}))  # fmt: skip


def test_mem_context_is_locked_until_a_recall_prompt_then_allowed_once(pi_warm: PiHarness) -> None:
    scenarios.mem_context_locked_then_recalled_once(pi_warm, name, denied)


# -- codemode: Pi's default exposure, where a script calls the memory tools -----------------------------


def test_memory_calls_a_codemode_script_makes_are_governed_like_direct_ones(pi: PiHarness) -> None:
    pi.exposure = "codemode"  # Pi's default: the model reaches MCP tools only from a codemode script
    script = ("const q = [['jwt auth', 10], ['fts5', undefined], ['sqlite', 3]];\n"
              "const out = await Promise.allSettled(q.map(([query, limit]) => "
              "tools.mcp__engram__mem_search(limit === undefined ? {query} : {query, limit})));\n"
              "return out.map((r) => r.status === 'fulfilled' ? r.value.content[0].text : 'REFUSED ' + r.reason.message)"
              ".join('\\n=====\\n')")  # fmt: skip
    run = pi.run("What did we decide about auth and search?", main=[tool_uses(call("codemode", {"code": script})),
                                                                     text("Done.")])  # fmt: skip
    [result] = run.results(prefix="codemode")
    parts = result.text.split("=====")
    assert len(parts) == 3, result.text
    assert sum("REFUSED memory-governor" in p and "max_search_calls=2" in p for p in parts) == 1, result.text
    # The script reads each result as MCP's CallToolResult, and what it reads is the governed one: the
    # hits as snippets, without the date, project and scope line the server wrote under each.
    found = [p for p in parts if "Found " in p]
    assert len(found) == 2 and not any("| scope: " in p for p in found), result.text
    assert sorted(c["arguments"]["limit"] for c in pi.calls("mem_search")) == [3, 3]


# -- the control run: nothing installed, and the same scripts go through ------------------------------


def test_without_the_install_every_call_goes_through(pi: PiHarness) -> None:
    scenarios.ungoverned(pi, name, denied)


# -- the project scope: the committed launcher, loaded in a project the user trusts -------------------


def test_the_project_install_runs_the_committed_launcher_in_a_trusted_project(pi: PiHarness) -> None:
    pi.scope = "project"
    scenarios.project_install(pi, name, denied, pi.extension)


# -- a continued session is a resume (Pi says "startup" for every process it starts) -------------------


def test_a_continued_session_arms_the_resume_trigger(pi: PiHarness) -> None:
    # The shipped policy wants 30 idle minutes before a resume unlocks mem_context: this team wants none.
    pi.team_policy("mem_context:\n  unlocked_by:\n    session_resume:\n      scope: next_turn\n      uses: 1\n"
                   "      min_idle_minutes: 0\n")  # fmt: skip
    first = pi.run("Where were we on the search endpoint?",
                   main=[tool_uses(engram("mem_context", project="myapp")), text("OK.")])  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside"), locked.text
    again = pi.run("Pick up where we left off.", session=first.session_id,
                   main=[tool_uses(engram("mem_context", project="myapp")), text("OK.")])  # fmt: skip
    [unlocked] = again.results_of("mem_context")
    assert not denied(unlocked), unlocked.text
    starts = [r["code"] for r in pi.decisions("session_start")]
    assert starts[-1] == "armed:session_resume", starts
