"""The Claude Agent SDK: nothing to install into a file; a program governs its own agents.

An orchestrator on the SDK calls `governor.sdk.claude_agent.govern(options)` (docs/orchestrators.md);
`install claude-agent-sdk` says so; `doctor` has no file of ours to check.

Cold path.
"""

from __future__ import annotations

from typing import Any

from governor.harnesses.checks import Check
from governor.harnesses.settings import Change, SettingsError

NAME = "claude-agent-sdk"
SCOPES = ("project",)
HOW = ("the Claude Agent SDK is governed from the program that runs it: "
       "`options = govern(ClaudeAgentOptions(...))` with `from governor.sdk.claude_agent import govern` "
       "(docs/orchestrators.md); there is no settings file to install into")  # fmt: skip


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    raise SettingsError(HOW)


def plan_uninstall(scope: str, project: str) -> list[Change]:
    raise SettingsError(HOW)


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    """Nothing of ours is installed in a file: nothing to check."""
    return []
