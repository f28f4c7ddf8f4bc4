"""The limits of every policy compiled or accepted on this machine, by digest, so `report` shows
each turn against the limits in force then (each audit row names its policy's digest).

`<state>/limits/<digest>.json`: {limit: value}, written once per digest. Cold path: written when
a policy is compiled or accepted, read by the report.
"""

from __future__ import annotations

import os

from governor import jsonio
from governor.state import ensure_dir, write_atomic

TYPE_CHECKING = False  # typing imports re and enum: not on the hook's path
if TYPE_CHECKING:
    from typing import Any

FOLDER = "limits"


def remember(state: str, blob: dict[str, Any]) -> None:
    """Keep the limits of a compiled policy by its digest (as the audit trail spells it)."""
    digest = str(blob.get("digest", ""))[:16]
    limits = (blob.get("policy") or {}).get("limits")
    if not digest or not isinstance(limits, dict):
        return
    try:
        path = os.path.join(ensure_dir(os.path.join(state, FOLDER)), f"{digest}.json")
        if not os.path.exists(path):
            values = {name: spec.get("value") for name, spec in limits.items() if isinstance(spec, dict)}
            write_atomic(path, jsonio.dumps(values).encode())
    except OSError:
        pass


def limits_of(state: str, digest: str) -> dict[str, Any] | None:
    """The limits remembered for a policy digest (its first 16 characters), None if unknown."""
    if not digest or "/" in digest or os.sep in digest:
        return None
    try:
        from governor.state import read_regular

        data = jsonio.loads(read_regular(os.path.join(state, FOLDER, f"{digest[:16]}.json")))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
