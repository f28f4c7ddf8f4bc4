"""The harness registry: every adapter offers the whole interface, and the docs table is current."""

from __future__ import annotations

import pytest

from governor import harnesses
from governor.commands.harnesses import BEGIN, END, markdown
from tests.conftest import ROOT, Env

HOT = ("NAME", "TITLE", "AGENT_DIRS", "CAPABILITIES", "BadPayload", "event_name", "sniff_event", "parse", "render",
       "refusal")  # fmt: skip
SETUP = ("SCOPES", "plan_install", "plan_uninstall", "doctor")


@pytest.mark.parametrize("name", harnesses.names())
def test_every_adapter_offers_the_whole_interface(name: str) -> None:
    adapter = harnesses.adapter(name)
    assert name == adapter.NAME
    assert [attr for attr in HOT if not hasattr(adapter, attr)] == []
    setup = harnesses.part(name, "setup")
    assert setup is not None and [attr for attr in SETUP if not hasattr(setup, attr)] == []


def test_docs_harness_table_is_generated_from_the_adapters() -> None:
    text = (ROOT / "docs" / "harnesses.md").read_text(encoding="utf-8")
    table = text[text.index(BEGIN) : text.index(END) + len(END)] + "\n"
    assert table == markdown(), "run: memory-governor harnesses --format markdown, and paste it into docs/harnesses.md"


def test_an_unknown_harness_gets_no_answer_and_says_why(env: Env) -> None:
    out = env.cli("hook", "no-such-harness", input='{"hook_event_name": "PreToolUse"}')
    assert out.returncode == 0 and out.stdout == ""
    assert "no adapter for harness 'no-such-harness'" in out.stderr
