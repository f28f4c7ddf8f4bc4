"""What the governor's own Redis user may do, and whether a ledger URL's user can do more.

A model that reads the ledger's URL (every user's hooks read it) can run whatever that URL's
Redis user may. ACL_RULES is what the governor needs (its keys, the commands its scripts and
reads run, INFO and TIME) and none of the administrative commands (CONFIG, CLIENT PAUSE and
KILL, SHUTDOWN, FLUSHALL, DEBUG, KEYS, ACL, ...) that would stop, lock or flush every user's
ledger at once. `doctor` warns of a URL whose user `administers` (docs/teams.md).

Behind the wall only the decision service holds the URL, so what guards the ledger is that Redis
answers nobody else: `anyone_can` asks it as a client with no credentials, which any process on
the machine can be.

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


def anyone_can(url: str) -> str | None:
    """What a client with no credentials may do on the Redis at `url` (administer it, or reach the
    governor's keys), in words; None when Redis refuses it both. Unreachable or silent: OSError."""
    import redis

    from governor.engine.redis_ledger import CONNECT_TIMEOUT, READ_TIMEOUT

    anonymous = redis.Redis.from_url(url, username=None, password=None, socket_connect_timeout=CONNECT_TIMEOUT,
                                     socket_timeout=READ_TIMEOUT)  # fmt: skip
    anonymous.connection_pool.connection_kwargs.update(username=None, password=None)  # the URL's are not used
    try:
        for command, power in ((("CONFIG", "GET", "maxmemory"), "run administrative commands (CONFIG GET)"),
                               (("EXISTS", f"{PREFIX}fence"), "read and write the ledger's keys")):  # fmt: skip
            try:
                anonymous.execute_command(*command)  # type: ignore[no-untyped-call]
            except (redis.AuthenticationError, redis.ResponseError):  # NOAUTH, NOPERM
                continue
            except redis.RedisError as err:  # unreachable, or no answer in time
                raise OSError(str(err)) from None
            return power
        return None
    finally:
        anonymous.close()
