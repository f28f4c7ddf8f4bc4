"""The Antigravity CLI hook, installed by `memory-governor install antigravity` and run as the process
its hooks file names, on agy's payloads as documented by those who ran real builds (docs/antigravity.md:
`agy` is not run here). agy blocks a call whose hook answers nothing or something malformed, so every
answer here is one `{"decision": ...}` object: `deny` with a reason, else `ask` (agy's own review)
before a tool and `allow` after one.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from governor.harnesses.antigravity import parse
from governor.harnesses.payload import BadPayload
from tests.conftest import Env

CONVERSATION = "6f1d2c3e-0a4b-4c8d-9e7f-112233445566"


def hooks_file(env: Env) -> Path:
    return env.home / ".gemini" / "config" / "hooks.json"


class Agy:
    """What agy does with the installed hooks file: runs the command of each event's group, with the
    payload on stdin, in ~/.gemini/config, and reads one decision from its stdout."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.step = 0
        hooks = json.loads(hooks_file(env).read_text())["hooks"]
        self.commands = {event: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}

    def run(self, event: str, data: bytes, command: str | None = None) -> dict[str, Any]:
        proc = subprocess.run(["/bin/sh", "-c", command or self.commands[event]], input=data, capture_output=True,
                              env=self.env.vars, cwd=str(hooks_file(self.env).parent), timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert b"Traceback" not in proc.stderr, proc.stderr
        lines = proc.stdout.decode().splitlines()
        assert len(lines) == 1, f"one decision, always: {proc.stdout!r} {proc.stderr!r}"
        answer = json.loads(lines[0])
        assert set(answer) <= {"decision", "reason"}, answer
        assert answer["decision"] in ({"deny", "ask"} if event == "PreToolUse" else {"allow", "deny"}), answer
        return answer

    def payload(self, call: Any, **more: Any) -> bytes:
        self.step += 1
        return json.dumps({"conversationId": CONVERSATION, "stepIdx": self.step, "toolCall": call,
                           "transcriptPath": f"/home/u/.gemini/antigravity/brain/{CONVERSATION}/transcript.jsonl",
                           "workspacePaths": [str(self.env.project)], "artifactDirectoryPath": "/tmp/a",
                           **more}).encode()  # fmt: skip

    def pre(self, name: str, **args: Any) -> dict[str, Any]:
        return self.run("PreToolUse", self.payload({"name": name, "args": args}))

    def post(self, name: str, **args: Any) -> dict[str, Any]:
        return self.run("PostToolUse", self.payload({"name": name, "args": args}, error=""))


@pytest.fixture
def agy(env: Env) -> Agy:
    out = env.cli("install", "antigravity", cwd=env.project)
    assert out.returncode == 0, out.stderr
    return Agy(env)


def test_payloads_read_in_every_spelling_of_a_memory_tool() -> None:
    def pre(call: dict[str, Any]) -> Any:
        payload = {"conversationId": "c", "stepIdx": 3, "toolCall": call, "workspacePaths": ["/p"]}
        return parse({"event": "PreToolUse", "payload": payload})

    for name in ("engram/mem_search", "mcp__engram__mem_search", "mcp_engram_mem_search"):
        event = pre({"name": name, "args": {"query": "q", "limit": 3}})
        assert (event.server, event.tool, event.tool_input, event.project) == (
            "engram", "mem_search", {"query": "q", "limit": 3}, "/p"), name  # fmt: skip
        assert event.no_rewrite and event.whole_result and event.call_id is None and event.call_key
    generic = pre({"name": "call_mcp_tool", "args": {"ServerName": "engram", "ToolName": "mem_search",
                                                     "Arguments": '{"query": "q", "limit": 3}'}})  # fmt: skip
    assert (generic.tool_name, generic.tool_input) == ("engram/mem_search", {"query": "q", "limit": 3})
    native = pre({"name": "run_command", "args": {"CommandLine": "ls"}})
    assert (native.server, native.tool) == (None, None)
    failed = parse({"event": "PostToolUse", "payload": {"conversationId": "c", "error": "boom",
                                                        "toolCall": {"name": "engram/mem_search", "args": {}}}})  # fmt: skip
    assert failed is not None and failed.kind == "tool_failed"
    assert parse({"event": "PostToolUse", "payload": {"conversationId": "c", "toolCall": None}}) is None
    with pytest.raises(BadPayload):
        pre({"name": "call_mcp_tool", "args": {"ServerName": "engram", "ToolName": "mem_search", "Arguments": "{"}})


def test_install_writes_only_the_documented_keys_keeps_other_hooks_and_is_reversible(env: Env) -> None:
    path = hooks_file(env)
    path.parent.mkdir(parents=True)
    theirs = {"hooks": {"PreToolUse": [{"matcher": "run_command", "hooks": [{"type": "command", "command": "audit"}]}]}}
    path.write_text(json.dumps(theirs))
    for _ in range(2):
        assert env.cli("install", "antigravity", cwd=env.project).returncode == 0
        data = json.loads(path.read_text())
        assert set(data) == {"hooks"} and set(data["hooks"]) == {"PreToolUse", "PostToolUse"}
        assert data["hooks"]["PreToolUse"][0] == theirs["hooks"]["PreToolUse"][0], "their hook kept, first"
        ours = [g for groups in data["hooks"].values() for g in groups if "antigravity" in g["hooks"][0]["command"]]
        assert len(ours) == 2, "installed twice, written once"
        for group in ours:
            assert set(group) == {"matcher", "hooks"} and group["matcher"] == ""
            assert [set(hook) for hook in group["hooks"]] == [{"type", "command"}]
    assert data["hooks"]["PostToolUse"][0]["hooks"][0]["command"].endswith(" antigravity PostToolUse")
    doctor = env.cli("doctor", cwd=env.project)
    assert "a search with limit 10 refused" in doctor.stdout, doctor.stdout + doctor.stderr
    assert env.cli("uninstall", "antigravity", cwd=env.project).returncode == 0
    assert json.loads(path.read_text()) == theirs


def test_ungoverned_tools_are_left_to_agys_own_review(agy: Agy) -> None:
    assert agy.pre("run_command", CommandLine="python -m pytest", Cwd="/p", SafeToAutoRun=False) == {"decision": "ask"}
    assert agy.pre("view_file", AbsolutePath="/p/README.md") == {"decision": "ask"}
    assert agy.post("view_file", AbsolutePath="/p/README.md") == {"decision": "allow"}


def test_a_search_over_the_limit_is_refused_naming_the_arguments_and_the_turn_cap_holds(agy: Agy) -> None:
    clamp = agy.pre("engram/mem_search", query="cache", limit=10)
    assert clamp["decision"] == "deny" and 'again with {"limit": 3}' in clamp["reason"], clamp
    assert "counts nothing" in clamp["reason"]
    generic = agy.pre("call_mcp_tool", ServerName="engram", ToolName="mem_search",
                      Arguments={"query": "cache", "limit": 10})  # fmt: skip
    assert generic["decision"] == "deny" and '"limit": 3' in generic["reason"], "the generic tool is the same call"
    for query in ("cache", "auth"):
        assert agy.pre("engram/mem_search", query=query, limit=3) == {"decision": "ask"}, "never allow: agy's review"
        assert agy.post("engram/mem_search", query=query, limit=3) == {"decision": "allow"}
    third = agy.pre("engram/mem_search", query="storage", limit=3)
    assert third["decision"] == "deny" and "max_search_calls=2" in third["reason"], "the refused clamps took no slot"


def test_a_guessed_fetch_is_refused(agy: Agy) -> None:
    guessed = agy.pre("engram/mem_get_observation", id=62)
    assert guessed["decision"] == "deny" and "id=62 was not surfaced" in guessed["reason"], guessed


@pytest.mark.parametrize("data", [b"not json", b"", b"[]", b"{}", b'{"conversationId": "c", "toolCall": "x"}',
                                  b'{"conversationId": 7, "toolCall": {"name": "engram/mem_search"}}'])  # fmt: skip
def test_bad_input_still_gets_one_decision(agy: Agy, env: Env, data: bytes) -> None:
    agy.run("PreToolUse", data)
    agy.run("PostToolUse", data)


def test_an_internal_failure_and_a_command_naming_no_event_still_answer(agy: Agy, env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits: [not, a, mapping]\n")
    assert agy.pre("engram/mem_search", query="q", limit=3)["decision"] in ("ask", "deny"), "no valid policy"
    assert agy.pre("run_command", CommandLine="ls")["decision"] in ("ask", "deny")
    bare = agy.commands["PreToolUse"].removesuffix(" PreToolUse")
    assert agy.run("PreToolUse", agy.payload({"name": "run_command", "args": {}}), bare)["decision"] in ("ask", "deny")
    null_call = agy.run("PostToolUse", agy.payload(None, error=""))
    assert null_call == {"decision": "allow"}
