"""Budgets by memory need, through the hook process and the CLI: a class's own limits replace
the turn's for a prompt of that class, the advice line says them, and a local override may only
tighten them (a class budget is compared with the limit it inherits, never with "unlimited")."""

from __future__ import annotations

import json

from tests.conftest import Env, Session, fixture_text

SEARCH = fixture_text("engram/search_v1.txt")
RECENT = "what did we decide about caching?"  # recent_session (tests/scenarios/shipped-policy.yaml)
DESIGN = "design review: should we adopt event sourcing for the billing service?"  # architecture_decision
TEAM = """\
memory_needs:
  classes:
    recent_session: {max_memory_tokens_injected: 200, max_search_calls: 1}
    architecture_decision: {max_search_calls: 3, max_full_fetches: 2}
"""


def _explain(env: Env) -> dict[str, dict[str, str]]:
    return {row["key"]: row for row in env.cli_json("policy", "explain", "--format", "json")["rules"]}


def test_a_class_budget_replaces_the_turn_limits_and_the_advice_says_it(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", TEAM)
    advice = session.prompt(RECENT)
    assert "memory_need=recent_session" in advice.context
    assert "This turn's memory budget: 200 o200k_base tokens, 1 search(es)." in advice.context
    before, after = session.call("mem_search", SEARCH, query="cache", limit=3)
    assert not before.denied and after is not None
    assert after.output is not None and "held back" in after.output, "trimmed to the class's 200 tokens"
    refused, _ = session.call("mem_search", SEARCH, query="redis", limit=3)
    assert refused.denied and "max_search_calls=1" in refused.reason

    design = session.prompt(DESIGN)
    assert "memory_need=architecture_decision" in design.context
    assert "This turn's memory budget: 3 search(es), 2 full fetch(es)." in design.context
    answers = [session.call("mem_search", SEARCH, query=q, limit=1)[0] for q in ("events", "billing", "ledger")]
    assert not any(a.denied for a in answers), [a.reason for a in answers]
    fourth, _ = session.call("mem_search", SEARCH, query="kafka", limit=1)
    assert fourth.denied and "max_search_calls=3" in fourth.reason


def test_a_class_without_its_own_budget_keeps_the_turn_limits(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", TEAM)
    advice = session.prompt("fix the typo in README.md")
    assert "memory budget" not in advice.context
    for query in ("a", "b"):
        assert not session.call("mem_search", SEARCH, query=query, limit=3)[0].denied
    assert session.call("mem_search", SEARCH, query="c", limit=3)[0].denied


def test_a_local_override_may_only_tighten_a_class_budget(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", TEAM)
    env.write(".memory-governor/policy.local.yaml",
              "memory_needs:\n  classes:\n    recent_session: {max_memory_tokens_injected: 100}\n")  # fmt: skip
    assert env.cli("policy", "check").returncode == 0
    local = env.write(".memory-governor/policy.local.yaml",
                      "memory_needs:\n  classes:\n    recent_session: {max_memory_tokens_injected: 900}\n")  # fmt: skip
    out = env.cli("policy", "check")
    assert out.returncode == 1
    assert f"{local}:3:22: a local override may only tighten the team policy: " in out.stderr
    assert "memory_needs.classes.recent_session.max_memory_tokens_injected is loosened (200 -> 900)" in out.stderr
    # A class the team left unset inherits the turn's limit (1200): above it loosens, below tightens.
    env.write(".memory-governor/policy.local.yaml",
              "memory_needs:\n  classes:\n    similar_issue: {max_memory_tokens_injected: 5000}\n")  # fmt: skip
    assert "similar_issue.max_memory_tokens_injected is loosened (1200 -> 5000)" in env.cli("policy", "check").stderr
    env.write(".memory-governor/policy.local.yaml",
              "memory_needs:\n  classes:\n    similar_issue: {max_memory_tokens_injected: 600}\n")  # fmt: skip
    assert env.cli("policy", "check").returncode == 0
    rules = _explain(env)
    row = rules["memory_needs.classes.similar_issue.max_memory_tokens_injected"]
    assert row["layer"] == "local" and "similar_issue: at most 600 o200k_base tokens per turn" in row["statement"], row


def test_diff_and_render_cover_class_budgets(env: Env) -> None:
    old, new = env.write("old.yaml", "version: 1\n"), env.write("new.yaml", TEAM)
    out = env.cli("policy", "diff", "--format", "json", str(old), str(new))
    changes = {c["path"]: c for c in json.loads(out.stdout)["changes"]}
    assert changes["memory_needs.classes.recent_session.max_memory_tokens_injected"]["kind"] == "tightened"
    assert changes["memory_needs.classes.recent_session.max_search_calls"]["kind"] == "tightened"
    assert changes["memory_needs.classes.architecture_decision.max_search_calls"]["kind"] == "loosened"
    assert changes["memory_needs.classes.architecture_decision.max_full_fetches"]["kind"] == "loosened"
    assert out.returncode == 3, "a loosening needs review"
    rendered = env.cli("policy", "render", str(new), check=True).stdout
    assert "| session/, state/wave/ | 200 o200k_base tokens, 1 searches |" in rendered
    assert "| none | trivial edit, format-only, single-regex fix, dependency version lookup | Skip Engram entirely | - | " \
           "the per-turn limits |" in rendered  # fmt: skip


def test_dedupe_off_is_a_loosening(env: Env) -> None:
    old, new = env.write("old.yaml", "version: 1\n"), env.write("new.yaml", "delivery:\n  dedupe: 'off'\n")
    out = env.cli("policy", "diff", "--format", "json", str(old), str(new))
    assert out.returncode == 3
    [change] = json.loads(out.stdout)["changes"]
    assert change == {"path": "delivery.dedupe", "kind": "loosened", "old": "on", "new": "off", "note": ""}
    explained = env.cli("policy", "explain").stdout
    assert "replaced by one line naming it" in explained
