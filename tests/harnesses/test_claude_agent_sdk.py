"""The Claude Agent SDK's in-process callbacks (governor.sdk.claude_agent), fed the payloads the
SDK hands them, beside the project's Claude Code hook run as a process on the same events."""

from __future__ import annotations

import asyncio
from typing import Any

from governor.engine.ledger import key
from governor.engine.stores import open_ledger
from governor.sdk.claude_agent import callback_for
from tests.conftest import Env, run_hook
from tests.harnesses.test_claude_code import big_search

SDK_HOOKS = {"CLAUDE_CODE_ENTRYPOINT": "sdk-py"}  # what the SDK's binary hands its command hooks


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
