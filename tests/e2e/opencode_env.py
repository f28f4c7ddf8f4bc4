"""End-to-end fixtures for the real OpenCode binary, offline, against a scripted model.

Each test gets a fresh project with memory-governor installed by its own installer
(`python -m governor install opencode --project DIR`, which writes the plugin into the project's
`.opencode/plugin/memory-governor.js`), a project `opencode.json` naming a custom provider
(`@ai-sdk/openai-compatible`, built into the binary) whose `options.baseURL` is the Chat
Completions stand-in (fake_chat.FakeChat), and the Engram-shaped MCP server (engram_mcp.py, server
key "engram": its tools reach the model as `engram_mem_search` ...), a throwaway HOME and XDG
folders, and its own ledger. `opencode run --format json PROMPT` runs it; `--session ID` continues
a session.

Offline: OPENCODE_DISABLE_MODELS_FETCH=1 (no models.dev), autoupdate and sharing off. OpenCode
installs `@opencode-ai/plugin` into every config folder it reads (the project's `.opencode`, its
own under XDG_CONFIG_HOME), unless that folder's package.json and package-lock.json already list
it and `node_modules/` exists: the fixture writes those in both (and points npm at a closed
loopback port without retries, so an install it still tried fails at once instead of reaching
the network). The plugin itself has no dependencies.

The pinned package is installed once into the e2e cache (tests/e2e/npm.py). No node/npm, or a
failed install: the tests are skipped with the reason, except when CI=true, where they fail.
A test module uses these fixtures with `pytest_plugins = ["opencode_env"]`.

BEHAVIOUR of the real binary (OpenCode 1.18.33, observed with probe plugins logging each hook
call; docs/opencode.md): every model call is a streamed `POST /v1/chat/completions`; a title
request without tools comes first (answered outside the script); a subagent (the `task` tool)
talks to the model with its definition's body in the system prompt and the dispatch prompt as
its first user message.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
from fake_chat import FakeChat, Request, Step, ToolResult
from sandbox import HERE, PYTHON, Run, Sandbox, fresh, governed, short_state

# The pin: change it here only.
OPENCODE_VERSION = npm.pin("opencode-ai", "1.18.33")
PROVIDER, MODEL = "fake", "gpt-4.1"
RUN_TIMEOUT = 240  # a run takes ~10 s; generous for a loaded 2-core machine
CLOSED_PORT = "http://127.0.0.1:9/"  # npm's registry for these runs: nothing listens there


class OpenCodeTools:
    """The installed binary (`opencode`, or a fork's: BINARY) at VERSION."""

    BINARY, VERSION = "opencode", OPENCODE_VERSION

    def __init__(self, root: Path) -> None:
        self.root = root
        self.opencode = root / "node_modules" / ".bin" / self.BINARY

    def ready(self) -> bool:
        return npm.version_ok(self.opencode, self.VERSION)


def install_opencode() -> OpenCodeTools:
    packages = {"opencode-ai": OPENCODE_VERSION}
    return OpenCodeTools(npm.install("opencode", packages, lambda folder: OpenCodeTools(folder).ready()))


class OpenCodeRun(Run):
    """One `opencode run` invocation: its output, and what the model received during it."""

    PREFIX, SEP, STDERR_TAIL = "engram_", "_", 2500

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Request], seconds: float) -> None:
        super().__init__(proc, requests, seconds)
        self.events: list[dict[str, Any]] = []
        for line in proc.stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.events.append(event)
        self.session_id = next((str(e["sessionID"]) for e in self.events if e.get("sessionID")), "")

    def results_of(self, tool: str, lane: str | None = None) -> list[ToolResult]:
        return [r for r in self.results(lane) if r.name == f"engram_{tool}"]

    def describe_result(self, result: ToolResult) -> str:
        return f"{result.name}: {result.text[:160]!r}"


class OpenCodeHarness(Sandbox):
    """A project with memory-governor installed for OpenCode, and a way to run `opencode run` in it.

    The seed, the Engram call log, team policies, `governor(...)` and `calls(...)` are the
    shared sandbox's (sandbox.py); the config and the run are OpenCode's. A fork that loads
    OpenCode's plugins (Kilo Code) changes the class attributes: the harness it installs, its
    project folder, its config folder under XDG_CONFIG_HOME, its variables' prefix, and the plugin
    package it would install into each config folder."""

    HARNESS, FOLDER, CONFIG, ENV, CONFIG_FILE = "opencode", ".opencode", "opencode", "OPENCODE", "opencode.json"
    PLUGIN_PACKAGE = ("@opencode-ai/plugin", OPENCODE_VERSION)

    def __init__(self, tmp: Path, tools: OpenCodeTools, model: FakeChat, warm_server: bool = False) -> None:
        super().__init__(tmp, tools, model, warm_server)
        self.env.update({
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            f"{self.ENV}_DISABLE_MODELS_FETCH": "1",
            f"{self.ENV}_DISABLE_AUTOUPDATE": "1",
            f"{self.ENV}_DISABLE_LSP_DOWNLOAD": "1",
            "npm_config_registry": CLOSED_PORT,
            "npm_config_fetch_retries": "0",
            "NO_COLOR": "1",
        })  # fmt: skip
        self.config: dict[str, Any] = {}  # more of opencode.json (a test's own keys)

    @property
    def plugin(self) -> Path:
        return self.project / self.FOLDER / "plugin" / "memory-governor.js"

    @property
    def user_plugin(self) -> Path:
        return self.home / ".config" / self.CONFIG / "plugin" / "memory-governor.js"

    def agent(self, name: str, body: str, front: dict[str, str] | None = None) -> Path:
        lines = ["---", f"description: The {name} agent. Use it when asked to run {name}.", "mode: subagent"]
        lines += [f"{k}: {v}" for k, v in (front or {}).items()]
        lines += ["---", body, ""]
        return self.write(f"{self.FOLDER}/agent/{name}.md", "\n".join(lines))

    def _write_config(self) -> None:
        model_url = self.model.url  # type: ignore[attr-defined]
        engram = {"type": "local", "command": [PYTHON, str(HERE / "engram_mcp.py")], "enabled": True,
                  "environment": self.engram_server_env()}  # fmt: skip
        config = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "snapshot": False,
            "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "Loopback",
                                    "options": {"baseURL": f"{model_url}/v1", "apiKey": "sk-e2e-fake"},
                                    "models": {MODEL: {"name": MODEL, "tool_call": True,
                                                       "limit": {"context": 128000, "output": 4096}}}}},
            "model": f"{PROVIDER}/{MODEL}",
            "mcp": {"engram": engram},
            **self.config,
        }  # fmt: skip
        (self.project / self.CONFIG_FILE).write_text(json.dumps(config, indent=2))
        # OpenCode installs @opencode-ai/plugin into each config folder it reads (the project's
        # .opencode, and its own in XDG_CONFIG_HOME) unless it is listed there already; a failed
        # install costs ~70 s of npm retries before the run goes on.
        listed = dict([self.PLUGIN_PACKAGE])
        for folder in (self.project / self.FOLDER, self.home / ".config" / self.CONFIG):
            (folder / "node_modules").mkdir(parents=True, exist_ok=True)
            (folder / "package.json").write_text(json.dumps({"dependencies": listed}))
            (folder / "package-lock.json").write_text(json.dumps({"packages": {"": {"dependencies": listed}}}))

    def install(self, *args: str) -> None:
        """The project's own installer writes .opencode/plugin/memory-governor.js."""
        self.governor("install", self.HARNESS, "--project", str(self.project), *args)
        assert (self.user_plugin if "user" in args else self.plugin).exists()
        self.installed = True

    def run(  # type: ignore[override]
        self,
        prompt: str,
        main: Iterable[Step] = (),
        lanes: dict[str, Iterable[Step]] | None = None,
        session: str | None = None,
        check: bool = True,
    ) -> OpenCodeRun:
        if self.hooks and not self.installed:
            self.install()
        self._write_config()
        self.model.script(main, lanes)
        args = [str(self.tools.opencode), "run", "--format", "json"]  # type: ignore[attr-defined]
        if session:
            args += ["--session", session]
        proc, mark, seconds = self.launch([*args, prompt], RUN_TIMEOUT)
        return self.finish(OpenCodeRun(proc, self.model.since(mark), seconds), check)


@pytest.fixture(scope="session")
def opencode_tools() -> OpenCodeTools:
    return install_opencode()


@pytest.fixture(scope="session")
def opencode_chat_server() -> Iterator[FakeChat]:
    with FakeChat() as model:
        yield model


@pytest.fixture
def opencode_chat(opencode_chat_server: FakeChat) -> Iterator[FakeChat]:
    yield from fresh(opencode_chat_server)


@pytest.fixture
def oc(tmp_path: Path, opencode_tools: OpenCodeTools, opencode_chat: FakeChat) -> Iterator[OpenCodeHarness]:
    """The plugin with the warm server off: every message goes to a hook process."""
    yield from governed(OpenCodeHarness(tmp_path, opencode_tools, opencode_chat))


@pytest.fixture
def oc_warm(tmp_path: Path, opencode_tools: OpenCodeTools, opencode_chat: FakeChat) -> Iterator[OpenCodeHarness]:
    """The default install: the warm server on. Its state directory has a short path, as a user's
    does (a Unix socket's path is limited to 107 bytes; the plugin connects by the whole path)."""
    yield from short_state(OpenCodeHarness(tmp_path, opencode_tools, opencode_chat, warm_server=True), "mg-oc-")
