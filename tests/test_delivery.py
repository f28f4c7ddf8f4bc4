"""Delivered-once, through the hook process: a memory entry the same conversation context already
holds whole reaches the model as one pointer line (a search's hits: named together in one line,
their slots going to hits not yet delivered), and only that line is counted; compaction, /clear
and a new session empty the context; each subagent has its own; nothing that was not delivered
whole is ever answered with a pointer."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from governor.engine.stores import open_ledger
from tests.conftest import WHOLE_HITS, Env, Session, fixture_text, snippets

SEARCH = fixture_text("engram/search_v1.txt")
SNIPPETS = snippets(SEARCH)  # what the model gets of it: each hit as its snippet
OBSERVATION = fixture_text("engram/observation_v1.txt")
PROMPT = "what did we decide about auth last week?"
TEAM_RESEARCHER = "subagents:\n  agents:\n    researcher: search-capable\n"


def _search(session: Session, text: str = SEARCH, agent: dict[str, str] | None = None) -> str:
    """One search through the hook; what the model gets (the replacement, else the result itself)."""
    call_id = session.next_id()
    before = session.event("PreToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": "auth", "limit": 3},
                           tool_use_id=call_id, **(agent or {}))  # fmt: skip
    assert not before.denied, before.reason
    after = session.event("PostToolUse", tool_name="mcp__engram__mem_search", tool_input={"query": "auth", "limit": 3},
                          tool_use_id=call_id, tool_response=text, **(agent or {}))  # fmt: skip
    return after.output if after.output is not None else text


def _report(env: Env) -> dict[str, Any]:
    return dict(env.cli_json("report", "--format", "json"))


def _turn_tokens(env: Env, number: int) -> int:
    turn = next(t for t in _report(env)["turns"] if t["turn_number"] == number)
    return int(turn["usage"]["max_memory_tokens_injected"])


def _above(result: str) -> list[str]:
    """The hits a search result names as already above in this conversation."""
    line = re.search(r"(\d+) more already above in this conversation: ([#\d, …]+)\.", result)
    return re.findall(r"#(\d+)", line.group(2)) if line else []


def test_a_repeated_search_names_the_hits_already_held_in_one_line_counted_alone(env: Env, session: Session) -> None:
    session.start()
    session.prompt(PROMPT)
    assert _search(session) == SNIPPETS, "the first time, every hit (as its snippet)"
    session.prompt("and the jwt decision, again?")
    second = _search(session)
    assert second.startswith("Found 3 memories:")
    assert _above(second) == ["42", "57", "61"], second
    assert "jsonwebtoken" not in second and "FTS5 MATCH" not in second, "no repeated text reaches the model"
    first_tokens, second_tokens = _turn_tokens(env, 1), _turn_tokens(env, 2)
    assert second_tokens < first_tokens / 2, (first_tokens, second_tokens)
    report = _report(env)
    assert report["totals"]["tokens_deduped"] > 0
    assert next(t for t in report["turns"] if t["turn_number"] == 2)["tokens_deduped"] > first_tokens / 2
    assert "of them by not delivering an entry twice" in env.cli("report").stdout


def test_a_changed_or_new_entry_is_delivered_whole(env: Env, session: Session) -> None:
    session.prompt(PROMPT)
    _search(session)
    session.prompt("again")
    changed = SEARCH.replace("every repository method maps", "every repository method now maps")
    second = _search(session, changed)
    assert _above(second) == ["42", "57"], second
    assert "every repository method now maps" in second, "an entry whose text changed is new"
    header, hit42, hit57, hit61 = SEARCH.split("\n\n[")[0], *("[" + h for h in SEARCH.split("\n\n[")[1:])
    reranked = "\n\n".join([header, hit57.replace("[2]", "[1]", 1), hit42.replace("[1]", "[2]", 1), hit61])
    session.prompt("once more")
    third = _search(session, reranked)
    assert _above(third)[:2] == ["57", "42"], "the same hit at another rank"


def test_compaction_clear_and_a_new_session_empty_the_context_a_resume_keeps_it(env: Env, session: Session) -> None:
    session.start()
    session.prompt(PROMPT)
    _search(session)
    session.start("resume")
    session.prompt("go on")
    assert "42" in _above(_search(session)), "a resumed transcript still holds it"
    session.event("PreCompact", trigger="manual", custom_instructions="")
    session.start("compact")
    session.prompt("continue after compaction")
    assert _search(session) == SNIPPETS, "after compaction the model no longer holds it: whole again"
    session.prompt("and again")
    assert "42" in _above(_search(session))
    session.start("clear")
    session.prompt("fresh start")
    assert _search(session) == SNIPPETS, "after /clear, whole again"
    other = Session(env, "sess-2")
    other.prompt(PROMPT)
    assert _search(other) == SNIPPETS, "another session holds nothing of this one's"


def test_each_subagent_gets_its_own_copy(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", TEAM_RESEARCHER)
    session.prompt(PROMPT)
    assert _search(session) == SNIPPETS
    first = {"agent_id": "agent-a1", "agent_type": "researcher"}
    assert _search(session, agent=first) == SNIPPETS, "the main agent's copy is not the subagent's"
    session.prompt("next turn")
    assert "42" in _above(_search(session, agent=first)), "the subagent holds its own copy"
    second = {"agent_id": "agent-b2", "agent_type": "researcher"}
    assert _search(session, agent=second) == SNIPPETS, "another subagent holds nothing"
    session.prompt("a third turn")
    session.event("SubagentStart", agent_id="agent-a1", agent_type="researcher")
    assert _search(session, agent=first) == SNIPPETS, "a subagent (re)started under an id holds nothing yet"


def test_an_entry_trimmed_away_or_truncated_is_not_delivered_whole(env: Env, session: Session) -> None:
    env.write(
        ".memory-governor/policy.yaml",
        "limits:\n  max_memory_tokens_injected: {value: 150, enforce: block}\n"
        "ladder:\n  L1: {expected_tokens: 10, max_limit: 3, snippets_only: true}\n"
        "trimming: {over_budget: truncate, fill: stop}\n",
    )
    session.prompt(PROMPT)
    first = _search(session)
    assert "held back" in first or "[truncated" in first.lower(), first
    session.prompt("again")
    second = _search(session)
    assert _above(second) == ["42"], ("the first hit was delivered whole: named as held now", first, second)
    assert "#57 (" in second or "#61 (" in second, "a hit trimmed away or cut short the first time is passed again"


def test_a_second_full_fetch_is_answered_with_the_pointer_before_it_runs(env: Env, session: Session) -> None:
    session.prompt(PROMPT)
    _search(session)
    before, after = session.call("mem_get_observation", OBSERVATION, id=42)
    assert not before.denied and after is not None and after.output is None, "the first fetch is whole"
    session.prompt("what was that decision again?")
    _search(session)
    again, _ = session.call("mem_get_observation", OBSERVATION, id=42)
    assert again.denied
    assert (
        "#42 was already delivered in full at " in again.reason and "it is above in this conversation" in again.reason
    )
    assert "jsonwebtoken" not in again.reason
    # The refusal spent no fetch: another surfaced id can still be fetched this turn.
    other, _ = session.call("mem_get_observation", OBSERVATION.replace("#42", "#57"), id=57)
    assert not other.denied, other.reason


def test_after_a_save_a_fetch_runs_and_its_result_is_compared(env: Env, session: Session) -> None:
    session.prompt(PROMPT)
    _search(session)
    session.call("mem_get_observation", OBSERVATION, id=42)
    session.prompt("update that decision and show it")
    session.call("mem_update", "Memory updated", id=42, content="**What**: JWT, with refresh tokens", title="JWT")
    _search(session)
    before, after = session.call("mem_get_observation", OBSERVATION.replace("jsonwebtoken", "jose"), id=42)
    assert not before.denied, "a save since the delivery may have changed the observation"
    assert after is not None and after.output is None, "its text changed: delivered whole"
    session.prompt("and once more")
    _search(session)
    unchanged, _ = session.call("mem_get_observation", OBSERVATION.replace("jsonwebtoken", "jose"), id=42)
    assert unchanged.denied and "already delivered in full" in unchanged.reason


def test_dedupe_off_delivers_every_repeat_whole(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "delivery:\n  dedupe: 'off'\n")
    session.prompt(PROMPT)
    _search(session)
    session.prompt("again")
    assert _search(session) == SNIPPETS
    before, _ = session.call("mem_get_observation", OBSERVATION, id=42)
    session.prompt("again")
    _search(session)
    again, _ = session.call("mem_get_observation", OBSERVATION, id=42)
    assert not before.denied and not again.denied


def test_monitor_mode_replaces_nothing_and_remembers_what_the_model_got(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "mode: monitor\n")
    session.prompt(PROMPT)
    _search(session)
    session.prompt("again")
    assert _search(session) == SEARCH


def test_a_v2_envelope_drops_the_structured_copy_of_a_repeat(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", WHOLE_HITS)
    text = fixture_text("engram/search_v2.json")
    session.prompt(PROMPT)
    assert _search(session, text) == text, "snippets_only off: the result as the server gave it"
    session.prompt("again")
    second = json.loads(_search(session, text))
    assert _above(second["result"]) == ["42", "57", "61"]
    assert second.get("results", []) == [], "no whole copy of a repeated hit rides along in results[]"


def test_a_result_with_no_ids_is_known_by_its_fingerprint(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "tools:\n  - servers: [notes]\n    format: text\n    map:\n"
              "      lookup: {role: search}\n")  # fmt: skip
    text = (
        "The deploy key rotates every 30 days; the runbook lives in ops/keys.md and names the on-call owner. "
        "Rotation is done by the release job, never by hand, and the old key stays valid for one more day.\n"
    )
    session.prompt(PROMPT)
    first = session.call("mcp__notes__lookup", text, query="deploy")[1]
    assert first is not None and first.output is None
    session.prompt("again")
    second = session.call("mcp__notes__lookup", text, query="deploy")[1]
    assert second is not None and second.output is not None
    assert second.output.startswith("[memory-governor] this result was already shown at ")


def test_the_ledger_keeps_fingerprints_never_memory_text(env: Env, session: Session) -> None:
    session.prompt(PROMPT)
    _search(session)
    db = sqlite3.connect(env.state / "ledger.db")
    rows = db.execute("SELECT * FROM delivered").fetchall()
    assert len(rows) == 3
    assert "jsonwebtoken" not in repr(rows) and "Switched" not in repr(rows)


def test_a_version_5_ledger_upgrades_in_place(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        ledger.turn("s:a", "s:p-1", 1.0, new=True)
    ledger.q("DROP TABLE delivered")
    ledger.q("ALTER TABLE decisions DROP COLUMN tokens_deduped")
    ledger.q("PRAGMA user_version=5")
    ledger.close()
    again = open_ledger(str(tmp_path))
    with again.write():
        again.remember_delivered("s:a", "", [("f" * 32, "engram", "42", "search")], 1, 2.0)
        assert again.delivered_among("s:a", "", ["f" * 32]) == {"f" * 32: (1, 2.0)}
        again.record({"ts": 2.0, "session": "s:a", "turn": "s:p-1", "event": "post_tool", "decision": "replace",
                      "tokens_deduped": 7})  # fmt: skip
        assert again.one("SELECT tokens_deduped FROM decisions")[0] == 7
        assert again.turn("s:a", "s:p-1", 2.0) == ("s:p-1", 1), "the older rows are kept"


def test_a_repeated_timeline_keeps_its_shape_with_pointer_lines(env: Env, session: Session) -> None:
    timeline = fixture_text("engram/timeline_v1.txt")
    session.prompt(PROMPT)
    _search(session)
    first = session.call("mem_timeline", timeline, observation_id=42, before=2, after=2)[1]
    assert first is not None and first.output is None
    session.prompt("the neighbours again")
    _search(session)
    second = session.call("mem_timeline", timeline, observation_id=42, before=2, after=2)[1]
    assert second is not None and second.output is not None
    assert second.output.startswith("Session: myapp")
    assert ">>> #42 [already shown at " in second.output and "  #40 [already shown at " in second.output
    assert "─── Before ───" in second.output and "JWT_SECRET" not in second.output


def test_the_mcp_proxy_never_answers_with_a_pointer(env: Env) -> None:
    # An MCP connection sees no compaction and no agents: what the model still holds is unknown.
    from governor.runtime.runner import respond

    def send(event: str, call_id: str, turn: str, **extra: Any) -> dict[str, Any] | None:
        payload = {"event": event, "session_id": "proxy-1", "turn_id": turn, "call_id": call_id, "server": "engram",
                   "tool": "mem_search", "arguments": {"query": "auth", "limit": 3}, "project": str(env.project),
                   **extra}  # fmt: skip
        return respond("mcp-proxy", b"", env.vars, payload=payload).answer

    result = {"content": [{"type": "text", "text": SEARCH}]}
    for number, turn in enumerate(("t-1", "t-2"), start=1):
        assert send("call", f"c{number}", turn) is None
        answer = send("result", f"c{number}", turn, result=result)
        assert answer is None or "already shown" not in json.dumps(answer), answer


def test_a_fetch_after_a_changed_preview_runs_and_is_compared(env: Env, session: Session) -> None:
    """Delivered-once refuses by id only while the entry is known unchanged: a later search whose
    preview of it differs (another process updated it) lets the fetch run, and its new body is
    delivered whole; the same preview again keeps the refusal."""
    session.prompt(PROMPT)
    _search(session)
    session.call("mem_get_observation", OBSERVATION, id=42)
    session.prompt("what was that decision again?")
    _search(session)  # the same preview: a pointer, nothing new
    again, _ = session.call("mem_get_observation", OBSERVATION, id=42)
    assert again.denied and "already delivered in full" in again.reason
    session.prompt("has the auth decision changed?")
    _search(session, SEARCH.replace("with jsonwebtoken for auth", "with jose for auth"))
    changed = OBSERVATION.replace("jsonwebtoken", "jose")
    before, after = session.call("mem_get_observation", changed, id=42)
    assert not before.denied, "a new preview since the delivery: the entry may have changed"
    assert after is not None and after.output is None, "its text changed: delivered whole"
    session.prompt("and once more")
    _search(session, SEARCH.replace("with jsonwebtoken for auth", "with jose for auth"))
    unchanged, _ = session.call("mem_get_observation", changed, id=42)
    assert unchanged.denied and "already delivered in full" in unchanged.reason


def test_a_changed_preview_cut_to_the_budget_still_lets_the_fetch_run(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "trimming:\n  over_budget: truncate\n")
    session.prompt(PROMPT)
    _search(session)
    session.call("mem_get_observation", OBSERVATION, id=42)
    session.prompt("has the auth decision changed?")
    long_preview = "with jose for auth " + "because the key rotation story is simpler " * 400
    seen = _search(session, SEARCH.replace("with jsonwebtoken for auth", long_preview))
    assert "with jose for auth" in seen and "…[truncated]" in seen, seen[:400]
    before, _ = session.call("mem_get_observation", OBSERVATION.replace("jsonwebtoken", "jose"), id=42)
    # The budget is spent by the long preview, so the fetch may be refused for that; never as a repeat.
    assert "already delivered" not in (before.reason or ""), before.reason


def test_an_entry_is_keyed_by_the_same_digest_whatever_its_size() -> None:
    # Small inputs hash with the interpreter's own sha256, large ones with OpenSSL's: one digest.
    import hashlib

    from governor.state import OPENSSL_FROM, sha256_hex

    for size in (0, 1, OPENSSL_FROM - 1, OPENSSL_FROM, 3 * OPENSSL_FROM + 7):
        data = (bytes(range(256)) * (size // 256 + 1))[:size]
        assert sha256_hex(data) == hashlib.sha256(data).hexdigest(), size
