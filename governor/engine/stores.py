"""Which store answers for the ledger: the SQLite file in the state directory, or, with
MEMORY_GOVERNOR_LEDGER_URL, the Redis there (governor.engine.ledger is their interface).

Hot path: standard library only; the Redis store (and redis-py) is imported only for a URL.
"""

from __future__ import annotations

from governor.engine.ledger import URL_VARIABLE, Ledger, LedgerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def open_for(env: Mapping[str, str], settings: dict[str, Any]) -> Ledger:
    """The ledger `env` names (MEMORY_GOVERNOR_LEDGER_URL, else the state directory's file), with
    the policy's `ledger` settings."""
    from governor.state import state_dir

    return open_ledger(state_dir(env), settings["busy_timeout_ms"], env.get(URL_VARIABLE) or None,
                       settings["retention_days"])  # fmt: skip


def open_ledger(state_dir: str, busy_timeout_ms: int = 2000, url: str | None = None,
                retention_days: float = 14.0) -> Ledger:  # fmt: skip
    """The SQLite file in `state_dir`, or with `url` (MEMORY_GOVERNOR_LEDGER_URL) the Redis there."""
    if url:
        from governor.engine.redis_ledger import RedisLedger

        return RedisLedger(state_dir, url, busy_timeout_ms, retention_days)
    from governor.engine.sqlite_ledger import SQLiteLedger
    from governor.state import ensure_dir

    try:
        ensure_dir(state_dir)
    except OSError as err:
        raise LedgerUnavailable(f"the state directory {state_dir} cannot be created ({err.strerror or err})") from err
    return SQLiteLedger(state_dir, busy_timeout_ms)
