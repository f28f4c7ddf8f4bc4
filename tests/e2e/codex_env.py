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
from collections.abc import Iterable, Iterator
from pathlib import Path

import npm
import pytest
from fake_responses import FakeResponses, Request, Step, ToolResult
from sandbox import HERE, PYTHON, RUN_TIMEOUT, Sandbox, fresh, governed
from sandbox import Run as SandboxRun

from tests.conftest import GOVERNOR_PATH

CODEX_VERSION = npm.pin("@openai/codex", "0.171.0")  # the pin: change it here only
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
    for model in fresh(responses_server):  # reset before and after
        model.total_tokens = 15
        yield model


class Run(SandboxRun):
    """One `codex exec --json`: its events, and what the model received during it."""

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Request], seconds: float) -> None:
        super().__init__(proc, requests, seconds)
        self.events = []
        for line in proc.stdout.splitlines():
            try:
                self.events.append(json.loads(line))
            except ValueError:
                continue
        started = [e for e in self.events if e.get("type") == "thread.started"]
        self.session_id = started[0]["thread_id"] if started else ""
        # A resumed session sends its history again: results already in the run's first request are earlier runs'.
        self.earlier = {r.tool_use_id for r in requests[0].all_tool_results()} if requests else set()

    def tool_results(self, request: Request) -> list[ToolResult]:
        return [r for r in request.all_tool_results() if r.tool_use_id not in self.earlier]

    def describe_result(self, result: ToolResult) -> str:
        return f"{result.name} ran={result.ran}: {result.raw[:160]!r}"


class CodexHarness(Sandbox):
    """A project with memory-governor installed for Codex, and a way to run `codex exec` in it."""

    def __init__(self, tmp: Path, tools: CodexTools, model: FakeResponses) -> None:
        super().__init__(tmp, tools, model)
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.extra_config = ""  # TOML appended to config.toml before the install
        self.env.update({
            "PATH": f"{tools.bin}{os.pathsep}{GOVERNOR_PATH}",
            "CODEX_HOME": str(self.codex_home),
            "OPENAI_API_KEY": "sk-e2e-fake",
        })  # fmt: skip

    # setting up ---------------------------------------------------------------------------
    def agent(self, name: str, instructions: str) -> Path:
        """A Codex custom agent: .codex/agents/<name>.toml (name, description, developer_instructions)."""
        body = (f"name = {json.dumps(name)}\ndescription = {json.dumps(f'The {name} agent.')}\n"
                f"developer_instructions = {json.dumps(instructions)}\n")  # fmt: skip
        return self.write(f".codex/agents/{name}.toml", body)

    def config_text(self) -> str:
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in self.engram_server_env().items())
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
        proc, mark, seconds = self.launch([*command, prompt], RUN_TIMEOUT)
        return self.finish(Run(proc, self.model.since(mark), seconds), check)

    # looking at the outcome ---------------------------------------------------------------
    def rollouts(self) -> list[Path]:
        return sorted((self.codex_home / "sessions").rglob("rollout-*.jsonl"))


@pytest.fixture(name="codex")
def codex_fixture(tmp_path: Path, codex_tools: CodexTools, responses: FakeResponses) -> Iterator[CodexHarness]:
    yield from governed(CodexHarness(tmp_path, codex_tools, responses))
