"""End-to-end fixtures for the real Gemini CLI binary, offline, against a scripted model.

Each test gets a fresh project with memory-governor installed by its own installer
(`python -m governor install gemini-cli --project DIR`, which writes the hooks into the
project's `.gemini/settings.json`), the Engram-shaped MCP server (engram_mcp.py, server key
"engram") in the same file, a throwaway HOME whose `~/.gemini/settings.json` selects API-key
auth and turns telemetry and update checks off, and its own ledger. The model is
fake_gemini.FakeGemini on 127.0.0.1 (GOOGLE_GEMINI_BASE_URL, a fake GEMINI_API_KEY):
it plays a script and records every request, so tests assert on what THE MODEL RECEIVED.

`gemini -p PROMPT --yolo -m gemini-2.5-flash -o json`: a pinned model skips the model router
(which otherwise asks the model to classify each prompt; the stand-in answers that too);
GEMINI_CLI_TRUST_WORKSPACE=true trusts the project folder, without which Gemini exits 55 in
headless mode (and with --skip-trust ignores the project's settings, hooks and MCP server).
Subagent definitions go under HOME (`~/.gemini/agents/`): project ones must be acknowledged
interactively first.

The pinned binary is installed once into the e2e cache (tests/e2e/npm.py). No node/npm, or a
failed install: the tests are skipped with the reason, except when CI=true, where they fail.
A test module uses these fixtures with `pytest_plugins = ["gemini_env"]`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
from conftest import HERE, PYTHON, Harness
from fake_gemini import FakeGemini, Request, Step, ToolResult

# The pin: change it here only.
GEMINI_CLI_VERSION = "0.61.0"
MODEL = "gemini-2.5-flash"
RUN_TIMEOUT = 120
USER_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


class GeminiTools:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.gemini = root / "node_modules" / ".bin" / "gemini"
        self.node = shutil.which("node") or "node"

    def ready(self) -> bool:
        return npm.version_ok(self.gemini, GEMINI_CLI_VERSION)


def install_gemini() -> GeminiTools:
    packages = {"@google/gemini-cli": GEMINI_CLI_VERSION}
    return GeminiTools(npm.install("gemini-cli", packages, lambda folder: GeminiTools(folder).ready()))


class GeminiRun:
    """One `gemini -p` invocation: its output, and what the model received during it."""

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Request], seconds: float,
                 side: list[Request] | None = None) -> None:  # fmt: skip
        self.proc = proc
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.seconds = seconds
        self.requests = requests
        self.side = side or []  # requests answered outside the script (router, compression)
        try:
            self.output: dict[str, Any] = json.loads(proc.stdout)
        except ValueError:
            self.output = {}
        self.session_id: str = self.output.get("session_id", "")

    def lane(self, name: str = "main") -> list[Request]:
        return [r for r in self.requests if r.lane == name]

    def results(self, lane: str | None = None, prefix: str = "mcp_") -> list[ToolResult]:
        """Every function response the model received in this run (each once, by call id), in order."""
        seen: dict[str, ToolResult] = {}
        for request in self.requests:
            if lane is not None and request.lane != lane:
                continue
            for result in request.tool_results():
                if (result.name or "").startswith(prefix):
                    seen.setdefault(result.tool_use_id, result)
        return list(seen.values())

    def results_of(self, tool: str, lane: str | None = None) -> list[ToolResult]:
        return [r for r in self.results(lane) if (r.name or "").endswith("_" + tool)]

    def describe(self) -> str:
        lines = [f"exit {self.returncode} in {self.seconds:.1f}s", f"stdout: {self.stdout[-1500:]}",
                 f"stderr: {self.stderr[-2500:]}"]  # fmt: skip
        for r in self.results(prefix=""):
            lines.append(f"  {r.name} is_error={r.is_error}: {r.text[:160]!r}")
        return "\n".join(lines)


class GeminiHarness(Harness):
    """A project with memory-governor installed for Gemini CLI, and a way to run `gemini -p` in it.

    The seed, the Engram call log, team policies, `governor(...)` and `calls(...)` are the
    Claude Code harness's (conftest.Harness); the settings and the run are Gemini's."""

    def __init__(self, tmp: Path, tools: GeminiTools, model: FakeGemini, warm_server: bool = False) -> None:
        super().__init__(tmp, tools, model, warm_server)  # type: ignore[arg-type]
        for key in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"):
            self.env.pop(key, None)
        self.env.update({
            "GEMINI_API_KEY": "gemini-e2e-fake",
            "GOOGLE_GEMINI_BASE_URL": model.url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "NO_COLOR": "1",
        })  # fmt: skip
        (self.home / ".gemini").mkdir(parents=True, exist_ok=True)
        (self.home / ".gemini" / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=2))

    @property
    def settings_file(self) -> Path:
        return self.project / ".gemini" / "settings.json"

    def agent(self, name: str, body: str, tools: Iterable[str] = (), front: dict[str, str] | None = None) -> Path:
        """A subagent definition in ~/.gemini/agents/ (project ones need an interactive acknowledgement)."""
        lines = ["---", f"name: {name}", f"description: The {name} agent. Use it when asked to run {name}."]
        if tools:
            lines += ["tools:", *[f"  - {tool}" for tool in tools]]
        lines += [f"{k}: {v}" for k, v in (front or {}).items()]
        lines += ["---", body, ""]
        path = self.home / ".gemini" / "agents" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines), encoding="utf-8")
        return path

    def _write_mcp_config(self) -> None:
        """The Engram server in the project's settings, beside whatever the installer wrote there."""
        settings = json.loads(self.settings_file.read_text()) if self.settings_file.exists() else {}
        settings["mcpServers"] = {
            "engram": {
                "command": PYTHON,
                "args": [str(HERE / "engram_mcp.py")],
                "env": {"ENGRAM_SEED": str(self.seed), "ENGRAM_STORE": str(self.store),
                        "ENGRAM_CALL_LOG": str(self.call_log), **self.engram_env},
                "trust": True,
            }
        }  # fmt: skip
        self.settings_file.parent.mkdir(parents=True, exist_ok=True)
        self.settings_file.write_text(json.dumps(settings, indent=2))

    def install(self) -> None:
        """The project's own installer writes the hooks into .gemini/settings.json."""
        self.governor("install", "gemini-cli", "--project", str(self.project))
        settings = json.loads(self.settings_file.read_text())
        assert "BeforeTool" in settings["hooks"], settings
        self.installed = True

    def run(  # type: ignore[override]
        self,
        prompt: str,
        main: Iterable[Step] = (),
        lanes: dict[str, Iterable[Step]] | None = None,
        resume: bool = False,
        check: bool = True,
    ) -> GeminiRun:
        self._write_mcp_config()
        if self.hooks and not self.installed:
            self.install()
        self.model.script(main, lanes)
        args = [str(self.tools.gemini), "-p", prompt, "--yolo", "-m", MODEL, "-o", "json"]  # type: ignore[attr-defined]
        if resume:
            args += ["--resume", "latest"]
        mark = self.model.mark()
        started = time.monotonic()
        proc = subprocess.run(args, cwd=self.project, env=self.env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        side = [r for r in self.model.requests[mark:] if r.lane is None]
        run = GeminiRun(proc, self.model.since(mark), time.monotonic() - started, side)
        self.runs.append(run)  # type: ignore[arg-type]
        if check:
            assert proc.returncode == 0 and run.session_id, run.describe()
            assert not self.model.errors, f"script problems: {self.model.errors}\n{run.describe()}"
            left = {lane: n for lane, n in self.model.remaining().items() if n}
            assert not left, f"script steps never requested: {left}\n{run.describe()}"
        return run

    def ledger_calls(self) -> list[tuple[str, str]]:
        """(role, state) of every memory call the ledger holds, in order."""
        import sqlite3

        with sqlite3.connect(self.state / "ledger.db") as db:
            rows = db.execute("SELECT role, state FROM calls WHERE role != 'governor' ORDER BY created, rowid")
            return [(str(role), str(state)) for role, state in rows]


@pytest.fixture(scope="session")
def gemini_tools() -> GeminiTools:
    return install_gemini()


@pytest.fixture(scope="session")
def gemini_model_server() -> Iterator[FakeGemini]:
    with FakeGemini() as model:
        yield model


@pytest.fixture
def gemini_model(gemini_model_server: FakeGemini) -> Iterator[FakeGemini]:
    gemini_model_server.reset()
    yield gemini_model_server
    gemini_model_server.reset()


@pytest.fixture
def gem(tmp_path: Path, gemini_tools: GeminiTools, gemini_model: FakeGemini) -> Iterator[GeminiHarness]:
    harness = GeminiHarness(tmp_path, gemini_tools, gemini_model)
    yield harness
    assert not harness.governor_errors(), f"memory-governor logged errors:\n{harness.governor_errors()}"


@pytest.fixture
def gem_warm(tmp_path: Path, gemini_tools: GeminiTools, gemini_model: FakeGemini) -> Iterator[GeminiHarness]:
    """Like gem, but with the warm server left on (the default); stopped afterwards."""
    harness = GeminiHarness(tmp_path, gemini_tools, gemini_model, warm_server=True)
    try:
        yield harness
    finally:
        harness.governor("serve", "--stop", check=False)
    assert not harness.governor_errors(), f"memory-governor logged errors:\n{harness.governor_errors()}"
