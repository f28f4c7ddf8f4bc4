"""The decision service: under a managed install with the wall, every user's hooks ask it, and
nothing the model can do as the user reaches what it decides with.

It is the warm server (governor.runtime.server) run once for the machine, as a system user of its
own (USER), with:

  STATE   its state directory (ledger, notices, caches), 0700 and its own: no user can read or
          write it, so no user can delete, replace or block the ledger, or forge a grant in it
  RUN     the socket's folder, root-owned and writable by the service's group alone, so no user
          can put a socket of their own in its place (the hook also checks the listener's uid:
          runtime.client.ask_service)

Who asks is the kernel's word (SO_PEERCRED), never the request's: each session is the caller's
uid's own (runner.respond `scoped`), the window a call counts in is that uid's, and the policy is
the administrator's (the managed folder, governor.policy.managed): no user file, variable or
acceptance record moves it. Of the hook's environment a decision reads only what a harness sets
(the nesting marker, the session's folder); the state directory, the ledger's URL and telemetry
are the service's own. Each uid has at most PER_UID requests in hand and all of them TOTAL: past
that a request is answered BUSY at once (the hook refuses the governed call and says why), so one
user's flood cannot starve another's hooks, nor the service.

`memory-governor service run` starts it. Started as root it makes its folders, then becomes USER
(a systemd unit starts it so, and so can a container's init); started as USER it uses them as they are.
The managed hooks find it by CONFIG/service.json (policy.managed.SERVICE_NAME), which the install
writes, and ask it (runtime.client.ask_service).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from governor.harnesses.managed import CONFIG, remove_files
from governor.harnesses.settings import Change
from governor.policy.managed import SERVICE_NAME
from governor.runtime.server import Server

USER = "memory-governor"
STATE = "/var/lib/memory-governor"
RUN = "/run/memory-governor"
PER_UID = 4  # requests of one uid in hand at once
TOTAL = 64  # requests in hand at once
READ_SECONDS = 4.0  # a request that has not arrived whole in this is dropped (a held or trickled connection)
MAX_REQUEST = 65 * 1024 * 1024  # a hook's event (at most runtime.hook.MAX_INPUT, 64 MiB) and 1 MiB beside it


class Service(Server):
    socket_mode = 0o666  # every user's hook connects; the folder is what no user can write
    retires = False  # no request stops it: a user could send one
    read_seconds = READ_SECONDS
    max_request = MAX_REQUEST

    def __init__(self, config: str, state: str, run: str) -> None:
        from governor.policy import managed

        managed.enter(config)
        self.config = os.path.abspath(config)
        self.state = os.path.abspath(state)
        own = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "LANG", "LC_", "TZ"))}
        own.update({"MEMORY_GOVERNOR_STATE_DIR": self.state, "HOME": self.state})
        super().__init__(own, float("inf"), folder=run)
        self.in_hand: dict[int | None, int] = {}
        self.counting = threading.Lock()

    def dispatch(self, conn: Any) -> None:
        from governor.runtime.server import peer

        try:
            uid, _ = peer(conn)
        except OSError:
            conn.close()
            return
        with self.counting:
            busy = self.in_hand.get(uid, 0) >= PER_UID or sum(self.in_hand.values()) >= TOTAL
            if not busy:
                self.in_hand[uid] = self.in_hand.get(uid, 0) + 1
        if busy:
            try:
                conn.setblocking(False)
                conn.send(b"BUSY too many requests of this user in hand\n")
            except OSError:
                pass
            conn.close()
            return
        threading.Thread(target=self._handle_counted, args=(conn, uid), daemon=True).start()

    def _handle_counted(self, conn: Any, uid: int | None) -> None:
        try:
            self.handle(conn)
        finally:
            with self.counting:
                self.in_hand[uid] -= 1
                if not self.in_hand[uid]:
                    del self.in_hand[uid]

    def decide(self, harness: str, body: bytes, env: dict[str, str], cwd: str | None, uid: int | None,
               pid: int) -> Any:  # fmt: skip
        from governor.runtime.runner import respond

        if uid is None:  # no peer credentials on this platform: whose the call is cannot be known
            from governor.runtime.runner import Outcome

            refused = Outcome()
            refused.errors.append("memory-governor: the decision service cannot tell who asks on this platform")
            return refused
        return respond(harness, body, self.environment(env, uid), cwd=cwd, caller_uid=uid, caller_pid=pid,
                       scoped=True)  # fmt: skip

    def environment(self, hook_env: dict[str, str], uid: int) -> dict[str, str]:
        """What a decision for `uid` reads: the hook's environment as a managed hook keeps it (no
        variable of ours but the nesting marker, HOME the caller's own from the password database),
        with this service's state directory and the administrator's settings (the ledger's URL)."""
        from governor.policy import managed

        env = managed.environment(hook_env, self.config, uid=uid)
        env["MEMORY_GOVERNOR_STATE_DIR"] = self.state
        return env

    def export(self, env: dict[str, str]) -> None:
        """Telemetry only as the service's own environment says: a hook's cannot turn it on."""
        if env is self.env:
            super().export(env)


def prepare(state: str, run: str, user: str) -> None:
    """As root: the service's folders (its state 0700 and its own; the socket's root-owned, writable
    by its group alone), then this process becomes `user`. As anyone else: nothing (the folders are
    used as they are)."""
    if os.geteuid() != 0:
        return
    import pwd

    entry = pwd.getpwnam(user)
    os.makedirs(state, mode=0o700, exist_ok=True)
    os.chown(state, entry.pw_uid, entry.pw_gid)
    os.chmod(state, 0o700)
    os.makedirs(run, mode=0o775, exist_ok=True)
    os.chown(run, 0, entry.pw_gid)
    os.chmod(run, 0o775)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)


def run(config: str, state: str, run: str, user: str) -> int:
    """Serve until stopped (SIGTERM, SIGINT)."""
    from governor import with_site_packages
    from governor.runtime.runner import keep_connections

    prepare(state, run, user)
    os.umask(0o077)
    with_site_packages()
    keep_connections()
    service = Service(config, state, run)
    if not service.claim():
        raise SystemExit(f"memory-governor: a decision service already answers on {run}")
    service.run()
    return 0


# -- the wall: the decision service every managed hook asks (governor.runtime.service) ----------

UNIT = ("etc", "systemd", "system", "memory-governor.service")


def service_paths(root: str) -> dict[str, str]:
    """CONFIG/service.json (where the hooks find the service) and the systemd unit that starts it."""
    return {"service": os.path.join(root, *CONFIG, SERVICE_NAME), "unit": os.path.join(root, *UNIT)}


def service_command(config: str, user: str) -> list[str]:
    """The service's command: this root-owned environment's interpreter, isolated (`-I`)."""
    return [sys.executable, "-I", "-m", "governor", "service", "run", "--config", config, "--user", user]


def unit_text(config: str, user: str) -> str:
    import shlex

    return (
        "# memory-governor: the decision service every user's managed hooks ask (the wall).\n"
        "# Written by `memory-governor install <harness> --scope managed`.\n"
        "[Unit]\nDescription=memory-governor decision service\nAfter=network.target\n\n"
        f"[Service]\nExecStart={shlex.join(service_command(config, user))}\n"
        "Restart=always\nRestartSec=1\n\n[Install]\nWantedBy=multi-user.target\n"
    )


def service_user(name: str, create: bool, root: str = "/") -> Any:
    """The service's system user (its password entry); made (`useradd --system`) when `create` and
    missing. Under a staging prefix with its own etc/passwd (an image's tree), the user is that
    tree's. ValueError when it is not there to use."""
    import pwd
    import subprocess

    passwd = os.path.join(root, "etc", "passwd")
    if os.path.abspath(root) != "/" and os.path.isfile(passwd):
        return _tree_user(passwd, name)
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    if create:
        import time

        for _ in range(20):  # another useradd holding /etc's locks a moment: wait for it
            made = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", STATE,
                                   "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True)  # fmt: skip
            if made.returncode == 0 or "lock" not in made.stderr:
                break
            time.sleep(0.5)
        if made.returncode == 0:
            return pwd.getpwnam(name)
        raise ValueError(f"could not make the service's user {name}: {made.stderr.strip() or made.returncode}")
    raise ValueError(f"no user {name} on this machine for the decision service")


def _tree_user(passwd: str, name: str) -> Any:
    """`name`'s entry in a staging tree's etc/passwd (the uid the image's service will run as)."""
    import pwd

    with open(passwd, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.rstrip("\n").split(":")
            if len(fields) == 7 and fields[0] == name and fields[2].isdigit() and fields[3].isdigit():
                return pwd.struct_passwd((fields[0], fields[1], int(fields[2]), int(fields[3]), *fields[4:]))
    raise ValueError(f"no user {name} in {passwd} for the decision service")


def plan_service(root: str, user: Any) -> list[Any]:
    """service.json (the socket and the service's uid, for every hook) and the systemd unit."""
    from governor.harnesses.settings import json_text, read_json, read_text

    config = os.path.join(root, *CONFIG)
    paths = service_paths(root)
    before = read_json(paths["service"], "the service's settings") if os.path.exists(paths["service"]) else None
    after = {"socket": os.path.join(RUN, "governor.sock"), "uid": user.pw_uid, "user": user.pw_name}
    return [
        Change(paths["service"], before, after, "the managed hooks ask the decision service",
               "the service's settings as they are", json_text, backup=False),
        Change(paths["unit"], read_text(paths["unit"]), unit_text(config, user.pw_name), "the service's systemd unit",
               "the service's unit as it is", lambda t: t, backup=False),
    ]  # fmt: skip


def systemd_runs(root: str) -> bool:
    return root == "/" and os.path.isdir("/run/systemd/system")


def start_service(root: str, user: str, start: bool = True) -> str:
    """The unit enabled and (re)started where systemd runs (unless not `start`); else how to start
    the service. What was done, in words."""
    import shlex
    import subprocess

    if not start or not systemd_runs(root):
        config = os.path.join(root, *CONFIG)
        why = "not started (--no-service-start)" if not start else "no systemd here"
        return (f"{why}: start the decision service from the machine's init (systemctl enable --now "
                f"memory-governor where systemd runs), as root: {shlex.join(service_command(config, user))}")  # fmt: skip
    for args in (["daemon-reload"], ["enable", "memory-governor.service"], ["restart", "memory-governor.service"]):
        done = subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            return f"systemctl {' '.join(args)} failed: {done.stderr.strip()}"
    return "the decision service is enabled and started (systemd: memory-governor.service)"


def stop_service(root: str) -> list[str]:
    """The last managed install's uninstall, or an install with --no-service: the unit disabled and
    stopped where systemd runs, and service.json and the unit removed. The paths removed."""
    import subprocess

    paths = service_paths(root)
    if systemd_runs(root) and os.path.exists(paths["unit"]):
        subprocess.run(["systemctl", "disable", "--now", "memory-governor.service"], capture_output=True, timeout=60)
    return remove_files([paths["service"], paths["unit"]])


def keep_environment_from_users(where: dict[str, str], user: Any) -> None:
    """Under the wall only the service reads the administrator's environment (the Redis URL and its
    credentials): root's, readable by the service's group, by no one else."""
    if os.path.exists(where["environment"]):
        os.chown(where["environment"], 0, user.pw_gid)
        os.chmod(where["environment"], 0o640)


def give_environment_to_users(where: dict[str, str]) -> None:
    """The wall taken down (install --no-service): every user's hook reads the administrator's
    environment again, so it is root's and 0644 once more."""
    if os.path.exists(where["environment"]):
        os.chown(where["environment"], 0, 0)
        os.chmod(where["environment"], 0o644)


SEATBELT = (
    "the seatbelt tier: each user's hook decides with that user's own ledger, which a model running as "
    "the user can delete or write (its counts restart, a forged grant passes); the wall keeps the "
    "ledger where no user reaches"
)
WALL_FIX = "sudo memory-governor install <harness> --scope managed (the wall is its default)"


def service_checks(label: str, root: str) -> list[Any]:
    """Which tier a managed install is: under the wall the service answers on its socket as its own
    uid, and where systemd runs its unit is enabled; without it, the seatbelt (WARN) and how to
    put the wall up."""
    from governor.harnesses.checks import BAD, OK, WARN, Check
    from governor.runtime import client

    config = os.path.join(root, *CONFIG)
    from governor.policy.managed import service

    where = service(config)
    if where is None:
        return [Check(WARN, label, f"no decision service: {SEATBELT}", WALL_FIX)]
    fix = (
        f"start it: systemctl start memory-governor, or as root: {' '.join(service_command(config, 'memory-governor'))}"
    )
    checks = []
    if systemd_runs(root):
        import subprocess

        enabled = subprocess.run(["systemctl", "is-enabled", "memory-governor.service"], capture_output=True,
                                 text=True, timeout=30)  # fmt: skip
        if enabled.stdout.strip() != "enabled":
            checks.append(Check(BAD, label, f"memory-governor.service is {enabled.stdout.strip() or 'not installed'}: "
                                "the service will not start with the machine", "systemctl enable memory-governor"))  # fmt: skip
    checks += redis_checks(label, config)
    answer, why = client.ask_service("claude-code", b"{}", {}, where)
    if answer is None:
        checks.append(Check(BAD, label, f"the wall: the decision service does not answer ({why}): every "
                            "governed call is refused until it does", fix))  # fmt: skip
    else:
        answers = f"the wall: the decision service answers on {where.get('socket')} as uid {where.get('uid')}"
        checks.append(Check(OK, label, f"{answers}; every managed hook asks it"))
    return checks


def open_redis(url: str) -> str | None:
    """Behind the wall only the service holds the ledger's credentials; a Redis that answers a client
    with none lets any user's process (the model's shell) stop or rewrite every ledger on it. What
    such a client may do, in words; None when Redis refuses it (or cannot be asked)."""
    try:
        from governor.engine.redis_access import anyone_can

        return anyone_can(url)
    except (ImportError, OSError, ValueError):  # no redis-py, no answer, not a URL it reads
        return None


def redis_fix() -> str:
    return (
        "as the Redis administrator: a password for the default user (requirepass, or ACL SETUSER default "
        "off), and the governor's own user for the service (docs/teams.md, the ledger on Redis)"
    )


def redis_checks(label: str, config: str) -> list[Any]:
    """The ledger's Redis behind the wall answers no client without credentials (asked only where
    this process can read the administrator's environment: root's doctor)."""
    from governor.harnesses.checks import BAD, Check
    from governor.policy import managed

    url = managed.settings(config).get(managed.LEDGER_URL)
    power = open_redis(url) if url else None
    if power is None:
        return []
    return [Check(BAD, label, f"the ledger's Redis lets a client with no credentials {power}: any user's process "
                  "can stop, lock or rewrite every user's ledger, whatever the wall keeps", redis_fix())]  # fmt: skip
