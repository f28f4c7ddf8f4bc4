"""What the managed e2e tests share: a user of their own and a private /etc.

A managed install writes machine-wide files, so it never reaches the machine's /etc: each
command runs in a private mount namespace (`unshare -m`) with an overlay over /etc whose upper
folder is the test's, and one over /root (the checkout's interpreter and the e2e cache live
there) that only opens it to traversal. The user (`mgmanaged<pid>`, one per test process: xdist
runs tests side by side) is made for the test and removed after it, with everything it wrote.
Needs root, unshare, setpriv and useradd: skipped without them (failed under CI=true).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from npm import unavailable

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
