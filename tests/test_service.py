"""The wall: a managed install's decision service (governor.runtime.service), through real processes.

The service runs as a user of its own; each managed hook runs as another uid (setpriv), as the
managed install wrote it, on real Claude Code payloads. What is proved: the decisions are the
service's (its state, not the user's; the administrator's policy), each uid's sessions are its
own, a stopped service refuses governed calls and says so while ordinary calls pass, a listener
that is not the service's uid is told nothing, and one uid's held requests do not starve another's.
Needs root and setpriv (skipped without them).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governor.runtime import service as decision_service
from tests.conftest import Answer

pytestmark = [
    pytest.mark.hook_processes,
    pytest.mark.skipif(os.geteuid() != 0 or not (shutil.which("setpriv") and shutil.which("unshare")),
                       reason="the service and its callers run as users of their own: needs root, setpriv and unshare"),
]  # fmt: skip

SERVICE_UID = 65534  # nobody: the service's user here (the install makes `memory-governor`)
ALICE, BOB = 47011, 47012  # two users' hooks, by uid
POLICY = "version: 1\nlimits:\n  max_search_calls: {value: 1}\n"


def governor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "governor", *args], capture_output=True, text=True, timeout=120)


def install(root: Path, *args: str) -> str:
    """`install claude-code --scope managed` (the wall is its default) under the prefix `root`, the
    service's user `nobody`; what it said."""
    out = governor("install", "claude-code", "--scope", "managed", "--root", str(root), "--service-user", "nobody",
                   *args)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def doctor(root: Path) -> list[dict[str, str]]:
    out = subprocess.run([sys.executable, "-m", "governor", "--managed-root", str(root), "doctor", "--format", "json"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    return [row for row in json.loads(out.stdout) if row["check"] == "decision service"]


def as_user(layers: Path, uid: int | None, args: list[str]) -> list[str]:
    """`args` in a private mount namespace whose /root (the checkout's interpreter lives there, 0700)
    only opens to traversal, run as `uid` (None: as root)."""
    mount = (f"mount -t overlay overlay -o lowerdir=/root,upperdir={layers}/up,workdir={layers}/work /root"
             ' && exec "$@"')  # fmt: skip
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"] if uid is not None else []
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", *drop, *args]


class Wall:
    """A managed install under a prefix, its service.json, and the service run as SERVICE_UID."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.root = top / "r"
        self.state = top / "service-state"
        self.run_dir = top / "run"
        self.proc: subprocess.Popen[bytes] | None = None
        self.layers = top / "layers"
        (self.layers / "up").mkdir(parents=True)
        (self.layers / "work").mkdir()
        os.chmod(self.layers / "up", 0o711)
        self.config = self.root / "etc" / "memory-governor"
        self.socket = self.run_dir / "governor.sock"
        self.installed = self.install(POLICY)
        settings = json.loads((self.root / "etc" / "claude-code" / "managed-settings.json").read_text())
        self.command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]

    def install(self, policy: str) -> str:
        """The managed install with `policy`, service.json pointed at this test's socket; what it said."""
        (self.top / "policy.yaml").write_text(policy)
        said = install(self.root, "--policy", str(self.top / "policy.yaml"))
        written = json.loads((self.config / "service.json").read_text())
        assert written == {"socket": "/run/memory-governor/governor.sock", "uid": SERVICE_UID, "user": "nobody"}
        written["socket"] = str(self.socket)  # this test's own socket folder, not the machine's /run
        (self.config / "service.json").write_text(json.dumps(written))
        return said

    def start(self) -> None:
        self.proc = subprocess.Popen(as_user(self.layers, None, [
            sys.executable, "-I", "-m", "governor", "service", "run", "--config", str(self.config),
            "--state", str(self.state), "--run-dir", str(self.run_dir), "--user", "nobody"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")  # fmt: skip
        deadline = time.monotonic() + 60
        while not self.socket.exists():
            assert self.proc.poll() is None, self.proc.stderr.read().decode() if self.proc.stderr else ""
            assert time.monotonic() < deadline, "the service did not bind its socket"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
            self.proc = None

    def hook(self, uid: int, payload: dict[str, Any], env: dict[str, str] | None = None,
             command: str | None = None) -> Answer:  # fmt: skip
        """The managed hook command (or `command`), run as `uid` the way Claude Code runs it (by the shell)."""
        home = self.top / f"home-{uid}"
        home.mkdir(exist_ok=True)
        os.chown(home, uid, uid)
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        proc = subprocess.run(as_user(self.layers, uid, ["sh", "-c", command or self.command]),
                              input=json.dumps(payload).encode(),
                              env={**base, **(env or {})}, cwd=str(home), capture_output=True,
                              timeout=60)  # fmt: skip
        return Answer(proc)


def search(session: str, prompt: str, n: int, query: str = "auth") -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/nonexistent.jsonl", "cwd": "/", "prompt_id": prompt,
            "hook_event_name": "PreToolUse", "permission_mode": "default", "tool_name": "mcp__engram__mem_search",
            "tool_input": {"query": query, "limit": 3}, "tool_use_id": f"toolu_{session}_{prompt}_{n}"}  # fmt: skip


def shell(session: str, command: str) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/nonexistent.jsonl", "cwd": "/", "prompt_id": "p1",
            "hook_event_name": "PreToolUse", "permission_mode": "default", "tool_name": "Bash",
            "tool_input": {"command": command}, "tool_use_id": f"toolu_{session}_shell"}  # fmt: skip


@pytest.fixture
def wall() -> Iterator[Wall]:
    top = Path(tempfile.mkdtemp(prefix="mg-wall-"))
    os.chmod(top, 0o755)  # the callers' uids reach the managed folder and the socket through it
    made = Wall(top)
    try:
        yield made
    finally:
        made.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_the_service_decides_with_its_own_state_the_administrators_policy_and_the_callers_uid(wall):
    wall.start()
    planted = {"MEMORY_GOVERNOR_STATE_DIR": str(wall.top / "forged"), "MEMORY_GOVERNOR_POLICY": "/nonexistent",
               "MEMORY_GOVERNOR_LEDGER_URL": "redis://127.0.0.1:1/0"}  # fmt: skip
    first = wall.hook(ALICE, search("s1", "p1", 1), env=planted)
    second = wall.hook(ALICE, search("s1", "p1", 2), env=planted)
    assert not first.denied, first.stderr
    assert second.denied and "search" in second.reason.lower(), (second.raw, second.stderr)  # the policy's 1
    # The same session id and turn from another uid is another session: its own budget.
    other = wall.hook(BOB, search("s1", "p1", 3))
    assert not other.denied, (other.raw, other.stderr)
    # Decided by the service: its ledger in its own 0700 state, none in the users' or the forged folders.
    ledger = wall.state / "ledger.db"
    assert ledger.exists() and os.stat(wall.state).st_uid == SERVICE_UID
    assert stat.S_IMODE(os.stat(wall.state).st_mode) == 0o700
    assert not (wall.top / "forged").exists()
    assert not list((wall.top / f"home-{ALICE}").rglob("ledger.db*"))
    run = os.stat(wall.run_dir)
    assert run.st_uid == 0 and stat.S_IMODE(run.st_mode) == 0o775, "the socket's folder: root's, no user writes it"


def test_a_policy_installed_while_the_service_runs_is_in_force_at_its_next_answer(wall):
    wall.start()
    assert not wall.hook(ALICE, search("s5", "p1", 1)).denied
    assert wall.hook(ALICE, search("s5", "p1", 2)).denied, "the policy's 1"
    wall.install("version: 1\nlimits:\n  max_search_calls: {value: 3}\n")
    allowed = wall.hook(ALICE, search("s5", "p1", 3))
    assert not allowed.denied and "changed since it was installed" not in allowed.stderr, (allowed.raw, allowed.stderr)
    wall.install(POLICY)
    assert wall.hook(ALICE, search("s5", "p1", 4)).denied, "the policy's 1 again"


def test_a_hook_behind_the_wall_imports_only_a_thin_client(wall):
    """What every call of every user pays behind the wall: the interpreter, a few small modules of
    ours and the C codec service.json is read with; nothing the decision needs."""
    wall.start()
    assert " -I -S " in wall.command
    timed = wall.command.replace(" -I -S ", " -X importtime -I -S ", 1)
    answer = wall.hook(ALICE, shell("s6", "ls"), command=timed)
    assert answer.raw == "" and "decision service" not in answer.stderr, (answer.raw, answer.stderr[-500:])
    imported = {line.rsplit("|", 1)[-1].strip() for line in answer.stderr.splitlines() if "|" in line}
    ours = {name for name in imported if name.startswith("governor")}
    assert ours <= {"governor", "governor.runtime", "governor.runtime.hook", "governor.runtime.bundle",
                    "governor.runtime.client", "governor.policy", "governor.policy.managed", "governor.jsonio"}, ours  # fmt: skip
    assert "governor.runtime.client" in ours, "asked the service"
    assert not imported & {"__future__", "json", "re", "threading", "socket", "sqlite3"}, imported


def test_a_stopped_service_refuses_governed_calls_and_says_so_and_ordinary_work_passes(wall):
    assert [row["status"] for row in doctor(wall.root)] == ["FAIL"], "doctor: it does not answer"
    wall.start()
    assert [(row["status"], "answers" in row["detail"]) for row in doctor(wall.root)] == [("ok", True)]
    assert not wall.hook(ALICE, search("s2", "p1", 1)).denied
    wall.stop()
    refused = wall.hook(ALICE, search("s2", "p2", 1))
    assert refused.denied, (refused.raw, refused.stderr)
    assert "decision service did not answer" in refused.reason, refused.raw
    told = (refused.data or {}).get("systemMessage", "")
    assert "refused until the decision service answers" in told, refused.raw  # the user is told
    ordinary = wall.hook(ALICE, shell("s2", "ls -la"))
    assert not ordinary.denied and "decision service" not in ordinary.raw, ordinary.raw
    wall.start()
    back = wall.hook(ALICE, search("s2", "p3", 1))
    assert not back.denied, (back.raw, back.stderr)
    again = wall.hook(ALICE, search("s2", "p3", 2))
    assert again.denied and "decision service" not in again.reason, again.raw  # governed: the limit's refusal


def test_a_listener_that_is_not_the_services_uid_is_told_nothing(wall):
    # As if a user could put a socket where the service's should be: the hook checks the listener's uid.
    wall.run_dir.mkdir()
    os.chown(wall.run_dir, ALICE, ALICE)
    fake = subprocess.Popen(as_user(wall.layers, ALICE, [sys.executable, "-I", "-c", _FAKE, str(wall.socket)]),
                            stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert fake.stdout is not None and fake.stdout.readline().strip() == b"ready"
        answer = wall.hook(ALICE, search("s3", "p1", 1))
    finally:
        fake.terminate()
    told = fake.communicate(timeout=10)[0]
    assert answer.denied and f"uid {ALICE}" in answer.raw, (answer.raw, answer.stderr)
    assert told == b"", "the hook sent nothing to a listener of the wrong uid"


_FAKE = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    data = c.recv(65536)
    sys.stdout.write(data.decode("latin-1")); sys.stdout.flush()
    c.sendall(b"OK 0 0\\n"); c.close()
"""

_HOLD = """
import socket, sys, time
held = []
for _ in range(int(sys.argv[2])):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[1]); c.send(b"M"); held.append(c)
print("ready", flush=True)
while True:  # a byte at a time, never a whole request: each held connection keeps a worker waiting
    time.sleep(0.5)
    for i, c in enumerate(held):
        try:
            c.send(b"G")
        except OSError:  # dropped (the whole request is late): held again at once
            held[i] = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            held[i].connect(sys.argv[1]); held[i].send(b"M")
"""


def test_one_uids_held_requests_do_not_starve_another_uid(wall):
    wall.start()
    holder = subprocess.Popen(as_user(wall.layers, ALICE, [sys.executable, "-I", "-c", _HOLD, str(wall.socket),
                                                          str(decision_service.PER_UID)]), stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
        time.sleep(0.3)  # the service has taken each held connection in hand
        starved = wall.hook(ALICE, search("s4", "p1", 1))
        served = wall.hook(BOB, search("s4", "p1", 1))
    finally:
        holder.kill()
        holder.wait()
    assert starved.denied and "BUSY" in starved.reason + starved.stderr, (starved.raw, starved.stderr)
    assert not served.denied and "could not" not in served.stderr, (served.raw, served.stderr)
    time.sleep(0.5)  # the held connections closed: ALICE is answered again
    assert not wall.hook(ALICE, search("s4", "p2", 1)).denied


def test_a_request_that_trickles_in_is_dropped_when_its_time_is_up(wall):
    """A byte every half second never lets a read wait long, yet the whole request has
    READ_SECONDS to arrive: then the service answers RETRY and frees the worker."""
    import socket

    wall.start()
    started = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(wall.socket))
        conn.settimeout(0.5)
        said = b""
        while not said and time.monotonic() - started < 3 * decision_service.READ_SECONDS:
            try:
                conn.send(b"M")
                said = conn.recv(100)
            except TimeoutError:
                continue
            except OSError:
                said = b"(closed)"
    assert said.startswith((b"RETRY", b"(closed)")), said
    assert time.monotonic() - started < 3 * decision_service.READ_SECONDS, "dropped in bounded time"


def test_a_request_larger_than_any_hook_sends_is_refused_before_it_is_read(wall):
    """A hook's event is at most 64 MiB (runtime.hook.MAX_INPUT): a request declaring more is
    answered RETRY at once, nothing of it held, whatever it then sends."""
    import socket

    from governor import stamp
    from governor.runtime.client import PROTOCOL

    wall.start()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(wall.socket))
        conn.settimeout(10)
        conn.sendall(b"%s claude-code %s 10 %d 1\n" % (PROTOCOL, stamp(), decision_service.MAX_REQUEST))
        assert conn.recv(100) == b"RETRY too-large\n"


# -- events the model writes and sends through the managed hook command itself, as its own uid -----------


def _event(session: str, name: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/nonexistent.jsonl", "cwd": "/", "hook_event_name": name,
            "permission_mode": "default", **fields}  # fmt: skip


def _result(session: str, use_id: str, text: str, query: str) -> dict[str, Any]:
    return _event(session, "PostToolUse", prompt_id="p1", tool_name="mcp__engram__mem_search", tool_use_id=use_id,
                  tool_input={"query": query, "limit": 3}, tool_response=text)  # fmt: skip


def _hits(first_id: int) -> str:
    body = " ".join(f"word{i} decision detail about the auth flow" for i in range(20))
    return "Found 3 memories:\n\n" + "".join(
        f"[{n}] #{first_id + n} (decision) — title {n}\n    {body}\n    2025-03-01 | project: p | scope: project\n\n"
        for n in (1, 2, 3)
    )


def test_a_result_the_model_sends_again_smaller_refunds_no_tokens(wall):
    """After a real result is counted, the same call's PostToolUse again with an empty result (the
    managed hook command run by the user's uid): the turn's tokens stay spent."""
    wall.install("version: 1\nlimits:\n  max_search_calls: {value: 5}\n  max_memory_tokens_injected: {value: 400}\n")
    wall.start()
    s = "tok-forge"
    assert not wall.hook(ALICE, search(s, "p1", 1)).denied
    wall.hook(ALICE, _result(s, f"toolu_{s}_p1_1", _hits(100), "auth"))
    wall.hook(ALICE, _result(s, f"toolu_{s}_p1_1", "Found 0 memories.", "auth"))  # forged
    second = wall.hook(ALICE, search(s, "p1", 2, "login"))
    assert not second.denied, second.raw  # as without the forged result: it runs, and its result is held back
    held = wall.hook(ALICE, _result(s, f"toolu_{s}_p1_2", _hits(200), "login")).specific
    text = held.get("updatedMCPToolOutput") or ""
    assert "#201" not in text and "held back" in text, held


def test_a_compaction_the_model_sends_again_unlocks_mem_context_once_a_turn(wall):
    wall.start()
    s = "ctx"
    assert not wall.hook(ALICE, _event(s, "UserPromptSubmit", prompt_id="p1", prompt="fix the login bug")).denied

    def context(n: int) -> Answer:
        return wall.hook(ALICE, _event(s, "PreToolUse", prompt_id="p1", tool_name="mcp__engram__mem_context",
                                       tool_input={}, tool_use_id=f"c{n}"))  # fmt: skip

    assert context(1).denied, "no trigger armed"
    granted = []
    for n in (2, 3, 4):
        wall.hook(ALICE, _event(s, "SessionStart", source="compact"))  # forged: no compaction happened
        granted.append(not context(n).denied)
    assert granted == [True, False, False]


def test_the_install_writes_the_unit_and_keeps_the_redis_credentials_from_users(tmp_path):
    root = tmp_path / "r"
    said = install(root, "--ledger-url", "redis://governor:s3cret@127.0.0.1:1/0")
    unit = (root / "etc" / "systemd" / "system" / "memory-governor.service").read_text()
    assert f"ExecStart={sys.executable} -I -m governor service run --config /" in unit and "--user nobody" in unit
    assert "no systemd here: start the decision service" in said and "service run" in said
    environment = root / "etc" / "memory-governor" / "environment.json"
    found = os.stat(environment)
    assert "s3cret" in environment.read_text() and stat.S_IMODE(found.st_mode) == 0o640
    assert (found.st_uid, found.st_gid) == (0, pwd.getpwnam("nobody").pw_gid), "root's, the service's group"
    gone = subprocess.run([sys.executable, "-m", "governor", "uninstall", "claude-code", "--scope", "managed",
                           "--root", str(root)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert gone.returncode == 0, gone.stderr
    assert not (root / "etc" / "memory-governor" / "service.json").exists()
    assert not (root / "etc" / "systemd" / "system" / "memory-governor.service").exists()


def test_the_wall_is_the_default_and_no_service_takes_it_down_and_doctor_names_the_tier(tmp_path):
    root = tmp_path / "r"
    config = root / "etc" / "memory-governor"
    service_json, unit = config / "service.json", root / "etc" / "systemd" / "system" / "memory-governor.service"
    said = install(root, "--ledger-url", "redis://governor:s3cret@127.0.0.1:1/0", "--no-service-start")
    assert service_json.exists() and unit.exists() and "not started (--no-service-start)" in said, said
    assert "seatbelt" not in said and "earlier managed install" not in said, said
    rows = doctor(root)
    assert [row["status"] for row in rows] == ["FAIL"] and rows[0]["detail"].startswith("the wall: "), rows
    down = install(root, "--no-service")
    assert not service_json.exists() and not unit.exists()
    assert f"{service_json}: removed (--no-service)" in down and f"{unit}: removed (--no-service)" in down, down
    assert "--no-service: the seatbelt tier: " in down and "can delete or write" in down, down
    environment = os.stat(config / "environment.json")  # every user's hook reads it again
    assert (environment.st_uid, environment.st_gid, stat.S_IMODE(environment.st_mode)) == (0, 0, 0o644)
    rows = doctor(root)
    assert [row["status"] for row in rows] == ["warn"] and "the seatbelt tier" in rows[0]["detail"], rows
    assert "--scope managed (the wall is its default)" in rows[0]["fix"], rows
    again = install(root, "--no-service")  # no service to take down: only the tier said
    assert "removed" not in again and "--no-service: the seatbelt tier" in again, again
    up = install(root, "--no-service-start")
    assert "the earlier managed install had no decision service: this one puts up the wall" in up, up
    assert json.loads(service_json.read_text())["uid"] == SERVICE_UID and unit.exists()
    assert stat.S_IMODE(os.stat(config / "environment.json").st_mode) == 0o640


def test_under_root_a_missing_service_user_is_refused_and_nothing_written(tmp_path):
    root = tmp_path / "r"
    out = governor("install", "claude-code", "--scope", "managed", "--root", str(root), "--service-user",
                   "mg-no-such-user")  # fmt: skip
    assert out.returncode != 0 and not root.exists(), out.stdout + out.stderr
    said = " ".join(out.stderr.split())
    assert "no user mg-no-such-user on this machine" in said and "makes no user" in said, said
    assert "useradd --system --user-group mg-no-such-user" in said and "--no-service" in said, said
    assert "--service-user" in said and "nothing was changed" in said, said
    # A tree with its own etc/passwd (an image's): the user is that tree's, made there first.
    (root / "etc").mkdir(parents=True)
    passwd = root / "etc" / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/sh\n")
    out = governor("install", "codex", "--scope", "managed", "--root", str(root))
    said = " ".join(out.stderr.split())
    assert out.returncode != 0 and [p.name for p in root.rglob("*")] == ["etc", "passwd"], said
    assert f"useradd --root {root} --system --user-group memory-governor" in said, said
    passwd.write_text("root:x:0:0:root:/root:/bin/sh\nmemory-governor:x:4242:4243::/var/lib/memory-governor:/x\n")
    out = governor("install", "codex", "--scope", "managed", "--root", str(root), "--no-service-start")
    assert out.returncode == 0, out.stdout + out.stderr
    written = json.loads((root / "etc" / "memory-governor" / "service.json").read_text())
    assert written["uid"] == 4242 and written["user"] == "memory-governor", written


def test_the_service_ignores_a_callers_environment_for_its_own_state_and_telemetry():
    made = decision_service.Service.__new__(decision_service.Service)
    made.config, made.state = "/etc/memory-governor", "/var/lib/memory-governor"
    env = made.environment({"MEMORY_GOVERNOR_STATE_DIR": "/tmp/x", "XDG_STATE_HOME": "/tmp/y", "HOME": "/tmp/z",
                            "MEMORY_GOVERNOR_ENABLE_TELEMETRY": "1", "CLAUDE_PROJECT_DIR": "/p"}, 0)  # fmt: skip
    assert env["MEMORY_GOVERNOR_STATE_DIR"] == "/var/lib/memory-governor" and "XDG_STATE_HOME" not in env
    assert env["HOME"] == os.path.expanduser("~root") and "MEMORY_GOVERNOR_ENABLE_TELEMETRY" not in env
    assert env["CLAUDE_PROJECT_DIR"] == "/p"


def test_the_install_and_doctor_say_when_the_ledgers_redis_answers_a_client_without_credentials(tmp_path, redis_server):
    """Behind the wall only the service holds the ledger's credentials, which guards nothing if the
    Redis answers a client with none (any user's process): the install warns and doctor says BAD.
    A Redis whose default user needs a password, the service on the governor's own ACL user: neither."""
    from governor.engine.redis_access import ACL_RULES
    from tests.redis_server import RedisServer

    open_said = install(tmp_path / "open", "--ledger-url", redis_server.url)
    assert "lets a client with no credentials run administrative commands" in open_said, open_said
    rows = doctor(tmp_path / "open")
    assert any(row["status"] == "FAIL" and "no credentials" in row["detail"] for row in rows), rows
    guarded = RedisServer(tmp_path / "guarded", password="the-administrators").start()
    try:
        guarded.client().execute_command("ACL", "SETUSER", "memory-governor", "on", ">its-own", *ACL_RULES.split())
        url = f"redis://memory-governor:its-own@127.0.0.1:{guarded.port}/0"
        closed_said = install(tmp_path / "closed", "--ledger-url", url)
        assert "no credentials" not in closed_said, closed_said
        rows = doctor(tmp_path / "closed")
        assert rows and not any("no credentials" in row["detail"] for row in rows), rows
        refused = {entry["object"] for entry in guarded.client().execute_command("ACL", "LOG")}
        assert refused <= {"config|get"}, "only the probe whether the service's user can administer was refused"
    finally:
        guarded.stop()


# -- what one uid's model can name, from its own requests, of another uid's -------------------------

_HARNESS = r"""
import json, subprocess, sys, time
command, session = sys.argv[1], sys.argv[2]
for payload in ({"session_id": session, "transcript_path": "/x.jsonl", "cwd": "/", "hook_event_name": "SessionStart",
                 "source": "startup"},
                {"session_id": session, "transcript_path": "/x.jsonl", "cwd": "/", "hook_event_name": "UserPromptSubmit",
                 "prompt_id": "bp1", "prompt": "fix the login bug", "permission_mode": "default"}):
    subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload).encode(), capture_output=True)
print("ready", flush=True)
time.sleep(120)
"""


def _process_key(pid: int) -> str:
    """The key governor.runtime.lineage gives a process (its boot, pid and start time): /proc says it to anyone."""
    with open("/proc/sys/kernel/random/boot_id") as handle:
        boot = handle.read().strip().replace("-", "")[:8]
    with open(f"/proc/{pid}/stat", "rb") as handle:
        data = handle.read()
    return f"{boot}:{pid}:{data[data.rfind(b')') + 2 :].split()[19].decode()}"


def test_a_marker_naming_another_uids_harness_is_not_that_uids_session(wall):
    """BOB's harness process runs his session; ALICE's model names that process as its nesting
    marker (its key is in world-readable /proc). Her search counts in her own session, so BOB's
    turn still has its one search."""
    wall.start()
    home = wall.top / f"home-{BOB}"
    home.mkdir(exist_ok=True)
    os.chown(home, BOB, BOB)
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    bob = subprocess.Popen(as_user(wall.layers, BOB, [sys.executable, "-I", "-c", _HARNESS, wall.command, "bob-s"]),
                           stdout=subprocess.PIPE, env=env, cwd=str(home))  # fmt: skip
    try:
        assert bob.stdout is not None and bob.stdout.readline().strip() == b"ready"
        forged = {"MEMORY_GOVERNOR_PARENT": _process_key(bob.pid)}
        assert not wall.hook(ALICE, search("alice-s", "ap1", 1), env=forged).denied
        first = subprocess.run(as_user(wall.layers, BOB, ["sh", "-c", wall.command]),
                               input=json.dumps(search("bob-s", "bp1", 1)).encode(), capture_output=True, env=env,
                               cwd=str(home), timeout=60)  # fmt: skip
        assert first.returncode == 0 and '"deny"' not in first.stdout.decode(), first.stdout + first.stderr[-800:]
    finally:
        bob.kill()
        bob.wait()


WORKERS = "version: 1\nlimits:\n  max_search_calls: {value: 1}\nsubagents:\n  agents:\n    worker: search-capable\n"


@pytest.mark.parametrize("named", [False, True])
def test_an_agent_id_naming_another_uids_session_does_not_take_its_subagents(wall, named):
    """ALICE's event names, as its subagent's id, the id BOB's session has in the service
    (`<uid>/<session>`): BOB's subagents still count in BOB's turn, so past his one search a
    subagent's is refused, with the name made or not."""
    wall.install(WORKERS)
    wall.start()

    def sub_search(session: str, prompt_id: str, agent: str, use_id: str) -> dict[str, Any]:
        return {**search(session, prompt_id, 0), "agent_id": agent, "agent_type": "worker", "tool_use_id": use_id}

    if named:
        wall.hook(ALICE, sub_search("alice-x", "ap1", f"{BOB}/bob-s", "a1"))
    assert not wall.hook(BOB, search("bob-s", "bp1", 1)).denied
    sub = wall.hook(BOB, sub_search("bob-s", "bp1", "agent-7", "b2"))
    assert sub.denied, (sub.raw, sub.stderr)


def test_the_service_reads_no_install_record_of_a_user(wall):
    """A record of an ordinary install in the user's state folder names files and their digests:
    checked at a session's start, it would make the service read and hash files only it can read
    and say whether each matched. Behind the wall the hooks are root's: no record is read."""
    import hashlib

    wall.start()
    secret = wall.state / "secret.txt"
    secret.write_text("hunter2")
    os.chown(secret, SERVICE_UID, SERVICE_UID)
    os.chmod(secret, 0o600)
    home = wall.top / f"home-{ALICE}"
    records = home / ".local" / "state" / "memory-governor" / "installs"
    records.mkdir(parents=True, exist_ok=True)
    for path in (home / ".local", home / ".local" / "state", records.parent, records):
        os.chown(path, ALICE, ALICE)
    for guess in (hashlib.sha256(b"hunter1").hexdigest(), None):
        entry = {"harness": "claude-code", "project": "/", "scope": "user", "files": {str(secret): guess}}
        (records / "claude-code-user-00000000.json").write_text(json.dumps(entry))
        start = {"session_id": f"rec-{guess}", "transcript_path": "/nonexistent.jsonl", "cwd": "/",
                 "hook_event_name": "SessionStart", "source": "startup"}  # fmt: skip
        answer = wall.hook(ALICE, start, env={"HOME": str(home)})
        assert "changed since install" not in answer.stderr + answer.raw, answer.stderr


def test_a_result_spilled_under_a_private_home_reaches_the_model_trimmed(wall):
    """Claude Code saves a memory result over its output limit to a file under the user's own
    (0700) home and hands the hook a pointer. The service cannot open it: the hook reads it as the
    user and carries its text, so the model gets the result trimmed in the pointer's place."""
    from tests.harnesses.test_codex import big_search

    wall.start()
    home = wall.top / f"home-{ALICE}"
    home.mkdir(exist_ok=True)
    folder = home / ".claude" / "projects" / "-app"
    spills = folder / "spilled" / "tool-results"
    spills.mkdir(parents=True)
    for path in [home, *home.rglob("*")]:
        os.chown(path, ALICE, ALICE)
    os.chmod(home, 0o700)
    text = big_search(40)
    spill = spills / "mcp-engram-mem_search-1796123163716.txt"
    spill.write_text(text)
    os.chown(spill, ALICE, ALICE)
    os.chmod(spill, 0o600)
    transcript = str(folder / "spilled.jsonl")
    pre = {**search("spilled", "p1", 1), "transcript_path": transcript}
    assert not wall.hook(ALICE, pre, env={"HOME": str(home)}).denied
    pointer = (f"Error: result ({len(text):,} characters across 725 lines) exceeds maximum allowed tokens. Output has "
               f"been saved to {spill}.\nFormat: Plain text\n")  # fmt: skip
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": [{"type": "text", "text": pointer}]}
    answer = wall.hook(ALICE, post, env={"HOME": str(home)})
    assert answer.output is not None and "#100" in answer.output and str(spill) not in answer.output, answer.raw[:500]
    assert len(answer.output) < len(text), "trimmed to the turn's budget"


def test_a_ledger_redis_that_never_answers_is_said_and_nothing_fails(tmp_path):
    """A Redis that accepts and never answers: the install says so and goes on (the wall's check
    for a Redis open to anyone cannot tell, so it says nothing of it), in bounded time."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        said = install(tmp_path / "r", "--ledger-url", f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
    assert "does not answer now" in said and "no credentials" not in said, said
    assert time.monotonic() - started < 60
