"""langchain: nothing to install; the program calls governor.sdk.langchain.govern itself (docs/orchestrators.md).

Cold path.
"""

from __future__ import annotations

from typing import Any

from governor.harnesses.in_process_setup import SCOPES, doctor, nothing_to_install, plan_uninstall
from governor.harnesses.settings import Change

__all__ = ["SCOPES", "doctor", "plan_install", "plan_uninstall"]


def plan_install(policy: dict[str, Any], scope: str, project: str) -> list[Change]:
    return nothing_to_install("langchain", "governor.sdk.langchain.govern(...)")
