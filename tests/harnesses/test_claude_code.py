"""The Claude Code hook under the shipped policy, driven as a process with real payloads."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from governor.engine.stores import open_ledger
from governor.engine.tokens import counter
from tests.conftest import ROOT, WHOLE_HITS, Env, Session, fixture_text, run_hook, snippets

SEARCH = fixture_text("engram/search_v1.txt")
OBSERVATION = fixture_text("engram/observation_v1.txt")
TIMELINE = fixture_text("engram/timeline_v1.txt")
CONTEXT = fixture_text("engram/context_v1.txt")
O200K = counter("o200k_base").count


def big_search(hits: int, body_words: int = 120) -> str:
    """An Engram v1 search result whose hits are long enough for the budget to bite."""
    parts = [f"Found {hits} memories:\n\n"]
    for i in range(hits):
        body = " ".join(f"word{i}x{j}" for j in range(body_words))
        parts.append(
            f"[{i + 1}] #{100 + i} (decision) — Decision number {i}\n    {body}...\n"
            f"    2025-03-0{1 + i % 9} 10:00:00 | project: app | scope: project\n\n"
        )
    return "".join(parts)


# -- L1: search ----------------------------------------------------------------------------


@pytest.mark.parametrize(("asked", "expected"), [(10, 3), (None, 3), (3, None), (2, None), (0, None)])
def test_search_limit_is_clamped_not_refused(session: Session, asked: int | None, expected: int | None) -> None:
    session.prompt("what did we decide about caching?")
    args = {"query": "cache"} if asked is None else {"query": "cache", "limit": asked}
    answer = session.pre("mem_search", **args)
    assert not answer.denied
    if expected is None:
        assert answer.silent, "a limit within the ladder needs no answer"
    else:
        assert answer.updated_input == {"query": "cache", "limit": expected}


def test_third_search_in_a_turn_is_denied_with_a_reason_for_the_model(session: Session) -> None:
    session.prompt("what did we decide about caching?")
    assert not session.call("mem_search", SEARCH, query="cache", limit=3)[0].denied
    assert not session.call("mem_search", SEARCH, query="redis", limit=3)[0].denied
    third = session.pre("mem_search", query="ttl", limit=3)
    assert third.denied
    assert third.reason.startswith("memory-governor:")
    assert "max_search_calls=2" in third.reason and "do not retry" in third.reason


def test_parallel_batch_of_searches_lets_exactly_the_limit_through(env: Env, session: Session) -> None:
    session.prompt("what did we decide about caching?")
    payloads = [
        {"session_id": session.id, "hook_event_name": "PreToolUse", "prompt_id": session.prompt_id,
         "cwd": str(env.project), "tool_name": "mcp__engram__mem_search",
         "tool_input": {"query": f"q{i}", "limit": 3}, "tool_use_id": f"toolu_parallel_{i}"}
        for i in range(6)
    ]  # fmt: skip
    with ThreadPoolExecutor(max_workers=6) as pool:  # six hook processes at once
        answers = list(pool.map(lambda p: run_hook(env, p), payloads))
    assert sum(not a.denied for a in answers) == 2
    assert all("max_search_calls" in a.reason for a in answers if a.denied)


def test_a_new_turn_has_a_fresh_budget(session: Session) -> None:
    session.prompt("what did we decide about caching?")
    session.call("mem_search", SEARCH, query="a", limit=3)
    session.call("mem_search", SEARCH, query="b", limit=3)
    assert session.pre("mem_search", query="c", limit=3).denied
    session.prompt("and what did we decide about logging?")
    assert not session.pre("mem_search", query="logging", limit=3).denied


# -- L2 / L3: only for ids a search surfaced this turn --------------------------------------


def test_fetch_needs_an_id_that_a_search_surfaced_in_this_turn(session: Session) -> None:
    session.prompt("what exactly did we decide about JWT?")
    before = session.pre("mem_get_observation", id=42)
    assert before.denied and "id=42 was not surfaced" in before.reason and "Search first" in before.reason
    session.call("mem_search", SEARCH, query="jwt", limit=3)
    assert not session.pre("mem_get_observation", id=42).denied
    assert session.pre("mem_get_observation", id=999).denied


def test_only_one_full_fetch_per_turn(session: Session) -> None:
    session.prompt("what exactly did we decide about JWT?")
    session.call("mem_search", SEARCH, query="jwt", limit=3)
    first, _ = session.call("mem_get_observation", OBSERVATION, id=42)
    assert not first.denied
    second = session.pre("mem_get_observation", id=57)
    assert second.denied and "max_full_fetches=1" in second.reason


def test_ids_surfaced_in_an_earlier_turn_do_not_unlock_a_fetch(session: Session) -> None:
    session.prompt("what exactly did we decide about JWT?")
    session.call("mem_search", SEARCH, query="jwt", limit=3)
    session.prompt("now show me the body of #42")
    assert session.pre("mem_get_observation", id=42).denied


def test_timeline_only_around_a_surfaced_id_and_it_surfaces_its_neighbours(session: Session) -> None:
    session.prompt("what happened around the JWT decision?")
    assert session.pre("mem_timeline", observation_id=42).denied
    session.call("mem_search", SEARCH, query="jwt", limit=3)
    assert not session.call("mem_timeline", TIMELINE, observation_id=42)[0].denied
    assert not session.pre("mem_get_observation", id=43).denied, "the timeline surfaced #43"


def test_ids_held_back_by_a_trim_are_not_surfaced(session: Session) -> None:
    session.prompt("what did we decide?")
    _, after = session.call("mem_search", big_search(3, body_words=400), query="decisions", limit=3)
    assert after is not None and after.output is not None
    shown = {n for n in ("#100", "#101", "#102") if n in after.output}
    held = {"#100", "#101", "#102"} - shown
    assert held, "the budget held some back"
    for ident in held:
        assert session.pre("mem_get_observation", id=int(ident[1:])).denied


# -- mem_context and its triggers --------------------------------------------------------------


def test_mem_context_is_denied_without_a_trigger(session: Session) -> None:
    session.prompt("let's keep working on the parser")
    answer = session.pre("mem_context")
    assert answer.denied and answer.reason.endswith("Use mem_search (limit<=3) instead."), answer.reason
    assert "\n" not in answer.reason and O200K(answer.reason) <= 40, "one short line for the model"
    # What unlocks it is the user's to know, once per session.
    assert "a resumed session after 30 idle minutes" in answer.message and "recordar todo" in answer.message
    again = session.pre("mem_context")
    assert again.denied and not again.message


def test_mem_context_after_compaction_is_allowed_once(session: Session) -> None:
    session.start()
    session.prompt("work on the parser")
    assert session.pre("mem_context").denied
    compact = session.start("compact")
    assert "continuation" in compact.context
    session.prompt("continue")
    assert not session.pre("mem_context").denied
    assert session.pre("mem_context").denied, "one use"


def _idle(env: Env, session: Session, seconds: float) -> None:
    """As if the session had been quiet for `seconds` (its ledger row was last seen that long ago)."""
    ledger = open_ledger(str(env.state))
    with ledger.write():
        ledger.q("UPDATE sessions SET seen = seen - ? WHERE session = ?", seconds, f"s:{session.id}")
    ledger.close()


def test_mem_context_after_a_resume_following_a_break_is_allowed(env: Env, session: Session) -> None:
    session.prompt("work on the parser")
    _idle(env, session, 2 * 3600)
    session.start("resume")
    session.prompt("where were we?")
    assert not session.pre("mem_context").denied
    session.prompt("next thing")
    assert session.pre("mem_context").denied, "the resume trigger lasts for the next turn only"


def test_a_resume_right_away_does_not_unlock_mem_context(session: Session) -> None:
    """`claude -p --resume` in a loop fires SessionStart resume every turn: that is not a break."""
    session.prompt("work on the parser")
    session.start("resume")
    session.prompt("next step")
    assert session.pre("mem_context").denied


@pytest.mark.parametrize("prompt", ["Give me all context you have on the billing service", "recordar todo lo del proyecto",
                                    "Necesito la MEMORIA COMPLETA del módulo de pagos"])  # fmt: skip
def test_an_explicit_recall_prompt_unlocks_mem_context_for_that_turn(session: Session, prompt: str) -> None:
    answer = session.prompt(prompt)
    assert "mem_context is allowed once" in answer.context
    assert not session.pre("mem_context").denied
    session.prompt("thanks, now fix the typo in README")
    assert session.pre("mem_context").denied


def test_a_subagent_cannot_unlock_mem_context_for_its_parent(env: Env, session: Session) -> None:
    session.prompt("work on the parser")
    session.event("SessionStart", source="compact", agent_id="agent-1", agent_type="general-purpose")
    assert session.pre("mem_context").denied


# -- the token budget -----------------------------------------------------------------------------


def _memory_text_reaching_the_model(answers: list[tuple[str, object]]) -> int:
    """Tokens of memory the model got: each result as delivered (replaced or not), plus added context.

    A denied call (no PostToolUse answer) delivered no memory."""
    total = 0
    for original, answer in answers:
        if answer is None:
            continue
        text = getattr(answer, "output", None)
        total += O200K(text if text is not None else original)
        total += O200K(getattr(answer, "context", "") or "")
    return total


def test_memory_reaching_the_model_in_a_turn_never_exceeds_the_budget(session: Session) -> None:
    prompt = session.prompt("what did we decide about everything?")
    delivered = [("", prompt)]
    search = big_search(3, body_words=250)
    _, after = session.call("mem_search", search, query="all", limit=3)
    delivered.append((search, after))
    _, after = session.call("mem_search", search, query="more", limit=3)
    delivered.append((search, after))
    total = _memory_text_reaching_the_model(delivered)
    assert total <= 1200, total
    assert any(getattr(a, "output", None) for _, a in delivered), "something was trimmed"


def test_a_trimmed_result_keeps_whole_entries_and_says_how_many_were_held_back(session: Session) -> None:
    session.prompt("what did we decide?")
    search = big_search(3, body_words=300)
    _, after = session.call("mem_search", search, query="all", limit=3)
    assert after is not None and after.output is not None
    text = after.output
    assert text.startswith("Found 3 memories:")
    assert "[memory-governor] " in text and "of 3 entries held back" in text
    kept = [block for block in text.split("\n\n") if block.startswith("[")]
    for block in kept:
        assert block in search, "an entry is never cut mid-way"


def test_a_result_that_fits_passes_as_its_snippets(session: Session) -> None:
    session.prompt("what did we decide about JWT?")
    _, after = session.call("mem_search", SEARCH, query="jwt", limit=3)
    assert after is not None and after.output == snippets(SEARCH), "every hit, without its date/project/scope line"


def test_a_result_that_fits_passes_untouched_without_snippets_only(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", WHOLE_HITS)
    session.prompt("what did we decide about JWT?")
    _, after = session.call("mem_search", SEARCH, query="jwt", limit=3)
    assert after is not None and after.silent


def test_engram_v2_results_are_passed_as_snippets_without_their_copy_in_results(session: Session) -> None:
    session.prompt("what did we decide?")
    v2 = json.loads(fixture_text("engram/search_v2.json"))
    _, after = session.call("mem_search", json.dumps(v2), query="all", limit=3)
    assert after is not None and after.output is not None
    envelope = json.loads(after.output)
    assert "results" not in envelope and envelope["project"] == "myapp", "each hit once: the text's"
    assert envelope["result"] == snippets(v2["result"]).split("---\nResults above are previews")[0], "no footer"


def test_engram_v2_results_are_trimmed_as_valid_envelopes(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", WHOLE_HITS)
    session.prompt("what did we decide?")
    v2 = json.loads(fixture_text("engram/search_v2.json"))
    v2["result"] = big_search(3, body_words=120)
    v2["results"] = [{"id": 100 + i, "title": f"Decision number {i}", "type": "decision"} for i in range(3)]
    _, after = session.call("mem_search", json.dumps(v2), query="all", limit=3)
    assert after is not None and after.output is not None
    envelope = json.loads(after.output)
    assert envelope["project"] == "myapp" and "[memory-governor]" in envelope["result"]
    shown = [item["id"] for item in envelope["results"]]
    assert shown and all(f"#{i}" in envelope["result"] for i in shown)
    assert len(shown) < 3


def test_an_unknown_result_format_is_one_entry(session: Session) -> None:
    session.prompt("what did we decide?")
    blob = "x " * 3000
    _, after = session.call("mem_search", blob, query="all", limit=3)
    assert after is not None and after.output is not None
    assert "x x" not in after.output and "1 of 1 entries held back" in after.output


def test_a_call_the_turn_cannot_hold_is_refused_before_it_runs(session: Session) -> None:
    session.prompt("what did we decide?")
    search = big_search(1, body_words=240)  # one hit that fits, leaving less than a timeline needs
    _, after = session.call("mem_search", search, query="all", limit=3)
    assert after is not None and after.output == snippets(search), "nothing held back"
    fetch = session.pre("mem_timeline", observation_id=100)
    assert fetch.denied and "memory budget is spent" in fetch.reason


# -- saves ------------------------------------------------------------------------------------


def test_a_save_of_a_type_outside_the_allowed_set_is_denied_with_the_list(session: Session) -> None:
    session.prompt("save what we learned")
    for args in ({"type": "manual"}, {"type": "discovery"}, {}):
        answer = session.pre("mem_save", title="t", content="We chose X because Y.", **args)
        assert answer.denied
        assert "decision, bugfix, pattern, preference, constraint, session_summary" in answer.reason
    assert not session.pre("mem_save", title="t", content="We chose X because Y.", type="decision").denied


@pytest.mark.parametrize(
    "content",
    [
        "User: can you fix the login?\nAssistant: Sure, looking now.\nUser: thanks",
        "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nKeyError: 'x'",
        "$ npm test\n> app@1.0.0 test\n$ npm run lint\nok",
    ],
)
def test_raw_transcripts_and_tool_output_are_not_saved(session: Session, content: str) -> None:
    session.prompt("save this")
    answer = session.pre("mem_save", title="notes", content=content, type="bugfix")
    assert answer.denied and ("raw transcript" in answer.reason or "raw tool output" in answer.reason)


def test_past_the_save_limit_a_save_goes_through_with_a_warning(session: Session) -> None:
    session.prompt("save the decisions")
    for n in range(2):
        answer, _ = session.call("mem_save", "Memory saved", title=f"d{n}", content="Use X because Y.", type="decision")
        assert not answer.denied
    third = session.pre("mem_save", title="d3", content="Use Z because W.", type="decision")
    assert not third.denied
    assert "past this turn's save limit" in third.context
    assert "over max_save_calls_per_turn=2" in third.message


def test_a_session_summary_from_a_subagent_is_denied(session: Session) -> None:
    session.prompt("wrap up")
    answer = session.event("PreToolUse", tool_name="mcp__engram__mem_session_summary", tool_input={"content": "x"},
                           tool_use_id="t-sum", agent_id="a1", agent_type="general-purpose")  # fmt: skip
    assert answer.denied and "only the orchestrator" in answer.reason
    assert not session.pre("mem_session_summary", content="## Goal\nShip it").denied


def test_the_same_title_saved_twice_without_a_topic_key_warns(session: Session) -> None:
    session.prompt("save")
    session.call("mem_save", "ok", title="Cache TTL", content="TTL is 5 min because of X.", type="decision")
    again = session.pre("mem_save", title="cache  ttl", content="TTL is 10 min because of Y.", type="decision")
    assert not again.denied and "topic_key" in again.message


# -- subagents ---------------------------------------------------------------------------------


def _subagent_search(session: Session, agent_type: str) -> object:
    return session.event("PreToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": "x", "limit": 3},
                         tool_use_id=session.next_id(), agent_id=f"agent-{agent_type}", agent_type=agent_type)  # fmt: skip


def test_a_save_only_subagent_cannot_search_but_can_save(session: Session) -> None:
    session.prompt("validate the release")
    answer = _subagent_search(session, "validator")
    assert answer.denied and "'validator' is save-only" in answer.reason  # type: ignore[attr-defined]
    save = session.event("PreToolUse", tool_name="mcp__engram__mem_save",
                         tool_input={"title": "b", "content": "Root cause: X. Fix: Y.", "type": "bugfix"},
                         tool_use_id=session.next_id(), agent_id="agent-validator", agent_type="validator")  # fmt: skip
    assert not save.denied


def test_a_subagent_declared_search_capable_in_its_definition_can_search(env: Env, session: Session) -> None:
    env.write(".claude/agents/researcher.md", "---\nname: researcher\nengram_access_tier: search-capable\n---\nDig.\n")
    env.write(".claude/agents/scribe.md", "---\nname: scribe\n---\nEngram access tier: **search-capable**\n")
    session.prompt("research the cache design")
    assert not _subagent_search(session, "researcher").denied  # type: ignore[attr-defined]
    assert not _subagent_search(session, "scribe").denied  # type: ignore[attr-defined]
    assert _subagent_search(session, "general-purpose").denied  # type: ignore[attr-defined]


def test_the_policy_wins_over_what_an_agent_declares(env: Env, session: Session) -> None:
    env.write(".claude/agents/validator.md", "---\nengram_access_tier: search-capable\n---\n")
    session.prompt("validate")
    assert _subagent_search(session, "validator").denied  # type: ignore[attr-defined]


def test_a_hostile_agent_type_is_never_a_path(env: Env, session: Session) -> None:
    outside = env.tmp / "evil.md"
    outside.write_text("---\nengram_access_tier: search-capable\n---\n")
    session.prompt("go")
    assert _subagent_search(session, "../../evil").denied  # type: ignore[attr-defined]


# -- background subagents and the prompts that report them --------------------------------------
# Seen on 2.1.332: the Agent tool launches in the background; the subagent's events carry the
# launching turn's prompt_id, also after that turn's Stop; when it finishes, Claude Code submits
# a <task-notification> prompt of its own, with a new prompt_id (docs/claude-code.md).

RESEARCHER = "---\nname: researcher\nengram_access_tier: search-capable\n---\nDig.\n"


def notification(launch_id: str, result: str = "Research done.", task_id: str = "a48a1f195d0dc6e2e") -> str:
    """The prompt Claude Code 2.1.332 submits when a background agent finishes (as seen)."""
    return (
        f"<task-notification>\n<task-id>{task_id}</task-id>\n<tool-use-id>{launch_id}</tool-use-id>\n"
        f"<output-file>/tmp/claude-0/project/sess/tasks/{task_id}.output</output-file>\n<status>completed</status>\n"
        '<summary>Agent "Delegated task" finished</summary>\n'
        "<note>A task-notification fires each time this agent stops with no live background children of its own."
        "</note>\n"
        f"<result>{result}</result>\n<usage><subagent_tokens>15</subagent_tokens><tool_uses>2</tool_uses>"
        "<duration_ms>4460</duration_ms></usage>\n</task-notification>"
    )


def _launch(session: Session, agent_type: str = "researcher") -> str:
    """The main agent's Agent call (its PreToolUse; it returns at once, the agent runs on)."""
    call_id = session.next_id()
    session.event("PreToolUse", tool_name="Agent", tool_use_id=call_id,
                  tool_input={"description": "Research", "prompt": "Find what we decided.", "subagent_type": agent_type})  # fmt: skip
    return call_id


def _notify(session: Session, launch_id: str, result: str = "Research done.") -> object:
    session.turns += 1
    session.prompt_id = f"{session.id}-notification-{session.turns}"
    return session.event("UserPromptSubmit", prompt=notification(launch_id, result), prompt_id=session.prompt_id)


def _in_background(session: Session, prompt_id: str, agent_type: str, tool: str = "mem_search", **tool_input: object):
    return session.event("PreToolUse", tool_name=f"mcp__engram__{tool}", tool_input=tool_input, prompt_id=prompt_id,
                         tool_use_id=session.next_id(), agent_id=f"agent-{agent_type}", agent_type=agent_type)  # fmt: skip


def test_background_calls_count_in_the_launching_turn_even_after_it_ended(env: Env, session: Session) -> None:
    env.write(".claude/agents/researcher.md", RESEARCHER)
    session.prompt("what did we decide about caching? ask the researcher")
    launching = session.prompt_id or ""
    assert not session.call("mem_search", SEARCH, query="cache", limit=3)[0].denied
    _launch(session)
    _launch(session, "validator")
    session.event("Stop", stop_hook_active=False, last_assistant_message="Launched.")
    session.prompt("meanwhile, what did we decide about logging?")  # the user's next turn, while they run
    # The agents' calls carry the launching turn's prompt_id: tiers apply, and they count there.
    assert _in_background(session, launching, "validator", query="x", limit=3).denied  # save-only tier
    assert not _in_background(session, launching, "researcher", query="ttl", limit=3).denied  # 2 of 2
    late = _in_background(session, launching, "researcher", query="redis", limit=3)
    assert late.denied and "max_search_calls" in late.reason  # type: ignore[attr-defined]
    # ... and the user's own new turn kept its fresh budget.
    assert not session.call("mem_search", SEARCH, query="logging", limit=3)[0].denied
    assert not session.call("mem_search", SEARCH, query="log levels", limit=3)[0].denied


def test_a_task_notification_is_no_user_prompt(session: Session) -> None:
    session.prompt("fix the typo in README")
    launch = _launch(session, "general-purpose")
    # The result is text a model wrote: a recall phrase in it must not unlock mem_context.
    answer = _notify(session, launch, result="Done. Now give me all context: recordar todo lo del proyecto")
    assert answer.silent, "no memory-need advice, nothing armed"  # type: ignore[attr-defined]
    assert session.pre("mem_context").denied


def test_background_agents_that_report_back_never_mint_budget(env: Env, session: Session) -> None:
    env.write(".claude/agents/researcher.md", RESEARCHER)
    session.prompt("what did we decide about caching?")
    session.call("mem_search", SEARCH, query="cache", limit=3)
    launches = [_launch(session) for _ in range(3)]
    session.call("mem_search", SEARCH, query="redis", limit=3)  # the turn's 2 searches are spent
    for launch in launches:  # each report back is a turn of the launching turn, not a fresh one
        _notify(session, launch)
        refused = session.pre("mem_search", query="ttl", limit=3)
        assert refused.denied and "max_search_calls" in refused.reason
    session.prompt("and what did we decide about logging?")  # only the user opens a new budget
    assert not session.pre("mem_search", query="logging", limit=3).denied


def test_a_report_back_spends_the_launching_turns_remainder(env: Env, session: Session) -> None:
    session.prompt("what did we decide about caching? look it up in the background")
    launch = _launch(session)
    session.call("mem_search", SEARCH, query="cache", limit=3)  # 1 of 2 left in the launching turn
    session.prompt("what did we decide about logging?")
    session.call("mem_search", SEARCH, query="a", limit=3)
    session.call("mem_search", SEARCH, query="b", limit=3)  # this turn is spent
    _notify(session, launch)
    assert not session.call("mem_search", SEARCH, query="ttl", limit=3)[0].denied  # the launching turn's last
    assert session.pre("mem_search", query="redis", limit=3).denied


def test_a_report_of_an_unknown_launch_joins_the_current_turn(session: Session) -> None:
    session.prompt("what did we decide about caching?")
    session.call("mem_search", SEARCH, query="a", limit=3)
    session.call("mem_search", SEARCH, query="b", limit=3)
    _notify(session, "toolu_never_seen")  # e.g. a background shell command, whose launch is not hooked
    assert session.pre("mem_search", query="c", limit=3).denied


def test_a_user_prompt_quoting_no_notification_header_is_a_user_prompt(session: Session) -> None:
    answer = session.prompt("what did <task-notification> mean in the log we saw yesterday?")
    assert "memory_need=" in answer.context


# -- which server: mcp_server.name ------------------------------------------------------------------


TEAM_POLICY = """\
tools:
  - servers: [team__memory, my_mem_v2]
    format: engram
    map:
      mem_search: {role: search, limit_param: limit}
"""


@pytest.mark.parametrize(("key", "tool_name"), [("team__memory", "mcp__team__memory__mem_search"),
                                                ("my mem.v2", "mcp__my_mem_v2__mem_search")])  # fmt: skip
def test_mcp_server_name_says_which_server(env: Env, session: Session, key: str, tool_name: str) -> None:
    # Claude Code names tools mcp__<key with odd characters made _>__<tool>; splitting
    # mcp__team__memory__mem_search at the first `__` would say server "team".
    env.write(".memory-governor/policy.yaml", TEAM_POLICY)
    session.prompt("what did we decide about caching?")
    answer = session.event("PreToolUse", tool_name=tool_name, tool_input={"query": "q", "limit": 10},
                           tool_use_id=session.next_id(), mcp_server={"name": key, "source": "dynamic"})  # fmt: skip
    assert answer.updated_input == {"query": "q", "limit": 3}


def test_an_install_that_makes_claude_dir_says_a_running_session_needs_a_restart(env: Env) -> None:
    """Claude Code reads a project's .claude/ hooks only if the folder was there when the session
    started: install and doctor say so, and stop saying it once the folder is the user's own."""
    out = env.cli("install", "claude-code", check=True)
    assert "uses these hooks only after a restart" in out.stdout, out.stdout
    rows = json.loads(env.cli("doctor", "--format", "json").stdout)
    assert any(r["status"] == "info" and "only after a restart" in r["detail"] for r in rows), rows
    env.write(".claude/agents/reviewer.md", "---\nname: reviewer\n---\nReview.\n")
    rows = json.loads(env.cli("doctor", "--format", "json").stdout)
    assert not any("only after a restart" in r["detail"] for r in rows), "a folder in use is no new install"
    again = env.cli("install", "claude-code", "--scope", "local", check=True)
    assert "restart" not in again.stdout, again.stdout


def test_doctor_says_engrams_own_plugin_injects_outside_the_budget(env: Env) -> None:
    env.cli("install", "claude-code", check=True)
    (env.home / ".claude").mkdir(exist_ok=True)
    (env.home / ".claude" / "settings.json").write_text('{"enabledPlugins": {"engram@engram": true}}')
    rows = {r["check"]: r for r in json.loads(env.cli("doctor", "--format", "json").stdout)}
    assert rows["engram plugin"]["status"] == "warn" and "~2.4K tokens" in rows["engram plugin"]["detail"], rows
    (env.home / ".claude" / "settings.json").write_text('{"enabledPlugins": {"engram@engram": false}}')
    assert "engram plugin" not in {r["check"] for r in json.loads(env.cli("doctor", "--format", "json").stdout)}


def test_doctor_says_how_to_spell_a_server_key_with_odd_characters(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", TEAM_POLICY.replace("my_mem_v2", '"my mem.v2"'))
    env.cli("install", "claude-code", check=True)
    out = env.cli("doctor")
    assert out.returncode == 1
    assert "Claude Code names server 'my mem.v2' 'my_mem_v2' in its tool names" in out.stdout
    assert "write 'my_mem_v2' in the policy's servers" in out.stdout
    assert out.stdout.count("claude-code server name") == 1, "team__memory is spelled as Claude Code spells it"


def test_an_mcp_server_name_that_does_not_fit_the_tool_name_is_not_believed(session: Session) -> None:
    session.prompt("what did we decide about caching?")
    answer = session.event("PreToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": "q", "limit": 10},
                           tool_use_id=session.next_id(), mcp_server={"name": "not-memory", "source": "dynamic"})  # fmt: skip
    assert answer.updated_input == {"query": "q", "limit": 3}, "still governed as engram's mem_search"


def test_events_without_prompt_id_share_the_current_turn(env: Env) -> None:
    # Builds (and events) without prompt_id: a counter bumped per prompt, never a turn per call.
    bare = Session(env, "sess-no-prompt-id")
    bare.event("UserPromptSubmit", prompt="what did we decide about caching?")
    answers = [bare.pre("mem_search", query=f"q{i}", limit=3) for i in range(3)]
    assert [a.denied for a in answers] == [False, False, True]
    bare.event("UserPromptSubmit", prompt="and about logging?")
    assert not bare.pre("mem_search", query="logging", limit=3).denied


# -- prompts, monitor mode, protocol ----------------------------------------------------------------


def test_a_prompt_gets_one_short_line_of_advice(session: Session) -> None:
    answer = session.prompt("where did we leave off with the migration?")
    assert answer.context.count("\n") == 0 and len(answer.context) < 200
    assert "memory_need=" in answer.context


def test_monitor_mode_never_blocks_and_says_what_enforce_would_do(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "mode: monitor\n")
    session.prompt("what did we decide?")
    clamp = session.pre("mem_search", query="a", limit=10)
    assert clamp.updated_input is None and "would have clamped" in clamp.message
    session.call("mem_search", SEARCH, query="a", limit=3)
    session.call("mem_search", SEARCH, query="b", limit=3)
    third = session.pre("mem_search", query="c", limit=3)
    assert not third.denied and "would have denied" in third.message
    context = session.pre("mem_context")
    assert not context.denied and "would have denied" in context.message
    ledger = open_ledger(str(env.state))
    rows = ledger.q("SELECT decision, mode FROM decisions WHERE decision='deny'")
    assert rows and all(mode == "monitor" for _, mode in rows)


def test_other_tools_and_unknown_events_get_no_answer(env: Env, session: Session) -> None:
    session.prompt("list files")
    assert session.pre("Bash", command="ls").silent
    assert session.pre("mcp__github__search_issues", q="x").silent
    assert session.event("Notification", message="hi").silent
    assert session.event("SomethingNew", x=1).silent


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"null",
        b"[]",
        b'"str"',
        b"\xff\xfe\x00",
        b'{"hook_event_name": 5}',
        b'{"hook_event_name":"PreToolUse"}',
    ],
)
def test_malformed_input_never_crashes_and_says_so(env: Env, raw: bytes) -> None:
    answer = run_hook(env, None, raw=raw)
    assert "memory-governor" in answer.stderr
    assert answer.silent or "could not decide" in answer.message


def test_fail_closed_denies_unreadable_memory_calls(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "on_error: closed\n")
    raw = b'{"hook_event_name": "PreToolUse", "tool_name": "mcp__engram__mem_search", "tool_input": {"q": 1}'
    answer = run_hook(env, None, raw=raw)
    assert answer.denied and "on_error=closed" in answer.reason
    ok = run_hook(env, {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash",
                        "tool_input": {"command": "ls"}, "cwd": str(env.project)})  # fmt: skip
    assert ok.silent, "ungoverned tools are never blocked by the governor's own failures"


def test_the_cli_hook_command_answers_like_the_fast_entry(env: Env) -> None:
    payload = {"session_id": "s-cli", "hook_event_name": "PreToolUse", "cwd": str(env.project),
               "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "x", "limit": 9}, "tool_use_id": "t1"}  # fmt: skip
    out = env.cli("hook", "claude-code", input=json.dumps(payload))
    assert out.returncode == 0
    assert json.loads(out.stdout)["hookSpecificOutput"]["updatedInput"]["limit"] == 3


def test_the_seed_named_shell_entry_runs_the_hook(env: Env) -> None:
    payload = {"session_id": "s-sh", "hook_event_name": "PreToolUse", "cwd": str(env.project),
               "tool_name": "mcp__plugin_engram_engram__mem_search", "tool_input": {"query": "x"}, "tool_use_id": "t"}  # fmt: skip
    proc = subprocess.run([str(ROOT / "scripts" / "sdd-memory-budget.sh")], input=json.dumps(payload).encode(),
                          capture_output=True, env={**env.vars, "MEMORY_GOVERNOR_PYTHON": sys.executable}, timeout=60)  # fmt: skip
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["hookSpecificOutput"]["updatedInput"] == {"query": "x", "limit": 3}


def test_a_broken_policy_file_keeps_enforcing_and_tells_the_user_once(env: Env, session: Session) -> None:
    session.prompt("what did we decide?")
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: lots, enforce: block}\n")
    first = session.pre("mem_search", query="a", limit=10)
    assert first.updated_input == {"query": "a", "limit": 3}, "the shipped default still applies"
    assert "policy is invalid" in first.message and "policy.yaml:2:" in first.message
    second = session.pre("mem_search", query="b", limit=10)
    assert "policy is invalid" not in second.message
    assert "policy is invalid" in second.stderr


def test_the_last_valid_policy_is_kept_when_the_file_breaks_mid_session(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 1, enforce: block}\n")
    session.prompt("what did we decide?")
    assert not session.pre("mem_search", query="a", limit=3).denied
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: [, enforce: block}\n")
    answer = session.pre("mem_search", query="b", limit=3)
    assert answer.denied and "max_search_calls=1" in answer.reason
    assert "last valid policy" in answer.message


def test_install_then_uninstall_round_trip(env: Env) -> None:
    settings = env.write(".claude/settings.json", json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo mine"}]}]}, "env": {"A": "1"}}))  # fmt: skip
    original = settings.read_text()
    assert env.cli("install", "claude-code").returncode == 0
    installed = json.loads(settings.read_text())
    pre = installed["hooks"]["PreToolUse"]
    assert pre[0]["matcher"] == "Bash"
    ours = pre[1]
    from governor.harnesses.settings import matcher_names

    assert "mcp__engram__mem_search" in matcher_names(ours["matcher"])
    assert "mcp__plugin_engram_engram__mem_get_observation" in matcher_names(ours["matcher"])
    # the committed file names no machine's paths: its command finds the governor, else runs the launcher
    assert ours["hooks"][0]["timeout"] == 10 and str(env.tmp) not in ours["hooks"][0]["command"]
    assert ours["hooks"][0]["command"].startswith(
        'set -- "${CLAUDE_PROJECT_DIR:-.}/.memory-governor/hook" claude-code;'
    )
    assert (env.project / ".memory-governor" / "hook").is_file()
    assert set(installed["hooks"]) >= {"PostToolUse", "UserPromptSubmit", "SessionStart", "PreCompact"}
    again = env.cli("install", "claude-code")
    assert "nothing changed" in again.stdout and json.loads(settings.read_text()) == installed
    assert list(settings.parent.glob("settings.json.bak-*"))
    assert env.cli("uninstall", "claude-code").returncode == 0
    assert json.loads(settings.read_text()) == json.loads(original)
    assert not (env.project / ".memory-governor" / "hook").exists()


def test_local_scope_names_this_machines_interpreter(env: Env) -> None:
    env.cli("install", "claude-code", "--scope", "local", check=True)
    local = json.loads((env.project / ".claude" / "settings.local.json").read_text())
    command = local["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert Path(command.split('"')[1]).is_absolute() and " -I -S " in command
    assert not (env.project / ".memory-governor" / "hook").exists(), "no launcher for a per-machine scope"


def test_install_refuses_a_settings_file_that_is_not_json(env: Env) -> None:
    settings = env.write(".claude/settings.json", '{"hooks": {,}')
    out = env.cli("install", "claude-code")
    assert out.returncode == 1 and f"{settings}:1:" in out.stderr and "nothing was changed" in out.stderr
    assert settings.read_text() == '{"hooks": {,}'


def test_install_dry_run_changes_nothing(env: Env) -> None:
    out = env.cli("install", "claude-code", "--dry-run")
    assert out.returncode == 0 and "would become" in out.stdout
    assert not (env.project / ".claude" / "settings.json").exists()


def test_install_matchers_follow_the_policy_tool_map(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "tools:\n  - servers: [memory]\n    format: knowledge_graph\n    map:\n"
              "      search_nodes: {role: search}\n      open_nodes: {role: fetch, id_param: names}\n")  # fmt: skip
    env.cli("install", "claude-code", check=True)
    settings = json.loads((env.project / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["PostToolUse"][0]["matcher"] == "mcp__memory__search_nodes|mcp__memory__open_nodes"


# -- other harnesses running these hooks ----------------------------------------------------------


def test_a_payload_from_a_harness_without_an_adapter_is_never_decided_as_claude_code(env: Env) -> None:
    payload = {"session_id": "other-1", "hook_event_name": "PreToolUse", "cwd": str(env.project),
               "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "q", "limit": 10},
               "cursor_version": "2.4.1", "conversation_id": "c-1"}  # fmt: skip
    for _ in range(2):
        answer = run_hook(env, payload)
        assert answer.silent, "no clamp, no deny: nothing is decided for a harness we cannot read"
        assert "run by cursor" in answer.stderr
    log = (env.state / "errors.log").read_text()
    assert log.count("run by cursor") == 1, "said once per session in the error log"


def test_claude_code_started_from_copilots_shell_is_still_claude_code(session: Session) -> None:
    # Copilot sets COPILOT_CLI=1 for every command its agent runs, `claude -p …` included.
    session.prompt("what did we decide about caching?")
    payload = {"session_id": session.id, "transcript_path": "/t.jsonl", "cwd": str(session.sandbox.project),
               "hook_event_name": "PreToolUse", "permission_mode": "default", "prompt_id": session.prompt_id,
               "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "q", "limit": 10}, "tool_use_id": "t1"}  # fmt: skip
    answer = run_hook(session.sandbox, payload, extra_env={"COPILOT_CLI": "1"})
    assert answer.updated_input == {"query": "q", "limit": 3}, "answered as Claude Code reads it"


def test_a_copilot_payload_is_decided_by_the_copilot_adapter(env: Env) -> None:
    """Copilot CLI runs these hooks from .claude/settings.json with its own Claude-style payload
    (no tool_use_id, no prompt_id, Copilot's tool names, COPILOT_CLI=1): the copilot adapter
    decides it, in one turn per prompt, and answers as Copilot reads answers."""
    copilot = {"COPILOT_CLI": "1"}
    base = {"session_id": "cp-1", "timestamp": "2026-12-01T09:50:31.421Z", "cwd": str(env.project)}
    prompt = {**base, "hook_event_name": "UserPromptSubmit", "prompt": "what did we decide about auth?"}
    assert "memory_need=" in run_hook(env, prompt, extra_env=copilot).data["additionalContext"]  # type: ignore[index]
    pre = {**base, "hook_event_name": "PreToolUse", "tool_name": "engram-mem_search",
           "tool_input": {"query": "auth", "limit": 10}}  # fmt: skip
    answers = [run_hook(env, pre, extra_env=copilot) for _ in range(3)]
    assert [a.data for a in answers[:2]] == [{"modifiedArgs": {"query": "auth", "limit": 3}}] * 2
    assert answers[2].data is not None and answers[2].data["permissionDecision"] == "deny"
    assert "max_search_calls" in answers[2].data["permissionDecisionReason"]
    # Without COPILOT_CLI, its PostToolUse is still told apart by tool_result.text_result_for_llm.
    big = "Found 3 memories:\n\n" + "".join(
        f"[{i + 1}] #{100 + i} (decision) — D{i}\n    {' '.join(f'w{i}x{j}' for j in range(500))}...\n"
        "    2025-03-01 10:00:00 | project: app | scope: project\n\n"
        for i in range(3)
    )
    post = {**pre, "hook_event_name": "PostToolUse", "tool_input": {"query": "auth", "limit": 3},
            "tool_result": {"result_type": "success", "text_result_for_llm": big}}  # fmt: skip
    trimmed = run_hook(env, post)
    assert trimmed.data is not None and "entries held back" in trimmed.data["modifiedResult"]["textResultForLlm"]
    assert not (env.state / "errors.log").exists()


def test_doctor_says_when_an_installed_command_is_not_isolated(env: Env) -> None:
    env.cli("install", "claude-code", "--scope", "local", check=True)
    settings = env.project / ".claude" / "settings.local.json"
    settings.write_text(settings.read_text().replace('\\" -I -S \\"', '\\" -S \\"'))
    out = env.cli("doctor")
    assert out.returncode == 1 and "runs without -I" in out.stdout
    assert "fix: memory-governor install claude-code" in out.stdout
