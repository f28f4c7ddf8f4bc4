"""The state directory: the one place memory-governor writes (ledger, compiled policy, socket).

Hot path: standard library only, no `typing`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

URL_VARIABLE = "MEMORY_GOVERNOR_LEDGER_URL"  # set: the ledger is the Redis at that URL; unset: the SQLite file here


def state_dir(env: Mapping[str, str]) -> str:
    """MEMORY_GOVERNOR_STATE_DIR, else $XDG_STATE_HOME/memory-governor, else ~/.local/state/..."""
    explicit = env.get("MEMORY_GOVERNOR_STATE_DIR")
    if explicit:
        return os.path.abspath(explicit)
    xdg = env.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "memory-governor")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".local", "state", "memory-governor")


def default_state_dir(env: Mapping[str, str]) -> str:
    """Where the state directory is when MEMORY_GOVERNOR_STATE_DIR does not move it: acceptance
    records are kept here too, so a state directory pointed somewhere new does not start over."""
    return state_dir({k: v for k, v in env.items() if k != "MEMORY_GOVERNOR_STATE_DIR"})


def cache_dir(env: Mapping[str, str]) -> str:
    """What can be rebuilt from elsewhere (the tokenizer table governor.engine.bpe reads)."""
    return os.path.join(state_dir(env), "cache")


def ensure_dir(path: str) -> str:
    """Create `path` (owner-only) if needed; it holds usage data other users must not read.

    Every level created here is 0700 (os.makedirs would give intermediate levels, such as the
    state directory under state/policy, the default mode)."""
    if os.path.isdir(path):
        return path
    missing = []
    here = os.path.abspath(path)
    while not os.path.isdir(here):
        missing.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for level in reversed(missing):
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:
            if not os.path.isdir(level):
                raise OSError(f"{level} exists and is not a directory") from None
    return path


def write_atomic(path: str, data: bytes) -> None:
    """Readers see the old file or the new one, never half of it. The file written first has a
    name nobody can guess and is created new (O_EXCL: no symlink or file put there in advance
    is followed or truncated, whoever runs this)."""
    while True:
        tmp = f"{path}.{os.urandom(8).hex()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data`, hex: what the state directory keys files and ledger rows by. From the
    interpreter's own `_sha256` where it has one (hashlib loads OpenSSL: a few ms of a hook process)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]
    except ImportError:  # Python 3.12+ renamed it
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]
        except ImportError:
            from hashlib import sha256
    return str(sha256(data).hexdigest())


def blake2b_hex(data: bytes | memoryview) -> str:
    """A 32-byte blake2b of `data`, hex: what a file under state/cache is checked by when it is read
    (several times faster than `_sha256`; `_blake2` spares loading hashlib's OpenSSL)."""
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
    return str(blake2b(data, digest_size=32).hexdigest())
