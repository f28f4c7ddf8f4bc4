"""The per-user window (governor.engine.window): every session and harness of one user together, in
a rolling period; refused like a per-turn limit, told to the model and the user, exact under
concurrent hook processes on either store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governor.engine import events as ev
from governor.engine.decide import World, decide
from governor.engine.stores import open_ledger
from governor.engine.window import user_key
from governor.policy import compiled
from governor.runtime.runner import respond
from tests.conftest import HOOK, Answer, Env, Session, assert_raced, fixture_text

SMALL = "window:\n  minutes: 60\n  max_search_calls: {value: 3, enforce: block}\n"


def test_sessions_of_one_user_share_the_window_and_a_refusal_says_so(env: Env) -> None:
    """Two sessions, each within its turn's limits: the third search of the user's hour is the last."""
    env.write(".memory-governor/policy.yaml", SMALL)
    first, second = Session(env, "one"), Session(env, "two")
    for session in (first, second):
        session.start()
        session.prompt("what did we decide about auth?")
    assert not first.pre("mem_search", query="auth", limit=3).denied
    assert not first.pre("mem_search", query="jwt", limit=3).denied
    assert not second.pre("mem_search", query="auth", limit=3).denied
    refused = second.pre("mem_search", query="jwt", limit=3)
    assert refused.denied
    assert "your memory window is spent: 3 searches of 3 in the last 60 minutes" in refused.reason
    assert "Sessions you start count in the same window" in refused.reason
    assert "memory window" in refused.message and "memory-governor status" in refused.message  # the user is told
    third = Session(env, "three")
    third.prompt("what did we decide about auth?")
    assert third.pre("mem_search", query="auth", limit=3).denied, "a new session escapes nothing"
    assert not third.pre("mem_save", title="JWT", content="We chose JWT.", type="decision").denied, "saves are not"


def test_a_result_is_trimmed_to_what_the_window_has_left(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "window:\n  max_memory_tokens_injected: {value: 150, enforce: block}\n")
    session = Session(env)
    session.prompt("what did we decide about auth?")
    result = fixture_text("engram/search_v1.txt")
    _, answer = session.call("mem_search", result, query="auth", limit=3)
    assert answer is not None and answer.output is not None
    assert "your memory window (150 o200k_base tokens per 30 minutes" in answer.output
    assert "Switched from sessions to JWT" in answer.output and "Repository layer" not in answer.output
    later = session.pre("mem_search", query="jwt", limit=3)
    assert not later.denied or "memory window" in later.reason


def _payload(session: str, call: str, cwd: Path) -> bytes:
    return json.dumps({"session_id": session, "transcript_path": "/dev/null", "cwd": str(cwd),
                       "hook_event_name": "PreToolUse", "permission_mode": "default",
                       "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "auth", "limit": 3},
                       "tool_use_id": call}).encode()  # fmt: skip


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_parallel_hooks_of_many_sessions_never_overshoot_the_window(
    env: Env, store: str, request: pytest.FixtureRequest
) -> None:
    """16 hook processes at once, each the first search of its own session (its turn allows 2): the
    window's 5 are granted exactly, in every order; on Redis, from two hosts' state directories."""
    env.write(".memory-governor/policy.yaml", "window:\n  max_search_calls: {value: 5, enforce: block}\n")
    hosts = [dict(env.vars)]
    if store == "redis":
        url = request.getfixturevalue("redis_server").url
        hosts = [{**env.vars, "MEMORY_GOVERNOR_LEDGER_URL": url, "MEMORY_GOVERNOR_STATE_DIR": str(env.tmp / name)}
                 for name in ("host-a", "host-b")]  # fmt: skip
        for host in hosts:
            open_ledger(host["MEMORY_GOVERNOR_STATE_DIR"], 2000, url).close()
    procs = [subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=hosts[n % len(hosts)], cwd=env.project) for n in range(16)]  # fmt: skip
    for n, proc in enumerate(procs):
        assert proc.stdin is not None
        proc.stdin.write(_payload(f"racer-{n}", f"toolu_{n}", env.project))
        proc.stdin.close()
    answers = []
    for proc in procs:
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
        answers.append(Answer(subprocess.CompletedProcess(proc.args, proc.wait(timeout=120), out, err)))
    assert_raced(answers, 5, ("window.max_search_calls=5",))


def _search(session: str, call: str) -> ev.Event:
    return ev.Event(ev.PRE_TOOL, session, tool_name="mcp__engram__mem_search", server="engram", tool="mem_search",
                    tool_input={"query": "auth", "limit": 3}, call_id=call)  # fmt: skip


def test_the_window_rolls_and_each_user_has_their_own(tmp_path: Path) -> None:
    """A search counts for the window's length (up to one bucket more, never less); another user
    (another uid: `respond(caller_uid=)`, as a service passes its peer's) has a window of their own."""
    policy, _ = compiled.load({"MEMORY_GOVERNOR_STATE_DIR": str(tmp_path)}, str(tmp_path), str(tmp_path))
    policy.data["window"]["max_search_calls"]["value"] = 1
    ledger = open_ledger(str(tmp_path))
    start = 1_800_000_000.0

    def at(minutes: float, session: str, user: str = "1000@host") -> Any:
        return decide(_search(session, f"c-{session}-{minutes}"), policy, ledger,
                      World(start + minutes * 60, "/p", user=user))  # fmt: skip

    assert at(0, "a").kind != ev.DENY
    assert at(29, "b").code == "window:max_search_calls"  # the shipped window: 30 minutes
    assert at(29, "c", user="1001@host").kind != ev.DENY, "another user's window is their own"
    assert at(32, "d").kind != ev.DENY, "a search leaves the window after it (and at most a minute more)"
    assert ledger.window_used(user_key("1000@host"), 0)[0] == 1, "a bucket that left the window is dropped"


def test_respond_keys_the_window_by_the_callers_uid(env: Env) -> None:
    """The runtime names the user: `<uid>@<host>` of `caller_uid` (None: this process's)."""
    env.write(".memory-governor/policy.yaml", SMALL.replace("value: 3", "value: 1"))
    ask = {**env.vars, "CLAUDE_PROJECT_DIR": str(env.project)}

    def search(session: str, uid: int | None) -> Answer:
        out = respond("claude-code", _payload(session, f"toolu_{session}", env.project), ask, caller_uid=uid)
        return Answer(subprocess.CompletedProcess([], 0, out.stdout(), out.stderr()))

    assert not search("mine", None).denied
    assert search("mine-again", None).denied
    assert not search("theirs", 4242).denied


def test_warn_tells_the_user_and_lets_the_call_run(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "window:\n  max_search_calls: {value: 1, enforce: warn}\n")
    session = Session(env)
    session.prompt("what did we decide about auth?")
    assert not session.pre("mem_search", query="auth", limit=3).denied
    second = session.pre("mem_search", query="jwt", limit=3)
    assert not second.denied and "window.max_search_calls=1, warn only" in second.message


def test_policy_diff_knows_tightening_and_loosening_the_window(env: Env) -> None:
    tight = env.write("tight.yaml", "window:\n  minutes: 120\n  max_search_calls: {value: 10, enforce: block}\n")
    loose = env.write("loose.yaml", "window:\n  minutes: 30\n  max_search_calls: {value: 90, enforce: warn}\n")
    out = env.cli("policy", "diff", str(tight), str(loose), "--format", "json")
    changes = {c["path"]: c["kind"] for c in json.loads(out.stdout)["changes"]}
    assert changes == {"window.minutes": "loosened", "window.max_search_calls.value": "loosened",
                       "window.max_search_calls.enforce": "loosened"}, changes  # fmt: skip
    back = json.loads(env.cli("policy", "diff", str(loose), str(tight), "--format", "json").stdout)["changes"]
    assert {c["kind"] for c in back} == {"tightened"}


def test_a_policy_accepted_before_the_window_existed_is_only_tightened_by_it(tmp_path: Path) -> None:
    """An accepted record from an older memory-governor has no `window`: it had none, so the shipped
    one tightens it (nothing held back at the upgrade)."""
    from governor.policy.diff import TIGHTENED, compare

    policy, _ = compiled.load({"MEMORY_GOVERNOR_STATE_DIR": str(tmp_path)}, str(tmp_path), str(tmp_path))
    older = {k: v for k, v in policy.data.items() if k != "window"}
    changes = compare(older, policy.data)
    assert changes and {c.kind for c in changes} == {TIGHTENED}, [str(c) for c in changes]
    assert {c.kind for c in compare(policy.data, older)} == {"loosened"}


def test_explain_and_status_show_the_window(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", SMALL)
    explained = env.cli("policy", "explain", check=True).stdout
    assert "at most 3 L1 searches in any 60 minutes, across every session and harness of one user" in explained
    session = Session(env)
    session.prompt("what did we decide about auth?")
    session.pre("mem_search", query="auth", limit=3)
    status = json.loads(env.cli("status", "--format", "json", check=True).stdout)
    window = {item["limit"]: item for item in status["window"]["limits"]}
    assert window["max_search_calls"]["used"] == 1 and window["max_search_calls"]["value"] == 3
    assert status["window"]["minutes"] == 60
    text = env.cli("status", check=True).stdout
    assert "window (60 min, every session of" in text


def test_report_shows_each_users_busiest_stretch_and_the_windows_refusals(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", SMALL.replace("value: 3", "value: 2"))
    for name in ("one", "two", "three"):
        session = Session(env, name)
        session.prompt("what did we decide about auth?")
        session.call("mem_search", fixture_text("engram/search_v1.txt"), query="auth", limit=3)
    report = json.loads(env.cli("report", "--format", "json", check=True).stdout)
    (user,) = report["window"]["users"]
    assert user["busiest"]["max_search_calls"] == 2 and user["refused"] == 1
    assert user["busiest"]["max_memory_tokens_injected"] > 0
    assert report["denials_by_reason"] == {"window:max_search_calls": 1}
    assert "busiest 60 min of" in env.cli("report", check=True).stdout


def test_telemetry_counts_a_window_trim_as_a_trim_and_names_the_user() -> None:
    from governor.engine.ledger import AUDIT_COLUMNS
    from governor.runtime.signals import CALLS, Observed, observe

    base = {name: "" for name in AUDIT_COLUMNS}
    base.update(ts=1000.0, session="s:a", turn="s:p", role="search", mode="enforce", harness="claude-code",
                call_id="s:c1", tokens_counted=0, tokens_delivered=0, tokens_saved=0, tokens_deduped=0,
                duration_ms=1.0, user="1000@host")  # fmt: skip
    waiting: dict[str, dict[str, object]] = {}
    out = Observed()
    observe({**base, "event": "pre_tool", "decision": "none", "code": "allow"}, waiting, out)
    observe({**base, "event": "post_tool", "decision": "replace", "code": "window_trimmed", "tokens_delivered": 40,
             "tokens_saved": 200}, waiting, out)  # fmt: skip
    assert [(a["decision"], a["reason"]) for name, _, a in out.points if name == CALLS] == [
        ("trimmed", "window_trimmed")
    ]
    assert out.events[0]["attributes"]["user"] == "1000@host"


def test_replaying_the_recorded_sessions_under_the_shipped_window_refuses_nothing(env: Env) -> None:
    """The recorded sessions (tests/fixtures/transcripts): nothing they do meets the shipped window."""
    folder = Path(__file__).parent / "fixtures" / "transcripts"
    for transcript in sorted(folder.glob("*.jsonl")):
        out = env.cli("replay", str(transcript), "--format", "json")
        assert out.returncode == 0, out.stderr
        decisions = [d for turn in json.loads(out.stdout)["turns"] for d in turn["decisions"]]
        assert decisions, transcript
        assert not [d for d in decisions if "memory window" in d["reason"]], transcript


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
