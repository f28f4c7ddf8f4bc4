"""VS Code's agent hooks, at payload level: the hook file `install copilot` writes, as VS Code runs it.

VS Code (a preview; it cannot be run headless here, so these payloads are its documented ones:
docs/vscode.md) runs `.github/hooks/*.json` and `~/.copilot/hooks` for every tool call, matchers
ignored, mapping Copilot's `bash` command to its `linux` one, with a payload of its own
(`hookEventName`, `sessionId`, `tool_name`, `tool_input`, `tool_use_id`, PostToolUse's
`tool_response` string) and answers inside `hookSpecificOutput`. These tests run the installed
command through bash, as VS Code does, and the hook process it starts.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.conftest import Env, fixture_text

SEARCH = fixture_text("engram/search_v1.txt")


class VSCode:
    """One VS Code chat session, its hooks run as VS Code runs the installed file's commands."""

    def __init__(self, env: Env, file: str = ".github/hooks/memory-governor.json") -> None:
        env.cli("install", "copilot", *(("--scope", "user") if file.startswith("~") else ()), check=True)
        path = env.home / file[2:] if file.startswith("~") else env.project / file
        self.hooks = json.loads(path.read_text())["hooks"]
        self.env = env

    def send(self, event: str, **fields: Any) -> dict[str, Any] | None:
        """`event` as VS Code names it; the command of the installed file's camelCase event."""
        camel = event[0].lower() + event[1:]
        camel = {"userPromptSubmit": "userPromptSubmitted"}.get(camel, camel)
        payload = {"timestamp": "2026-12-06T10:30:00.000Z", "cwd": str(self.env.project), "sessionId": "vs-1",
                   "hookEventName": event, "transcript_path": str(self.env.tmp / "t.json"), **fields}  # fmt: skip
        command = self.hooks[camel][0]["bash"]
        proc = subprocess.run(["bash", "-c", command], input=json.dumps(payload).encode(), capture_output=True,
                              timeout=60, cwd=self.env.project, env=self.env.vars)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout.decode()
        assert b"Traceback" not in proc.stderr and '"allow"' not in text and text.count("\n") <= 1, proc
        return json.loads(text) if text.strip() else None

    def pre(self, tool: str, call: str, **args: Any) -> dict[str, Any] | None:
        return self.send("PreToolUse", tool_name=tool, tool_input=args, tool_use_id=call)


def denial(answer: dict[str, Any] | None) -> str:
    inner = (answer or {}).get("hookSpecificOutput") or {}
    assert inner.get("hookEventName") == "PreToolUse" and inner.get("permissionDecision") == "deny", answer
    assert "permissionDecision" not in (answer or {}), "VS Code reads it inside hookSpecificOutput"
    return str(inner["permissionDecisionReason"])


def test_a_tool_the_policy_does_not_govern_is_answered_with_nothing(env: Env) -> None:
    vs = VSCode(env)
    vs.send("UserPromptSubmit", prompt="rename the helper")
    assert vs.pre("replace_string_in_file", "t1", filePath="src/a.ts", oldString="a", newString="b") is None
    assert vs.pre("run_in_terminal", "t2", command="npm test", explanation="tests") is None
    assert vs.send("PostToolUse", tool_name="read_file", tool_input={"filePath": "a"}, tool_use_id="t3",
                   tool_response="file text") is None  # fmt: skip


def test_memory_searches_are_refused_with_the_arguments_to_use_then_capped(env: Env) -> None:
    vs = VSCode(env)
    vs.send("UserPromptSubmit", prompt="what did we decide about auth?")
    clamp = denial(vs.pre("mcp_engram_mem_search", "t1", query="auth", limit=10))
    assert '{"limit": 3}' in clamp and "counts nothing" in clamp, clamp
    for i in (2, 3):
        assert vs.pre("mcp_engram_mem_search", f"t{i}", query=f"auth {i}", limit=3) is None
        assert vs.send("PostToolUse", tool_name="mcp_engram_mem_search", tool_input={"query": f"auth {i}", "limit": 3},
                       tool_use_id=f"t{i}", tool_response=SEARCH) is None  # fmt: skip
    assert "max_search_calls" in denial(vs.pre("mcp_engram_mem_search", "t4", query="more", limit=3))
    assert "was not surfaced" in denial(vs.pre("mcp_engram_mem_get_observation", "t5", id=99999))


def test_a_result_past_the_budget_reaches_the_model_whole_and_the_user_is_told(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "version: 1\nlimits:\n  max_memory_tokens_injected: {value: 200}\n")
    vs = VSCode(env)
    vs.send("UserPromptSubmit", prompt="what did we decide about auth?")
    assert vs.pre("mcp_engram_mem_search", "t1", query="auth", limit=1) is None  # ~146 tokens expected
    answer = vs.send("PostToolUse", tool_name="mcp_engram_mem_search", tool_input={"query": "auth", "limit": 1},
                     tool_use_id="t1", tool_response=SEARCH) or {}  # fmt: skip
    assert "decision" not in answer, "nothing VS Code documents replaces a result: it is not withheld"
    assert "cannot cut a result, so all of it reached the model and was counted" in answer["systemMessage"], answer
    assert "267 of 200" in denial(vs.pre("mcp_engram_mem_search", "t2", query="jwt", limit=3)), "counted whole"


def test_the_claude_code_hooks_vscode_also_runs_count_a_call_once(env: Env) -> None:
    """VS Code runs .claude/settings.json's hooks too: they read the payload as Copilot's adapter does,
    and a call both hook files see (one tool_use_id) is counted once."""
    env.cli("install", "claude-code", check=True)
    claude = json.loads((env.project / ".claude" / "settings.json").read_text())["hooks"]
    vs = VSCode(env)
    vs.send("UserPromptSubmit", prompt="what did we decide about auth?")
    for i in (1, 2):
        assert vs.pre("mcp_engram_mem_search", f"t{i}", query=f"auth {i}", limit=3) is None
        payload = {"timestamp": "2026-12-06T10:30:00.000Z", "cwd": str(env.project), "sessionId": "vs-1",
                   "hookEventName": "PreToolUse", "tool_name": "mcp_engram_mem_search",
                   "tool_input": {"query": f"auth {i}", "limit": 3}, "tool_use_id": f"t{i}"}  # fmt: skip
        command = claude["PreToolUse"][0]["hooks"][0]["command"]
        proc = subprocess.run(["bash", "-c", command], input=json.dumps(payload).encode(), capture_output=True,
                              timeout=60, cwd=env.project, env={**env.vars,
                                                                "CLAUDE_PROJECT_DIR": str(env.project)})  # fmt: skip
        assert proc.returncode == 0 and proc.stdout.strip() == b"", proc
    assert "max_search_calls" in denial(vs.pre("mcp_engram_mem_search", "t3", query="auth 3", limit=3))


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_a_payload_it_cannot_read_follows_on_error_in_vscodes_shape(env: Env, on_error: str) -> None:
    env.write(".memory-governor/policy.yaml", f"version: 1\non_error: {on_error}\n")
    vs = VSCode(env)
    command = vs.hooks["preToolUse"][0]["bash"]
    raw = b'{"hookEventName": "PreToolUse", "sessionId": "vs-1", "tool_name": "mcp_engram_mem_search", "tool_input": {'
    proc = subprocess.run(["bash", "-c", command], input=raw, capture_output=True, timeout=60, cwd=env.project,
                          env=env.vars)  # fmt: skip
    assert proc.returncode == 0, proc
    if on_error == "open":  # let through, visibly
        answer = json.loads(proc.stdout)
        assert "hookSpecificOutput" not in answer and "on_error: open" in answer["systemMessage"], answer
    else:
        assert "could not" in denial(json.loads(proc.stdout)), proc
