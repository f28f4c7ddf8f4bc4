"""End-to-end fixtures for the agent frameworks governed in-process: the OpenAI Agents SDK and
LangChain / LangGraph with langchain-mcp-adapters, their real packages from PyPI, offline.

Each framework is installed once, at its pins, into a virtual environment of its own in the e2e
cache (tests/e2e/npm.py's cache root), with memory-governor's own dependencies beside it, as
`pip install 'memory-governor[openai-agents]'` would (langchain-mcp-adapters needs the MCP
Python SDK below 2, the test extra 2.3: the two cannot share the test environment). Missing pip
or a failed install: the tests are skipped with the reason, except under CI=true, where they fail.

Each run is an orchestrator program of its own (openai_agents_driver.py, langchain_driver.py),
run by that environment's interpreter with this checkout first on its path, in the test's
project, with the sandbox's environment (its own HOME and ledger). The model is a loopback
stand-in: fake_responses.FakeResponses (the Responses API, the Agents SDK's default) or
fake_chat.FakeChat (Chat Completions, for ChatOpenAI). The Engram stand-in is engram_mcp.py
under the server name `engram`. A test module uses these with
`pytest_plugins = ["orchestrators_env"]`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
from fake_chat import FakeChat
from fake_responses import FakeResponses
from sandbox import PYTHON, ROOT, RUN_TIMEOUT, Sandbox, fresh, governed
from sandbox import Run as SandboxRun
from script import Step

HERE = Path(__file__).resolve().parent
# The pins: change them here only (and in pyproject.toml's extras).
OPENAI_AGENTS = {"openai-agents": npm.pin("openai-agents", "0.24.0", "pypi")}
LANGCHAIN = {
    "langchain-mcp-adapters": npm.pin("langchain-mcp-adapters", "0.3.2", "pypi"),
    "langgraph": npm.pin("langgraph", "1.2.24", "pypi"),
    "langchain": npm.pin("langchain", "1.5.2", "pypi"),
    "langchain-openai": npm.pin("langchain-openai", "1.8.1", "pypi"),
}


def _base_dependencies() -> list[str]:
    import tomllib

    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def framework(name: str, pins: dict[str, str]) -> Path:
    """The interpreter of a virtual environment holding `pins` and memory-governor's dependencies,
    made once in the e2e cache."""
    requirements = sorted([*(f"{package}=={version}" for package, version in pins.items()), *_base_dependencies()])
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:12]
    folder = npm.cache_root() / f"{name}-{digest}"
    python = folder / "bin" / "python"
    stamp = folder / ".installed"
    if stamp.exists():
        return python
    npm.cache_root().mkdir(parents=True, exist_ok=True)
    with open(npm.cache_root() / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return python
        try:
            if not python.exists():
                subprocess.run(
                    [sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True, timeout=300
                )
            proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                   *requirements], capture_output=True, text=True, timeout=1800)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as err:
            npm.unavailable(f"installing {', '.join(requirements)} failed: {err}")
        if proc.returncode != 0:
            npm.unavailable(
                f"pip install {' '.join(requirements)} failed (exit {proc.returncode}): {proc.stderr[-2000:]}"
            )
        stamp.write_text("\n".join(requirements) + "\n")
    return python


class Run(SandboxRun):
    """One orchestrator program's run: what it printed, and what the model received meanwhile.
    The frameworks name MCP tools to the model by their own names (`mem_search`)."""

    PREFIX = "mem_"
    SEP = ""

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Any], seconds: float) -> None:
        super().__init__(proc, requests, seconds)
        lines = proc.stdout.strip().splitlines()
        try:
            self.output: dict[str, Any] = json.loads(lines[-1]) if lines else {}
        except ValueError:
            self.output = {}
        self.session_id = "run" if self.output else ""

    def describe_result(self, result: Any) -> str:
        return f"{result.name}: {result.text[:160]!r}"


class Orchestrator(Sandbox):
    """A project, a HOME, a ledger, and a way to run an orchestrator program on a framework in it."""

    def __init__(self, tmp: Path, python: Path, driver: str, model: Any) -> None:
        super().__init__(tmp, tools=None, model=model)
        self.python = python
        self.driver = HERE / driver
        self.hooks = False  # nothing is installed: the program governs its own calls
        self.agents: dict[str, dict[str, str]] = {}
        self.env.update({"OPENAI_API_KEY": "sk-e2e-fake", "OPENAI_AGENTS_DISABLE_TRACING": "1",
                         "LANGSMITH_TRACING": "false"})  # fmt: skip

    def define_agent(self, name: str, instructions: str) -> None:
        """A subagent the lead may hand off to (the Agents SDK) or run as a tool (both)."""
        self.agents[name] = {"instructions": instructions}

    def run(self, prompt: str, main: Iterable[Step] = (), lanes: dict[str, Iterable[Step]] | None = None,
            govern: bool = True, check: bool = True) -> Run:  # fmt: skip
        self.model.script(main, lanes)
        engram = {"command": PYTHON, "args": [str(HERE / "engram_mcp.py")], "env": self.engram_server_env()}
        spec = {"model_url": self.model.url, "prompt": prompt, "govern": govern, "engram": engram,
                "agents": self.agents}  # fmt: skip
        spec_file = self.tmp / "orchestrator-spec.json"
        spec_file.write_text(json.dumps(spec))
        env = {**self.env, "PYTHONPATH": str(ROOT)}  # this checkout's governor, the framework's environment
        mark = self.model.mark()
        started = time.monotonic()
        proc = subprocess.run([str(self.python), str(self.driver), str(spec_file)], cwd=self.project, env=env,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        return self.finish(Run(proc, self.model.since(mark), time.monotonic() - started), check)


@pytest.fixture(scope="session")
def openai_agents_python() -> Path:
    return framework("openai-agents", OPENAI_AGENTS)


@pytest.fixture(scope="session")
def langchain_python() -> Path:
    return framework("langchain", LANGCHAIN)


@pytest.fixture(scope="session")
def responses_server() -> Iterator[FakeResponses]:
    with FakeResponses() as model:
        yield model


@pytest.fixture(scope="session")
def chat_server() -> Iterator[FakeChat]:
    with FakeChat() as model:
        yield model


@pytest.fixture
def openai_agents(
    tmp_path: Path, openai_agents_python: Path, responses_server: FakeResponses
) -> Iterator[Orchestrator]:
    for model in fresh(responses_server):
        yield from governed(Orchestrator(tmp_path, openai_agents_python, "openai_agents_driver.py", model))


@pytest.fixture
def langchain(tmp_path: Path, langchain_python: Path, chat_server: FakeChat) -> Iterator[Orchestrator]:
    for model in fresh(chat_server):
        yield from governed(Orchestrator(tmp_path, langchain_python, "langchain_driver.py", model))
