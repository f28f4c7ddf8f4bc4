"""The hook's fast path: hand the raw event to the warm server over a Unix socket.

Imports only `_socket` (no json, no socket module), so a hook that finds the server pays
little more than the interpreter's start. When no server answers it returns None, the hook
decides in-process (governor.runtime.runner), and a server is started in the background for the
next call. A server built from other code answers RETRY and exits; the hook then decides
itself and the next call starts a current server.

Whoever listens on the socket is verified before it is told anything (`stranger`): "nothing to
say" (`OK 0 0`) is a reply the real server gives to every call within limits, so the reply
cannot tell the server from a process that answers it to everything. The kernel names the
listening process (SO_PEERCRED: its pid and uid when it called listen()); /proc says what
program it runs: this interpreter's binary, exactly the command start_server runs (this
package's own entry file, `-I`, `--serve`), and the dynamic loader's variables this hook runs
with. Anything else, the same interpreter running `-c` code or another file that imports the
governor included, is a stranger: the hook decides in-process, and the user is told.

Wire format (one request per connection):
  request  "MG1 <harness> <stamp> <env-bytes> <body-bytes> [<cwd-bytes>]\\n" env body cwd
           env = NUL-separated KEY=VALUE, the hook's environment; cwd = the hook's working
           directory, which a relative folder in the event (`"cwd": "."`) is relative to
  response "OK <stdout-bytes> <stderr-bytes>\\n" stdout stderr  |  "RETRY <reason>\\n"
"""

import os

from governor import stamp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

PROTOCOL = b"MG1"
SOCKET_NAME = "governor.sock"
DISABLED_NAME = "disabled"  # present while the policy says runtime.warm_server: off
TIMEOUT = 5.0  # beyond the ledger's busy timeout; under the hook timeout the installer sets
SPAWN_BACKOFF = 30.0
WARM_PROJECT = "MEMORY_GOVERNOR_WARM_PROJECT"  # the project whose policy unit a new server loads first  # seconds between attempts to start a server

ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "entry.py")
STRANGER_NAME = "stranger"  # what was last found on the socket that is not the governor's server
stranger: str | None = None  # set by ask(): the notice for the user, when this hook met one
stranger_is_new = False  # and not met before (the error log says so once per stranger)


def run_dir(env: "Mapping[str, str]") -> str:
    from governor.state import state_dir

    return os.path.join(state_dir(env), "run")


def describe(env: "Mapping[str, str]", project: str | None) -> dict[str, str]:
    """What a client that speaks this wire from inside its harness (OpenCode's plugin) learns once:
    the fingerprint to send, the socket, the state directory, and, for when no governor answers
    at all, the project's on_error and the compiled policy file it is kept in."""
    from governor.state import state_dir

    state = state_dir(env)
    out = {"protocol": PROTOCOL.decode(), "fingerprint": stamp().decode(), "state": state,
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


def ask(harness: str, raw: bytes, env: "Mapping[str, str]") -> tuple[bytes, bytes] | None:
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
        other = _stranger(conn, env)
        if other is not None:  # told nothing, not even the environment
            conn.close()
            _met(folder, other)
            start_server(env, folder)  # a server binds the path anew; one already running does so itself
            return None
        # The hook's whole environment: a decision reads it as the hook process would (the
        # harness's own variables included); the socket is the owner's alone.
        blob = b"\0".join(f"{k}={v}".encode("utf-8", "surrogateescape") for k, v in env.items() if "\0" not in v)
        here = os.fsencode(os.getcwd())  # the server runs elsewhere: "." in the event is this folder
        head = b"%s %s %s %d %d %d\n" % (PROTOCOL, harness.encode(), stamp(), len(blob), len(raw), len(here))
        conn.sendall(head + blob + raw + here)
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
    return _reply(b"".join(chunks))[0]


SERVICE_SECONDS = 5.0  # a managed hook waits this long for the decision service; under the hook's watchdog


def ask_service(harness: str, raw: bytes, env: "Mapping[str, str]", where: "Mapping[str, object]"
                ) -> tuple[tuple[bytes, bytes] | None, str]:  # fmt: skip
    """The decision service's answer (stdout, stderr), or None and why there is none. Only a
    listener the kernel says runs as the service's uid (or root) is told anything."""
    import _socket
    import time

    path, uid = where.get("socket"), where.get("uid")
    if not isinstance(path, str) or not isinstance(uid, int):
        return None, "service.json names no socket and uid"
    deadline = time.monotonic() + SERVICE_SECONDS
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    conn.settimeout(SERVICE_SECONDS)
    try:
        _connect(conn, os.path.dirname(path), os.path.basename(path))
        option = getattr(_socket, "SO_PEERCRED", None)
        if option is not None:
            import sys

            cred = conn.getsockopt(_socket.SOL_SOCKET, option, 12)
            theirs = int.from_bytes(cred[4:8], sys.byteorder)
            if theirs not in (uid, 0):
                return None, f"the process on {path} runs as uid {theirs}, not the service's ({uid})"
        blob = b"\0".join(f"{k}={v}".encode("utf-8", "surrogateescape") for k, v in env.items() if "\0" not in v)
        here = os.fsencode(os.getcwd())
        head = b"%s %s %s %d %d %d\n" % (PROTOCOL, harness.encode(), stamp(), len(blob), len(raw), len(here))
        try:
            conn.sendall(head + blob + raw + here)
        except OSError:  # answered before it read the request (BUSY): the answer is still there to read
            pass
        chunks: list[bytes] = []
        while True:
            conn.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                chunk = conn.recv(65536)
            except OSError:
                if chunks:  # a reset after the answer (BUSY, closed with the request unread): it is whole
                    break
                raise
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as err:
        return None, f"{path}: {err.strerror or type(err).__name__}"
    finally:
        conn.close()
    return _reply(b"".join(chunks))


def _reply(reply: bytes) -> tuple[tuple[bytes, bytes] | None, str]:
    """A server's reply read: the answer, or None and what the server said instead."""
    line, _, rest = reply.partition(b"\n")
    parts = line.split()
    if len(parts) != 3 or parts[0] != b"OK" or not parts[1].isdigit() or not parts[2].isdigit():
        return None, line[:200].decode("utf-8", "backslashreplace") or "no reply"
    out_len, err_len = int(parts[1]), int(parts[2])
    if len(rest) != out_len + err_len:
        return None, "a short reply"
    return (rest[:out_len], rest[out_len:]), ""


def server_command() -> list[str]:
    """The warm server's command line: this interpreter, isolated, on this package's entry file.
    A hook trusts a server only when it runs exactly this (an idle timeout may follow)."""
    import sys

    return [sys.executable, "-I", ENTRY, "--serve"]


_LOADER = (b"LD_",)  # the dynamic loader's variables (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH) run code too


def _stranger(conn: object, env: "Mapping[str, str]") -> str | None:
    """None when the listening process is this governor's own server; else what it is, for the user.

    Where the platform gives no peer credentials (no SO_PEERCRED: macOS, the BSDs) the socket is
    trusted as before, for being in the owner's own 0700 folder (docs/reliability.md)."""
    import _socket
    import sys

    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    cred = conn.getsockopt(_socket.SOL_SOCKET, option, 12)  # type: ignore[attr-defined]  # struct ucred
    pid, uid = int.from_bytes(cred[0:4], sys.byteorder), int.from_bytes(cred[4:8], sys.byteorder)
    if uid != os.geteuid():
        return f"a process of uid {uid}"
    if pid <= 0:
        return "a process outside this hook's view (another pid namespace)"
    proc = f"/proc/{pid}/"
    try:
        exe, mine = os.stat(proc + "exe"), os.stat(sys.executable)
        argv = _read(proc + "cmdline").split(b"\0")[:-1]
        loader = {item for item in _read(proc + "environ").split(b"\0") if item.startswith(_LOADER)}
    except OSError as err:
        return f"pid {pid}, which cannot be inspected ({err.strerror})"
    expected = [os.fsencode(word) for word in server_command()]
    said = b" ".join(argv[:4]).decode("utf-8", "backslashreplace")[:300]
    if (exe.st_dev, exe.st_ino) != (mine.st_dev, mine.st_ino):
        return f"pid {pid}, another program: {said}"
    if argv[:1] != expected[:1] and not _same_interpreter(argv[0], exe):
        return f"pid {pid}, this interpreter under another name: {said}"
    if argv[1:4] != expected[1:] or len(argv) > 5 or (len(argv) == 5 and not argv[4].replace(b".", b"", 1).isdigit()):
        return f"pid {pid}, not the governor's server: {said}"
    ours = {f"{k}={v}".encode("utf-8", "surrogateescape") for k, v in env.items() if k.startswith("LD_")}
    if loader != ours:
        names = sorted(item.partition(b"=")[0].decode("utf-8", "backslashreplace") for item in loader ^ ours)
        return f"pid {pid}, the governor's server started with other loader variables ({', '.join(names)})"
    return None


def _same_interpreter(name: bytes, exe: os.stat_result) -> bool:
    """Another spelling of this interpreter: the same binary, beside sys.executable (the same venv)."""
    import sys

    try:
        found = os.stat(name)
    except OSError:
        return False
    here = os.path.dirname(os.fsencode(sys.executable))
    return os.path.dirname(name) == here and (found.st_dev, found.st_ino) == (exe.st_dev, exe.st_ino)


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            if len(chunks) > 64:  # 4 MB: more than any command line and environment
                break
        return b"".join(chunks)
    finally:
        os.close(fd)


def _met(folder: str, what: str) -> None:
    """Remember a stranger for the user (once per session, runtime.runner) and for the error log
    (once per stranger: runtime.hook)."""
    global stranger, stranger_is_new
    stranger = (
        f"memory-governor: the process listening on the warm server's socket is not the governor's own server "
        f"({what}); this hook decided in its own process, as every hook will while it is there. Something "
        f"started it in your account: look at it before trusting this session's memory calls."
    )
    from governor.state import read_regular, write_atomic

    mark = os.path.join(folder, STRANGER_NAME)
    said = what.encode("utf-8", "backslashreplace")
    try:
        if read_regular(mark, 65536) == said:
            return
    except OSError:
        pass
    stranger_is_new = True
    try:
        write_atomic(mark, said)
    except OSError:
        pass


def _connect(conn: object, folder: str, name: str = SOCKET_NAME) -> None:
    """Connect by a relative name: a socket path is limited to ~100 bytes, a state dir is not."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        conn.connect(name)  # type: ignore[attr-defined]
    finally:
        os.chdir(here)


def start_server(env: "Mapping[str, str]", folder: str) -> None:
    """Start the warm server in the background, at most once per SPAWN_BACKOFF.

    It runs isolated from the user's project and environment: `python -I` (no PYTHONPATH, no
    user site-packages, no working directory on sys.path) on this package's own entry file,
    with the run directory as its working directory, so no `governor/` or `hooks/` package
    of a project, and nothing on the user's path, is ever imported by it."""
    import sys
    import time

    from governor.state import ensure_dir, open_regular

    try:
        ensure_dir(folder)
        spawned = os.path.join(folder, "spawned")
        try:
            if time.time() - os.stat(spawned).st_mtime < SPAWN_BACKOFF:
                return
        except FileNotFoundError:
            pass
        fd = open_regular(spawned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
        python = sys.executable
        args = server_command()
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
