"""What the managed e2e tests share: a user of their own and a private /etc.

A managed install writes machine-wide files, so it never reaches the machine's /etc: each
command runs in a private mount namespace (`unshare -m`) with an overlay over /etc whose upper
folder is the test's, and one over /root (the checkout's interpreter and the e2e cache live
there) that only opens it to traversal. The user (`mgmanaged<pid>`, one per test process: xdist
runs tests side by side) is made for the test and removed after it, with everything it wrote.
Needs root, unshare, setpriv and useradd: skipped without them (failed under CI=true).
"""

from __future__ import annotations

import base64
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from npm import unavailable
from sandbox import PYTHON

USER_PREFIX = "mgmanaged"


def user_name() -> str:
    return f"{USER_PREFIX}{os.getpid()}"


def remove_stale_users() -> None:
    """Users a run killed before its cleanup left behind: those whose test process is gone."""
    for entry in pwd.getpwall():
        pid = entry.pw_name.removeprefix(USER_PREFIX)
        if entry.pw_name.startswith(USER_PREFIX) and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            subprocess.run(["userdel", "-r", entry.pw_name], capture_output=True)


def prerequisites() -> None:
    if os.geteuid() != 0:
        unavailable("the managed install needs root (it writes /etc, inside a private mount namespace)")
    for program in ("unshare", "setpriv", "useradd", "userdel", "mount"):
        if shutil.which(program) is None:
            unavailable(
                f"{program} not found: the managed e2e test runs the binary as another user in a mount namespace"
            )
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        unavailable(f"no private mount namespace here (unshare -m: {probe.stderr.strip()})")


def namespaced(layers: Path, user: pwd.struct_passwd, args: Sequence[str], as_user: bool) -> list[str]:
    """`args` in a private mount namespace whose /etc and /root are the test's overlays."""
    mounts = " && ".join(
        f"mount -t overlay overlay -o lowerdir=/{d},upperdir={layers}/{d}-up,workdir={layers}/{d}-work /{d}"
        for d in ("etc", "root")
    )
    drop = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--"]
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", f'{mounts} && exec "$@"', "sh",
            *(drop if as_user else []), *args]  # fmt: skip


def own(tmp: Path, user: pwd.struct_passwd) -> None:
    """What the test wrote as root under `tmp`, the user's own."""
    for path in [tmp, *tmp.rglob("*")]:
        try:
            os.lchown(path, user.pw_uid, user.pw_gid)
        except FileNotFoundError:  # gone since the walk: the ledger's -shm, when its last connection closed
            pass


@contextmanager
def user_and_layers() -> Iterator[tuple[Path, Path, str]]:
    """(the user's folder, the overlay layers, the user's name), all removed after."""
    prerequisites()
    remove_stale_users()
    user = user_name()
    subprocess.run(["userdel", "-r", user], capture_output=True)  # this process's, from a test killed mid-way
    user_tmp = Path(tempfile.mkdtemp(prefix="mg-managed-user-"))
    layers = Path(tempfile.mkdtemp(prefix="mg-managed-layers-"))
    try:
        for d in ("etc-up", "etc-work", "root-up", "root-work"):
            (layers / d).mkdir()
        os.chmod(layers / "etc-up", 0o755)
        os.chmod(layers / "root-up", 0o711)  # /root: traversable (the interpreter, the e2e cache), not listable
        subprocess.run(["useradd", "-M", "-d", str(user_tmp / "home"), "-s", "/bin/sh", user], check=True,
                       capture_output=True)  # fmt: skip
        os.chmod(user_tmp, 0o755)
        yield user_tmp, layers, user
    finally:
        subprocess.run(["userdel", "-r", user], capture_output=True)
        shutil.rmtree(user_tmp, ignore_errors=True)
        shutil.rmtree(layers, ignore_errors=True)


class Service:
    """The decision service of a managed install with the wall (the default of `install ... --scope
    managed`), run as the service's own user in the test's namespace (its /etc: the user `install` made there). Its socket
    and state are in the test's layers folder, not the machine's /run and /var/lib: service.json is
    pointed there after the install."""

    def __init__(self, layers: Path, user: pwd.struct_passwd, python: str) -> None:
        self.layers, self.user, self.python = layers, user, python
        self.state = layers / "service-state"
        self.run_dir = layers / "run"
        self.socket = self.run_dir / "governor.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def point(self) -> None:
        import json

        path = self.layers / "etc-up" / "memory-governor" / "service.json"
        written = json.loads(path.read_text())
        assert written["socket"] == "/run/memory-governor/governor.sock" and written["user"] == "memory-governor"
        path.write_text(json.dumps({**written, "socket": str(self.socket)}))
        os.chmod(self.layers, 0o711)  # the user's hooks reach the socket's folder through it

    def start(self) -> None:
        import time

        command = [self.python, "-I", "-m", "governor", "service", "run", "--state", str(self.state), "--run-dir",
                   str(self.run_dir)]  # fmt: skip
        self.proc = subprocess.Popen(namespaced(self.layers, self.user, command, False), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd="/")  # fmt: skip
        deadline = time.monotonic() + 60
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the decision service did not start: {self.proc.stderr.read()!r}")  # type: ignore[union-attr]
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None


class WalledRedis:
    """The ledger's Redis as the wall wants it: its default user needs a password only the
    administrator has, and the decision service's URL names the governor's own ACL user
    (governor.engine.redis_access.ACL_RULES), kept in environment.json where no user reads it.
    `attack` is what the model's shell tries on it: read the URL, then, with no credentials, one
    RESP command per connection (CLIENT PAUSE, CONFIG SET requirepass and maxmemory, CLIENT KILL,
    a forged policy under mg:pp:, FLUSHALL, SHUTDOWN), each reply printed."""

    COMMANDS = (("CLIENT", "PAUSE", "20000", "ALL"), ("CONFIG", "SET", "requirepass", "x"),
                ("CONFIG", "SET", "maxmemory", "1"), ("CLIENT", "KILL", "TYPE", "normal"),
                ("HSET", "mg:pp:project", "policy", "version: 1"), ("FLUSHALL",), ("SHUTDOWN", "NOSAVE"))  # fmt: skip

    def __init__(self, folder: Path) -> None:
        import secrets

        from tests.redis_server import RedisServer

        self.server = RedisServer(folder, password=secrets.token_hex(12))
        self.secret = secrets.token_hex(12)

    def start(self) -> None:
        from governor.engine.redis_access import ACL_RULES

        self.server.start()
        rules = ACL_RULES.split()
        self.server.client().execute_command("ACL", "SETUSER", "memory-governor", "on", f">{self.secret}", *rules)

    @property
    def url(self) -> str:
        return f"redis://memory-governor:{self.secret}@127.0.0.1:{self.server.port}/0"

    def attack(self, python: str) -> str:
        """One shell command, base64-encoded (the routes read no decoded program): the URL read, then
        the commands sent (`python`: an interpreter the user runs), then `done`."""
        program = (
            "import socket\n"
            f"for c in {self.COMMANDS!r}:\n"
            f"    s = socket.create_connection(('127.0.0.1', {self.server.port}), 5)\n"
            "    s.sendall(('*%d\\r\\n' % len(c) + ''.join('$%d\\r\\n%s\\r\\n' % (len(a), a) for a in c)).encode())\n"
            "    print('REDIS', c[0], c[1] if len(c) > 1 else '', '->', s.recv(200).split(b'\\r\\n')[0].decode())\n"
            "    s.close()\n"
        )
        encoded = base64.b64encode(program.encode()).decode()
        script = "\n".join(["cat /etc/memory-governor/environment.json 2>/dev/null | grep -q memory-governor: && "
                            "echo READ-URL", f"echo {encoded} | base64 -d | {python} -I -", "echo done"])  # fmt: skip
        return f"echo {base64.b64encode(script.encode()).decode()} | base64 -d | sh"

    def assert_held(self, output: str) -> None:
        """Every command refused for want of credentials, the URL unread, and the Redis as it was."""
        assert output.strip().endswith("done"), output
        replies = [line for line in output.splitlines() if line.startswith("REDIS ")]
        assert len(replies) == len(self.COMMANDS) and all("-> -NOAUTH" in line for line in replies), output
        assert "READ-URL" not in output, output
        admin = self.server.client()
        assert admin.ping() and admin.config_get("maxmemory") == {"maxmemory": "0"}
        assert admin.config_get("requirepass")["requirepass"] == self.server.password
        assert not admin.exists("mg:pp:project")

    def ledger_keys(self) -> list[str]:
        return list(self.server.client().scan_iter("mg:s:*"))

    def stop(self) -> None:
        self.server.stop()


def policy_on_error(folder: Path, on_error: str) -> str:
    """A managed policy (`install --policy`) that is the shipped one but for `on_error`: the wall's
    tests hold under either, since nothing the model can cause opens the gate."""
    path = folder / f"policy-on-error-{on_error}.yaml"
    path.write_text(f"version: 1\non_error: {on_error}\n")
    return str(path)


def capped(calls: list[dict], runs: int) -> bool:
    """Did each of `runs` runs (in order) reach the memory server with two searches, each clamped
    to `limit: 3`? The later of two parallel searches asks 3 more when the first's hits reached the
    context before it was decided (they are then named in a line, so its slots go to new ones:
    governor.engine.delivery.shown_hits), which the harness's timing decides."""
    limits = [c["arguments"]["limit"] for c in calls]
    pairs = [sorted(limits[i : i + 2]) for i in range(0, len(limits), 2)]
    return len(limits) == 2 * runs and all(pair in ([3, 3], [3, 6]) for pair in pairs)


@contextmanager
def behind_the_wall(managed: Any, on_error: str, *install: str) -> Iterator[Service]:
    """`managed`'s install with the wall (`install`: more of its arguments), the managed policy the
    shipped one but for `on_error`, and its decision service started; stopped after."""
    managed.install("--no-service-start", "--policy", policy_on_error(managed.layers, on_error), *install, wall=True)
    assert f"on_error: {on_error}" in (managed.layers / "etc-up" / "memory-governor" / "policy.yaml").read_text()
    wall = Service(managed.layers, managed.user, PYTHON)
    wall.point()
    wall.start()
    try:
        yield wall
    finally:
        wall.stop()


@contextmanager
def behind_the_wall_on_redis(managed: Any, on_error: str) -> Iterator[tuple[WalledRedis, Service]]:
    """behind_the_wall, its ledger on a WalledRedis; both stopped after."""
    redis = WalledRedis(managed.layers / "redis")
    redis.start()
    try:
        with behind_the_wall(managed, on_error, "--ledger-url", redis.url) as wall:
            yield redis, wall
    finally:
        redis.stop()
