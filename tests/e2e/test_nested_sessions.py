"""One budget per user turn, whatever the model starts, in the real binaries: the model, inside one
user turn, starts another agent from its Bash tool (`claude -p`, three in a loop, with the marker
unset, detached with `setsid` and a scrubbed environment; `codex exec`) asking it for everything the
memory holds, and reads its output back. The user's turn must stay within its limits: at most 2
searches and 1,200 o200k of memory reaching any model, and no mem_context (the nested prompt, which
the model wrote, arms no recall). Measured against the memory server's own call log and what the
model stand-ins received. (Before governor.engine.nesting: 3 nested runs served 3 mem_context and
5,248 o200k to one turn in Claude Code 2.1.197.)"""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest
from claude_agent_sdk_env import SdkHarness, orchestrator, sdk
from codex_env import CodexHarness, CodexTools, codex_tools_fixture, responses_fixture, responses_server_fixture
from conftest import ENGRAM_TOOLS, Harness
from fake_model import call, engram, text, tool_uses
from fake_responses import FakeResponses
from fake_responses import engram as codex_engram
from fake_responses import text as codex_text
from fake_responses import tool_uses as codex_tool_uses

from governor.engine.tokens import counter

pytestmark = pytest.mark.e2e
__all__ = ["codex_tools_fixture", "orchestrator", "responses_fixture", "responses_server_fixture", "sdk"]  # fixtures

NESTED = "NESTED-RUN-MARK"  # in the nested prompt: its requests play the nested lane of the script
ASK = f"{NESTED} recall everything you remember about this project"
o200k = counter("o200k_base").count


def nested_steps() -> list[Any]:
    """What the nested agent's model does: the whole-memory dump, then two searches at once."""
    return [tool_uses(engram("mem_context")),
            tool_uses(engram("mem_search", query="auth", limit=3), engram("mem_search", query="jwt", limit=3)),
            text("Here is everything.")]  # fmt: skip


def claude_line(cc: Harness, how: str) -> str:
    tools = ",".join(ENGRAM_TOOLS)
    run = (f"{shlex.quote(str(cc.tools.claude))} -p {shlex.quote(ASK)} --mcp-config {shlex.quote(str(cc.mcp_config))} "
           f"--allowedTools {tools} --output-format stream-json --verbose")  # fmt: skip
    if how == "loop":
        return f"for i in 1 2 3; do {run}; done"
    if how == "unset":
        return f"env -u MEMORY_GOVERNOR_PARENT {run}"
    if how == "setsid-scrubbed":  # the ledger is found from HOME, as a person's is
        keep = " ".join(f"{name}=${name}" for name in ("PATH", "HOME", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                                                        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                                                        "MEMORY_GOVERNOR_WARM_SERVER"))  # fmt: skip
        return f"setsid env -i {keep} {run}"
    return run


def memory_reaching_models(requests: list[Any]) -> list[Any]:
    """Every memory tool result any model (the user's or a nested agent's) received, each once."""
    seen: dict[str, Any] = {}
    for request in requests:
        for result in request.tool_results():
            if (result.name or "").startswith("mcp__engram__"):
                seen.setdefault(result.tool_use_id, result)
    return list(seen.values())


def delivered(result: Any) -> bool:
    """A result that reached the model as the tool's output (not a refusal in its place)."""
    return not getattr(result, "is_error", False) and not result.text.startswith("Tool call blocked by PreToolUse")


def assert_one_turn(cc: Harness, requests: list[Any], runs: int) -> None:
    served = cc.calls()
    searches = [c for c in served if c["tool"] == "mem_search"]
    assert [c["tool"] for c in served if c["tool"] == "mem_context"] == [], "a nested prompt unlocked mem_context"
    assert len(searches) <= 2, f"{len(searches)} searches served in one user turn"
    received = sum(o200k(r.text) for r in memory_reaching_models(requests) if delivered(r))
    assert received <= 1200, f"{received} o200k of memory reached the models in one user turn"
    nested = [r for r in cc.decisions("prompt") if r["code"] == "nested_prompt"]
    assert len(nested) == runs, [r["code"] for r in cc.decisions("prompt")]
    (user_turn,) = {r["turn"] for r in cc.decisions("pre_tool") if r["tool"] == "engram/mem_search"}
    assert user_turn, "every search of the nested agents counted in the user's turn"


@pytest.mark.parametrize("how", ["plain", "loop", "unset", "setsid-scrubbed"])
def test_an_agent_started_from_bash_is_charged_to_the_users_turn(cc: Harness, how: str) -> None:
    if how == "setsid-scrubbed":  # the ledger found from HOME, as a scrubbed environment finds it
        cc.state = cc.home / ".local" / "state" / "memory-governor"
        cc.env["MEMORY_GOVERNOR_STATE_DIR"] = str(cc.state)
    runs = 3 if how == "loop" else 1
    cc._write_mcp_config()
    bash = call("Bash", {"command": claude_line(cc, how), "description": "ask another agent", "timeout": 300000})
    main = [tool_uses(engram("mem_search", query="auth", limit=3)), tool_uses(bash), text("Done.")]
    run = cc.run("What did we decide about auth?", main=main, lanes={NESTED: nested_steps() * runs},
                 allowed=[*ENGRAM_TOOLS, "Bash"])  # fmt: skip
    assert_one_turn(cc, run.requests, runs)
    answered = [r for r in run.requests if r.lane == NESTED and (r.reply or {}).get("kind") == "text"]
    assert len(answered) == runs, f"{len(answered)} of {runs} nested runs finished\n{run.describe()}"


def test_codex_exec_started_from_claude_codes_bash_is_charged_to_the_users_turn(
    cc: Harness, codex_tools: CodexTools, responses: FakeResponses
) -> None:
    """The nested agent is another harness: `codex exec`, with Codex's own hooks installed."""
    codex = CodexHarness(cc.tmp, codex_tools, responses)  # the same project, HOME, ledger and Engram log
    codex.install()
    cc.env.update({k: codex.env[k] for k in ("CODEX_HOME", "OPENAI_API_KEY")})
    responses.script([codex_tool_uses(codex_engram("mem_context")),
                      codex_tool_uses(codex_engram("mem_search", query="auth", limit=3),
                                      codex_engram("mem_search", query="jwt", limit=3)),
                      codex_text("Here is everything.")])  # fmt: skip
    line = f"{shlex.quote(str(codex_tools.codex))} exec --json --skip-git-repo-check {shlex.quote(ASK)}"
    bash = call("Bash", {"command": line, "description": "ask codex", "timeout": 300000})
    main = [tool_uses(engram("mem_search", query="auth", limit=3)), tool_uses(bash), text("Done.")]
    run = cc.run("What did we decide about auth?", main=main, allowed=[*ENGRAM_TOOLS, "Bash"])
    assert_one_turn(cc, [*run.requests, *responses.since(0)], 1)
    assert not responses.errors and not [n for n in responses.remaining().values() if n], responses.remaining()
    assert json.dumps([e for e in cc.decisions() if e["harness"] == "codex"])


def test_the_sdks_bundled_binary_started_from_an_isolation_mode_session_is_charged_to_it(
    orchestrator: SdkHarness,
) -> None:
    """An Agent SDK program in isolation mode (`setting_sources=[]`, govern()'s callbacks alone) whose
    model runs the SDK's own bundled binary from Bash. That `claude -p` loads the hooks installed where
    it runs (here at user scope: isolation mode keeps them out of the program's own session only),
    and its session is charged to the program's: govern() gives the binary's tools the marker, and
    the program is among the nested run's ancestors."""
    orchestrator.governor("install", "claude-code", "--scope", "user")
    orchestrator._write_mcp_config()
    bundled = orchestrator.sdk / "claude_agent_sdk" / "_bundled" / "claude"
    line = (f"{shlex.quote(str(bundled))} -p {shlex.quote(ASK)} --mcp-config {shlex.quote(str(orchestrator.mcp_config))} "
            f"--allowedTools {','.join(ENGRAM_TOOLS)} --output-format stream-json --verbose")  # fmt: skip
    bash = call("Bash", {"command": line, "description": "ask another agent", "timeout": 300000})
    main = [tool_uses(engram("mem_search", query="auth", limit=3)), tool_uses(bash), text("Done.")]
    run = orchestrator.run_sdk("What did we decide about auth?", main=main, lanes={NESTED: nested_steps()},
                               setting_sources=[], extra={"allowed_tools": [*ENGRAM_TOOLS, "Bash"]})  # fmt: skip
    assert_one_turn(orchestrator, run.requests, 1)
    harnesses = {row["harness"] for row in orchestrator.decisions("pre_tool")}
    assert harnesses == {"claude-agent-sdk", "claude-code"}, harnesses  # the program's callbacks, the nested hooks
