"""Team telemetry's contract: what the governor did, as OpenTelemetry metrics and events.

The names and attributes docs/telemetry.md promises, how settings are read from the standard
`OTEL_*` variables, how each audit row (the ledger's `decisions`, what `report` reads) maps onto
them, and the exporters' cursor and status files in the state directory. The rows are the one
source: a long-lived process reads them after the cursor and hands them to the OpenTelemetry
SDK (governor.runtime.otel), so a hook that decided in its own process is sent by the next one,
and no row is sent twice.

A governed call is counted once, when it closes: refused before it ran, or its result (or its
failure) reported back; a save, a dispatch or a route is decided before it runs and closes
there. A retrieval call let through waits, in the cursor's state, for its result.

Standard library only.
"""

from __future__ import annotations

import os

from governor.engine.rules import KNOWN_AGENT, KNOWN_SERVER, KNOWN_TOOL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SERVICE_NAME = "memory-governor"
SCOPE = "memory_governor"

CALLS = "memory_governor.calls"
TOKENS = "memory_governor.tokens"
TURNS = "memory_governor.turns"
DURATION = "memory_governor.decision.duration"
DECISION_EVENT = "memory_governor.decision"
# name -> (instrument, unit, description): the metrics the contract exports, and nothing else.
METRICS = {
    CALLS: ("counter", "{call}", "Governed tool calls, each counted once with the decision that closed it."),
    TOKENS: ("counter", "{token}", "Memory tokens: injected into the model's context, held back by a trim, or "
             "replaced by pointers to entries already delivered."),
    TURNS: ("counter", "{turn}", "User prompts, by the memory need they were classified into."),
    DURATION: ("histogram", "ms", "How long the engine took to decide one hook event."),
}  # fmt: skip
# name -> the attributes of its points (bounded values: never a session id or any text).
ATTRIBUTES = {
    CALLS: ("harness", "role", "decision", "reason", "mode"),
    TOKENS: ("harness", "role", "kind"),
    TURNS: ("harness", "memory_need"),
    DURATION: ("harness", "event"),
}
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0)

DECISIONS = ("allowed", "clamped", "trimmed", "denied", "deduped")
TOKEN_KINDS = ("injected", "held_back", "deduped")
PROTOCOLS = ("http/protobuf", "grpc")
EXPORTERS = ("otlp", "console", "none")

RETRIEVAL = ("search", "timeline", "fetch", "context")  # roles whose result is counted, trimmed, deduped
OPEN_SECONDS = 900.0  # a call let through with no result after this long is counted without one
FORGET_SECONDS = 86400.0  # a call counted that way is remembered this long, so a late result is not counted again
MAX_OPEN = 20000  # calls waiting for their result, at most
BACKLOG_SECONDS = 300.0  # with no exporter for longer than this, the rows older than this are not sent

FOLDER = "telemetry"  # under the state directory
CURSOR = "cursor.json"
STATUS = "status.json"


class Settings:
    """What the standard variables ask for; `problems` says what cannot be honoured.

    `exporters[signal]`: the exporters of a signal ("metrics", "logs"), in the order given, none
    for "none". A comma-separated list is read as Claude Code reads it (the variables are shared):
    an exporter memory-governor has not (prometheus, say) is left out and said, the others stay."""

    __slots__ = ("endpoint", "exporters", "problems", "protocols")

    def __init__(self, env: Mapping[str, str]) -> None:
        self.problems: list[str] = []
        self.exporters: dict[str, tuple[str, ...]] = {}
        self.protocols: dict[str, str] = {}
        self.endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        for signal in ("metrics", "logs"):
            name = f"OTEL_{signal.upper()}_EXPORTER"
            own = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
            protocol = (env.get(own) or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
            self.protocols[signal] = protocol
            chosen: list[str] = []
            for item in (env.get(name) or "otlp").lower().split(","):
                item = item.strip()
                if item in ("", "none") or item in chosen:
                    continue
                if item not in EXPORTERS:
                    self.problems.append(f"{name}: {item!r} is not an exporter memory-governor has ({', '.join(EXPORTERS)}); "
                                         f"its {signal} go to the others listed, if any")  # fmt: skip
                elif item == "otlp" and protocol not in PROTOCOLS:
                    self.problems.append(f"OTLP protocol {protocol!r} for {signal} is not supported (use http/protobuf "
                                         f"or grpc); {signal} are not sent over OTLP")  # fmt: skip
                else:
                    chosen.append(item)
            self.exporters[signal] = tuple(chosen)

    @property
    def sends(self) -> bool:
        return any(self.exporters.values())


# -- the audit row -> metrics and events --------------------------------------------------------


def plain(ident: str) -> str:
    """An id as the harness sent it: the ledger's "s:" prefix off (a hashed id stays its hash)."""
    return ident[2:] if ident.startswith("s:") else ident


def admission(row: Mapping[str, Any]) -> tuple[str, str]:
    """(decision, reason) of a call's row before it ran."""
    decision, code = row["decision"], row["code"] or ""
    if decision == "deny":
        return ("deduped" if code == "delivered_once" else "denied"), code or "deny"
    if decision == "rewrite":
        return "clamped", code
    return "allowed", code or "allow"


def delivery(row: Mapping[str, Any]) -> tuple[str, str] | None:
    """(decision, reason) of a result the governor changed, else None (the admission stands)."""
    if row["decision"] != "replace":
        return None
    code = row["code"] or ""
    if code in ("trimmed", "l1_max_results", "window_trimmed"):
        return "trimmed", code
    if code == "deduped":
        return "deduped", code
    return None  # delivered in place of a pointer, whole


class Observed:
    """What one audit row adds: metric points (name, value, attributes) and decision events."""

    __slots__ = ("events", "points")

    def __init__(self) -> None:
        self.points: list[tuple[str, float, dict[str, str]]] = []
        self.events: list[dict[str, Any]] = []


def observe(row: Mapping[str, Any], waiting: dict[str, dict[str, Any]], out: Observed) -> None:
    """Add what `row` says to `out`; `waiting` holds the calls let through and not yet closed
    (kept with the cursor, so the next process carries on where this one stopped)."""
    harness = row["harness"] or "unknown"
    out.points.append((DURATION, float(row["duration_ms"]), {"harness": harness, "event": row["event"]}))
    role = row["role"] or ""
    delivered, saved, deduped = int(row["tokens_delivered"]), int(row["tokens_saved"]), int(row["tokens_deduped"])
    for kind, amount in (("injected", delivered), ("held_back", saved - deduped), ("deduped", deduped)):
        if amount > 0:
            out.points.append((TOKENS, float(amount), {"harness": harness, "role": role or "none", "kind": kind}))
    code = row["code"] or ""
    if row["event"] == "prompt" and code.startswith("memory_need:"):
        need = row["memory_need"] or code.split(":", 1)[1]
        out.points.append((TURNS, 1.0, {"harness": harness, "memory_need": need}))
    event = row["event"]
    if not role or role == "governor" or event not in ("pre_tool", "post_tool", "tool_failed"):
        return
    call = f"{row['session']}\0{row['call_id']}"
    if event == "pre_tool":
        decision, reason = admission(row)
        matched = bool(row["call_id"]) and not row["call_id"].startswith("anon:")
        if decision in ("denied", "deduped") or role not in RETRIEVAL or not matched:
            _close(out, row, decision, reason, "pre_tool", float(row["duration_ms"]))
            if matched and role in RETRIEVAL and row["mode"] == "monitor":  # it runs anyway: its result is no call
                waiting[call] = {"counted": True, "row": {"ts": float(row["ts"])}}
            return
        waiting[call] = {"counted": False, "decision": decision, "reason": reason, "ms": float(row["duration_ms"]),
                         "row": {name: row[name] for name in KEPT_FIELDS if name in row}}  # fmt: skip
        return
    if role not in RETRIEVAL:
        return  # a save's or a dispatch's after: the call closed before it ran
    opened = waiting.pop(call, None) if row["call_id"] else None
    if opened is not None and opened["counted"]:
        return  # counted already: it waited too long for this result, or monitor mode refused it
    changed = delivery(row)
    if changed is None:
        changed = (opened["decision"], opened["reason"]) if opened is not None else ("allowed", "allow")
    took = float(row["duration_ms"]) + (opened["ms"] if opened is not None else 0.0)
    _close(out, row, changed[0], changed[1], event, took, opened["row"] if opened is not None else None)


def waiting_calls(saved: Any) -> dict[str, dict[str, Any]]:
    """The waiting calls as the cursor file holds them; an entry that is not one (a file edited by
    hand, or by another version) is left out rather than stop the exporter at every tick."""
    out: dict[str, dict[str, Any]] = {}
    for call, entry in saved.items() if isinstance(saved, dict) else ():
        try:
            float(entry["row"]["ts"])
            whole = entry["counted"] or (entry["decision"] in DECISIONS and isinstance(entry["reason"], str)
                                         and float(entry["ms"]) >= 0 and all(n in entry["row"] for n in WAITING_FIELDS))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            whole = False
        if whole:
            out[str(call)] = entry
    return out


WAITING_FIELDS = ("ts", "session", "turn", "harness", "tool", "role", "mode", "memory_need", "policy", "agent_type",
         "tokens_counted", "call_id")  # fmt: skip
KEPT_FIELDS = (*WAITING_FIELDS, "known_names")  # kept of a waiting call's row (a cursor from before: without the last)


def expire(waiting: dict[str, dict[str, Any]], now: float, out: Observed) -> None:
    """Count the calls that waited past OPEN_SECONDS for a result, forget old ones, keep at most MAX_OPEN."""
    by_age = sorted(waiting.items(), key=lambda item: float(item[1]["row"]["ts"]))
    excess = len(by_age) - MAX_OPEN
    for index, (call, entry) in enumerate(by_age):
        ts = float(entry["row"]["ts"])
        if not entry["counted"] and (ts < now - OPEN_SECONDS or index < excess):
            _close(out, entry["row"], entry["decision"], entry["reason"], "timeout", entry["ms"], entry["row"])
            waiting[call] = {"counted": True, "row": {"ts": ts}}
        if index < excess or ts < now - FORGET_SECONDS:
            del waiting[call]


def _close(out: Observed, row: Mapping[str, Any], decision: str, reason: str, closed_by: str, took: float,
           before: Mapping[str, Any] | None = None) -> None:  # fmt: skip
    """The call is decided for good: one count, one event. `row` closed it; `before` is the row
    that let it through, when there was one."""
    first = before or row
    harness = row["harness"] or first["harness"] or "unknown"
    role, mode = row["role"], row["mode"] or "enforce"
    out.points.append((CALLS, 1.0, {"harness": harness, "role": role, "decision": decision, "reason": reason,
                                    "mode": mode}))  # fmt: skip
    after = row if closed_by in ("post_tool", "tool_failed") else None
    saved = int(after["tokens_saved"]) if after else 0
    deduped = int(after["tokens_deduped"]) if after else 0
    attributes: dict[str, Any] = {
        "session.id": plain(str(row["session"])),
        "turn.id": plain(str(first["turn"])),
        "harness": harness,
        "tool": exported_tool(row),
        "role": role,
        "decision": decision,
        "reason": reason,
        "mode": mode,
        "memory_need": first["memory_need"] or row["memory_need"] or "",
        "policy.digest": row["policy"] or first["policy"] or "",
        "call.id": plain(str(row["call_id"] or "")),
        "call.closed_by": closed_by,
        "tokens.expected": int(first["tokens_counted"]) if after is None or before is not None else 0,
        "tokens.counted": int(after["tokens_counted"]) if after else 0,
        "tokens.injected": int(after["tokens_delivered"]) if after else 0,
        "tokens.held_back": saved - deduped,
        "tokens.deduped": deduped,
        "duration_ms": round(took, 3),
    }
    if first["agent_type"]:
        attributes["agent.type"] = first["agent_type"] if _known(first) & KNOWN_AGENT else OTHER
    if row.get("user"):
        attributes["user"] = row["user"]  # whose per-user window the call counted in (`<uid>@<host>`)
    out.events.append({"ts": float(first["ts"]), "attributes": attributes})


OTHER = "other"  # a name the policy does not name: the collector is no channel for text the model chose


def _known(row: Mapping[str, Any]) -> int:
    try:
        return int(row.get("known_names") or 0)  # a row from before the column: nothing known
    except (TypeError, ValueError):
        return 0


def exported_tool(row: Mapping[str, Any]) -> str:
    """The row's tool as exported: `server/tool` or the harness tool's name, each part the policy
    does not name itself (a server or a definition the model may have written) sent as `other`."""
    tool, known = str(row["tool"] or ""), _known(row)
    server, slash, name = tool.rpartition("/")
    if not slash:
        return tool if not tool or known & KNOWN_TOOL else OTHER
    return f"{server if known & KNOWN_SERVER else OTHER}/{name if known & KNOWN_TOOL else OTHER}"


# -- the cursor and the status, in the state directory ----------------------------------------------


def folder(state: str) -> str:
    from governor.state import ensure_dir

    return ensure_dir(os.path.join(state, FOLDER))


def read_json(path: str) -> dict[str, Any]:
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: str, data: Mapping[str, Any]) -> None:
    import json

    from governor.state import write_atomic

    write_atomic(path, json.dumps(data, separators=(",", ":")).encode())


def note(state: str, problem: str | None = None, **counts: int | float) -> None:
    """Add to the status `doctor` shows (shared by every exporting process, under a lock):
    counts are added, `problem` replaces the last one, timestamps (`*_at`) are set."""
    import fcntl
    import time

    try:
        place = folder(state)
        with open(os.path.join(place, "status.lock"), "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            path = os.path.join(place, STATUS)
            status = read_json(path)
            for name, value in counts.items():
                status[name] = value if name.endswith("_at") else status.get(name, 0) + value
            if problem is not None:
                status["problem"], status["problem_at"] = problem[:500], time.time()
            write_json(path, status)
    except OSError:
        pass  # the status is for doctor; telemetry goes on without it


def status(state: str) -> dict[str, Any]:
    """What the exporters wrote: counts, the last problem, and the cursor (for the backlog)."""
    out = read_json(os.path.join(state, FOLDER, STATUS))
    cursor = read_json(os.path.join(state, FOLDER, CURSOR))
    if cursor:
        out["cursor"] = cursor.get("cursor", "")
        out["alive_at"] = cursor.get("alive", 0)
        out["waiting"] = sum(1 for entry in (cursor.get("waiting") or {}).values() if not entry.get("counted"))
    return out
