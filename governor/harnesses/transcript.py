"""A recorded session as the steps a replay plays: the shape every harness's transcript reader
produces (`governor.harnesses.<name>.transcripts.steps`), JSON Lines reading with located
errors, and the time a record was written.

Cold path.
"""

from __future__ import annotations

import json
from typing import Any


class TranscriptError(ValueError):
    """A transcript line that cannot be read; the message says where."""


class Call:
    def __init__(self, tool_name: str, tool_input: dict[str, Any], call_id: str, result: str | None = None,
                 is_error: bool = False, agent: tuple[str, str] | None = None) -> None:  # fmt: skip
        self.tool_name = tool_name
        self.tool_input = tool_input
        self.call_id = call_id
        self.result = result
        self.is_error = is_error
        self.agent = agent


class Step:
    """One event to play: ("start", source) | ("prompt", text, id) | ("pre", Call) | ("post", call_id, text, error),
    at the time the transcript recorded (None when it did not)."""

    __slots__ = ("args", "kind", "when")

    def __init__(self, kind: str, *args: Any, when: float | None = None) -> None:
        self.kind = kind
        self.args = args
        self.when = when


def read_jsonl(path: str) -> list[dict[str, Any]]:
    out = []
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
    except OSError as err:
        raise TranscriptError(f"{path}: cannot read it ({err.strerror})") from err
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise TranscriptError(f"{path}:{number}: not JSON ({err})") from None
        if isinstance(record, dict):
            out.append(record)
    return out


def when(record: dict[str, Any], fields: tuple[str, ...] = ("timestamp",)) -> float | None:
    """The time (epoch seconds) of a record's ISO 8601 stamp in the first of `fields` it fills;
    None when it has none that reads."""
    from datetime import datetime

    value = None
    for field in fields:
        value = record.get(field)
        if value:
            break
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
