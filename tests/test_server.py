"""The warm server: started by the first hook, used by the next, and never a reason to let a call
through when it is down, stale, or built from other code."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HOOK, ROOT, Env, hook_run, run_hook

# Their subject is what one hook process holds (its tables, its patterns, its warm server): each hook
# is a process of its own (tests/conftest.py hook_run).
pytestmark = pytest.mark.hook_processes

SEARCH = {
    "hook_event_name": "PreToolUse",
    "tool_name": "mcp__engram__mem_search",
    "tool_input": {"query": "q", "limit": 10},
}


@pytest.fixture
def warm(env: Env) -> Iterator[Env]:
    env.vars["MEMORY_GOVERNOR_WARM_SERVER"] = "auto"
    yield env
    env.cli("serve", "--stop")


def _call(env: Env, n: int, session: str = "warm") -> dict:
    answer = run_hook(env, {**SEARCH, "session_id": session, "prompt_id": f"{session}-p", "cwd": str(env.project),
                            "tool_use_id": f"t{n}"})  # fmt: skip
    assert "could not decide" not in answer.message, answer.message
    return answer.data or {}


def _wait_exit(pid: int) -> None:
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"process {pid} is still running")


def _wait_running(env: Env) -> int:
    for _ in range(100):
        out = env.cli("serve", "--status")
        if out.returncode == 0:
            return int(out.stdout.split("pid ")[1].rstrip(")\n"))
        time.sleep(0.1)
    raise AssertionError("no server started")


def test_the_first_hook_starts_the_server_and_later_hooks_use_it(warm: Env) -> None:
    first = _call(warm, 1)
    assert first["hookSpecificOutput"]["updatedInput"]["limit"] == 3, "decided in-process while the server starts"
    pid = _wait_running(warm)
    for n in range(2, 6):
        answer = _call(warm, n)
        expected = "deny" if n > 2 else None
        assert answer.get("hookSpecificOutput", {}).get("permissionDecision") == expected
    assert _wait_running(warm) == pid, "the same server answered throughout"


def test_a_stale_socket_falls_back_and_a_new_server_starts(warm: Env) -> None:
    run = warm.state / "run"
    run.mkdir(parents=True)
    here = os.getcwd()
    os.chdir(run)
    try:
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind("governor.sock")  # a socket file nobody listens on
        stale.close()
    finally:
        os.chdir(here)
    answer = _call(warm, 1)
    assert answer["hookSpecificOutput"]["updatedInput"]["limit"] == 3
    _wait_running(warm)
    assert _call(warm, 2).get("hookSpecificOutput", {}).get("updatedInput", {}).get("limit") == 3


def test_a_server_from_other_code_retires_and_the_hook_decides_itself(warm: Env) -> None:
    _call(warm, 1)
    pid = _wait_running(warm)
    here = os.getcwd()
    os.chdir(warm.state / "run")
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect("governor.sock")
        body = json.dumps({**SEARCH, "session_id": "x", "tool_use_id": "t"}).encode()
        conn.sendall(b"MG1 claude-code 0.0.0+1 0 %d\n" % len(body) + body)
        conn.shutdown(socket.SHUT_WR)
        reply = conn.recv(100)
        conn.close()
    finally:
        os.chdir(here)
    assert reply.startswith(b"RETRY code-changed")
    _wait_exit(pid)
    assert _call(warm, 2)["hookSpecificOutput"]["updatedInput"]["limit"] == 3


def test_a_hook_the_server_answers_imports_only_the_thin_client(warm: Env) -> None:
    # What every governed harness's every tool call pays: the interpreter, and a few small modules.
    _call(warm, 1)
    _wait_running(warm)
    payload = {"session_id": "thin", "cwd": str(warm.project), "hook_event_name": "PreToolUse",
               "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t"}  # fmt: skip
    done = hook_run([HOOK[0], "-X", "importtime", *HOOK[1:]], json.dumps(payload).encode(),
                    {**warm.vars, "MEMORY_GOVERNOR_TRACE": "1"}, warm.project)  # fmt: skip
    assert b"answered by the warm server" in done.stderr, done.stderr[-500:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
    ours = {name for name in imported if name.startswith("governor")}
    assert ours <= {"governor", "governor.runtime", "governor.runtime.hook", "governor.runtime.bundle",
                    "governor.runtime.client", "governor.state"}, ours  # fmt: skip
    assert not imported & {"__future__", "json", "_json", "governor.jsonio", "threading", "socket"}, imported


@pytest.mark.parametrize("change", ["installed anew", "a file edited in place"])
def test_a_server_retires_when_its_code_changes(warm: Env, tmp_path: Path, change: str) -> None:
    # A private copy of the package: its hook and its server are this copy's, changed as an
    # upgrade changes it (files replaced: the folder's time moves) or as an editor does (in place).
    from governor.runtime.server import RECHECK_SECONDS

    copy = tmp_path / "copy" / "governor"
    shutil.copytree(ROOT / "governor", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for data in ("rules", "schemas"):  # as a wheel packages them
        shutil.copytree(ROOT / data, copy / data)
    hook = [sys.executable, "-I", "-S", str(copy / "runtime" / "entry.py"), "claude-code"]

    def who(n: int) -> str:
        payload = {**SEARCH, "session_id": "code", "prompt_id": "p", "cwd": str(warm.project), "tool_use_id": f"t{n}"}
        done = hook_run(hook, json.dumps(payload).encode(), {**warm.vars, "MEMORY_GOVERNOR_TRACE": "1"}, warm.project)
        assert b"could not decide" not in done.stderr, done.stderr
        return "server" if b"answered by the warm server" in done.stderr else "itself"

    who(1)
    pid = _wait_running(warm)
    assert who(2) == "server"
    if change == "installed anew":
        (copy / "added.py").write_text("")  # a file made: the package folder's time moves
        assert who(3) == "itself", "the server was told another stamp and answered RETRY"
    else:
        before = os.stat(copy / "engine").st_mtime_ns, os.stat(copy).st_mtime_ns
        with open(copy / "engine" / "budgets.py", "a") as handle:
            handle.write("\n# edited in place\n")
        assert (os.stat(copy / "engine").st_mtime_ns, os.stat(copy).st_mtime_ns) == before
        time.sleep(RECHECK_SECONDS + 0.3)
        who(3)  # the server looks at its own code after this answer, and finds the edit
    _wait_exit(pid)
    assert who(4) == "itself", "no server of the old code answers"


def test_a_request_is_framed_by_its_lengths_so_a_client_need_not_close_its_side(warm: Env) -> None:
    # OpenCode's plugin runs in Bun, which closes both sides of a socket it ends: it only writes.
    from governor import stamp

    _call(warm, 1)
    _wait_running(warm)
    here = os.getcwd()
    os.chdir(warm.state / "run")
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(10)
        conn.connect("governor.sock")
        body = json.dumps({**SEARCH, "session_id": "framed", "prompt_id": "p", "tool_use_id": "t"}).encode()
        env = b"\0".join(f"{k}={v}".encode() for k, v in warm.vars.items())
        conn.sendall(b"MG1 claude-code %s %d %d\n" % (stamp(), len(env), len(body)) + env + body)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
        conn.close()
    finally:
        os.chdir(here)
    head, _, rest = reply.partition(b"\n")
    assert head.startswith(b"OK "), reply
    assert json.loads(rest)["hookSpecificOutput"]["updatedInput"]["limit"] == 3


def test_the_policy_can_turn_the_warm_server_off(warm: Env) -> None:
    _call(warm, 1)
    pid = _wait_running(warm)
    warm.write(".memory-governor/policy.yaml", "runtime:\n  warm_server: 'off'\n")
    _call(warm, 2)  # the server answers, sees the policy, and retires
    _wait_exit(pid)
    for n in range(3, 6):
        _call(warm, n, session="after")
    time.sleep(0.5)
    assert warm.cli("serve", "--status").returncode == 1, "no server is started while the policy says off"


def test_serve_refuses_a_second_server(warm: Env) -> None:
    _call(warm, 1)
    _wait_running(warm)
    out = warm.cli("serve", "--idle-exit", "5")
    assert out.returncode == 1 and "already running" in out.stderr


def test_a_server_answers_concurrent_hooks_exactly(warm: Env) -> None:
    _call(warm, 0, session="warm-up")
    _wait_running(warm)
    procs = [subprocess.Popen([sys.executable, "-I", "-S", str(ROOT / "governor" / "runtime" / "entry.py"), "claude-code"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=warm.vars) for _ in range(12)]  # fmt: skip
    for n, proc in enumerate(procs):
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({**SEARCH, "session_id": "burst", "prompt_id": "burst-p", "cwd": str(warm.project),
                                     "tool_use_id": f"b{n}"}).encode())  # fmt: skip
        proc.stdin.close()
    answers = []
    for proc in procs:
        assert proc.stdout is not None
        answers.append(json.loads(proc.stdout.read() or b"{}"))
        proc.wait(timeout=60)
    denied = sum(a.get("hookSpecificOutput", {}).get("permissionDecision") == "deny" for a in answers)
    assert denied == 10


def test_the_server_socket_is_private(warm: Env) -> None:
    _call(warm, 1)
    _wait_running(warm)
    sock = Path(warm.state / "run" / "governor.sock")
    assert sock.stat().st_mode & 0o077 == 0
    assert warm.state.stat().st_mode & 0o077 == 0


def test_the_server_builds_the_table_a_hook_deciding_alone_counts_with(warm: Env) -> None:
    """Started before any hook has run (the first hook that compiles the policy would build it
    too), the server builds the tokenizer table, so no hook that decides alone pays for it."""
    cache = warm.state / "cache"
    for table in cache.glob("*.bpe"):
        table.unlink()  # the sandbox's, built once per test process: the server builds its own
    server = subprocess.Popen([sys.executable, "-m", "governor", "serve", "--idle-exit", "120"], cwd=str(warm.project),
                              env=warm.vars, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_running(warm)
        for _ in range(600):
            if list(cache.glob("o200k_base-*.bpe")):
                break
            time.sleep(0.1)
        (table,) = cache.glob("o200k_base-*.bpe")
        from governor.engine import bpe

        assert bpe.read(str(table), "o200k_base") is not None
    finally:
        warm.cli("serve", "--stop")
        server.wait(30)


# A process of the user's that answers every hook "nothing to say" (`OK 0 0`), as the real server
# does for a call within limits. The model can write it with a file tool and start it with one
# plain shell command; it takes the socket's path from under a running server.
STRANGER = """
import os, socket, sys
sys.path.insert(0, {root!r})
if {imports}:
    from governor.runtime import client  # the governor's own pieces: still not its server
folder = {folder!r}
os.makedirs(folder, exist_ok=True)
os.chdir(folder)
try:
    os.unlink("governor.sock")
except FileNotFoundError:
    pass
listener = socket.socket(socket.AF_UNIX)
listener.bind("governor.sock")
listener.listen(16)
open("stranger-ready", "w").close()
while True:
    conn, _ = listener.accept()
    conn.settimeout(5)
    heard = b""
    try:
        while chunk := conn.recv(65536):
            heard += chunk
    except OSError:
        pass
    with open("stranger-heard", "ab") as log:
        log.write(b"%d\\n" % len(heard))
    try:
        conn.sendall(b"OK 0 0\\n")
    except OSError:
        pass
    conn.close()
"""


@pytest.fixture(params=["script", "dash-c"])
def stranger(warm: Env, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Env, Path]]:
    """A stranger on the socket: `python3 x.py` (a script path), or this very interpreter with `-I
    -c` code that imports the governor (the program's name and binary are the server's)."""
    run = warm.state / "run"
    code = STRANGER.format(root=str(ROOT), folder=str(run), imports=request.param == "dash-c")
    if request.param == "script":
        (tmp_path / "x.py").write_text(code)
        argv = ["python3", str(tmp_path / "x.py")]
    else:
        argv = [sys.executable, "-I", "-c", code]
    proc = subprocess.Popen(["setsid", "-f", *argv] if request.param == "script" else argv,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    for _ in range(100):
        if (run / "stranger-ready").exists():
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the stranger did not start")
    pid = _listener(run)
    try:
        yield warm, run
    finally:
        os.kill(pid, 9)
        proc.wait(10)


def _listener(run: Path) -> int:
    """The pid of whoever listens on the socket, as the kernel names it."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    here = os.getcwd()
    os.chdir(run)
    try:
        conn.connect("governor.sock")
        cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    finally:
        os.chdir(here)
        conn.close()
    return int.from_bytes(cred[:4], sys.byteorder)


def _traced(env: Env, n: int, session: str) -> tuple[dict, str]:
    answer = run_hook(env, {**SEARCH, "tool_input": {"query": "q", "limit": 20}, "session_id": session,
                            "prompt_id": f"{session}-p", "cwd": str(env.project), "tool_use_id": f"s{n}"},
                      extra_env={"MEMORY_GOVERNOR_TRACE": "1"})  # fmt: skip
    return answer.data or {}, answer.stderr


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="no peer credentials on this platform")
def test_a_stranger_on_the_socket_is_told_nothing_and_the_hook_decides_itself(stranger: tuple[Env, Path]) -> None:
    env, run = stranger
    (run / "spawned").write_text("")  # as if a hook had just started a server: none starts during this test
    answers = [_traced(env, n, "met") for n in range(4)]
    for _, err in answers:
        assert "decided in this process" in err and "not the governor's own server" in err, err
    limits = [a.get("hookSpecificOutput", {}).get("updatedInput", {}).get("limit") for a, _ in answers]
    decisions = [a.get("hookSpecificOutput", {}).get("permissionDecision") for a, _ in answers]
    assert limits[:2] == [3, 3] and decisions[2:] == ["deny", "deny"], answers
    told = [a.get("systemMessage", "") for a, _ in answers]
    assert "not the governor's own server" in told[0] and not any(told[1:]), "the user is told once per session"
    heard = (run / "stranger-heard").read_text().split()
    assert heard and set(heard) == {"0"}, "the stranger heard nothing: no payload, no environment"
    log = (env.state / "errors.log").read_text()
    assert log.count("not the governor's own server") == 1, log


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="no peer credentials on this platform")
def test_a_running_server_takes_its_socket_back_from_a_stranger(warm: Env, tmp_path: Path) -> None:
    _call(warm, 1)
    pid = _wait_running(warm)
    for _ in range(100):
        if _listener(warm.state / "run") == pid:
            break
        time.sleep(0.05)
    (tmp_path / "x.py").write_text(STRANGER.format(root=str(ROOT), folder=str(warm.state / "run"), imports=False))
    proc = subprocess.Popen([sys.executable, str(tmp_path / "x.py")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        for _ in range(100):
            if (warm.state / "run" / "stranger-ready").exists():
                break
            time.sleep(0.05)
        answers = []
        for n in range(2, 40):
            answers.append(_traced(warm, n, "taken"))
            if "answered by the warm server" in answers[-1][1]:
                break
            time.sleep(0.1)
        _, err = answers[-1]
        assert "answered by the warm server" in err, err
        assert _listener(warm.state / "run") == pid, "the same server, bound anew"
        denied = [a.get("hookSpecificOutput", {}).get("permissionDecision") == "deny" for a, _ in answers]
        assert denied[2:] == [True] * len(denied[2:]), "limits held throughout"
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="no peer credentials on this platform")
def test_serve_runs_the_server_hooks_trust(warm: Env) -> None:
    server = subprocess.Popen([sys.executable, "-m", "governor", "serve", "--idle-exit", "120"], cwd=str(warm.project),
                              env=warm.vars, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_running(warm)
        for n in range(50):
            _, err = _traced(warm, n, f"served{n}")
            if "answered by the warm server" in err:
                break
            time.sleep(0.1)
        assert "answered by the warm server" in err and "not the governor's own server" not in err, err
    finally:
        warm.cli("serve", "--stop")
        server.wait(30)


def test_a_relative_cwd_is_the_hooks_folder_wherever_the_server_started(warm: Env, tmp_path: Path) -> None:
    """The README's examples send `"cwd": "."`: a server started from another project of the same
    user decides for the folder the hook runs in, as `report` and `policy explain` there say."""
    other = tmp_path / "other"
    other.mkdir()
    hook_run(HOOK, json.dumps({**SEARCH, "session_id": "elsewhere", "cwd": ".", "tool_use_id": "o"}).encode(),
             warm.vars, other)  # fmt: skip
    _wait_running(warm)
    warm.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls:\n    value: 3\n")
    denied = []
    for n in range(4):
        answer = run_hook(warm, {**SEARCH, "session_id": "here", "prompt_id": "p", "cwd": ".", "tool_use_id": f"h{n}"})
        assert "could not decide" not in answer.message, answer.message
        denied.append(answer.denied)
    assert denied == [False, False, False, True], "three searches, the team's limit, then a refusal"
    report = warm.cli_json("report", "--format", "json")
    assert report["limits"]["max_search_calls"] == 3
    (turn,) = [turn for turn in report["turns"] if turn["session"] == "s:here"]
    assert turn["limits"]["max_search_calls"] == 3, turn
    digest = warm.cli_json("policy", "explain", "--format", "json")["digest"]
    assert digest.startswith(turn["policy"]), "the hooks decided under the policy explain shows"
