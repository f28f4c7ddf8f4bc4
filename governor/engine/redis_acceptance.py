"""A project's acceptance (governor.policy.acceptance) on the ledger's Redis, shared by every host:

  mg:p:<project key>   the record (digest, when, shipped default), JSON
  mg:pp:<project key>  the accepted compiled policy, JSON

written together in one transaction; a read renews both, so a project in use keeps its record.
Errors are the Redis ledger's own (LedgerUnavailable, the URL's password masked).

Imported only when MEMORY_GOVERNOR_LEDGER_URL is set.
"""

from __future__ import annotations

from governor.engine.redis_ledger import PREFIX, _client, _round_trip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ACCEPTANCE_TTL = 400 * 86400


def read_acceptance(url: str, key: str, policy: bool = False) -> str | None:
    """The project's acceptance record (`policy`: the accepted compiled policy) as JSON text, or None."""
    client, _ = _client(url)

    def read() -> Any:
        pipe = client.pipeline(transaction=False)
        pipe.get(PREFIX + ("pp:" if policy else "p:") + key)
        pipe.expire(PREFIX + "p:" + key, ACCEPTANCE_TTL)
        pipe.expire(PREFIX + "pp:" + key, ACCEPTANCE_TTL)
        return pipe.execute()[0]

    found = _round_trip(url, read)
    return found if isinstance(found, str) else None


def write_acceptance(url: str, key: str, record: str, policy: str) -> None:
    """Record a project's accepted policy for every host: both keys at once."""
    client, _ = _client(url)

    def write() -> None:
        pipe = client.pipeline(transaction=True)
        pipe.set(PREFIX + "pp:" + key, policy, ex=ACCEPTANCE_TTL)
        pipe.set(PREFIX + "p:" + key, record, ex=ACCEPTANCE_TTL)
        pipe.execute()

    _round_trip(url, write)
