"""End-to-end fixtures for the real Qwen Code binary, offline, against a scripted model.

Each test gets a fresh project with memory-governor installed by its own installer (`python -m
governor install qwen-code`, which writes hooks into `~/.qwen/settings.json`, or the project's
`.qwen/settings.json`), a throwaway HOME whose `~/.qwen/settings.json` names the OpenAI-compatible
auth and the Engram-shaped MCP server (engram_mcp.py, key "engram": Qwen names its tools
`mcp__engram__mem_search` ...), and its own ledger. `qwen -p PROMPT --session-id ID` runs it, with
`--openai-base-url` the Chat Completions stand-in (fake_chat.FakeChat); `--resume ID` continues
that session. `--approval-mode yolo`: a headless run cannot ask for approval.

The pin is installed once into the e2e cache (tests/e2e/npm.py). No node/npm, or a failed install:
the tests are skipped with the reason, except when CI=true, where they fail. A test module uses
these fixtures with `pytest_plugins = ["qwen_env"]`.

BEHAVIOUR of the real binary (0.24.4, observed with a logging hook; docs/qwen-code.md): every
model call is a streamed `POST /v1/chat/completions`; MCP tools are not declared (`tool_search`
finds them) but a call by name runs; hooks get `prompt_id` and `tool_use_id`.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
from fake_chat import FakeChat, Step, ToolResult
from sandbox import HERE, PYTHON, Run, Sandbox, fresh, governed

# The pin: change it here only.
QWEN_PACKAGE = "@qwen-code/qwen-code"
QWEN_VERSION = npm.pin(QWEN_PACKAGE, "0.24.4")
MODEL = "gpt-4.1"
RUN_TIMEOUT = 180  # a run takes ~10 s; generous for a loaded 2-core machine


class QwenTools:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.cli = root / "node_modules" / QWEN_PACKAGE / "cli-entry.js"
        self.node = shutil.which("node") or "node"

    def ready(self) -> bool:
        return self.cli.exists() and npm.version_ok(Path(self.node), QWEN_VERSION, (str(self.cli), "--version"))


def install_qwen() -> QwenTools:
    return QwenTools(npm.install("qwen-code", {QWEN_PACKAGE: QWEN_VERSION}, lambda folder: QwenTools(folder).ready()))


class QwenRun(Run):
    """One `qwen -p` invocation: its output, and what the model received during it."""

    STDERR_TAIL = 2500

    def __init__(self, proc: Any, requests: list[Any], seconds: float, session_id: str) -> None:
        super().__init__(proc, requests, seconds)
        self.session_id = session_id

    def describe_result(self, result: ToolResult) -> str:
        return f"{result.name}: {result.text[:160]!r}"


class QwenHarness(Sandbox):
    """A project with memory-governor installed for Qwen Code, and a way to run `qwen -p` in it."""

    harness = "qwen-code"

    def __init__(self, tmp: Path, tools: QwenTools, model: FakeChat) -> None:
        super().__init__(tmp, tools, model)
        self.env.update({"NO_COLOR": "1", "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1", "OPENAI_API_KEY": "sk-e2e-fake"})
        self.scope = "user"

    @property
    def settings(self) -> Path:
        base = self.project if self.scope == "project" else self.home
        return base / ".qwen" / "settings.json"

    def _write_config(self) -> None:
        path = self.home / ".qwen" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        settings = json.loads(path.read_text()) if path.exists() else {}
        engram = {"command": PYTHON, "args": [str(HERE / "engram_mcp.py")], "env": self.engram_server_env()}
        settings.update({"security": {"auth": {"selectedType": "openai"}}, "model": {"name": MODEL},
                         "mcpServers": {"engram": engram}, "telemetry": {"enabled": False}})  # fmt: skip
        path.write_text(json.dumps(settings, indent=2))

    def install(self, *args: str) -> None:
        """The project's own installer writes the hooks."""
        self.governor("install", "qwen-code", "--project", str(self.project), "--scope", self.scope, *args)
        assert " qwen-code" in self.settings.read_text()
        self.installed = True

    def run(  # type: ignore[override]
        self, prompt: str, main: Iterable[Step] = (), session: str | None = None, check: bool = True
    ) -> QwenRun:
        self._write_config()
        if self.hooks and not self.installed:
            self.install()
        self.model.script(main)
        tools: QwenTools = self.tools
        which = ["--resume", session] if session else ["--session-id", str(uuid.uuid4())]
        args = [tools.node, str(tools.cli), "--openai-base-url", f"{self.model.url}/v1", "-m", MODEL,  # type: ignore[attr-defined]
                "--approval-mode", "yolo", *which, "-p", prompt]  # fmt: skip
        proc, mark, seconds = self.launch(args, RUN_TIMEOUT)
        return self.finish(QwenRun(proc, self.model.since(mark), seconds, session or which[1]), check)


@pytest.fixture(scope="session")
def qwen_tools() -> QwenTools:
    return install_qwen()


@pytest.fixture(scope="session")
def qwen_chat_server() -> Iterator[FakeChat]:
    with FakeChat() as model:
        yield model


@pytest.fixture
def qwen_chat(qwen_chat_server: FakeChat) -> Iterator[FakeChat]:
    yield from fresh(qwen_chat_server)


@pytest.fixture
def qwen(tmp_path: Path, qwen_tools: QwenTools, qwen_chat: FakeChat) -> Iterator[QwenHarness]:
    yield from governed(QwenHarness(tmp_path, qwen_tools, qwen_chat))
