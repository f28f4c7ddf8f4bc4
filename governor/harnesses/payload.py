"""Reading a hook payload, for every adapter: the located error a bad one raises, its field
checks, and the event of input that is not JSON.

Each adapter names its own fields and events; what is done with them is here, once. Hot path:
standard library only (imported by every hook process that decides in-process).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Container, Mapping
    from typing import Any


class BadPayload(ValueError):
    """The hook input is not what the harness sends; the message says which field."""


def wrap(event: str, raw: bytes) -> bytes:
    """A payload that does not name its event, as the hook reads it when its command names the
    event (`<harness> <Event>`): `{"event": <Event>, "payload": <raw>}`. An event that is not a
    plain name is left out (the adapter then reads no event: BadPayload). Whatever `raw` is, the
    event stands first, so `sniff_event` finds it in input that is not valid JSON."""
    name = event.encode() if event.isidentifier() and event.isascii() else b""
    return b'{"event":"' + name + b'","payload":' + raw + b"}"


def text(payload: dict[str, Any], field: str, required: bool = False, alias: str | None = None) -> str | None:
    """The string in `field` (or, where it is absent, in `alias`: a dialect's other spelling),
    None when absent; BadPayload when it is not a string, or absent or empty and `required`."""
    value = payload.get(field)
    if value is None and alias is not None:
        value = payload.get(alias)
    if value is None:
        if required:
            raise BadPayload(
                f"field {field!r} is missing" if alias is None else f"field {field!r} ({alias!r}) is missing"
            )
        return None
    if not isinstance(value, str):
        raise BadPayload(f"field {field!r} should be a string, got {type(value).__name__}")
    if required and not value:
        raise BadPayload(f"field {field!r} is empty")
    return value


def nonempty(payload: dict[str, Any], field: str, required: bool = False) -> str | None:
    """The string in `field` as `text` reads it, None when it is empty too: an empty id is no id."""
    return text(payload, field, required) or None


def mapping(payload: dict[str, Any], field: str) -> dict[str, Any] | None:
    """The object in `field` (a tool's arguments), None when absent; BadPayload when it is not one."""
    value = payload.get(field)
    if value is not None and not isinstance(value, dict):
        raise BadPayload(f"field {field!r} should be an object, got {type(value).__name__}")
    return value


def event_name(payload: Any, field: str) -> str | None:
    """The event a payload names in `field`, if it is an object naming one."""
    name = payload.get(field) if isinstance(payload, dict) else None
    return name if isinstance(name, str) else None


def governed(
    payload: Any, field: str, events: Mapping[str, str], what: str = "the hook input"
) -> tuple[str, str] | None:
    """(the harness's event name, the engine's kind) of a payload; None for an event the adapter
    does not govern. BadPayload for anything but an object, or one that names no event."""
    if not isinstance(payload, dict):
        raise BadPayload(f"{what} should be a JSON object, got {type(payload).__name__}")
    name = event_name(payload, field)
    if name is None:
        raise BadPayload(f"field {field!r} is missing")
    kind = events.get(name)
    return None if kind is None else (name, kind)


def placed(payload: Any, field: str, events: Mapping[str, str], env: Mapping[str, str] | None,
           project_variable: str) -> tuple[str, dict[str, Any]] | None:  # fmt: skip
    """The engine's kind of a payload's event (None for one the adapter does not govern, as
    `governed`) and its place: `cwd`, and the project the harness names in `project_variable`
    (else `cwd`)."""
    found = governed(payload, field, events)
    if found is None:
        return None
    cwd = text(payload, "cwd")
    return found[1], {"cwd": cwd, "project": (env or {}).get(project_variable) or cwd}


def named(raw: bytes, field: str, word: bytes = rb"\w+") -> str | None:
    """The name in `field` of input that is not valid JSON, as far as its bytes tell."""
    import re

    match = re.search(rb'"' + field.encode() + rb'"\s*:\s*"(' + word + rb')"', raw)
    return match.group(1).decode() if match else None


def sniff_event(raw: bytes, field: str, events: Container[str], word: bytes = rb"\w+") -> str | None:
    """The event named in `field` of input that is not valid JSON, if it is one of `events` (so
    that a refusal can still answer in the event's own shape: failing closed correctly)."""
    name = named(raw, field, word)
    return name if name is not None and name in events else None


def readers(
    field: str, events: Container[str], word: bytes = rb"\w+"
) -> tuple[Callable[[Any], str | None], Callable[[bytes], str | None]]:
    """An adapter's `event_name(payload)` (the event a payload names in `field`) and
    `sniff_event(raw)` (the event, one of `events`, named there in input that is not valid JSON,
    so that a refusal can still answer in the event's own shape)."""
    return (lambda payload: event_name(payload, field)), (lambda raw: sniff_event(raw, field, events, word))


def content_text(content: Any) -> str:
    """The text of a tool result's content blocks (`[{"type": "text", "text": ...}, ...]`), or
    the content itself when it is a string: what the model reads of it."""
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "\n".join(str(b["text"]) for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


def script_message(payload: Any, events: Mapping[str, str]) -> tuple[str, str, dict[str, Any]] | None:
    """(the event's name, the engine's kind, Event fields) of a message a host's script sends
    (`{event, sessionId, cwd, ...}`: OpenCode's plugin aside, Pi's extension and Cline's plugin):
    `cwd` as the project, and for a tool event `toolName`, `toolCallId`, `input`, `mcp: {server,
    tool}`, and after the call `content` (its text) and `isError` (the kind is then TOOL_FAILED).
    None for an event not governed."""
    from governor.engine import events as ev

    known = governed(payload, "event", events, "the message")
    if known is None:
        return None
    name, kind = known
    cwd = text(payload, "cwd")
    fields: dict[str, Any] = {"cwd": cwd, "project": cwd}
    if kind in (ev.PRE_TOOL, ev.POST_TOOL):
        mcp = mapping(payload, "mcp") or {}
        fields.update(tool_name=text(payload, "toolName", required=True), server=text(mcp, "server") or None,
                      tool=text(mcp, "tool") or None, tool_input=mapping(payload, "input"),
                      call_id=text(payload, "toolCallId"))  # fmt: skip
        if kind == ev.POST_TOOL:
            fields["tool_result"] = content_text(payload.get("content"))
            kind = ev.TOOL_FAILED if payload.get("isError") is True else kind
    return name, kind, fields
