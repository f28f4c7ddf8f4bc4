"""End-to-end fixtures: the real GitHub Copilot CLI, offline, against a scripted model.

Each test gets a fresh project with memory-governor installed by its own installer
(`python -m governor install copilot --project DIR`: `.github/hooks/memory-governor.json`), a
throwaway HOME whose `.copilot/mcp-config.json` starts the Engram-shaped MCP server
(engram_mcp.py, server key "engram", so its tools reach the model as `engram-mem_search` …),
its own ledger (MEMORY_GOVERNOR_STATE_DIR), and the shared Chat Completions stand-in
(fake_chat.FakeChat) as Copilot's own provider:

    COPILOT_PROVIDER_BASE_URL=<stand-in>/v1  COPILOT_PROVIDER_TYPE=openai  COPILOT_MODEL=gpt-4.1
    COPILOT_OFFLINE=true  copilot -p PROMPT --allow-all-tools --trust-folder -s

No GitHub login is needed or made. A resumed run (`--resume=ID`) cannot take `--trust-folder`
(nor can `--session-id`), so the project is also listed in `~/.copilot/config.json`
`trustedFolders`; a run's session id is the folder it adds under `~/.copilot/session-state/`. The binary
unpacks its 235 MB runtime on first start into COPILOT_PKG_CACHE_HOME, which points into the
e2e cache so that happens once per machine, not once per test.

The package is pinned here and installed once into the e2e cache (tests/e2e/npm.py). No
node/npm, or a failed install: the tests skip with the reason, and fail under CI=true.

BEHAVIOUR of the real binary (Copilot CLI 1.0.102, observed through fake_chat.py with a probe
hook that logged its stdin and environment and printed chosen answers; docs/copilot.md):

- Every model call is a streamed `POST /v1/chat/completions` with `tools`; no side queries.
  The first user message is `<current_datetime>…</current_datetime>\\n\\n<prompt>`, with a
  userPromptSubmitted hook's additionalContext appended in `<system_reminder>`; a sessionStart
  hook's additionalContext is a user message of its own before it.
- A deny reaches the model as the tool message `Denied by preToolUse hook: <reason>`;
  modifiedArgs reach the MCP server (and the assistant message in the history shows them);
  modifiedResult's textResultForLlm is the tool message; a postToolUse additionalContext is
  appended to it ("Tool … succeeded. Additional guidance from postToolUse hooks:\\n…").
- The preToolUse hooks of a batch run one after another, every call's before any call runs;
  the calls then run concurrently; postToolUse hooks run one at a time as calls finish.
- A subagent (the `task` tool, `.github/agents/<name>.agent.md`) is its own session: its
  model requests carry its definition's body in the system prompt and the dispatch prompt as
  the first user message; its hook events carry agentId, agentType and parentAgentId.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import npm  # noqa: E402
from fake_chat import FakeChat, Request, Step, ToolResult  # noqa: E402
from sandbox import PYTHON, RUN_TIMEOUT, Sandbox, fresh, governed  # noqa: E402
from sandbox import Run as SandboxRun  # noqa: E402

from tests.conftest import GOVERNOR_PATH  # noqa: E402

# The pin: change it here only.
COPILOT_VERSION = npm.pin("@github/copilot", "1.0.102")
NPM_PACKAGES = {"@github/copilot": COPILOT_VERSION}
MODEL = "gpt-4.1"
DENIED = "Denied by preToolUse hook: "


class Tools:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.copilot = root / "node_modules" / ".bin" / "copilot"
        self.pkg_cache = root / "pkg-cache"  # where the binary unpacks its runtime, once

    def ready(self) -> bool:
        if not self.copilot.exists():
            return False
        env = {"PATH": GOVERNOR_PATH, "HOME": str(self.root), "COPILOT_PKG_CACHE_HOME": str(self.pkg_cache),
               "COPILOT_AUTO_UPDATE": "false"}  # fmt: skip
        try:
            out = subprocess.run([str(self.copilot), "--version"], capture_output=True, text=True, timeout=300, env=env)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return out.returncode == 0 and COPILOT_VERSION in out.stdout + out.stderr


def install_tools() -> Tools:
    """The pinned package, installed once into the e2e cache (tests/e2e/npm.py), then reused."""
    return Tools(npm.install("copilot", NPM_PACKAGES, lambda folder: Tools(folder).ready()))


@pytest.fixture(scope="session")
def copilot_tools() -> Tools:
    return install_tools()


@pytest.fixture(scope="session")
def chat_server() -> Iterator[FakeChat]:
    with FakeChat() as model:
        yield model


@pytest.fixture
def chat(chat_server: FakeChat) -> Iterator[FakeChat]:
    yield from fresh(chat_server)


class Run(SandboxRun):
    """One `copilot -p` invocation: its output, and what the model received during it."""

    PREFIX, SEP = "engram-", "-"

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Request], seconds: float,
                 session_id: str) -> None:  # fmt: skip
        super().__init__(proc, requests, seconds)
        self.session_id = session_id

    def describe_result(self, result: ToolResult) -> str:
        return f"{result.name}: {result.text[:160]!r}"


class Copilot(Sandbox):
    """A project with memory-governor installed, and a way to run `copilot -p` in it."""

    def __init__(self, tmp: Path, tools: Tools, model: FakeChat) -> None:
        super().__init__(tmp, tools, model)
        self.installs: list[tuple[str, ...]] = [("copilot",)]  # what the first run installs
        self.env.update({
            "COPILOT_PROVIDER_BASE_URL": model.url + "/v1",
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_MODEL": MODEL,
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PKG_CACHE_HOME": str(tools.pkg_cache),
        })  # fmt: skip

    # setting up ---------------------------------------------------------------------------
    def agent(self, name: str, body: str, front: dict[str, str] | None = None) -> Path:
        lines = ["---", f"name: {name}", f"description: The {name} agent. Use it when asked to run {name}."]
        lines += [f"{k}: {v}" for k, v in (front or {}).items()]
        lines += ["---", body, ""]
        return self.write(f".github/agents/{name}.agent.md", "\n".join(lines))

    def install(self, harness: str = "copilot", *args: str) -> None:
        """The project's own installer (no hand-written hooks)."""
        self.governor("install", harness, "--project", str(self.project), *args)
        self.installed = True

    def _write_config(self) -> None:
        folder = self.home / ".copilot"
        folder.mkdir(parents=True, exist_ok=True)
        engram = {"type": "local", "command": PYTHON, "args": [str(HERE / "engram_mcp.py")], "tools": ["*"],
                  "env": self.engram_server_env()}  # fmt: skip
        (folder / "mcp-config.json").write_text(json.dumps({"mcpServers": {"engram": engram}}, indent=2))
        # Copilot keeps its own state in config.json (after two comment lines); trust the project there.
        config_path = folder / "config.json"
        text = config_path.read_text() if config_path.exists() else ""
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")).strip()
        config = json.loads(body) if body else {}
        config["trustedFolders"] = sorted({*config.get("trustedFolders", []), str(self.project)})
        config_path.write_text(json.dumps(config, indent=2))

    # running ------------------------------------------------------------------------------
    def run(
        self,
        prompt: str,
        main: Iterable[Step] = (),
        lanes: dict[str, Iterable[Step]] | None = None,
        resume: str | None = None,
        check: bool = True,
    ) -> Run:
        if not self.installed:
            for install in self.installs:
                self.install(*install)
        self._write_config()
        self.model.script(main, lanes)
        args = [str(self.tools.copilot), "-p", prompt, "--allow-all-tools", "-s", "--no-custom-instructions"]
        args += [f"--resume={resume}"] if resume else ["--trust-folder"]
        sessions = self.home / ".copilot" / "session-state"
        before = set(os.listdir(sessions)) if sessions.exists() else set()
        proc, mark, seconds = self.launch(args, RUN_TIMEOUT)
        run = Run(proc, self.model.since(mark), seconds, resume or self._new_session(sessions, before))
        return self.finish(run, check)

    @staticmethod
    def _new_session(sessions: Path, before: set[str]) -> str:
        """The session folder a run added (its state may land a moment after the process exits)."""
        deadline = time.monotonic() + 10
        while True:
            new = (
                sorted(n for n in set(os.listdir(sessions)) - before if not n.startswith("."))
                if sessions.exists()
                else []
            )
            if new or time.monotonic() > deadline:
                return new[0] if len(new) == 1 else ""
            time.sleep(0.1)

    # looking at the outcome ---------------------------------------------------------------
    def ledger_prompts(self) -> int:
        """How many prompts the ledger decided (each starts a turn)."""
        import sqlite3

        with sqlite3.connect(self.state / "ledger.db") as db:
            return int(db.execute("SELECT COUNT(*) FROM decisions WHERE event='prompt'").fetchone()[0])


@pytest.fixture
def copilot(tmp_path: Path, copilot_tools: Tools, chat: FakeChat) -> Iterator[Copilot]:
    yield from governed(Copilot(tmp_path, copilot_tools, chat))
