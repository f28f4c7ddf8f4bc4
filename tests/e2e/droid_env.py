"""End-to-end fixtures for the real Factory Droid binary, offline, against a scripted model.

Each test gets a fresh project with memory-governor installed by its own installer (`python -m
governor install droid`, which writes hooks into `~/.factory/settings.json`, or the project's
`.factory/settings.json`), a throwaway HOME whose `~/.factory/settings.json` names a custom model
(`provider: generic-chat-completion-api`, its `baseUrl` the Chat Completions stand-in,
fake_chat.FakeChat) and whose `~/.factory/mcp.json` names the Engram-shaped MCP server
(engram_mcp.py, key "engram": Droid names its tools `engram___mem_search` ...), and its own ledger.
`droid exec -m custom:gpt-4.1 PROMPT` runs it: no Factory account is needed for a custom model.

The npm package `@factory/cli` is a wrapper whose platform package holds the binary; the e2e cache
pins the platform package itself (`@factory/cli-linux-x64`; the registry served no platform package
at the wrapper's own newest version, 0.225.1). Another platform: skipped with the reason (failed under
CI=true). No node/npm, or a failed install: the same. A test module uses these fixtures with
`pytest_plugins = ["droid_env"]`.

BEHAVIOUR of the real binary (0.225.2, observed with a logging hook; docs/droid.md): every model
call is a streamed `POST /v1/chat/completions`; MCP tools are deferred (the model loads them with
ToolSearch `select:<name>` first); `droid exec` fires no UserPromptSubmit.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
from fake_chat import FakeChat, Reply, Step, ToolResult, call, tool_uses
from sandbox import HERE, PYTHON, Run, Sandbox, fresh, governed

# The pin: change it here only.
DROID_PACKAGE = "@factory/cli-linux-x64"
DROID_VERSION = npm.pin(DROID_PACKAGE, "0.225.2")
MODEL = "gpt-4.1"
RUN_TIMEOUT = 180  # a run takes ~10 s; generous for a loaded 2-core machine


class DroidTools:
    def __init__(self, root: Path) -> None:
        self.droid = root / "node_modules" / DROID_PACKAGE / "bin" / "droid"

    def ready(self) -> bool:
        return npm.version_ok(self.droid, DROID_VERSION)


def install_droid() -> DroidTools:
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        npm.unavailable(f"the Droid e2e tests pin {DROID_PACKAGE}: this is {platform.system()} {platform.machine()}")
    return DroidTools(npm.install("droid", {DROID_PACKAGE: DROID_VERSION}, lambda folder: DroidTools(folder).ready()))


def load(*names: str) -> Reply:
    """The reply that loads deferred MCP tools, as the model must before calling them."""
    return tool_uses(call("ToolSearch", {"query": "select:" + ",".join(names)}))


class DroidRun(Run):
    """One `droid exec` invocation: its output, and what the model received during it."""

    PREFIX = "engram___"
    SEP = "___"
    STDERR_TAIL = 2500

    def __init__(self, proc: Any, requests: list[Any], seconds: float) -> None:
        super().__init__(proc, requests, seconds)
        self.session_id = "exec"

    def describe_result(self, result: ToolResult) -> str:
        return f"{result.name}: {result.text[:160]!r}"


class DroidHarness(Sandbox):
    """A project with memory-governor installed for Factory Droid, and a way to run `droid exec` in it."""

    harness = "droid"

    def __init__(self, tmp: Path, tools: DroidTools, model: FakeChat) -> None:
        super().__init__(tmp, tools, model)
        self.env.update({"NO_COLOR": "1"})
        self.scope = "user"

    @property
    def settings(self) -> Path:
        return (self.project if self.scope == "project" else self.home) / ".factory" / "settings.json"

    def _write_config(self) -> None:
        folder = self.home / ".factory"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "settings.json"
        settings = json.loads(path.read_text()) if path.exists() else {}
        settings["customModels"] = [{"model": MODEL, "displayName": "Stand-in", "baseUrl": f"{self.model.url}/v1",  # type: ignore[attr-defined]
                                     "apiKey": "sk-e2e-fake", "provider": "generic-chat-completion-api",
                                     "maxOutputTokens": 4096}]  # fmt: skip
        path.write_text(json.dumps(settings, indent=2))
        engram = {"type": "stdio", "command": PYTHON, "args": [str(HERE / "engram_mcp.py")],
                  "env": self.engram_server_env()}  # fmt: skip
        (folder / "mcp.json").write_text(json.dumps({"mcpServers": {"engram": engram}}, indent=2))

    def install(self, *args: str) -> None:
        """The project's own installer writes the hooks."""
        self.governor("install", "droid", "--project", str(self.project), "--scope", self.scope, *args)
        assert " droid" in self.settings.read_text()
        self.installed = True

    def run(self, prompt: str, main: Iterable[Step] = (), check: bool = True) -> DroidRun:  # type: ignore[override]
        self._write_config()
        if self.hooks and not self.installed:
            self.install()
        self.model.script(main)
        tools: DroidTools = self.tools
        proc, mark, seconds = self.launch([str(tools.droid), "exec", "-m", f"custom:{MODEL}", prompt], RUN_TIMEOUT)
        return self.finish(DroidRun(proc, self.model.since(mark), seconds), check)


@pytest.fixture(scope="session")
def droid_tools() -> DroidTools:
    return install_droid()


@pytest.fixture(scope="session")
def droid_chat_server() -> Iterator[FakeChat]:
    with FakeChat() as model:
        yield model


@pytest.fixture
def droid_chat(droid_chat_server: FakeChat) -> Iterator[FakeChat]:
    yield from fresh(droid_chat_server)


@pytest.fixture
def droid(tmp_path: Path, droid_tools: DroidTools, droid_chat: FakeChat) -> Iterator[DroidHarness]:
    yield from governed(DroidHarness(tmp_path, droid_tools, droid_chat))
