"""One budget per user turn, whatever the model starts: a session started under a governed session
is charged to that session's turn and arms nothing (governor.engine.nesting), through real
processes: a stand-in harness (tests/standin_harness.py) runs the installed hook command for each
event through `/bin/sh -c`, as Claude Code does, and starts another agent as its Bash tool does."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import HOOK, ROOT, Env, fixture_text, installed_hook

STANDIN = str(ROOT / "tests" / "standin_harness.py")
SEARCH = "mcp__engram__mem_search"
CONTEXT = "mcp__engram__mem_context"
RECALL = "recall everything you remember about this project"


def search(call: str, result: str | None = None) -> list[dict[str, Any]]:
    """A search's before event, and its after event with `result` (the recorded Engram result)."""
    steps: list[dict[str, Any]] = [{"event": "PreToolUse", "tool_name": SEARCH, "tool_input": {"query": "auth",
                                                                                              "limit": 3},
                                    "tool_use_id": call}]  # fmt: skip
    if result is not None:
        steps.append({"event": "PostToolUse", "tool_name": SEARCH, "tool_input": {"query": "auth", "limit": 3},
                      "tool_use_id": call, "tool_response": result})  # fmt: skip
    return steps


def agent(env: Env, session: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"session": session, "hook": HOOK, "env": env.vars, "home": str(env.home), "cwd": str(env.project),
            "out": str(env.tmp / "answers.jsonl"), "steps": steps}  # fmt: skip


def play(env: Env, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the stand-in harness (started by the test: a person's own terminal) and read every answer."""
    path = env.tmp / f"plan-{plan['session']}.json"
    path.write_text(json.dumps(plan))
    subprocess.run([sys.executable, STANDIN, str(path)], env={**os.environ, **env.vars}, cwd=env.project, check=True,
                   timeout=300)  # fmt: skip
    lines = (env.tmp / "answers.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert not [r["stderr"] for r in rows if "could not decide" in r["stderr"] or "Traceback" in r["stderr"]]
    return rows


def denied(row: dict[str, Any]) -> bool:
    return (row["answer"] or {}).get("hookSpecificOutput", {}).get("permissionDecision") == "deny"


def reason(row: dict[str, Any]) -> str:
    return str((row["answer"] or {}).get("hookSpecificOutput", {}).get("permissionDecisionReason", ""))


def of(rows: list[dict[str, Any]], session: str, event: str, tool: str | None = None) -> list[dict[str, Any]]:
    return [r for r in rows if r["session"] == session and r["event"] == event and (tool is None or r["tool"] == tool)]


def nested_run(how: str) -> list[dict[str, Any]]:
    """The nested agent's events: its start, a prompt the model wrote asking for everything, the
    whole-memory dump, and two searches."""
    return [{"event": "SessionStart", "source": "startup"}, {"event": "UserPromptSubmit", "prompt": RECALL},
            {"event": "PreToolUse", "tool_name": CONTEXT, "tool_input": {}, "tool_use_id": f"toolu_ctx_{how}"},
            *search(f"toolu_n1_{how}"), *search(f"toolu_n2_{how}")]  # fmt: skip


@pytest.mark.parametrize("how", ["plain", "unset", "setsid"])
def test_an_agent_the_model_starts_is_charged_to_the_users_turn_and_arms_nothing(env: Env, how: str) -> None:
    """`claude -p` from the model's shell, plain, with the marker unset (ancestry holds), and detached
    with `setsid -f` (the marker holds): its searches count in the user's turn (2 in all), and its
    prompt, which the model wrote, does not unlock mem_context."""
    result = fixture_text("engram/search_v1.txt")
    nested = agent(env, f"nested-{how}", nested_run(how))
    rows = play(env, agent(env, "user", [{"event": "SessionStart", "source": "startup"},
                                         {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"},
                                         *search("toolu_u1", result), {"start": nested, "how": how}]))  # fmt: skip
    inner = f"nested-{how}"
    assert not denied(of(rows, "user", "PreToolUse", SEARCH)[0])
    assert denied(of(rows, inner, "PreToolUse", CONTEXT)[0]), "the model's own prompt armed explicit recall"
    first, second = of(rows, inner, "PreToolUse", SEARCH)
    assert not denied(first) and denied(second), (first, second)
    assert "max_search_calls=2" in reason(second)
    prompt = of(rows, inner, "UserPromptSubmit")[0]["answer"]
    assert prompt is None, "a nested prompt gets no advice of its own"


def test_through_the_committed_launcher_too(env: Env) -> None:
    """The project install's hook command (`.memory-governor/hook`, a shell script that runs this
    machine's `memory-governor`): its shells and the command are the governor's, not the session's."""
    hook = installed_hook(env)
    nested = {**agent(env, "nested", nested_run("launcher")), "hook": hook}
    rows = play(env, {**agent(env, "user", [{"event": "SessionStart", "source": "startup"},
                                            {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"},
                                            *search("toolu_u1"), {"start": nested, "how": "unset"}]), "hook": hook})  # fmt: skip
    assert denied(of(rows, "nested", "PreToolUse", CONTEXT)[0])
    assert [denied(r) for r in of(rows, "nested", "PreToolUse", SEARCH)] == [False, True]


def test_a_persons_own_agent_from_their_terminal_still_arms_recall(env: Env) -> None:
    """The same run started by a person (no governed session above it, no marker) is the user's own turn."""
    rows = play(env, agent(env, "person", nested_run("person")))
    assert not denied(of(rows, "person", "PreToolUse", CONTEXT)[0]), "a person's own recall must unlock mem_context"
    assert "explicit recall" in json.dumps(of(rows, "person", "UserPromptSubmit")[0]["answer"])


def test_an_agent_resuming_the_users_own_session_is_nested_too(env: Env) -> None:
    """`claude -p --resume <the user's session id>` from the model's shell: the same session id, run by
    another process under the user's. Its prompt is still the model's: nothing armed, no new turn."""
    nested = agent(env, "user", [{"event": "SessionStart", "source": "resume"},
                                 {"event": "UserPromptSubmit", "prompt": RECALL, "prompt_id": "resumed-p"},
                                 {"event": "PreToolUse", "tool_name": CONTEXT, "tool_input": {},
                                  "tool_use_id": "toolu_ctx_resumed"}, *search("toolu_r1"), *search("toolu_r2")])  # fmt: skip
    rows = play(env, agent(env, "user", [{"event": "SessionStart", "source": "startup"},
                                         {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"},
                                         *search("toolu_u1"), {"start": nested, "how": "plain"}]))  # fmt: skip
    assert denied(of(rows, "user", "PreToolUse", CONTEXT)[0])
    assert [denied(r) for r in of(rows, "user", "PreToolUse", SEARCH)] == [False, False, True]


def test_three_agents_in_a_loop_share_the_users_turn(env: Env) -> None:
    """Three nested runs one after the other: two searches in the user's turn in all, never more."""
    runs = [{"start": agent(env, f"loop-{n}", [{"event": "SessionStart", "source": "startup"},
                                               {"event": "UserPromptSubmit", "prompt": RECALL}, *search(f"toolu_l{n}")]),
             "how": "plain"} for n in range(3)]  # fmt: skip
    rows = play(env, agent(env, "user", [{"event": "SessionStart", "source": "startup"},
                                         {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"},
                                         *runs]))  # fmt: skip
    allowed = [r for r in rows if r["event"] == "PreToolUse" and not denied(r)]
    assert [r["session"] for r in allowed] == ["loop-0", "loop-1"], [r["session"] for r in allowed]


def test_a_prompt_forged_while_an_agent_runs_gives_it_no_fresh_budget(env: Env) -> None:
    """The nested agent detaches (`setsid -f`, environment emptied) a run of the hook with a prompt for
    the user's session and a prompt id it made up: that turn becomes the session's current one. The
    agent's own next prompt and its searches still count in the user's turn, where it was started."""
    forger = agent(env, "user", [{"event": "UserPromptSubmit", "prompt": "what did we decide about auth?",
                                  "prompt_id": "forged-by-the-model"}])  # fmt: skip
    nested = agent(env, "nested", [{"event": "SessionStart", "source": "startup"},
                                   {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"},
                                   *search("toolu_f1"), {"start": forger, "how": "setsid-scrubbed"},
                                   {"event": "UserPromptSubmit", "prompt": "and about the tokens?"},
                                   *search("toolu_f2"), *search("toolu_f3")])  # fmt: skip
    rows = play(env, agent(env, "user", [{"event": "SessionStart", "source": "startup"},
                                         {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"},
                                         {"start": nested, "how": "plain"}]))  # fmt: skip
    assert len(of(rows, "user", "UserPromptSubmit")) == 2, "the forged prompt was decided"
    assert [denied(r) for r in of(rows, "nested", "PreToolUse", SEARCH)] == [False, False, True]


def test_a_marker_that_names_no_live_process_is_ignored(env: Env) -> None:
    """A stale marker (the process of a governed session that has ended) or a made-up one ties the
    session to nothing: a person's shell that kept an old value still arms their own recall."""
    play(env, agent(env, "old", [{"event": "SessionStart", "source": "startup"},
                                 {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"}]))  # fmt: skip
    with sqlite3.connect(env.state / "ledger.db") as db:
        (ended,) = db.execute("SELECT process FROM processes").fetchone()
    for number, marker in enumerate((ended, "00000000:1:1", "not a key")):
        plan = agent(env, f"p-{number}", nested_run(f"forged{number}"))
        plan["env"] = {**env.vars, "MEMORY_GOVERNOR_PARENT": marker}
        rows = play(env, plan)
        assert not denied(of(rows, plan["session"], "PreToolUse", CONTEXT)[-1]), marker


def test_detached_and_scrubbed_runs_meet_the_window(env: Env) -> None:
    """A run both detached (`setsid -f`) and stripped of its environment cannot be told from a person's
    own: each gets a turn of its own. The shipped per-user window (20 searches in 30 minutes) is what
    bounds them: ten such runs of two searches each, and the eleventh is refused, saying why."""
    runs = [{"start": agent(env, f"escape-{n}", [{"event": "SessionStart", "source": "startup"},
                                                 *search(f"toolu_e{n}a"), *search(f"toolu_e{n}b")]),
             "how": "setsid-scrubbed"} for n in range(11)]  # fmt: skip
    rows = play(env, agent(env, "user", [{"event": "SessionStart", "source": "startup"},
                                         {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"},
                                         *runs]))  # fmt: skip
    searches = [r for r in rows if r["event"] == "PreToolUse"]
    allowed = [r["session"] for r in searches if not denied(r)]
    assert len(allowed) == 20 and set(allowed) == {f"escape-{n}" for n in range(10)}, allowed
    last = [r for r in searches if r["session"] == "escape-10"]
    assert all(denied(r) and "your memory window is spent: 20 searches of 20" in reason(r) for r in last)


def test_a_hook_run_by_hand_in_a_persons_shell_names_no_process(env: Env) -> None:
    """A person who pipes an event into the hook at their own (interactive) shell runs no session: the
    shell, and the terminal above it, are never recorded as a session's own process, so agents the
    person later starts from that shell are their own."""
    payload = json.dumps({"session_id": "by-hand", "transcript_path": "/dev/null", "cwd": str(env.project),
                          "hook_event_name": "UserPromptSubmit", "prompt": "what did we decide about auth?"})  # fmt: skip
    line = f"echo {shlex.quote(payload)} | {shlex.join(HOOK)}\nexit\n"
    subprocess.run(["bash", "--norc", "--noprofile", "-i"], input=line, text=True, capture_output=True,
                   env={**os.environ, **env.vars}, cwd=env.project, timeout=120, check=True)  # fmt: skip
    with sqlite3.connect(env.state / "ledger.db") as db:
        assert db.execute("SELECT COUNT(*) FROM decisions WHERE event='prompt'").fetchone()[0] == 1
        assert db.execute("SELECT process FROM processes").fetchall() == []


def test_the_proxys_own_process_is_its_parent_even_a_shell() -> None:
    """The MCP proxy is started by its client with no shell between (its adapter's STARTED_DIRECTLY):
    its parent is its session's own process, exactly. One a model starts from its shell is then seen
    under the model's harness (here, this test process), not as that harness's own session."""
    from governor import harnesses
    from governor.runtime.lineage import key_of

    assert harnesses.adapter("mcp-proxy").STARTED_DIRECTLY
    probe = ("import json, os, sys; sys.path.insert(0, sys.argv[1]); from governor.runtime.lineage import of, key_of; "
             "x = of(os.getpid(), {}, direct=True); print(json.dumps([x.own, list(x.above), key_of(os.getppid())]))")  # fmt: skip
    line = f"{shlex.join([sys.executable, '-c', probe, str(ROOT)])}; true"  # `; true`: bash forks, it stays the parent
    out = subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=True, timeout=60)
    own, above, shell = json.loads(out.stdout)
    assert own == shell and key_of(os.getpid()) in above


def test_a_resume_the_model_starts_arms_nothing_and_a_persons_does(env: Env) -> None:
    """`claude -p --resume <an earlier session>` from the model's shell: its session start is the
    model's doing, so the resume trigger stays unarmed; the same resume from a person's terminal arms it
    (a policy that arms it at once, `min_idle_minutes: 0`)."""
    env.write(".memory-governor/policy.yaml",
              "mem_context:\n  unlocked_by:\n    session_resume: {scope: next_turn, uses: 1, min_idle_minutes: 0}\n")  # fmt: skip
    play(env, agent(env, "earlier", [{"event": "SessionStart", "source": "startup"},
                                     {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"}]))  # fmt: skip
    resumed = [{"event": "SessionStart", "source": "resume"},
               {"event": "PreToolUse", "tool_name": CONTEXT, "tool_input": {}, "tool_use_id": "toolu_ctx_resume"}]  # fmt: skip
    rows = play(env, agent(env, "user", [{"event": "SessionStart", "source": "startup"},
                                         {"event": "UserPromptSubmit", "prompt": "what did we decide about auth?"},
                                         {"start": agent(env, "earlier", resumed), "how": "plain"}]))  # fmt: skip
    assert denied(of(rows, "earlier", "PreToolUse", CONTEXT)[-1]), "a resume the model started armed session_resume"
    mine = play(env, agent(env, "earlier", [{**resumed[0]}, {**resumed[1], "tool_use_id": "toolu_ctx_mine"}]))
    assert not denied(of(mine, "earlier", "PreToolUse", CONTEXT)[-1]), "a person's own resume must arm it"
