"""What every harness's end-to-end tests share: the sandbox a run happens in, the run's answer,
and the fixtures around them.

- `Sandbox`: a project directory memory-governor is installed into by its own installer, a
  throwaway HOME and XDG folders, its own ledger (MEMORY_GOVERNOR_STATE_DIR; the warm server off
  unless asked for), the Engram stand-in's seed, store and call log, and the checks after a run
  (the harness exited 0 with a session, the model stand-in's script was played to the end).
- `Run`: one invocation of a harness binary: its output, the requests the model stand-in got
  during it, and the tool results the model received (each once).
- `fresh(server)`, `governed(harness)`: the per-test side of a session-scoped model stand-in
  (reset before and after), and a harness that must have logged no governor error.

The binaries come from the e2e cache (npm.py). Each harness's module (conftest.py for Claude
Code, codex_env.py, copilot_env.py, gemini_env.py, opencode_env.py) adds its pin, its settings
and how its binary is started.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import seed

from tests.conftest import GOVERNOR_PATH, share_back, with_shared_caches

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))
RUN_TIMEOUT = 120
NOTE = "[memory-governor]"  # what marks a result the governor trimmed
HIT = re.compile(r"^\[\d+\] #(\d+) \(", re.M)  # one hit of an Engram search result


def hit_ids(result_text: str) -> list[int]:
    """The observation ids an Engram search result lists."""
    return [int(i) for i in HIT.findall(result_text)]


def o200k(text: str) -> int:
    """Tokens of `text` as the shipped policy counts them."""
    from governor.engine.tokens import counter

    return counter("o200k_base").count(text)


class Run:
    """One invocation of a harness binary: its output, and what the model received during it.

    PREFIX is how the harness names the Engram stand-in's tools to the model, SEP what comes
    before the tool's own name (`mcp__engram__mem_search`: "mcp__", "__")."""

    PREFIX = "mcp__"
    SEP = "__"
    STDERR_TAIL = 1500

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Any], seconds: float) -> None:
        self.proc = proc
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.seconds = seconds
        self.requests = requests
        self.session_id = ""

    def lane(self, name: str = "main") -> list[Any]:
        return [r for r in self.requests if r.lane == name]

    def tool_results(self, request: Any) -> list[Any]:
        """The tool results one request carries (a harness whose requests repeat the history: the new ones)."""
        return list(request.tool_results())

    def results(self, lane: str | None = None, prefix: str | None = None) -> list[Any]:
        """Every tool result the model received in this run (each once, by call id), in order."""
        prefix = self.PREFIX if prefix is None else prefix
        seen: dict[str, Any] = {}
        for request in self.requests:
            if lane is not None and request.lane != lane:
                continue
            for result in self.tool_results(request):
                if (result.name or "").startswith(prefix):
                    seen.setdefault(result.tool_use_id, result)
        return list(seen.values())

    def results_of(self, tool: str, lane: str | None = None) -> list[Any]:
        return [r for r in self.results(lane) if (r.name or "").endswith(self.SEP + tool)]

    def describe_result(self, result: Any) -> str:
        return f"{result.name} is_error={result.is_error}: {result.text[:160]!r}"

    def describe(self) -> str:
        lines = [f"exit {self.returncode} in {self.seconds:.1f}s", f"stdout: {self.stdout[-1500:]}",
                 f"stderr: {self.stderr[-self.STDERR_TAIL:]}"]  # fmt: skip
        lines += [f"  {self.describe_result(r)}" for r in self.results(prefix="")]
        return "\n".join(lines)


R = TypeVar("R", bound=Run)
S = TypeVar("S", bound="Sandbox")


class Sandbox:
    """A project with memory-governor installed, its own HOME and ledger, and the Engram stand-in."""

    def __init__(self, tmp: Path, tools: Any, model: Any, warm_server: bool = False) -> None:
        self.tmp = tmp
        self.tools = tools
        self.model = model
        self.home = tmp / "home"
        self.project = tmp / "project"
        self.state = tmp / "state"
        for d in (self.home, self.project):
            d.mkdir(parents=True, exist_ok=True)
        with_shared_caches(self.state)  # built once per test process, not by each test's first hook
        self.seed = seed.write_engram_seed(tmp / "engram-seed.json")
        self.store = tmp / "engram-store.json"
        self.call_log = tmp / "engram-calls.jsonl"
        self.engram_env: dict[str, str] = {}
        self.hooks = True
        self.installed = False
        self.warm_server = warm_server
        self.runs: list[Any] = []
        self.env = {
            "PATH": GOVERNOR_PATH,  # the test interpreter's programs first: a project install finds its governor
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "LANG": "C.UTF-8",
            "MEMORY_GOVERNOR_STATE_DIR": str(self.state),
        }
        if not warm_server:
            self.env["MEMORY_GOVERNOR_WARM_SERVER"] = "off"

    # setting up ---------------------------------------------------------------------------
    def write(self, rel: str, text: str) -> Path:
        path = self.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def team_policy(self, text: str) -> Path:
        assert not self.installed, "write the team policy before the first run (the installer reads it)"
        return self.write(".memory-governor/policy.yaml", text)

    def engram_server_env(self) -> dict[str, str]:
        """The Engram stand-in's environment (engram_mcp.py): its seed, store and call log."""
        return {"ENGRAM_SEED": str(self.seed), "ENGRAM_STORE": str(self.store), "ENGRAM_CALL_LOG": str(self.call_log),
                **self.engram_env}  # fmt: skip

    def governor(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([PYTHON, "-m", "governor", *args], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        if check and proc.returncode != 0:
            raise AssertionError(f"governor {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def accept(self) -> str:
        """`memory-governor policy accept`, as the user runs it: in their own terminal, answering y."""
        from tests.terminal import at_a_terminal

        out = at_a_terminal([PYTHON, "-m", "governor", "policy", "accept"], self.project, self.env, "y\n")
        assert out.returncode == 0 and "accepted" in out.stdout, out.stdout
        return out.stdout

    # running ------------------------------------------------------------------------------
    def launch(
        self, args: Sequence[str], timeout: float = RUN_TIMEOUT
    ) -> tuple[subprocess.CompletedProcess[str], int, float]:
        """Run the harness binary in the project: (the process, the stand-in's mark before it, seconds)."""
        mark = self.model.mark()
        started = time.monotonic()
        proc = subprocess.run(list(args), cwd=self.project, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip
        return proc, mark, time.monotonic() - started

    def finish(self, run: R, check: bool) -> R:
        """Keep the run; with `check`: it exited 0 with a session, and the stand-in's script was played."""
        self.runs.append(run)
        if check:
            assert run.returncode == 0 and run.session_id, run.describe()
            assert not self.model.errors, f"script problems: {self.model.errors}\n{run.describe()}"
            left = {lane: n for lane, n in self.model.remaining().items() if n}
            assert not left, f"script steps never requested: {left}\n{run.describe()}"
        return run

    # looking at the outcome ---------------------------------------------------------------
    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """What the Engram server received (tools/call), in order."""
        if not self.call_log.exists():
            return []
        rows = [json.loads(line) for line in self.call_log.read_text().splitlines() if line.strip()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def decisions(self, event: str | None = None) -> list[dict[str, Any]]:
        """The ledger's audit rows (read-only, beside the hooks that write it), oldest first."""
        path = self.state / "ledger.db"
        if not path.exists():
            return []
        import sqlite3

        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM decisions ORDER BY id").fetchall()
        except sqlite3.Error:
            return []
        finally:
            db.close()
        return [dict(r) for r in rows if event is None or r["event"] == event]

    def ledger_calls(self) -> list[tuple[str, str]]:
        """(role, state) of every memory call the ledger holds, in order."""
        import sqlite3

        with sqlite3.connect(self.state / "ledger.db") as db:
            rows = db.execute("SELECT role, state FROM calls WHERE role != 'governor' ORDER BY created, rowid")
            return [(str(role), str(state)) for role, state in rows]

    def governor_errors(self) -> str:
        path = self.state / "errors.log"
        return path.read_text() if path.exists() else ""


def fresh(server: Any) -> Iterator[Any]:
    """A session-scoped model stand-in for one test: reset before and after."""
    server.reset()
    yield server
    server.reset()


def governed(harness: S) -> Iterator[S]:
    """The harness for one test; the warm server (if on) stopped after; no governor error logged."""
    try:
        yield harness
    finally:
        if harness.warm_server:
            harness.governor("serve", "--stop", check=False)
        share_back(harness.state)
    assert not harness.governor_errors(), f"memory-governor logged errors:\n{harness.governor_errors()}"


def short_state(harness: S, prefix: str) -> Iterator[S]:
    """`governed(harness)` with its state directory at a short path, as a user's is: a host that
    connects to the warm server's Unix socket by its whole path (a JavaScript plugin, extension or
    module) can reach no socket past 107 bytes."""
    import shutil
    import tempfile

    harness.state = Path(tempfile.mkdtemp(prefix=prefix))
    harness.env["MEMORY_GOVERNOR_STATE_DIR"] = str(harness.state)
    try:
        yield from governed(harness)
    finally:
        shutil.rmtree(harness.state, ignore_errors=True)
