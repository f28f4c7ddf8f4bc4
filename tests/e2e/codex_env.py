"""End-to-end fixtures for Codex CLI: the real binary, offline, against a scripted Responses API.

Each test gets a throwaway HOME and CODEX_HOME (HOME/.codex) whose config.toml points Codex at
fake_responses.FakeResponses on 127.0.0.1 (a model provider with ``wire_api = "responses"``)
and starts the Engram-shaped MCP server (engram_mcp.py, server key ``engram``); a project
folder Codex trusts; its own ledger (MEMORY_GOVERNOR_STATE_DIR). memory-governor is put there
by its own installer (`python -m governor install codex --project DIR`), which also writes
the hooks' trust, so the runs use no ``--dangerously-bypass-hook-trust``: every test goes
through the trusted-install path. A run is ``codex exec --json``; ``resume=`` continues a
session with ``codex exec resume``.

test_codex.py imports the fixtures (`codex`, `codex_tools`, `responses`, `responses_server`);
tests/e2e/conftest.py stays the Claude Code suite's.

The facts the binary showed (0.171.0) are in docs/codex.md and pinned by test_codex.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
import seed
from fake_responses import FakeResponses, Request, Step, ToolResult

from tests.conftest import GOVERNOR_PATH

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))

CODEX_VERSION = "0.171.0"  # the pin: change it here only
RUN_TIMEOUT = 120
MODEL = "gpt-5.1-codex"
COMPACT_AT = 20_000  # model_auto_compact_token_limit; a reply reporting more makes Codex compact next


class CodexTools:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "node_modules" / ".bin"
        self.codex = self.bin / "codex"

    def ready(self) -> bool:
        return npm.version_ok(self.codex, CODEX_VERSION)


@pytest.fixture(scope="session", name="codex_tools")
def codex_tools_fixture() -> CodexTools:
    """The pinned @openai/codex, installed once into the e2e cache (tests/e2e/npm.py), then reused."""
    packages = {"@openai/codex": CODEX_VERSION}
    return CodexTools(npm.install("codex", packages, lambda folder: CodexTools(folder).ready()))


@pytest.fixture(scope="session", name="responses_server")
def responses_server_fixture() -> Iterator[FakeResponses]:
    with FakeResponses() as model:
        yield model


@pytest.fixture(name="responses")
def responses_fixture(responses_server: FakeResponses) -> Iterator[FakeResponses]:
    responses_server.reset()
    responses_server.total_tokens = 15
    yield responses_server
    responses_server.reset()


class Run:
    """One `codex exec --json`: its events, and what the model received during it."""

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Request], seconds: float) -> None:
        self.proc = proc
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.seconds = seconds
        self.requests = requests
        self.events = []
        for line in proc.stdout.splitlines():
            try:
                self.events.append(json.loads(line))
            except ValueError:
                continue
        started = [e for e in self.events if e.get("type") == "thread.started"]
        self.session_id: str = started[0]["thread_id"] if started else ""

    def lane(self, name: str = "main") -> list[Request]:
        return [r for r in self.requests if r.lane == name]

    def results(self, lane: str | None = None, prefix: str = "mcp__") -> list[ToolResult]:
        """Every tool result the model received in this run (each once), in order."""
        seen: dict[str, ToolResult] = {}
        # A resumed session sends its history again: results already in the run's first request are earlier runs'.
        earlier = {r.tool_use_id for r in self.requests[0].all_tool_results()} if self.requests else set()
        for request in self.requests:
            if lane is not None and request.lane != lane:
                continue
            for result in request.all_tool_results():
                if (result.name or "").startswith(prefix) and result.tool_use_id not in earlier:
                    seen.setdefault(result.tool_use_id, result)
        return list(seen.values())

    def results_of(self, tool: str, lane: str | None = None) -> list[ToolResult]:
        return [r for r in self.results(lane) if (r.name or "").endswith("__" + tool)]

    def describe(self) -> str:
        lines = [f"exit {self.returncode} in {self.seconds:.1f}s", f"stdout: {self.stdout[-1500:]}",
                 f"stderr: {self.stderr[-1500:]}"]  # fmt: skip
        lines += [f"  {r.name} ran={r.ran}: {r.raw[:160]!r}" for r in self.results(prefix="")]
        return "\n".join(lines)


class CodexHarness:
    """A project with memory-governor installed for Codex, and a way to run `codex exec` in it."""

    def __init__(self, tmp: Path, tools: CodexTools, model: FakeResponses) -> None:
        self.tmp = tmp
        self.tools = tools
        self.model = model
        self.home = tmp / "home"
        self.codex_home = self.home / ".codex"
        self.project = tmp / "project"
        self.state = tmp / "state"
        for folder in (self.codex_home, self.project):
            folder.mkdir(parents=True, exist_ok=True)
        self.seed = seed.write_engram_seed(tmp / "engram-seed.json")
        self.store = tmp / "engram-store.json"
        self.call_log = tmp / "engram-calls.jsonl"
        self.extra_config = ""  # TOML appended to config.toml before the install
        self.installed = False
        self.runs: list[Run] = []
        self.env = {
            "PATH": f"{tools.bin}{os.pathsep}{GOVERNOR_PATH}",
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "LANG": "C.UTF-8",
            "OPENAI_API_KEY": "sk-e2e-fake",
            "MEMORY_GOVERNOR_STATE_DIR": str(self.state),
            "MEMORY_GOVERNOR_WARM_SERVER": "off",
        }

    # setting up ---------------------------------------------------------------------------
    def write(self, rel: str, text: str) -> Path:
        path = self.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def team_policy(self, text: str) -> Path:
        assert not self.installed, "write the team policy before the first run (the installer reads it)"
        return self.write(".memory-governor/policy.yaml", text)

    def agent(self, name: str, instructions: str) -> Path:
        """A Codex custom agent: .codex/agents/<name>.toml (name, description, developer_instructions)."""
        body = (f"name = {json.dumps(name)}\ndescription = {json.dumps(f'The {name} agent.')}\n"
                f"developer_instructions = {json.dumps(instructions)}\n")  # fmt: skip
        return self.write(f".codex/agents/{name}.toml", body)

    def config_text(self) -> str:
        engram_env = {
            "ENGRAM_SEED": str(self.seed),
            "ENGRAM_STORE": str(self.store),
            "ENGRAM_CALL_LOG": str(self.call_log),
        }
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in engram_env.items())
        return "\n".join([
            f'model = "{MODEL}"', 'model_provider = "e2e"', 'approval_policy = "never"', 'sandbox_mode = "read-only"',
            f"model_auto_compact_token_limit = {COMPACT_AT}", "model_context_window = 200000", "",
            "[model_providers.e2e]", 'name = "e2e"', f'base_url = "{self.model.url}/v1"', 'wire_api = "responses"',
            "request_max_retries = 0", "stream_max_retries = 0", "",
            "[mcp_servers.engram]", f"command = {json.dumps(PYTHON)}", f"args = [{json.dumps(str(HERE / 'engram_mcp.py'))}]",
            f"env = {{ {env} }}", "",
            f"[projects.{json.dumps(str(self.project))}]", 'trust_level = "trusted"', "",
            self.extra_config, "",
        ])  # fmt: skip

    def governor(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([PYTHON, "-m", "governor", *args], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        if check and proc.returncode != 0:
            raise AssertionError(f"governor {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def install(self, *args: str) -> None:
        """Codex's config first (the user's), then the project's own installer adds hooks and their trust."""
        (self.codex_home / "config.toml").write_text(self.config_text(), encoding="utf-8")
        self.governor("install", "codex", "--project", str(self.project), *args)
        self.installed = True

    # running ------------------------------------------------------------------------------
    def run(self, prompt: str, main: Iterable[Step] = (), lanes: dict[str, Iterable[Step]] | None = None,
            resume: str | None = None, args: Iterable[str] = (), check: bool = True) -> Run:  # fmt: skip
        if not self.installed:
            self.install()
        self.model.script(main, lanes)
        command = [str(self.tools.codex), "exec", "--json", "--skip-git-repo-check", *args]
        if resume:
            command += ["resume", resume]
        mark = self.model.mark()
        started = time.monotonic()
        proc = subprocess.run([*command, prompt], cwd=self.project, env=self.env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        run = Run(proc, self.model.since(mark), time.monotonic() - started)
        self.runs.append(run)
        if check:
            assert proc.returncode == 0 and run.session_id, run.describe()
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

    def governor_errors(self) -> str:
        path = self.state / "errors.log"
        return path.read_text() if path.exists() else ""

    def rollouts(self) -> list[Path]:
        return sorted((self.codex_home / "sessions").rglob("rollout-*.jsonl"))


@pytest.fixture(name="codex")
def codex_fixture(tmp_path: Path, codex_tools: CodexTools, responses: FakeResponses) -> Iterator[CodexHarness]:
    harness = CodexHarness(tmp_path, codex_tools, responses)
    yield harness
    assert not harness.governor_errors(), f"memory-governor logged errors:\n{harness.governor_errors()}"
