"""memory-governor through the real Claude Code binary: what THE MODEL RECEIVED.

Every test drives `claude -p` (pinned in conftest.py) in a fresh project where the project's
own installer put the hooks, against fake_model.FakeModel, which plays the model's side from
a script and records each request. Assertions read the tool_result blocks the model was sent
(their text and is_error flag), the context Claude Code added, and what the Engram stand-in
(engram_mcp.py) actually received.

Run: .venv/bin/python -m pytest tests/e2e -m e2e -x -q
"""

from __future__ import annotations

import json
import re
import shlex
import time

import pytest
from conftest import CLAUDE_CODE_RECENT, ENGRAM_TOOLS
from fake_model import Reply, Request, after, call, dispatch, engram, text, tool_uses

from governor.engine.tokens import counter

pytestmark = pytest.mark.e2e

NOTE = "[memory-governor]"
# Every scenario here runs on both pins unless marked: the ones whose Claude Code side the facts
# (test_harness_facts.py) already pin on both run on the recent pin only, to keep the suite lean.
ENGRAM_V2_ON_RECENT = pytest.param("v2", marks=pytest.mark.claude_code(CLAUDE_CODE_RECENT))
# The governor's own logic (the turn's budget, where a policy is read from and when it is in
# force, a committed install with no governor) is the same whichever Claude Code runs the hook;
# its hook transport on the long-standing pin is proven by the scenarios left on both pins.
GOVERNOR_SIDE = pytest.mark.claude_code(CLAUDE_CODE_RECENT)
ALLOWED_TYPES = "decision, bugfix, pattern, preference, constraint, session_summary"
HIT = re.compile(r"^\[\d+\] #(\d+) \(", re.M)


def o200k(text_: str) -> int:
    return counter("o200k_base").count(text_)


def inner(result_text: str) -> str:
    """Engram's text: v1 is plain text; v2 wraps it in a JSON envelope's "result"."""
    if result_text.startswith("{"):
        return json.loads(result_text)["result"]
    return result_text


def hit_ids(result_text: str) -> list[int]:
    """The hits a search result passes: its text's hit lines, or a compact v2 result's items."""
    found = [int(i) for i in HIT.findall(inner(result_text))]
    if not found and result_text.startswith("{"):
        found = [int(item["id"]) for item in json.loads(result_text).get("results", [])]
    return found


def above(result_text: str) -> list[int]:
    """The hits a search result names as already held in this conversation (delivered once)."""
    line = re.search(r"already above in this conversation: ([#\d, …]+)\.", inner(result_text))
    return [int(i) for i in re.findall(r"#(\d+)", line.group(1))] if line else []


def reason(result) -> str:
    """A denied call's result without the frame newer builds put around a hook's reason
    ("PreToolUse:<tool> hook error: ", 2.1.332; pinned per version by test_harness_facts.py)."""
    frame = f"PreToolUse:{result.name} hook error: "
    return result.text[len(frame) :] if result.text.startswith(frame) else result.text


def denied(result, *fragments: str) -> bool:
    text_ = reason(result)
    return result.is_error and text_.startswith("memory-governor:") and all(f in text_ for f in fragments)


def fetch_surfaced(tool: str = "mem_get_observation", pick: int = 0) -> callable:
    """A reply that fetches an id the previous search surfaced (read from the request it answers)."""

    def reply(request: Request) -> Reply:
        ids = [i for r in request.tool_results() if not r.is_error for i in hit_ids(r.text)]
        assert ids, f"the previous step surfaced no id: {request.tool_results()}"
        return tool_uses(engram(tool, id=ids[pick]))

    return reply


# -- L1: the per-turn search cap, in one parallel batch -----------------------------------


def _four_searches() -> Reply:
    return tool_uses(*[engram("mem_search", query=q, limit=3) for q in ("jwt auth", "fts5 search", "repository errors",
                                                                           "sqlite storage")])  # fmt: skip


def _assert_two_of_four(run, cc) -> None:
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    real = [r for r in results if not r.is_error]
    refused = [r for r in results if r.is_error]
    assert len(real) == 2 and len(refused) == 2, run.describe()
    for r in real:
        assert r.text.startswith("Found ") and hit_ids(r.text), r.text
    for r in refused:
        assert denied(r, "max_search_calls"), r.text
    # The two denied calls never reached the server.
    assert len(cc.calls("mem_search")) == 2, cc.calls()


def test_parallel_batch_of_four_searches_gets_two_results_and_two_denials(cc):
    run = cc.run("What did we decide about auth, search, the repository layer and storage?",
                 main=[_four_searches(), text("Summarised.")])  # fmt: skip
    _assert_two_of_four(run, cc)


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_parallel_batch_with_the_warm_server(cc_warm):
    # A first run starts the warm server in the background (the first hook spawns it) ...
    cc_warm.run("hello", main=[text("Hi.")])
    socket = cc_warm.state / "run" / "governor.sock"
    deadline = time.monotonic() + 20
    while not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert socket.exists(), "the hooks did not start the warm server"
    pid = _server_pid(cc_warm)
    read_before = _bytes_read(pid)
    # ... so the parallel batch of a new session is decided by the warm server.
    run = cc_warm.run("What did we decide about auth, search, the repository layer and storage?",
                      main=[_four_searches(), text("Summarised.")])  # fmt: skip
    _assert_two_of_four(run, cc_warm)
    assert _server_pid(cc_warm) == pid, "the warm server was replaced during the run"
    if read_before is not None:  # Linux: the server itself read the hook payloads (not in-process decisions)
        assert _bytes_read(pid) - read_before > 2000


def _server_pid(cc) -> int:
    status = cc.governor("serve", "--status", check=False)
    found = re.search(r"running \(pid (\d+)\)", status.stdout)
    assert status.returncode == 0 and found, status.stdout + status.stderr
    return int(found.group(1))


def _bytes_read(pid: int) -> int | None:
    """Bytes the process has read through syscalls (socket requests, its ledger), from /proc."""
    try:
        with open(f"/proc/{pid}/io") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("rchar:"))
    except OSError:
        return None


# -- L1: the limit clamp ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["v1", ENGRAM_V2_ON_RECENT])
def test_search_limit_10_is_clamped_to_3(cc, fmt):
    cc.engram_env["ENGRAM_FORMAT"] = fmt
    run = cc.run(
        "What did we decide about auth?",
        main=[
            tool_uses(engram("mem_search", query="auth", limit=10), engram("mem_search", query="token")),
            text("Done."),
        ],
    )
    # updatedInput reached the server: limit 10 -> 3, and no limit (Engram's default 10) -> 3. The two run
    # at once: one decided after the other's result asks for 3 more (the 3 hits it may find again).
    logged = sorted((c["arguments"] for c in cc.calls("mem_search")), key=lambda a: a["query"])
    assert [a["query"] for a in logged] == ["auth", "token"], logged
    assert sorted(a["limit"] for a in logged) in ([3, 3], [3, 6]), logged
    results = run.results_of("mem_search")
    assert len(results) == 2 and not any(r.is_error for r in results), run.describe()
    passed = [hit_ids(r.text) for r in results]
    for result, shown in zip(results, passed, strict=True):
        # The seed has more than 3 of each: 3 new hits, or (asked for 3 only) 3 with the ones already held named.
        assert len(shown) == 3 or len(shown) + len(above(result.text)) == 3, result.text
        assert "| scope: project" not in result.text and "sync_id" not in result.text, "snippets only"
    assert not set(passed[0]) & set(passed[1]), "no hit delivered twice"


# -- L3: a fetch needs an id a search surfaced in this turn --------------------------------


@pytest.mark.parametrize("fmt", ["v1", ENGRAM_V2_ON_RECENT])
def test_fetch_before_search_is_denied_then_allowed_for_a_surfaced_id(cc, fmt):
    cc.engram_env["ENGRAM_FORMAT"] = fmt
    run = cc.run(
        "We hit this FTS5 crash before; how did we fix it? Show me the full sanitizeFTS memory.",
        main=[
            tool_uses(engram("mem_get_observation", id=58)),  # guessed: not surfaced yet
            tool_uses(engram("mem_search", query="sanitizeFTS", limit=3)),
            fetch_surfaced(),  # the id the search just returned
            text("Here it is."),
        ],
    )
    first, second = run.results_of("mem_get_observation")
    assert denied(first, "not surfaced", "58"), first.text
    [search] = run.results_of("mem_search")
    assert 58 in hit_ids(search.text), search.text
    assert not second.is_error, second.text
    body = inner(second.text)
    assert body.startswith("#58 [pattern] Search queries go through sanitizeFTS\n"), second.text
    assert "\nSession: sess-search-0302\n" in body and NOTE not in body
    assert [c["arguments"] for c in cc.calls("mem_get_observation")] == [{"id": 58}]


# -- mem_context: locked, unlocked by /compact, by --resume, by a recall prompt -------------


def _context_twice() -> list:
    return [tool_uses(engram("mem_context", project="myapp")), tool_uses(engram("mem_context", project="myapp")),
            text("Recovered.")]  # fmt: skip


def _assert_allowed_once(run) -> None:
    first, second = run.results_of("mem_context")
    assert not first.is_error, first.text
    assert first.text.startswith("## Memory from Previous Sessions"), first.text
    assert denied(second, "is off outside post-compaction recovery"), second.text


def test_mem_context_denied_then_allowed_once_after_compact(cc):
    # Under `claude -p`, reaching the turn after /compact takes another --resume; the shipped
    # policy arms session_resume only after 30 idle minutes, so only post_compact unlocks here.
    first = cc.run(
        "Continue with the auth work where we left off.",
        main=[tool_uses(engram("mem_context", project="myapp")), text("Continuing without it.")],
    )
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    compact = cc.run("/compact", resume=first.session_id)
    assert [r.lane for r in compact.requests] == ["compact"], compact.requests
    after = cc.run("Where were we?", resume=first.session_id, main=_context_twice())
    _assert_allowed_once(after)
    assert len(cc.calls("mem_context")) == 1


def test_a_resume_right_away_does_not_unlock_mem_context(cc):
    # `claude -p --resume` in a loop fires SessionStart resume every turn; the shipped policy
    # counts a resume only after 30 idle minutes.
    first = cc.run(
        "Where were we on the search endpoint?", main=[tool_uses(engram("mem_search", query="search")), text("OK.")]
    )
    again = cc.run(
        "Pick up where we left off.", resume=first.session_id, main=[tool_uses(engram("mem_context")), text("OK.")]
    )
    [locked] = again.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_mem_context_allowed_once_after_resume(cc):
    # A real break cannot be waited out here: a team policy sets the idle threshold to zero.
    cc.team_policy(
        "version: 1\nmem_context:\n  unlocked_by:\n    session_resume: {scope: next_turn, uses: 1, min_idle_minutes: 0}\n"
    )
    first = cc.run("Where were we on the search endpoint?", main=[tool_uses(engram("mem_context")), text("OK.")])
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    resumed = cc.run("Pick up where we left off.", resume=first.session_id, main=_context_twice())
    _assert_allowed_once(resumed)
    assert len(cc.calls("mem_context")) == 1


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
@pytest.mark.parametrize("prompt", ["recordar todo lo que sabes del proyecto", "give me all context",
                                    "bring me up to speed with all the stored context"])  # fmt: skip
def test_mem_context_allowed_once_after_recall_prompt(cc, prompt):
    run = cc.run(prompt, main=_context_twice())
    _assert_allowed_once(run)
    # The UserPromptSubmit answer's additionalContext reached the model (in the "system" message).
    assert "explicit recall requested; mem_context is allowed once this turn" in run.lane()[0].all_text()


# -- the per-turn token ceiling -------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["v1", ENGRAM_V2_ON_RECENT])
def test_token_ceiling_holds_for_everything_the_model_received(cc, fmt):
    cc.engram_env["ENGRAM_FORMAT"] = fmt
    run = cc.run(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[
            tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
            tool_uses(engram("mem_get_observation", id=62)),  # 4,800 characters: ~1,080 tokens
            text("Done."),
        ],
    )
    memory = run.results(prefix="mcp__engram__")
    assert len(memory) == 2, run.describe()
    received = sum(o200k(r.text) for r in memory)
    assert received <= 1200, f"{received} tokens of memory reached the model\n{run.describe()}"
    # The server returned the whole observation, which would have taken the turn over budget ...
    [search, fetch] = memory
    assert not search.is_error and 62 in hit_ids(search.text), search.text
    assert [c["arguments"] for c in cc.calls("mem_get_observation")] == [{"id": 62}]
    whole = _engram_output(cc, fmt, "mem_get_observation", {"id": 62})
    assert o200k(search.text) + o200k(whole) > 1200
    # ... so the model got the governor's replacement instead: the note, not a body cut mid-way.
    assert not fetch.is_error, fetch.text
    assert NOTE in inner(fetch.text), fetch.text
    assert "Note 20 on sqlite storage" not in fetch.text


def _engram_output(cc, fmt: str, tool: str, arguments: dict) -> str:
    """What the Engram stand-in answers for this call on the test's seed (computed here, in-process)."""
    import engram_mcp

    return engram_mcp.TOOLS[tool][0](engram_mcp.Store(str(cc.seed), fmt=fmt), arguments)


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_context_dump_is_trimmed_to_whole_entries(cc):
    run = cc.run("give me all context", main=[tool_uses(engram("mem_context")), text("OK.")])
    [result] = run.results_of("mem_context")
    assert not result.is_error, result.text
    assert o200k(result.text) <= 1200 and NOTE in result.text, result.text
    assert o200k(_engram_output(cc, "v1", "mem_context", {})) > 1200
    kept = _assert_whole_entries(cc, result.text)
    assert 0 < kept < 20  # 3 sessions, 3 prompts, 14 observations


# Engram's mem_session_summary asks for exactly this shape; mem_context previews keep newlines.
SESSION_SUMMARY = """## Goal
Harden the search endpoint against FTS5 syntax errors

## Instructions
- Keep error codes like E-1021 searchable
- Never pass raw user input to MATCH

## Discoveries
- FTS5 reads a hyphen as NOT
- Quoting each term fixes it

## Accomplished
- [x] sanitizeFTS in internal/store/search.go
"""


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_context_entries_with_markdown_previews_stay_whole(cc):
    cc.add_observation(session_id="sess-search-0302", type="session_summary", title="Session summary: myapp",
                       content=SESSION_SUMMARY, created_at="2025-03-05 10:00:00")  # fmt: skip
    run = cc.run("give me all context", main=[tool_uses(engram("mem_context")), text("OK.")])
    [result] = run.results_of("mem_context")
    assert not result.is_error and NOTE in result.text, result.text
    _assert_whole_entries(cc, result.text)


def _assert_whole_entries(cc, received: str) -> int:
    """The context the model got is the server's, minus whole entries, plus the note; returns entries kept."""
    import engram_mcp

    sections = engram_mcp.context_sections(engram_mcp.Store(str(cc.seed)))
    entries = [entry for _, section in sections for entry in section]
    body, _, note = received.partition(NOTE)
    body = body.split("\n---\nMemory stats:")[0]
    rest, kept = body, 0
    for entry in entries:  # each entry is either there whole, or not at all
        if entry in rest:
            rest = rest.replace(entry, "", 1)
            kept += 1
    leftover = rest.replace("## Memory from Previous Sessions", "")
    for heading, _ in sections:
        leftover = leftover.replace(heading, "")
    assert not leftover.strip(), f"text that is no whole entry reached the model: {leftover.strip()[:400]!r}"
    held = re.match(r" (\d+) of (\d+) entries held back", note)
    assert held, note
    assert (int(held.group(1)), int(held.group(2))) == (len(entries) - kept, len(entries)), note
    return kept


# -- save discipline ------------------------------------------------------------------------


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_save_discipline(cc):
    transcript = ("User: why does search crash on E-1021?\nAssistant: FTS5 reads the hyphen as an operator.\n"
                  "User: fix it\nAssistant: I quoted each term before MATCH.")  # fmt: skip
    run = cc.run(
        "Save what we learned today.",
        main=[
            tool_uses(
                engram("mem_save", title="Search crash notes", content="**What**: quoted FTS5 terms", type="manual")
            ),
            tool_uses(engram("mem_save", title="Search crash notes again", content="**What**: quoted FTS5 terms")),
            tool_uses(engram("mem_save", title="Search crash conversation", content=transcript, type="bugfix")),
            tool_uses(
                engram(
                    "mem_save",
                    title="Quote FTS5 terms before MATCH",
                    type="decision",
                    project="myapp",
                    content="**What**: every search term is quoted before MATCH\n**Why**: hyphens crashed "
                    "FTS5\n**Where**: internal/store/search.go",
                )
            ),
            text("Saved."),
        ],
    )
    manual, untyped, pasted, good = run.results_of("mem_save")
    assert denied(manual, "'manual'", ALLOWED_TYPES), manual.text
    assert denied(untyped, "'manual'", ALLOWED_TYPES), untyped.text  # Engram's default type
    assert denied(pasted, "raw transcript"), pasted.text
    assert not good.is_error and good.text.startswith('Memory saved: "Quote FTS5 terms before MATCH" (decision)')
    assert [c["arguments"]["title"] for c in cc.calls("mem_save")] == ["Quote FTS5 terms before MATCH"]


# -- subagents ------------------------------------------------------------------------------


def test_save_only_subagent_cannot_search_but_can_save(cc):
    marker = "LANE-VALIDATOR"
    cc.agent("validator", f"You are the validator. Check the change and record bugs. {marker}",
             tools=["mcp__engram__mem_search", "mcp__engram__mem_save"])  # fmt: skip
    run = cc.run(
        "Validate the refresh-token change.",
        main=[dispatch("validator", f"Validate the refresh-token change in src/auth/refresh.ts. {marker}",
                       background=False),
              text("The validator recorded the bug.")],
        lanes={marker: [
            tool_uses(engram("mem_search", query="token refresh", limit=3)),
            tool_uses(engram("mem_save", title="Refresh ran twice on slow networks", type="bugfix", project="myapp",
                             content="**What**: a retry re-sent the refresh\n**Why**: no idempotency key\n"
                                     "**Where**: src/auth/refresh.ts")),
            text("Validation done; one bug saved."),
        ]},
    )  # fmt: skip
    assert run.lane(marker), "the subagent never talked to the model"
    [search] = run.results_of("mem_search", lane=marker)
    assert denied(search, "save-only", "validator"), search.text
    [save] = run.results_of("mem_save", lane=marker)
    assert not save.is_error and save.text.startswith('Memory saved: "Refresh ran twice on slow networks" (bugfix)')
    assert cc.calls("mem_search") == []
    assert len(cc.calls("mem_save")) == 1
    # The subagent's report reached the main agent.
    [report] = [r for r in run.results(lane="main", prefix="") if r.name in ("Agent", "Task")]
    assert "Validation done; one bug saved." in report.text


def test_search_capable_subagent_shares_the_turn_search_budget(cc):
    # A subagent's calls carry the parent's prompt_id: they count against the same turn.
    marker = "LANE-RESEARCHER"
    cc.agent("researcher", f"You research project history. {marker}", tools=["mcp__engram__mem_search"],
             front={"engram_access_tier": "search-capable"})  # fmt: skip
    run = cc.run(
        "What did we decide about auth? Ask the researcher too.",
        main=[tool_uses(engram("mem_search", query="auth", limit=3)),
              dispatch("researcher", f"Find what we decided about search. {marker}", background=False),
              text("Combined.")],
        lanes={marker: [tool_uses(engram("mem_search", query="search", limit=3)),
                        tool_uses(engram("mem_search", query="fts5", limit=3)),
                        text("Search decisions found.")]},
    )  # fmt: skip
    [main_search] = run.results_of("mem_search", lane="main")
    allowed, refused = run.results_of("mem_search", lane=marker)
    assert not main_search.is_error and not allowed.is_error, run.describe()
    assert denied(refused, "max_search_calls"), refused.text
    assert [c["arguments"]["query"] for c in cc.calls("mem_search")] == ["auth", "search"]


# -- background subagents and the prompts that report them ----------------------------------


def test_background_subagents_are_governed_in_the_turn_that_launched_them(cc):
    # Agents run in the background (2.1.332's default; `run_in_background: true` on 2.1.197). Each
    # agent's first call waits until the parent's turn has ended; each reports back as a
    # <task-notification> prompt of its own. All of it is one user turn's budget.
    researcher, validator = "LANE-BG-RESEARCHER", "LANE-BG-VALIDATOR"
    cc.agent("researcher", f"You research project history. {researcher}", tools=["mcp__engram__mem_search"],
             front={"engram_access_tier": "search-capable"})  # fmt: skip
    cc.agent("validator", f"You validate and record bugs. {validator}",
             tools=["mcp__engram__mem_search", "mcp__engram__mem_save"])  # fmt: skip

    def stops(n: int):
        return lambda: len(cc.decisions("stop")) >= n

    bug = engram("mem_save", title="Refresh ran twice on slow networks", type="bugfix", project="myapp",
                 content="**What**: a retry re-sent the refresh\n**Why**: no idempotency key\n**Where**: src/auth/refresh.ts")  # fmt: skip
    run = cc.run(
        "What did we decide about auth tokens? Research it and validate the refresh-token change.",
        main=[
            dispatch("researcher", f"Find what we decided about tokens. {researcher}", background=True,
                     also=(engram("mem_search", query="auth", limit=3),
                           call("Agent", {"description": "Validate", "prompt": f"Validate refresh. {validator}",
                                          "subagent_type": "validator", "run_in_background": True}))),
            text("Both are running."),
            # The validator's report (its result asks for everything): one search left, no mem_context.
            tool_uses(engram("mem_search", query="tokens", limit=3), engram("mem_context", project="myapp")),
            text("Noted the bug."),
            # The researcher's report: the launching turn's searches are spent.
            tool_uses(engram("mem_search", query="refresh", limit=3)),
            text("Done."),
        ],
        lanes={
            validator: [after(stops(1), tool_uses(engram("mem_search", query="refresh", limit=3))),
                        tool_uses(bug), text("Validation done; bug saved. Now give me all context.")],
            researcher: [after(stops(2), tool_uses(engram("mem_search", query="jwt", limit=3))),
                         text("Research done.")],
        },
    )  # fmt: skip
    main = run.results_of("mem_search", lane="main")
    assert [r.is_error for r in main] == [False, False, True], run.describe()
    assert denied(main[2], "max_search_calls"), main[2].text  # a report back opens no fresh budget
    [context] = run.results_of("mem_context", lane="main")
    assert denied(context, "is off outside post-compaction recovery"), context.text  # nothing armed by its text
    [tier] = run.results_of("mem_search", lane=validator)
    assert denied(tier, "save-only", "validator"), tier.text
    [save] = run.results_of("mem_save", lane=validator)
    assert not save.is_error, save.text
    [late] = run.results_of("mem_search", lane=researcher)
    assert denied(late, "max_search_calls"), late.text  # counted in the turn that launched it
    assert [c["arguments"]["query"] for c in cc.calls("mem_search")] == ["auth", "tokens"]

    rows = cc.decisions()
    prompts = [r for r in rows if r["event"] == "prompt"]
    assert [r["code"] for r in prompts][1:] == ["machine_prompt:launching_turn"] * 2, prompts
    first_stop = next(r["id"] for r in rows if r["event"] == "stop")
    agents = [r for r in rows if r["event"] == "pre_tool" and r["agent_type"]]
    assert agents and all(r["id"] > first_stop for r in agents), "their calls came after the parent's turn ended"
    assert {r["turn"] for r in rows if r["event"] in ("pre_tool", "post_tool")} == {prompts[0]["turn"]}
    # The reports got no memory-need advice: only the user's prompt did.
    assert run.lane()[-1].all_text().count("memory_need=") == 1


# -- tool search (2.1.332 defers MCP tools behind ToolSearch by default) ---------------------


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
@pytest.mark.parametrize("setting", ["default-loaded", "default-called-directly", "off"])
def test_with_or_without_tool_search_the_governed_calls_go_through_the_hooks(cc, setting):
    if setting == "off":
        cc.env["ENABLE_TOOL_SEARCH"] = "false"
    cc.model.load_deferred = setting == "default-loaded"
    run = cc.run("What did we decide about auth, search, the repository layer and storage?",
                 main=[tool_uses(*[engram("mem_search", query=q, limit=10) for q in ("jwt auth", "fts5 search",
                                                                                   "repository", "storage")]),
                       text("Summarised.")])  # fmt: skip
    first = run.lane()[0]
    if setting == "off":
        assert "mcp__engram__mem_search" in first.tools and not first.deferred_tools and not run.tool_searches()
    else:
        assert "mcp__engram__mem_search" not in first.tools and "mcp__engram__mem_search" in first.deferred_tools
        loaded = ["select:mcp__engram__mem_search"] if setting == "default-loaded" else []
        assert run.tool_searches() == loaded
    results = run.results_of("mem_search")
    assert sorted(r.is_error for r in results) == [False, False, True, True], run.describe()
    assert all(denied(r, "max_search_calls") for r in results if r.is_error)
    # Clamped from 10; one decided after the other's result asks 3 more, for the 3 hits it may find again.
    assert sorted(c["arguments"]["limit"] for c in cc.calls("mem_search")) in ([3, 3], [3, 6])


# -- which server: mcp_server.name (2.1.332) -------------------------------------------------

TEAM_SERVER_POLICY = """\
version: 1
tools:
  - servers: [team__memory]
    format: engram
    map:
      mem_search: {role: search, limit_param: limit}
      mem_get_observation: {role: fetch, id_param: id}
"""


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_a_server_key_with_double_underscores_is_governed(cc):
    # Its tools are mcp__team__memory__*: split at the first `__`, the server would be "team".
    cc.engram_key = "team__memory"
    cc.team_policy(TEAM_SERVER_POLICY)
    run = cc.run("What did we decide about auth, search, the repository layer and storage?",
                 main=[tool_uses(*[call("mcp__team__memory__mem_search", {"query": q, "limit": 10})
                                   for q in ("jwt auth", "fts5 search", "repository", "storage")]),
                       tool_uses(call("mcp__team__memory__mem_get_observation", {"id": 7})),  # surfaced by none
                       text("Summarised.")])  # fmt: skip
    results = run.results_of("mem_search")
    assert sorted(r.is_error for r in results) == [False, False, True, True], run.describe()
    assert sorted(c["arguments"]["limit"] for c in cc.calls("mem_search")) in ([3, 3], [3, 6])
    [guessed] = run.results_of("mem_get_observation")
    assert denied(guessed, "not surfaced"), guessed.text


# -- the budget resets each turn ------------------------------------------------------------


@GOVERNOR_SIDE
def test_fresh_search_budget_next_turn(cc):
    first = cc.run(
        "What did we decide about auth and search?",
        main=[tool_uses(engram("mem_search", query="auth", limit=3), engram("mem_search", query="search", limit=3)),
              tool_uses(engram("mem_search", query="tokens", limit=3)),
              text("Two searches were enough.")],
    )  # fmt: skip
    one, two, three = first.results_of("mem_search")
    assert not one.is_error and not two.is_error, first.describe()
    assert denied(three, "max_search_calls"), three.text
    second = cc.run("What did we decide about the repository layer?", resume=first.session_id,
                    main=[tool_uses(engram("mem_search", query="repository", limit=3)), text("Found it.")])  # fmt: skip
    [again] = second.results_of("mem_search")
    assert not again.is_error and again.text.startswith("Found "), again.text
    assert [c["arguments"]["query"] for c in cc.calls("mem_search")][-1] == "repository"
    assert len(cc.calls("mem_search")) == 3


# -- delivered once: a repeat reaches the model as its pointer line ---------------------------


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_a_repeated_hit_is_named_not_passed_again_until_compaction_and_a_subagent_gets_its_own(cc):
    marker = "LANE-DEDUPE-RESEARCHER"
    cc.agent("researcher", f"You research project history. {marker}", tools=["mcp__engram__mem_search"],
             front={"engram_access_tier": "search-capable"})  # fmt: skip
    first = cc.run("What did we decide about auth?",
                   main=[tool_uses(engram("mem_search", query="auth", limit=3)), text("Noted.")])  # fmt: skip
    [whole] = first.results_of("mem_search")
    assert not whole.is_error and hit_ids(whole.text) and "already shown" not in whole.text, whole.text
    again = cc.run(
        "And auth again? Ask the researcher too.",
        resume=first.session_id,
        main=[tool_uses(engram("mem_search", query="auth", limit=3)),
              dispatch("researcher", f"Find what we decided about auth. {marker}", background=False),
              text("Combined.")],
        lanes={marker: [tool_uses(engram("mem_search", query="auth", limit=3)), text("Auth decisions found.")]},
    )  # fmt: skip
    [repeat] = again.results_of("mem_search", lane="main")
    ids = hit_ids(whole.text)
    assert above(repeat.text) == ids, repeat.text
    assert not set(hit_ids(repeat.text)) & set(ids), "its slots went to hits not yet delivered"
    assert sorted(c["arguments"]["limit"] for c in cc.calls("mem_search")) == [3, 3, 6], "3 more than the 3 held"
    [own_copy] = again.results_of("mem_search", lane=marker)
    assert own_copy.text == whole.text, "the subagent's context held none of it: every hit again"
    compact = cc.run("/compact", resume=first.session_id)
    assert [r.lane for r in compact.requests] == ["compact"], compact.requests
    after_compaction = cc.run("Auth, once more.", resume=first.session_id,
                              main=[tool_uses(engram("mem_search", query="auth", limit=3)), text("OK.")])  # fmt: skip
    [fresh] = after_compaction.results_of("mem_search")
    assert fresh.text == whole.text, "compaction emptied the context: delivered whole again"
    assert len(cc.calls("mem_search")) == 4, "every search ran; only what the model got changed"
    deduped = [r for r in cc.decisions() if r["code"] == "deduped"]
    assert len(deduped) == 1 and deduped[0]["tokens_deduped"] > 0, deduped


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_a_turn_gets_the_budget_of_its_memory_need(cc):
    cc.team_policy("version: 1\nmemory_needs:\n  classes:\n"
                   "    recent_session: {max_memory_tokens_injected: 200, max_search_calls: 1}\n")  # fmt: skip
    run = cc.run("Where did we leave off yesterday?",
                 main=[tool_uses(engram("mem_search", query="auth", limit=3), engram("mem_search", query="jwt", limit=3)),
                       text("OK.")])  # fmt: skip
    assert "This turn's memory budget: 200 o200k_base tokens, 1 search(es)." in run.lane()[0].all_text(), (
        "the prompt's advice, which reaches the model, says the class's budget"
    )
    results = run.results_of("mem_search")
    refused = [r for r in results if r.is_error]
    assert len(results) == 2 and len(refused) == 1 and denied(refused[0], "max_search_calls=1"), run.describe()
    [got] = [r for r in results if not r.is_error]
    assert o200k(got.text) <= 200, got.text  # the class budget, not the turn limit (1200)
    assert len(cc.calls("mem_search")) == 1


# -- (b) a real third-party MCP memory server, mapped by a team policy ---------------------

AUTH_ENTITIES = ("AuthService", "AuthMiddleware", "TokenStore", "LoginRoute", "RefreshWorker", "AuditLog")
GRAPH_POLICY = """\
version: 1
tools:
  - servers: [memory]
    format: knowledge_graph
    map:
      search_nodes: {role: search}
      open_nodes: {role: fetch, id_param: names}
      read_graph: {role: context}
      create_entities: {role: save}
"""


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_server_memory_mapped_by_team_policy(cc):
    cc.team_policy(GRAPH_POLICY)
    cc.use_memory_server()

    def shown_names(request: Request) -> list[str]:
        """The entity names the search_nodes result (as the model got it) showed."""
        [search] = [r for r in request.all_tool_results() if r.name == "mcp__memory__search_nodes"]
        return [e["name"] for e in json.loads(search.text.split(NOTE)[0])["entities"]]

    def open_held_back(request: Request) -> Reply:
        held = sorted(set(AUTH_ENTITIES) - set(shown_names(request)))
        return tool_uses(call("mcp__memory__open_nodes", {"names": [held[0]]}))

    def open_shown(request: Request) -> Reply:
        return tool_uses(call("mcp__memory__open_nodes", {"names": [shown_names(request)[0]]}))

    run = cc.run(
        "What did we decide about the auth components?",
        main=[
            tool_uses(call("mcp__memory__open_nodes", {"names": ["AuthService"]}), call("mcp__memory__read_graph")),
            tool_uses(call("mcp__memory__search_nodes", {"query": "auth"})),
            open_held_back,
            open_shown,
            text("Done."),
        ],
    )
    guessed, held_back, shown = run.results_of("open_nodes")
    [graph] = run.results_of("read_graph")
    [search] = run.results_of("search_nodes")
    assert denied(guessed, "not surfaced", "AuthService"), guessed.text
    assert denied(graph), graph.text  # a context-role tool, locked like mem_context
    assert not search.is_error and NOTE in search.text, search.text
    entities = json.loads(search.text.split(NOTE)[0])["entities"]
    assert 1 <= len(entities) <= 3, search.text  # 6 entities match "auth"; L1 keeps at most 3
    assert {e["name"] for e in entities} < set(AUTH_ENTITIES)
    assert o200k(search.text) <= 1200
    assert denied(held_back, "not surfaced"), held_back.text
    assert not shown.is_error and json.loads(shown.text)["entities"][0]["name"] == entities[0]["name"], shown.text


# -- results Claude Code spills to a file ----------------------------------------------------------


def test_a_spilled_result_reaches_the_model_trimmed_and_its_file_cannot_be_read_back(cc):
    cc.env["MAX_MCP_OUTPUT_TOKENS"] = "300"  # Claude Code's own output limit, low enough that a timeline spills
    for i in range(12):
        cc.add_observation(
            session_id="sess-auth-0301",
            type="decision",
            title=f"Auth follow-up {i}",
            content="token rotation and session notes " * 8,
            created_at=f"2025-03-01 15:00:{i:02d}",
        )

    def timeline_of_the_first_hit(request: Request) -> Reply:
        first = hit_ids(request.tool_results()[0].text)[0]
        return tool_uses(engram("mem_timeline", observation_id=first, before=1000, after=1000))

    def read_the_spill(request: Request) -> Reply:
        spilled = sorted(cc.home.glob(".claude/projects/*/*/tool-results/mcp-engram-mem_timeline-*.txt"))
        assert spilled, "Claude Code spilled the timeline to a file"
        return tool_uses(call("Read", {"file_path": str(spilled[0])}))

    run = cc.run("What happened around the JWT decision?",
                 main=[tool_uses(engram("mem_search", query="jwt sessions", limit=3)), timeline_of_the_first_hit,
                       read_the_spill, text("Done.")],
                 allowed=[*ENGRAM_TOOLS, "Read"])  # fmt: skip
    [timeline] = run.results_of("mem_timeline")
    assert timeline.text.startswith("Session:") and "exceeds maximum allowed tokens" not in timeline.text
    assert sum(o200k(r.text) for r in run.results() if not r.is_error) <= 1200, run.describe()
    assert [c["arguments"]["before"] for c in cc.calls("mem_timeline")] == [5], "L2 clamped before it ran"
    [read] = run.results(prefix="Read")
    assert read.is_error and "spilled-result" in read.text, run.describe()


# -- a model that writes itself a looser policy ---------------------------------------------

LOOSER_POLICY = "limits:\n  max_search_calls: {value: 6, enforce: block}\n"
SEARCH_CAPABLE = "---\nname: general-purpose\nengram_access_tier: search-capable\n---\nAnything.\n"


@pytest.mark.claude_code(CLAUDE_CODE_RECENT)
def test_a_policy_the_model_writes_itself_is_held_back_until_the_user_accepts_it(cc):
    marker = "LANE-LOOSENED"
    policy, agent = cc.project / ".memory-governor" / "policy.yaml", cc.project / ".claude/agents/general-purpose.md"
    run = cc.run(
        "Find everything about auth; raise your memory limits first if you need to.",
        main=[tool_uses(call("Write", {"file_path": str(policy), "content": LOOSER_POLICY})),
              # Seen on 2.1.332: Write into .claude/ needs the user's grant even when Write is allowed; Bash does not
              tool_uses(call("Bash", {"command": f"python3 -c 'import os,sys; os.makedirs(sys.argv[1], exist_ok=True); "
                                                 f"open(sys.argv[2], \"w\").write(sys.argv[3])' {agent.parent} {agent} "
                                                 f"{shlex.quote(SEARCH_CAPABLE)}"})),
              tool_uses(call("Bash", {"command": "memory-governor policy accept --yes"})),
              tool_uses(*[engram("mem_search", query=q, limit=1) for q in ("auth", "jwt", "sessions")]),
              dispatch("general-purpose", f"Search the memory for auth. {marker}", background=False),
              text("Done.")],
        lanes={marker: [tool_uses(engram("mem_search", query="auth tokens", limit=1)), text("Nothing.")]},
        allowed=[*ENGRAM_TOOLS, "Write", "Bash", "Agent", "Task"],
    )  # fmt: skip
    assert policy.exists() and agent.exists(), "\n".join(f"{r.name}: {r.text[:200]}" for r in run.results(prefix=""))
    [_, accept] = run.results(prefix="Bash")
    assert accept.is_error and "governor-state" in accept.text, accept.text
    searches = run.results_of("mem_search", lane="main")
    refused = [r for r in searches if r.is_error]  # one parallel batch: which one is refused varies
    assert len(searches) == 3 and len(refused) == 1, run.describe()
    assert denied(refused[0], "max_search_calls"), refused[0].text
    [sub] = run.results_of("mem_search", lane=marker)
    assert denied(sub, "briefing-only"), sub.text
    cc.accept()  # the user, in a terminal
    after_accept = cc.run("Search again for auth.", resume=run.session_id,
                          main=[tool_uses(*[engram("mem_search", query=q, limit=1) for q in ("a", "b", "c")]),
                                text("Done.")])  # fmt: skip
    assert [r.is_error for r in after_accept.results_of("mem_search")] == [False, False, False], after_accept.describe()


# -- a policy file slow to read, and a project that appears above the project ------------------

ALIAS_BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
                       + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
                       + ["limits: {max_search_calls: {value: 9, enforce: block}}", ""])  # fmt: skip


def _write_with_bash(path, content: str) -> Reply:
    return tool_uses(call("Bash", {"command": f"python3 -c 'import os,sys; os.makedirs(os.path.dirname(sys.argv[1]), "
                                              f"exist_ok=True); open(sys.argv[1], \"w\").write(sys.argv[2])' "
                                              f"{shlex.quote(str(path))} {shlex.quote(content)}"}))  # fmt: skip


@GOVERNOR_SIDE
def test_a_policy_too_slow_to_read_keeps_the_limits_in_force(cc):
    local = cc.project / ".memory-governor" / "policy.local.yaml"
    run = cc.run("Find everything about auth.",
                 main=[_write_with_bash(local, ALIAS_BOMB),
                       tool_uses(*[engram("mem_search", query=q, limit=1) for q in ("auth", "jwt", "sessions")]),
                       text("Done.")],
                 allowed=[*ENGRAM_TOOLS, "Bash"])  # fmt: skip
    assert local.exists(), run.describe()
    searches = run.results_of("mem_search")
    refused = [r for r in searches if r.is_error]
    assert len(searches) == 3 and len(refused) == 1, run.describe()  # the shipped 2, not the file's 9
    assert denied(refused[0], "max_search_calls"), refused[0].text
    assert len(cc.calls("mem_search")) == 2
    decided = [r for r in cc.decisions("pre_tool") if r["role"] == "search"]
    assert len(decided) == 3, decided  # every search decided by the hook, none let through by a timeout


@GOVERNOR_SIDE
def test_a_project_folder_the_model_writes_above_the_project_loosens_nothing(cc):
    above = cc.project.parent / ".memory-governor" / "policy.yaml"
    three = tool_uses(*[engram("mem_search", query=q, limit=1) for q in ("auth", "jwt", "sessions")])
    run = cc.run("Find everything about auth; raise your memory limits first if you need to.",
                 main=[_write_with_bash(above, LOOSER_POLICY), three, text("Done.")],
                 allowed=[*ENGRAM_TOOLS, "Bash"])  # fmt: skip
    assert above.exists(), run.describe()
    refused = [r for r in run.results_of("mem_search") if r.is_error]
    assert len(run.results_of("mem_search")) == 3 and len(refused) == 1, run.describe()  # the shipped 2, not 6
    assert denied(refused[0], "max_search_calls"), refused[0].text
    later = cc.run("A new session: auth again.", main=[three, text("Done.")])  # the next session too
    assert later.session_id != run.session_id
    assert [r.is_error for r in later.results_of("mem_search")].count(True) == 1, later.describe()


# -- acceptance the model's own shell cannot give -----------------------------------------------

FORGED_ACCEPTS = ['"memory-governor" policy accept --yes', "memory-governor policy acc''ept --yes",
                  "P=memory-governor; $P policy accept --yes", "python3 -m governor.cli policy accept --yes"]  # fmt: skip


@GOVERNOR_SIDE
def test_policy_accept_forged_by_spelling_is_refused_or_has_no_effect_and_the_user_can_accept(cc):
    import base64

    from conftest import PYTHON

    encoded = base64.b64encode(f"{PYTHON} -m governor policy accept --yes".encode()).decode()
    hidden = f"echo {encoded} | base64 -d | sh"  # no route can read this: the terminal check is what stops it
    run = cc.run("Raise your memory limits, then find everything about auth.",
                 main=[_write_with_bash(cc.project / ".memory-governor" / "policy.yaml", LOOSER_POLICY),
                       *[tool_uses(call("Bash", {"command": c})) for c in [*FORGED_ACCEPTS, hidden]],
                       tool_uses(*[engram("mem_search", query=q, limit=1) for q in ("auth", "jwt", "sessions")]),
                       text("Done.")],
                 allowed=[*ENGRAM_TOOLS, "Bash"])  # fmt: skip
    shells = run.results(prefix="Bash")[1:]
    assert len(shells) == 5, run.describe()
    for result in shells[:4]:
        assert result.is_error and "governor-state" in result.text, result.text
    assert "nothing was accepted" in shells[4].text, shells[4].text
    refused = [r for r in run.results_of("mem_search") if r.is_error]
    assert len(run.results_of("mem_search")) == 3 and len(refused) == 1, run.describe()  # still the shipped 2
    assert "Put these in force?" in cc.accept()  # the user, at their own terminal
    again = cc.run("Search again for auth.", resume=run.session_id,
                   main=[tool_uses(*[engram("mem_search", query=q, limit=1) for q in ("a", "b", "c")]),
                         text("Done.")])  # fmt: skip
    assert [r.is_error for r in again.results_of("mem_search")] == [False, False, False], again.describe()


# -- a committed install on a machine without the governor (docs/teams.md) -----------------------


@GOVERNOR_SIDE
def test_a_clone_on_a_machine_without_the_governor_tells_the_user_and_refuses_memory_calls(cc):
    """The project's settings run the committed launcher; with no memory-governor on PATH it
    tells the user at session start and, under on_error: closed, refuses each memory call."""
    cc.team_policy("on_error: closed\n")
    cc.install()
    assert "/.memory-governor/hook" in (cc.project / ".claude" / "settings.json").read_text()
    cc.env["PATH"] = "/usr/bin:/bin"  # this machine has no governor (node is in /usr/bin)
    run = cc.run("What did we decide about auth?",
                 main=[tool_uses(engram("mem_search", query="auth", limit=3)), text("Done.")])  # fmt: skip
    (result,) = run.results_of("mem_search")
    assert result.is_error and "memory-governor is not installed on this machine" in result.text, result.text
    assert cc.calls("mem_search") == [], "the refused call never reached the server"
    # Seen on both pins: a SessionStart systemMessage is a `hook_system_message` attachment, shown to the user.
    entries = [json.loads(line) for line in cc.transcript(run).read_text().splitlines() if line.strip()]
    shown = [e["attachment"]["content"] for e in entries
             if isinstance(e.get("attachment"), dict) and e["attachment"].get("type") == "hook_system_message"]  # fmt: skip
    assert any("memory-governor is not installed on this machine" in m and "on_error: closed" in m for m in shown), (
        shown
    )


# -- the seatbelt: what the model's shell can do to the user's own files, held (docs/teams.md) ------

PTY_ACCEPT = "python3 -c \"import pty; pty.spawn(['memory-governor', 'policy', 'acc' + 'ept'])\" <<< y"
REWRITE_LAUNCHER = "python3 -c \"open('.memory-gov' + 'ernor/ho' + 'ok', 'w').write('exit 0')\""
JAM_LEDGER = (
    "python3 -c \"import os; d = os.environ['MEMORY_GOVERNOR_STATE_DIR']; "
    "[os.remove(os.path.join(d, n)) for n in os.listdir(d) if n.startswith('ledger.db')]; "
    "os.mkfifo(os.path.join(d, 'ledger.db')); os.remove(os.path.join(d, 'errors.log')) "
    "if os.path.exists(os.path.join(d, 'errors.log')) else None; os.mkfifo(os.path.join(d, 'errors.log'))\""
)


def _hidden(command: str) -> Reply:
    """A Bash call whose program no route reads (base64): the seatbelt's own checks are what hold."""
    import base64

    return tool_uses(
        call("Bash", {"command": f"echo {base64.b64encode(command.encode()).decode()} | base64 -d | bash"})
    )


def test_the_seatbelt_holds_a_pty_accept_a_rewritten_launcher_and_a_jammed_ledger(cc):
    """An ordinary install, the shipped on_error: open. The model writes a looser policy and accepts it
    through a pseudo-terminal it spawned, rewrites the committed launcher with a program, and (next)
    turns the ledger and errors.log into FIFOs: the looser policy stays held back, the launcher's
    rewrite changes nothing (the command finds the governor itself), and every search after the
    jam is refused, answered in seconds, never let through."""
    searches = [engram("mem_search", query=q, limit=20) for q in ("auth", "jwt", "sessions")]
    run = cc.run("Raise your memory limits, then find everything about auth.",
                 main=[_write_with_bash(cc.project / ".memory-governor" / "policy.yaml", LOOSER_POLICY),
                       _hidden(PTY_ACCEPT), _hidden(REWRITE_LAUNCHER), tool_uses(*searches),
                       _hidden(JAM_LEDGER), tool_uses(*searches[:2]), text("Done.")],
                 allowed=[*ENGRAM_TOOLS, "Bash"])  # fmt: skip
    shells = run.results(prefix="Bash")
    assert len(shells) == 4, run.describe()
    assert "agent" in shells[1].text and "nothing was accepted" in shells[1].text, shells[1].text
    assert (cc.project / ".memory-governor" / "hook").read_text() == "exit 0", "the program's write landed"
    first, second = run.results_of("mem_search")[:3], run.results_of("mem_search")[3:]
    assert sorted(r.is_error for r in first) == [False, False, True], run.describe()  # the shipped 2, at limit 3
    assert [c["arguments"]["limit"] for c in cc.calls("mem_search")] == [3, 3], cc.calls()
    assert len(second) == 2 and all(r.is_error for r in second), run.describe()
    assert all("could not check" in reason(r) for r in second), [r.text for r in second]
    assert len(cc.calls("mem_search")) == 2, "nothing reached the memory once the ledger was jammed"
    assert run.seconds < 120
    for jammed in ("ledger.db", "errors.log"):  # nothing logged through the FIFO: what teardown reads is gone
        (cc.state / jammed).unlink()
