"""The per-turn ledger: what each (session, turn) has used, exact across concurrent hooks.

This module is the ledger's interface: the schema, and every query the engine asks of it,
written once against an SQLite connection (`Ledger.db`). Two stores implement it:

Which store answers is governor.engine.stores's choice (`open_ledger`, `open_for`):

- governor.engine.sqlite_ledger (the default): one SQLite file (WAL) in the state directory.
  Every decision runs inside one write transaction (`BEGIN IMMEDIATE`), so "count, compare,
  reserve" is atomic across the processes of one machine.
- governor.engine.redis_ledger (`MEMORY_GOVERNOR_LEDGER_URL=redis://...`): one Redis for every
  host that works on a turn. A decision leases its session, runs these same queries against
  the session's rows loaded into an in-memory SQLite, and writes the changed rows back and
  releases the lease in one atomic step (docs/architecture.md, "The ledger on Redis").

Calls are reserved before they run (pending, holding their expected tokens), committed
with their real token count after, and released when they fail or are denied. A granted call
counts toward its turn's call limits until the turn ends; a pending reservation that never
reports back stops holding its expected tokens after its time to live.

Ids that come from outside (session, turn, agent) are stored as values, never used in a
path; unusual ones are hashed, so none can collide with another or escape the directory.

A table added here is shared by the Redis store with no more code when it is per session: a
`session` column and a primary key. One that is not (like `usage`) needs its own methods there.

Long on purpose: the schema and every query against it are read together, so a change to a
table and the queries that use it land in one place.

Hot path: standard library only, no `typing`.
"""

from __future__ import annotations

import sys

from governor.state import URL_VARIABLE as URL_VARIABLE  # where stores, the runner and doctor look it up

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType


def _load_sqlite() -> ModuleType:
    """The C module `_sqlite3` (the package adds datetime adapters, ~2 ms a hook, never used here).

    Its initialisation takes `functools.lru_cache` for the statement cache, and importing
    `functools` brings in `collections` and a dozen modules more: a fifth of a hook process's
    imports. A process that has not imported functools yet (a hook) lends it, for that one
    import, a module holding only `lru_cache` built on `_functools._lru_cache_wrapper`, the C
    cache the real one wraps too, and then takes the stand-in out of sys.modules again so
    any later `import functools` gets the real module. If the import wants anything else of
    it, it is imported again with the real module."""
    if "_sqlite3" in sys.modules or "functools" in sys.modules:
        import _sqlite3

        return _sqlite3
    _functools = __import__("_functools")  # the C half of functools (no stubs for it)

    def lru_cache(maxsize: int | None = 128, typed: bool = False) -> object:
        return lambda function: _functools._lru_cache_wrapper(function, maxsize, typed, tuple)

    lent = type(sys)("functools")
    lent.lru_cache = lru_cache  # type: ignore[attr-defined]
    sys.modules["functools"] = lent
    try:
        import _sqlite3
    except (ImportError, AttributeError):
        sys.modules.pop("_sqlite3", None)
        if sys.modules.get("functools") is lent:
            del sys.modules["functools"]
        import _sqlite3
    finally:
        if sys.modules.get("functools") is lent:
            del sys.modules["functools"]
    return _sqlite3


if TYPE_CHECKING:
    import _sqlite3 as sqlite3
else:
    sqlite3 = _load_sqlite()

if TYPE_CHECKING:
    from typing import Any

# 2 added `fetched`, 3 `call_keys`, 4 `agents`, 5 `turn_links`, 6 `delivered` and the audit trail's
# `tokens_deduped` column, 7 the audit trail's `harness`, `memory_need`, `duration_ms` and `call_id` (for telemetry),
# 8 its `known_names`, 9 `processes`, `window_use` and its `user`, 10 `forms`; tables (and defaulted
# columns) are only ever added, so an older file upgrades in place
SCHEMA_VERSION = 10
DB_NAME = "ledger.db"
SEEN_STEP = 1.0  # seconds: how far behind a session's last-seen time may be before a decision writes it
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session TEXT PRIMARY KEY,
    turn TEXT NOT NULL DEFAULT '',
    turn_seq INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    session TEXT NOT NULL,
    turn TEXT NOT NULL,
    seq INTEGER NOT NULL,
    started REAL NOT NULL,
    memory_need TEXT,
    PRIMARY KEY (session, turn)
);
CREATE TABLE IF NOT EXISTS turn_links (
    session TEXT NOT NULL,
    ref TEXT NOT NULL,
    turn TEXT NOT NULL,
    PRIMARY KEY (session, ref)
);
CREATE TABLE IF NOT EXISTS calls (
    session TEXT NOT NULL,
    call_id TEXT NOT NULL,
    turn TEXT NOT NULL,
    role TEXT NOT NULL,
    tool TEXT NOT NULL DEFAULT '',
    agent_id TEXT NOT NULL DEFAULT '',
    agent_type TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    reserved INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (session, call_id)
);
CREATE INDEX IF NOT EXISTS calls_by_turn ON calls (session, turn, state);
CREATE TABLE IF NOT EXISTS surfaced (
    session TEXT NOT NULL,
    turn TEXT NOT NULL,
    ident TEXT NOT NULL,
    PRIMARY KEY (session, turn, ident)
);
CREATE TABLE IF NOT EXISTS triggers (
    session TEXT NOT NULL,
    name TEXT NOT NULL,
    scope TEXT NOT NULL,
    uses_left INTEGER NOT NULL,
    armed_seq INTEGER NOT NULL,
    armed_turn TEXT NOT NULL,
    armed REAL NOT NULL,
    PRIMARY KEY (session, name)
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    session TEXT NOT NULL,
    turn TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    agent_type TEXT NOT NULL DEFAULT '',
    event TEXT NOT NULL,
    tool TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL DEFAULT '',
    decision TEXT NOT NULL,
    code TEXT NOT NULL DEFAULT '',
    mode TEXT NOT NULL DEFAULT 'enforce',
    tokens_counted INTEGER NOT NULL DEFAULT 0,
    tokens_delivered INTEGER NOT NULL DEFAULT 0,
    tokens_saved INTEGER NOT NULL DEFAULT 0,
    policy TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '',
    tokens_deduped INTEGER NOT NULL DEFAULT 0,
    harness TEXT NOT NULL DEFAULT '',
    memory_need TEXT NOT NULL DEFAULT '',
    duration_ms REAL NOT NULL DEFAULT 0,
    call_id TEXT NOT NULL DEFAULT '',
    known_names INTEGER NOT NULL DEFAULT 0,
    user TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS decisions_by_time ON decisions (ts);
CREATE INDEX IF NOT EXISTS decisions_by_session ON decisions (session, turn);
CREATE TABLE IF NOT EXISTS saves (
    session TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (session, digest)
);
CREATE TABLE IF NOT EXISTS fetched (
    session TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (session, digest)
);
CREATE TABLE IF NOT EXISTS call_keys (
    session TEXT NOT NULL,
    key TEXT NOT NULL,
    call_id TEXT NOT NULL,
    PRIMARY KEY (session, key, call_id)
);
CREATE TABLE IF NOT EXISTS agents (
    session TEXT NOT NULL,
    agent TEXT NOT NULL,
    PRIMARY KEY (agent)
);
CREATE TABLE IF NOT EXISTS delivered (
    session TEXT NOT NULL,
    context TEXT NOT NULL,
    entry TEXT NOT NULL,
    server TEXT NOT NULL DEFAULT '',
    ident TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL DEFAULT '',
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    PRIMARY KEY (session, context, entry)
);
CREATE INDEX IF NOT EXISTS delivered_by_ident ON delivered (session, context, server, ident);
CREATE TABLE IF NOT EXISTS forms (
    session TEXT NOT NULL,
    server TEXT NOT NULL,
    form TEXT NOT NULL,
    PRIMARY KEY (session, server)
);
CREATE TABLE IF NOT EXISTS usage (
    memory TEXT PRIMARY KEY,
    last_used REAL NOT NULL,
    use_count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS topics (
    topic TEXT PRIMARY KEY,
    seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS processes (
    session TEXT NOT NULL,
    process TEXT NOT NULL,
    seen REAL NOT NULL,
    PRIMARY KEY (process)
);
CREATE TABLE IF NOT EXISTS window_use (
    session TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    searches INTEGER NOT NULL DEFAULT 0,
    fetches INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session, bucket)
);
"""

# Rows a session owns, for isolation checks and pruning.
SESSION_TABLES = ("calls", "turns", "surfaced", "triggers", "saves", "decisions", "fetched", "call_keys", "agents",
                  "turn_links", "delivered", "processes", "forms")  # fmt: skip
# Columns added to a table after it first shipped: (table, column, its definition).
_ADDED_COLUMNS = (
    ("decisions", "tokens_deduped", "INTEGER NOT NULL DEFAULT 0"),
    ("decisions", "harness", "TEXT NOT NULL DEFAULT ''"),
    ("decisions", "memory_need", "TEXT NOT NULL DEFAULT ''"),
    ("decisions", "duration_ms", "REAL NOT NULL DEFAULT 0"),
    ("decisions", "call_id", "TEXT NOT NULL DEFAULT ''"),
    ("decisions", "known_names", "INTEGER NOT NULL DEFAULT 0"),
    ("decisions", "user", "TEXT NOT NULL DEFAULT ''"),
)
# known_names: which of the row's names its policy names itself (rules.KNOWN_*; telemetry exports only those).
# The audit row as audit_after gives it: every column but `detail` (which may hold text, if the policy says so).
AUDIT_COLUMNS = ("id", "ts", "session", "turn", "agent_id", "agent_type", "event", "tool", "role", "decision", "code",
                 "mode", "tokens_counted", "tokens_delivered", "tokens_saved", "tokens_deduped", "policy", "harness",
                 "memory_need", "duration_ms", "call_id", "known_names", "user")  # fmt: skip


class LedgerError(Exception):
    """The ledger cannot answer; the policy's on_error decides what the call gets."""

    code = "ledger_error"


class LedgerBusy(LedgerError):
    code = "ledger_locked"


class LedgerUnavailable(LedgerError):
    code = "ledger_unavailable"


class LedgerLeaseLost(LedgerUnavailable):
    """The decision outlived its lease on a shared ledger and another took the session: nothing of
    it was written, so it may be decided again from what the ledger holds now."""

    code = "ledger_lease_lost"


class LedgerCorrupt(LedgerUnavailable):
    """Found corrupt after opening; reopen with `Ledger.recover()`."""

    code = "ledger_corrupt"


def key(value: object) -> str:
    """A storage key for an id from outside: readable when plain, hashed otherwise.

    The prefixes keep the two spaces apart: no plain id can equal a hashed one.
    """
    if isinstance(value, str) and 0 < len(value) <= 128 and _SAFE.issuperset(value):
        return "s:" + value
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
    else:
        raw = repr(value).encode("utf-8", "backslashreplace")
    from governor.state import sha256_hex

    return "h:" + sha256_hex(raw)


def sqlite_error(err: sqlite3.Error) -> LedgerError:
    text = str(err).lower()
    if "locked" in text or "busy" in text:
        return LedgerBusy(f"the ledger is locked by another process ({err})")
    if "malformed" in text or "not a database" in text:
        return LedgerCorrupt(f"the ledger is corrupt ({err})")
    return LedgerUnavailable(f"the ledger cannot be used ({err})")


def create_tables(db: sqlite3.Connection) -> None:
    """The schema, in `db`'s open transaction (one statement at a time: executescript would commit it)."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    for table, column, definition in _ADDED_COLUMNS:
        if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")


class Ledger:
    """The ledger's interface. Use `with ledger.write(session):` around a decision about `session`
    (the SQLite store serialises every decision, the Redis store those of one session), and
    `with ledger.read(session):` around reads outside one (status, reports)."""

    state_dir: str
    db: sqlite3.Connection
    notices: list[str]  # for the user (a corrupt file moved aside), taken by the runner
    busy_timeout: float  # seconds a decision waits for another one to finish

    def write(self, *sessions: str) -> Any:
        raise NotImplementedError

    def read(self, *sessions: str) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def recover(self, err: Exception) -> None:
        """After a LedgerCorrupt: continue with a fresh ledger (the SQLite store); else raise it."""
        raise err

    def where(self) -> str:
        """Where the ledger is, for people: a path, or a URL with its password masked."""
        raise NotImplementedError

    def check(self) -> tuple[bool, str]:
        """Does the ledger answer, and is it sound: (ok, what was found)."""
        raise NotImplementedError

    def vacuum(self) -> None:
        """Give the space gc freed back (the SQLite file); nothing to do elsewhere."""

    def tidy(self) -> None:
        """Before a process that leaves this connection open exits (runner.leave_open): what the
        next processes need done (the SQLite file: a long WAL checkpointed); nothing elsewhere."""

    def q(self, sql: str, *args: Any) -> list[Any]:
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.Error as err:
            raise sqlite_error(err) from err

    def one(self, sql: str, *args: Any) -> Any:
        rows = self.q(sql, *args)
        return rows[0] if rows else None

    # -- sessions and turns -------------------------------------------------------------

    def session_info(self, session: str) -> tuple[str, int, float] | None:
        """(current turn, its number, last seen) of a session the ledger holds, else None."""
        row = self.one("SELECT turn, turn_seq, seen FROM sessions WHERE session=?", session)
        return (str(row[0]), int(row[1]), float(row[2])) if row else None

    def latest_session(self) -> str | None:
        """The session seen most recently."""
        row = self.one("SELECT session FROM sessions ORDER BY seen DESC LIMIT 1")
        return str(row[0]) if row else None

    def touch_session(self, session: str, now: float) -> tuple[str, int]:
        """Ensure the session exists; its current (turn, seq). Its last-seen time moves on when it is
        SEEN_STEP or more behind (a burst of calls writes it once, not per call)."""
        row = self.one("SELECT turn, turn_seq, seen FROM sessions WHERE session=?", session)
        if row is None:
            self.q("INSERT INTO sessions (session, created, seen) VALUES (?, ?, ?)", session, now, now)
            return "", 0
        if not 0 <= now - row[2] < SEEN_STEP:
            self.q("UPDATE sessions SET seen=? WHERE session=?", now, session)
        return row[0], row[1]

    def turn(self, session: str, turn_id: str | None, now: float, new: bool = False) -> tuple[str, int]:
        """The (turn, seq) an event belongs to.

        `turn_id` is the harness's own turn id (e.g. a prompt id) when it sends one;
        without it an event belongs to the session's current turn, and `new` (a prompt)
        starts the next one. An unseen turn id starts a new turn too, unless it was joined to
        an existing turn (`join_turn`). A subagent's events without a turn id, and a nested
        session's, count in the turn fixed for it instead (`agent_turn`).
        """
        current, seq = self.touch_session(session, now)
        if turn_id is None:
            if not new:
                return current, seq
            turn_id = f"seq:{seq + 1}"
        elif turn_id == current:
            return current, seq
        else:
            row = self.one("SELECT seq FROM turns WHERE session=? AND turn=?", session, turn_id)
            if row is not None:
                return turn_id, row[0]
            joined = self._linked(session, "turn:" + turn_id)
            if joined is not None:
                return joined
        seq += 1
        self.q(
            "INSERT OR IGNORE INTO turns (session, turn, seq, started) VALUES (?, ?, ?, ?)", session, turn_id, seq, now
        )
        self.q("UPDATE sessions SET turn=?, turn_seq=? WHERE session=?", turn_id, seq, session)
        return turn_id, seq

    def _linked(self, session: str, ref: str) -> tuple[str, int] | None:
        """The existing turn (turn, seq) that `ref` is linked to, else None."""
        row = self.one(
            "SELECT t.turn, t.seq FROM turn_links l JOIN turns t ON t.session=l.session AND t.turn=l.turn "
            "WHERE l.session=? AND l.ref=?",
            session, ref,
        )  # fmt: skip
        return (str(row[0]), int(row[1])) if row else None

    def join_turn(self, session: str, turn_id: str, turn: str) -> None:
        """Events with turn id `turn_id` count in the existing turn `turn` (no turn of their own)."""
        if turn_id != turn:
            self.q("INSERT OR IGNORE INTO turn_links (session, ref, turn) VALUES (?, ?, ?)", session, "turn:" + turn_id,
                   turn)  # fmt: skip

    def remember_launch(self, session: str, call_id: str, turn: str) -> None:
        """Call `call_id` (a dispatch) was made in `turn`: work it launches reports back there."""
        self.q(
            "INSERT OR IGNORE INTO turn_links (session, ref, turn) VALUES (?, ?, ?)", session, "call:" + call_id, turn
        )

    def launched_in(self, session: str, call_id: str) -> str | None:
        """The turn call `call_id` was made in, if it was remembered as a launch."""
        row = self.one("SELECT turn FROM turn_links WHERE session=? AND ref=?", session, "call:" + call_id)
        return row[0] if row else None

    def remember_dispatch(self, session: str, turn: str, now: float) -> None:
        """A dispatch was made in `turn` while the session's current turn is what it is now: a
        subagent first seen before the next turn starts was dispatched there (`agent_turn`)."""
        current, _ = self.touch_session(session, now)
        self.q("INSERT OR REPLACE INTO turn_links (session, ref, turn) VALUES (?, ?, ?)", session,
               "dispatch:" + current, turn)  # fmt: skip

    def agent_turn(self, session: str, agent: str, now: float, dispatched: bool = True) -> tuple[str, int]:
        """The (turn, seq) a subagent or a nested session (`agent`, its ledger key) counts in: the
        turn fixed when it was first seen, never a turn that becomes current after. At first sight
        that is, with `dispatched`, the turn of the latest dispatch made since the session's current
        turn began (a prompt made current after the dispatch moves nothing for the agent it
        started), else the current turn. Nothing is fixed in a session that has no turn yet."""
        current, seq = self.touch_session(session, now)
        pinned = self._linked(session, "agent:" + agent)
        if pinned is not None:
            return pinned
        found = self._linked(session, "dispatch:" + current) if dispatched else None
        turn, seq = found or (current, seq)
        if turn:
            self.q("INSERT OR IGNORE INTO turn_links (session, ref, turn) VALUES (?, ?, ?)", session, "agent:" + agent,
                   turn)  # fmt: skip
        return turn, seq

    def set_memory_need(self, session: str, turn: str, need: str) -> None:
        self.q("UPDATE turns SET memory_need=? WHERE session=? AND turn=?", need, session, turn)

    def memory_need(self, session: str, turn: str) -> str | None:
        row = self.one("SELECT memory_need FROM turns WHERE session=? AND turn=?", session, turn)
        return row[0] if row else None

    # -- calls: reserve, commit, release ------------------------------------------------

    def call(self, session: str, call_id: str) -> Any:
        """(state, role, turn, reserved, tokens, expires) of a call already seen, else None."""
        return self.one(
            "SELECT state, role, turn, reserved, tokens, expires FROM calls WHERE session=? AND call_id=?",
            session, call_id,
        )  # fmt: skip

    def agent_of(self, session: str, call_id: str) -> str | None:
        """The agent key a call seen before was made by ('' the main agent), else None."""
        row = self.one("SELECT agent_id FROM calls WHERE session=? AND call_id=?", session, call_id)
        return str(row[0]) if row else None

    def usage(self, session: str, turn: str, now: float, agent_id: str | None = None) -> dict[str, int]:
        """Calls per role and tokens used in a turn.

        A call counts once it is granted, for the rest of its turn, whether it has reported back
        or not: a call that reports late (a permission prompt left open) still ran, so its slot
        was never free. Tokens count when committed, and a reservation's expected tokens while
        it is live: past its time to live, a call that never reports back stops holding them.
        With `agent_id`, the counts of that agent only (a tier's own caps), tokens as a whole.
        """
        # One row per role, summed by SQLite: a turn with many calls costs one row each per role, not per call.
        counts: dict[str, int] = {}
        tokens = 0
        for role, count, used in self.q(
            "SELECT role, " + ("COUNT(*)" if agent_id is None else "SUM(agent_id=?)") + ", "
            "SUM(CASE WHEN state='committed' THEN tokens WHEN expires>? THEN reserved ELSE 0 END) "
            "FROM calls WHERE session=? AND turn=? AND state IN ('committed', 'pending') GROUP BY role",
            *((now,) if agent_id is None else (agent_id, now)), session, turn,
        ):  # fmt: skip
            tokens += used
            if count:
                counts[role] = count
        counts["tokens"] = tokens
        return counts

    def reserve(self, session: str, turn: str, call_id: str, role: str, tool: str, agent: tuple[str, str],
                expected: int, now: float, ttl: float) -> None:  # fmt: skip
        self.q(
            "INSERT OR REPLACE INTO calls (session, call_id, turn, role, tool, agent_id, agent_type, state, reserved, "
            "tokens, created, expires, updated) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, 0, ?, ?, ?)",
            session, call_id, turn, role, tool, agent[0], agent[1], expected, now, now + ttl, now,
        )  # fmt: skip

    def deny(self, session: str, turn: str, call_id: str, role: str, tool: str, agent: tuple[str, str],
             now: float) -> None:  # fmt: skip
        self.q(
            "INSERT OR IGNORE INTO calls (session, call_id, turn, role, tool, agent_id, agent_type, state, created, "
            "expires, updated) VALUES (?, ?, ?, ?, ?, ?, ?, 'denied', ?, ?, ?)",
            session, call_id, turn, role, tool, agent[0], agent[1], now, now, now,
        )  # fmt: skip

    def commit(self, session: str, call_id: str, tokens: int, now: float) -> None:
        """A call's result counted: `tokens` it delivered. A call committed before keeps the most it
        was ever counted at: a result event sent again for it (a second hook file, or one the model
        sends itself with a smaller result) never lowers what its turn has spent."""
        self.q(
            "UPDATE calls SET tokens=CASE WHEN state='committed' THEN MAX(tokens, ?) ELSE ? END, "
            "state='committed', updated=? WHERE session=? AND call_id=?",
            tokens, tokens, now, session, call_id,
        )  # fmt: skip

    def add_committed(self, session: str, turn: str, call_id: str, role: str, tool: str, agent: tuple[str, str],
                      tokens: int, now: float) -> None:  # fmt: skip
        """A call (or text the governor adds) counted after the fact, with no reservation."""
        self.q(
            "INSERT OR REPLACE INTO calls (session, call_id, turn, role, tool, agent_id, agent_type, state, reserved, "
            "tokens, created, expires, updated) VALUES (?, ?, ?, ?, ?, ?, ?, 'committed', 0, ?, ?, ?, ?)",
            session, call_id, turn, role, tool, agent[0], agent[1], tokens, now, now, now,
        )  # fmt: skip

    def release(self, session: str, call_id: str, now: float) -> None:
        self.q(
            "UPDATE calls SET state='released', updated=? WHERE session=? AND call_id=? AND state='pending'",
            now, session, call_id,
        )  # fmt: skip

    # -- subagents that are sessions of their own ----------------------------------------

    def dispatching_session(self, session: str) -> str:
        """The session that `session` belongs to when it names a subagent seen before (at any
        depth: a subagent's subagent resolves to the first one's session); else `session`."""
        seen = {session}
        while True:
            row = self.one("SELECT session FROM agents WHERE agent=?", session)
            if row is None or row[0] in seen:
                return session
            session = row[0]
            seen.add(session)

    def remember_agent(self, session: str, agent: str) -> None:
        """Subagent `agent` works for `session`, should the harness later name it as a session. An id
        that names a session already counted in is no subagent: otherwise one event a process of the
        user's sends would move that session's subagents into a session it made up."""
        if not agent or agent == session or self.one("SELECT 1 FROM agents WHERE session=? AND agent=?", session,
                                                     agent) is not None:  # fmt: skip
            return
        if not self.known_session(agent):
            self.q("INSERT OR IGNORE INTO agents (session, agent) VALUES (?, ?)", session, agent)

    def known_session(self, session: str) -> bool:
        """Has `session` been counted in (events of its own, under its own id)?"""
        return self.one("SELECT 1 FROM sessions WHERE session=?", session) is not None

    # -- sessions started under a governed session (governor.engine.nesting) --------------

    def remember_process(self, session: str, process: str, now: float) -> None:
        """Process `process` (its key) runs a session whose calls count in `session`; the session it
        ran last is the one a session started under it is charged to."""
        self.q("INSERT OR REPLACE INTO processes (session, process, seen) VALUES (?, ?, ?)", session, process, now)

    def sessions_of(self, processes: list[str]) -> dict[str, str]:
        """Of `processes` (keys), those known to run a governed session: process -> the session."""
        out: dict[str, str] = {}
        for start in range(0, len(processes), 500):
            chunk = processes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for process, session in self.q(f"SELECT process, session FROM processes WHERE process IN ({marks})",
                                           *chunk):  # fmt: skip
                out[str(process)] = str(session)
        return out

    # -- the per-user window (governor.engine.window) -------------------------------------

    def window_used(self, user: str, since: float) -> tuple[int, int, int, float | None]:
        """(searches, full fetches, tokens, start of the oldest bucket) charged to `user`'s window in
        the buckets that start after `since`."""
        row = self.one(
            "SELECT COALESCE(SUM(searches), 0), COALESCE(SUM(fetches), 0), COALESCE(SUM(tokens), 0), MIN(bucket) "
            "FROM window_use WHERE session=? AND bucket>?",
            user, since,
        )  # fmt: skip
        return int(row[0]), int(row[1]), int(row[2]), (None if row[3] is None else float(row[3]))

    def charge_window(self, user: str, bucket: int, searches: int, fetches: int, tokens: int,
                      drop_to: float) -> None:  # fmt: skip
        """Add to `user`'s window in `bucket`; buckets that start at or before `drop_to` are gone."""
        # (no upsert: the Redis store's change triggers need a plain insert or update)
        if self.one("SELECT 1 FROM window_use WHERE session=? AND bucket=?", user, bucket) is None:
            self.q("INSERT INTO window_use (session, bucket, searches, fetches, tokens) VALUES (?, ?, ?, ?, ?)",
                   user, bucket, searches, fetches, tokens)  # fmt: skip
        else:
            self.q("UPDATE window_use SET searches=searches+?, fetches=fetches+?, tokens=tokens+? "
                   "WHERE session=? AND bucket=?", searches, fetches, tokens, user, bucket)  # fmt: skip
        self.q("DELETE FROM window_use WHERE session=? AND bucket<=?", user, drop_to)

    # -- calls with no harness id, matched by key ---------------------------------------

    def keyed_call(self, session: str, call_key: str) -> str:
        """A new call id for a call known only by its key (each call before is a new call)."""
        row = self.one("SELECT COUNT(*) FROM call_keys WHERE session=? AND key=?", session, call_key)
        call_id = f"key:{call_key}:{row[0] + 1}"
        self.q("INSERT OR IGNORE INTO call_keys (session, key, call_id) VALUES (?, ?, ?)", session, call_key, call_id)
        return call_id

    def also_known_as(self, session: str, call_key: str, call_id: str) -> None:
        """A rewritten call's result carries the rewritten arguments: match that key too."""
        self.q("INSERT OR IGNORE INTO call_keys (session, key, call_id) VALUES (?, ?, ?)", session, call_key, call_id)

    def pending_by_key(self, session: str, call_key: str, turn: str | None = None) -> str | None:
        """The oldest pending call with this key, of `turn` first: the one a result with that key
        belongs to (a call of an earlier turn that never reported back must not take its result)."""
        row = self.one(
            "SELECT c.call_id FROM call_keys k JOIN calls c ON c.session=k.session AND c.call_id=k.call_id "
            "WHERE k.session=? AND k.key=? AND c.state='pending' ORDER BY c.turn IS NOT ?, c.created, c.rowid LIMIT 1",
            session, call_key, turn,
        )  # fmt: skip
        return row[0] if row else None

    # -- running subagents, for harnesses that do not say which agent made a call --------

    def open_agent(self, session: str, turn: str, call_id: str, tool: str, agent_type: str, now: float,
                   ttl: float) -> None:  # fmt: skip
        """A dispatch started a subagent of `agent_type`: a pending 'dispatch' row until it ends
        (commit or release), bounded by its turn and by `ttl`."""
        self.reserve(session, turn, call_id, "dispatch", tool, ("", agent_type), 0, now, ttl)

    def running_agents(self, session: str, turn: str, now: float) -> list[tuple[str, str]]:
        """(dispatch call id, agent type) of the subagents started in this turn and still running."""
        rows = self.q(
            "SELECT call_id, agent_type FROM calls WHERE session=? AND turn=? AND role='dispatch' AND state='pending' "
            "AND expires>? ORDER BY created, rowid",
            session, turn, now,
        )  # fmt: skip
        return [(str(call_id), str(agent_type)) for call_id, agent_type in rows]

    def pending(self, session: str, turn: str, now: float) -> list[Any]:
        return self.q(
            "SELECT call_id, role, tool, reserved, expires FROM calls WHERE session=? AND turn=? AND state='pending' "
            "AND expires>? ORDER BY created",
            session, turn, now,
        )  # fmt: skip

    # -- surfaced ids (the L3 precondition) ---------------------------------------------

    def surface(self, session: str, turn: str, idents: list[str]) -> None:
        for ident in idents:
            self.q("INSERT OR IGNORE INTO surfaced (session, turn, ident) VALUES (?, ?, ?)", session, turn, ident)

    def surfaced(self, session: str, turn: str, ident: str) -> bool:
        return (
            self.one("SELECT 1 FROM surfaced WHERE session=? AND turn=? AND ident=?", session, turn, ident) is not None
        )

    # -- triggers -----------------------------------------------------------------------

    def arm(self, session: str, name: str, scope: str, uses: int, seq: int, turn: str, now: float) -> None:
        self.q(
            "INSERT OR REPLACE INTO triggers (session, name, scope, uses_left, armed_seq, armed_turn, armed) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            session, name, scope, uses, seq, turn, now,
        )  # fmt: skip

    def armed(self, session: str, seq: int, turn: str) -> list[str]:
        """Triggers usable now, in arming order."""
        out = []
        for name, scope, armed_seq, armed_turn in self.q(
            "SELECT name, scope, armed_seq, armed_turn FROM triggers WHERE session=? AND uses_left>0 ORDER BY armed",
            session,
        ):
            if (
                scope == "once"
                or (scope == "this_turn" and armed_turn == turn and armed_seq == seq)
                or (scope == "next_turn" and seq <= armed_seq + 1)
            ):
                out.append(name)
        return out

    def disarm(self, session: str, name: str) -> None:
        self.q("DELETE FROM triggers WHERE session=? AND name=?", session, name)

    def consume(self, session: str, name: str) -> None:
        self.q("UPDATE triggers SET uses_left=uses_left-1 WHERE session=? AND name=? AND uses_left>0", session, name)

    def triggers(self, session: str) -> list[Any]:
        return self.q(
            "SELECT name, scope, uses_left, armed_seq, armed_turn, armed FROM triggers WHERE session=? ORDER BY armed",
            session,
        )

    # -- saves --------------------------------------------------------------------------

    def saved_before(self, session: str, digest: str) -> bool:
        """Record a save's digest; True if the same one was saved earlier in the session."""
        if self.one("SELECT 1 FROM saves WHERE session=? AND digest=?", session, digest):
            return True
        self.q("INSERT INTO saves (session, digest) VALUES (?, ?)", session, digest)
        return False

    # -- full fetches, remembered as line digests (never their text) ----------------------

    def remember_fetched(self, session: str, digests: list[str]) -> None:
        for digest in digests:
            self.q("INSERT OR IGNORE INTO fetched (session, digest) VALUES (?, ?)", session, digest)

    def fetched_among(self, session: str, digests: list[str]) -> int:
        """How many of `digests` are lines of a full fetch earlier in this session."""
        found = 0
        for start in range(0, len(digests), 500):
            chunk = digests[start : start + 500]
            marks = ",".join("?" * len(chunk))
            row = self.one(f"SELECT COUNT(*) FROM fetched WHERE session=? AND digest IN ({marks})", session, *chunk)
            found += row[0]
        return found

    # -- entries delivered whole, per conversation context (fingerprints, never their text) --

    def delivered_among(self, session: str, context: str, entries: list[str]) -> dict[str, tuple[int, float]]:
        """Of `entries` (fingerprints), those already delivered whole to this context since its
        last reset: fingerprint -> (turn number, time) of that delivery."""
        out: dict[str, tuple[int, float]] = {}
        for start in range(0, len(entries), 500):
            chunk = entries[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for entry, seq, ts in self.q(
                f"SELECT entry, seq, ts FROM delivered WHERE session=? AND context=? AND entry IN ({marks})",
                session, context, *chunk,
            ):  # fmt: skip
                out[entry] = (int(seq), float(ts))
        return out

    def delivered_ident(
        self, session: str, context: str, server: str, ident: str, role: str
    ) -> tuple[int, float] | None:
        """(turn number, time) of the latest delivery whole of id `ident` by a `role` call to this context."""
        row = self.one(
            "SELECT seq, ts FROM delivered WHERE session=? AND context=? AND server=? AND ident=? AND role=? "
            "ORDER BY ts DESC LIMIT 1",
            session, context, server, ident, role,
        )  # fmt: skip
        return (int(row[0]), float(row[1])) if row else None

    def remember_form(self, session: str, server: str, form: str) -> None:
        """The form `server`'s results came in this session (Engram v2's envelope: "v2")."""
        self.q("INSERT OR IGNORE INTO forms (session, server, form) VALUES (?, ?, ?)", session, server, form)

    def form_of(self, session: str, server: str) -> str | None:
        row = self.one("SELECT form FROM forms WHERE session=? AND server=?", session, server)
        return str(row[0]) if row else None

    def delivered_count(self, session: str, context: str, server: str, role: str) -> int:
        """How many distinct ids this context holds whole from `role` calls of `server`."""
        row = self.one(
            "SELECT COUNT(DISTINCT ident) FROM delivered WHERE session=? AND context=? AND server=? AND role=? "
            "AND ident!=''",
            session, context, server, role,
        )  # fmt: skip
        return int(row[0]) if row else 0

    def remember_delivered(self, session: str, context: str, rows: list[tuple[str, str, str, str]], seq: int,
                           now: float) -> None:  # fmt: skip
        """Entries (fingerprint, server, ident, role) delivered whole now; the first delivery's time is kept."""
        for entry, server, ident, role in rows:
            self.q(
                "INSERT OR IGNORE INTO delivered (session, context, entry, server, ident, role, seq, ts) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                session, context, entry, server, ident, role, seq, now,
            )  # fmt: skip

    def forget_delivered(self, session: str, context: str | None = None) -> None:
        """What emptied a context (compaction, /clear, a new session): its entries count as new again.
        With no `context`, every context of the session."""
        if context is None:
            self.q("DELETE FROM delivered WHERE session=?", session)
        else:
            self.q("DELETE FROM delivered WHERE session=? AND context=?", session, context)

    def saved_since(self, session: str, since: float) -> bool:
        """Was any save made in this session after `since` (it may have changed a delivered entry)?"""
        return self.one(
            "SELECT 1 FROM calls WHERE session=? AND role IN ('save', 'summary') AND state IN ('committed', 'pending') "
            "AND created>=? LIMIT 1",
            session, since,
        ) is not None  # fmt: skip

    # -- the audit trail ----------------------------------------------------------------

    def record(self, row: dict[str, Any]) -> None:
        """One decision, for reports, replay and telemetry. Holds no memory contents unless the policy opts in."""
        self.q(
            "INSERT INTO decisions (ts, session, turn, agent_id, agent_type, event, tool, role, decision, code, mode, "
            "tokens_counted, tokens_delivered, tokens_saved, policy, detail, tokens_deduped, harness, memory_need, "
            "duration_ms, call_id, known_names, user) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row["ts"], row["session"], row["turn"], row.get("agent_id", ""), row.get("agent_type", ""),
            row["event"], row.get("tool", ""), row.get("role", ""), row["decision"], row.get("code", ""),
            row.get("mode", "enforce"), row.get("tokens_counted", 0), row.get("tokens_delivered", 0),
            row.get("tokens_saved", 0), row.get("policy", ""), row.get("detail", ""), row.get("tokens_deduped", 0),
            row.get("harness", ""), row.get("memory_need", ""), row.get("duration_ms", 0.0), row.get("call_id", ""),
            row.get("known_names", 0),
            row.get("user", ""),
        )  # fmt: skip

    def audit(self, session: str | None = None, since: float | None = None) -> list[Any]:
        """The audit trail, oldest first: (ts, session, turn, agent_type, event, role, decision, code,
        mode, tokens_delivered, tokens_saved, tokens_deduped, turn number, policy digest, user)."""
        where: list[str] = ["1=1"]
        args: list[Any] = []
        if session is not None:
            where.append("d.session=?")
            args.append(session)
        if since is not None:
            where.append("d.ts>=?")
            args.append(since)
        return self.q(
            "SELECT d.ts, d.session, d.turn, d.agent_type, d.event, d.role, d.decision, d.code, d.mode, "
            "d.tokens_delivered, d.tokens_saved, d.tokens_deduped, COALESCE(t.seq, 0), d.policy, d.user FROM decisions d "
            "LEFT JOIN turns t ON t.session=d.session AND t.turn=d.turn "
            f"WHERE {' AND '.join(where)} ORDER BY d.ts, d.id",
            *args,
        )

    def audit_after(self, position: str, limit: int, since: float | None = None) -> tuple[list[dict[str, Any]], str]:
        """The audit rows written after `position` ("" = from the first), oldest first, at most
        `limit` (without `detail`), and the position after the last of them: a reader that keeps
        the position reads every row once. `since`: skip rows decided before it.

        A position is "<id>:<ts>" of the last row read. Row ids only grow, except after a gc that
        emptied the trail's newest end, when SQLite counts on from the highest id left: a position
        whose row is gone while no row reaches its id, or whose id now holds another row, starts
        again from the first row (every row left was written after it)."""
        after = 0
        ident, _, stamp = position.partition(":")
        if ident.isdigit():
            after = int(ident)
            row = self.one("SELECT ts FROM decisions WHERE id=?", after)
            if (row is not None and repr(float(row[0])) != stamp) or (
                row is None and (self.one("SELECT MAX(id) FROM decisions")[0] or 0) < after
            ):
                after = 0
        rows = self.q(
            f"SELECT {', '.join(AUDIT_COLUMNS)} FROM decisions WHERE id>? AND ts>=? ORDER BY id LIMIT ?",
            after, -1e300 if since is None else since, max(0, limit),
        )  # fmt: skip
        out = [dict(zip(AUDIT_COLUMNS, r, strict=True)) for r in rows]
        if out:
            return out, f"{out[-1]['id']}:{float(out[-1]['ts'])!r}"
        return out, position if after else ""

    # -- usage of memories (ADR-0034: bumped only when injected) -------------------------

    def bump_usage(self, memories: list[str], now: float) -> None:
        for memory in memories:
            self.q(
                "INSERT INTO usage (memory, last_used, use_count) VALUES (?, ?, 1) "
                "ON CONFLICT(memory) DO UPDATE SET last_used=excluded.last_used, use_count=use_count+1",
                memory, now,
            )  # fmt: skip

    def usage_of(self, memories: list[str]) -> dict[str, tuple[float, int]]:
        out: dict[str, tuple[float, int]] = {}
        for start in range(0, len(memories), 500):
            chunk = memories[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for memory, last, count in self.q(
                f"SELECT memory, last_used, use_count FROM usage WHERE memory IN ({marks})", *chunk
            ):
                out[memory] = (last, count)
        return out

    # -- topics the memory holds (a save's or a result's topic_key), for the triggers' requires_topic --

    def remember_topics(self, topics: list[str], now: float) -> None:
        for topic in topics:
            self.q("INSERT INTO topics (topic, seen) VALUES (?, ?) ON CONFLICT(topic) DO UPDATE SET seen=excluded.seen",
                   topic, now)  # fmt: skip

    def topic_under(self, prefix: str) -> str | None:
        """A topic seen under `prefix` (compared as text: "session/" holds "session/add-auth"), or None."""
        row = self.one("SELECT topic FROM topics WHERE topic >= ? AND substr(topic, 1, ?) = ? ORDER BY topic LIMIT 1",
                       prefix, len(prefix), prefix)  # fmt: skip
        return row[0] if row else None

    # -- pruning ------------------------------------------------------------------------

    def gc(self, retention_days: float, now: float, max_sessions: int | None = None) -> int:
        """Drop sessions not seen within the retention period, and old audit rows."""
        with self.write():
            return self.prune(retention_days, now, max_sessions)

    def prune(self, retention_days: float, now: float, max_sessions: int | None = None) -> int:
        """The work of gc inside the caller's transaction; `max_sessions` bounds it."""
        cutoff = now - retention_days * 86400
        limit = -1 if max_sessions is None else max_sessions
        stale = [
            row[0] for row in self.q("SELECT session FROM sessions WHERE seen<? ORDER BY seen LIMIT ?", cutoff, limit)
        ]
        for session in stale:
            for table in SESSION_TABLES:
                self.q(f"DELETE FROM {table} WHERE session=?", session)
            self.q("DELETE FROM sessions WHERE session=?", session)
        self.q("DELETE FROM decisions WHERE ts<?", cutoff)
        self.q("DELETE FROM window_use WHERE bucket<?", cutoff)
        self.q("DELETE FROM usage WHERE last_used<?", now - 10 * retention_days * 86400)
        self.q("DELETE FROM topics WHERE seen<?", now - 10 * retention_days * 86400)
        return len(stale)
