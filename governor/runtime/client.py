"""The hook's fast path: hand the raw event to the warm server over a Unix socket.

Imports only `_socket` (no json, no socket module), so a hook that finds the server pays
little more than the interpreter's start. When no server answers it returns None, the hook
decides in-process (governor.runtime.runner), and a server is started in the background for the
next call. A server built from other code answers RETRY and exits; the hook then decides
itself and the next call starts a current server.

Wire format (one request per connection):
  request  "MG1 <harness> <fingerprint> <env-bytes> <body-bytes>\\n" env body
           env = NUL-separated KEY=VALUE, the hook's environment
  response "OK <stdout-bytes> <stderr-bytes>\\n" stdout stderr  |  "RETRY <reason>\\n"
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

PROTOCOL = b"MG1"
SOCKET_NAME = "governor.sock"
DISABLED_NAME = "disabled"  # present while the policy says runtime.warm_server: off
TIMEOUT = 5.0  # beyond the ledger's busy timeout; under the hook timeout the installer sets
SPAWN_BACKOFF = 30.0
WARM_PROJECT = "MEMORY_GOVERNOR_WARM_PROJECT"  # the project whose policy unit a new server loads first  # seconds between attempts to start a server

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NOT_CODE = frozenset(("__pycache__", "rules", "schemas"))


def fingerprint() -> bytes:
    """Which code this is: the newest source file of the package. A server from other code retires."""
    newest = 0
    folders = [_PACKAGE]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.endswith(".py"):
                        newest = max(newest, entry.stat().st_mtime_ns)
                    elif entry.name not in _NOT_CODE and "." not in entry.name and entry.is_dir():
                        folders.append(entry.path)
        except OSError:
            continue
    from governor import __version__

    return f"{__version__}+{newest}".encode()


def run_dir(env: Mapping[str, str]) -> str:
    from governor.state import state_dir

    return os.path.join(state_dir(env), "run")


def describe(env: Mapping[str, str], project: str | None) -> dict[str, str]:
    """What a client that speaks this wire from inside its harness (OpenCode's plugin) learns once:
    the fingerprint to send, the socket, the state directory, and, for when no governor answers
    at all, the project's on_error and the compiled policy file it is kept in."""
    from governor.state import state_dir

    state = state_dir(env)
    out = {"protocol": PROTOCOL.decode(), "fingerprint": fingerprint().decode(), "state": state,
           "socket": os.path.join(run_dir(env), SOCKET_NAME)}  # fmt: skip
    try:
        from governor.policy import compiled
        from governor.policy.sources import Sources

        policy, _ = compiled.load(env, project, state)
        out["on_error"] = policy.on_error
        out["policy"] = compiled.cache_paths(state, Sources(env, project))[0]
    except Exception:
        pass  # no policy to read: the client's own default (closed) stands
    return out


def ask(harness: str, raw: bytes, env: Mapping[str, str]) -> tuple[bytes, bytes] | None:
    """The server's answer (stdout, stderr), or None when the hook must decide itself."""
    folder = run_dir(env)
    if not os.path.exists(os.path.join(folder, SOCKET_NAME)):
        if not os.path.exists(os.path.join(folder, DISABLED_NAME)):
            start_server(env, folder)
        return None
    import _socket

    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    conn.settimeout(TIMEOUT)
    try:
        _connect(conn, folder)
        # The hook's whole environment: a decision reads it as the hook process would (the
        # harness's own variables included); the socket is the owner's alone.
        blob = b"\0".join(f"{k}={v}".encode("utf-8", "surrogateescape") for k, v in env.items() if "\0" not in v)
        head = b"%s %s %s %d %d\n" % (PROTOCOL, harness.encode(), fingerprint(), len(blob), len(raw))
        conn.sendall(head + blob + raw)
        conn.shutdown(_socket.SHUT_WR)
        chunks = []
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        start_server(env, folder)  # a stale socket: nobody is listening
        return None
    finally:
        conn.close()
    reply = b"".join(chunks)
    line, _, rest = reply.partition(b"\n")
    parts = line.split()
    if len(parts) != 3 or parts[0] != b"OK":
        return None
    out_len, err_len = int(parts[1]), int(parts[2])
    if len(rest) != out_len + err_len:
        return None
    return rest[:out_len], rest[out_len:]


def _connect(conn: object, folder: str) -> None:
    """Connect by a relative name: a socket path is limited to ~100 bytes, a state dir is not."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        conn.connect(SOCKET_NAME)  # type: ignore[attr-defined]
    finally:
        os.chdir(here)


def start_server(env: Mapping[str, str], folder: str) -> None:
    """Start the warm server in the background, at most once per SPAWN_BACKOFF.

    It runs isolated from the user's project and environment: `python -I` (no PYTHONPATH, no
    user site-packages, no working directory on sys.path) on this package's own entry file,
    with the run directory as its working directory, so no `governor/` or `hooks/` package
    of a project, and nothing on the user's path, is ever imported by it."""
    import sys
    import time

    from governor.state import ensure_dir

    try:
        ensure_dir(folder)
        stamp = os.path.join(folder, "spawned")
        try:
            if time.time() - os.stat(stamp).st_mtime < SPAWN_BACKOFF:
                return
        except FileNotFoundError:
            pass
        with open(stamp, "w") as handle:
            handle.write(str(os.getpid()))
        python = sys.executable
        args = [python, "-I", os.path.join(os.path.dirname(os.path.abspath(__file__)), "entry.py"), "--serve"]
        child_env = {**env, WARM_PROJECT: os.getcwd()}
        pid = os.fork()
        if pid == 0:  # the child: detach from the hook's pipes, session and folder, then become the server
            try:
                os.setsid()
                os.chdir(folder)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.execve(python, args, child_env)
            finally:
                os._exit(0)
    except OSError:
        pass  # no server this time; the hook decides in-process either way
