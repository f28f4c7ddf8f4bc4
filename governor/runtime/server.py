"""The warm server: one local process that answers hooks, with the tokenizer already loaded.

It runs the same `governor.runtime.runner.respond` a hook would run in-process, so both decide
alike; the ledger still serialises every decision, so hooks deciding in-process alongside
it stay exact. One server per state directory (a lock file), a socket the owner alone can
reach (the state directory is 0700), an idle timeout, and it retires when the installed
code changes: a request with another stamp (governor.stamp: an install or an upgrade) gets RETRY,
and a file edited in place is found by the server itself, which reads its package's fingerprint
again after an answer at most every RECHECK_SECONDS (never while a hook waits).

With MEMORY_GOVERNOR_ENABLE_TELEMETRY=1 in its own environment or in a hook's, it also sends the
audit trail to the team's collector (governor.runtime.telemetry), on threads of its own, after
the answer is written: a collector that is down or slow never delays one.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

from governor import fingerprint, stamp
from governor.runtime.client import DISABLED_NAME, PROTOCOL, SOCKET_NAME, WARM_PROJECT, run_dir
from governor.runtime.runner import respond
from governor.state import ensure_dir, open_regular

MAX_REQUEST = 128 * 1024 * 1024
CONSOLE_BYTES = 16 * 1024 * 1024  # the console exporter's file (telemetry), at most about this, kept
# At its stop, how long the server waits for its exporter to start (the SDK's import) and to send
# what it read; `serve --stop` waits for both. What is not sent by then, doctor counts.
EXPORTER_START_SECONDS = 10.0
EXPORTER_STOP_SECONDS = 5.0
RECHECK_SECONDS = 2.0  # how often, at most, the server looks for its own code edited in place


class Server:
    """The warm server of one user's state directory (runtime.service.Service: the managed
    install's decision service, which answers every user)."""

    socket_mode = 0o600  # the owner's alone
    retires = True  # a request from other code, or the policy turning it off, stops it

    def __init__(self, env: dict[str, str], idle_exit: float, folder: str | None = None) -> None:
        self.env = env
        self.folder = ensure_dir(folder or run_dir(env))
        self.idle_exit = idle_exit
        self.stamp = stamp()
        self.fingerprint = fingerprint()
        self.checked = time.monotonic()
        self.checking = threading.Lock()
        self.last_request = time.monotonic()
        self.stopping = threading.Event()
        self.listener: socket.socket | None = None
        self.bound: tuple[int, int] | None = None  # the socket file this server made (device, inode)
        self.lock_handle: Any = None
        self.telemetry: Any = None  # the exporter, once a hook (or this server's own environment) turns it on
        self.telemetry_asked = False
        self.telemetry_lock = threading.Lock()
        self.telemetry_starting: threading.Thread | None = None

    def claim(self) -> bool:
        """Take the one-server-per-state-directory lock; False if another server holds it."""
        fd = open_regular(os.path.join(self.folder, "server.lock"), os.O_RDWR | os.O_CREAT)
        self.lock_handle = open(fd, "r+")  # noqa: SIM115 - held for life
        try:
            fcntl.flock(self.lock_handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.lock_handle.close()
            return False
        self.lock_handle.seek(0)
        self.lock_handle.truncate()
        self.lock_handle.write(str(os.getpid()))
        self.lock_handle.flush()
        return True

    def bind(self) -> None:
        here = os.getcwd()
        os.chdir(self.folder)
        try:
            try:
                os.unlink(SOCKET_NAME)
            except FileNotFoundError:
                pass
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(SOCKET_NAME)
            os.chmod(SOCKET_NAME, self.socket_mode)
            listener.listen(128)
            listener.settimeout(1.0)
            made = os.stat(SOCKET_NAME)
        finally:
            os.chdir(here)
        self.listener = listener
        self.bound = (made.st_dev, made.st_ino)

    def still_bound(self) -> bool:
        """Is the socket's path still this server's? Another process may have put its own there
        (hooks refuse to talk to it: runtime.client); then this server binds the path anew."""
        try:
            now = os.stat(os.path.join(self.folder, SOCKET_NAME))
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == self.bound

    def warm(self) -> None:
        """Load the tokenizer of the shipped policy's unit, and the memory-need model, before the
        first request needs them; and the tokenizer table a hook deciding alone reads."""
        from governor.runtime.runner import warm_up

        warm_up(self.env, self.env.get(WARM_PROJECT) or os.getcwd())

    def serve(self) -> None:
        assert self.listener is not None
        threading.Thread(target=self.warm, daemon=True).start()
        self.export(self.env)
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                if time.monotonic() - self.last_request > self.idle_exit:
                    break
                if not self.still_bound():
                    self.listener.close()
                    self.bind()
                continue
            except OSError:
                break
            self.last_request = time.monotonic()
            self.dispatch(conn)
        self.close()

    def run(self) -> None:
        """Bind the socket and serve until idle or stopped (SIGTERM, SIGINT)."""
        self.bind()

        def stop(_signum: int, _frame: Any) -> None:
            self.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.serve()

    def dispatch(self, conn: socket.socket) -> None:
        """A connection accepted: answered on a thread of its own."""
        threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    read_seconds = 30.0  # a request that has not arrived whole in this is dropped, however it trickles
    max_request = MAX_REQUEST  # bytes of a request's environment, event and folder together; more is refused

    def handle(self, conn: socket.socket) -> None:
        try:
            until = time.monotonic() + self.read_seconds
            head, rest = _read_request(conn, until)
            parts = head.split()
            if len(parts) not in (5, 6) or parts[0] != PROTOCOL or not all(part.isdigit() for part in parts[3:]):
                conn.sendall(b"RETRY protocol\n")
                return
            harness, their_stamp = parts[1], parts[2]
            env_len, body_len, cwd_len = (int(part) for part in (*parts[3:], b"0")[:3])
            if self.stopping.is_set():  # retiring: the code changed, or the policy turned it off
                conn.sendall(b"RETRY retiring\n")
                return
            if their_stamp != self.stamp:
                conn.sendall(b"RETRY code-changed\n")
                if self.retires:
                    self.stopping.set()  # retire; the next hook starts a server with the new code
                return
            if env_len + body_len + cwd_len > self.max_request:
                conn.sendall(b"RETRY too-large\n")
                return
            rest = _read_exactly(conn, rest, env_len + body_len + cwd_len, until)
            env_blob, body, cwd = rest[:env_len], rest[env_len : env_len + body_len], rest[env_len + body_len :]
            if len(body) != body_len or len(cwd) != cwd_len:
                conn.sendall(b"RETRY short-request\n")
                return
            env: dict[str, str] = {}  # exactly the hook's own environment
            for item in env_blob.split(b"\0") if env_blob else []:
                name, _, value = item.decode("utf-8", "surrogateescape").partition("=")
                env[name] = value
            # A folder the event names relatively is the hook's, not this server's (the client sends
            # its own; OpenCode's plugin names absolute ones and sends none).
            uid, pid = peer(conn)
            outcome = self.decide(harness.decode(), body, env, os.fsdecode(cwd) if os.path.isabs(cwd) else None,
                                  uid, pid)  # fmt: skip
            out, err = outcome.stdout(), outcome.stderr()
            conn.sendall(b"OK %d %d\n" % (len(out), len(err)) + out + err)
            try:  # the answer is whole: the hook reads to the end of it, and need not wait for what follows
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            if not self.telemetry_asked:
                self.export(env)
            if self.retires and os.path.exists(os.path.join(self.folder, DISABLED_NAME)):
                self.stopping.set()  # the policy turned the warm server off
            self.recheck()
        except BaseException:  # respond() never raises; this is the socket's own failure
            try:
                conn.sendall(b"RETRY server-error\n")
            except OSError:
                pass
        finally:
            conn.close()

    def decide(self, harness: str, body: bytes, env: dict[str, str], cwd: str | None, uid: int | None,
               pid: int) -> Any:  # fmt: skip
        """One event, decided in the hook's own environment, for the user the kernel names."""
        return respond(harness, body, env, cwd=cwd, caller_uid=uid, caller_pid=pid)

    def recheck(self) -> None:
        """After an answer, at most every RECHECK_SECONDS: retire if a file of the package was
        edited in place since this server started (what the stamp a hook sends cannot see)."""
        now = time.monotonic()
        if now - self.checked < RECHECK_SECONDS or not self.checking.acquire(False):
            return
        try:
            self.checked = now
            if fingerprint() != self.fingerprint and self.retires:
                self.stopping.set()
        finally:
            self.checking.release()

    def export(self, env: dict[str, str]) -> None:
        """Start sending the audit trail, once, if `env` turns telemetry on (in the background: the
        SDK takes a while to import)."""
        from governor.runtime import telemetry

        if not telemetry.enabled(env):
            return
        with self.telemetry_lock:
            if self.telemetry_asked:
                return
            self.telemetry_asked = True
            self.telemetry_starting = threading.Thread(target=self._start_export, args=(env,), daemon=True)
        self.telemetry_starting.start()

    def _start_export(self, env: dict[str, str]) -> None:
        from governor.runtime import signals, telemetry
        from governor.state import state_dir

        state = state_dir(self.env)
        console = None
        try:
            if any("console" in chosen for chosen in signals.Settings(env).exporters.values()):
                path = os.path.join(
                    signals.folder(state), "console.log"
                )  # it has no terminal: a file beside the cursor
                if os.path.exists(path) and os.path.getsize(path) > CONSOLE_BYTES:
                    os.unlink(path)  # a debugging aid, not a store: each server starts it again past its size
                console = open(path, "a", encoding="utf-8")  # noqa: SIM115
            self.telemetry = telemetry.start(env, state, console=console, quiet=True)
        except Exception as err:
            signals.note(state, problem=f"the exporter did not start: {type(err).__name__}: {err}")

    def close(self) -> None:
        if self.listener is not None:  # first: a hook meanwhile decides in its own process, unkept
            self.listener.close()
            self.listener = None
            if self.still_bound():  # not another process's socket
                try:
                    os.unlink(os.path.join(self.folder, SOCKET_NAME))
                except OSError:
                    pass
        if self.telemetry_starting is not None:  # stopped as it started: what was decided is sent all the same
            self.telemetry_starting.join(EXPORTER_START_SECONDS)
        if self.telemetry is not None:
            self.telemetry.stop(EXPORTER_STOP_SECONDS)
            self.telemetry = None
        if self.lock_handle is not None:
            self.lock_handle.close()
            self.lock_handle = None


def peer(conn: socket.socket) -> tuple[int | None, int]:
    """(uid, pid) of the process at the other end, as the kernel says (SO_PEERCRED); where the
    platform does not say, (None, 0): the decision is this server's user's, and the caller has no lineage."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None, 0
    cred = conn.getsockopt(socket.SOL_SOCKET, option, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(cred[4:8], sys.byteorder), max(0, int.from_bytes(cred[0:4], sys.byteorder, signed=True))


def _until(conn: socket.socket, until: float) -> None:
    """The next read waits no later than `until` (monotonic): TimeoutError when it is past."""
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("the request did not arrive in time")
    conn.settimeout(left)


def _recv(conn: socket.socket, size: int, until: float) -> bytes:
    _until(conn, until)
    return conn.recv(size)


def _read_request(conn: socket.socket, until: float) -> tuple[bytes, bytes]:
    """The request's first line, and what arrived after it so far. The request is framed by the
    lengths that line declares: a client need not close its side to end it (Bun, which runs
    OpenCode's plugins, closes both sides when a socket is ended)."""
    data = b""
    while b"\n" not in data and len(data) < 4096:
        chunk = _recv(conn, 4096, until)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\n")
    return head, rest


def _read_exactly(conn: socket.socket, start: bytes, size: int, until: float) -> bytes:
    """`start` and what follows it, up to `size` bytes in all: fewer only when the client stops
    sending. Read into one buffer of that size (a request is held in memory once, not twice)."""
    if len(start) >= size:
        return start[:size]
    buffer = bytearray(size)
    buffer[: len(start)] = start
    view, got = memoryview(buffer), len(start)
    while got < size:
        _until(conn, until)
        n = conn.recv_into(view[got:], min(size - got, 1 << 16))
        if not n:
            break
        got += n
    view.release()
    del buffer[got:]
    return bytes(buffer)


def serve(env: dict[str, str], idle_exit: float) -> int:
    from governor.runtime.runner import keep_connections

    keep_connections()
    server = Server(env, idle_exit)
    if not server.claim():
        return 0  # another server already answers for this state directory
    server.run()
    return 0


def main(env: dict[str, str], idle: float | None = None) -> int:
    """Started by a hook (runtime/entry.py --serve), or `memory-governor serve` (which runs this
    same command, so hooks trust it): serve with `idle`, else the policy's idle timeout."""
    from governor import with_site_packages

    with_site_packages()
    if idle is None:
        idle = 1800.0
        try:
            from governor.policy import compiled
            from governor.state import state_dir

            policy, _ = compiled.load(env, env.get(WARM_PROJECT) or os.getcwd(), state_dir(env))
            idle = float(policy.data["runtime"]["idle_exit_seconds"])
        except Exception:
            pass  # no valid policy: serve anyway; each request reports the policy's problem itself
    return serve(env, idle)


def running_pid(env: dict[str, str]) -> int | None:
    """The pid of the server answering for this state directory, if one does."""
    path = os.path.join(run_dir(env), "server.lock")
    try:
        with open(open_regular(path)) as handle:
            probe = handle
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                text = handle.read().strip()
                return int(text) if text.isdigit() else -1
            fcntl.flock(probe.fileno(), fcntl.LOCK_UN)
            return None
    except OSError:
        return None
