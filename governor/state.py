"""The state directory: the one place memory-governor writes (ledger, compiled policy, socket).

Hot path: standard library only, no `typing`.
"""

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

URL_VARIABLE = "MEMORY_GOVERNOR_LEDGER_URL"  # set: the ledger is the Redis at that URL; unset: the SQLite file here


def state_dir(env: "Mapping[str, str]") -> str:
    """MEMORY_GOVERNOR_STATE_DIR, else $XDG_STATE_HOME/memory-governor, else ~/.local/state/..."""
    explicit = env.get("MEMORY_GOVERNOR_STATE_DIR")
    if explicit:
        return os.path.abspath(explicit)
    xdg = env.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "memory-governor")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".local", "state", "memory-governor")


def default_state_dir(env: "Mapping[str, str]") -> str:
    """Where the state directory is when MEMORY_GOVERNOR_STATE_DIR does not move it: acceptance
    records are kept here too, so a state directory pointed somewhere new does not start over."""
    return state_dir({k: v for k, v in env.items() if k != "MEMORY_GOVERNOR_STATE_DIR"})


def cache_dir(env: "Mapping[str, str]") -> str:
    """What can be rebuilt from elsewhere (the tokenizer table governor.engine.bpe reads)."""
    return os.path.join(state_dir(env), "cache")


_REGULAR = 0o100000  # S_IFREG (no `stat` import on the hot path)
_KIND = 0o170000  # S_IFMT
# Every state file is opened so: a symbolic link in its place is not followed, a FIFO or a device
# planted there answers at once instead of blocking the hook, and the descriptor is not inherited.
SAFE_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class NotRegular(OSError):
    """A path the governor reads or writes is there, but is no regular file (a folder, a FIFO, a
    device, a socket): another process put it there."""


def open_regular(path: str, flags: int = os.O_RDONLY, mode: int = 0o600, follow: bool = False) -> int:
    """A descriptor for the regular file at `path` (SAFE_FLAGS added to `flags`); NotRegular for
    anything else there, OSError as os.open raises it (ELOOP for a link). `follow`: a link is
    followed (a file the user names, such as a policy file, may be one), never waited on either."""
    fd = os.open(path, flags | (SAFE_FLAGS & ~getattr(os, "O_NOFOLLOW", 0) if follow else SAFE_FLAGS), mode)
    try:
        kind = os.fstat(fd).st_mode & _KIND
    except BaseException:
        os.close(fd)
        raise
    if kind != _REGULAR:
        os.close(fd)
        raise NotRegular(22, "not a regular file", path)
    return fd


def read_regular(path: str, limit: int = -1, follow: bool = False) -> bytes:
    """The bytes of the regular file at `path` (at most `limit`, when given), opened as open_regular
    opens it: a link (unless `follow`), a FIFO or a folder there raises OSError, never blocks."""
    fd = open_regular(path, follow=follow)
    try:
        chunks = []
        left = limit
        while left != 0:
            chunk = os.read(fd, 1 << 20 if left < 0 else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left = left - len(chunk) if left > 0 else left
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_regular(path: str) -> None:
    """NotRegular when something other than a regular file is at `path` (a link included); nothing
    when nothing is there. For files a library opens itself (SQLite's)."""
    try:
        kind = os.lstat(path).st_mode & _KIND
    except FileNotFoundError:
        return
    if kind != _REGULAR:
        raise NotRegular(22, "not a regular file", path)


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


OPENSSL_FROM = 1 << 20  # bytes from which OpenSSL's sha256 (~10x faster) is worth loading hashlib


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data`, hex: what the state directory keys files and ledger rows by. From the
    interpreter's own `_sha256` where it has one (hashlib loads OpenSSL: a few ms of a hook process),
    and from OpenSSL's for a large input (a 60 MB result: 0.06 s, where `_sha256` takes ~0.5 s)."""
    if len(data) >= OPENSSL_FROM:
        import hashlib

        return hashlib.sha256(data).hexdigest()
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
