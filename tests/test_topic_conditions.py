"""The seed's memory conditions on mem_context's other two unlocks, through the hook process:
post_compact only when a session/ topic exists, session_resume armed by the first dispatch after
a saved state/wave/ topic; on the SQLite ledger and on the Redis one."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Env, Session

SEED = """\
mem_context:
  unlocked_by:
    post_compact: {scope: next_turn, uses: 1, requires_topic: session/}
    session_resume: {scope: next_turn, uses: 1, armed_by: dispatch, requires_topic: state/wave/}
"""
OBSERVATION = "#7 [decision] Auth\nUse JWT.\nSession: s-0\nProject: myapp\nScope: project\nTopic: {topic}\nCreated: x"


@pytest.fixture(params=["sqlite", "redis"])
def ledger_env(request: pytest.FixtureRequest, env: Env) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    server: Any = request.getfixturevalue("redis_server")
    return {"MEMORY_GOVERNOR_LEDGER_URL": server.url}


def _save(session: Session, topic: str) -> None:
    before, after = session.call("mem_save", {"content": [{"type": "text", "text": "saved #9"}]}, title="t",
                                 content="Use X because Y.", type="decision", topic_key=topic)  # fmt: skip
    assert not before.denied and after is not None


def _dispatch(session: Session) -> Any:
    return session.pre("Agent", description="wave 2", prompt="Implement the next wave.", subagent_type="builder")


def test_compaction_unlocks_only_once_a_session_topic_was_seen(env: Env, ledger_env: dict[str, str]) -> None:
    env.write(".memory-governor/policy.yaml", SEED)
    first = Session(env, "sess-a", extra_env=ledger_env)
    first.start()
    first.prompt("hello")
    _save(first, "billing/invoices/decision")  # a topic, but not a session/ one
    first.start("compact")
    first.prompt("carry on")
    locked = first.pre("mem_context", project="myapp")
    assert locked.denied and "when the memory holds a session/* topic" in locked.message, locked.message
    _save(first, "session/add-auth")
    other = Session(env, "sess-b", extra_env=ledger_env)  # the memory is the project's, not one session's
    other.start("compact")
    other.prompt("carry on")
    assert not other.pre("mem_context", project="myapp").denied
    assert other.pre("mem_context", project="myapp").denied, "once"
    if ledger_env:
        assert not (env.state / "ledger.db").exists(), "the topics were in Redis"


def test_a_result_that_names_a_session_topic_counts(env: Env, ledger_env: dict[str, str]) -> None:
    env.write(".memory-governor/policy.yaml", SEED)
    session = Session(env, "sess-r", extra_env=ledger_env)
    session.prompt("what did we decide about auth?")
    search = session.call("mem_search", "Found 0 memories:\n", query="auth", limit=3)
    assert search[1] is not None
    session.start("compact")
    session.prompt("continue")
    assert session.pre("mem_context", project="myapp").denied
    session.prompt("show #7")  # surfaced ids are per turn; a fetch of an id no search surfaced is refused
    found = ("Found 1 memories:\n\n[1] #7 (decision) — Auth\n    Use JWT.\n    2026-01-01 | project: myapp | "
             "scope: project\n\n")  # fmt: skip
    session.call("mem_search", found, query="auth", limit=3)
    fetched = session.call("mem_get_observation", OBSERVATION.format(topic="session/add-auth"), id=7)
    assert not fetched[0].denied, fetched[0].reason
    session.start("compact")
    session.prompt("continue")
    assert not session.pre("mem_context", project="myapp").denied


def test_the_first_dispatch_after_a_saved_wave_state_arms_resume(env: Env, ledger_env: dict[str, str]) -> None:
    env.write(".memory-governor/policy.yaml", SEED)
    earlier = Session(env, "sess-w1", extra_env=ledger_env)
    earlier.prompt("wave 1 done")
    _save(earlier, "state/wave/add-auth/1")
    resumed = Session(env, "sess-w2", extra_env=ledger_env)
    resumed.start("resume")  # SessionStart does not arm it under armed_by: dispatch
    resumed.prompt("start wave 2")
    locked = resumed.pre("mem_context", project="myapp")
    assert locked.denied and "the first dispatch after a saved state/wave/* wave state" in locked.message
    assert not _dispatch(resumed).denied
    assert not resumed.pre("mem_context", project="myapp").denied, "the first dispatch armed it"
    assert resumed.pre("mem_context", project="myapp").denied, "once"
    _dispatch(resumed)
    assert resumed.pre("mem_context", project="myapp").denied, "only the first dispatch arms it"
    resumed.start("resume")  # a new start: its first dispatch may arm it again
    resumed.prompt("wave 3")
    _dispatch(resumed)
    assert not resumed.pre("mem_context", project="myapp").denied


def test_a_first_dispatch_with_no_wave_state_arms_nothing(env: Env, ledger_env: dict[str, str]) -> None:
    env.write(".memory-governor/policy.yaml", SEED)
    session = Session(env, "sess-nw", extra_env=ledger_env)
    session.start("resume")
    session.prompt("start")
    _dispatch(session)
    assert session.pre("mem_context", project="myapp").denied
    _save(session, "state/wave/add-auth/1")
    _dispatch(session)  # no longer the first dispatch of this start
    assert session.pre("mem_context", project="myapp").denied


def test_the_shipped_policy_keeps_compaction_and_resume_unconditional(env: Env) -> None:
    session = Session(env, "sess-d")
    session.start("compact")
    session.prompt("continue")
    assert not session.pre("mem_context", project="myapp").denied, "no topic needed by default"
    text = env.cli("policy", "render", check=True).stdout
    assert "The seed's conditions are available" in text and "off by default" in text


def test_dropping_a_topic_condition_is_a_loosening(env: Env) -> None:
    seed = env.write("seed.yaml", SEED)
    plain = env.write("plain.yaml", SEED.replace(", requires_topic: session/", "").replace(", armed_by: dispatch", ""))
    out = env.cli("policy", "diff", str(seed), str(plain))
    assert out.returncode == 3, out.stdout + out.stderr
    assert "loosened  mem_context.unlocked_by.post_compact.requires_topic" in out.stdout, out.stdout
    assert "loosened  mem_context.unlocked_by.session_resume.armed_by" in out.stdout, out.stdout
    assert env.cli("policy", "diff", str(plain), str(seed)).returncode == 0, "adding them tightens"


def test_the_topic_keys_a_result_names_in_order_whatever_surrounds_them() -> None:
    # A "Topic:" line (plain, or a JSON text's \n before it), a v2 "topic_key" field; the first 50
    # distinct keys in the order the result gives them, matches never overlapping.
    import random
    import re

    from governor.engine.results import topic_keys

    whole = re.compile(r'(?:^|\\n)Topic: ([^\s\\"]{1,200})|"topic_key"\s*:\s*"([^\s\\"]{1,200})"', re.M)

    def by_one_expression(text: str) -> list[str]:
        found: dict[str, None] = {}
        for match in whole.finditer(text):
            found[match.group(1) or match.group(2)] = None
            if len(found) >= 50:
                break
        return list(found)

    pieces = ["Topic: ", "Topic:", "\n", "\\n", "\\", '"topic_key"', ": ", '"', "a", "b/c", " ", "Topic: k",
              '"topic_key": "t1"', '\\"']  # fmt: skip
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        assert topic_keys(text) == by_one_expression(text), text
    many = "".join(f'\nTopic: k{i}\n"topic_key": "f{i}"' for i in range(80))
    assert topic_keys(many) == by_one_expression(many) and len(topic_keys(many)) == 50
    assert topic_keys("Topic: auth/jwt\nTopic: auth/jwt\n") == ["auth/jwt"]
    assert topic_keys("no topic here, Topic: mid-line") == []
