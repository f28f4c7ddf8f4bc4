"""Shared fixtures: an isolated HOME and state directory per test, and the CLI as a process."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "rules" / "memory-budget.yaml"
# The governor's environment first on PATH, as an activated or installed one is: the project's
# hook launcher finds `memory-governor` there (governor.harnesses.launcher).
GOVERNOR_PATH = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


_SHARED: list[Path] = []  # this test process's folder of tables and compiled policies


def shared_cache() -> Path:
    """What every test of this process may share because it is rebuilt the same from the same input:
    the tables a hook deciding alone counts tokens with (governor.engine.bpe), for the units the
    tests use, and the policies compiled by content (governor.policy.compiled.compile_layers)."""
    if not _SHARED:
        import atexit
        import tempfile

        from governor.engine import tokens

        folder = Path(tempfile.mkdtemp(prefix="memory-governor-tests-"))
        atexit.register(shutil.rmtree, folder, True)
        for unit in ("o200k_base", "cl100k_base"):
            tokens._quick(unit, str(folder))
        (folder / "policies").mkdir(mode=0o700)
        _SHARED.append(folder)
    return _SHARED[0]


def tokenizer_tables() -> list[Path]:
    return sorted(shared_cache().glob("*.bpe"))


def with_shared_caches(state: Path) -> None:
    """Give a new state directory the tables, the compiled policies and their patterns' code the
    tests share: without them the first hook of every test builds a table (~0.4 s of CPU),
    compiles the policy (~0.5 s) and its first prompt the policy's patterns (~0.2 s). Each file
    is linked in (a hook still checks each file's digest before it uses it, and replaces a file
    rather than write into it; tests/test_bpe.py and tests/test_server.py remove the tables to
    prove the build itself). A policy is kept by the
    sha256 of its files' bytes and of which code compiles it: the same key compiles the same way."""
    cache = state / "cache"
    kept = cache / "policies"
    for level in (state, cache, kept):
        level.mkdir(mode=0o700, exist_ok=True)
    shared = shared_cache() / "policies"
    for file in [*tokenizer_tables(), *shared.glob("*.json"), *shared.glob("*.forms")]:
        folder = cache if file.suffix == ".bpe" else kept
        try:
            os.link(file, folder / file.name)
        except FileExistsError:
            pass
        except OSError:
            shutil.copyfile(file, folder / file.name)


def share_back(state: Path) -> None:
    """After a test: the policies its hooks compiled (and their patterns' code) join the shared
    folder, for the tests after it."""
    shared = shared_cache() / "policies"
    kept = state / "cache" / "policies"
    for file in [*kept.glob("*.json"), *kept.glob("*.forms")]:
        if not (shared / file.name).exists():
            try:
                os.link(file, shared / file.name)
            except OSError:
                pass


class Env:
    """A sandbox: its own HOME, XDG dirs, state directory and project directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.state = tmp / "state"
        self.project = tmp / "project"
        for d in (self.home, self.project):
            d.mkdir(parents=True, exist_ok=True)
        with_shared_caches(self.state)
        self.vars = {
            "PATH": GOVERNOR_PATH,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "MEMORY_GOVERNOR_STATE_DIR": str(self.state),
            "MEMORY_GOVERNOR_WARM_SERVER": "off",
            "LANG": "C.UTF-8",
        }

    def cli(
        self,
        *args: str,
        input: str | bytes | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        data = input.encode() if isinstance(input, str) else input
        proc = subprocess.run(
            [sys.executable, "-m", "governor", *args],
            input=data,
            capture_output=True,
            cwd=str(cwd or self.project),
            env={**self.vars, **(env or {})},
            timeout=120,
        )
        out = subprocess.CompletedProcess(
            proc.args,
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )
        if check and out.returncode != 0:
            raise AssertionError(f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}")
        return out

    def accept(self, *args: str, typed: str = "y\n", check: bool = True) -> subprocess.CompletedProcess[str]:
        """`memory-governor policy accept ARGS` as the user runs it: in a terminal, answering `typed`."""
        from tests.terminal import at_a_terminal

        out = at_a_terminal([sys.executable, "-m", "governor", "policy", "accept", *args], self.project, self.vars,
                            typed)  # fmt: skip
        if check and out.returncode != 0:
            raise AssertionError(f"policy accept: exit {out.returncode}\n{out.stdout}")
        return out

    def cli_json(self, *args: str, **kw: Any) -> Any:
        out = self.cli(*args, **kw)
        return json.loads(out.stdout)

    def write(self, rel: str, text: str) -> Path:
        path = self.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path


# Running side by side: `./scripts/test.sh` runs pytest-xdist (`-n auto --dist loadgroup`), and
# under loadgroup this scheduler keeps each end-to-end module (per Claude Code pin) in one worker:
# its binary starts there once, its module-scoped probe runs are made once, and two workers never
# drive the same harness module's session fixtures. Every other test is its own unit, spread over
# the workers. (The scope is read from the node id alone: the controller never collects.)
E2E = "tests/e2e/"
PIN = re.compile(r"\bcc\d+(?:\.\d+)+")  # a Claude Code pin's parameter id, e.g. cc2.1.197


def xdist_scope(nodeid: str) -> str:
    """The unit of work a test belongs to: its e2e module (and Claude Code pin), else itself."""
    path, _, rest = nodeid.partition("::")
    if not path.startswith(E2E):
        return nodeid
    pin = PIN.search(rest)
    return f"{path}@{pin.group()}" if pin else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return ByModule(config, log)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    sandbox = Env(tmp_path)
    yield sandbox
    share_back(sandbox.state)


ENTRY = str(ROOT / "governor" / "runtime" / "entry.py")
HOOK = [sys.executable, "-I", "-S", ENTRY, "claude-code"]


def hook_run(
    command: list[str], data: bytes, env: dict[str, str], cwd: str | Path
) -> subprocess.CompletedProcess[bytes]:
    """The hook `command` run on `data` with environment `env` in folder `cwd`, as the harness runs it.

    The plain hook of this checkout (this interpreter, `-I -S`, the entry file, a harness name) with
    the warm server off, asked from a test's main thread, runs the entry's own `run` in this process
    instead, with the hook process's environment, folder and standard streams: the same code from its
    first line, without an interpreter start and the imports of each process. What that does not
    prove is proved by processes: any other command (a project install's launcher, `-X importtime`,
    a managed hook); a hook that may start the warm server (it forks); hooks asked at once from
    threads; and every hook of a test marked `hook_processes`, whose subject is what one process holds
    or does not (its `-I -S` isolation, the tables it counts with, a cold start, its ledger left
    open at exit, its Redis connections). `MEMORY_GOVERNOR_TEST_HOOK_PROCESSES=1`: every hook."""
    import threading

    from governor.harnesses import REGISTRY

    plain = len(command) == 5 and command[:4] == HOOK[:4] and command[4] in REGISTRY
    here = (plain and not _processes_only and env.get("MEMORY_GOVERNOR_WARM_SERVER") == "off"
            and threading.current_thread() is threading.main_thread()
            and os.environ.get("MEMORY_GOVERNOR_TEST_HOOK_PROCESSES") != "1")  # fmt: skip
    if not here:
        return subprocess.run(command, input=data, capture_output=True, env=env, cwd=str(cwd), timeout=60)
    return _run_here(command[4], data, {k: str(v) for k, v in env.items()}, str(cwd))


_processes_only = False  # the running test is marked hook_processes


@pytest.fixture(autouse=True)
def _hook_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    global _processes_only
    _processes_only = request.node.get_closest_marker("hook_processes") is not None
    yield
    _processes_only = False


def _run_here(harness: str, data: bytes, env: dict[str, str], cwd: str) -> subprocess.CompletedProcess[bytes]:
    import io

    from governor.runtime import hook

    streams = sys.stdin, sys.stdout, sys.stderr
    saved, folder = dict(os.environ), os.getcwd()
    out, err = io.BytesIO(), io.BytesIO()
    try:
        sys.stdin = io.TextIOWrapper(io.BytesIO(data))
        sys.stdout, sys.stderr = io.TextIOWrapper(out, write_through=True), io.TextIOWrapper(err, write_through=True)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        code = hook.run(harness)
        printed = subprocess.CompletedProcess([harness], code, out.getvalue(), err.getvalue())
    finally:  # (a stream's wrapper, once dropped, closes what it wraps: read first)
        sys.stdin, sys.stdout, sys.stderr = streams
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(folder)
    return printed


FIXTURES = ROOT / "tests" / "fixtures"
# A team policy for tests that play many people's worth of sessions as one OS user, in seconds:
# the per-user window (governor.engine.window), which would refuse most of them, is off.
NO_WINDOW = "window:\n" + "".join(f"  {name}: {{value: 0, enforce: 'off'}}\n" for name in (
    "max_search_calls", "max_full_fetches", "max_memory_tokens_injected"))  # fmt: skip


def fresh_process(probe: str) -> str:
    """What `probe` prints in a new `python -I -S` process with this checkout first on its path
    (sys.argv[1]): as a hook process starts, nothing imported yet."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-I", "-S", "-c", probe, str(ROOT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def snippets(search: str) -> str:
    """What the model gets of an Engram v1 search result under the shipped policy (L1 snippets_only):
    each hit without its date, project and scope line (what the server adds around its snippet)."""
    return re.sub(r"\n {4}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: \| [^\n]*)?(?=\n)", "", search)


# A team policy's line for tests whose subject is a result the server sent, passed as it came.
WHOLE_HITS = "ladder:\n  L1: {expected_tokens: 100, max_limit: 3, snippets_only: false}\n"


class Answer:
    """What one hook process printed, parsed; asserts the protocol on the way."""

    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        assert proc.returncode == 0, f"hook exited {proc.returncode}: {proc.stderr!r}"
        text = proc.stdout.decode("utf-8")
        self.stderr = proc.stderr.decode("utf-8", "replace")
        assert "Traceback" not in self.stderr, self.stderr
        self.raw = text
        self.data: dict[str, Any] | None = json.loads(text) if text.strip() else None
        if self.data is not None:
            assert text.count("\n") <= 1, "one JSON object, on one line"
            assert '"allow"' not in text, "never permissionDecision allow"

    @property
    def specific(self) -> dict[str, Any]:
        return (self.data or {}).get("hookSpecificOutput", {})

    @property
    def denied(self) -> bool:
        return self.specific.get("permissionDecision") == "deny"

    @property
    def reason(self) -> str:
        return str(self.specific.get("permissionDecisionReason", ""))

    @property
    def updated_input(self) -> dict[str, Any] | None:
        return self.specific.get("updatedInput")

    @property
    def output(self) -> str | None:
        return self.specific.get("updatedMCPToolOutput")

    @property
    def context(self) -> str:
        return str(self.specific.get("additionalContext", ""))

    @property
    def message(self) -> str:
        return str((self.data or {}).get("systemMessage", ""))

    @property
    def silent(self) -> bool:
        return self.data is None


def assert_raced(answers: list[Answer], allowed: int, reasons: tuple[str, ...]) -> None:
    """What holds for hook processes racing for `allowed` slots, in every order and however loaded the
    machine: never more than `allowed` granted; every refusal a limit's (one of `reasons`) or the
    watchdog's (a hook still deciding 8 s after it started is refused, never let through:
    governor.runtime.hook.Watchdog; on this 2-core machine, loaded by other work, two dozen hook
    processes at once can take that long) or, on Redis, a decision slower than its lease twice
    (decided again once, then refused: nothing of it written); and exactly `allowed` granted when no
    hook took that long."""
    late = [a for a in answers if "Unanswered" in a.stderr or "LedgerLeaseLost" in a.stderr]
    assert not [a.stderr for a in answers if "could not decide" in a.stderr and a not in late]
    refused = [a for a in answers if a.denied]
    assert all(a in refused for a in late), "the watchdog refuses, never lets through"
    assert all(any(r in a.reason for r in reasons) for a in refused if a not in late), [a.reason for a in refused]
    granted = len(answers) - len(refused)
    assert granted == allowed if not late else granted <= allowed, (granted, len(late))


def run_hook(sandbox: Env, payload: Any, raw: bytes | None = None, extra_env: dict[str, str] | None = None,
             command: list[str] | None = None) -> Answer:  # fmt: skip
    data = raw if raw is not None else json.dumps(payload).encode()
    return Answer(hook_run(command or HOOK, data, {**sandbox.vars, **(extra_env or {})}, sandbox.project))


def build_wheel(out: Path, source: Path | None = None) -> Path:
    """The package as a wheel in `out`, built from a private copy of the checkout (or from `source`,
    a copy a test made): setuptools builds in the source's own build/ folder, which two test
    workers building at once would share."""
    if source is None:
        source = out / "src"
        shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
            ".venv", ".git", ".cache", "tests", "build", "*.egg-info", "__pycache__", "node_modules"))  # fmt: skip
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w",
                    str(out), str(source)], check=True, capture_output=True, timeout=300)  # fmt: skip
    return max(out.glob("memory_governor-*.whl"), key=lambda p: p.stat().st_mtime)


def installed_hook(env: Env, scope: str = "project") -> list[str]:
    """The command `memory-governor install claude-code` wrote into the project's settings, run as
    Claude Code runs a command hook: by the shell, in the project folder. At `local` scope it is this
    machine's interpreter and entry file, as argv (a test may put interpreter options after argv[0])."""
    env.cli("install", "claude-code", "--scope", scope, check=True)
    name = "settings.json" if scope == "project" else "settings.local.json"
    command = json.loads((env.project / ".claude" / name).read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    return ["sh", "-c", command] if scope == "project" else shlex.split(command)


class Session:
    """A Claude Code session driven through the hook process, event by event (`command`: the hook
    command to run instead of HOOK, e.g. the one `install` wrote; `extra_env`: added to the sandbox's)."""

    def __init__(self, sandbox: Env, session_id: str = "sess-1", server: str = "engram",
                 command: list[str] | None = None, extra_env: dict[str, str] | None = None) -> None:  # fmt: skip
        self.sandbox = sandbox
        self.id = session_id
        self.server = server
        self.command = command
        self.extra_env = extra_env
        self.prompt_id: str | None = None
        self.turns = 0
        self.calls = 0

    @property
    def transcript(self) -> Path:
        """Where Claude Code keeps this session's transcript: ~/.claude/projects/<project>/<session>.jsonl."""
        return self.sandbox.home / ".claude" / "projects" / "-project" / f"{self.id}.jsonl"

    def event(self, name: str, **fields: Any) -> Answer:
        payload = {
            "session_id": self.id,
            "transcript_path": str(self.transcript),
            "cwd": str(self.sandbox.project),
            "hook_event_name": name,
            "permission_mode": "default",
            **fields,
        }
        if self.prompt_id and "prompt_id" not in fields:
            payload["prompt_id"] = self.prompt_id
        return run_hook(self.sandbox, payload, extra_env=self.extra_env, command=self.command)

    def start(self, source: str = "startup") -> Answer:
        return self.event("SessionStart", source=source)

    def prompt(self, text: str) -> Answer:
        self.turns += 1
        self.prompt_id = f"{self.id}-prompt-{self.turns}"
        return self.event("UserPromptSubmit", prompt=text, prompt_id=self.prompt_id)

    def tool_name(self, tool: str) -> str:
        return tool if tool.startswith("mcp__") or tool[0].isupper() else f"mcp__{self.server}__{tool}"

    def next_id(self) -> str:
        self.calls += 1
        return f"toolu_{self.id}_{self.calls}"

    def pre(self, tool: str, call_id: str | None = None, **tool_input: Any) -> Answer:
        return self.event(
            "PreToolUse", tool_name=self.tool_name(tool), tool_input=tool_input, tool_use_id=call_id or self.next_id()
        )

    def post(self, tool: str, call_id: str, response: Any, **tool_input: Any) -> Answer:
        return self.event(
            "PostToolUse",
            tool_name=self.tool_name(tool),
            tool_input=tool_input,
            tool_use_id=call_id,
            tool_response=response,
            duration_ms=5,
        )

    def call(self, tool: str, response: Any, **tool_input: Any) -> tuple[Answer, Answer | None]:
        """PreToolUse, then (unless denied) PostToolUse with `response`."""
        call_id = self.next_id()
        before = self.pre(tool, call_id, **tool_input)
        if before.denied:
            return before, None
        return before, self.post(tool, call_id, response, **(before.updated_input or tool_input))


@pytest.fixture
def session(env: Env) -> Session:
    return Session(env)


@pytest.fixture
def redis_server(tmp_path: Path) -> Any:
    """A real redis-server on a free loopback port, no persistence (tests/redis_server.py)."""
    from tests.redis_server import RedisServer

    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()
