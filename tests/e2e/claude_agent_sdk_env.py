"""End-to-end fixtures for the real Claude Agent SDK (Python, from PyPI), offline.

The pinned `claude-agent-sdk` wheel (it bundles the Claude Code binary it drives, ~400 MB
unpacked) is installed once with `pip install --no-deps --target` into the e2e cache
(tests/e2e/npm.py's cache root), with the one dependency the test venv lacks (sniffio; anyio,
jsonschema and mcp come with the test extra), and reused. Missing pip or a failed install: the
tests are skipped with the reason, except under CI=true, where they fail.

Each run is an orchestrator program of its own (sdk_driver.py, the pinned SDK on PYTHONPATH)
calling `query()` with options built from the test: cwd the test's project, env the harness's
(throwaway HOME, its own ledger, the model stand-in's URL), the Engram-shaped server, and
`allowed_tools` (the binary refuses bypassPermissions as root). The model is fake_model.FakeModel,
as for Claude Code. A test module uses these fixtures with `pytest_plugins = ["claude_agent_sdk_env"]`.
"""

from __future__ import annotations

import fcntl
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
from conftest import ENGRAM_TOOLS, PYTHON, RUN_TIMEOUT, Harness, Run
from fake_model import FakeModel, Step

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# The pin: change it here only (and in pyproject.toml's [sdk] extra).
SDK_VERSION = npm.pin("claude-agent-sdk", "0.2.190", "pypi")
BUNDLED_CLAUDE_CODE = "2.1.337"  # what that wheel's _cli_version.py says (0.2.189: 2.1.332)
MISSING_DEPENDENCIES = ("sniffio",)  # of the SDK's, not brought by the test extra


def sdk_folder() -> Path:
    """The pinned SDK, installed once into the e2e cache."""
    folder = npm.cache_root() / f"claude-agent-sdk-{SDK_VERSION}"
    if _ready(folder):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with open(npm.cache_root() / ".claude-agent-sdk.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _ready(folder):
            return folder
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                 "--target", str(folder), f"claude-agent-sdk=={SDK_VERSION}", *MISSING_DEPENDENCIES],
                capture_output=True, text=True, timeout=1800,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as err:
            npm.unavailable(f"pip install of claude-agent-sdk=={SDK_VERSION} failed: {err}")
        if proc.returncode != 0 or not _ready(folder):
            npm.unavailable(f"pip install of claude-agent-sdk=={SDK_VERSION} failed (exit {proc.returncode}): "
                            f"{proc.stderr[-2000:]}")  # fmt: skip
    return folder


# @anthropic-ai/claude-agent-sdk on npm (its platform package carries the binary).
TS_SDK_VERSION = npm.pin("@anthropic-ai/claude-agent-sdk", "0.3.337")  # runs Claude Code 2.1.337 (0.3.334: 2.1.334)


def ts_sdk_folder() -> Path:
    """The pinned TypeScript SDK, installed once into the e2e cache by npm (tests/e2e/npm.py)."""
    return npm.install("claude-agent-sdk-ts", {"@anthropic-ai/claude-agent-sdk": TS_SDK_VERSION}, _ts_ready)


def ts_sdk_module(folder: Path) -> Path:
    return folder / "node_modules" / "@anthropic-ai" / "claude-agent-sdk" / "sdk.mjs"


def _ts_ready(folder: Path) -> bool:
    manifest = folder / "node_modules" / "@anthropic-ai" / "claude-agent-sdk" / "package.json"
    native = folder / "node_modules" / "@anthropic-ai" / "claude-agent-sdk-linux-x64" / "claude"
    try:
        return json.loads(manifest.read_text())["version"] == TS_SDK_VERSION and native.exists()
    except (OSError, ValueError, KeyError):
        return False


def _ready(folder: Path) -> bool:
    version = folder / "claude_agent_sdk" / "_version.py"
    bundled = folder / "claude_agent_sdk" / "_bundled" / "claude"
    sniffio = folder / "sniffio"
    return version.exists() and f'"{SDK_VERSION}"' in version.read_text() and bundled.exists() and sniffio.exists()


class SdkHarness(Harness):
    """A project, a HOME, a ledger, and a way to run an orchestrator program on the SDK in it."""

    def __init__(self, tmp: Path, sdk: Path, model: FakeModel) -> None:
        super().__init__(tmp, tools=None, model=model)  # type: ignore[arg-type]
        self.sdk = sdk
        self.hooks = False  # the project's Claude Code install only when a test asks (install())
        self.own_hook_log = tmp / "own-hooks.jsonl"
        self.agents: dict[str, dict[str, Any]] = {}

    def define_agent(self, name: str, prompt: str, tools: Iterable[str]) -> None:
        """A programmatic subagent (options.agents): no definition file anywhere."""
        self.agents[name] = {"description": f"The {name} agent. Use it when asked to run {name}.", "prompt": prompt,
                             "tools": list(tools)}  # fmt: skip

    def run_sdk(self, prompt: str, main: Iterable[Step] = (), lanes: dict[str, Iterable[Step]] | None = None,
                setting_sources: list[str] | None = None, govern: bool = True, resume: str | None = None,
                driver: list[str] | None = None, extra: dict[str, Any] | None = None) -> Run:  # fmt: skip
        self._write_mcp_config()
        servers = json.loads(self.mcp_config.read_text())["mcpServers"]
        self.model.script(main, lanes)
        spec = {
            "cwd": str(self.project), "env": self.env, "setting_sources": setting_sources, "mcp_servers": servers,
            "allowed_tools": [*ENGRAM_TOOLS, "Agent", "Task"], "agents": self.agents, "prompt": prompt,
            "govern": govern, "own_hook_log": str(self.own_hook_log), "resume": resume, **(extra or {}),
        }  # fmt: skip
        spec_file = self.tmp / "sdk-spec.json"
        spec_file.write_text(json.dumps(spec))
        # The orchestrator's own environment: the harness's, with the SDK and this checkout importable.
        env = {**self.env, "PYTHONPATH": os.pathsep.join([str(self.sdk), str(ROOT)])}
        mark = self.model.mark()
        started = time.monotonic()
        proc = subprocess.run([*(driver or [PYTHON, str(HERE / "sdk_driver.py")]), str(spec_file)], cwd=self.tmp, env=env,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        lines = proc.stdout.strip().splitlines()
        proc.stdout = lines[-1] if lines else ""
        run = Run(proc, self.model.since(mark), time.monotonic() - started)
        self.runs.append(run)
        assert proc.returncode == 0 and run.session_id, run.describe()
        assert not self.model.errors, f"script problems: {self.model.errors}\n{run.describe()}"
        left = {lane: n for lane, n in self.model.remaining().items() if n}
        assert not left, f"script steps never requested: {left}\n{run.describe()}"
        return run

    def run_ts(self, prompt: str, main: Iterable[Step] = (), setting_sources: list[str] | None = None) -> Run:
        """The same orchestrator on the TypeScript SDK, governed by the module `install claude-agent-sdk` wrote."""
        ts = ts_sdk_folder()
        self.governor("install", "claude-agent-sdk", "--project", str(self.tmp))
        return self.run_sdk(
            prompt,
            main,
            setting_sources=setting_sources,
            driver=["node", str(HERE / "sdk_driver.mjs")],
            extra={"sdk": str(ts_sdk_module(ts)), "module": str(self.tmp / "memory-governor.mjs")},
        )

    def own_hook_calls(self) -> list[dict[str, Any]]:
        if not self.own_hook_log.exists():
            return []
        return [json.loads(line) for line in self.own_hook_log.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def sdk() -> Path:
    return sdk_folder()


@pytest.fixture
def orchestrator(tmp_path: Path, sdk: Path, model: FakeModel) -> Iterator[SdkHarness]:
    harness = SdkHarness(tmp_path, sdk, model)
    yield harness
    assert not harness.governor_errors(), f"memory-governor logged errors:\n{harness.governor_errors()}"
