"""What the pinned Copilot CLI binary does with hooks: the facts memory-governor's adapter relies on.

These tests do not use memory-governor: a probe hook (probe_copilot.py) in Copilot's own hooks
file (.github/hooks) and in a Claude-style .claude/settings.json logs every payload and answers
what the test chose, so a new Copilot pin that changes one of these facts fails here, by name.
The facts are listed in governor/harnesses/copilot/__init__.py and docs/copilot.md.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

import pytest

pytest.register_assert_rewrite("copilot_env")
from copilot_env import DENIED, HERE, Copilot  # noqa: E402
from fake_chat import call, text, tool_uses  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("copilot_env",)

OWN = ("sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse", "postToolUseFailure", "preCompact",
       "subagentStart", "subagentStop", "agentStop")  # fmt: skip
CLAUDE = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PreCompact", "SubagentStart")


def probe(cp: Copilot, rules: dict[str, Any]) -> None:
    """Probe hooks on every event, in both dialects (instead of the installer)."""
    cp.installs = []
    cp.installed = True
    (cp.tmp / "rules.json").write_text(json.dumps(rules))
    cp.env.update({"PROBE_LOG": str(cp.tmp / "probe.jsonl"), "PROBE_RULES": str(cp.tmp / "rules.json")})
    command = f'"{sys.executable}" "{HERE / "probe_copilot.py"}"'
    own = {event: [{"type": "command", "bash": f"{command} G:{event}", "timeoutSec": 2}] for event in OWN}
    cp.write(".github/hooks/probe.json", json.dumps({"version": 1, "hooks": own}))
    claude = {event: [{"hooks": [{"type": "command", "command": f"{command} C:{event}", "timeout": 30}]}]
              for event in CLAUDE}  # fmt: skip
    cp.write(".claude/settings.json", json.dumps({"hooks": claude}))


def log(cp: Copilot) -> list[dict[str, Any]]:
    path = cp.tmp / "probe.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def entries(cp: Copilot, label: str) -> list[dict[str, Any]]:
    return [e for e in log(cp) if e["label"] == label]


def search(query: str, limit: int = 3) -> dict[str, Any]:
    return call("engram-mem_search", {"query": query, "limit": limit})


def test_answers_payloads_and_order_in_a_batch_and_a_subagent(copilot: Copilot) -> None:
    marker = "LANE-VALIDATOR"
    copilot.agent("validator", f"You are the validator. {marker}")
    probe(copilot, {
        "G:userPromptSubmitted": {"out": {"additionalContext": "PROMPT-CONTEXT-MARK"}},
        "G:preToolUse": {"sleep": 0.2},
        "G:preToolUse:deny": {"sleep": 0.2, "out": {"permissionDecision": "deny", "permissionDecisionReason": "R1"}},
        "G:preToolUse:rewrite": {"sleep": 0.2, "out": {"modifiedArgs": {"query": "rewrite", "limit": 1}}},
        "G:preToolUse:crash": {"exit": 1},
        "G:preToolUse:garbage": {"raw": "not json"},
        "G:preToolUse:slow": {"sleep": 4},  # past its timeoutSec of 2
        "G:postToolUse:replace": {"out": {"modifiedResult": {"resultType": "success", "textResultForLlm": "REPLACED"},
                                          "additionalContext": "POST-CONTEXT-MARK"}},
        "C:PostToolUse:ignored": {"out": {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                                                 "updatedMCPToolOutput": "NOT-USED"}}},
    })  # fmt: skip
    queries = ("deny", "rewrite", "replace", "ignored", "crash", "garbage", "slow")
    run = copilot.run(
        "What did we decide about auth?",
        main=[tool_uses(*[search(q) for q in queries]),
              tool_uses(call("task", {"description": "Validate", "prompt": f"Validate it. {marker}",
                                      "agent_type": "validator", "name": "validator"})),
              text("Done.")],
        lanes={marker: [tool_uses(search("token")), text("Validated.")]},
    )  # fmt: skip
    got = {r.input["query"]: r.text for r in run.results_of("mem_search", lane="main")}
    assert got["deny"] == DENIED + "R1"
    assert got["crash"].startswith('Denied by preToolUse hook from ".github/hooks/probe.json" (hook errored)')
    assert got["replace"].startswith("REPLACED\n\n") and got["replace"].endswith("POST-CONTEXT-MARK")
    assert "NOT-USED" not in got["ignored"], "updatedMCPToolOutput is ignored"
    for query in ("ignored", "garbage", "slow"):  # output that is not JSON, a timeout: the call runs
        assert got[query].startswith("No memories found"), got
    ran = {c["arguments"]["query"]: c["arguments"] for c in copilot.calls("mem_search")}
    assert ran["rewrite"] == {"query": "rewrite", "limit": 1} and "deny" not in ran and "crash" not in ran
    assert "<system_reminder>\nPROMPT-CONTEXT-MARK\n</system_reminder>" in run.lane()[0].first_user_text

    # The batch's preToolUse hooks ran one after another, all before any call ran; the slow one
    # was killed at its timeout (it never wrote its log line) and its call ran.
    main = [e for e in entries(copilot, "G:preToolUse") if e["payload"]["toolName"] == "engram-mem_search"]
    main = [e for e in main if "agentId" not in e["payload"]]
    assert [e["payload"]["toolArgs"]["query"] for e in main] == [q for q in queries if q != "slow"]
    spans = [(e["start"], e["end"]) for e in main]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans
    assert max(end for _, end in spans) <= min(c["ts"] for c in copilot.calls("mem_search"))

    # Payloads: no call id, no turn id; Copilot's tool names; the Claude-style dialect beside it.
    own = main[0]["payload"]
    assert set(own) == {"sessionId", "timestamp", "cwd", "toolName", "toolArgs"}, own
    assert own["toolName"] == "engram-mem_search" and isinstance(own["timestamp"], int)
    [post] = [
        e["payload"] for e in entries(copilot, "G:postToolUse") if e["payload"]["toolArgs"].get("query") == "rewrite"
    ]
    assert post["toolArgs"] == {"query": "rewrite", "limit": 1}, "postToolUse carries the arguments the call ran with"
    assert post["toolResult"]["resultType"] == "success" and "textResultForLlm" in post["toolResult"]
    claude = next(e for e in entries(copilot, "C:PostToolUse") if "agent_id" not in e["payload"])
    assert claude["payload"]["hook_event_name"] == "PostToolUse" and "tool_use_id" not in claude["payload"]
    assert set(claude["payload"]["tool_result"]) == {"result_type", "text_result_for_llm"}
    assert claude["env"].get("COPILOT_CLI") == "1" and "COPILOT_HOOK_DIR" not in claude["env"]
    assert entries(copilot, "G:sessionStart")[0]["payload"]["source"] == "new"

    # A subagent is a session of its own; its events name it and its dispatcher.
    root = own["sessionId"]
    [sub] = [e["payload"] for e in entries(copilot, "G:preToolUse") if "agentId" in e["payload"]]
    assert sub["sessionId"] == sub["agentId"] != root and sub["parentAgentId"] == root
    assert sub["agentType"] == "validator"
    [sub_prompt] = [e["payload"] for e in entries(copilot, "G:userPromptSubmitted") if "agentId" in e["payload"]]
    assert marker in sub_prompt["prompt"], "the dispatch prompt arrives as the subagent's own prompt"
    [dispatch] = [
        e["payload"] for e in entries(copilot, "C:PreToolUse") if e["payload"]["tool_name"] != "engram-mem_search"
    ]
    assert dispatch["tool_name"] == "Agent", "the Claude-style payload names the task tool Agent"
    assert any(e["payload"]["toolName"] == "task" for e in entries(copilot, "G:preToolUse"))


def test_resume_and_compact(copilot: Copilot) -> None:
    probe(copilot, {})
    first = copilot.run("Work on auth.", main=[text("OK.")])
    copilot.run("Again.", resume=first.session_id, main=[text("OK.")])
    assert [e["payload"]["source"] for e in entries(copilot, "G:sessionStart")] == ["new", "resume"]
    before = len(log(copilot))
    compact = copilot.run("/compact", resume=first.session_id, main=[text("Summary.")])
    assert "Compacted conversation" in compact.stdout, compact.describe()
    labels = [e["label"] for e in log(copilot)[before:]]
    assert "G:preCompact" in labels and "C:PreCompact" in labels
    assert "G:sessionStart" not in labels and "G:userPromptSubmitted" not in labels, labels
    assert entries(copilot, "G:preCompact")[0]["payload"]["trigger"] == "manual"
