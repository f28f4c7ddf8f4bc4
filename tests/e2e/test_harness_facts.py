"""What each pinned Claude Code binary does with hooks: the facts memory-governor relies on.

These tests do not use memory-governor at all: a probe hook (probe_hook.py) logs every
payload and answers what the test chose. A few probe runs per pin (module-scoped fixtures)
feed one test per fact, so a pin that changes a fact fails here, by the fact's name, before
the governor's own scenarios fail in confusing ways. Where the pins differ, the test says what
each one does (a table keyed by version): a new pin without an entry fails until someone has
looked. The facts are written up in docs/claude-code.md.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CLAUDE_CODE_RECENT, CLAUDE_CODE_VERSION, ENGRAM_TOOLS, HERE, Harness, Run, Tools
from fake_model import FakeModel, after, dispatch, engram, text, tool_uses

pytestmark = pytest.mark.e2e
OLD, RECENT = CLAUDE_CODE_VERSION, CLAUDE_CODE_RECENT

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch",
          "PreCompact", "SubagentStart", "SubagentStop", "Stop")  # fmt: skip


def probe(cc: Harness, rules: dict) -> None:
    """Hand-written probe hooks on every event (instead of the installer)."""
    cc.hooks = False
    log = cc.tmp / "probe.jsonl"
    (cc.tmp / "rules.json").write_text(json.dumps(rules))
    cc.env.update({"PROBE_LOG": str(log), "PROBE_RULES": str(cc.tmp / "rules.json")})
    command = f'"{sys.executable}" "{HERE / "probe_hook.py"}"'
    hooks = {event: [{"hooks": [{"type": "command", "command": command, "timeout": 30}]}] for event in EVENTS}
    for event in ("PreToolUse", "PostToolUse"):
        hooks[event][0]["matcher"] = "mcp__engram__.*|Agent|Task"
    cc.write(".claude/settings.json", json.dumps({"hooks": hooks}, indent=2))


def read_log(cc: Harness) -> list[dict]:
    path = cc.tmp / "probe.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def payloads(log: list[dict], event: str, tool: str | None = None) -> list[dict]:
    return [e["payload"] for e in log
            if e["payload"]["hook_event_name"] == event and (tool is None or e["payload"].get("tool_name") == tool)]  # fmt: skip


class Probed:
    """One probe run: the harness, the run, and what the hooks were sent."""

    def __init__(self, cc: Harness, run: Run) -> None:
        self.cc = cc
        self.run = run
        self.log = read_log(cc)
        self.version = cc.version

    def of(self, event: str, tool: str | None = None) -> list[dict]:
        return payloads(self.log, event, tool)

    def request_with_results(self, names: list[str]) -> Any:
        """The model request that carried the results of the batch that called `names`."""
        found = [r for r in self.run.lane() if sorted(x.name for x in r.tool_results()) == sorted(names)]
        assert found, f"no request carried results of {names}"
        return found[0]


def _harness(tools: Tools, model: FakeModel, tmp: Path) -> Harness:
    model.reset()
    return Harness(tmp, tools, model)


SEARCH = "mcp__engram__mem_search"
RULES = {
    "SessionStart": {"out": {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                    "additionalContext": "SESSION-CONTEXT-MARK"}}},
    "UserPromptSubmit": {"out": {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                        "additionalContext": "PROMPT-CONTEXT-MARK"}}},
    # updatedInput with NO permissionDecision; each hook sleeps so that overlap is visible.
    f"PreToolUse:{SEARCH}": {"sleep": 0.5, "out": {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "updatedInput": {"query": "auth", "limit": 2},
        "additionalContext": "PRE-CONTEXT-MARK"}}},
    f"PostToolUse:{SEARCH}": {"out": {"hookSpecificOutput": {
        "hookEventName": "PostToolUse", "updatedMCPToolOutput": "REPLACED-OUTPUT-MARK",
        "additionalContext": "POST-CONTEXT-MARK"}}},
    "PreToolUse:mcp__engram__mem_timeline": {"out": {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "probe: denied, do X instead"}}},
}  # fmt: skip


@pytest.fixture(scope="module")
def batch(tools: Tools, model_server: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Probed:
    """A parallel batch of four searches (rewritten, replaced, with context), then a batch with a
    tool error and a denied call."""
    cc = _harness(tools, model_server, tmp_path_factory.mktemp("facts-batch"))
    probe(cc, RULES)
    searches = tool_uses(*[engram("mem_search", query=q, limit=10) for q in ("jwt", "fts5", "repository", "sqlite")])
    failing = tool_uses(engram("mem_get_observation", id=999), engram("mem_timeline", observation_id=42))
    return Probed(cc, cc.run("Probe the hooks.", main=[searches, failing, text("Probed.")]))


# -- tool results and errors -------------------------------------------------------------


def test_a_tool_error_fires_post_tool_use_failure_not_post_tool_use(batch: Probed) -> None:
    [failure] = batch.of("PostToolUseFailure")
    assert failure["tool_name"] == "mcp__engram__mem_get_observation"
    assert failure["error"] == "Observation #999 not found" and failure["is_interrupt"] is False
    assert not [p for p in batch.of("PostToolUse") if p["tool_name"] != SEARCH]
    [error] = [r for r in batch.run.results() if r.name == "mcp__engram__mem_get_observation"]
    assert error.is_error and error.text == "Observation #999 not found"


# How the model gets a PreToolUse deny's permissionDecisionReason, per pin.
DENY_AS = {OLD: "{reason}", RECENT: "PreToolUse:{tool} hook error: {reason}"}


def test_a_deny_fires_no_post_event_and_the_model_gets_the_reason(batch: Probed) -> None:
    tool = "mcp__engram__mem_timeline"
    assert not batch.of("PostToolUse", tool) and not batch.of("PostToolUseFailure", tool)
    [denial] = [r for r in batch.run.results() if r.name == tool]
    expected = DENY_AS[batch.version].format(tool=tool, reason="probe: denied, do X instead")
    assert denial.is_error and denial.text == expected
    assert batch.cc.calls("mem_timeline") == []


def test_post_tool_batch_fires_once_per_batch_with_what_the_model_got(batch: Probed) -> None:
    batches = [b for b in batch.of("PostToolBatch") if b["tool_calls"][0]["tool_name"].startswith("mcp__engram__")]
    assert len(batches) == 2 and len(batches[0]["tool_calls"]) == 4
    assert {c["tool_response"] for c in batches[0]["tool_calls"]} == {"REPLACED-OUTPUT-MARK"}


def test_updated_input_without_a_permission_decision_is_applied(batch: Probed) -> None:
    assert [c["arguments"] for c in batch.cc.calls("mem_search")] == [{"query": "auth", "limit": 2}] * 4
    assert [p["tool_input"] for p in batch.of("PostToolUse", SEARCH)] == [{"query": "auth", "limit": 2}] * 4


def test_an_mcp_tool_response_is_a_list_of_content_blocks(batch: Probed) -> None:
    post = batch.of("PostToolUse", SEARCH)
    assert post and all(isinstance(p["tool_response"], list) and p["tool_response"][0]["type"] == "text" for p in post)


def test_updated_mcp_tool_output_as_a_string_is_exactly_what_the_model_gets(batch: Probed) -> None:
    final = batch.request_with_results([SEARCH] * 4)
    results = final.tool_results()
    assert [r.block["content"] for r in results] == ["REPLACED-OUTPUT-MARK"] * 4
    assert not any(r.is_error for r in results)


# Where PreToolUse/PostToolUse additionalContext reaches the model, per pin: "reminders" = one
# <system-reminder> text block per answer after the batch's tool results, in their user message;
# "system" = one text block holding every answer's context (blank-line separated) in a message
# with role "system" right after the results' message.
TOOL_CONTEXT_AS = {OLD: "reminders", RECENT: "system"}
PRE_MARK = f"PreToolUse:{SEARCH} hook additional context: PRE-CONTEXT-MARK"
POST_MARK = f"PostToolUse:{SEARCH} hook additional context: POST-CONTEXT-MARK"


def test_where_tool_hook_context_reaches_the_model(batch: Probed) -> None:
    final = batch.request_with_results([SEARCH] * 4)
    content = final.last_user["content"]
    kinds = [b["type"] for b in content]
    if TOOL_CONTEXT_AS[batch.version] == "reminders":
        assert kinds == ["tool_result"] * 4 + ["text"] * 8, kinds
        reminders = [b["text"] for b in content if b["type"] == "text"]
        assert all(t.startswith("<system-reminder>") for t in reminders)
    else:
        assert kinds == ["tool_result"] * 4, kinds
        after_results = final.messages[final.messages.index(final.last_user) + 1]
        assert after_results["role"] == "system"
        [block] = after_results["content"]
        reminders = block["text"].split("\n\n")
    assert sum(PRE_MARK in t for t in reminders) == 4 and sum(POST_MARK in t for t in reminders) == 4, reminders


def test_session_and_prompt_hook_context_arrive_in_a_system_message(batch: Probed) -> None:
    final = batch.request_with_results([SEARCH] * 4)
    assert final.messages[0]["role"] == "user", [m["role"] for m in final.messages]
    system = "\n".join(str(m["content"]) for m in final.messages if m["role"] == "system")
    assert "SessionStart hook additional context: SESSION-CONTEXT-MARK" in system
    assert "UserPromptSubmit hook additional context: PROMPT-CONTEXT-MARK" in system


def test_the_hooks_of_a_parallel_batch_run_at_the_same_time(batch: Probed) -> None:
    pre = [
        e for e in batch.log if e["payload"]["hook_event_name"] == "PreToolUse" and e["payload"]["tool_name"] == SEARCH
    ]
    starts = sorted(e["start"] for e in pre)
    assert len(pre) == 4 and starts[-1] - starts[0] < 0.4, starts
    assert max(e["start"] for e in pre) < min(e["end"] for e in pre)


def test_prompt_id_is_on_the_prompt_and_every_tool_event_of_its_turn(batch: Probed) -> None:
    [start] = batch.of("SessionStart")
    assert start["source"] == "startup" and "prompt_id" not in start
    [prompt] = batch.of("UserPromptSubmit")
    assert prompt["prompt_id"]
    tool_events = batch.of("PreToolUse") + batch.of("PostToolUse") + batch.of("PostToolUseFailure")
    assert {p["prompt_id"] for p in tool_events} == {prompt["prompt_id"]}
    assert not any("agent_id" in p for p in batch.of("PreToolUse"))


# Which MCP server a tool event names (mcp_server), per pin.
MCP_SERVER = {OLD: None, RECENT: {"name": "engram", "source": "dynamic"}}


def test_tool_events_name_their_mcp_server(batch: Probed) -> None:
    events = batch.of("PreToolUse", SEARCH) + batch.of("PostToolUse", SEARCH) + batch.of("PostToolUseFailure")
    assert {json.dumps(p.get("mcp_server"), sort_keys=True) for p in events} == {
        json.dumps(MCP_SERVER[batch.version], sort_keys=True)
    }


# Whether MCP tools are deferred behind ToolSearch by default (no ENABLE_TOOL_SEARCH), per pin.
DEFERRED_BY_DEFAULT = {OLD: False, RECENT: True}


def test_mcp_tools_are_offered_up_front_or_behind_tool_search(batch: Probed) -> None:
    first = batch.run.lane()[0]
    if DEFERRED_BY_DEFAULT[batch.version]:
        assert "ToolSearch" in first.tools and not [t for t in first.tools if t.startswith("mcp__")], first.tools
        assert set(ENGRAM_TOOLS) <= set(first.deferred_tools), first.deferred_tools
        # The stand-in loaded them first, as a model does; the hooks saw the same names.
        loads = ["select:mcp__engram__mem_search", "select:mcp__engram__mem_get_observation,mcp__engram__mem_timeline"]
        assert batch.run.tool_searches() == loads
    else:
        assert set(ENGRAM_TOOLS) <= set(first.tools) and not first.deferred_tools
    assert {p["tool_name"] for p in batch.of("PreToolUse")} == {SEARCH, "mcp__engram__mem_timeline",
                                                                 "mcp__engram__mem_get_observation"}  # fmt: skip


# Fields Stop adds to the common ones (both pins).
STOP_FIELDS = {"stop_hook_active", "last_assistant_message", "background_tasks", "session_crons"}
COMMON = {"session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode", "prompt_id", "effort"}


def test_what_stop_carries(batch: Probed) -> None:
    [stop] = batch.of("Stop")
    assert set(stop) - COMMON == STOP_FIELDS, sorted(stop)
    assert stop["last_assistant_message"] == "Probed." and stop["background_tasks"] == [] == stop["session_crons"]


# -- subagents, resume and /compact ----------------------------------------------------------

LANE = "LANE-PROBE-AGENT"
# Whether the Agent tool runs an agent in the background unless told `run_in_background: false`
# (2.1.197 has the input too, default false), per pin.
BACKGROUND_BY_DEFAULT = {OLD: False, RECENT: True}


@pytest.fixture(scope="module")
def subagent(tools: Tools, model_server: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Probed:
    cc = _harness(tools, model_server, tmp_path_factory.mktemp("facts-subagent"))
    probe(cc, {})
    cc.agent("validator", f"You are the validator. {LANE}", tools=["mcp__engram__mem_search"])
    # The Agent tool with its default: a background agent's report comes back as a turn of its own.
    reported = [text("Reported.")] if BACKGROUND_BY_DEFAULT[cc.version] else []
    first = cc.run("Dispatch the validator.", main=[dispatch("validator", f"Validate. {LANE}"), text("Validated."),
                                                    *reported],
                   lanes={LANE: [tool_uses(engram("mem_search", query="auth", limit=1)), text("Nothing wrong.")]})  # fmt: skip
    cc.run("Again.", resume=first.session_id, main=[text("Again.")])
    cc.run("/compact", resume=first.session_id)
    return Probed(cc, first)


# The tools a subagent's first request offers (front matter `tools: mcp__engram__mem_search`), per pin.
# (2.1.332 offers them up front, beside a placeholder tool, not behind ToolSearch.)
SUBAGENT_TOOLS = {OLD: [SEARCH], RECENT: ["DeferredToolPlaceholder", SEARCH]}


def test_a_subagent_talks_to_the_model_with_its_own_prompt_and_tools(subagent: Probed) -> None:
    sub = subagent.run.lane(LANE)
    assert sub and LANE in sub[0].system and "cc_is_subagent=true" in sub[0].system and LANE in sub[0].first_user_text
    assert sub[0].tools == SUBAGENT_TOOLS[subagent.version], sub[0].tools
    assert not sub[0].deferred_tools


def test_what_subagent_stop_carries(subagent: Probed) -> None:
    # Both pins (background_tasks and agent_transcript_path are not new in 2.1.332).
    [stopped] = [p for p in subagent.of("SubagentStop") if p["agent_type"] == "validator"]
    extra = set(stopped) - COMMON - {"agent_id", "agent_type"}
    assert extra == {"agent_transcript_path", *STOP_FIELDS}, sorted(stopped)
    assert stopped["last_assistant_message"] == "Nothing wrong."
    # A background agent lists itself, still "running", in its own SubagentStop.
    running = [stopped["agent_id"]] if BACKGROUND_BY_DEFAULT[subagent.version] else []
    assert [t["id"] for t in stopped["background_tasks"]] == running
    path = stopped["agent_transcript_path"]
    assert path.endswith(f"/subagents/agent-{stopped['agent_id']}.jsonl") and Path(path).exists()


def test_a_subagents_events_carry_its_id_type_and_the_parents_prompt_id(subagent: Probed) -> None:
    [prompt] = [p for p in subagent.of("UserPromptSubmit") if p["prompt"] == "Dispatch the validator."]
    [started] = subagent.of("SubagentStart")
    assert started["agent_type"] == "validator" and started["agent_id"]
    assert started["prompt_id"] == prompt["prompt_id"]
    [inside] = subagent.of("PreToolUse", SEARCH)
    assert inside["agent_id"] == started["agent_id"] and inside["agent_type"] == "validator"
    assert inside["prompt_id"] == prompt["prompt_id"] and inside["session_id"] == subagent.run.session_id
    [agent_call] = [p for p in subagent.of("PreToolUse") if p["tool_name"] in ("Agent", "Task")]
    assert "agent_id" not in agent_call and agent_call["tool_input"]["subagent_type"] == "validator"


def test_the_agent_tool_runs_in_the_foreground_or_the_background_by_default(subagent: Probed) -> None:
    [result] = [r for r in subagent.run.results(prefix="") if r.name in ("Agent", "Task")]
    if BACKGROUND_BY_DEFAULT[subagent.version]:
        assert result.text.startswith("Async agent launched successfully."), result.text
        assert [p["prompt"][:19] for p in subagent.of("UserPromptSubmit")][:2] == ["Dispatch the valida",
                                                                                  "<task-notification>"]  # fmt: skip
    else:
        assert "Nothing wrong." in result.text, "in the foreground the result is the agent's report"


def test_resume_and_compact_fire_session_start_with_their_source(subagent: Probed) -> None:
    sources = [p["source"] for p in subagent.of("SessionStart")]
    assert sources == ["startup", "resume", "resume", "compact"], sources


def test_compact_is_a_turn_of_its_own_without_a_prompt(subagent: Probed) -> None:
    [compact] = subagent.of("PreCompact")
    assert compact["trigger"] == "manual" and compact["prompt_id"]
    after_compact = subagent.of("SessionStart")[-1]
    assert after_compact["prompt_id"] == compact["prompt_id"]  # the /compact command's own turn
    assert not [p for p in subagent.of("UserPromptSubmit") if p["prompt"] == "/compact"]


# -- background subagents and their task notifications --------------------------------------

BG = "LANE-PROBE-BACKGROUND"


@pytest.fixture(scope="module")
def background(tools: Tools, model_server: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Probed:
    """An agent launched in the background (run_in_background: true) whose calls wait for the parent's Stop."""
    cc = _harness(tools, model_server, tmp_path_factory.mktemp("facts-background"))
    probe(cc, {})
    cc.agent("researcher", f"You research. {BG}", tools=["mcp__engram__mem_search"])

    def parent_stopped() -> bool:
        return bool(payloads(read_log(cc), "Stop"))

    run = cc.run("Ask the researcher.", main=[dispatch("researcher", f"Find it. {BG}", background=True), text("Launched."),
                                              text("Reported.")],
                 lanes={BG: [after(parent_stopped, tool_uses(engram("mem_search", query="auth", limit=1))),
                             text("Research done.")]})  # fmt: skip
    return Probed(cc, run)


def test_the_agent_tool_launches_in_the_background_and_answers_at_once(background: Probed) -> None:
    [launch] = [r for r in background.run.results(prefix="") if r.name == "Agent"]
    assert launch.text.startswith("Async agent launched successfully."), launch.text
    [post] = background.of("PostToolUse", "Agent")
    assert isinstance(post["tool_response"], dict) and post["tool_response"]["isAsync"] is True
    assert post["tool_response"]["status"] == "async_launched"


def test_a_background_agents_calls_after_the_parents_stop_carry_the_launching_prompt_id(background: Probed) -> None:
    [prompt, _notification] = background.of("UserPromptSubmit")
    stop = next(e for e in background.log if e["payload"]["hook_event_name"] == "Stop")
    [inside] = [e for e in background.log if e["payload"].get("tool_name") == SEARCH
                and e["payload"]["hook_event_name"] == "PreToolUse"]  # fmt: skip
    assert inside["start"] > stop["end"], "the agent's call came after the parent's turn ended"
    assert inside["payload"]["prompt_id"] == prompt["prompt_id"]
    assert inside["payload"]["agent_type"] == "researcher" and inside["payload"]["agent_id"]
    assert stop["payload"]["background_tasks"] == [{"id": inside["payload"]["agent_id"], "type": "subagent",
                                                    "status": "running", "description": "Delegated task",
                                                    "agent_type": "researcher"}]  # fmt: skip


def test_a_finished_background_agent_reports_back_as_a_prompt_of_its_own(background: Probed) -> None:
    [prompt, notification] = background.of("UserPromptSubmit")
    [launch] = background.of("PreToolUse", "Agent")
    [started] = background.of("SubagentStart")
    assert notification["prompt_id"] and notification["prompt_id"] != prompt["prompt_id"]
    header = re.match(r"<task-notification>\n<task-id>(\w+)</task-id>\n<tool-use-id>(\w+)</tool-use-id>\n",
                      notification["prompt"])  # fmt: skip
    assert header, notification["prompt"][:300]
    assert header.groups() == (started["agent_id"], launch["tool_use_id"])
    assert "<status>completed</status>" in notification["prompt"]
    assert "<result>Research done.</result>" in notification["prompt"]
    # The parent's model answers it like a prompt (here: the script's third reply).
    assert background.run.output.get("result") == "Reported."


def test_subagent_stop_carries_the_agents_transcript(background: Probed) -> None:
    [stopped] = background.of("SubagentStop")
    path = stopped["agent_transcript_path"]
    assert path.endswith(f"/subagents/agent-{stopped['agent_id']}.jsonl") and Path(path).exists()
    assert stopped["last_assistant_message"] == "Research done."
    # Seen: the agent still lists itself as running in its own SubagentStop.
    assert [t["status"] for t in stopped["background_tasks"]] == ["running"]
