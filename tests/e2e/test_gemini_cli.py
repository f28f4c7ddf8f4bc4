"""memory-governor through the real Gemini CLI binary: what THE MODEL RECEIVED.

Every test drives `gemini -p` (pinned in gemini_env.py) in a fresh project where the project's
own installer put the hooks, against fake_gemini.FakeGemini, which plays the model's side from
a script and records each request. Assertions read the functionResponse parts the model was
sent (their output or error text), the context Gemini added, what the Engram stand-in
(engram_mcp.py) actually received, and the ledger.

Gemini CLI gives no turn id and no call id: a turn starts at each BeforeAgent, and a result
is matched to its call by tool and arguments. The parallel tests prove the counts exact.

Run: .venv/bin/python -m pytest tests/e2e/test_gemini_cli.py -m e2e -q
"""

from __future__ import annotations

import json
import re

import pytest
from fake_gemini import Reply, Request, call, engram, text, tool_uses

from governor.engine.tokens import counter

pytestmark = pytest.mark.e2e
pytest_plugins = ["gemini_env"]

NOTE = "[memory-governor]"
ALLOWED_TYPES = "decision, bugfix, pattern, preference, constraint, session_summary"
HIT = re.compile(r"^\[\d+\] #(\d+) \(", re.M)
BLOCKED = "Tool execution blocked: "  # Gemini's prefix to a BeforeTool deny's reason
REWRITTEN = "[System] Tool input parameters were modified by a hook before execution."  # appended to its result
UNTRUSTED = re.compile(r"\A<untrusted_context>\n(.*)\n</untrusted_context>\Z", re.S)


def o200k(text_: str) -> int:
    return counter("o200k_base").count(text_)


def server_text(result_text: str) -> str:
    """The memory server's (or the governor's) text in a result: without the <untrusted_context>
    wrapper Gemini puts around every MCP result, or the line it adds after a rewritten call."""
    body = result_text.removesuffix(REWRITTEN).rstrip("\n") if result_text.endswith(REWRITTEN) else result_text
    match = UNTRUSTED.match(body)
    return match.group(1) if match else body


def hit_ids(result_text: str) -> list[int]:
    return [int(i) for i in HIT.findall(server_text(result_text))]


def denied(result, *fragments: str) -> bool:
    """A BeforeTool deny as the model got it: an error, "Tool execution blocked: memory-governor: ..."."""
    return (result.is_error and result.text.startswith(BLOCKED + "memory-governor:")
            and all(f in result.text for f in fragments))  # fmt: skip


def fetch_surfaced(tool: str = "mem_get_observation") -> callable:
    """A reply that fetches an id the previous search surfaced (read from the request it answers)."""

    def reply(request: Request) -> Reply:
        ids = [i for r in request.tool_results() if not r.is_error for i in hit_ids(r.text)]
        assert ids, f"the previous step surfaced no id: {request.tool_results()}"
        return tool_uses(engram(tool, id=ids[0]))

    return reply


# -- L1: the per-turn search cap in one parallel batch, exact without call ids; the clamp --


def test_parallel_batch_with_identical_calls_gets_exactly_two_results_then_a_clamp(gem_warm):
    # Two pairs of identical calls: with no call id, only the tool and its arguments tell calls
    # apart, so this is where a count could go wrong. The warm server decides (the default install).
    gem = gem_warm
    # Identical calls return identical entries, which delivered-once would send as pointer lines, and
    # Gemini takes a replaced result only as an AfterTool deny (an error the model reads): this test
    # counts calls, so the team turns delivered-once off (tests/test_delivery.py covers it).
    gem.team_policy('version: 1\ndelivery:\n  dedupe: "off"\n')
    batch = [engram("mem_search", query=q, limit=3) for q in ("jwt auth", "jwt auth", "fts5 search", "fts5 search")]
    run = gem.run("What did we decide about auth and search?", main=[tool_uses(*batch), text("Summarised.")])
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    real = [r for r in results if not r.is_error]
    refused = [r for r in results if r.is_error]
    assert len(real) == 2 and len(refused) == 2, run.describe()
    for r in real:
        assert server_text(r.text).startswith("Found ") and hit_ids(r.text), r.text
    for r in refused:
        assert denied(r, "max_search_calls=2", "do not retry"), r.text
    assert len(gem.calls("mem_search")) == 2, gem.calls()  # the refused calls never reached the server
    # The ledger: two results counted, two refusals, nothing left pending.
    assert sorted(gem.ledger_calls()) == [("search", "committed")] * 2 + [("search", "denied")] * 2
    # A new prompt is a new turn with a fresh budget; and the clamp: limit 10, and no limit
    # (Engram's default 10), both reach the server as 3, the whole input (Gemini replaces it).
    again = gem.run("And what did we decide about auth tokens?", resume=True,
                    main=[tool_uses(engram("mem_search", query="auth", limit=10),
                                    engram("mem_search", query="token")), text("Found it.")])  # fmt: skip
    assert again.session_id == run.session_id
    fresh = again.results_of("mem_search")
    assert len(fresh) == 2 and not any(r.is_error for r in fresh), again.describe()
    logged = sorted((c["arguments"] for c in gem.calls("mem_search")[2:]), key=lambda a: a["query"])
    assert logged == [{"query": "auth", "limit": 3}, {"query": "token", "limit": 3}], logged
    for result in fresh:
        assert result.text.endswith(REWRITTEN), result.text  # Gemini tells the model the input changed
        found = int(re.match(r"Found (\d+) memories:", server_text(result.text)).group(1))
        assert found == len(hit_ids(result.text)) == 3, result.text  # the seed has more than 3 of each
    # Matched by their rewritten arguments, both results were counted against their calls.
    assert sorted(gem.ledger_calls()) == [("search", "committed")] * 4 + [("search", "denied")] * 2


# -- L3: a fetch needs an id a search surfaced in this turn --------------------------------


def test_fetch_before_search_is_denied_then_allowed_for_a_surfaced_id(gem):
    run = gem.run(
        "We hit this FTS5 crash before; how did we fix it? Show me the full sanitizeFTS memory.",
        main=[
            tool_uses(engram("mem_get_observation", id=58)),  # guessed: not surfaced yet
            tool_uses(engram("mem_search", query="sanitizeFTS", limit=3)),
            fetch_surfaced(),
            text("Here it is."),
        ],
    )
    first, second = run.results_of("mem_get_observation")
    assert denied(first, "not surfaced", "58"), first.text
    [search] = run.results_of("mem_search")
    assert 58 in hit_ids(search.text), search.text
    assert not second.is_error, second.text
    body = server_text(second.text)
    assert body.startswith("#58 [pattern] Search queries go through sanitizeFTS\n"), second.text
    assert NOTE not in body
    assert [c["arguments"] for c in gem.calls("mem_get_observation")] == [{"id": 58}]


# -- the per-turn token ceiling -------------------------------------------------------------


def _engram_output(gem, tool: str, arguments: dict) -> str:
    """What the Engram stand-in answers for this call on the test's seed (computed here, in-process)."""
    import engram_mcp

    return engram_mcp.TOOLS[tool][0](engram_mcp.Store(str(gem.seed)), arguments)


def test_token_ceiling_holds_for_everything_the_model_received(gem):
    run = gem.run(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[
            tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
            tool_uses(engram("mem_get_observation", id=62)),  # 4,800 characters: ~1,080 tokens
            text("Done."),
        ],
    )
    search, fetch = run.results(prefix="mcp_engram_")
    received = o200k(server_text(search.text)) + o200k(server_text(fetch.text))
    assert received <= 1200, f"{received} tokens of memory reached the model\n{run.describe()}"
    assert not search.is_error and 62 in hit_ids(search.text), search.text
    # The server returned the whole observation, which would have taken the turn over budget ...
    assert [c["arguments"] for c in gem.calls("mem_get_observation")] == [{"id": 62}]
    whole = _engram_output(gem, "mem_get_observation", {"id": 62})
    assert o200k(server_text(search.text)) + o200k(whole) > 1200
    # ... so the model got the governor's replacement: Gemini can only send it as the call's
    # error text (an AfterTool deny), still wrapped as untrusted server output.
    assert fetch.is_error and UNTRUSTED.match(fetch.text), fetch.text
    assert server_text(fetch.text).startswith(NOTE) and "held back" in fetch.text, fetch.text
    assert "Note 20 on sqlite storage" not in fetch.text


# -- mem_context: locked; unlocked by a recall prompt, /compress, a resume ----------------


def _context_twice() -> list:
    return [tool_uses(engram("mem_context", project="myapp")), tool_uses(engram("mem_context", project="myapp")),
            text("Recovered.")]  # fmt: skip


def test_recall_prompt_unlocks_one_context_dump_trimmed_to_whole_entries(gem):
    run = gem.run("give me all context", main=_context_twice())
    first, second = run.results_of("mem_context")
    # The BeforeAgent answer's additionalContext reached the model with the prompt.
    assert "explicit recall requested; mem_context is allowed once this turn" in run.lane()[0].all_text()
    # Allowed once; over the budget, so the model got whole entries and the note (as the error text).
    assert first.is_error and UNTRUSTED.match(first.text), first.text
    body = server_text(first.text)
    assert body.startswith("## Memory from Previous Sessions") and NOTE in body, body[:300]
    assert o200k(body) <= 1200 < o200k(_engram_output(gem, "mem_context", {"project": "myapp"}))
    _assert_whole_entries(gem, body)
    assert denied(second, "is off outside post-compaction recovery"), second.text
    assert len(gem.calls("mem_context")) == 1


@pytest.mark.parametrize("prompt", ["go through everything our memory holds on this repo",
                                    "cárgame todo lo que tengas guardado del proyecto"])  # fmt: skip
def test_a_recall_request_in_other_words_unlocks_one_context_dump(gem, prompt):
    """No listed phrase: the same ask in other words, in English and Spanish."""
    run = gem.run(prompt, main=_context_twice())
    first, second = run.results_of("mem_context")
    assert "explicit recall requested; mem_context is allowed once this turn" in run.lane()[0].all_text()
    assert not first.text.startswith(BLOCKED), first.text
    assert server_text(first.text).startswith("## Memory from Previous Sessions"), first.text[:300]
    assert denied(second, "is off outside post-compaction recovery"), second.text
    assert len(gem.calls("mem_context")) == 1


def test_a_question_about_the_words_leaves_mem_context_locked(gem):
    """A listed phrase in a knowledge question: no unlock; the refusal is one short line (the user is told
    what would unlock it)."""
    run = gem.run("how large is the full context of this model?",
                  main=[tool_uses(engram("mem_context", project="myapp")), text("About a million tokens.")])  # fmt: skip
    [locked] = run.results_of("mem_context")
    assert "explicit recall requested" not in run.lane()[0].all_text()
    assert denied(locked, "is off outside post-compaction recovery", "Use mem_search"), locked.text
    assert gem.calls("mem_context") == []


def _assert_whole_entries(gem, received: str) -> None:
    """The context the model got is the server's, minus whole entries, plus the note."""
    import engram_mcp

    sections = engram_mcp.context_sections(engram_mcp.Store(str(gem.seed)), "myapp")
    entries = [entry for _, section in sections for entry in section]
    body, _, note = received.partition(NOTE)
    rest, kept = body.split("\n---\nMemory stats:")[0], 0
    for entry in entries:
        if entry in rest:
            rest = rest.replace(entry, "", 1)
            kept += 1
    leftover = rest.replace("## Memory from Previous Sessions", "")
    for heading, _ in sections:
        leftover = leftover.replace(heading, "")
    assert not leftover.strip(), f"text that is no whole entry reached the model: {leftover.strip()[:400]!r}"
    held = re.match(r" (\d+) of (\d+) entries held back", note)
    assert held and (int(held.group(1)), int(held.group(2))) == (len(entries) - kept, len(entries)), note
    assert 0 < kept < len(entries)


def test_mem_context_denied_then_allowed_once_after_compress(gem):
    first = gem.run("Continue with the auth work where we left off.",
                    main=[tool_uses(engram("mem_context", project="myapp")), text("Continuing without it.")])  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    # `gemini -p /compress` compresses the history (PreCompress trigger "manual": the summary is
    # two side requests), then sends "/compress" to the model as the prompt of a new turn.
    after = gem.run("/compress", resume=True, main=_context_twice())
    assert [r for r in after.side if "<state_snapshot>" in r.all_text()], after.describe()
    first_dump, second_dump = after.results_of("mem_context")
    assert server_text(first_dump.text).startswith("## Memory from Previous Sessions"), first_dump.text
    assert denied(second_dump, "is off outside post-compaction recovery"), second_dump.text
    assert len(gem.calls("mem_context")) == 1


def test_a_resume_right_away_does_not_unlock_mem_context_but_one_after_a_break_does(gem):
    # Every `gemini -p --resume` fires SessionStart "resume": a loop resumes every turn, so the
    # shipped policy counts one only after 30 idle minutes. A team policy waits 0 minutes here.
    first = gem.run("Where were we on the search endpoint?",
                    main=[tool_uses(engram("mem_context")), text("OK.")])  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    (gem.project / ".memory-governor").mkdir(exist_ok=True)
    (gem.project / ".memory-governor" / "policy.yaml").write_text(
        "version: 1\nmem_context:\n  unlocked_by:\n    session_resume: {scope: next_turn, uses: 1, min_idle_minutes: 0}\n"
    )
    gem.accept()  # a loosening written mid-session waits for the user
    resumed = gem.run("Pick up where we left off.", resume=True, main=_context_twice())
    allowed, again = resumed.results_of("mem_context")
    assert server_text(allowed.text).startswith("## Memory from Previous Sessions"), allowed.text
    assert denied(again, "is off outside post-compaction recovery"), again.text


# -- save discipline ------------------------------------------------------------------------


def test_save_discipline(gem):
    transcript = ("User: why does search crash on E-1021?\nAssistant: FTS5 reads the hyphen as an operator.\n"
                  "User: fix it\nAssistant: I quoted each term before MATCH.")  # fmt: skip
    good = {"title": "Quote FTS5 terms before MATCH", "type": "decision", "project": "myapp",
            "content": "**What**: every search term is quoted before MATCH\n**Why**: hyphens crashed FTS5\n"
                       "**Where**: internal/store/search.go"}  # fmt: skip
    run = gem.run(
        "Save what we learned today.",
        main=[
            tool_uses(engram("mem_save", title="Search crash notes", content="**What**: quoted FTS5 terms",
                             type="manual"),
                      engram("mem_save", title="Search crash notes again", content="**What**: quoted FTS5 terms"),
                      engram("mem_save", title="Search crash conversation", content=transcript, type="bugfix")),
            tool_uses(engram("mem_save", **good)),
            text("Saved."),
        ],
    )  # fmt: skip
    results = {r.input["title"]: r for r in run.results_of("mem_save")}
    assert denied(results["Search crash notes"], "'manual'", ALLOWED_TYPES), results["Search crash notes"].text
    assert denied(results["Search crash notes again"], "'manual'")  # Engram's default type
    assert denied(results["Search crash conversation"], "raw transcript"), results["Search crash conversation"].text
    saved = results["Quote FTS5 terms before MATCH"]
    assert not saved.is_error and server_text(saved.text).startswith('Memory saved: "Quote FTS5 terms before MATCH"')
    assert [c["arguments"]["title"] for c in gem.calls("mem_save")] == ["Quote FTS5 terms before MATCH"]


# -- subagents ------------------------------------------------------------------------------
# Gemini's hooks do not say which agent calls a tool. A subagent's calls come between the
# BeforeTool and the AfterTool of the invoke_agent call that started it, so the governor
# gives every memory call in that window the subagent's tier.


def _invoke(agent: str, prompt: str) -> Reply:
    return tool_uses(call("invoke_agent", {"agent_name": agent, "prompt": prompt}))


def _finish(result: str) -> Reply:
    return tool_uses(call("complete_task", {"result": result}))


def test_save_only_subagent_cannot_search_but_can_save(gem):
    marker = "LANE-VALIDATOR"  # validator is save-only in the shipped policy
    gem.agent("validator", f"You are the validator. Check the change and record bugs. {marker}",
              tools=["mcp_engram_mem_search", "mcp_engram_mem_save"])  # fmt: skip
    run = gem.run(
        "Validate the refresh-token change.",
        main=[_invoke("validator", f"Validate the refresh-token change in src/auth/refresh.ts. {marker}"),
              tool_uses(engram("mem_search", query="token refresh", limit=3)),
              text("The validator recorded the bug.")],
        lanes={marker: [
            tool_uses(engram("mem_search", query="token refresh", limit=3)),
            tool_uses(engram("mem_save", title="Refresh ran twice on slow networks", type="bugfix", project="myapp",
                             content="**What**: a retry re-sent the refresh\n**Why**: no idempotency key\n"
                                     "**Where**: src/auth/refresh.ts")),
            _finish("Validation done; one bug saved."),
        ]},
    )  # fmt: skip
    assert run.lane(marker), "the subagent never talked to the model"
    [search] = run.results_of("mem_search", lane=marker)
    assert denied(search, "save-only", "validator"), search.text
    [save] = run.results_of("mem_save", lane=marker)
    assert not save.is_error and server_text(save.text).startswith('Memory saved: "Refresh ran twice on slow networks"')
    # Once the subagent has ended, the main agent's own search is its own again.
    [main_search] = run.results_of("mem_search", lane="main")
    assert not main_search.is_error, main_search.text
    assert [c["tool"] for c in gem.calls()] == ["mem_save", "mem_search"]
    [report] = run.results(lane="main", prefix="invoke_agent")
    assert "Validation done; one bug saved." in report.text, report.text


def test_search_capable_subagent_shares_the_turn_search_budget(gem):
    # Gemini rejects unknown front-matter keys in an agent definition, so the tier is in its body.
    marker = "LANE-RESEARCHER"
    gem.agent("researcher", f"You research project history. {marker}\nEngram access tier: search-capable",
              tools=["mcp_engram_mem_search"])  # fmt: skip
    run = gem.run(
        "What did we decide about auth? Ask the researcher about search too.",
        main=[tool_uses(engram("mem_search", query="auth", limit=3)),
              _invoke("researcher", f"Find what we decided about search. {marker}"),
              text("Combined.")],
        lanes={marker: [tool_uses(engram("mem_search", query="search", limit=3)),
                        tool_uses(engram("mem_search", query="fts5", limit=3)),
                        _finish("Search decisions found.")]},
    )  # fmt: skip
    [main_search] = run.results_of("mem_search", lane="main")
    allowed, refused = run.results_of("mem_search", lane=marker)
    assert not main_search.is_error and not allowed.is_error, run.describe()
    assert denied(refused, "max_search_calls"), refused.text
    assert [c["arguments"]["query"] for c in gem.calls("mem_search")] == ["auth", "search"]


# -- the governor's own failure: on_error, visibly --------------------------------------------


def test_on_error_closed_refuses_memory_calls_and_says_so(gem):
    gem.team_policy("version: 1\non_error: closed\n")
    gem.install()
    # A state directory that cannot be created: the ledger cannot open, so nothing can be counted.
    blocker = gem.tmp / "not-a-directory"
    blocker.write_text("")
    gem.env["MEMORY_GOVERNOR_STATE_DIR"] = str(blocker / "state")
    run = gem.run("What did we decide about auth?",
                  main=[tool_uses(engram("mem_search", query="auth", limit=3)), text("Without memory.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert result.is_error and result.text.startswith(BLOCKED + "memory-governor could not check this memory call")
    assert gem.calls("mem_search") == []
    # The user was told, through Gemini's own channel for a hook's systemMessage.
    assert "memory calls are refused until it can" in run.stderr, run.stderr[-2000:]  # whatever on_error says
    gem.env["MEMORY_GOVERNOR_STATE_DIR"] = str(gem.state)  # the fixture reads the error log here


def test_a_clone_on_a_machine_without_the_governor_tells_the_user_and_refuses_memory_calls(gem):
    """The project's settings run the committed launcher (docs/teams.md); with no memory-governor
    on PATH it tells the user at session start and, under on_error: closed, refuses memory calls."""
    gem.team_policy("version: 1\non_error: closed\n")
    gem.install()
    assert "/.memory-governor/hook" in gem.settings_file.read_text()
    gem.env["PATH"] = "/usr/bin:/bin"  # this machine has no governor (node is in /usr/bin)
    run = gem.run("What did we decide about auth?",
                  main=[tool_uses(engram("mem_search", query="auth", limit=3)), text("Without memory.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert result.is_error and result.text.startswith(BLOCKED + "memory-governor is not installed"), result.text
    assert gem.calls("mem_search") == []
    # The user was told, through Gemini's own channel for a hook's systemMessage.
    assert "memory-governor is not installed on this machine" in run.stderr, run.stderr[-2000:]
    # on_error: open: the call runs ungoverned, and the session-start message says so.
    gem.write(".memory-governor/policy.yaml", "version: 1\non_error: open\n")
    run = gem.run("And about sessions?",
                  main=[tool_uses(engram("mem_search", query="sessions", limit=3)), text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert not result.is_error and len(gem.calls("mem_search")) == 1, result.text
    assert "memory calls pass ungoverned" in run.stderr, run.stderr[-2000:]


# -- replay: Gemini's own session log -------------------------------------------------------


def test_replay_of_an_ungoverned_session_log_decides_as_the_hooks_would(gem):
    gem.hooks = False  # ungoverned: every call goes through, and Gemini logs it
    marker = "LANE-VALIDATOR"
    gem.agent("validator", f"You are the validator. {marker}", tools=["mcp_engram_mem_search"])
    batch = [engram("mem_search", query=q, limit=3) for q in ("jwt auth", "fts5 search", "sqlite", "errors")]
    run = gem.run(
        "What did we decide about auth, search, storage and errors? Then validate.",
        main=[tool_uses(*batch), _invoke("validator", f"Validate the auth change. {marker}"), text("Done.")],
        lanes={marker: [tool_uses(engram("mem_search", query="token", limit=3)), _finish("Validated.")]},
    )
    assert len(gem.calls("mem_search")) == 5 and not any(r.is_error for r in run.results_of("mem_search"))
    [log] = (gem.home / ".gemini" / "tmp").glob(f"*/chats/session-*-{run.session_id[:8]}.jsonl")
    replayed = json.loads(gem.governor("replay", str(log), "--format", "json").stdout)
    [turn] = replayed["turns"]
    searches = [d for d in turn["decisions"] if d["tool"] == "mcp__engram__mem_search"]
    assert sorted(d["decision"] for d in searches[:4]) == ["allow", "allow", "deny", "deny"], searches
    validator = searches[4]
    assert validator["agent_type"] == "validator" and validator["decision"] == "deny", validator
    assert "is save-only" in validator["reason"], "played as the subagent it was, not as the parent"


# -- a policy file slow to read, and a project that appears above the project ------------------

ALIAS_BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
                       + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
                       + ["limits: {max_search_calls: {value: 9, enforce: block}}", ""])  # fmt: skip


def _write_with_shell(path, content: str) -> Reply:
    """A write through a program the routes do not read (`mkdir -p .memory-governor` itself is refused
    since the launcher's folder is the model's to leave alone): what is then in force is the test."""
    import shlex

    return tool_uses(call("run_shell_command", {"command": f"python3 -c 'import os,sys; os.makedirs(os.path.dirname("
                                                           f"sys.argv[1]), exist_ok=True); open(sys.argv[1], \"w\")"
                                                           f".write(sys.argv[2])' {shlex.quote(str(path))} "
                                                           f"{shlex.quote(content)}"}))  # fmt: skip


def _over_the_cap(results: list) -> list:
    """The searches refused for the turn's cap (a result Gemini CLI got replaced, e.g. "already shown",
    arrives as an error too)."""
    return [r for r in results if r.is_error and "max_search_calls" in r.text]


def test_a_policy_too_slow_to_read_keeps_the_limits_in_force(gem):
    local = gem.project / ".memory-governor" / "policy.local.yaml"
    run = gem.run("Find everything about auth.",
                  main=[_write_with_shell(local, ALIAS_BOMB),
                        tool_uses(*[engram("mem_search", query=q, limit=1) for q in ("auth", "jwt", "sessions")]),
                        text("Done.")])  # fmt: skip
    assert local.exists(), run.describe()
    searches = run.results_of("mem_search")
    refused = _over_the_cap(searches)
    assert len(searches) == 3 and len(refused) == 1, run.describe()  # the shipped 2, not the file's 9
    assert denied(refused[0], "max_search_calls"), refused[0].text
    assert len(gem.calls("mem_search")) == 2


LOOSER_POLICY = "limits:\n  max_search_calls: {value: 6, enforce: block}\n"


def test_a_project_folder_the_model_writes_above_the_project_loosens_nothing(gem):
    above = gem.project.parent / ".memory-governor" / "policy.yaml"
    three = tool_uses(*[engram("mem_search", query=q, limit=1) for q in ("auth", "jwt", "sessions")])
    run = gem.run("Find everything about auth; raise your memory limits first if you need to.",
                  main=[_write_with_shell(above, LOOSER_POLICY), three, text("Done.")])  # fmt: skip
    assert above.exists(), run.describe()
    refused = _over_the_cap(run.results_of("mem_search"))
    assert len(run.results_of("mem_search")) == 3 and len(refused) == 1, run.describe()  # the shipped 2, not 6
    assert denied(refused[0], "max_search_calls"), refused[0].text
    later = gem.run("A new session: auth again.", main=[three, text("Done.")])  # the next session too
    assert len(_over_the_cap(later.results_of("mem_search"))) == 1, later.describe()
