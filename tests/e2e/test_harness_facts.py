"""What the pinned Claude Code binary does with hooks: the facts memory-governor relies on.

These tests do not use memory-governor at all: a probe hook (probe_hook.py) logs every
payload and answers what the test chose, so a new Claude Code pin that changes one of these
facts fails here, by name, before the governor's own scenarios fail in confusing ways. The
facts are summarised in conftest.py's docstring.
"""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ENGRAM_TOOLS, HERE
from fake_model import dispatch, engram, text, tool_uses

pytestmark = pytest.mark.e2e

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch",
          "PreCompact", "SubagentStart", "SubagentStop", "Stop")  # fmt: skip


def probe(cc, rules: dict) -> None:
    """Hand-written probe hooks on every event (instead of the installer); returns the log to read later."""
    cc.hooks = False
    log = cc.tmp / "probe.jsonl"
    (cc.tmp / "rules.json").write_text(json.dumps(rules))
    cc.env.update({"PROBE_LOG": str(log), "PROBE_RULES": str(cc.tmp / "rules.json")})
    command = f'"{sys.executable}" "{HERE / "probe_hook.py"}"'
    hooks = {event: [{"hooks": [{"type": "command", "command": command, "timeout": 30}]}] for event in EVENTS}
    for event in ("PreToolUse", "PostToolUse"):
        hooks[event][0]["matcher"] = "mcp__engram__.*|Agent|Task"
    cc.write(".claude/settings.json", json.dumps({"hooks": hooks}, indent=2))


def read_log(cc) -> list[dict]:
    path = cc.tmp / "probe.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def payloads(log: list[dict], event: str) -> list[dict]:
    return [entry["payload"] for entry in log if entry["payload"]["hook_event_name"] == event]


def test_hook_answers_and_payloads_in_a_parallel_batch(cc):
    probe(cc, {
        "SessionStart": {"out": {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                        "additionalContext": "SESSION-CONTEXT-MARK"}}},
        "UserPromptSubmit": {"out": {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                            "additionalContext": "PROMPT-CONTEXT-MARK"}}},
        # updatedInput with NO permissionDecision; each hook sleeps so that overlap is visible.
        "PreToolUse:mcp__engram__mem_search": {"sleep": 0.5, "out": {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "updatedInput": {"query": "auth", "limit": 2},
            "additionalContext": "PRE-CONTEXT-MARK"}}},
        "PostToolUse:mcp__engram__mem_search": {"out": {"hookSpecificOutput": {
            "hookEventName": "PostToolUse", "updatedMCPToolOutput": "REPLACED-OUTPUT-MARK",
            "additionalContext": "POST-CONTEXT-MARK"}}},
        "PreToolUse:mcp__engram__mem_timeline": {"out": {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": "probe: denied, do X instead"}}},
    })  # fmt: skip
    batch = tool_uses(*[engram("mem_search", query=q, limit=10) for q in ("jwt", "fts5", "repository", "sqlite")])
    failing = tool_uses(engram("mem_get_observation", id=999), engram("mem_timeline", observation_id=42))
    run = cc.run("Probe the hooks.", main=[batch, failing, text("Probed.")])
    log = read_log(cc)

    # A tool error fires PostToolUseFailure (not PostToolUse); a hook's deny fires neither, and the
    # model gets the deny reason verbatim as an is_error result.
    [failure] = payloads(log, "PostToolUseFailure")
    assert failure["tool_name"] == "mcp__engram__mem_get_observation"
    assert failure["error"] == "Observation #999 not found" and failure["is_interrupt"] is False
    assert not [p for p in payloads(log, "PostToolUse") if p["tool_name"] != "mcp__engram__mem_search"]
    errors = {r.name: r for r in run.lane()[2].tool_results()}
    assert errors["mcp__engram__mem_get_observation"].is_error
    assert errors["mcp__engram__mem_get_observation"].text == "Observation #999 not found"
    denial = errors["mcp__engram__mem_timeline"]
    assert denial.is_error and denial.block["content"] == "probe: denied, do X instead"
    assert cc.calls("mem_timeline") == []
    # PostToolBatch: once per batch, with each call's result as the model got it.
    batches = payloads(log, "PostToolBatch")
    assert len(batches) == 2 and len(batches[0]["tool_calls"]) == 4
    assert {c["tool_response"] for c in batches[0]["tool_calls"]} == {"REPLACED-OUTPUT-MARK"}

    # updatedInput without permissionDecision: the server ran the rewritten input.
    assert [c["arguments"] for c in cc.calls("mem_search")] == [{"query": "auth", "limit": 2}] * 4
    post = payloads(log, "PostToolUse")
    assert [p["tool_input"] for p in post] == [{"query": "auth", "limit": 2}] * 4
    # An MCP tool without structuredContent: tool_response is the list of content blocks.
    assert all(isinstance(p["tool_response"], list) and p["tool_response"][0]["type"] == "text" for p in post)

    # updatedMCPToolOutput as a plain string is exactly what the model received.
    final = run.lane()[1]
    results = final.tool_results()
    assert [r.block["content"] for r in results] == ["REPLACED-OUTPUT-MARK"] * 4
    assert not any(r.is_error for r in results)

    # additionalContext: Pre/Post as system reminders after the tool results of the batch ...
    content = final.last_user["content"]
    kinds = [b["type"] for b in content]
    assert kinds == ["tool_result"] * 4 + ["text"] * 8, kinds
    reminders = [b["text"] for b in content if b["type"] == "text"]
    assert sum("PreToolUse:mcp__engram__mem_search hook additional context: PRE-CONTEXT-MARK" in t
               for t in reminders) == 4  # fmt: skip
    assert sum("PostToolUse:mcp__engram__mem_search hook additional context: POST-CONTEXT-MARK" in t
               for t in reminders) == 4  # fmt: skip
    assert all(t.startswith("<system-reminder>") for t in reminders)
    # ... SessionStart and UserPromptSubmit in a role "system" message after the first prompt.
    system = [m for m in final.messages if m["role"] == "system"]
    assert len(system) == 1 and final.messages[0]["role"] == "user", [m["role"] for m in final.messages]
    assert "SessionStart hook additional context: SESSION-CONTEXT-MARK" in system[0]["content"]
    assert "UserPromptSubmit hook additional context: PROMPT-CONTEXT-MARK" in system[0]["content"]

    # Parallel hooks: the four PreToolUse processes (0.5 s each) overlapped.
    pre = [e for e in log if e["payload"]["hook_event_name"] == "PreToolUse"
           and e["payload"]["tool_name"] == "mcp__engram__mem_search"]  # fmt: skip
    starts = sorted(e["start"] for e in pre)
    assert len(pre) == 4 and starts[-1] - starts[0] < 0.4, starts
    assert max(e["start"] for e in pre) < min(e["end"] for e in pre)

    # prompt_id: on the prompt and every tool event of its turn; not on SessionStart startup.
    [start] = payloads(log, "SessionStart")
    assert start["source"] == "startup" and "prompt_id" not in start
    [prompt] = payloads(log, "UserPromptSubmit")
    assert prompt["prompt_id"]
    assert {p["prompt_id"] for p in payloads(log, "PreToolUse") + post + [failure]} == {prompt["prompt_id"]}
    assert not any("agent_id" in p for p in payloads(log, "PreToolUse"))


def test_subagent_resume_and_compact_payloads(cc):
    probe(cc, {})
    marker = "LANE-PROBE-AGENT"
    cc.agent("validator", f"You are the validator. {marker}", tools=["mcp__engram__mem_search"])
    first = cc.run("Dispatch the validator.", allowed=[*ENGRAM_TOOLS, "Agent", "Task"],
                   main=[dispatch("validator", f"Validate. {marker}"), text("Validated.")],
                   lanes={marker: [tool_uses(engram("mem_search", query="auth", limit=1)), text("Nothing wrong.")]})  # fmt: skip
    sub = first.lane(marker)
    assert sub and sub[0].tools == ["mcp__engram__mem_search"] and marker in sub[0].system
    assert "cc_is_subagent=true" in sub[0].system and marker in sub[0].first_user_text
    cc.run("Again.", resume=first.session_id, main=[text("Again.")])
    cc.run("/compact", resume=first.session_id)
    log = read_log(cc)

    [prompt] = [p for p in payloads(log, "UserPromptSubmit") if p["prompt"] == "Dispatch the validator."]
    [started] = payloads(log, "SubagentStart")
    assert started["agent_type"] == "validator" and started["agent_id"]
    assert started["prompt_id"] == prompt["prompt_id"]
    inside = [p for p in payloads(log, "PreToolUse") if p["tool_name"] == "mcp__engram__mem_search"]
    assert len(inside) == 1
    assert inside[0]["agent_id"] == started["agent_id"] and inside[0]["agent_type"] == "validator"
    assert inside[0]["prompt_id"] == prompt["prompt_id"] and inside[0]["session_id"] == first.session_id
    [agent_call] = [p for p in payloads(log, "PreToolUse") if p["tool_name"] in ("Agent", "Task")]
    assert "agent_id" not in agent_call and agent_call["tool_input"]["subagent_type"] == "validator"

    sources = [p["source"] for p in payloads(log, "SessionStart")]
    assert sources == ["startup", "resume", "resume", "compact"], sources
    [compact] = payloads(log, "PreCompact")
    assert compact["trigger"] == "manual" and compact["prompt_id"]
    after = payloads(log, "SessionStart")[-1]
    assert after["prompt_id"] == compact["prompt_id"]  # the /compact command's own turn
    assert not [p for p in payloads(log, "UserPromptSubmit") if p["prompt"] == "/compact"]
