"""memory-governor through the real Kilo Code CLI binary: what THE MODEL RECEIVED.

Kilo Code's CLI is built on OpenCode and loads OpenCode's plugin: `install kilo` writes it into
`.kilo/plugin/`. So the scenarios are OpenCode's (test_opencode.py), each run here in `kilo run`
(pinned in kilo_env.py) against the same scripted Chat Completions stand-in: the search cap and
clamp in one parallel batch through the warm server, a guessed fetch, the turn's token ceiling
and the routes around the memory tools, mem_context unlocked once by a recall prompt, subagent
tiers counted in the dispatching turn, on_error when no governor answers, and the committed
plugin's launcher. A control run with nothing installed shows what the plugin changes.

Run: .venv/bin/python -m pytest tests/e2e/test_kilo.py -m e2e -x -q
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("kilo_env", "test_opencode")
import test_opencode as scenarios  # noqa: E402
from fake_chat import text, tool_uses  # noqa: E402
from kilo_env import KiloHarness  # noqa: E402

pytestmark = pytest.mark.e2e
pytest_plugins = ("kilo_env",)  # its fixtures: kc (hook processes), kc_warm (the warm server)
engram, denied = scenarios.engram, scenarios.denied


def test_parallel_searches_get_two_clamped_results_and_two_denials(kc_warm: KiloHarness) -> None:
    scenarios.test_parallel_searches_get_two_clamped_results_and_two_denials(kc_warm)
    doctor = kc_warm.governor("doctor", check=False)
    assert "kilo (project)" in doctor.stdout and "clamped limit 10 -> 3" in doctor.stdout, doctor.stdout


def test_a_guessed_fetch_is_denied_the_turn_ceiling_holds_and_engram_itself_is_out_of_reach(kc: KiloHarness) -> None:
    scenarios.test_a_guessed_fetch_is_denied_the_turn_ceiling_holds_and_engram_itself_is_out_of_reach(kc)


def test_mem_context_is_locked_until_a_recall_prompt_then_allowed_once(kc_warm: KiloHarness) -> None:
    scenarios.test_mem_context_is_locked_until_a_recall_prompt_then_allowed_once(kc_warm)


def test_subagent_tiers_and_the_turn_budget_subagents_share(kc: KiloHarness) -> None:
    scenarios.test_subagent_tiers_and_the_turn_budget_subagents_share(kc)


def test_a_governor_that_cannot_run_refuses_memory_calls_and_says_so(kc: KiloHarness) -> None:
    scenarios.test_a_governor_that_cannot_run_refuses_memory_calls_and_says_so(kc)


def test_the_committed_plugin_governs_and_with_no_governor_says_so_and_refuses_under_closed(kc: KiloHarness) -> None:
    scenarios.test_the_committed_plugin_governs_and_with_no_governor_says_so_and_refuses_under_closed(kc)


def test_without_the_install_every_call_goes_through(kc: KiloHarness) -> None:
    kc.hooks = False
    run = kc.run("What did we decide about auth and storage?",
                 main=[tool_uses(engram("mem_search", query="jwt auth", limit=10),
                                 engram("mem_search", query="sqlite", limit=3),
                                 engram("mem_search", query="fts5", limit=3)),
                       tool_uses(engram("mem_get_observation", id=62)), text("Everything.")])  # fmt: skip
    assert not any(denied(r) for r in run.results()), run.describe()
    assert sorted(c["arguments"]["limit"] for c in kc.calls("mem_search")) == [3, 3, 10]
    assert len(kc.calls("mem_get_observation")) == 1
    assert not kc.plugin.exists() and "memory_need=" not in run.lane()[0].first_user_text
