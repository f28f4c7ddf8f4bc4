"""The ledger in one SQLite file (WAL) in the state directory: the default store.

Every decision runs inside one write transaction (`BEGIN IMMEDIATE`), so "count, compare,
reserve" is atomic across the processes of one machine: a parallel batch of tool calls cannot
overshoot a limit. A deferred read-then-write transaction would not do: in WAL mode it can
fail with SQLITE_BUSY at once, ignoring the busy timeout. The queries are the interface's
(governor.engine.ledger); this module owns the file: creating and upgrading it, moving a
corrupt one aside, the transaction, and giving space back after gc.

Hot path: standard library only, no `typing`.
"""

from __future__ import annotations

import _sqlite3 as sqlite3  # the C module: the package adds datetime adapters (~2 ms a hook) never used here
import os
import time

from governor.engine.ledger import (
    DB_NAME,
    SCHEMA_VERSION,
    Ledger,
    LedgerUnavailable,
    create_tables,
    sqlite_error,
)

WAL_LIMIT = 1 << 20  # bytes of WAL a hook deciding alone leaves for the next one to read at most (tidy)


class SQLiteLedger(Ledger):
    """A connection to the ledger file. Use `with ledger.write():` around a decision."""

    def __init__(self, state_dir: str, busy_timeout_ms: int = 2000) -> None:
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, DB_NAME)
        self.notices: list[str] = []
        self.busy_timeout = busy_timeout_ms / 1000.0
        self.db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        from governor.state import check_regular

        for suffix in ("", "-wal", "-shm"):  # SQLite would open a FIFO there and wait on it for ever
            try:
                check_regular(self.path + suffix)
            except OSError as err:
                raise LedgerUnavailable(
                    f"{self.path}{suffix} is not a regular file: another process put it there; "
                    "remove it, and the next call starts a fresh ledger"
                ) from err
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        except sqlite3.Error as err:
            raise sqlite_error(err) from err
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                self._create(db)
            db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as err:
            db.close()
            if isinstance(err, sqlite3.OperationalError):
                raise sqlite_error(err) from err
            return self._replace_corrupt(err)
        return db

    def _create(self, db: sqlite3.Connection) -> None:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                create_tables(db)
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")
        except sqlite3.Error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _replace_corrupt(self, err: Exception) -> sqlite3.Connection:
        """Move a corrupt file aside and start a fresh ledger: never a crash loop."""
        aside = f"{self.path}.corrupt-{int(time.time())}-{os.getpid()}"
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(self.path + suffix, aside + suffix)
            except FileNotFoundError:
                pass
            except OSError as move_err:
                raise LedgerUnavailable(
                    f"the ledger is corrupt ({err}) and cannot be moved aside ({move_err})"
                ) from err
        self.notices.append(
            f"memory-governor: the ledger was corrupt ({err}); it was moved to {aside} and a fresh one started "
            "(this turn's counts restart from zero)."
        )
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            self._create(db)
            db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as again:
            raise sqlite_error(again) from again
        return db

    def close(self) -> None:
        self.db.close()

    def recover(self, err: Exception) -> None:
        """After a LedgerCorrupt: move the file aside and continue with a fresh ledger."""
        self.db.close()
        self.db = self._replace_corrupt(err)

    def write(self, *sessions: str) -> _Transaction:
        """One transaction for every session: the file serialises all decisions of this machine."""
        return _Transaction(self.db)

    def read(self, *sessions: str) -> _Reads:
        return _READS

    def where(self) -> str:
        return self.path

    def check(self) -> tuple[bool, str]:
        check = self.one("PRAGMA quick_check")[0]
        if check != "ok":
            return False, f"integrity check says {check}"
        return True, f"{self.one('SELECT COUNT(*) FROM sessions')[0]} session(s)"

    def vacuum(self) -> None:
        self.q("PRAGMA wal_checkpoint(TRUNCATE)")
        self.q("VACUUM")

    def tidy(self) -> None:
        """A process that exits without closing its connection (a hook deciding alone) never
        checkpoints the WAL, and the next one to open the file alone reads the whole WAL to rebuild
        its index: left so, the WAL grows by every decision and so does every cold hook's time
        (~1 ms a MB here). Past WAL_LIMIT, checkpoint it and truncate it, after the answer, without
        waiting: while another process reads or writes, the checkpoint gives up at once and a later
        hook does it (never raises)."""
        try:
            if os.path.getsize(self.path + "-wal") <= WAL_LIMIT:
                return
            self.db.execute("PRAGMA busy_timeout=0")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except (OSError, sqlite3.Error):
            pass


class _Reads:
    """Reads outside a transaction: each query sees the file as committed."""

    __slots__ = ()

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        pass


_READS = _Reads()


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT; rolled back on any error."""

    __slots__ = ("db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:
            raise sqlite_error(err) from err

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        if not self.db.in_transaction:
            return
        try:
            self.db.execute("COMMIT" if kind is None else "ROLLBACK")
        except sqlite3.Error as err:
            if kind is None:
                try:
                    self.db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                raise sqlite_error(err) from err
