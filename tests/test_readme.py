"""The README's commands work from any project and print what the README shows.

scripts/readme_examples.py runs each example in a fresh project outside this repository (its
own HOME and state directory) and compares the output with README.md's generated block.
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_the_readme_examples_run_from_a_fresh_project_and_print_what_it_shows() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_examples.py"), "--check"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT / "docs")  # fmt: skip
    assert out.returncode == 0, out.stderr


def test_the_readme_states_what_install_and_doctor_count() -> None:
    from governor.harnesses.claude_code import setup

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    events = len(setup.TOOL_EVENTS) + len(setup.SESSION_EVENTS)
    assert f"It hooks {events} events (the {len(setup.TOOL_EVENTS)} tool" in readme
    assert f"and {len(setup.SESSION_EVENTS)} session events" in readme
    for route_tool in ("`Bash`", "`Read`", "`Write`", "`Edit`"):
        assert route_tool in readme, f"the README names {route_tool} among the tools that start a hook"
