"""More evidence per token, through the hook process: a search's slots go to hits the context does not
hold yet, a hit reaches the model as its snippet (Engram v2 asked for its compact form once it has
shown it has one), every refusal or note is one short line, and a team's recall policy shapes L1 by
tokens and serves mem_context outside its triggers cut to what the turn has left."""

from __future__ import annotations

import json
import re

from governor.engine.tokens import counter
from tests.conftest import ROOT, Env, Session, fixture_text

O200K = counter("o200k_base").count
SEARCH = fixture_text("engram/search_v1.txt")  # hits #42, #57, #61
RECALL_POLICY = (ROOT / "docs" / "policies" / "recall.yaml").read_text(encoding="utf-8")


def hit(rank: int, ident: int, words: int = 12) -> str:
    body = " ".join(f"note{ident}w{j}" for j in range(words))
    return f"[{rank}] #{ident} (decision) — Memory {ident}\n    {body}\n    2025-03-01 10:00:00 | project: myapp | scope: project\n\n"


def search_result(ids: list[int], words: int = 12) -> str:
    return f"Found {len(ids)} memories:\n\n" + "".join(hit(rank, i, words) for rank, i in enumerate(ids, start=1))


def shown(result: str) -> list[int]:
    return [int(i) for i in re.findall(r"^\[\d+\] #(\d+) \(", result, re.M)]


def named(result: str) -> list[int]:
    line = re.search(r"(\d+) more already above in this conversation: ([#\d, …]+)\.", result)
    return [int(i) for i in re.findall(r"#(\d+)", line.group(2))] if line else []


# -- a search's slots go to hits not yet delivered ------------------------------------------------


def test_a_second_search_asks_past_the_hits_held_and_passes_only_new_ones(session: Session) -> None:
    session.prompt("what did we decide about caching?")
    _, first = session.call("mem_search", search_result([1, 2, 3]), query="cache", limit=10)
    assert first is not None and shown(first.output or "") == [1, 2, 3]
    before = session.pre("mem_search", "toolu_second", query="cache layer", limit=10)
    assert before.updated_input == {"query": "cache layer", "limit": 6}, "3, and the 3 it may find again"
    after = session.post("mem_search", "toolu_second", search_result([2, 4, 1, 5, 6, 7]), query="cache layer", limit=6)
    assert after.output is not None
    assert shown(after.output) == [4, 5, 6] and named(after.output) == [2, 1], after.output
    assert "note2w0" not in after.output and "note7w0" not in after.output
    # A hit named as held was surfaced by this search: it may be fetched, as one shown.
    assert not session.pre("mem_get_observation", id=2).denied


def used(env: Env, limit: str = "max_memory_tokens_injected") -> int:
    status = env.cli_json("status", "--format", "json")
    return int({item["limit"]: item["used"] for item in status["limits"]}[limit])


def test_a_search_finding_only_what_the_context_holds_costs_its_one_line(env: Env, session: Session) -> None:
    session.prompt("what did we decide about auth?")
    session.call("mem_search", SEARCH, query="auth", limit=3)
    advice = session.prompt("and auth again?").context
    _, again = session.call("mem_search", SEARCH, query="auth", limit=3)
    assert again is not None and again.output == (
        "Found 3 memories:\n[memory-governor] 3 more already above in this conversation: #42, #57, #61.\n"
    )
    assert used(env) == O200K(again.output) + O200K(advice), "only that line (and the advice) is counted"


def test_where_a_harness_cannot_replace_a_result_a_search_asks_for_no_more(env: Env) -> None:
    from tests.harnesses.test_codex import Codex

    codex = Codex(env)
    codex.prompt("what did we decide about caching?")
    assert codex.pre("mem_search", query="cache", limit=3) is None
    assert codex.post("mem_search", search_result([1, 2, 3]), query="cache", limit=3) is None, "passed as it came"
    second = codex.pre("mem_search", query="cache layer", limit=3)
    assert second is None, "limit 3 stays 3: cutting extra hits would turn its result into a block"


# -- snippets only --------------------------------------------------------------------------------


def test_after_a_v2_result_a_search_asks_for_the_compact_form_and_gets_its_snippets(session: Session) -> None:
    session.prompt("what did we decide about auth?")
    first = session.pre("mem_search", "toolu_v2", query="auth", limit=3)
    assert first.silent, "nothing known of the server yet: nothing to ask"
    full = fixture_text("engram/search_v2.json")
    answer = session.post("mem_search", "toolu_v2", full, query="auth", limit=3)
    assert "results" not in json.loads(answer.output or "{}"), "its hits once: the text's"
    second = session.pre("mem_search", "toolu_compact", query="jwt", limit=3)
    assert second.updated_input == {"query": "jwt", "limit": 6, "response_format": "compact"}, "3 past those held"
    compact = json.loads(fixture_text("engram/search_v2_compact.json"))
    compact["results"] = [{**item, "id": item["id"] + 100} for item in compact["results"]]  # new to this context
    out = json.loads(session.post("mem_search", "toolu_compact", json.dumps(compact), **second.updated_input).output)
    assert [sorted(item) for item in out["results"]] == [["id", "preview", "title", "type"]] * 2, out
    assert O200K(json.dumps(out)) < O200K(json.dumps(compact))


def test_a_v1_footer_and_nudge_are_left_out(session: Session) -> None:
    session.prompt("what did we decide about auth?")
    text = fixture_text("engram/search_v1_footer.txt")
    _, after = session.call("mem_search", text, query="auth", limit=3)
    assert after is not None and after.output is not None
    assert "Results above are previews" not in after.output and "No mem_save" not in after.output
    assert shown(after.output) == shown(text) and "| scope: project" not in after.output


# -- short words ----------------------------------------------------------------------------------


def test_every_refusal_and_note_the_model_reads_is_one_short_line(env: Env, session: Session) -> None:
    session.prompt("what did we decide about caching?")
    lines = [session.pre("mem_get_observation", id=99).reason]  # not surfaced
    session.call("mem_search", search_result([1, 2, 3, 4, 5, 6]), query="cache", limit=10)
    fetched = session.call("mem_get_observation", "#1 [decision] Memory 1\nbody\nCreated: 2025-03-01", id=1)[0]
    assert not fetched.denied, fetched.reason
    lines.append(session.pre("mem_get_observation", id=2).reason)  # max_full_fetches
    lines.append(session.pre("mem_context").reason)  # locked
    _, big = session.call("mem_search", search_result([7, 8, 9], words=400), query="more", limit=3)
    assert big is not None and big.output is not None
    lines.append(big.output.rsplit("\n", 2)[-2])  # the held-back note under a trimmed result
    lines.append(session.pre("mem_search", query="third", limit=3).reason)  # max_search_calls
    for line in lines:
        assert line.startswith(("memory-governor:", "[memory-governor]")) and "\n" not in line, line
        assert O200K(line) <= 40, (O200K(line), line)
    said = ("not surfaced", "max_full_fetches=1", "is off outside", "held back", "max_search_calls=2")
    assert [word for word, line in zip(said, [lines[0], lines[1], lines[2], lines[3], lines[4]], strict=True)
            if word in line] == list(said), lines  # fmt: skip


# -- the recall policy: L1 shaped by tokens, mem_context as a budgeted read -----------------------


def test_the_recall_policy_shapes_a_search_by_tokens_not_a_count(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", RECALL_POLICY)
    session.prompt("what did we decide about caching?")
    before = session.pre("mem_search", "toolu_t", query="cache", limit=10)
    assert before.silent, "limit 10 is what it asks: no count clamp"
    after = session.post("mem_search", "toolu_t", search_result(list(range(1, 11)), words=8), query="cache", limit=10)
    assert after.output is not None
    passed = shown(after.output)
    assert 3 < len(passed) < 10 and passed == list(range(1, len(passed) + 1)), "whole hits, best first"
    assert O200K(after.output) <= 300 and "a search passes 300 o200k_base tokens" in after.output


def test_the_recall_policy_serves_mem_context_cut_to_what_the_turn_has_left(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", RECALL_POLICY)
    session.prompt("let's keep working on the parser")  # no trigger armed
    for query, ids in (("parser", [1, 2, 3, 4, 5, 6]), ("lexer", [7, 8, 9, 10, 11, 12])):
        _, search = session.call("mem_search", search_result(ids, words=30), query=query, limit=6)
        assert search is not None
    left = 1000 - used(env)
    before = session.pre("mem_context", "toolu_ctx")
    assert not before.denied and before.updated_input is not None, before.reason
    assert 0 < before.updated_input["max_bytes"] <= 3 * left, (before.updated_input, left)
    dump = (
        "## Memory from Previous Sessions\n\n### Recent Observations\n"
        + "".join(f"- [decision] **Memory {i}**: {' '.join(f'ctx{i}w{j}' for j in range(20))}\n" for i in range(30))
        + "\n---\nMemory stats: 3 sessions, 30 observations across projects: myapp"
    )
    assert O200K(dump) > left
    after = session.post("mem_context", "toolu_ctx", dump, **before.updated_input)  # v1.7 ignores max_bytes
    assert after.output is not None and O200K(after.output) <= left and "held back" in after.output
    assert after.output.startswith("## Memory from Previous Sessions"), "whole entries of its sections"
    assert used(env) <= 1000
    session.prompt("explicit: recordar todo")
    assert not session.pre("mem_context", "toolu_ctx2").denied, "the trigger was not spent by the budgeted read"
