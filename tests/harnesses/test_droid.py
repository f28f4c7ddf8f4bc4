"""The Factory Droid hook under the shipped policy, driven as a process with Droid's real payloads.

The payload shapes are those the pinned binary (0.225.2, `droid exec`) sent in tests/e2e
(docs/droid.md): no turn id, no call id, MCP tools named `<server>___<tool>`, `tool_response` the
result's text. Droid applies `updatedInput` only with an allow that skips its own confirmation, and
nothing replaces a result: a clamp is a refusal that names the arguments to call again with, and a
result is counted whole.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from governor.harnesses.droid import parse, split_tool_name, tool_name
from governor.harnesses.payload import BadPayload
from tests.conftest import ROOT, Answer, Env, fixture_text, hook_run

HOOK = [sys.executable, "-I", "-S", str(ROOT / "governor" / "runtime" / "entry.py"), "droid"]
SEARCH = fixture_text("engram/search_v1.txt")
OBSERVATION = fixture_text("engram/observation_v1.txt")
SESSION = "5a0019b1-d38e-4c1d-af9f-558eaa7409e8"


class Droid:
    """A `droid exec` session driven through the hook process, event by event."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def event(self, name: str, **fields: Any) -> Answer:
        payload = {"session_id": SESSION, "cwd": str(self.env.project), "hook_event_name": name,
                   "transcript_path": f"/home/u/.factory/sessions/-p/{SESSION}.jsonl", "permission_mode": "auto-low",
                   **fields}  # fmt: skip
        env = {**self.env.vars, "FACTORY_PROJECT_DIR": str(self.env.project)}
        return Answer(hook_run(HOOK, json.dumps(payload).encode(), env, self.env.project))

    def pre(self, tool: str, **tool_input: Any) -> Answer:
        return self.event("PreToolUse", tool_name=tool_name("engram", tool), tool_input=tool_input)

    def post(self, tool: str, text: str, **tool_input: Any) -> Answer:
        return self.event("PostToolUse", tool_name=tool_name("engram", tool), tool_input=tool_input, tool_response=text)


@pytest.fixture
def droid(env: Env) -> Droid:
    return Droid(env)


def test_payloads_read_as_droid_sends_them() -> None:
    assert split_tool_name("engram___mem_search") == ("engram", "mem_search")
    assert split_tool_name("my_mem___mem_search") == ("my_mem", "mem_search")
    assert split_tool_name("Execute") == (None, None)
    pre = parse({"session_id": "s", "hook_event_name": "PreToolUse", "cwd": "/p", "tool_name": "engram___mem_search",
                 "tool_input": {"query": "q", "limit": 3}}, {"FACTORY_PROJECT_DIR": "/proj"})  # fmt: skip
    assert pre is not None and (pre.server, pre.tool, pre.call_id, pre.turn_id, pre.project) == (
        "engram", "mem_search", None, None, "/proj")  # fmt: skip
    assert pre.call_key and pre.no_rewrite and pre.whole_result
    post = parse({"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "engram___mem_search",
                  "tool_input": {"query": "q", "limit": 3}, "tool_response": "Found 1 memories"})  # fmt: skip
    assert post is not None and post.tool_result == "Found 1 memories" and post.call_key == pre.call_key
    with pytest.raises(BadPayload):
        parse({"hook_event_name": "PreToolUse", "tool_name": "engram___mem_search"})


def test_a_clamp_is_a_refusal_naming_the_limit_and_the_turn_cap_holds(droid: Droid) -> None:
    droid.event("SessionStart", source="startup")
    clamp = droid.pre("mem_search", query="cache", limit=10)
    assert clamp.denied and 'again with {"limit": 3}' in clamp.reason and "counts nothing" in clamp.reason
    assert clamp.updated_input is None, "never an allow: it would skip Droid's own confirmation"
    for query in ("cache", "auth"):
        assert droid.pre("mem_search", query=query, limit=3).silent
        droid.post("mem_search", SEARCH, query=query, limit=3)
    third = droid.pre("mem_search", query="storage", limit=3)
    assert third.denied and "max_search_calls=2" in third.reason, "the refused clamp took no slot"


def test_a_result_past_the_budget_is_counted_whole_and_the_user_told(droid: Droid, env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_memory_tokens_injected: {value: 800, enforce: block}\n")
    droid.event("SessionStart", source="startup")
    assert droid.pre("mem_search", query="jwt", limit=3).silent
    droid.post("mem_search", SEARCH, query="jwt", limit=3)
    fetch = droid.pre("mem_get_observation", id=42)
    assert fetch.silent, fetch.raw
    long = OBSERVATION.replace(
        "**Where**", "**Learned**: " + " ".join(f"detail{i}" for i in range(900)) + "\n**Where**"
    )
    answer = droid.post("mem_get_observation", long, id=42)
    assert answer.output is None and "updatedMCPToolOutput" not in answer.raw, "nothing Droid would apply"
    assert "cannot cut a result, so all of it reached the model" in answer.message, answer.raw
    after = droid.pre("mem_search", query="more", limit=3)
    assert after.denied, "the whole result was counted: the turn has nothing left"
