"""The ledger on Redis: one ledger for every host that works on a turn.

Chosen by `MEMORY_GOVERNOR_LEDGER_URL=redis://[user:password@]host:port/db` (or `rediss://`);
imported only then, with redis-py (the optional extra `memory-governor[redis]`).

A decision about a session is two round trips, each one Lua script (atomic on the server):

1. `write(session)` leases the session and reads its rows. The lease is `mg:l:<session>`,
   holding a fencing token (a number from `INCR mg:fence`, new at every lease) and expiring
   after `lease_ms`, so a holder that dies releases within it. A lease held by another
   decision is waited for, up to the busy timeout: then LedgerBusy (contention, never ours).
2. The engine's queries (governor.engine.ledger, the same ones the SQLite file answers) run
   against those rows loaded into an in-memory SQLite with the same schema; triggers note each
   row a query changes.
3. On leaving, one script checks that the lease still holds our token, writes the changed rows,
   appends the audit rows, renews the keys' expiry and releases the lease. A lease lost (the
   holder was slower than its lease, and another took it) writes nothing: LedgerLeaseLost.

Keys, all under `mg:`; every one expires by the policy's retention (no gc needed):

  mg:s:<session>   hash, one field per row of every per-session table: "<table>|<primary key
                   as JSON>" -> the row's values as a JSON array (columns only ever appended)
  mg:l:<session>   the session's lease: its holder's fencing token
  mg:a:<agent>     the session a subagent works for (the `agents` table, looked up across sessions)
  mg:h:<process>   the session a process ran last (`processes`); mg:s:w… a user's window (`window_use`)
  mg:u:<memory>    hash: last_used, use_count (the `usage` table: how often a memory was briefed)
  mg:topics        sorted set, every score 0: the topic keys the memory holds (`topics`), read by prefix
  mg:sessions      sorted set: each session by the time it was last seen (status, doctor, gc)
  mg:audit         stream: the audit trail, one JSON object per decision, trimmed by age (`audit_after`)
  mg:fence         the fencing counter
  mg:p:<project>   a project's acceptance, mg:pp:<project> its policy (governor.engine.redis_acceptance)

Session ids are the ledger's keys (governor.engine.ledger.key): plain ids as they are, others
hashed, so an id from outside never becomes another key's name. A standalone Redis (or one
with replicas) is assumed: the scripts touch keys they compute, which Redis Cluster forbids.

Hot path when configured: standard library and redis-py; the client and its connection pool
are made once per URL in a process (the warm server keeps them).
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import sys
import threading
import time

from governor import alone
from governor.engine.ledger import AUDIT_COLUMNS, Ledger, LedgerBusy, LedgerError, LedgerUnavailable, create_tables

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PREFIX = "mg:"
_STREAM_ID = re.compile(r"\d+-\d+")  # an entry's id in the audit stream
_NUMBERS = ("ts", "tokens_counted", "tokens_delivered", "tokens_saved", "tokens_deduped", "duration_ms", "known_names")
AUDIT_TABLE = "decisions"  # appended to the stream, never read back by a decision
SHARED_TABLES = ("usage", "topics")  # not per session: this module's own methods keep them
CONNECT_TIMEOUT = 0.5  # seconds; with one reconnect, an unreachable Redis is known within ~1 s
READ_TIMEOUT = 2.0  # seconds per round trip; 1 s timed out under 24 racing hooks on a loaded 2-core machine
LEASE_FLOOR_MS = 500
CHAIN_DEPTH = 32  # subagents of subagents followed, at most

# KEYS: the leases (n), the sessions' hashes (n), the fencing counter. ARGV: the lease's ms.
_ACQUIRE = """
local n = (#KEYS - 1) / 2
for i = 1, n do
  local left = redis.call('PTTL', KEYS[i])
  if left ~= -2 then return {0, left} end
end
local token = tostring(redis.call('INCR', KEYS[#KEYS]))
for i = 1, n do redis.call('SET', KEYS[i], token, 'PX', ARGV[1]) end
local out = {1, token}
for i = 1, n do out[#out + 1] = redis.call('HGETALL', KEYS[n + i]) end
return out
"""

# KEYS: the leases (n), the sessions' hashes (n), the sessions index, the audit stream.
# ARGV: the token, n, the changes as JSON.
_FLUSH = """
local n = tonumber(ARGV[2])
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
local p = cjson.decode(ARGV[3])
for i = 1, n do
  local data, s = KEYS[n + i], p.s[i]
  for j = 1, #s.set, 400 do redis.call('HSET', data, unpack(s.set, j, math.min(j + 399, #s.set))) end
  for j = 1, #s.del, 400 do redis.call('HDEL', data, unpack(s.del, j, math.min(j + 399, #s.del))) end
  redis.call('EXPIRE', data, p.ttl)
  if s.seen ~= '' then redis.call('ZADD', KEYS[2 * n + 1], s.seen, s.id) end
  redis.call('DEL', KEYS[i])
end
for _, a in ipairs(p.agents) do redis.call('SET', p.prefix .. 'a:' .. a[1], a[2], 'NX', 'EX', p.ttl) end
for _, h in ipairs(p.processes) do redis.call('SET', p.prefix .. 'h:' .. h[1], h[2], 'EX', p.ttl) end
if #p.audit > 0 then
  local now = redis.call('TIME')
  local oldest = string.format('%d', math.max(0, tonumber(now[1]) * 1000 - p.ttl * 1000))
  for _, row in ipairs(p.audit) do redis.call('XADD', KEYS[2 * n + 2], 'MINID', '~', oldest, '*', 'r', row) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2 * n + 1], '-inf', p.cutoff)
return 1
"""

# KEYS: the leases. ARGV: the token. Releases those still ours (a decision that failed).
_RELEASE = """
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
return 1
"""

# ARGV: the prefix, a session, the depth. The session it belongs to, following agent links.
_DISPATCHER = """
local s, seen = ARGV[2], {}
seen[ARGV[2]] = true
for i = 1, tonumber(ARGV[3]) do
  local up = redis.call('GET', ARGV[1] .. 'a:' .. s)
  if not up or seen[up] then return s end
  s = up
  seen[s] = true
end
return s
"""


def masked(url: str) -> str:
    """The URL with its password replaced, for every message and log."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "(not a redis:// URL)"
    credentials, at, place = rest.rpartition("@")
    if not at:
        return url
    user = credentials.split(":", 1)[0] if ":" in credentials else ""
    return f"{scheme}://{user}:***@{place}" if credentials else f"{scheme}://{place}"


_clients: dict[str, tuple[Any, dict[str, Any]]] = {}
_clients_lock = threading.Lock()


def _hide_from_redis() -> list[str]:
    """redis-py 8 imports the OpenTelemetry SDK's metrics when installed (~70 ms of a hook), for metrics
    the governor never turns on: in a process working on one thread (governor.alone: a hook, a command)
    they look absent while it is imported (the caller takes them back); otherwise nothing is hidden."""
    if not alone() or "redis" in sys.modules:
        return []
    hidden = [name for name in ("opentelemetry.sdk.metrics",) if name not in sys.modules]
    sys.modules.update(dict.fromkeys(hidden))  # type: ignore[arg-type]  # importing None fails: redis-py goes without
    return hidden


def _client(url: str) -> tuple[Any, dict[str, Any]]:
    """One redis-py client (a connection pool) and its scripts per URL in this process."""
    with _clients_lock:
        found = _clients.get(url)
        if found is not None:
            return found
        if not url.startswith(("redis://", "rediss://")):
            raise LedgerUnavailable(
                f"MEMORY_GOVERNOR_LEDGER_URL is {masked(url)}: use redis://[user:password@]host:port/db (or rediss://)"
            )
        from governor import with_site_packages

        with_site_packages()
        hidden = _hide_from_redis()
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as err:
            from governor import install_extra

            raise LedgerUnavailable(f"MEMORY_GOVERNOR_LEDGER_URL is set, but the redis package cannot be imported "
                                    f"({err}): {install_extra('redis')}") from None  # fmt: skip
        finally:
            for name in hidden:
                if sys.modules.get(name, 0) is None:
                    del sys.modules[name]
        try:
            import redis.driver_info  # redis-py 7.1+; earlier ones take lib_name and lib_version

            quiet: dict[str, Any] = {"driver_info": None}
        except ImportError:
            quiet = {"lib_name": None, "lib_version": None}
        try:
            client = redis.Redis.from_url(
                url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=READ_TIMEOUT, decode_responses=True,
                retry=Retry(NoBackoff(), 1, (redis.ConnectionError,)),  # one reconnect: a restarted Redis
                health_check_interval=0, **quiet,  # no CLIENT SETINFO: two round trips less per connection
            )  # fmt: skip
        except (ValueError, redis.RedisError) as err:
            raise LedgerUnavailable(
                f"MEMORY_GOVERNOR_LEDGER_URL {masked(url)} cannot be used ({_said(err, url)})"
            ) from None
        scripts = {name: client.register_script(text) for name, text in
                   (("acquire", _ACQUIRE), ("flush", _FLUSH), ("release", _RELEASE), ("dispatcher", _DISPATCHER))}  # fmt: skip
        _clients[url] = (client, scripts)
        return client, scripts


_hung: dict[str, float] = {}  # URL -> until when (monotonic) a Redis that just timed out is not waited for again


def _round_trip(url: str, step: Any, *args: Any, **kwargs: Any) -> Any:
    """One round trip; a failure of Redis is the governor's own (on_error), said without secrets.
    A Redis that just timed out is not waited for again for a read timeout, so one decision (its
    acceptance read, then its ledger) costs at most one."""
    import redis

    if _hung.get(url, 0.0) > time.monotonic():
        raise LedgerUnavailable(f"the Redis ledger at {masked(url)} cannot be reached (TimeoutError: no answer "
                                f"within {READ_TIMEOUT:g} s a moment ago)")  # fmt: skip
    try:
        return step(*args, **kwargs)
    except redis.RedisError as err:
        if isinstance(err, redis.TimeoutError):
            _hung[url] = time.monotonic() + READ_TIMEOUT
        if isinstance(err, redis.AuthenticationError):
            how = "refused the user and password of MEMORY_GOVERNOR_LEDGER_URL"
        elif isinstance(err, (redis.ConnectionError, redis.TimeoutError)):
            how = "cannot be reached"
        else:
            how = "answered with an error"
        raise LedgerUnavailable(f"the Redis ledger at {masked(url)} {how} ({_said(err, url)})") from None


def _said(err: BaseException, url: str) -> str:
    """An error's text with the URL's password taken out, should it appear."""
    text = f"{type(err).__name__}: {err}"
    password = url.partition("://")[2].rpartition("@")[0].partition(":")[2]
    return text.replace(password, "***") if password else text


class RedisLedger(Ledger):
    """The ledger's interface over Redis; the queries run on the leased sessions' rows in memory."""

    def __init__(self, state_dir: str, url: str, busy_timeout_ms: int = 2000, retention_days: float = 14.0) -> None:
        self.state_dir = state_dir
        self.url = url
        self.notices: list[str] = []
        self.busy_timeout = busy_timeout_ms / 1000.0
        self.lease_ms = max(LEASE_FLOOR_MS, busy_timeout_ms * 3 // 4)  # a dead holder frees it before waiters give up
        self.ttl = max(60, int(retention_days * 86400))
        self.client, self.scripts = _client(url)
        self.db, self.tables = _in_memory()
        self.leased: list[str] = []
        self.token = ""

    # -- the interface's transactions --------------------------------------------------------

    def write(self, *sessions: str) -> _Use:
        return _Use(self, sessions, lease=True)

    def read(self, *sessions: str) -> _Use:
        return _Use(self, sessions, lease=False)

    def close(self) -> None:
        self.db.close()  # the client's pool stays: other ledgers of this process share it

    def where(self) -> str:
        return masked(self.url)

    def check(self) -> tuple[bool, str]:
        info = self._call(self.client.info)
        count = self._call(self.client.zcount, PREFIX + "sessions", time.time() - self.ttl, "+inf")
        if info.get("aof_enabled"):
            kept = "append-only file (a restart keeps what was written)"
        elif info.get("rdb_last_bgsave_status") and _saves(self.client):
            kept = "snapshots only (a restart loses what came after the last one)"
        else:
            kept = "none (a restart loses every count)"
        return True, f"{count} session(s); Redis {info.get('redis_version', '?')}, persistence: {kept}"

    def _call(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        return _round_trip(self.url, step, *args, **kwargs)

    # -- leases and snapshots ----------------------------------------------------------------

    def _acquire(self, sessions: tuple[str, ...]) -> None:
        ordered = sorted(set(sessions))
        keys = [PREFIX + "l:" + s for s in ordered] + [PREFIX + "s:" + s for s in ordered] + [PREFIX + "fence"]
        give_up = time.monotonic() + self.busy_timeout
        while True:
            answer = self._call(self.scripts["acquire"], keys=keys, args=[self.lease_ms])
            if answer[0] == 1:
                break
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                raise LedgerBusy(
                    f"the Redis ledger's lease on this session is held by another decision past the busy timeout "
                    f"({self.busy_timeout * 1000:.0f} ms; {answer[1]} ms of it left)"
                )
            time.sleep(min(remaining, random.uniform(0.001, 0.004)))
        self.token = str(answer[1])
        self.leased = ordered
        self._load(answer[2:])

    def _snapshot(self, sessions: tuple[str, ...]) -> None:
        ordered = sorted(set(sessions))

        def rows() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for session in ordered:
                pipe.hgetall(PREFIX + "s:" + session)
            return [[item for pair in found.items() for item in pair] for found in pipe.execute()]

        self.leased = []
        self._load(self._call(rows))

    def _load(self, hashes: list[Any]) -> None:
        """Empty the in-memory tables, then fill them with the sessions' rows."""
        db = self.db
        try:
            for table in (*self.tables, AUDIT_TABLE):
                db.execute(f"DELETE FROM {table}")
            grouped: dict[tuple[str, int], list[Any]] = {}
            for flat in hashes:
                for index in range(0, len(flat), 2):
                    table = flat[index].partition("|")[0]
                    if table not in self.tables:
                        continue  # a table this version does not have (a newer host wrote it)
                    values = json.loads(flat[index + 1])[: len(self.tables[table][0])]
                    grouped.setdefault((table, len(values)), []).append(values)
            for (table, width), rows in grouped.items():
                columns = ", ".join(self.tables[table][0][:width])
                db.executemany(f"INSERT OR REPLACE INTO {table} ({columns}) VALUES ({', '.join('?' * width)})", rows)
            db.execute("DELETE FROM changed")
        except (sqlite3.Error, ValueError, TypeError) as err:
            raise LedgerUnavailable(
                f"the Redis ledger at {masked(self.url)} holds rows this version cannot read ({err})"
            ) from err

    def _flush(self) -> None:
        """Write the changed rows and the audit rows, and release the lease: one script."""
        db = self.db
        per: dict[str, dict[str, Any]] = {s: {"id": s, "set": [], "del": [], "seen": ""} for s in self.leased}
        agents: list[list[str]] = []
        processes: list[list[str]] = []
        for table, session, pk in db.execute("SELECT tbl, session, pk FROM changed ORDER BY rowid").fetchall():
            if session not in per:
                raise LedgerError(f"a decision wrote to session {session!r} outside its lease")
            columns, primary = self.tables[table]
            where = " AND ".join(f"{c} IS ?" for c in primary)
            row = db.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {where}", json.loads(pk)).fetchone()
            field = f"{table}|{pk}"
            if row is None:
                per[session]["del"].append(field)
                continue
            per[session]["set"] += [field, json.dumps(row)]
            if table == "agents":
                agents.append([row[columns.index("agent")], session])
            elif table == "processes":
                processes.append([row[columns.index("process")], session])
            elif table == "sessions":
                per[session]["seen"] = repr(float(row[columns.index("seen")]))
        audit = self._audit_rows()
        db.execute("DELETE FROM changed")
        db.execute(f"DELETE FROM {AUDIT_TABLE}")
        ordered = self.leased
        keys = ([PREFIX + "l:" + s for s in ordered] + [PREFIX + "s:" + s for s in ordered]
                + [PREFIX + "sessions", PREFIX + "audit"])  # fmt: skip
        changes = {"s": [per[s] for s in ordered], "agents": agents, "processes": processes, "audit": audit,
                   "ttl": self.ttl, "prefix": PREFIX, "cutoff": repr(time.time() - self.ttl)}  # fmt: skip
        token, self.leased, self.token = self.token, [], ""
        written = self._call(self.scripts["flush"], keys=keys, args=[token, len(ordered), json.dumps(changes)])
        if written != 1:
            from governor.engine.ledger import LedgerLeaseLost  # decide() makes the decision again

            raise LedgerLeaseLost(
                f"this decision outlived its lease on the Redis ledger ({self.lease_ms} ms) and another took the "
                "session; nothing of it was written"
            )

    def _audit_rows(self) -> list[str]:
        """This decision's audit rows, each a JSON object with its turn's number (for reports)."""
        found = self.db.execute(
            f"SELECT d.*, COALESCE(t.seq, 0) FROM {AUDIT_TABLE} d LEFT JOIN turns t ON t.session=d.session "
            "AND t.turn=d.turn ORDER BY d.id"
        )
        names = [*(c[0] for c in found.description[:-1]), "seq"]
        return [json.dumps(dict(zip(names, row, strict=True))) for row in found.fetchall()]

    def _release(self) -> None:
        if not self.leased:
            return
        keys = [PREFIX + "l:" + s for s in self.leased]
        token, self.leased, self.token = self.token, [], ""
        self._call(self.scripts["release"], keys=keys, args=[token])

    # -- what is not per session -------------------------------------------------------------

    def dispatching_session(self, session: str) -> str:
        return str(self._call(self.scripts["dispatcher"], keys=[], args=[PREFIX, session, CHAIN_DEPTH]))

    def known_session(self, session: str) -> bool:
        return self._call(self.client.zscore, PREFIX + "sessions", session) is not None

    def sessions_of(self, processes: list[str]) -> dict[str, str]:
        found = self._call(self.client.mget, [PREFIX + "h:" + p for p in processes]) if processes else []
        return {p: s for p, s in zip(processes, found, strict=True) if s is not None}

    def latest_session(self) -> str | None:
        found = self._call(self.client.zrevrangebyscore, PREFIX + "sessions", "+inf", time.time() - self.ttl, start=0,
                           num=1)  # fmt: skip
        return str(found[0]) if found else None

    def audit(self, session: str | None = None, since: float | None = None) -> list[Any]:
        rows: list[tuple[Any, ...]] = []
        fields = ("ts", "session", "turn", "agent_type", "event", "role", "decision", "code", "mode",
                  "tokens_delivered", "tokens_saved", "tokens_deduped", "seq", "policy", "user")  # fmt: skip
        start = "-"
        while True:
            batch = self._call(self.client.xrange, PREFIX + "audit", min=start, count=5000)
            for _, entry in batch:
                row = json.loads(entry.get("r", "{}"))
                if (session is None or row.get("session") == session) and (since is None or row.get("ts", 0) >= since):
                    rows.append(
                        tuple(row.get(name, 0 if name.startswith(("tokens", "seq")) else "") for name in fields)
                    )
            if len(batch) < 5000:
                break
            start = "(" + batch[-1][0]
        rows.sort(key=lambda r: r[0])
        return rows

    def audit_after(self, position: str, limit: int, since: float | None = None) -> tuple[list[dict[str, Any]], str]:
        """The audit stream after `position` (a stream id, which never repeats: "" or anything else
        is from the first entry), at most `limit` rows without `detail`; see Ledger.audit_after."""
        known = bool(_STREAM_ID.fullmatch(position))
        start = f"({position}" if known else "-"
        out: list[dict[str, Any]] = []
        while len(out) < limit:
            want = limit - len(out)
            batch = self._call(self.client.xrange, PREFIX + "audit", min=start, count=want)
            for ident, entry in batch:
                position, start, known = ident, "(" + ident, True
                row = json.loads(entry.get("r", "{}"))
                if since is None or float(row.get("ts", 0)) >= since:
                    out.append({name: row.get(name, 0 if name in _NUMBERS else "") for name in AUDIT_COLUMNS})
                    out[-1]["id"] = ident
            if len(batch) < want:
                break
        return out, position if known else ""

    def bump_usage(self, memories: list[str], now: float) -> None:
        def bump() -> None:
            pipe = self.client.pipeline(transaction=True)
            for memory in memories:
                pipe.hincrby(PREFIX + "u:" + memory, "use_count", 1)
                pipe.hset(PREFIX + "u:" + memory, "last_used", repr(now))
                pipe.expire(PREFIX + "u:" + memory, 10 * self.ttl)  # as the file keeps usage: ten retentions
            pipe.execute()

        self._call(bump)

    def usage_of(self, memories: list[str]) -> dict[str, tuple[float, int]]:
        def read() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for memory in memories:
                pipe.hmget(PREFIX + "u:" + memory, "last_used", "use_count")
            return list(pipe.execute())

        found = self._call(read)
        return {
            m: (float(last), int(count)) for m, (last, count) in zip(memories, found, strict=True) if last is not None
        }

    def remember_topics(self, topics: list[str], now: float) -> None:
        def add() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.zadd(PREFIX + "topics", dict.fromkeys(topics, 0))
            pipe.expire(PREFIX + "topics", 10 * self.ttl)  # as usage: ten retentions after the last one seen
            pipe.execute()

        if topics:
            self._call(add)

    def topic_under(self, prefix: str) -> str | None:
        found = self._call(self.client.zrangebylex, PREFIX + "topics", "[" + prefix, "[" + prefix + "\xff", 0, 1)
        if not found:
            return None
        topic = found[0]
        return topic.decode("utf-8", "replace") if isinstance(topic, bytes) else str(topic)

    def prune(self, retention_days: float, now: float, max_sessions: int | None = None) -> int:
        """Inside a decision: nothing; every key expires by itself."""
        return 0

    def gc(self, retention_days: float, now: float, max_sessions: int | None = None) -> int:
        """Drop sessions not seen within `retention_days` now (shorter than the keys' own expiry)."""
        cutoff = now - retention_days * 86400

        def sweep() -> int:
            stale = self.client.zrangebyscore(PREFIX + "sessions", "-inf", f"({cutoff!r}", start=0,
                                              num=max_sessions if max_sessions is not None else -1)  # fmt: skip
            pipe = self.client.pipeline(transaction=True)
            for session in stale:
                pipe.delete(PREFIX + "s:" + session)
                pipe.zrem(PREFIX + "sessions", session)
            pipe.xtrim(PREFIX + "audit", minid=f"{max(0, int(cutoff * 1000))}")
            pipe.execute()
            return len(stale)

        return int(self._call(sweep))


def _saves(client: Any) -> bool:
    """Does this Redis write snapshots (CONFIG may be refused on a managed one: then it may)?"""
    try:
        return bool(client.config_get("save").get("save"))
    except Exception:
        return True


class _Use:
    """`with ledger.write(session):` on Redis: lease and load, then write back and release; with
    `ledger.read(session):` the sessions' rows as they are, no lease, nothing written."""

    __slots__ = ("lease", "ledger", "sessions")

    def __init__(self, ledger: RedisLedger, sessions: tuple[str, ...], lease: bool) -> None:
        self.ledger = ledger
        self.sessions = sessions
        self.lease = lease

    def __enter__(self) -> None:
        if self.lease:
            self.ledger._acquire(self.sessions)
        else:
            self.ledger._snapshot(self.sessions)

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        if not self.lease:
            self.ledger.db.execute("DELETE FROM changed")
        elif kind is None:
            self.ledger._flush()
        else:
            try:
                self.ledger._release()
            except LedgerError:
                pass  # the lease then ends by itself; the first failure is the one to report


_template: tuple[sqlite3.Connection, dict[str, tuple[list[str], list[str]]]] | None = None
_template_lock = threading.Lock()


def _in_memory() -> tuple[sqlite3.Connection, dict[str, tuple[list[str], list[str]]]]:
    """An in-memory SQLite with the schema and the change triggers, copied from one built once per
    process (a copy takes ~0.1 ms, building it ~2 ms), and the per-session tables' layout."""
    global _template
    with _template_lock:
        if _template is None:
            built = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            create_tables(built)
            tables = _per_session_tables(built)
            _note_changes(built, tables)
            _template = (built, tables)
        db = sqlite3.connect(":memory:", isolation_level=None)
        _template[0].backup(db)
        return db, _template[1]


def _per_session_tables(db: sqlite3.Connection) -> dict[str, tuple[list[str], list[str]]]:
    """Each per-session table: (its columns, its primary key). A table the schema adds is one when
    it has a `session` column and a primary key; any other must be kept by this module itself."""
    tables: dict[str, tuple[list[str], list[str]]] = {}
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").fetchall():
        info = db.execute(f"PRAGMA table_info({name})").fetchall()
        columns = [row[1] for row in info]
        primary = [row[1] for row in sorted(info, key=lambda r: r[5]) if row[5]]
        if name == AUDIT_TABLE or name in SHARED_TABLES:
            continue
        if "session" not in columns or not primary:
            raise LedgerError(f"the ledger table {name!r} is neither per session (a session column and a primary "
                              "key) nor kept by the Redis store")  # fmt: skip
        tables[name] = (columns, primary)
    return tables


def _note_changes(db: sqlite3.Connection, tables: dict[str, tuple[list[str], list[str]]]) -> None:
    """Triggers that note the primary key of every row inserted, updated or deleted."""
    db.execute("CREATE TABLE changed (tbl TEXT NOT NULL, session TEXT NOT NULL, pk TEXT NOT NULL, "
               "PRIMARY KEY (tbl, pk))")  # fmt: skip
    for name, (_, primary) in tables.items():
        for when, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            notes = " ".join(
                f"INSERT OR IGNORE INTO changed VALUES ('{name}', {row}.session, "
                f"json_array({', '.join(f'{row}.{c}' for c in primary)}));"
                for row in rows
            )
            db.execute(f"CREATE TRIGGER changed_{name}_{when.lower()} AFTER {when} ON {name} BEGIN {notes} END")
