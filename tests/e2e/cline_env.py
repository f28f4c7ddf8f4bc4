"""End-to-end fixtures for the real Cline CLI, offline, against a scripted model.

Each test gets a fresh project with memory-governor installed by its own installer (`python -m
governor install cline`, which writes the plugin into `.cline/plugins/memory-governor.js`, or
`~/.cline/plugins/` at user scope), a throwaway HOME whose `~/.cline/data/settings/` holds the
provider `cline auth -p openai -b <url>` writes (an OpenAI-compatible one pointing at the Chat
Completions stand-in, fake_chat.FakeChat) and `cline_mcp_settings.json` naming the Engram-shaped MCP
server (engram_mcp.py, key "engram": Cline names its tools `engram__mem_search` ...), and its own
ledger. Cline runs as an Agent Client Protocol server (`cline --acp --auto-approve true`, JSON-RPC over
stdio): `session/new`, then one `session/prompt` per turn; a run with `session=` the id of the last
one sends its prompt to that session, in the same process. (In 3.0.65 the `--json` mode takes one
prompt, and `--id ID` to continue a session drops the prompt and opens the terminal UI: main.ts.)
ACP mode asks for no login when `CLINE_API_KEY` and `CLINE_PROVIDER` are set.

The pinned package (npm `cline`, whose platform package ships a compiled binary) is installed once
into the e2e cache (tests/e2e/npm.py). No node/npm, or a failed install: the tests are skipped with
the reason, except when CI=true, where they fail. A test module uses these fixtures with
`pytest_plugins = ["cline_env"]`.

BEHAVIOUR of the real binary (3.0.65, observed with probe file hooks and a probe plugin; docs/cline.md):
every model call is a streamed `POST /v1/chat/completions` with the tools declared; a tool result
reaches the model as the JSON of the tool's output (`{"content": [...]}` for an MCP tool,
`{"error": R}` for a refused call).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import npm
import pytest
from fake_chat import FakeChat, Step, ToolResult
from sandbox import HERE, PYTHON, Run, Sandbox, fresh, governed, short_state

# The pin: change it here only.
CLINE_VERSION = npm.pin("cline", "3.0.65")
MODEL = "gpt-4.1"
RUN_TIMEOUT = 180  # a run takes ~5-15 s; generous for a loaded 2-core machine


class ClineTools:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.cline = root / "node_modules" / ".bin" / "cline"

    def ready(self) -> bool:
        return npm.version_ok(self.cline, CLINE_VERSION)


def install_cline() -> ClineTools:
    return ClineTools(npm.install("cline", {"cline": CLINE_VERSION}, lambda folder: ClineTools(folder).ready()))


class ClineRun(Run):
    """One `cline --json` invocation: its output, and what the model received during it."""

    PREFIX, SEP, STDERR_TAIL = "engram__", "__", 2500

    def describe_result(self, result: ToolResult) -> str:
        return f"{result.name}: {result.text[:160]!r}"


class ClineHarness(Sandbox):
    """A project with memory-governor installed for Cline, and a way to run `cline --json` in it."""

    harness = "cline"

    def __init__(self, tmp: Path, tools: ClineTools, model: FakeChat, warm_server: bool = False) -> None:
        super().__init__(tmp, tools, model, warm_server)
        self.env.update({"NO_COLOR": "1", "CLINE_TELEMETRY_DISABLED": "1"})
        self.scope = "user"

    @property
    def settings(self) -> Path:
        return self.home / ".cline" / "data" / "settings"

    @property
    def plugin(self) -> Path:
        folder = self.project / ".cline" if self.scope == "project" else self.home / ".cline"
        return folder / "plugins" / "memory-governor.js"

    def _write_config(self) -> None:
        self.settings.mkdir(parents=True, exist_ok=True)
        engram = {"command": PYTHON, "args": [str(HERE / "engram_mcp.py")], "env": self.engram_server_env()}
        (self.settings / "cline_mcp_settings.json").write_text(json.dumps({"mcpServers": {"engram": engram}}))
        auth = [str(self.tools.cline), "auth", "-p", "openai", "-k", "sk-e2e-fake", "-m", MODEL, "-b",
                f"{self.model.url}/v1"]  # fmt: skip
        done = subprocess.run(auth, cwd=self.project, env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    def install(self, *args: str) -> None:
        """The project's own installer writes the plugin."""
        self.governor("install", "cline", "--project", str(self.project), "--scope", self.scope, *args)
        assert self.plugin.exists()
        self.installed = True

    def run(  # type: ignore[override]
        self, prompt: str, main: Iterable[Step] = (), session: str | None = None, check: bool = True
    ) -> ClineRun:
        """One turn: `prompt` in a new session (a new process), or in `session`, the last one's."""
        if self.hooks and not self.installed:
            self.install()
        if session is None:
            self.close()
            self._write_config()
        self.model.script(main)
        mark, started = self.model.mark(), time.monotonic()
        if session is None:
            self.acp = Acp([str(self.tools.cline), "--acp", "--auto-approve", "true"], self.project,
                           {**self.env, "CLINE_API_KEY": "sk-e2e-fake", "CLINE_PROVIDER": "openai-compatible"})  # fmt: skip
        assert self.acp is not None and session in (None, self.acp.session), "continue the last session only"
        answer = self.acp.prompt(prompt)
        ok = isinstance(answer, dict) and (answer.get("result") or {}).get("stopReason") == "end_turn"
        proc = subprocess.CompletedProcess(self.acp.argv, 0 if ok else 1, json.dumps(answer), self.acp.stderr())
        run = ClineRun(proc, self.model.since(mark), time.monotonic() - started)
        run.session_id = self.acp.session
        return self.finish(run, check)

    acp: Acp | None = None

    def close(self) -> None:
        if self.acp is not None:
            self.acp.close()
            self.acp = None
        stop_hub_daemons(self.home)


def stop_hub_daemons(home: Path) -> None:
    """Cline starts a hub daemon of its own (`cline --cline-hub-daemon`), which outlives the process
    that started it: end those of this sandbox (its HOME), so no test leaves one running."""
    import os
    import signal

    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--cline-hub-daemon" in argv and b"HOME=" + os.fsencode(home) in environ:
            try:
                os.kill(int(pid), signal.SIGTERM)
            except OSError:
                pass


class Acp:
    """`cline --acp`: an Agent Client Protocol server on stdio (newline-delimited JSON-RPC), one session."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)  # fmt: skip
        self.replies: dict[int, dict[str, Any]] = {}
        self.errors: list[str] = []
        self.ids = 0
        self.done = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.errors.extend(self.proc.stderr or []), daemon=True).start()  # type: ignore[arg-type]
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        self.session = str(self.call("session/new", {"cwd": str(cwd), "mcpServers": []})["result"]["sessionId"])

    def _read(self) -> None:
        for line in self.proc.stdout or []:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and "id" in message and ("result" in message or "error" in message):
                with self.done:
                    self.replies[int(message["id"])] = message
                    self.done.notify_all()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        ident = self.ids
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        with self.done:
            self.done.wait_for(lambda: ident in self.replies or self.proc.poll() is not None, timeout=RUN_TIMEOUT)
        reply = self.replies.get(ident)
        assert reply is not None and "result" in reply, f"{method}: {reply}\n{self.stderr()}"
        return reply

    def prompt(self, text: str) -> dict[str, Any]:
        return self.call("session/prompt", {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]})

    def stderr(self) -> str:
        return "".join(line for line in self.errors if "Deprecat" not in line and not line.startswith("      at "))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def cline_tools() -> ClineTools:
    return install_cline()


@pytest.fixture(scope="session")
def cline_chat_server() -> Iterator[FakeChat]:
    with FakeChat() as model:
        yield model


@pytest.fixture
def cline_chat(cline_chat_server: FakeChat) -> Iterator[FakeChat]:
    yield from fresh(cline_chat_server)


@pytest.fixture
def cline(tmp_path: Path, cline_tools: ClineTools, cline_chat: FakeChat) -> Iterator[ClineHarness]:
    """The plugin with the warm server off: every message goes to a hook process."""
    harness = ClineHarness(tmp_path, cline_tools, cline_chat)
    try:
        yield from governed(harness)
    finally:
        harness.close()


@pytest.fixture
def cline_warm(tmp_path: Path, cline_tools: ClineTools, cline_chat: FakeChat) -> Iterator[ClineHarness]:
    """The default install: the warm server on, its state directory at a short path."""
    harness = ClineHarness(tmp_path, cline_tools, cline_chat, warm_server=True)
    try:
        yield from short_state(harness, "mg-cl-")
    finally:
        harness.close()


def denied(result: Any, *fragments: str) -> bool:
    """A call the governor refused: the plugin skips it, and Cline gives the model `{"error": reason}`."""
    return result.text.startswith('{"error":"memory-governor') and all(f in result.text for f in fragments)
