"""A real redis-server (Debian's package) on a free loopback port, for the tests of the Redis ledger.

Started with `--save '' --appendonly no` (or append-only, for the persistence test) and a temp
`--dir`; never the system service the package may have started on 6379. Missing redis-server or
redis-py: the tests skip with the reason, and fail under CI=true (scripts/test.sh installs both).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest


def require() -> str:
    """The redis-server binary, with redis-py importable; else skip (fail under CI=true)."""
    binary = shutil.which("redis-server")
    try:
        import redis  # noqa: F401
    except ImportError:
        binary = None
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server and redis-py are required in CI (scripts/test.sh installs them)")
        pytest.skip("redis-server or redis-py is not installed (apt-get install redis-server; pip install redis)")
    return binary


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One redis-server process; `stop()` and `start()` again keep its port and its directory."""

    def __init__(self, folder: Path, appendonly: bool = False, password: str | None = None) -> None:
        self.binary = require()
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.appendonly = appendonly
        self.password = password
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f"default:{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--dir", str(self.folder),
                "--appendonly", "yes" if self.appendonly else "no", "--logfile", str(self.folder / "redis.log")]  # fmt: skip
        if self.appendonly:
            args += ["--appendfsync", "always"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited {self.proc.returncode}: {self.log()[-500:]}")
            try:
                if self.client().ping():
                    return self
            except Exception:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, decode_responses=True,
                           socket_timeout=5)  # fmt: skip

    def stop(self, kill: bool = False) -> None:
        """Stop it: SIGKILL (nothing flushed on the way out) or SIGTERM."""
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        self.proc.wait(timeout=20)
        self.proc = None

    def log(self) -> str:
        path = self.folder / "redis.log"
        return path.read_text(errors="replace") if path.exists() else ""


class Relay:
    """A loopback TCP relay to `port` that delays each chunk it forwards by `delay` seconds, each way:
    a slow link between a host and its Redis."""

    def __init__(self, port: int, delay: float) -> None:
        self.target = port
        self.delay = delay
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = int(self.listener.getsockname()[1])
        self.closing = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            far = socket.create_connection(("127.0.0.1", self.target))
            for source, sink in ((near, far), (far, near)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                chunk = source.recv(65536)
                if not chunk:
                    break
                time.sleep(self.delay)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closing.set()
        self.listener.close()
