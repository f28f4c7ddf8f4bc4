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


def test_what_a_user_reads_names_no_outside_design_documents() -> None:
    """The README, the docs, the schema editors show, the rendered policy and every command's help
    say what a rule does in plain words, not by the number of a design document elsewhere."""
    from governor.commands.app import COMMANDS

    cited = ("RFC 0113", "RFC 0068", "RFC 0062", "ADR-0034", "loomflow")
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "schemas").glob("*.json"),
             *(ROOT / "rules").glob("*.md")]  # fmt: skip
    texts = {str(page.relative_to(ROOT)): page.read_text(encoding="utf-8") for page in pages}
    for name in COMMANDS:
        helped = subprocess.run([sys.executable, "-m", "governor", name, "--help"], capture_output=True, text=True)
        texts[f"memory-governor {name} --help"] = helped.stdout
    for command in ("policy",):
        for sub in ("check", "explain", "diff", "render", "schema", "accept"):
            helped = subprocess.run([sys.executable, "-m", "governor", command, sub, "--help"], capture_output=True,
                                    text=True)  # fmt: skip
            texts[f"memory-governor {command} {sub} --help"] = helped.stdout
    found = [(where, word) for where, text in texts.items() for word in cited if word in " ".join(text.split())]
    assert not found, found


def test_the_readme_opens_with_the_two_commands_then_what_this_is_and_how_to_install_it() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[2] == "```sh", "the README opens with its commands"
    block = lines[3 : lines.index("```", 3)]
    commands = [line.split("#")[0].strip() for line in block if not line.startswith(" ")]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"], "two commands, and only them"
    test_line = next(i for i, line in enumerate(lines) if line.startswith("./scripts/test.sh"))
    said = " ".join(line.split("#", 1)[-1] for line in lines[test_line : test_line + 4])
    for what in ("chromium", "redis-server", "A first run takes"):
        assert what in said, f"the test command's comment does not say {what!r}: {said}"
    first_screen = "\n".join(lines[:50])
    assert "keeps a coding agent's memory" in first_screen, "what this is, on the first screen"
    assert "## Install" in first_screen and "pipx install ." in first_screen, "how to install it"
    assert "uv tool install ." in first_screen
    readme = "\n".join(lines)
    assert "python3 -m pip install /path" not in readme and "pip install memory-governor" not in readme, (
        "an isolated install, never a bare pip install into the user's Python"
    )
