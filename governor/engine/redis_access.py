"""What the governor's own Redis user may do, and whether a ledger URL's user can do more.

A model that reads the ledger's URL (every user's hooks read it) can run whatever that URL's
Redis user may. ACL_RULES is what the governor needs (its keys, the commands its scripts and
reads run, INFO and TIME) and none of the administrative commands (CONFIG, CLIENT PAUSE and
KILL, SHUTDOWN, FLUSHALL, DEBUG, KEYS, ACL, ...) that would stop, lock or flush every user's
ledger at once. `doctor` warns of a URL whose user `administers` (docs/teams.md).

Cold path: doctor's.
"""

from __future__ import annotations

from governor.engine.redis_ledger import PREFIX, RedisLedger

ACL_RULES = (
    f"resetkeys ~{PREFIX}* resetchannels -@all +@read +@write +@scripting +@transaction +@connection -@dangerous "
    "+info +time"
)


def administers(ledger: RedisLedger) -> bool:
    """Can the ledger URL's user run Redis's administrative commands? Asked with a harmless one
    (CONFIG GET), which a user limited by ACL_RULES cannot run."""
    import redis

    try:
        ledger.client.config_get("maxmemory")
    except redis.ResponseError:  # NOPERM
        return False
    return True
