"""Policy scenario tests: a sequence of events and the decisions a team expects, pinned in CI.

A scenario file (YAML):

    policy: ../.memory-governor/policy.yaml   # optional, relative to this file, or `shipped` (the
                                               # default policy); without it: the effective policy
    server: engram                             # optional: the MCP server short tool names belong to
    scenarios:
      - name: the third search in a turn is denied
        steps:
          - prompt: what did we decide about caching?
            expect: {memory_need: recent_session}
          - call: mem_search
            input: {query: cache, limit: 10}
            result: "Found 1 memories: ..."     # optional: what the server returns
            expect: {decision: clamp, input: {limit: 3}}
          - start: compact                       # SessionStart source
          - call: mem_context
            agent: validator                     # optional: made by this subagent type
            expect: deny

`expect` is a decision (allow, deny, clamp, trim, warn) or a mapping of: decision, reason (a
substring of what the model is told), input (keys the clamped input must have), context (a
substring of advice added to the model's context), memory_need (for a prompt), trimmed.
Steps run through the same code the hook runs (governor.review.player). docs/scenarios.md
documents the format with an example to copy.
"""

from __future__ import annotations

import os
import time
from typing import Any

from governor.harnesses.transcript import Call
from governor.policy.document import Document, Problem, read_policy_file
from governor.review.player import Player

DECISIONS = ("allow", "deny", "clamp", "trim", "warn")
STEP_KINDS = ("prompt", "call", "start")
EXPECT_KEYS = ("decision", "reason", "input", "context", "memory_need", "trimmed")


class Scenario:
    def __init__(self, name: str, steps: list[dict[str, Any]], where: str) -> None:
        self.name, self.steps, self.where = name, steps, where


class Result:
    def __init__(self, scenario: Scenario, file: str) -> None:
        self.scenario = scenario
        self.file = file
        self.failures: list[str] = []
        self.seconds = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures


class ScenarioFile:
    def __init__(self, path: str) -> None:
        self.path = path
        self.policy: str | None = None
        self.server = "engram"
        self.scenarios: list[Scenario] = []
        self.problems: list[Problem] = []


def load(path: str) -> ScenarioFile:
    doc = read_policy_file(path)
    out = ScenarioFile(path)
    out.problems.extend(doc.problems)
    if doc.data is None or out.problems:
        return out
    data = doc.data

    def bad(where: tuple[str | int, ...], message: str, at_key: bool = False) -> None:
        line, col = doc.position(where, key=at_key)
        out.problems.append(Problem(path, line, col, message))

    for key in data:
        if key not in ("policy", "server", "scenarios"):
            bad((key,), f"unknown key {key!r}: expected policy, server, scenarios", at_key=True)
    if data.get("policy") == "shipped":
        from governor.policy.sources import shipped_policy_path

        out.policy = shipped_policy_path()
    elif isinstance(data.get("policy"), str):
        out.policy = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), data["policy"]))
        if not os.path.isfile(out.policy):
            bad(("policy",), f"the policy file {out.policy} does not exist")
    if isinstance(data.get("server"), str):
        out.server = data["server"]
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, list) or not scenarios:
        bad(("scenarios",), "scenarios must be a non-empty list")
        return out
    for index, item in enumerate(scenarios):
        _scenario(doc, out, bad, index, item)
    return out


def _scenario(doc: Document, out: ScenarioFile, bad: Any, index: int, item: Any) -> None:
    where: tuple[str | int, ...] = ("scenarios", index)
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not isinstance(item.get("steps"), list):
        bad(where, "a scenario needs a name and a list of steps")
        return
    for number, step in enumerate(item["steps"]):
        at = (*where, "steps", number)
        kinds = [k for k in STEP_KINDS if isinstance(step, dict) and k in step]
        if len(kinds) != 1:
            bad(at, f"a step is exactly one of {', '.join(STEP_KINDS)}")
            continue
        expect = step.get("expect")
        if isinstance(expect, str) and expect not in DECISIONS:
            bad((*at, "expect"), f"unknown decision {expect!r}: expected one of {', '.join(DECISIONS)}")
        elif isinstance(expect, dict):
            for key in expect:
                if key not in EXPECT_KEYS:
                    bad(
                        (*at, "expect", key),
                        f"unknown expectation {key!r}: expected one of {', '.join(EXPECT_KEYS)}",
                        True,
                    )
    line, _ = doc.position(where)
    out.scenarios.append(Scenario(item["name"], item["steps"], f"{out.path}:{line}"))


def run(file: ScenarioFile) -> list[Result]:
    results: list[Result] = []
    for scenario in file.scenarios:
        result = Result(scenario, file.path)
        started = time.perf_counter()
        with Player(policy=file.policy, session_id=f"scenario-{len(results)}") as player:
            for number, step in enumerate(scenario.steps, start=1):
                _step(player, file, step, number, result)
        result.seconds = time.perf_counter() - started
        results.append(result)
    return results


def _memory_need(player: Player) -> str | None:
    from governor.engine.ledger import key
    from governor.engine.stores import open_ledger

    ledger = open_ledger(player.env["MEMORY_GOVERNOR_STATE_DIR"])
    try:
        info = ledger.session_info(key(player.session_id))
        return ledger.memory_need(key(player.session_id), info[0]) if info else None
    finally:
        ledger.close()


def _step(player: Player, file: ScenarioFile, step: dict[str, Any], number: int, result: Result) -> None:
    expect = step.get("expect")
    wanted: dict[str, Any] = {"decision": expect} if isinstance(expect, str) else dict(expect or {})
    label = f"step {number}"
    if "start" in step:
        player.start(str(step["start"]))
        return
    if "prompt" in step:
        answer = player.prompt(str(step["prompt"]), f"{player.session_id}-prompt-{number}")
        context = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
        if "memory_need" in wanted and _memory_need(player) != wanted["memory_need"]:
            result.failures.append(
                f"{label} (prompt): memory_need {_memory_need(player)!r}, expected {wanted['memory_need']!r}"
            )
        if "context" in wanted and str(wanted["context"]) not in context:
            result.failures.append(f"{label} (prompt): advice {context!r} lacks {wanted['context']!r}")
        return
    tool = str(step["call"])
    if not tool.startswith("mcp__") and not tool[:1].isupper():
        tool = f"mcp__{file.server}__{tool}"
    agent = step.get("agent")
    call = Call(tool, dict(step.get("input") or {}), f"toolu_{player.session_id}_{number}",
                result=str(step.get("result") or ""), agent=(f"agent-{agent}", str(agent)) if agent else None)  # fmt: skip
    outcome = player.call(call)
    what = f"{label} ({step['call']})"
    if "decision" in wanted and outcome.decision != wanted["decision"]:
        said = f": {outcome.reason}" if outcome.reason else ""
        result.failures.append(f"{what}: {outcome.decision}{said}, expected {wanted['decision']}")
    if "reason" in wanted and str(wanted["reason"]) not in outcome.reason:
        result.failures.append(f"{what}: reason {outcome.reason!r} lacks {wanted['reason']!r}")
    if "input" in wanted:
        got = outcome.updated_input or call.tool_input
        for key, value in dict(wanted["input"]).items():
            if got.get(key) != value:
                result.failures.append(f"{what}: input {key}={got.get(key)!r}, expected {value!r}")
    if "context" in wanted and str(wanted["context"]) not in outcome.context:
        result.failures.append(f"{what}: context {outcome.context!r} lacks {wanted['context']!r}")
    if "trimmed" in wanted and outcome.trimmed != bool(wanted["trimmed"]):
        result.failures.append(f"{what}: trimmed is {outcome.trimmed}, expected {bool(wanted['trimmed'])}")


def junit(results: list[Result]) -> str:
    from xml.sax.saxutils import escape, quoteattr

    failures = sum(not r.passed for r in results)
    total = sum(r.seconds for r in results)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name="memory-governor scenarios" tests="{len(results)}" failures="{failures}" '
             f'errors="0" time="{total:.3f}">']  # fmt: skip
    for r in results:
        head = f'  <testcase classname={quoteattr(r.file)} name={quoteattr(r.scenario.name)} time="{r.seconds:.3f}"'
        if r.passed:
            lines.append(head + "/>")
        else:
            text = escape("\n".join(r.failures))
            lines.append(f"{head}>\n    <failure message={quoteattr(r.failures[0])}>{text}</failure>\n  </testcase>")
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"
