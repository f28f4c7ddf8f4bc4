"""memory-governor through the real GitHub Copilot CLI binary: what THE MODEL RECEIVED.

Every test drives `copilot -p` (pinned in copilot_env.py) in a fresh project where the
project's own installer put the hooks, against fake_chat.FakeChat as Copilot's own provider,
which plays the model's side from a script and records each request. Assertions read the tool
messages the model was sent, the context Copilot added, what the Engram stand-in
(engram_mcp.py) actually received, and the ledger.

Run: .venv/bin/python -m pytest tests/e2e/test_copilot.py -m e2e -x -q
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

pytest.register_assert_rewrite("copilot_env")
from copilot_env import DENIED, Copilot, Run  # noqa: E402
from fake_chat import Reply, Request, call, text, tool_uses  # noqa: E402

from governor.engine.tokens import counter  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("copilot_env",)  # its fixtures: copilot (a project, a HOME, a ledger), chat (the model)

NOTE = "[memory-governor]"
ALLOWED_TYPES = "decision, bugfix, pattern, preference, constraint, session_summary"
HIT = re.compile(r"^\[\d+\] #(\d+) \(", re.M)


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    """A tool call as Copilot names an MCP tool to the model: <server>-<tool>."""
    return call(f"engram-{tool}", tool_input)


def dispatch(agent: str, prompt: str) -> Reply:
    """The reply that starts a subagent with Copilot's `task` tool."""
    return tool_uses(call("task", {"description": f"Run {agent}", "prompt": prompt, "agent_type": agent,
                                   "name": agent}))  # fmt: skip


def o200k(text_: str) -> int:
    return counter("o200k_base").count(text_)


def hit_ids(result_text: str) -> list[int]:
    return [int(i) for i in HIT.findall(result_text)]


def denied(result: Any, *fragments: str) -> bool:
    """A call the governor refused: Copilot hands the model its reason after its own prefix."""
    return result.text.startswith(DENIED + "memory-governor:") and all(f in result.text for f in fragments)


def fetch_surfaced(pick: int = 0) -> Callable[[Request], Reply]:
    """A reply that fetches an id the previous batch surfaced (read from the request it answers)."""

    def reply(request: Request) -> Reply:
        ids = [i for r in request.tool_results() if not r.text.startswith(DENIED) for i in hit_ids(r.text)]
        assert ids, f"the previous step surfaced no id: {request.tool_results()}"
        return tool_uses(engram("mem_get_observation", id=ids[pick]))

    return reply


FOUR_SEARCHES = tool_uses(engram("mem_search", query="jwt auth", limit=10), engram("mem_search", query="fts5"),
                          engram("mem_search", query="repository errors", limit=3),
                          engram("mem_search", query="sqlite", limit=3))  # fmt: skip
FOUR_TOPICS = "What did we decide about auth, search, the repository layer and storage?"


def _assert_two_of_four(run: Run, cp: Copilot) -> None:
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    real, refused = results[:2], results[2:]  # Copilot runs the batch's preToolUse hooks in order
    for r in real:
        assert r.text.startswith("Found ") and hit_ids(r.text), r.text
    for r in refused:
        assert denied(r, "max_search_calls=2"), r.text
    # The clamp reached the server (limit 10 and Engram's default 10 -> 3); the refused calls never did.
    logged = sorted((c["arguments"] for c in cp.calls("mem_search")), key=lambda a: a["query"])
    assert logged == [{"query": "fts5", "limit": 3}, {"query": "jwt auth", "limit": 3}], logged


# -- L1: the cap and the clamp, in one parallel batch ---------------------------------------------


def test_parallel_searches_get_two_clamped_results_and_two_denials(copilot: Copilot) -> None:
    run = copilot.run(FOUR_TOPICS, main=[FOUR_SEARCHES, text("Summarised.")])
    _assert_two_of_four(run, copilot)
    for r in run.results_of("mem_search")[:2]:
        assert len(hit_ids(r.text)) <= 3, r.text
    assert copilot.ledger_calls() == [("search", "committed")] * 2 + [("search", "denied")] * 2
    # The prompt's memory-need line reached the model, in the prompt (userPromptSubmitted additionalContext).
    assert "<system_reminder>\nmemory_need=" in run.lane()[0].first_user_text


def test_identical_parallel_searches_count_apart_and_a_fetch_needs_a_surfaced_id(copilot: Copilot) -> None:
    # No call id in Copilot's hooks: three identical calls in one batch are three calls, and each
    # result (whose arguments are the clamped ones) finds its own.
    jwt = {"query": "jwt", "limit": 10}
    run = copilot.run(
        "What exactly did we decide about JWT? Show me the full memory.",
        main=[
            tool_uses(engram("mem_get_observation", id=42)),  # guessed: not surfaced yet
            tool_uses(*[engram("mem_search", **jwt) for _ in range(3)]),
            fetch_surfaced(),
            text("Here it is."),
        ],
    )
    guessed, fetched = run.results_of("mem_get_observation")
    assert denied(guessed, "id=42 was not surfaced"), guessed.text
    searches = run.results_of("mem_search")
    assert [denied(r) for r in searches] == [False, False, True], run.describe()
    assert denied(searches[2], "max_search_calls=2")
    assert [c["arguments"] for c in copilot.calls("mem_search")] == [{"query": "jwt", "limit": 3}] * 2
    assert not denied(fetched) and fetched.text.startswith("#42 "), fetched.text
    assert [c["arguments"] for c in copilot.calls("mem_get_observation")] == [{"id": 42}]
    states = copilot.ledger_calls()
    assert states == [("fetch", "denied"), ("search", "committed"), ("search", "committed"), ("search", "denied"),
                      ("fetch", "committed")], states  # fmt: skip


# -- the per-turn token ceiling ---------------------------------------------------------------------


def test_token_ceiling_holds_for_everything_the_model_received(copilot: Copilot) -> None:
    run = copilot.run(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[
            tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
            tool_uses(engram("mem_get_observation", id=62)),  # 4,800 characters: ~1,080 tokens
            text("Done."),
        ],
    )
    search, fetch = run.results()
    received = o200k(search.text) + o200k(fetch.text)
    assert received <= 1200, f"{received} tokens of memory reached the model\n{run.describe()}"
    assert 62 in hit_ids(search.text), search.text
    assert [c["arguments"] for c in copilot.calls("mem_get_observation")] == [{"id": 62}]
    # The server returned the whole observation; the model got the governor's replacement
    # (Copilot's modifiedResult is exactly the tool message), not a body cut mid-way.
    assert NOTE in fetch.text and "Note 20 on sqlite storage" not in fetch.text, fetch.text


# -- mem_context: locked, unlocked by /compact, by a recall prompt ------------------------------------


def _context_twice() -> list[Reply]:
    return [tool_uses(engram("mem_context", project="myapp")), tool_uses(engram("mem_context", project="myapp")),
            text("Recovered.")]  # fmt: skip


def _assert_allowed_once(run: Run) -> None:
    first, second = run.results_of("mem_context")
    assert not denied(first) and first.text.startswith("## Memory from Previous Sessions"), first.text
    assert o200k(first.text) <= 1200 and NOTE in first.text, "the dump is cut to whole entries"
    assert denied(second, "is off outside post-compaction recovery"), second.text


def test_mem_context_denied_then_allowed_once_after_compact(copilot: Copilot) -> None:
    first = copilot.run("Continue with the auth work where we left off.",
                        main=[tool_uses(engram("mem_context", project="myapp")), text("Continuing without it.")])  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    # `/compact` fires preCompact (no sessionStart, no prompt): Copilot's only compaction signal.
    compact = copilot.run("/compact", resume=first.session_id, main=[text("Summary: auth work on myapp.")])
    assert "Compacted conversation" in compact.stdout, compact.describe()
    after = copilot.run("Where were we?", resume=first.session_id, main=_context_twice())
    _assert_allowed_once(after)
    assert len(copilot.calls("mem_context")) == 1


def test_mem_context_allowed_once_after_a_recall_prompt(copilot: Copilot) -> None:
    run = copilot.run("give me all context", main=_context_twice())
    _assert_allowed_once(run)
    assert "explicit recall requested; mem_context is allowed once this turn" in run.lane()[0].first_user_text


# -- save discipline -----------------------------------------------------------------------------------


def test_save_discipline(copilot: Copilot) -> None:
    transcript = ("User: why does search crash on E-1021?\nAssistant: FTS5 reads the hyphen as an operator.\n"
                  "User: fix it\nAssistant: I quoted each term before MATCH.")  # fmt: skip
    good = {"title": "Quote FTS5 terms before MATCH", "type": "decision", "project": "myapp",
            "content": "**What**: every search term is quoted before MATCH\n**Why**: hyphens crashed FTS5\n"
                       "**Where**: internal/store/search.go"}  # fmt: skip
    run = copilot.run(
        "Save what we learned today.",
        main=[
            tool_uses(engram("mem_save", title="Search crash notes", content="**What**: quoted FTS5 terms")),
            tool_uses(engram("mem_save", title="Search crash conversation", content=transcript, type="bugfix")),
            tool_uses(engram("mem_save", **good)),
            text("Saved."),
        ],
    )
    untyped, pasted, saved = run.results_of("mem_save")
    assert denied(untyped, "'manual'", ALLOWED_TYPES), untyped.text  # Engram's default type
    assert denied(pasted, "raw transcript"), pasted.text
    assert saved.text.startswith('Memory saved: "Quote FTS5 terms before MATCH" (decision)'), saved.text
    assert [c["arguments"]["title"] for c in copilot.calls("mem_save")] == ["Quote FTS5 terms before MATCH"]


# -- subagents: their own sessions, counted in the dispatching turn ------------------------------------


def test_subagent_tiers_and_nested_subagents_share_the_turn(copilot: Copilot) -> None:
    validator, researcher = "LANE-VALIDATOR", "LANE-RESEARCHER"
    copilot.agent("validator", f"You are the validator. Check the change and record bugs. {validator}")
    copilot.agent("researcher", f"You research project history. {researcher}",
                  front={"engram_access_tier": "search-capable"})  # fmt: skip
    bug = {"title": "Refresh ran twice on slow networks", "type": "bugfix", "project": "myapp",
           "content": "**What**: a retry re-sent the refresh\n**Why**: no idempotency key\n**Where**: refresh.ts"}  # fmt: skip
    run = copilot.run(
        "Validate the refresh-token change, and check what we decided about auth.",
        main=[tool_uses(engram("mem_search", query="auth", limit=3)),
              dispatch("validator", f"Validate the change in src/auth/refresh.ts. {validator}"),
              text("The validator recorded the bug.")],
        lanes={
            validator: [tool_uses(engram("mem_search", query="token refresh", limit=3)),
                        tool_uses(engram("mem_save", **bug)),
                        dispatch("researcher", f"Find what we decided about search. {researcher}"),
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
    assert not denied(allowed), "search-capable by its .agent.md front matter"
    assert denied(capped, "max_search_calls=2"), "the researcher, two levels down, shares the user's turn"
    assert [c["arguments"]["query"] for c in copilot.calls("mem_search")] == ["auth", "search"]
    [report] = [r for r in run.results(lane="main", prefix="task")]
    assert "Validation done; one bug saved." in report.text


# -- the Claude Code install, which Copilot runs too -------------------------------------------------


def test_with_the_claude_code_install_alone_then_with_copilots_own(copilot: Copilot) -> None:
    copilot.installs = [("claude-code",)]
    alone = copilot.run(FOUR_TOPICS, main=[FOUR_SEARCHES, text("Summarised.")])
    # Copilot ran the .claude/settings.json hooks: the prompt reached the governor (through the
    # copilot adapter), but the memory matchers name Claude Code's tools, so no call was governed.
    assert alone.lane()[0].first_user_text.count("memory_need=") == 1
    assert len(copilot.calls("mem_search")) == 4 and not any(denied(r) for r in alone.results())
    assert copilot.ledger_prompts() == 1
    doctor = copilot.governor("doctor", check=False).stdout
    assert "not governed" in doctor and "fix: memory-governor install copilot" in doctor, doctor
    copilot.install("copilot")
    both = copilot.run(FOUR_TOPICS, main=[FOUR_SEARCHES, text("Summarised.")])
    # Both hook files fire; exactly one decides: one turn for the prompt, exact counts.
    assert copilot.ledger_prompts() == 2, "one prompt per run, not one per hook file"
    assert both.lane()[0].first_user_text.count("memory_need=") == 1
    results = both.results_of("mem_search")
    assert [denied(r) for r in results] == [False, False, True, True], both.describe()
    assert len(copilot.calls("mem_search")) == 4 + 2


# -- the governor's own failures follow on_error, never Copilot's deny-on-crash -----------------------


def test_a_hook_that_cannot_start_lets_the_call_through_under_on_error_open(copilot: Copilot) -> None:
    copilot.install("copilot", "--scope", "user")  # the scope that names this machine's interpreter
    hooks_file = copilot.home / ".copilot" / "hooks" / "memory-governor.json"
    hooks = json.loads(hooks_file.read_text())
    for entries in hooks["hooks"].values():
        for entry in entries:  # the interpreter the hooks name is gone (a removed virtualenv)
            entry["bash"] = '"/nonexistent/python"' + entry["bash"][entry["bash"].index(" -I -S ") :]
    hooks_file.write_text(json.dumps(hooks))
    run = copilot.run("What did we decide about auth?",
                      main=[tool_uses(engram("mem_search", query="auth", limit=3)), text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert result.text.startswith("Found "), result.text  # not "Denied by preToolUse hook … (hook errored)"
    assert len(copilot.calls("mem_search")) == 1


def test_a_governor_that_cannot_decide_denies_with_its_reason_under_on_error_closed(copilot: Copilot) -> None:
    copilot.team_policy("version: 1\non_error: closed\n")
    copilot.state.mkdir(parents=True, exist_ok=True)
    (copilot.state / "ledger.db").mkdir()  # the ledger cannot be opened
    run = copilot.run("What did we decide about auth?",
                      main=[tool_uses(engram("mem_search", query="auth", limit=3)), text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert result.text.startswith(DENIED + "memory-governor could not check this memory call"), result.text
    assert copilot.calls("mem_search") == []
    log = copilot.state / "errors.log"
    assert "memory calls are refused until it can" in log.read_text()  # a user-caused failure: whatever on_error says
    log.unlink()  # expected here; the fixture fails a test on any other


# -- the committed install on every clone (docs/teams.md) ---------------------------------------------


def test_the_committed_install_governs_and_with_no_governor_tells_and_refuses_under_closed(copilot: Copilot) -> None:
    """The project's hooks file runs the committed launcher: with memory-governor on PATH the
    search is capped; with none on this machine the model is told at session start (Copilot shows
    the user nothing a hook prints in -p mode) and, under on_error: closed, memory calls and a
    shell call to Engram's program are refused with that reason."""
    copilot.team_policy("version: 1\non_error: closed\n")
    copilot.install("copilot")
    hooks = (copilot.project / ".github" / "hooks" / "memory-governor.json").read_text()
    assert "/.memory-governor/hook" in hooks and str(copilot.tmp) not in hooks
    run = copilot.run(FOUR_TOPICS, main=[FOUR_SEARCHES, text("Summarised.")])
    _assert_two_of_four(run, copilot)
    copilot.env["PATH"] = "/usr/bin:/bin"  # this machine has no governor (node is in /usr/bin)
    searched = len(copilot.calls("mem_search"))
    run = copilot.run("What did we decide about auth?",
                      main=[tool_uses(engram("mem_search", query="auth", limit=3),
                                      call("bash", {"command": "engram search auth", "description": "search"})),
                            text("Without memory.")])  # fmt: skip
    told = "Tell the user, once: memory-governor is not installed on this machine"
    first = run.lane()[0].all_text()
    assert told in first and "on_error: closed" in first, run.describe()
    [result] = run.results_of("mem_search")
    assert result.text.startswith(DENIED + "memory-governor is not installed"), result.text
    [shell] = run.results(prefix="bash")
    assert shell.text.startswith(DENIED + "memory-governor is not installed"), shell.text
    assert len(copilot.calls("mem_search")) == searched


# -- replay of Copilot's own session log --------------------------------------------------------------


def test_replay_reads_the_session_log_copilot_wrote(copilot: Copilot) -> None:
    copilot.installs = []  # an ungoverned session: every memory call goes through
    run = copilot.run(FOUR_TOPICS, main=[FOUR_SEARCHES, fetch_surfaced(), text("Summarised.")])
    assert len(copilot.calls("mem_search")) == 4
    log = copilot.home / ".copilot" / "session-state" / run.session_id / "events.jsonl"
    data = json.loads(copilot.governor("replay", str(log), "--format", "json").stdout)
    [turn] = data["turns"]
    assert (turn["calls"], turn["denied"], turn["clamped"]) == (5, 2, 2), turn
    assert [d["decision"] for d in turn["decisions"]][:4] == ["clamp", "clamp", "deny", "deny"], turn["decisions"]
