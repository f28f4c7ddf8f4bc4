"""memory-governor in an orchestrator on the real Claude Agent SDK (Python, from PyPI).

Each test runs an orchestrator program (sdk_driver.py) whose options went through
`governor.sdk.claude_agent.govern`, against fake_model.FakeModel and the Engram stand-in, and
asserts what the model received and what reached the server. Isolation mode
(`setting_sources=[]`, the SDK's advice for an untrusted cwd) loads no settings, so no command
hook runs: everything governed here was decided by the in-process callbacks. Settings mode
adds the project's own Claude Code install: each call is still decided and counted once.

Run: .venv/bin/python -m pytest tests/e2e/test_claude_agent_sdk.py -x -q
"""

from __future__ import annotations

import subprocess

import pytest
from conftest import HERE, PYTHON, ROOT, RUN_TIMEOUT
from fake_model import dispatch, engram, text, tool_uses
from test_claude_code import _assert_two_of_four, _four_searches, denied, hit_ids, o200k

pytestmark = pytest.mark.e2e
pytest_plugins = ["claude_agent_sdk_env"]

ISOLATION: list[str] = []


def _four_searches_at_10():
    return tool_uses(*[engram("mem_search", query=q, limit=10) for q in ("jwt auth", "fts5 search", "repository errors",
                                                                            "sqlite storage")])  # fmt: skip


def test_ungoverned_isolation_mode_lets_every_search_through(orchestrator):
    # What govern() is for: without it, isolation mode runs no memory-governor hook at all.
    orchestrator.run_sdk(
        "What did we decide about auth, search, the repository layer and storage?",
        main=[_four_searches_at_10(), text("Summarised.")],
        setting_sources=ISOLATION,
        govern=False,
    )
    calls = orchestrator.calls("mem_search")
    assert len(calls) == 4 and {c["arguments"]["limit"] for c in calls} == {10}, calls


def test_isolation_mode_two_of_four_parallel_searches_clamped_to_3_and_the_callers_hooks_still_called(orchestrator):
    run = orchestrator.run_sdk(
        "What did we decide about auth, search, the repository layer and storage?",
        main=[_four_searches_at_10(), text("Summarised.")],
        setting_sources=ISOLATION,
    )
    _assert_two_of_four(run, orchestrator)
    # Clamped to 3; one decided after the other's result asks 3 more, for the 3 hits it may find again.
    assert sorted(c["arguments"]["limit"] for c in orchestrator.calls("mem_search")) in ([3, 3], [3, 6])
    # The program's own PreToolUse hook saw all four calls: govern() added to it, replaced nothing.
    own = [c for c in orchestrator.own_hook_calls() if c["tool"] == "mcp__engram__mem_search"]
    assert len(own) == 4 and len({c["tool_use_id"] for c in own}) == 4, own
    # Decided in-process: the audit trail names the SDK's adapter, and no hook process ran.
    harnesses = {row["harness"] for row in orchestrator.decisions("pre_tool")}
    assert harnesses == {"claude-agent-sdk"}, harnesses


def test_isolation_mode_token_ceiling_holds(orchestrator):
    run = orchestrator.run_sdk(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
              tool_uses(engram("mem_get_observation", id=62)), text("Done.")],
        setting_sources=ISOLATION,
    )  # fmt: skip
    memory = run.results(prefix="mcp__engram__")
    assert len(memory) == 2, run.describe()
    received = sum(o200k(r.text) for r in memory)
    assert received <= 1200, f"{received} tokens of memory reached the model\n{run.describe()}"
    [search, fetch] = memory
    assert not search.is_error and 62 in hit_ids(search.text), search.text
    assert [c["arguments"] for c in orchestrator.calls("mem_get_observation")] == [{"id": 62}]
    assert "[memory-governor]" in fetch.text and "Note 20 on sqlite storage" not in fetch.text, fetch.text


def test_isolation_mode_unsurfaced_fetch_and_mem_context_are_refused(orchestrator):
    run = orchestrator.run_sdk(
        "Show me the full sanitizeFTS memory and pick up where we left off.",
        main=[tool_uses(engram("mem_get_observation", id=58)), tool_uses(engram("mem_context", project="myapp")),
              text("Without memory then.")],
        setting_sources=ISOLATION,
    )  # fmt: skip
    [fetch] = run.results_of("mem_get_observation")
    assert denied(fetch, "not surfaced", "58"), fetch.text
    [context] = run.results_of("mem_context")
    assert denied(context, "is off outside post-compaction recovery"), context.text
    assert orchestrator.calls() == []


def test_isolation_mode_a_save_only_programmatic_agent_cannot_search(orchestrator):
    # `validator` is defined in code (options.agents), with no file anywhere: the policy's
    # subagents.agents gives it its tier by name (the shipped policy lists it as save-only).
    marker = "LANE-VALIDATOR"
    orchestrator.define_agent("validator", f"You are the validator. Check the change and record bugs. {marker}",
                              tools=["mcp__engram__mem_search", "mcp__engram__mem_save"])  # fmt: skip
    run = orchestrator.run_sdk(
        "Validate the refresh-token change.",
        main=[dispatch("validator", f"Validate the refresh-token change in src/auth/refresh.ts. {marker}",
                       background=False), text("The validator is done.")],
        lanes={marker: [tool_uses(engram("mem_search", query="token refresh", limit=3)), text("Validation done.")]},
        setting_sources=ISOLATION,
    )  # fmt: skip
    assert run.lane(marker), "the subagent never talked to the model"
    [search] = run.results_of("mem_search", lane=marker)
    assert denied(search, "save-only", "validator"), search.text
    assert orchestrator.calls("mem_search") == []


def test_settings_mode_with_the_project_install_counts_each_call_once(orchestrator):
    orchestrator.install()  # the project's own Claude Code hooks, in .claude/settings.json
    run = orchestrator.run_sdk(
        "What did we decide about auth, search, the repository layer and storage?",
        main=[_four_searches(), text("Summarised.")],
        setting_sources=["project"],
    )
    _assert_two_of_four(run, orchestrator)
    rows = orchestrator.decisions()
    # Both observers ran: the command hooks (SessionStart is theirs alone) and the callbacks.
    assert {"claude-code", "claude-agent-sdk"} <= {r["harness"] for r in rows}, {r["harness"] for r in rows}
    # Each of the four calls was decided once before it ran and each result counted once.
    pre = [r for r in rows if r["event"] == "pre_tool" and r["tool"] == "engram/mem_search"]
    post = [r for r in rows if r["event"] == "post_tool" and r["tool"] == "engram/mem_search"]
    assert len(pre) == 4 and len({r["call_id"] for r in pre}) == 4, pre
    assert len(post) == 2, post
    assert sorted(r["decision"] for r in pre) == ["allow", "allow", "deny", "deny"], pre
    prompts = [r for r in rows if r["event"] == "prompt"]
    assert len(prompts) == 1, prompts


def test_settings_mode_a_clamp_is_applied_once_decided_by_either_observer(orchestrator):
    orchestrator.install()
    run = orchestrator.run_sdk("What did we decide about auth?",
                               main=[tool_uses(engram("mem_search", query="jwt auth", limit=10)), text("OK.")],
                               setting_sources=["project"])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert not result.is_error and len(hit_ids(result.text)) == 3, result.text
    assert [c["arguments"]["limit"] for c in orchestrator.calls("mem_search")] == [3]
    pre = [r for r in orchestrator.decisions("pre_tool") if r["tool"] == "engram/mem_search"]
    assert [r["decision"] for r in pre] == ["rewrite"], pre


# -- the TypeScript SDK, through the module `install claude-agent-sdk` writes ---------------


def test_typescript_sdk_isolation_mode_two_of_four_clamped_to_3(orchestrator):
    orchestrator.env["MEMORY_GOVERNOR_WARM_SERVER"] = "auto"  # the module forwards to the warm server
    try:
        run = orchestrator.run_ts(
            "What did we decide about auth, search, the repository layer and storage?",
            main=[_four_searches_at_10(), text("Summarised.")],
            setting_sources=ISOLATION,
        )
        _assert_two_of_four(run, orchestrator)
        assert sorted(c["arguments"]["limit"] for c in orchestrator.calls("mem_search")) in ([3, 3], [3, 6])
        own = [c for c in orchestrator.own_hook_calls() if c["tool"] == "mcp__engram__mem_search"]
        assert len(own) == 4, own
        assert {row["harness"] for row in orchestrator.decisions("pre_tool")} == {"claude-agent-sdk"}
        assert (orchestrator.state / "run" / "governor.sock").exists(), "no warm server was started"
    finally:
        orchestrator.governor("serve", "--stop", check=False)


def test_isolation_mode_mem_context_unlocked_once_after_compact(orchestrator):
    first = orchestrator.run_sdk("Continue with the auth work where we left off.",
                                 main=[tool_uses(engram("mem_context", project="myapp")), text("Continuing.")],
                                 setting_sources=ISOLATION)  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    compact = orchestrator.run_sdk("/compact", resume=first.session_id, setting_sources=ISOLATION)
    assert [r.lane for r in compact.requests] == ["compact"], compact.requests
    after = orchestrator.run_sdk("Where were we?", resume=first.session_id, setting_sources=ISOLATION,
                                 main=[tool_uses(engram("mem_context", project="myapp")),
                                       tool_uses(engram("mem_context", project="myapp")), text("Recovered.")])  # fmt: skip
    first_use, second_use = after.results_of("mem_context")
    assert not first_use.is_error and first_use.text.startswith("## Memory from Previous Sessions"), first_use.text
    assert denied(second_use, "is off outside post-compaction recovery"), second_use.text
    assert len(orchestrator.calls("mem_context")) == 1


def test_isolation_mode_a_resumed_session_arms_the_resume_trigger(orchestrator):
    # The binary fires SessionStart resume for command hooks only; govern() decides one for a
    # resumed session's first event. The shipped policy wants 30 idle minutes: this team wants none.
    orchestrator.team_policy("mem_context:\n  unlocked_by:\n    session_resume:\n      scope: next_turn\n"
                             "      uses: 1\n      min_idle_minutes: 0\n")  # fmt: skip
    first = orchestrator.run_sdk("Where were we on the search endpoint?", setting_sources=ISOLATION,
                                 main=[tool_uses(engram("mem_context", project="myapp")), text("OK.")])  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside"), locked.text
    again = orchestrator.run_sdk("Pick up where we left off.", resume=first.session_id, setting_sources=ISOLATION,
                                 main=[tool_uses(engram("mem_context", project="myapp")), text("OK.")])  # fmt: skip
    [unlocked] = again.results_of("mem_context")
    assert not unlocked.is_error, unlocked.text
    starts = [r["code"] for r in orchestrator.decisions("session_start")]
    assert starts == ["armed:session_resume"], starts


def test_settings_mode_a_trimmed_result_reaches_the_model_trimmed_and_counted_once(orchestrator):
    orchestrator.install()
    run = orchestrator.run_sdk(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
              tool_uses(engram("mem_get_observation", id=62)), text("Done.")],
        setting_sources=["project"],
    )  # fmt: skip
    memory = run.results(prefix="mcp__engram__")
    assert sum(o200k(r.text) for r in memory) <= 1200, run.describe()
    [_, fetch] = memory
    assert "[memory-governor]" in fetch.text and "Note 20 on sqlite storage" not in fetch.text, fetch.text
    post = [r for r in orchestrator.decisions("post_tool") if r["tool"].startswith("engram/")]
    assert [r["tool"] for r in post] == ["engram/mem_search", "engram/mem_get_observation"], post


def test_isolation_mode_the_policy_gives_a_programmatic_agent_search_by_name(orchestrator):
    orchestrator.team_policy("subagents:\n  agents:\n    reviewer: search-capable\n")
    marker = "LANE-REVIEWER"
    orchestrator.define_agent("reviewer", f"You are the reviewer. Check the change against past decisions. {marker}",
                              tools=["mcp__engram__mem_search"])  # fmt: skip
    run = orchestrator.run_sdk(
        "Review the refresh-token change.",
        main=[dispatch("reviewer", f"Review src/auth/refresh.ts against what we decided. {marker}", background=False),
              text("Reviewed.")],
        lanes={marker: [tool_uses(engram("mem_search", query="token refresh", limit=10)), text("Looks right.")]},
        setting_sources=ISOLATION,
    )  # fmt: skip
    [search] = run.results_of("mem_search", lane=marker)
    assert not search.is_error and search.text.startswith("Found "), search.text
    assert [c["arguments"]["limit"] for c in orchestrator.calls("mem_search")] == [3]
    [row] = [r for r in orchestrator.decisions("pre_tool") if r["tool"] == "engram/mem_search"]
    assert row["agent_type"] == "reviewer", row


def test_typescript_sdk_isolation_mode_token_ceiling_and_refusals_hold(orchestrator):
    # The module's PostToolUse trims what reaches the model; its PreToolUse refuses an unsurfaced
    # fetch and mem_context, through the hook process (no warm server) this time.
    run = orchestrator.run_ts(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
              tool_uses(engram("mem_get_observation", id=58), engram("mem_context", project="myapp")),
              tool_uses(engram("mem_get_observation", id=62)),
              text("Done.")],
        setting_sources=ISOLATION,
    )  # fmt: skip
    memory = run.results(prefix="mcp__engram__")
    assert len(memory) == 4, run.describe()
    # A refused fetch is not counted: the surfaced one after it is still this turn's one full fetch.
    # The second batch's two calls run side by side: their results come back in either order.
    [search] = run.results_of("mem_search")
    unsurfaced, fetch = run.results_of("mem_get_observation")
    [context] = run.results_of("mem_context")
    assert sum(o200k(r.text) for r in memory) <= 1200, run.describe()
    assert not search.is_error and 62 in hit_ids(search.text), search.text
    assert "[memory-governor]" in fetch.text and "Note 20 on sqlite storage" not in fetch.text, fetch.text
    assert denied(unsurfaced, "not surfaced", "58"), unsurfaced.text
    assert denied(context, "is off outside"), context.text
    assert [c["arguments"] for c in orchestrator.calls("mem_get_observation")] == [{"id": 62}]
    assert orchestrator.calls("mem_context") == []
    assert {row["harness"] for row in orchestrator.decisions("post_tool")} == {"claude-agent-sdk"}


# -- the README's example, and a call the SDK refuses after govern() allowed it ------------


def readme_example() -> str:
    """The Python program in README.md's Orchestrators section, as a user copies it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Orchestrators") :]
    return section[
        section.index("```python\n") + len("```python\n") : section.index("\n```", section.index("```python"))
    ]


def test_the_readme_example_runs_as_written_and_its_memory_calls_are_governed(orchestrator):
    # `engram` on PATH is the Engram stand-in; the example itself is run byte for byte.
    program = orchestrator.project / "example.py"
    program.write_text(readme_example() + "\n")
    bin_dir = orchestrator.tmp / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "engram"
    shim.write_text(f'#!/bin/sh\nexec "{PYTHON}" "{HERE / "engram_mcp.py"}"\n')
    shim.chmod(0o755)
    orchestrator.model.script([_four_searches_at_10(), text("We moved to JWT.")])
    env = {**orchestrator.env, **orchestrator.engram_server_env(), "PATH": f"{bin_dir}:{orchestrator.env['PATH']}",
           "PYTHONPATH": f"{orchestrator.sdk}:{ROOT}"}  # fmt: skip
    proc = subprocess.run([PYTHON, str(program)], cwd=orchestrator.project, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0 and "We moved to JWT." in proc.stdout, proc.stderr[-3000:]
    assert [c["arguments"]["limit"] for c in orchestrator.calls("mem_search")] == [3, 3]
    assert {row["harness"] for row in orchestrator.decisions("pre_tool")} == {"claude-agent-sdk"}


def test_a_call_the_permission_check_refuses_after_govern_allowed_it_gives_its_reservation_back(orchestrator):
    # mem_search is not in allowed_tools: govern() reserves each search at PreToolUse, then the SDK
    # refuses both (no PostToolUse or PostToolUseFailure follows); the batch's end releases them.
    run = orchestrator.run_sdk("What did we decide about auth?", setting_sources=ISOLATION,
                               main=[tool_uses(engram("mem_search", query="jwt auth", limit=3),
                                               engram("mem_search", query="sqlite", limit=3)), text("OK.")],
                               extra={"allowed_tools": ["Agent", "Task"]})  # fmt: skip
    results = run.results_of("mem_search")
    assert len(results) == 2 and all(r.is_error and "permission" in r.text for r in results), run.describe()
    assert orchestrator.calls() == []
    assert orchestrator.ledger_calls() == [("search", "released"), ("search", "released")]
    assert [r["code"] for r in orchestrator.decisions("tool_failed")] == ["released", "released"]
