"""Team telemetry: the audit trail read after a position, and what the governor did, exported over
OpenTelemetry from the long-lived processes to a real OTLP receiver (tests/otlp_receiver.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from governor.engine.stores import open_ledger
from tests.conftest import Env, Session, fixture_text

SEARCH = fixture_text("engram/search_v1.txt")


def _row(ts: float, session: str = "s:a", **fields: object) -> dict[str, object]:
    return {"ts": ts, "session": session, "turn": "s:p-1", "event": "pre_tool", "decision": "allow", **fields}


# -- the audit trail, read after a position ------------------------------------------------------


def test_audit_rows_are_read_once_each_after_a_position(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        for i in range(5):
            ledger.record(_row(float(i), role="search", harness="claude-code", call_id=f"s:c{i}"))
    rows, position = ledger.audit_after("", 3)
    assert [r["ts"] for r in rows] == [0.0, 1.0, 2.0] and rows[0]["harness"] == "claude-code"
    assert "detail" not in rows[0], "the column that may hold text is never handed out"
    more, position = ledger.audit_after(position, 3)
    assert [r["ts"] for r in more] == [3.0, 4.0]
    none, same = ledger.audit_after(position, 3)
    assert none == [] and same == position
    with ledger.write():
        ledger.record(_row(5.0))
    assert [r["ts"] for r in ledger.audit_after(position, 3)[0]] == [5.0]
    assert [r["ts"] for r in ledger.audit_after("", 10, since=3.5)[0]] == [4.0, 5.0]
    assert len(ledger.audit_after("not a position", 10)[0]) == 6, "an unreadable position starts from the first row"


def test_a_position_survives_gc_and_ids_reused_after_the_trail_was_emptied(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        for i in range(4):
            ledger.record(_row(100.0 + i))
    _, position = ledger.audit_after("", 10)
    with ledger.write():
        ledger.q("DELETE FROM decisions WHERE ts<102")  # gc drops the oldest rows: the position holds
        ledger.record(_row(200.0))
    assert [r["ts"] for r in ledger.audit_after(position, 10)[0]] == [200.0]
    _, position = ledger.audit_after(position, 10)
    with ledger.write():
        ledger.q("DELETE FROM decisions")  # `gc --days 0`: SQLite counts ids from 1 again
        ledger.record(_row(300.0))
    assert [r["ts"] for r in ledger.audit_after(position, 10)[0]] == [300.0], "a new row behind the position"
    with ledger.write():
        for i in range(6):
            ledger.record(_row(301.0 + i))
    rows, _ = ledger.audit_after(position, 10)
    assert [r["ts"] for r in rows] == [300.0 + i for i in range(7)], "an id reused by another row is no position"


def test_a_version_6_ledger_upgrades_in_place(tmp_path: Path) -> None:
    ledger = open_ledger(str(tmp_path))
    with ledger.write():
        ledger.record(_row(1.0, code="allow"))
    for column in ("harness", "memory_need", "duration_ms", "call_id"):
        ledger.q(f"ALTER TABLE decisions DROP COLUMN {column}")
    ledger.q("PRAGMA user_version=6")
    ledger.close()
    again = open_ledger(str(tmp_path))
    with again.write():
        again.record(_row(2.0, harness="codex", memory_need="similar_issue", duration_ms=1.5, call_id="s:x"))
    rows, _ = again.audit_after("", 10)
    assert [(r["ts"], r["harness"], r["call_id"]) for r in rows] == [(1.0, "", ""), (2.0, "codex", "s:x")]
    assert rows[1]["memory_need"] == "similar_issue" and rows[1]["duration_ms"] == 1.5


def test_every_audit_row_names_its_harness_need_duration_and_call(env: Env, session: Session) -> None:
    session.prompt("how did we fix the jwt refresh bug last time?")
    session.call("mem_search", SEARCH, query="jwt", limit=10)
    db = sqlite3.connect(env.state / "ledger.db")
    rows = db.execute("SELECT event, harness, memory_need, duration_ms, call_id FROM decisions ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["prompt", "pre_tool", "post_tool"]
    assert {r[1] for r in rows} == {"claude-code"}
    assert {r[2] for r in rows} == {"similar_issue"}, "every row of the turn carries its memory need"
    assert all(r[3] > 0 for r in rows)
    assert rows[0][4] == "" and rows[1][4] == rows[2][4] == f"s:toolu_{session.id}_1", "a call's rows share its id"
