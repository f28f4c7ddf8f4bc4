"""The Claude Agent SDK: a Python program governs its own agents; a TypeScript one gets a module.

Python: `governor.sdk.claude_agent.govern(options)` in the program itself; nothing is installed.
TypeScript: `install claude-agent-sdk --project DIR` writes `DIR/memory-governor.mjs`, govern.mjs
with its CONFIG line filled in (the hook command, the governed tool names, the timeouts), which the
program imports (`import { govern } from "./memory-governor.mjs"`; docs/claude-agent-sdk.md). A file
of that name that is not memory-governor's is never overwritten. `doctor` checks that module is
current for the policy.

Cold path.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from governor.harnesses import hook_command
from governor.harnesses.checks import OK, WARN, Check
from governor.harnesses.scripts import Script, timeouts
from governor.harnesses.settings import Change, read_text

NAME = "claude-agent-sdk"
SCOPES = ("project",)
MODULE_FILE = "memory-governor.mjs"
SCRIPT = Script(__file__, "govern.mjs", "// memory-governor for the Claude Agent SDK (TypeScript):")


def module_path(project: str) -> str:
    return os.path.join(project, MODULE_FILE)


def module_config(policy: dict[str, Any]) -> dict[str, Any]:
    from governor.harnesses.claude_code.setup import governed_tools

    return {"harness": NAME, "command": shlex.split(hook_command(NAME)), "governed": governed_tools(policy),
            **timeouts()}  # fmt: skip


def module_text(policy: dict[str, Any]) -> str:
    return SCRIPT.text(module_config(policy))


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    done = ("wrote the TypeScript SDK module: import { govern } from it (a Python program calls "
            "governor.sdk.claude_agent.govern instead)")  # fmt: skip
    return [SCRIPT.install(module_path(project), module_config(policy), done)]


def plan_uninstall(scope: str, project: str) -> list[Change]:
    return [SCRIPT.uninstall(module_path(project), "module removed")]


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """The TypeScript module, where one is installed: is it current for this policy?"""
    text = read_text(module_path(project))
    if not SCRIPT.ours(text):
        return []
    if text == module_text(policy):
        return [Check(OK, "claude-agent-sdk", f"{module_path(project)} is current")]
    return [
        Check(
            WARN,
            "claude-agent-sdk",
            f"{module_path(project)} is out of date for this policy or install",
            f"memory-governor install claude-agent-sdk --project {project}",
        )
    ]
