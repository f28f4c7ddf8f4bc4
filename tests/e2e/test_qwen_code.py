"""memory-governor through the real Qwen Code binary: what THE MODEL RECEIVED.

Every test drives `qwen -p` (pinned in qwen_env.py) in a fresh project where the project's own
installer wrote the hooks, against fake_chat.FakeChat as its OpenAI-compatible endpoint, which plays
the model's side from a script and records each request. Qwen applies no rewritten arguments, so a
clamp reaches the model as a refusal naming the limit to call again with; a result over the budget
reaches it as the trimmed text in the call's error. A control run with nothing installed shows what
the same script does ungoverned.

Run: .venv/bin/python -m pytest tests/e2e/test_qwen_code.py -m e2e -x -q
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.register_assert_rewrite("qwen_env")
import scenarios  # noqa: E402
from fake_chat import call, text, tool_uses  # noqa: E402
from qwen_env import QwenHarness  # noqa: E402
from sandbox import NOTE, hit_ids, o200k  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("qwen_env",)


def name(tool: str) -> str:
    return f"mcp__engram__{tool}"


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    return call(name(tool), tool_input)


def denied(result: Any, *fragments: str) -> bool:
    """A call the governor refused: Qwen gives the model the hook's reason as the call's error."""
    return result.text.startswith("memory-governor") and all(f in result.text for f in fragments)


def test_a_clamp_is_a_refusal_naming_the_limit_the_retry_runs_and_the_cap_holds(qwen: QwenHarness) -> None:
    run = qwen.run("What did we decide about auth and search?",
                   main=[tool_uses(engram("mem_search", query="jwt auth", limit=10)),
                         tool_uses(engram("mem_search", query="jwt auth", limit=3)),
                         tool_uses(engram("mem_search", query="fts5", limit=3)),
                         tool_uses(engram("mem_search", query="sqlite", limit=3)), text("Summarised.")])  # fmt: skip
    clamp, retried, second, third = run.results_of("mem_search")
    assert denied(clamp, '{"limit": 3}', "counts nothing"), clamp.text
    assert not denied(retried) and 0 < len(hit_ids(retried.text)) <= 3, retried.text
    assert not denied(second), second.text
    assert denied(third, "max_search_calls=2"), "the refused clamp took no slot; the third real search is over"
    assert [c["arguments"]["limit"] for c in qwen.calls("mem_search")] == [3, 3], "the refused calls never ran"
    assert sorted(qwen.ledger_calls()) == [("search", "committed")] * 2 + [("search", "denied")] * 2
    assert "memory_need=" in run.lane()[0].all_text(), "the prompt's memory-need line reached the model"
    again = qwen.run("And what about sessions?", session=run.session_id,
                     main=[tool_uses(engram("mem_search", query="sessions", limit=3)), text("Done.")])  # fmt: skip
    assert [denied(r) for r in again.results_of("mem_search")] == [False], "a new prompt is a new turn"


def test_a_guessed_fetch_is_denied_the_turn_ceiling_holds_and_engram_itself_is_out_of_reach(qwen: QwenHarness) -> None:
    scenarios.fetches_ceiling_and_routes(qwen, name, denied, call("run_shell_command", {"command": "engram search sqlite"}),
                                         call("read_file", {"file_path": str(qwen.home / ".engram" / "engram.db")}))  # fmt: skip


def test_mem_context_is_locked_until_a_recall_prompt_then_allowed_once_within_its_bounds(qwen: QwenHarness) -> None:
    context = tool_uses(engram("mem_context", project="myapp"))
    first = qwen.run("Continue with the auth work where we left off.", main=[context, text("Continuing.")])
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    # Unlocked by a recall prompt; the bounds the governor sets come back as the arguments to call again with.
    bounded = tool_uses(engram("mem_context", compact=True, max_bytes=3354))
    again = qwen.run("give me all context", session=first.session_id, main=[context, bounded, context,
                                                                              text("Recovered.")])  # fmt: skip
    refused, allowed, second = again.results_of("mem_context")
    assert denied(refused, '"max_bytes": 3354', "counts nothing"), refused.text
    assert not denied(allowed) and "## Memory from Previous Sessions" in allowed.text, allowed.text
    assert o200k(allowed.text) <= 1200 and NOTE in allowed.text, "the dump is cut to whole entries"
    assert denied(second, "is off outside post-compaction recovery"), second.text
    assert [c["arguments"] for c in qwen.calls("mem_context")] == [{"compact": True, "max_bytes": 3354}]


def test_a_project_install_runs_the_launcher_and_doctor_checks_it(qwen: QwenHarness) -> None:
    qwen.scope = "project"
    qwen.install()
    assert ".memory-governor/hook" in qwen.settings.read_text()
    assert str(qwen.tmp) not in qwen.settings.read_text(), "the committed file names no machine path"
    run = qwen.run("What did we decide about auth?", main=[tool_uses(engram("mem_search", query="auth", limit=10)),
                                                          text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert denied(result, '{"limit": 3}') and qwen.calls("mem_search") == [], result.text
    doctor = qwen.governor("doctor", check=False)
    assert "qwen-code (project)" in doctor.stdout and "limit 10 refused" in doctor.stdout, doctor.stdout


def test_without_the_install_every_call_goes_through(qwen: QwenHarness) -> None:
    scenarios.ungoverned(qwen, name, denied)
