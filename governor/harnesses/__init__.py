"""Harness adapters: everything one coding agent needs, one sub-package per harness.

The engine knows no harness; each harness is one sub-package, `governor/harnesses/<name>/`,
behind the same small interface (as pre-commit keeps one module per language):

- `__init__.py`, the hot path (imported by every hook process; standard library only):
  `NAME`; `BadPayload`; `event_name(payload)`, `sniff_event(raw)`; `parse(payload, env) ->
  Event | None`; `render(event_name, decision) -> dict | None` (the one JSON object the hook
  prints, None for no output); `refusal(event_name, reason)` (the fail-closed answer);
  `neutral(event_name)` where the harness blocks a call its hook does not answer (Antigravity:
  the answer printed whenever nothing else is); and,
  where another harness may run this one's hooks, `foreign(payload, env) -> name | None`.
  Where the harness cannot express a decision, `render` downgrades it to the safest thing
  the harness can say, and `CAPABILITIES` (its row in docs/harnesses.md) says so.
  What every adapter shares is written once beside them: `payload` (the one `BadPayload`,
  field checks, the event of input that is not JSON) and `answers` (the common answer
  shapes, which an adapter's `answers.Dialect` spells).
- `setup.py`, the cold path: where its settings live and how to install, uninstall and
  doctor there (`plan_install`, `plan_uninstall`, `doctor`), with the shared promises of
  `governor.harnesses.settings` (idempotent, atomic, backed up, other hooks kept).
- `transcripts.py` (optional): how to read its session logs for `replay`
  (`recognise(path)`, `steps(path)`, producing `governor.harnesses.transcript.Step`s).

Adding a harness is its sub-package, its tests, and one line in REGISTRY below.

May import: governor.engine, governor.policy, governor.state, and itself; never the runtime,
the review tools or the commands (they import it).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

# name (as on the command line and in the installed hook command) -> its package.
REGISTRY = {
    "antigravity": "governor.harnesses.antigravity",
    "claude-agent-sdk": "governor.harnesses.claude_agent_sdk",
    "claude-code": "governor.harnesses.claude_code",
    "cline": "governor.harnesses.cline",
    "droid": "governor.harnesses.droid",
    "codex": "governor.harnesses.codex",
    "copilot": "governor.harnesses.copilot",
    "gemini-cli": "governor.harnesses.gemini_cli",
    "kilo": "governor.harnesses.kilo",
    "langchain": "governor.harnesses.langchain",
    "mcp-proxy": "governor.harnesses.mcp_proxy",
    "openai-agents": "governor.harnesses.openai_agents",
    "opencode": "governor.harnesses.opencode",
    "pi": "governor.harnesses.pi",
    "qwen-code": "governor.harnesses.qwen_code",
}

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY = os.path.join(_PACKAGE, "runtime", "entry.py")  # the hook process (governor.runtime.hook)


class UnknownHarness(KeyError):
    def __str__(self) -> str:
        return f"no adapter for harness {self.args[0]!r}: known are {', '.join(sorted(REGISTRY))}"


def names() -> list[str]:
    return list(REGISTRY)


def adapter(name: str) -> ModuleType:
    """The hot-path module of harness `name`."""
    import sys

    module = REGISTRY.get(name)
    if module is None:
        raise UnknownHarness(name)
    __import__(module)  # not importlib: a hook would import it, and `warnings` with it, for this alone
    return sys.modules[module]


def part(name: str, which: str) -> ModuleType | None:
    """A cold-path module of harness `name` (`setup`, `transcripts`), None if it has none."""
    import importlib

    module = REGISTRY.get(name)
    if module is None:
        raise UnknownHarness(name)
    try:
        return importlib.import_module(f"{module}.{which}")
    except ModuleNotFoundError as err:
        if err.name == f"{module}.{which}":
            return None
        raise


def agent_dirs(project: str) -> list[str]:
    """Where every harness keeps subagent definitions, under the project and under HOME."""
    home = os.path.expanduser("~")
    return [os.path.join(base, rel) for name in names() for rel in getattr(adapter(name), "AGENT_DIRS", ())
            for base in (project, home)]  # fmt: skip


def hook_command(harness: str, python: str | None = None) -> str:
    """The command a harness runs for each hook: this interpreter, isolated from the user's
    environment and project (-I: no PYTHONPATH, no user site, no cwd on sys.path), without
    site at start (-S, faster), and the entry file by its absolute path."""
    import sys

    return f'"{python or sys.executable}" -I -S "{ENTRY}" {harness}'
