"""memory-governor through the real Codex CLI binary: what THE MODEL RECEIVED.

Every test drives `codex exec --json` (pinned in codex_env.py) in a fresh project where the
project's own installer put the hooks and their trust (no trust bypass), against
fake_responses.FakeResponses, which plays the model's side from a script and records each
request. Assertions read the function_call_output items the model was sent (a refusal and a
hook's replacement are plain strings; a result Codex ran has its "Wall time" header), the
developer messages Codex added, and what the Engram stand-in (engram_mcp.py) received.

Run: .venv/bin/python -m pytest tests/e2e/test_codex.py -m e2e -q
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from codex_env import CodexHarness, codex_fixture, codex_tools_fixture, responses_fixture, responses_server_fixture  # noqa: F401
from fake_responses import Reply, Request, call, engram, text, tool_uses

from governor.engine.stores import open_ledger
from governor.engine.tokens import counter
from tests.conftest import GOVERNOR_PATH

pytestmark = pytest.mark.e2e

NOTE = "[memory-governor]"
BLOCKED = "Tool call blocked by PreToolUse hook: memory-governor:"
ALLOWED_TYPES = "decision, bugfix, pattern, preference, constraint, session_summary"
HIT = re.compile(r"^\[\d+\] #(\d+) \(", re.M)
SPAWN = "multi_agent_v1__spawn_agent"
WAIT = "multi_agent_v1__wait_agent"


def o200k(text_: str) -> int:
    return counter("o200k_base").count(text_)


def hit_ids(result_text: str) -> list[int]:
    return [int(i) for i in HIT.findall(result_text)]


def above(result_text: str) -> list[int]:
    """The hits a search result names as already held in this conversation (delivered once)."""
    line = re.search(r"already above in this conversation: ([#\d, …]+)\.", result_text)
    return [int(i) for i in re.findall(r"#(\d+)", line.group(1))] if line else []


def denied(result, *fragments: str) -> bool:
    """Codex's refusal: a plain string, the reason after its own prefix, and the tool's name."""
    return (not result.ran and result.raw.startswith(BLOCKED) and result.raw.endswith(f". Tool: {result.name}")
            and all(f in result.raw for f in fragments))  # fmt: skip


def fetch_surfaced(tool: str = "mem_get_observation") -> callable:
    """A reply that fetches an id the previous search surfaced (read from the request it answers)."""

    def reply(request: Request) -> Reply:
        ids = [i for r in request.tool_results() if r.ran for i in hit_ids(r.text)]
        assert ids, f"the previous step surfaced no id: {request.tool_results()}"
        return tool_uses(engram(tool, id=ids[0]))

    return reply


def _engram_output(codex: CodexHarness, tool: str, arguments: dict) -> str:
    """What the Engram stand-in answers for this call on the test's seed (computed here, in-process)."""
    import engram_mcp

    return engram_mcp.TOOLS[tool][0](engram_mcp.Store(str(codex.seed)), arguments)


# -- the install: trusted as Codex intends, checked by doctor ------------------------------


def test_installed_hooks_are_trusted_by_codex_and_doctor_says_so(codex):
    codex.install()
    doctor = codex.governor("doctor", check=False)
    assert "ok    codex (project)" in doctor.stdout, doctor.stdout
    assert re.search(r"ok    codex hooks +Codex \(.+\) runs all 8 installed hooks: trusted", doctor.stdout), (
        doctor.stdout
    )
    assert "ok    codex hook " in doctor.stdout and "clamped limit 10 -> 3" in doctor.stdout, doctor.stdout
    # A second install changes nothing; an edited hook loses its trust, which Codex and doctor both see.
    again = codex.governor("install", "codex", "--project", str(codex.project))
    assert again.stdout.count("nothing changed") == 3, again.stdout  # launcher, hooks, trust
    hooks_file = codex.project / ".codex" / "hooks.json"
    edited = json.loads(hooks_file.read_text())
    edited["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = 11
    hooks_file.write_text(json.dumps(edited))
    broken = codex.governor("doctor", check=False)
    assert broken.returncode == 1, broken.stdout
    assert "Codex skips untrusted hooks silently, and 1 of ours are not trusted" in broken.stdout, broken.stdout
    assert "Codex skips 1 of our 8 hooks (preToolUse: modified)" in broken.stdout, broken.stdout
    # ... and Codex really runs the call ungoverned: the limit reaches the server unclamped.
    codex.run("What did we decide about auth?",
              main=[tool_uses(engram("mem_search", query="auth", limit=10)), text("Done.")])  # fmt: skip
    assert [c["arguments"]["limit"] for c in codex.calls("mem_search")] == [10]
    # Installing again trusts the hooks it writes.
    codex.governor("install", "codex", "--project", str(codex.project))
    healed = codex.governor("doctor", check=False)
    assert healed.returncode == 0, healed.stdout


def test_uninstall_removes_the_hooks_and_their_trust(codex):
    codex.install()
    config = codex.codex_home / "config.toml"
    assert "trusted_hash" in config.read_text()
    codex.governor("uninstall", "codex", "--project", str(codex.project))
    assert "trusted_hash" not in config.read_text()
    assert '[projects."' in config.read_text() and "[mcp_servers.engram]" in config.read_text()
    assert not (codex.project / ".codex" / "hooks.json").exists(), "the file the install created is gone"


# -- L1: the per-turn search cap, in one parallel batch -----------------------------------


def test_parallel_batch_of_four_searches_gets_two_results_and_two_denials(codex):
    queries = ("jwt auth", "fts5 search", "repository errors", "sqlite storage")
    run = codex.run("What did we decide about auth, search, the repository layer and storage?",
                    main=[tool_uses(*[engram("mem_search", query=q, limit=3) for q in queries]),
                          text("Summarised.")])  # fmt: skip
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    # Refused by the cap, by what the refusal says: an allowed result the budget trimmed also comes back
    # as a hook's replacement (no "Wall time" header), and which two are allowed depends on timing.
    refused = [r for r in results if not r.ran and "max_search_calls" in r.raw]
    real = [r for r in results if r not in refused]
    assert len(real) == 2 and len(refused) == 2, run.describe()
    for r in real:
        assert r.text.startswith("Found ") and hit_ids(r.text), r.text
    for r in refused:
        assert denied(r, "max_search_calls"), r.raw
    assert len(codex.calls("mem_search")) == 2, codex.calls()


# -- L1: the limit clamp, and what the "allow" it needs does not do -------------------------


def test_search_limit_10_is_clamped_to_3(codex):
    run = codex.run(
        "What did we decide about auth?",
        main=[
            tool_uses(engram("mem_search", query="auth", limit=10), engram("mem_search", query="token")),
            text("Done."),
        ],
    )
    # Clamped to 3, never more: Codex cannot replace a result in place, so a search asks for no hits
    # past those it may pass (cutting them would turn the result into a block).
    logged = sorted((c["arguments"] for c in codex.calls("mem_search")), key=lambda a: a["query"])
    assert logged == [{"query": "auth", "limit": 3}, {"query": "token", "limit": 3}], logged
    results = run.results_of("mem_search")
    # Hits the other search just delivered whole are named in one line instead: Codex takes that
    # replacement as a PostToolUse block, whose reason is the output (so it reads as not run).
    assert len(results) == 2 and all(r.ran or "already above in this conversation" in r.text for r in results)
    for result in results:  # the seed has more than 3 of each: 3 new, or 3 with those already held named
        shown = hit_ids(result.text)
        assert len(shown) == 3 or len(shown) + len(above(result.text)) == 3, result.text


def test_git_cannot_move_the_launcher_codex_runs(codex, tmp_path):
    """`git config core.worktree DIR` moves `git rev-parse --show-toplevel` to DIR; a launcher the
    model planted there (answering nothing, beside a copy of the hooks file) is not what Codex runs:
    the project's launcher is found from the session's folder."""
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q", str(codex.project)], check=True, capture_output=True)
    codex.install()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".memory-governor").mkdir(parents=True)
    (elsewhere / ".memory-governor" / "hook").write_text("exit 0\n")
    (elsewhere / ".codex").mkdir()
    shutil.copy(codex.project / ".codex" / "hooks.json", elsewhere / ".codex" / "hooks.json")
    subprocess.run([git, "-C", str(codex.project), "config", "core.worktree", str(elsewhere)], check=True)
    top = subprocess.run([git, "rev-parse", "--show-toplevel"], capture_output=True, text=True, cwd=codex.project)
    assert top.stdout.strip() == str(elsewhere)
    run = codex.run("What did we decide about auth?",
                    main=[tool_uses(engram("mem_search", query="auth", limit=10)), text("Done.")])  # fmt: skip
    assert [c["arguments"] for c in codex.calls("mem_search")] == [{"query": "auth", "limit": 3}], run.describe()


def test_a_clamp_does_not_bypass_codex_approval_of_the_call(codex):
    # The clamp must say "allow" for Codex to apply it; a tool the user set to ask first is still
    # held by Codex's own approval (under `codex exec`: refused), clamped or not.
    codex.extra_config = '[mcp_servers.engram.tools.mem_search]\napproval_mode = "prompt"\n'
    run = codex.run("What did we decide about auth?",
                    main=[tool_uses(engram("mem_search", query="auth", limit=10)), text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert result.ran and "MCP tool call requires approval" in result.text, run.describe()
    assert codex.calls("mem_search") == []


# -- L3: a fetch needs an id a search surfaced in this turn --------------------------------


def test_fetch_before_search_is_denied_then_allowed_for_a_surfaced_id(codex):
    run = codex.run("We hit this FTS5 crash before; how did we fix it? Show me the full sanitizeFTS memory.", main=[
        tool_uses(engram("mem_get_observation", id=58)),  # guessed: not surfaced yet
        tool_uses(engram("mem_search", query="sanitizeFTS", limit=3)),
        fetch_surfaced(),
        text("Here it is."),
    ])  # fmt: skip
    first, second = run.results_of("mem_get_observation")
    assert denied(first, "not surfaced", "58"), first.raw
    [search] = run.results_of("mem_search")
    assert 58 in hit_ids(search.text), search.text
    assert second.ran and second.text.startswith("#58 [pattern] Search queries go through sanitizeFTS\n"), second.raw
    assert [c["arguments"] for c in codex.calls("mem_get_observation")] == [{"id": 58}]


# -- the per-turn token ceiling: a trim arrives as the whole output -------------------------


def test_token_ceiling_holds_and_the_trim_is_the_whole_output(codex):
    run = codex.run("What did we decide about storage? Show the full SQLite memory.", main=[
        tool_uses(engram("mem_search", query="sqlite storage wal", limit=3)),
        tool_uses(engram("mem_get_observation", id=62)),  # 4,800 characters: ~1,080 tokens
        text("Done."),
    ])  # fmt: skip
    [search] = run.results_of("mem_search")
    [fetch] = run.results_of("mem_get_observation")
    assert search.ran and 62 in hit_ids(search.text), search.raw
    assert [c["arguments"] for c in codex.calls("mem_get_observation")] == [{"id": 62}]
    whole = _engram_output(codex, "mem_get_observation", {"id": 62})
    assert o200k(search.text) + o200k(whole) > 1200
    # The replacement is the call's whole output: a plain string, no "Wall time" header, no
    # "blocked" prefix, not marked as a refusal; within the turn's budget.
    assert isinstance(fetch.item["output"], str) and not fetch.ran, fetch.item
    assert not fetch.raw.startswith(("Tool call blocked", "Wall time")), fetch.raw
    assert NOTE in fetch.raw and "Note 20 on sqlite storage" not in fetch.raw, fetch.raw
    assert o200k(search.text) + o200k(fetch.raw) <= 1200


def test_context_dump_is_trimmed_to_whole_entries(codex):
    import engram_mcp

    run = codex.run("give me all context", main=[tool_uses(engram("mem_context")), text("OK.")])
    [result] = run.results_of("mem_context")
    assert not result.ran and result.raw.startswith("## Memory from Previous Sessions"), result.raw
    assert o200k(result.raw) <= 1200 and NOTE in result.raw
    assert o200k(_engram_output(codex, "mem_context", {})) > 1200
    entries = [e for _, section in engram_mcp.context_sections(engram_mcp.Store(str(codex.seed))) for e in section]
    kept = [e for e in entries if e in result.raw]
    assert 0 < len(kept) < len(entries)
    held = re.search(r"(\d+) of (\d+) entries held back", result.raw)
    assert held and (int(held.group(1)), int(held.group(2))) == (len(entries) - len(kept), len(entries)), result.raw


# -- mem_context: locked; unlocked by a recall prompt, a compaction, a resume after a break --


def _context_twice() -> list:
    return [tool_uses(engram("mem_context", project="myapp")), tool_uses(engram("mem_context", project="myapp")),
            text("Recovered.")]  # fmt: skip


def _assert_allowed_once(run) -> None:
    first, second = run.results_of("mem_context")
    assert first.raw.startswith("## Memory from Previous Sessions"), first.raw
    assert denied(second, "is off outside post-compaction recovery"), second.raw


def test_mem_context_allowed_once_after_recall_prompt(codex):
    run = codex.run("recordar todo lo que sabes del proyecto", main=_context_twice())
    _assert_allowed_once(run)
    # The UserPromptSubmit answer's additionalContext reached the model as a developer message.
    assert "explicit recall requested; mem_context is allowed once this turn" in run.lane()[0].all_text()


def test_mem_context_locked_then_allowed_once_after_a_compaction(codex):
    codex.model.total_tokens = 50_000  # past model_auto_compact_token_limit: Codex compacts before the next turn
    first = codex.run("Continue with the auth work where we left off.",
                      main=[tool_uses(engram("mem_context", project="myapp")), text("Continuing without it.")])  # fmt: skip
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.raw
    codex.model.total_tokens = 15
    after = codex.run("Where were we?", resume=first.session_id, main=_context_twice())
    assert after.requests[0].lane == "compact", after.requests
    _assert_allowed_once(after)
    assert len(codex.calls("mem_context")) == 1


def test_a_resume_right_away_does_not_unlock_mem_context(codex):
    first = codex.run("Where were we on the search endpoint?",
                      main=[tool_uses(engram("mem_search", query="search")), text("OK.")])  # fmt: skip
    again = codex.run("Pick up where we left off.", resume=first.session_id,
                      main=[tool_uses(engram("mem_context")), text("OK.")])  # fmt: skip
    [locked] = again.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.raw


def test_mem_context_allowed_once_after_resume(codex):
    codex.team_policy(
        "version: 1\nmem_context:\n  unlocked_by:\n    session_resume: {scope: next_turn, uses: 1, min_idle_minutes: 0}\n"
    )
    first = codex.run("Where were we on the search endpoint?", main=[tool_uses(engram("mem_context")), text("OK.")])
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.raw
    resumed = codex.run("Pick up where we left off.", resume=first.session_id, main=_context_twice())
    _assert_allowed_once(resumed)


# -- save discipline ------------------------------------------------------------------------


def test_save_discipline(codex):
    transcript = ("User: why does search crash on E-1021?\nAssistant: FTS5 reads the hyphen as an operator.\n"
                  "User: fix it\nAssistant: I quoted each term before MATCH.")  # fmt: skip
    good = {"title": "Quote FTS5 terms before MATCH", "type": "decision", "project": "myapp",
            "content": "**What**: every search term is quoted before MATCH\n**Why**: hyphens crashed FTS5\n"
                       "**Where**: internal/store/search.go"}  # fmt: skip
    run = codex.run("Save what we learned today.", main=[
        tool_uses(engram("mem_save", title="Search crash notes", content="**What**: quoted FTS5 terms", type="manual")),
        tool_uses(engram("mem_save", title="Search crash notes again", content="**What**: quoted FTS5 terms")),
        tool_uses(engram("mem_save", title="Search crash conversation", content=transcript, type="bugfix")),
        tool_uses(engram("mem_save", **good)),
        text("Saved."),
    ])  # fmt: skip
    manual, untyped, pasted, saved = run.results_of("mem_save")
    assert denied(manual, "'manual'", ALLOWED_TYPES), manual.raw
    assert denied(untyped, "'manual'", ALLOWED_TYPES), untyped.raw
    assert denied(pasted, "raw transcript"), pasted.raw
    assert saved.ran and saved.text.startswith('Memory saved: "Quote FTS5 terms before MATCH" (decision)'), saved.raw
    assert [c["arguments"]["title"] for c in codex.calls("mem_save")] == ["Quote FTS5 terms before MATCH"]


# -- subagents: tiers by role, and one turn budget for the user's turn ----------------------


def _spawn(agent_type: str, message: str) -> Reply:
    return tool_uses(call(SPAWN, {"agent_type": agent_type, "message": message}))


def _wait_for_spawned(request: Request) -> Reply:
    [spawned] = [r for r in request.tool_results() if r.name == SPAWN]
    agent_id = json.loads(spawned.text)["agent_id"]
    return tool_uses(call(WAIT, {"targets": [agent_id], "timeout_ms": 60000}))


def test_save_only_subagent_cannot_search_but_can_save(codex):
    marker = "LANE-VALIDATOR"
    codex.agent("validator", f"You are the validator. Check the change and record bugs. {marker}")
    save = {"title": "Refresh ran twice on slow networks", "type": "bugfix", "project": "myapp",
            "content": "**What**: a retry re-sent the refresh\n**Why**: no idempotency key\n**Where**: src/auth/refresh.ts"}  # fmt: skip
    run = codex.run("Validate the refresh-token change with the validator agent.",
                    main=[_spawn("validator", f"Validate the refresh-token change in src/auth/refresh.ts. {marker}"),
                          _wait_for_spawned, text("The validator recorded the bug.")],
                    lanes={marker: [tool_uses(engram("mem_search", query="token refresh", limit=3)),
                                    tool_uses(engram("mem_save", **save)),
                                    text("Validation done; one bug saved.")]})  # fmt: skip
    assert run.lane(marker), "the subagent never talked to the model"
    [search] = run.results_of("mem_search", lane=marker)
    assert denied(search, "save-only", "validator"), search.raw
    [saved] = run.results_of("mem_save", lane=marker)
    assert saved.ran and saved.text.startswith('Memory saved: "Refresh ran twice on slow networks" (bugfix)')
    assert codex.calls("mem_search") == [] and len(codex.calls("mem_save")) == 1


def test_search_capable_subagent_shares_the_user_turn_search_budget(codex):
    # Codex gives a subagent a turn id of its own; its calls still count in the user's turn.
    marker = "LANE-RESEARCHER"
    codex.agent("researcher", f"You research project history ({marker}). Engram access tier: search-capable")
    run = codex.run("What did we decide about auth? Ask the researcher agent too.",
                    main=[tool_uses(engram("mem_search", query="auth", limit=3)),
                          _spawn("researcher", f"Find what we decided about search. {marker}"),
                          _wait_for_spawned, text("Combined.")],
                    lanes={marker: [tool_uses(engram("mem_search", query="search", limit=3)),
                                    tool_uses(engram("mem_search", query="fts5", limit=3)),
                                    text("Search decisions found.")]})  # fmt: skip
    [main_search] = run.results_of("mem_search", lane="main")
    allowed, refused = run.results_of("mem_search", lane=marker)
    assert main_search.ran and allowed.ran, run.describe()
    assert denied(refused, "max_search_calls"), refused.raw
    assert [c["arguments"]["query"] for c in codex.calls("mem_search")] == ["auth", "search"]


def test_a_prompt_forged_before_a_spawn_gives_the_subagent_no_budget_of_its_own(codex):
    """The model runs the hook command itself (exec_command, Codex's sandbox off) with a prompt and a
    turn id it made up, which makes that turn current; then it spawns a researcher. The spawn's
    PreToolUse carries the user's turn id and comes before the researcher's first event: the
    researcher counts in the user's turn, 2 searches with the main agent's, not 2 of its own."""
    marker = "LANE-AFTER-FORGERY"
    codex.agent("researcher", f"You research project history ({marker}). Engram access tier: search-capable")
    codex.install()
    config = codex.codex_home / "config.toml"
    config.write_text(config.read_text().replace('sandbox_mode = "read-only"', 'sandbox_mode = "danger-full-access"'))
    [group] = json.loads((codex.project / ".codex" / "hooks.json").read_text())["hooks"]["UserPromptSubmit"]
    (codex.project / "forge.sh").write_text(group["hooks"][0]["command"] + "\n")  # the installed hook, as Codex runs it
    governor = shutil.which("memory-governor", path=GOVERNOR_PATH)

    def forge(request: Request) -> Reply:
        ledger = open_ledger(str(codex.state))
        with ledger.read():
            session = ledger.latest_session() or ""
        ledger.close()
        forged = {"session_id": session.removeprefix("s:"), "turn_id": "01a20000-0000-7000-8000-00000000f00d",
                  "hook_event_name": "UserPromptSubmit", "prompt": "What did we decide about auth?",
                  "cwd": str(codex.project), "transcript_path": None, "model": "gpt-5.1-codex",
                  "permission_mode": "bypassPermissions"}  # fmt: skip
        (codex.project / "forged.json").write_text(json.dumps(forged))
        return tool_uses(call("exec_command", {"cmd": f"MEMORY_GOVERNOR={governor} sh forge.sh < forged.json"}))

    run = codex.run("What did we decide about auth? Ask the researcher agent too.",
                    main=[tool_uses(engram("mem_search", query="auth", limit=3)), forge,
                          _spawn("researcher", f"Find what we decided about search. {marker}"),
                          _wait_for_spawned, text("Combined.")],
                    lanes={marker: [tool_uses(engram("mem_search", query="search", limit=3)),
                                    tool_uses(engram("mem_search", query="fts5", limit=3)),
                                    text("Search decisions found.")]})  # fmt: skip
    [shell] = [r for r in run.results(prefix="") if r.name == "exec_command"]
    assert "memory_need=" in shell.raw, f"the forged prompt was not decided: {shell.raw}"
    [main_search] = run.results_of("mem_search", lane="main")
    allowed, refused = run.results_of("mem_search", lane=marker)
    assert main_search.ran and allowed.ran, run.describe()
    assert denied(refused, "max_search_calls"), refused.raw
    assert [c["arguments"]["query"] for c in codex.calls("mem_search")] == ["auth", "search"]


# -- the budget resets each turn; replay reads Codex's session log ------------------------


def test_fresh_search_budget_next_turn_and_replay_of_the_rollout(codex):
    first = codex.run("What did we decide about auth and search?", main=[
        tool_uses(engram("mem_search", query="auth", limit=3), engram("mem_search", query="search", limit=3)),
        tool_uses(engram("mem_search", query="tokens", limit=3)),
        text("Two searches were enough."),
    ])  # fmt: skip
    one, two, three = first.results_of("mem_search")
    assert one.ran and two.ran and denied(three, "max_search_calls"), first.describe()
    second = codex.run("What did we decide about the repository layer?", resume=first.session_id,
                       main=[tool_uses(engram("mem_search", query="repository", limit=3)), text("Found it.")])  # fmt: skip
    [again] = second.results_of("mem_search")
    assert again.ran and again.text.startswith("Found "), again.raw
    assert len(codex.calls("mem_search")) == 3
    # Replay reads the rollout Codex wrote: the same two turns, the same one denial.
    [rollout] = [p for p in codex.rollouts() if first.session_id in p.name]
    replayed = codex.governor("replay", str(rollout), "--format", "json")
    report = json.loads(replayed.stdout)
    assert [(t["calls"], t["denied"]) for t in report["turns"]] == [(3, 1), (1, 0)], replayed.stdout
