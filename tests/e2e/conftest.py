"""End-to-end fixtures: the real Claude Code binary, offline, against a scripted model.

Each test gets a fresh project directory with memory-governor installed by its own installer
(`python -m governor install claude-code --project DIR`), a throwaway HOME, its own ledger
(MEMORY_GOVERNOR_STATE_DIR), an Engram-shaped MCP server (engram_mcp.py, server key
"engram") and, on request, the real @modelcontextprotocol/server-memory (server key "memory").
The model is fake_model.FakeModel on 127.0.0.1: it plays a script and records every request,
so tests assert on what THE MODEL RECEIVED.

The npm packages are installed once into the e2e cache (tests/e2e/npm.py: outside the
checkout, so a fresh clone reuses it) at the pinned versions below. No node/npm, or a failed
install: the e2e tests are skipped with the reason, except when CI=true, where they fail.

Every test that uses the `tools` fixture (so `cc`) runs once per Claude Code pin
(CLAUDE_CODE_VERSIONS); `@pytest.mark.claude_code(version, ...)` on a test or a parameter limits
it to those pins. What differs between the pins (2.1.332: deny reasons framed as
"PreToolUse:<tool> hook error: ...", tool context in a system message, MCP tools deferred behind
ToolSearch, agents in the background by default, mcp_server on tool events) is pinned per
version in test_harness_facts.py and written up in docs/claude-code.md.

BEHAVIOUR of the real binary (Claude Code 2.1.197, observed through fake_model.py with a
probe hook that logged its stdin and printed chosen answers; re-checked by the tests here):

- updatedInput WITHOUT any permissionDecision is applied: a PreToolUse answer of only
  {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {...}}} made the MCP
  server receive the rewritten arguments (a 4-call batch asking limit 10 reached the server
  as limit 2), and PostToolUse's tool_input showed the rewritten input.
- updatedMCPToolOutput as a plain string is what the model gets: the tool_result block's
  content was exactly that string (content as a bare string, not a list of blocks).
- additionalContext: from SessionStart and UserPromptSubmit it arrives in a message with
  role "system" placed right after the first user message, as
  "SessionStart hook additional context: ..." / "UserPromptSubmit hook additional context: ..."
  (in the same message as the agent and skill listings). From PreToolUse / PostToolUse it is
  appended to the user message that carries the tool results, as separate text blocks
  "<system-reminder>\nPreToolUse:<tool> hook additional context: ...\n</system-reminder>",
  one per hook answer, after all the tool_result blocks of the batch.
- parallel hooks: the hooks of one batch run concurrently only when the tools are
  concurrency-safe, i.e. the MCP server marks them readOnlyHint: true (Engram does for its
  read tools, and engram_mcp.py copies that). Four mem_search PreToolUse hooks that each slept
  0.5 s all started within ~30 ms; their four PostToolUse hooks also overlapped. Without
  readOnlyHint the same batch ran strictly one tool (Pre, call, Post) after the other.
- MCP tool_response in PostToolUse is a LIST of content blocks
  ([{"type": "text", "text": "..."}]) for a server that returns plain content (Engram), but a
  STRING for a server that also returns structuredContent (@modelcontextprotocol/server-memory):
  then both the hook and the model get JSON.stringify(structuredContent), compact, not the
  pretty-printed text content the server sent.
- A result with isError: true fires PostToolUseFailure (error = the text, is_interrupt false),
  not PostToolUse; the model gets the text with is_error. A call a PreToolUse hook denied fires
  neither; the model gets the deny reason verbatim as an is_error tool_result. PostToolBatch
  fires once per batch with tool_calls[] (each call's tool_response as the model got it).
- prompt_id: present on UserPromptSubmit (also the very first prompt), on every tool,
  Subagent*, Stop and PreCompact event after it, and inside subagents (the parent's
  prompt_id). Absent on SessionStart startup/resume (which fire before the prompt); present
  on SessionStart compact (the /compact command's own prompt_id). "/compact" fires no
  UserPromptSubmit.
- subagents: SubagentStart, each tool event inside it, and SubagentStop carry agent_id (hex
  like "a75dabaa98ccd1ee2") and agent_type (the .claude/agents/<name>.md name, e.g.
  "validator"); the same session_id as the parent. The main agent's events have neither.
  A subagent's model requests carry its own system prompt (the .md body; the billing header
  says cc_is_subagent=true) and only the tools its front matter lists; its first user message
  is the prompt given to the Agent tool. The Agent tool's result to the main agent is a list
  of text blocks (the subagent's last text, then an "agentId: ..." usage block).
- SessionStart sources: `claude -p X --resume ID` fires SessionStart source "resume" on
  every such invocation; `claude -p "/compact" --resume ID` fires SessionStart "resume",
  PreCompact (trigger "manual", custom_instructions null), a SubagentStop with agent_type ""
  (the compaction runs as an internal agent), then SessionStart "compact". The compaction
  request is a normal /v1/messages request WITH the main agent's tools whose last user message
  asks to "create a detailed summary of the conversation" (fake_model answers it itself).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import npm  # noqa: E402
import seed  # noqa: E402
from fake_model import FakeModel, Step  # noqa: E402
from sandbox import PYTHON, ROOT, RUN_TIMEOUT, Sandbox, fresh, governed  # noqa: E402
from sandbox import Run as SandboxRun  # noqa: E402

from governor.harnesses.claude_code import spelled  # noqa: E402

__all__ = ["HERE", "PYTHON", "ROOT", "Harness", "Run", "Tools"]  # what the e2e modules take from here

# The pins: change them here only. Claude Code runs at two: the long-standing pin, and a
# recent one bumped deliberately (the newest npm served then: what a new user installs), which
# `./scripts/test.sh --newest` replaces by today's newest (npm.pin).
CLAUDE_CODE_VERSION = "2.1.197"
CLAUDE_CODE_RECENT = npm.pin("@anthropic-ai/claude-code", "2.1.332")
CLAUDE_CODE_VERSIONS = tuple(dict.fromkeys((CLAUDE_CODE_VERSION, CLAUDE_CODE_RECENT)))
SERVER_MEMORY_VERSION = "2026.8.31"


def npm_packages(version: str = CLAUDE_CODE_VERSION) -> dict[str, str]:
    return {"@anthropic-ai/claude-code": version, "@modelcontextprotocol/server-memory": SERVER_MEMORY_VERSION}


ENGRAM_TOOLS = [f"mcp__engram__{t}" for t in ("mem_search", "mem_timeline", "mem_get_observation", "mem_context",
                                               "mem_save", "mem_update", "mem_session_summary")]  # fmt: skip
MEMORY_TOOLS = [f"mcp__memory__{t}" for t in ("search_nodes", "open_nodes", "read_graph", "create_entities")]


# -- the npm install ---------------------------------------------------------------------


class Tools:
    """One pinned Claude Code (and server-memory) in the e2e cache."""

    def __init__(self, root: Path, version: str = CLAUDE_CODE_VERSION) -> None:
        self.root = root
        self.version = version
        modules = root / "node_modules"
        # npm's bin link; newer packages point it at a native binary that their postinstall copies
        # from the platform's optional dependency. Where install scripts did not run, that
        # binary is still in the platform package: use it there.
        self.claude = modules / ".bin" / "claude"
        if not npm.version_ok(self.claude, version):
            native = sorted(modules.glob("@anthropic-ai/claude-code-*/claude"))
            self.claude = next((b for b in native if npm.version_ok(b, version)), self.claude)
        self.server_memory = modules / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
        self.node = shutil.which("node") or "node"

    def ready(self) -> bool:
        return self.server_memory.exists() and npm.version_ok(self.claude, self.version)


def install_tools(version: str = CLAUDE_CODE_VERSION) -> Tools:
    """The pinned npm packages, installed once into the e2e cache (tests/e2e/npm.py), then reused."""
    folder = npm.install("claude-code", npm_packages(version), lambda where: Tools(where, version).ready())
    return Tools(folder, version)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "claude_code(*versions): run this Claude Code test only on these pins (default: every pin)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that drives Claude Code (through `tools`) runs once per pin."""
    if "claude_code_version" in metafunc.fixturenames:
        metafunc.parametrize("claude_code_version", CLAUDE_CODE_VERSIONS, scope="session",
                             ids=[f"cc{v}" for v in CLAUDE_CODE_VERSIONS])  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test (or a parameter of one) marked @pytest.mark.claude_code(...) runs on those pins only."""
    keep, drop = [], []
    for item in items:
        version = getattr(item, "callspec", None) and item.callspec.params.get("claude_code_version")  # type: ignore[attr-defined]
        marker = item.get_closest_marker("claude_code")
        if version and marker:
            unknown = set(marker.args) - set(CLAUDE_CODE_VERSIONS)
            assert not unknown, f"{item.nodeid}: not a pinned Claude Code version: {unknown}"
        (drop if version and marker and version not in marker.args else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def tools(claude_code_version: str) -> Tools:
    return install_tools(claude_code_version)


@pytest.fixture(scope="session")
def model_server() -> Iterator[FakeModel]:
    with FakeModel() as model:
        yield model


@pytest.fixture
def model(model_server: FakeModel) -> Iterator[FakeModel]:
    yield from fresh(model_server)


# -- one project, one HOME, one ledger ---------------------------------------------------


class Run(SandboxRun):
    """One `claude -p` invocation: its output, and what the model received during it."""

    def __init__(self, proc: subprocess.CompletedProcess[str], requests: list[Any], seconds: float) -> None:
        super().__init__(proc, requests, seconds)
        try:
            self.output: dict[str, Any] = json.loads(proc.stdout)
        except ValueError:
            self.output = {}
        self.session_id = self.output.get("session_id", "")

    def tool_searches(self) -> list[str]:
        """The queries of the ToolSearch calls the stand-in made to load deferred tools."""
        return [c["input"]["query"] for r in self.requests for c in (r.reply or {}).get("calls", [])
                if c["name"] == "ToolSearch"]  # fmt: skip


class Harness(Sandbox):
    """A project with memory-governor installed, and a way to run `claude -p` in it."""

    def __init__(self, tmp: Path, tools: Tools, model: FakeModel, warm_server: bool = False) -> None:
        super().__init__(tmp, tools, model, warm_server)
        self.graph_file = tmp / "memory-graph.jsonl"
        self.mcp_config = tmp / "mcp.json"
        self.memory_server = False
        self.engram_key = "engram"  # the Engram stand-in's key in the MCP config
        self.version = getattr(tools, "version", "")  # Claude Code's pin (the facts read it)
        self.env.update({
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "sk-ant-e2e-fake",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        })  # fmt: skip

    # setting up ---------------------------------------------------------------------------
    def agent(self, name: str, body: str, tools: Iterable[str] = (), front: dict[str, str] | None = None) -> Path:
        lines = ["---", f"name: {name}", f"description: The {name} agent. Use it when asked to run {name}."]
        if tools:
            lines.append("tools: " + ", ".join(tools))
        lines += [f"{k}: {v}" for k, v in (front or {}).items()]
        lines += ["---", body, ""]
        return self.write(f".claude/agents/{name}.md", "\n".join(lines))

    def add_observation(self, **fields: Any) -> dict[str, Any]:
        """Add one observation to this test's Engram seed (before the first run)."""
        data = json.loads(self.seed.read_text())
        obs = {"project": seed.PROJECT, "scope": "project", "topic_key": None, "duplicates": 1, "revisions": 1,
               "id": max(o["id"] for o in data["observations"]) + 1, **fields}  # fmt: skip
        data["observations"].append(obs)
        self.seed.write_text(json.dumps(data, indent=1))
        return obs

    def use_memory_server(self) -> None:
        """Add the real @modelcontextprotocol/server-memory under server key "memory"."""
        seed.write_graph(self.graph_file)
        self.memory_server = True

    def install(self) -> None:
        """The project's own installer writes .claude/settings.json (no hand-written hooks)."""
        self.governor("install", "claude-code", "--project", str(self.project))
        settings = json.loads((self.project / ".claude" / "settings.json").read_text())
        assert "PreToolUse" in settings["hooks"], settings
        self.installed = True

    def _write_mcp_config(self) -> None:
        servers: dict[str, Any] = {
            self.engram_key: {"command": PYTHON, "args": [str(HERE / "engram_mcp.py")], "env": self.engram_server_env()}
        }
        if self.memory_server:
            servers["memory"] = {
                "command": self.tools.node,
                "args": [str(self.tools.server_memory)],
                "env": {"MEMORY_FILE_PATH": str(self.graph_file)},
            }
        self.mcp_config.write_text(json.dumps({"mcpServers": servers}, indent=2))

    # running ------------------------------------------------------------------------------
    def run(
        self,
        prompt: str,
        main: Iterable[Step] = (),
        lanes: dict[str, Iterable[Step]] | None = None,
        resume: str | None = None,
        allowed: Iterable[str] | None = None,
        check: bool = True,
    ) -> Run:
        if self.hooks and not self.installed:
            self.install()
        self._write_mcp_config()
        self.model.script(main, lanes)
        engram_tools = [t.replace("mcp__engram__", f"mcp__{spelled(self.engram_key)}__") for t in ENGRAM_TOOLS]
        allowed_tools = list(allowed) if allowed is not None else [*engram_tools, "Agent", "Task"]
        if self.memory_server and allowed is None:
            allowed_tools += MEMORY_TOOLS
        args = [str(self.tools.claude), "-p", prompt, "--mcp-config", str(self.mcp_config), "--output-format", "json",
                "--allowedTools", ",".join(allowed_tools)]  # fmt: skip
        if resume:
            args += ["--resume", resume]
        proc, mark, seconds = self.launch(args, RUN_TIMEOUT)
        return self.finish(Run(proc, self.model.since(mark), seconds), check)

    # looking at the outcome ---------------------------------------------------------------
    def transcript(self, run: Run) -> Path:
        """The session's transcript JSONL (Claude Code writes it under HOME/.claude/projects/)."""
        found = list((self.home / ".claude" / "projects").glob(f"*/{run.session_id}.jsonl"))
        assert found, f"no transcript for {run.session_id}"
        return found[0]


@pytest.fixture
def cc(tmp_path: Path, tools: Tools, model: FakeModel) -> Iterator[Harness]:
    yield from governed(Harness(tmp_path, tools, model))


@pytest.fixture
def cc_warm(tmp_path: Path, tools: Tools, model: FakeModel) -> Iterator[Harness]:
    """Like cc, but with the warm server left on (the default); stopped afterwards."""
    yield from governed(Harness(tmp_path, tools, model, warm_server=True))
