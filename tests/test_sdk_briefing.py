"""Briefings from code (governor.sdk.briefing.brief) and `brief` over a mem_search result."""

from __future__ import annotations

import json

import pytest

from governor.engine.tokens import counter
from governor.sdk.briefing import CandidateError, UnitUnavailable, brief
from tests.conftest import Env, fixture_text

SEARCH = fixture_text("engram/search_v1.txt")  # hits #42 (JWT), #57 (FTS5), #61 (repository errors)


def _ids(manifest: dict) -> list[str]:
    return [item["id"] for item in manifest["selected"]]


def test_a_mem_search_result_is_read_as_candidates_in_the_servers_order(env: Env) -> None:
    manifest = brief(SEARCH, ranking="relevance", budget=600, env=env.vars, project=str(env.project))
    assert _ids(manifest) == ["42", "57", "61"]
    assert manifest["text"].startswith('<memory-cards unit="o200k_base" budget="600">\n- [#42 · decision · 2025-03-01]')
    assert "Switched from sessions to JWT" in manifest["text"]
    assert manifest["tokens_used"] == counter("o200k_base").count(manifest["text"]) <= 600


def test_the_budget_bounds_the_text_and_the_manifest_names_what_was_left_out(env: Env) -> None:
    manifest = brief(SEARCH, ranking="relevance", budget=90, env=env.vars, project=str(env.project))
    assert 0 < manifest["tokens_used"] <= 90
    assert manifest["omitted"]["count"] >= 1 and set(manifest["omitted"]["ids"]) | set(_ids(manifest)) == {
        "42",
        "57",
        "61",
    }


def test_a_query_ranks_candidates_that_carry_no_relevance(env: Env) -> None:
    candidates = [{"id": "1", "content": "We cache sessions in redis."},
                  {"id": "2", "content": "Repository methods map driver errors to domain errors."},
                  {"id": "3", "content": "Tokens refresh with retries."}]  # fmt: skip
    by_query = brief(candidates, query="domain errors in the repository", ranking="relevance", budget=600,
                     env=env.vars, project=str(env.project))  # fmt: skip
    assert _ids(by_query)[0] == "2"
    assert _ids(brief(candidates, ranking="relevance", budget=600, env=env.vars, project=str(env.project))) == [
        "1", "2", "3"]  # fmt: skip


def test_a_bad_candidate_is_named(env: Env) -> None:
    with pytest.raises(CandidateError, match=r"candidates\[1\]: missing 'id'"):
        brief([{"id": "1", "content": "x"}, {"content": "y"}], env=env.vars, project=str(env.project))


def test_the_errors_it_raises_are_importable_beside_it(env: Env) -> None:
    with pytest.raises(UnitUnavailable):
        brief([{"id": "1", "content": "x"}], unit="no_such_unit", env=env.vars, project=str(env.project))


def test_the_cli_reads_a_mem_search_result_and_takes_a_query(env: Env) -> None:
    source = env.tmp / "search.txt"
    source.write_text(SEARCH)
    out = env.cli_json("brief", str(source), "--rank", "relevance", "--query", "repository domain errors",
                       "--budget", "600", "--format", "json", "--no-record-usage")  # fmt: skip
    assert _ids(out) == ["61", "42", "57"] and out["query"] == "repository domain errors"
    # The command and the function are one: the same input gives the same manifest.
    same = brief(SEARCH, query="repository domain errors", ranking="relevance", budget=600, env=env.vars,
                 project=str(env.project))  # fmt: skip
    assert json.loads(json.dumps(same)) == out
