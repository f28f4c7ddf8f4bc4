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

import json
import os
import shlex
from typing import Any

from governor.harnesses import hook_command
from governor.harnesses.checks import OK, WARN, Check
from governor.harnesses.settings import Change, SettingsError, read_text

NAME = "claude-agent-sdk"
SCOPES = ("project",)
MODULE_FILE = "memory-governor.mjs"
TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "govern.mjs")
CONFIG_LINE = "const CONFIG = {} // memory-governor: the install writes this line"
MARK = "// memory-governor for the Claude Agent SDK (TypeScript):"
SOCKET_TIMEOUT_MS = 5_000  # the thin client's own (governor.runtime.client.TIMEOUT)
PROCESS_TIMEOUT_MS = 10_000  # what the other installers give a hook process


def module_path(project: str) -> str:
    return os.path.join(project, MODULE_FILE)


def module_text(policy: dict[str, Any]) -> str:
    from governor.harnesses.claude_code.setup import governed_tools

    with open(TEMPLATE, encoding="utf-8") as handle:
        template = handle.read()
    assert template.startswith(MARK) and template.count(CONFIG_LINE) == 1, "govern.mjs lost its marks"
    config = {"harness": NAME, "command": shlex.split(hook_command(NAME)), "governed": governed_tools(policy),
              "socketTimeoutMs": SOCKET_TIMEOUT_MS, "processTimeoutMs": PROCESS_TIMEOUT_MS}  # fmt: skip
    return template.replace(CONFIG_LINE, CONFIG_LINE.replace("{}", json.dumps(config, sort_keys=True), 1))


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    path = module_path(project)
    before = read_text(path)
    if before is not None and not before.startswith(MARK):
        raise SettingsError(f"{path}: a file of that name that is not memory-governor's is there; move it aside "
                            "(nothing was changed)")  # fmt: skip
    done = ("wrote the TypeScript SDK module: import { govern } from it (a Python program calls "
            "governor.sdk.claude_agent.govern instead)")  # fmt: skip
    return [Change(path, before, module_text(policy), done, "already installed", str)]


def plan_uninstall(scope: str, project: str) -> list[Change]:
    path = module_path(project)
    before = read_text(path)
    after = None if before is not None and before.startswith(MARK) else before
    return [Change(path, before, after, "module removed", "not installed", str)]


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """The TypeScript module, where one is installed: is it current for this policy?"""
    text = read_text(module_path(project))
    if text is None or not text.startswith(MARK):
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
