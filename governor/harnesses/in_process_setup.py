"""Setup for the frameworks governed from inside the program (governor.harnesses.in_process):
there is nothing to install, since the program calls `govern()` itself. `install` says so.

Cold path.
"""

from __future__ import annotations

from typing import Any

from governor.harnesses.checks import Check
from governor.harnesses.settings import Change, SettingsError

SCOPES = ("project",)


def nothing_to_install(harness: str, entry: str) -> list[Change]:
    raise SettingsError(f"{harness} is governed from the program itself, with nothing installed: call {entry} "
                        "(docs/orchestrators.md)")  # fmt: skip


def plan_uninstall(scope: str, project: str) -> list[Change]:
    return []


def doctor(project: str, policy: dict[str, Any]) -> list[Check]:
    return []  # nothing installed: nothing to check
