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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
from fake_gemini import FakeGemini, Request, Step
from sandbox import HERE, PYTHON, Run, Sandbox, fresh, governed

# The pin: change it here only.
GEMINI_CLI_VERSION = npm.pin("@google/gemini-cli", "0.61.0")
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


class GeminiRun(Run):
    """One `gemini -p` invocation: its output, and what the model received during it."""

    PREFIX, SEP, STDERR_TAIL = "mcp_", "_", 2500

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Request], seconds: float,
                 side: list[Request] | None = None) -> None:  # fmt: skip
        super().__init__(proc, requests, seconds)
        self.side = side or []  # requests answered outside the script (router, compression)
        try:
            self.output: dict[str, Any] = json.loads(proc.stdout)
        except ValueError:
            self.output = {}
        self.session_id = self.output.get("session_id", "")


class GeminiHarness(Sandbox):
    """A project with memory-governor installed for Gemini CLI, and a way to run `gemini -p` in it.

    The seed, the Engram call log, team policies, `governor(...)` and `calls(...)` are the
    shared sandbox's (sandbox.py); the settings and the run are Gemini's."""

    def __init__(self, tmp: Path, tools: GeminiTools, model: FakeGemini, warm_server: bool = False) -> None:
        super().__init__(tmp, tools, model, warm_server)
        self.env.update({
            "GEMINI_API_KEY": "gemini-e2e-fake",
            "GOOGLE_GEMINI_BASE_URL": model.url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "NO_COLOR": "1",
            # Gemini runs itself again in a child node process only to raise its heap limit (half of
            # the machine's memory): the whole CLI loaded twice per run. Hooks, settings and the
            # model's requests are the same either way (docs/gemini-cli.md).
            "GEMINI_CLI_NO_RELAUNCH": "true",
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
                "env": self.engram_server_env(),
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
        proc, mark, seconds = self.launch(args, RUN_TIMEOUT)
        side = [r for r in self.model.requests[mark:] if r.lane is None]
        return self.finish(GeminiRun(proc, self.model.since(mark), seconds, side), check)


@pytest.fixture(scope="session")
def gemini_tools() -> GeminiTools:
    return install_gemini()


@pytest.fixture(scope="session")
def gemini_model_server() -> Iterator[FakeGemini]:
    with FakeGemini() as model:
        yield model


@pytest.fixture
def gemini_model(gemini_model_server: FakeGemini) -> Iterator[FakeGemini]:
    yield from fresh(gemini_model_server)


@pytest.fixture
def gem(tmp_path: Path, gemini_tools: GeminiTools, gemini_model: FakeGemini) -> Iterator[GeminiHarness]:
    yield from governed(GeminiHarness(tmp_path, gemini_tools, gemini_model))


@pytest.fixture
def gem_warm(tmp_path: Path, gemini_tools: GeminiTools, gemini_model: FakeGemini) -> Iterator[GeminiHarness]:
    """Like gem, but as a user runs it: the warm server left on (the default; stopped afterwards) and
    Gemini relaunching itself with its larger heap."""
    harness = GeminiHarness(tmp_path, gemini_tools, gemini_model, warm_server=True)
    del harness.env["GEMINI_CLI_NO_RELAUNCH"]
    yield from governed(harness)
