"""A policy an agent writes does not loosen the governor: a loosening waits for a person.

Played through the hook process as a model with file tools would: write a looser project
policy, or a subagent definition that declares itself search-capable, in the middle of a
session; the next calls are still held to the accepted policy, the user is told what is held
back, and `memory-governor policy accept` (a person, in a terminal or with --yes) applies it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Env, Session
from tests.harnesses.test_claude_code import _subagent_search

LOOSER = "limits:\n  max_search_calls: {value: 6, enforce: block}\n"
TIGHTER = "limits:\n  max_search_calls: {value: 1, enforce: block}\n"
RESEARCHER = "---\nname: researcher\nengram_access_tier: search-capable\n---\nDig.\n"


def _searches(session: Session, count: int) -> list[bool]:
    """Denied or not, for `count` searches in a new turn."""
    session.prompt("what did we decide about the cache")
    return [session.pre("mem_search", query=f"cache {i}", limit=1).denied for i in range(count)]


def test_a_policy_written_mid_session_that_loosens_a_limit_is_held_back(env: Env, session: Session) -> None:
    session.start()
    assert _searches(session, 3) == [False, False, True]  # the shipped cap: 2
    env.write(".memory-governor/policy.yaml", LOOSER)
    told = session.prompt("and the queue?")
    notice = told.message + told.stderr
    assert "held back" in notice and "max_search_calls" in notice and "policy accept" in notice, notice
    answer = session.pre("mem_search", query="queue", limit=3)
    assert "held back" not in answer.message + answer.stderr, "told once per session"
    assert [answer.denied, *(session.pre("mem_search", query=f"q{i}", limit=3).denied for i in range(2))] == [
        False,
        False,
        True,
    ]


def test_a_policy_that_only_tightens_is_in_force_at_once(env: Env, session: Session) -> None:
    session.start()
    env.write(".memory-governor/policy.yaml", TIGHTER)
    assert _searches(session, 2) == [False, True]


def test_policy_accept_puts_a_held_loosening_in_force(env: Env, session: Session) -> None:
    session.start()
    env.write(".memory-governor/policy.yaml", LOOSER)
    assert _searches(session, 3) == [False, False, True]
    for refused in (env.cli("policy", "accept"), env.cli("policy", "accept", "--yes")):  # no terminal: an agent's shell
        assert refused.returncode != 0 and "nothing was accepted" in refused.stderr, refused.stderr
    assert _searches(session, 3) == [False, False, True]
    done = env.accept()
    assert "limits.max_search_calls.value: 2 -> 6" in done.stdout and "in force now" in done.stdout, done.stdout
    assert _searches(session, 7) == [False] * 6 + [True]


def test_the_first_policy_a_project_is_seen_with_is_accepted(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", LOOSER)  # there before the governor first ran: the user's
    session.start()
    assert _searches(session, 7) == [False] * 6 + [True]


def test_a_subagent_definition_written_mid_session_gets_no_wider_tier(env: Env, session: Session) -> None:
    env.write(".claude/agents/scribe.md", RESEARCHER.replace("researcher", "scribe"))  # there before: accepted
    session.start()
    env.write(".claude/agents/researcher.md", RESEARCHER)
    session.prompt("research the cache design")
    assert not _subagent_search(session, "scribe").denied  # type: ignore[attr-defined]
    held = _subagent_search(session, "researcher")
    assert held.denied  # type: ignore[attr-defined]
    notice = held.message + held.stderr  # type: ignore[attr-defined]
    assert "researcher.md" in notice and "policy accept" in notice, notice
    doctor = env.cli("doctor", "--format", "json")
    rows = {row["check"]: row for row in json.loads(doctor.stdout)}
    assert rows["accepted policy"]["status"] == "warn" and "researcher.md" in rows["accepted policy"]["detail"]
    env.accept()
    session.prompt("research it again")
    assert not _subagent_search(session, "researcher").denied  # type: ignore[attr-defined]


def test_a_narrower_definition_written_mid_session_applies(env: Env, session: Session) -> None:
    session.start()
    env.write(".claude/agents/scribe.md", "---\nname: scribe\nengram_access_tier: save-only\n---\n")
    session.prompt("write it down")
    assert _subagent_search(session, "scribe").denied  # type: ignore[attr-defined]


def test_the_accepted_record_gone_falls_back_to_the_shipped_policy(env: Env, session: Session) -> None:
    session.start()
    env.write(".memory-governor/policy.yaml", LOOSER)
    for blob in Path(env.state, "accepted").glob("*.policy.json"):
        blob.unlink()  # the accepted policy lost: hold to the shipped one, never to the files
    assert _searches(session, 3) == [False, False, True]


def test_the_model_cannot_accept_for_the_user_through_its_shell(env: Env, session: Session) -> None:
    session.start()
    session.prompt("raise your own limits")
    for command in ("memory-governor policy accept --yes", "python -m governor policy accept --yes",
                    f"rm -rf {env.state}/accepted", "echo {} > ~/.local/state/memory-governor/accepted/x.json"):  # fmt: skip
        answer = session.event("PreToolUse", tool_name="Bash", tool_input={"command": command},
                               tool_use_id=session.next_id())  # fmt: skip
        assert answer.denied, command
    read = session.event("PreToolUse", tool_name="Bash", tool_input={"command": f"cat {env.state}/accepted/x.json"},
                         tool_use_id=session.next_id())  # fmt: skip
    assert not read.denied, "reading what was accepted changes nothing"
    for path in (f"{env.state}/accepted/0.json", str(env.home / ".local/state/memory-governor/accepted/0.json")):
        answer = session.event("PreToolUse", tool_name="Write", tool_input={"file_path": path, "content": "{}"},
                               tool_use_id=session.next_id())  # fmt: skip
        assert answer.denied, path


def test_policy_explain_shows_what_the_hooks_enforce_while_a_loosening_is_held_back(env: Env, session: Session) -> None:
    session.start()
    env.write(".memory-governor/policy.yaml", LOOSER)
    assert _searches(session, 3) == [False, False, True]  # the hooks hold the accepted 2
    explained = env.cli_json("policy", "explain", "--format", "json")
    assert explained["in_force"] == "accepted"
    assert [(c["path"], c["old"], c["new"]) for c in explained["held_back"]] == [
        ("limits.max_search_calls.value", 2, 6)
    ]
    (rule,) = [r for r in explained["rules"] if r["key"].startswith("limits.max_search_calls")]
    assert "2" in rule["statement"] and "6" not in rule["statement"], rule
    assert rule["layer"] == "accepted" and rule["held_back"], rule
    text = env.cli("policy", "explain", check=True).stdout
    assert "Held back: 1 change(s)" in text and "held back: loosened" in text, text
    env.accept()
    after = env.cli_json("policy", "explain", "--format", "json")
    assert after["in_force"] == "files" and not after["held_back"]
    (rule,) = [r for r in after["rules"] if r["key"].startswith("limits.max_search_calls")]
    assert "6" in rule["statement"] and rule["layer"] == "team", rule


def test_doctor_tells_a_committed_change_from_one_only_in_the_working_tree(env: Env, session: Session) -> None:
    from tests.test_trust import _git

    env.write(".memory-governor/policy.yaml", TIGHTER.replace("1", "2"))
    _git(env, "init", "-q")
    _git(env, "add", ".memory-governor/policy.yaml")
    _git(env, "commit", "-qm", "team policy")
    session.start()
    env.write(".memory-governor/policy.yaml", LOOSER)
    uncommitted = env.cli("doctor").stdout
    assert "in the working tree, not committed" in uncommitted and "git checkout" in uncommitted, uncommitted
    _git(env, "commit", "-qam", "lead: six searches")  # the lead's change, as a clone pulls it
    committed = env.cli("doctor").stdout
    assert "held back" in committed and "as committed (git HEAD)" in committed, committed
    assert "if you made them" not in committed


def test_a_teammate_is_told_once_that_the_team_committed_a_loosening_and_commands_stay_quiet(env: Env) -> None:
    from tests.test_trust import _git

    env.write(".memory-governor/policy.yaml", TIGHTER.replace("1", "2"))
    _git(env, "init", "-q")
    _git(env, "add", ".memory-governor/policy.yaml")
    _git(env, "commit", "-qm", "team policy")
    Session(env, "before-the-pull").start()  # the clone's first session: the committed policy, accepted
    env.write(".memory-governor/policy.yaml", LOOSER)
    _git(env, "commit", "-qam", "lead: six searches")  # the lead's change, as the clone pulls it
    session = Session(env, "after-the-pull")
    told = session.start()
    notice = told.message + told.stderr
    assert "the team committed a policy change" in notice and "git log -p .memory-governor/" in notice, notice
    assert "If you made it" not in notice and "git checkout" not in notice, "not the teammate's change"
    session.prompt("what did we decide about the cache")
    later = [session.pre("mem_search", query=f"cache {i}", limit=1) for i in range(3)]
    assert [answer.denied for answer in later] == [False, False, True], "the accepted 2 hold"
    assert all("held back" not in answer.message + answer.stderr for answer in later), "told once per session"
    env.write("notes.md", "some text\n")
    for command in (["report"], ["status"], ["classify", "what did we decide?"], ["count", "notes.md"]):
        out = env.cli(*command)
        assert out.returncode == 0 and "held back" not in out.stderr, (command, out.stderr)
    assert "a change the team committed" in env.cli("doctor").stdout
