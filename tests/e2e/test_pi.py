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
from fake_chat import call, text, tool_uses  # noqa: E402
from pi_env import PiHarness  # noqa: E402
from sandbox import NOTE, hit_ids, o200k  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("pi_env",)  # its fixtures: pi (hook processes), pi_warm (the warm server)


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    """A tool call as Pi names an MCP tool to the model: mcp__<server>__<tool>."""
    return call(f"mcp__engram__{tool}", tool_input)


def denied(result: Any, *fragments: str) -> bool:
    """A call the governor refused: the extension blocks it, and Pi gives the model the reason."""
    return result.text.startswith("memory-governor") and all(f in result.text for f in fragments)


FOUR_SEARCHES = tool_uses(engram("mem_search", query="jwt auth", limit=10), engram("mem_search", query="fts5"),
                          engram("mem_search", query="repository errors", limit=3),
                          engram("mem_search", query="sqlite", limit=3))  # fmt: skip
GUESSED_FETCH = tool_uses(engram("mem_get_observation", id=62))  # not surfaced by any search yet


# -- L1: the cap and the clamp in one parallel batch, then a fresh budget the next turn ---------------


def test_parallel_searches_are_capped_and_clamped_and_the_next_prompt_has_a_fresh_budget(pi_warm: PiHarness) -> None:
    run = pi_warm.run("What did we decide about auth, search, the repository layer and storage?",
                      main=[FOUR_SEARCHES, text("Summarised.")])  # fmt: skip
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    real = [r for r in results if not denied(r)]
    assert len(real) == 2, run.describe()
    for r in real:
        assert r.text.startswith("Found ") and 0 < len(hit_ids(r.text)) <= 3, r.text
    for r in results:
        if r not in real:
            assert denied(r, "max_search_calls=2"), r.text
    # The clamp reached the server (limit 10, and Engram's default 10, -> 3); the refused calls never did.
    logged = sorted((c["arguments"] for c in pi_warm.calls("mem_search")), key=lambda a: a["query"])
    assert logged == sorted(({"query": r.input["query"], "limit": 3} for r in real), key=lambda a: a["query"])
    assert sorted(pi_warm.ledger_calls()) == [("search", "committed")] * 2 + [("search", "denied")] * 2
    assert (pi_warm.state / "run" / "governor.sock").exists(), "the extension reached the warm server"
    assert "memory_need=" in run.lane()[0].all_text(), "the prompt's memory-need line reached the model"
    # The next prompt of the same session is a new turn: its searches have their own budget.
    again = pi_warm.run("And what about sessions?", session=run.session_id,
                        main=[tool_uses(engram("mem_search", query="sessions", limit=3),
                                        engram("mem_search", query="tokens", limit=3)), text("Done.")])  # fmt: skip
    assert [denied(r) for r in again.results_of("mem_search")] == [False, False], again.describe()
    assert len(pi_warm.calls("mem_search")) == 4


# -- fetches, the token ceiling, and the routes around the memory tools ------------------------------


def test_a_guessed_fetch_is_denied_the_turn_ceiling_holds_and_engram_itself_is_out_of_reach(pi: PiHarness) -> None:
    run = pi.run(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[
            GUESSED_FETCH,
            tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
            tool_uses(engram("mem_get_observation", id=62)),  # 4,000 characters: ~900 tokens
            tool_uses(call("bash", {"command": "engram search sqlite --limit 50"}),
                      call("read", {"path": str(pi.home / ".engram" / "engram.db")})),
            text("Done."),
        ],
    )  # fmt: skip
    guessed, fetched = run.results_of("mem_get_observation")
    assert denied(guessed, "id=62 was not surfaced"), guessed.text
    [search] = run.results_of("mem_search")
    assert 62 in hit_ids(search.text), search.text
    received = o200k(search.text) + o200k(fetched.text)
    assert received <= 1200, f"{received} tokens of memory reached the model\n{run.describe()}"
    # The server returned the whole observation; the model got the governor's replacement.
    assert NOTE in fetched.text and "Note 20 on sqlite storage" not in fetched.text, fetched.text
    assert [c["arguments"] for c in pi.calls("mem_get_observation")] == [{"id": 62}]
    shell, read = run.results(prefix="")[-2:]
    assert (shell.name, read.name) == ("bash", "read"), run.describe()
    assert denied(shell, "route 'engram-cli'"), shell.text
    assert denied(read, "route 'engram-database'"), read.text


# -- mem_context: locked, then allowed once by a recall prompt in the next turn ----------------------


def test_mem_context_is_locked_until_a_recall_prompt_then_allowed_once(pi_warm: PiHarness) -> None:
    first = pi_warm.run("Continue with the auth work where we left off.",
                        main=[tool_uses(engram("mem_context", project="myapp")), text("Continuing without it.")])  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    context = tool_uses(engram("mem_context", project="myapp"))
    again = pi_warm.run("give me all context", session=first.session_id, main=[context, context, text("Recovered.")])
    allowed, second = again.results_of("mem_context")
    assert not denied(allowed) and allowed.text.startswith("## Memory from Previous Sessions"), allowed.text
    assert o200k(allowed.text) <= 1200 and NOTE in allowed.text, "the dump is cut to whole entries"
    assert denied(second, "is off outside post-compaction recovery"), second.text
    assert len(pi_warm.calls("mem_context")) == 1
    assert "explicit recall requested" in again.lane()[0].all_text()


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
    assert sorted(c["arguments"]["limit"] for c in pi.calls("mem_search")) == [3, 3]


# -- the control run: nothing installed, and the same scripts go through ------------------------------


def test_without_the_install_every_call_goes_through(pi: PiHarness) -> None:
    pi.hooks = False
    run = pi.run("What did we decide about auth, search, the repository layer and storage?",
                 main=[FOUR_SEARCHES, GUESSED_FETCH, tool_uses(engram("mem_context", project="myapp")),
                       text("Everything.")])  # fmt: skip
    assert not any(denied(r) for r in run.results()), run.describe()
    assert [c["arguments"].get("limit") for c in pi.calls("mem_search")] == [10, None, 3, 3]
    assert len(pi.calls("mem_get_observation")) == 1 and len(pi.calls("mem_context")) == 1
    [fetched] = run.results_of("mem_get_observation")
    assert NOTE not in fetched.text and o200k(fetched.text) > 800, "the whole observation reached the model"
    assert "memory_need=" not in run.lane()[0].all_text()


# -- the project scope: the committed launcher, loaded in a project the user trusts -------------------


def test_the_project_install_runs_the_committed_launcher_in_a_trusted_project(pi: PiHarness) -> None:
    pi.scope = "project"
    pi.install()
    extension = pi.extension.read_text()
    assert '"launcher": ".memory-governor/hook"' in extension and str(pi.tmp) not in extension
    run = pi.run("What did we decide about auth?",
                 main=[tool_uses(engram("mem_search", query="auth", limit=10)), text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert not denied(result) and [c["arguments"]["limit"] for c in pi.calls("mem_search")] == [3], result.text
    doctor = pi.governor("doctor", check=False)
    assert "pi (project)" in doctor.stdout and "clamped limit 10 -> 3" in doctor.stdout, doctor.stdout


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
