"""memory-governor through the real Cline CLI: what THE MODEL RECEIVED.

Every test drives `cline --json` (pinned in cline_env.py) in a fresh project where the project's
own installer wrote the plugin, against fake_chat.FakeChat as an OpenAI-compatible provider, which
plays the model's side from a script and records each request. The scenarios are the ones every
harness proves (scenarios.py), with a control run that fails them.

Run: .venv/bin/python -m pytest tests/e2e/test_cline.py -m e2e -x -q
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("cline_env", "scenarios")
import scenarios  # noqa: E402
from cline_env import ClineHarness, denied  # noqa: E402
from fake_chat import call  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("cline_env",)  # its fixtures: cline (hook processes), cline_warm (the warm server)
CEILING = 1300  # the model reads a result as the JSON of its content: escapes and field names count too


def name(tool: str) -> str:
    return f"engram__{tool}"


def test_parallel_searches_are_capped_and_clamped_and_the_next_prompt_has_a_fresh_budget(
    cline_warm: ClineHarness,
) -> None:
    scenarios.parallel_searches_then_a_fresh_turn(cline_warm, name, denied)
    assert (cline_warm.state / "run" / "governor.sock").exists(), "the plugin reached the warm server"


def test_a_guessed_fetch_is_denied_the_turn_ceiling_holds_and_engram_itself_is_out_of_reach(
    cline: ClineHarness,
) -> None:
    scenarios.fetches_ceiling_and_routes(
        cline, name, denied, call("run_commands", {"commands": ["engram search sqlite --limit 50"]}),
        call("read_files", {"files": [{"path": str(cline.home / ".engram" / "engram.db")}]}), CEILING,
    )  # fmt: skip


def test_mem_context_is_locked_until_a_recall_prompt_then_allowed_once(cline: ClineHarness) -> None:
    scenarios.mem_context_locked_then_recalled_once(cline, name, denied, CEILING)


def test_without_the_install_every_call_goes_through(cline: ClineHarness) -> None:
    scenarios.ungoverned(cline, name, denied)


def test_the_project_install_runs_the_committed_launcher(cline: ClineHarness) -> None:
    cline.scope = "project"
    scenarios.project_install(cline, name, denied, cline.plugin)
