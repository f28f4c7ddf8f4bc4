"""The Qwen Code hook under the shipped policy, driven as a process with Qwen Code's real payloads.

The payload shapes are those the pinned binary (0.24.4) sent in tests/e2e (docs/qwen-code.md):
`prompt_id` as the turn id, `tool_use_id` as the call id, `tool_response` as {llmContent: [{text}],
returnDisplay}, and a UserPromptSubmit with an empty prompt before each later model request of a
prompt. Qwen applies no `updatedInput`, so a clamp is a refusal that names the arguments to call
again with, and counts nothing; a result is replaced by `continue: false` with the text as its
`stopReason`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from governor.harnesses.payload import BadPayload
from governor.harnesses.qwen_code import parse
from tests.conftest import ROOT, Answer, Env, fixture_text, hook_run

HOOK = [sys.executable, "-I", "-S", str(ROOT / "governor" / "runtime" / "entry.py"), "qwen-code"]
SEARCH = fixture_text("engram/search_v1.txt")
CONTEXT = fixture_text("engram/context_v1.txt")
SESSION = "3524f039-8e15-46aa-8762-bf38edc47cb0"


class Qwen:
    """A Qwen Code session driven through the hook process, event by event."""

    def __init__(self, env: Env) -> None:
        self.env, self.prompts, self.calls = env, 0, 0

    def event(self, name: str, **fields: Any) -> Answer:
        payload = {"session_id": SESSION, "cwd": str(self.env.project), "hook_event_name": name,
                   "transcript_path": f"/home/u/.qwen/projects/p/chats/{SESSION}.jsonl", "permission_mode": "yolo",
                   "timestamp": "2026-12-06T16:56:47.221Z", "prompt_id": f"{SESSION}########{self.prompts - 1}",
                   **fields}  # fmt: skip
        data = json.dumps(payload).encode()
        return Answer(hook_run(HOOK, data, {**self.env.vars, "QWEN_PROJECT_DIR": str(self.env.project)},
                               self.env.project))  # fmt: skip

    def prompt(self, text: str) -> Answer:
        self.prompts += 1
        return self.event("UserPromptSubmit", prompt=text, submitted_prompt=text)

    def next_request(self) -> Answer:
        """What Qwen sends before each later model request of the same prompt."""
        return self.event("UserPromptSubmit", prompt="")

    def pre(self, tool: str, **tool_input: Any) -> tuple[str, Answer]:
        self.calls += 1
        call = f"toolu_1796576211124_{self.calls:09d}"
        return call, self.event("PreToolUse", tool_name=f"mcp__engram__{tool}", tool_input=tool_input,
                                tool_use_id=call, tool_call_id=f"call_{self.calls}")  # fmt: skip

    def post(self, call: str, tool: str, text: str, **tool_input: Any) -> Answer:
        return self.event("PostToolUse", tool_name=f"mcp__engram__{tool}", tool_input=tool_input, tool_use_id=call,
                          tool_response={"llmContent": [{"text": text}], "returnDisplay": text})  # fmt: skip


@pytest.fixture
def qwen(env: Env) -> Qwen:
    return Qwen(env)


def test_payloads_read_as_qwen_sends_them() -> None:
    pre = parse({"session_id": "s", "hook_event_name": "PreToolUse", "prompt_id": "s########0", "cwd": "/p",
                 "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "q"}, "tool_use_id": "toolu_1"})  # fmt: skip
    assert pre is not None and (pre.turn_id, pre.call_id, pre.server, pre.tool) == ("s########0", "toolu_1", "engram",
                                                                                     "mem_search")  # fmt: skip
    assert pre.no_rewrite, "Qwen applies no updatedInput"
    post = parse({"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "mcp__engram__mem_search",
                  "tool_use_id": "toolu_1", "tool_response": {"llmContent": [{"text": "Found 1"}, {"text": "x"}],
                                                              "returnDisplay": "Found 1"}})  # fmt: skip
    assert post is not None and post.tool_result == "Found 1\nx"
    again = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt_id": "s########0", "prompt": ""}
    assert parse(again) is None, "the same prompt's next model request is no prompt"
    with pytest.raises(BadPayload):
        parse({"hook_event_name": "PreToolUse", "tool_name": "mcp__engram__mem_search"})


def test_a_clamp_is_a_refusal_naming_the_limit_that_counts_nothing(qwen: Qwen) -> None:
    assert "memory_need=" in qwen.prompt("what did we decide about caching?").context
    _, clamp = qwen.pre("mem_search", query="cache", limit=10)
    assert clamp.denied and clamp.updated_input is None, "never an allow, never an ignored updatedInput"
    assert 'again with {"limit": 3}' in clamp.reason and "counts nothing" in clamp.reason, clamp.reason
    assert qwen.next_request().silent, "no advice mid-turn"
    for query in ("cache", "auth"):
        call, answer = qwen.pre("mem_search", query=query, limit=3)
        assert answer.silent, answer.raw
        qwen.post(call, "mem_search", SEARCH, query=query, limit=3)
    _, third = qwen.pre("mem_search", query="storage", limit=3)
    assert third.denied and "max_search_calls=2" in third.reason, "the refused clamp took no slot"


def test_an_over_budget_result_is_replaced_by_stopping_the_call_with_the_trimmed_text(qwen: Qwen) -> None:
    qwen.prompt("give me all context")
    context = {"compact": True, "max_bytes": 100000}
    _, bounded = qwen.pre("mem_context", **context)
    assert bounded.denied and '"max_bytes": ' in bounded.reason
    asked = {**context, **json.loads(bounded.reason.split(" again with ", 1)[1].split(", the other", 1)[0])}
    call, allowed = qwen.pre("mem_context", **asked)
    assert allowed.silent, f"the recall trigger survived the refused clamp: {allowed.raw}"
    many = "".join(f"- [decision] **Decision {i}**: **What**: {' '.join(f'w{i}x{j}' for j in range(60))}\n"
                   for i in range(40))  # fmt: skip
    dump = CONTEXT.replace("### Recent Observations\n", f"### Recent Observations\n{many}")
    answer = qwen.post(call, "mem_context", dump, **asked)
    assert answer.data is not None and answer.data["continue"] is False, answer.raw
    assert answer.data["stopReason"].startswith("## Memory from Previous Sessions")
    assert len(answer.data["stopReason"]) < len(dump) / 2
    _, second = qwen.pre("mem_context", **asked)
    assert second.denied and "is off outside post-compaction recovery" in second.reason
