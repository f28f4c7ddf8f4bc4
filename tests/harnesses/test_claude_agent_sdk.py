"""The Claude Agent SDK's in-process callbacks (governor.sdk.claude_agent), fed the payloads the
SDK hands them, beside the project's Claude Code hook run as a process on the same events."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governor.engine import tokens
from governor.engine.ledger import key
from governor.engine.stores import open_ledger
from governor.sdk.claude_agent import callback_for
from tests.conftest import WHOLE_HITS, Env, fixture_text, run_hook
from tests.harnesses.test_claude_code import big_search

SDK_HOOKS = {"CLAUDE_CODE_ENTRYPOINT": "sdk-py"}  # what the SDK's binary hands its command hooks


@pytest.fixture(autouse=True)
def _table_folder_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """callback_for points this process's counting at the sandbox's table (load_quickly); the
    sandbox is removed after the test, so the next test starts where this one did."""
    monkeypatch.setattr(tokens, "_quick_folder", tokens._quick_folder)


def _payload(env: Env, name: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": "sdk-1", "transcript_path": str(env.tmp / "t.jsonl"), "cwd": str(env.project),
            "hook_event_name": name, "permission_mode": "default", "prompt_id": "prompt-1", **fields}  # fmt: skip


def _callback(env: Env):  # type: ignore[no-untyped-def]
    return callback_for({**env.vars, "CLAUDE_PROJECT_DIR": str(env.project)})


def _search(env: Env, call: str, limit: int = 10) -> dict[str, Any]:
    return _payload(env, "PreToolUse", tool_name="mcp__engram__mem_search", tool_use_id=call,
                    tool_input={"query": f"q {call}", "limit": limit})  # fmt: skip


def _usage(env: Env) -> dict[str, int]:
    ledger = open_ledger(str(env.state))
    try:
        turn = ledger.one("SELECT turn FROM sessions")[0]
        return ledger.usage(key("sdk-1"), turn, 1e12)
    finally:
        ledger.close()


def test_four_parallel_callbacks_two_clamped_two_refused(env: Env) -> None:
    callback = _callback(env)

    async def run() -> list[dict[str, Any]]:
        await callback(_payload(env, "UserPromptSubmit", prompt="what did we decide about auth?"), None, None)
        calls = [callback(_search(env, f"toolu_{i}"), f"toolu_{i}", None) for i in range(4)]
        return list(await asyncio.gather(*calls))

    answers = [a.get("hookSpecificOutput", {}) for a in asyncio.run(run())]
    assert sorted(a.get("permissionDecision", "") for a in answers) == ["", "", "deny", "deny"], answers
    assert [a["updatedInput"]["limit"] for a in answers if "updatedInput" in a] == [3, 3]
    assert _usage(env)["search"] == 2


def test_a_held_back_change_reaches_the_programs_stderr_once_per_session(env: Env,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from tests.test_trust import _git

    _git(env, "init", "-q")
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: 2\n")
    _git(env, "add", ".")
    _git(env, "commit", "-qm", "team policy")
    callback = _callback(env)
    asyncio.run(callback(_payload(env, "SessionStart", session_id="sdk-0", source="startup"), None, None))
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: 5\n")
    _git(env, "commit", "-qam", "five searches")
    capsys.readouterr()

    async def run() -> None:
        await callback(_payload(env, "SessionStart", source="startup"), None, None)
        await callback(_payload(env, "UserPromptSubmit", prompt="what did we decide about auth?"), None, None)
        for i in range(4):
            await callback(_search(env, f"toolu_{i}"), f"toolu_{i}", None)

    asyncio.run(run())
    assert capsys.readouterr().err.count("held back") == 1


def test_a_call_both_observers_see_is_decided_and_counted_once(env: Env) -> None:
    callback = _callback(env)
    # The prompt: the callback first; the hook process's look adds no second turn, advice or count.
    prompt = _payload(env, "UserPromptSubmit", prompt="what did we decide about caching?")
    asyncio.run(callback(prompt, None, None))
    assert run_hook(env, prompt, extra_env=SDK_HOOKS).silent
    # Before the call: the callback first clamps; the hook process, second, adds no answer.
    first = asyncio.run(callback(_search(env, "toolu_a"), "toolu_a", None))
    assert first["hookSpecificOutput"]["updatedInput"]["limit"] == 3
    assert run_hook(env, _search(env, "toolu_a"), extra_env=SDK_HOOKS).silent
    # A call the hook process refused first stays refused in its words alone.
    run_hook(env, _search(env, "toolu_b", 3), extra_env=SDK_HOOKS)
    refused = run_hook(env, _search(env, "toolu_c", 3), extra_env=SDK_HOOKS)
    assert refused.denied and "max_search_calls" in refused.reason
    assert asyncio.run(callback(_search(env, "toolu_c", 3), "toolu_c", None)) == {}
    assert _usage(env)["search"] == 2
    # After: the callback trims the result; the hook process's look does not count it again or
    # turn the entries just delivered into pointers.
    result = _payload(env, "PostToolUse", tool_name="mcp__engram__mem_search", tool_use_id="toolu_a",
                      tool_input={"query": "q toolu_a", "limit": 3},
                      tool_response=[{"type": "text", "text": big_search(3)}])  # fmt: skip
    asyncio.run(callback(result, "toolu_a", None))
    before = _usage(env)
    assert before["tokens"] > 0
    assert run_hook(env, result, extra_env=SDK_HOOKS).silent
    assert _usage(env) == before
    ledger = open_ledger(str(env.state))
    try:
        rows = ledger.q("SELECT event, harness FROM decisions WHERE event IN ('prompt', 'post_tool')")
    finally:
        ledger.close()
    assert sorted(rows) == [("post_tool", "claude-agent-sdk"), ("prompt", "claude-agent-sdk")], rows


def test_the_same_events_from_a_plain_claude_code_hook_are_not_twins(env: Env) -> None:
    # Without the SDK's entrypoint a repeated result is counted as it always was: the rule is the SDK's.
    run_hook(env, _payload(env, "UserPromptSubmit", prompt="what did we decide about caching?"))
    run_hook(env, _search(env, "toolu_a", 3))
    result = _payload(env, "PostToolUse", tool_name="mcp__engram__mem_search", tool_use_id="toolu_a",
                      tool_input={"query": "q toolu_a", "limit": 3},
                      tool_response=[{"type": "text", "text": big_search(3)}])  # fmt: skip
    run_hook(env, result)
    run_hook(env, result)
    ledger = open_ledger(str(env.state))
    try:
        posts = ledger.q("SELECT COUNT(*) FROM decisions WHERE event='post_tool'")[0][0]
    finally:
        ledger.close()
    assert posts == 2


# -- the TypeScript SDK's module (memory-governor.mjs), run by node ----------------------------


def _node_callbacks(env: Env, module: Path, payloads: list[dict[str, Any]], extra: dict[str, str] | None = None,
                    parallel: bool = False) -> list[Any]:  # fmt: skip
    """govern()'s callback for PreToolUse, called by node on each payload (at once when `parallel`); its answers."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: the TypeScript module's tests need node")
    script = (
        "const { govern } = await import(process.argv[1]);\n"
        "const own = async () => ({});\n"
        "const options = govern({ cwd: process.argv[2], env: { ...process.env }, hooks: { PreToolUse: [{ hooks: [own] }] } });\n"
        "if (options.hooks.PreToolUse.length !== 2 || options.hooks.PreToolUse[0].hooks[0] !== own) throw new Error('hooks lost');\n"
        "const ours = (event) => options.hooks[event][options.hooks[event].length - 1].hooks[0];\n"
        "const payloads = JSON.parse(process.argv[3]);\n"
        "const call = (p) => ours(p.hook_event_name)(p, p.tool_use_id, { signal: AbortSignal.timeout(30000) });\n"
        f"const answers = {'await Promise.all(payloads.map(call))' if parallel else '[]'};\n"
        f"{'' if parallel else 'for (const p of payloads) answers.push(await call(p));'}\n"
        "console.log(JSON.stringify(answers));\n"
    )  # fmt: skip
    proc = subprocess.run([node, "--input-type=module", "-e", script, module.as_uri(), str(env.project),
                           json.dumps(payloads)], capture_output=True, text=True, timeout=120,
                          env={**env.vars, **(extra or {})})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_typescript_module_decides_through_the_hook_process_and_keeps_the_callers_hooks(env: Env) -> None:
    env.cli("install", "claude-agent-sdk", "--project", str(env.tmp), check=True)
    module = env.tmp / "memory-governor.mjs"
    prompt = _payload(env, "UserPromptSubmit", prompt="what did we decide about auth?")
    answers = _node_callbacks(env, module, [prompt, *[_search(env, f"toolu_{i}") for i in range(4)]])
    pre = [a.get("hookSpecificOutput", {}) for a in answers[1:]]
    assert [a.get("permissionDecision") for a in pre] == [None, None, "deny", "deny"], answers
    assert [a["updatedInput"]["limit"] for a in pre[:2]] == [3, 3]
    assert _usage(env)["search"] == 2


def test_the_typescript_module_applies_on_error_when_no_governor_answers(env: Env) -> None:
    env.cli("install", "claude-agent-sdk", "--project", str(env.tmp), check=True)
    module = env.tmp / "memory-governor.mjs"
    text = module.read_text()
    config = json.loads(text.split("const CONFIG = ", 1)[1].split(" // memory-governor:", 1)[0])
    config["command"] = [str(env.tmp / "no-such-python"), *config["command"][1:]]
    module.write_text(text.replace(text.split("const CONFIG = ", 1)[1].split(" // memory-governor:", 1)[0],
                                   json.dumps(config), 1))  # fmt: skip
    answers = _node_callbacks(env, module, [_search(env, "toolu_a"),
                                            _payload(env, "PreToolUse", tool_name="Bash", tool_use_id="toolu_b",
                                                     tool_input={"command": "ls"})])  # fmt: skip
    refused, other = answers
    assert refused["hookSpecificOutput"]["permissionDecision"] == "deny"
    # No policy could be read (no governor ran at all): closed, for the memory call only.
    assert refused["hookSpecificOutput"]["permissionDecisionReason"].startswith(
        "memory-governor could not check this memory call (the governor could not be reached)"
    )
    assert other == {}


def test_install_writes_the_module_once_and_never_over_a_file_not_ours(env: Env) -> None:
    first = env.cli("install", "claude-agent-sdk", "--project", str(env.tmp), check=True)
    assert "wrote the TypeScript SDK module" in first.stdout
    assert "already installed" in env.cli("install", "claude-agent-sdk", "--project", str(env.tmp), check=True).stdout
    env.cli("uninstall", "claude-agent-sdk", "--project", str(env.tmp), check=True)
    assert not (env.tmp / "memory-governor.mjs").exists()
    (env.tmp / "memory-governor.mjs").write_text("export const mine = 1\n")
    refused = env.cli("install", "claude-agent-sdk", "--project", str(env.tmp))
    assert refused.returncode != 0 and "not memory-governor's" in refused.stderr
    assert (env.tmp / "memory-governor.mjs").read_text() == "export const mine = 1\n"


# An SDK user's program, from importing the module to its callbacks' answers: each payload on stdin
# (one JSON object a line) decided in turn; `warm` starts govern()'s warm-up first and, after the
# first callback, waits for it. It prints what each answer was and how this process counts.
PROGRAM = """
import asyncio, json, sys
from governor.sdk import claude_agent
from governor.engine import tokens
env, project, warm = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3] == "warm"
callback = claude_agent.callback_for(env)
thread = claude_agent.warm_up(env, project) if warm else None
for number, line in enumerate(sys.stdin):
    payload = json.loads(line)
    answer = asyncio.run(callback(payload, payload.get("tool_use_id"), None))
    if thread is not None and number == 0:
        thread.join()
        assert claude_agent.warm_up(env, project) is None  # once per state directory and project
    counting = tokens.counter("o200k_base")
    print(json.dumps({"answer": answer, "tiktoken": "tiktoken" in sys.modules, "table": counting.quick}))
"""


def _program(env: Env, payloads: list[dict[str, Any]], warm: bool = False) -> list[dict[str, Any]]:
    decide_env = {**env.vars, "CLAUDE_PROJECT_DIR": str(env.project)}
    proc = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(decide_env), str(env.project), "warm" * warm],
                          input="".join(json.dumps(p) + "\n" for p in payloads), capture_output=True, text=True,
                          cwd=env.tmp, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _result(env: Env, call: str, text: str) -> dict[str, Any]:
    return _payload(env, "PostToolUse", tool_name="mcp__engram__mem_search", tool_use_id=call,
                    tool_input={"query": "auth", "limit": 3}, tool_response=[{"type": "text", "text": text}])  # fmt: skip


def _counted(env: Env, call: str) -> list[int]:
    with sqlite3.connect(env.state / "ledger.db") as db:
        return [row[0] for row in db.execute("SELECT tokens FROM calls WHERE call_id LIKE ?", ("%" + call,))]


RESULTS = [fixture_text("engram/search_v1.txt"),
           fixture_text("engram/search_v1.txt").replace("JWT", "JWT — naïve 日本語 👍🏽 don'T")]  # fmt: skip


def test_a_fresh_processs_first_result_is_counted_exactly_without_tiktoken(env: Env) -> None:
    """The first PostToolUse callback of a program counts its result from the table under the state
    directory (load_quickly), as a hook deciding alone does: tiktoken's count, recorded in the
    ledger, with tiktoken never loaded in that process."""
    env.write(".memory-governor/policy.yaml", "token_counter: o200k_base\n" + WHOLE_HITS)
    reference = tokens._encoding("o200k_base")
    for number, text in enumerate(RESULTS):
        call = f"toolu_first_{number}"
        (shown,) = _program(env, [{**_result(env, call, text), "session_id": f"sdk-fresh-{number}"}])
        assert shown == {"answer": {}, "tiktoken": False, "table": True}
        assert _counted(env, call) == [len(reference.encode_ordinary(text))], text[:80]


def test_after_govern_s_warm_up_the_program_counts_with_tiktoken_and_alike(env: Env) -> None:
    """govern()'s warm-up moves the counter to tiktoken once loaded: a result counted while it runs
    (from the table, or by tiktoken if it finished first) and one counted after it are both
    tiktoken's count."""
    env.write(".memory-governor/policy.yaml", "token_counter: o200k_base\n" + WHOLE_HITS)
    reference = tokens._encoding("o200k_base")
    calls = ["toolu_before", "toolu_after"]
    payloads = [
        {**_result(env, call, text), "session_id": f"sdk-{call}"} for call, text in zip(calls, RESULTS, strict=True)
    ]
    shown = _program(env, payloads, warm=True)  # each in a session of its own: no repeat to point at
    assert [(s["tiktoken"], s["table"]) for s in shown] == [(True, False), (True, False)]
    for call, text in zip(calls, RESULTS, strict=True):
        assert _counted(env, call) == [len(reference.encode_ordinary(text))], text[:80]
