"""A session of a host whose hooks are a script it loads (Pi's extension, Cline's plugin), as that
script reports it to the governor, event by event: the hook process fed the script's messages."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from typing import Any

from tests.conftest import ROOT, Env, hook_run

ANSWER_KEYS = {"deny", "input", "content", "context", "systemMessage"}


class Scripted:
    """One session; a subclass names the harness, how it spells an MCP tool, and its prompt event."""

    harness = ""
    spell: Callable[[str, str], str]
    SHELL_TOOLS: tuple[str, ...] = ("bash", "read", "write", "edit", "run_commands", "read_files", "apply_patch")

    def __init__(self, env: Env, session_id: str = "019a24b9-7643-74d8-b66e-76ae96ab644c", **fields: Any) -> None:
        """`fields`: what the script sends with every message (Cline's agent ids)."""
        self.env, self.id, self.fields = env, session_id, fields
        self.hook = [sys.executable, "-I", "-S", str(ROOT / "governor" / "runtime" / "entry.py"), self.harness]

    def send(self, event: str, **fields: Any) -> dict[str, Any] | None:
        payload = {"event": event, "sessionId": self.id, "cwd": str(self.env.project), **self.fields, **fields}
        proc = hook_run(self.hook, json.dumps(payload).encode(), self.env.vars, self.env.project)
        assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
        out = proc.stdout.decode()
        answer = json.loads(out) if out.strip() else None
        assert answer is None or (set(answer) <= ANSWER_KEYS and out.count("\n") <= 1), out
        return answer

    def before(self, tool: str, call_id: str | None = None, **tool_input: Any) -> tuple[str, dict[str, Any] | None]:
        call_id = call_id or f"call_{uuid.uuid4().hex[:24]}@mqv1"
        mcp = None if tool in self.SHELL_TOOLS else {"server": "engram", "tool": tool}
        name = tool if mcp is None else self.spell("engram", tool)
        return call_id, self.send("tool_call", toolName=name, toolCallId=call_id, input=tool_input, mcp=mcp)

    def after(self, tool: str, call_id: str, text: str, **tool_input: Any) -> dict[str, Any] | None:
        return self.send("tool_result", toolName=self.spell("engram", tool), toolCallId=call_id, input=tool_input,
                         mcp={"server": "engram", "tool": tool}, content=[{"type": "text", "text": text}],
                         isError=False)  # fmt: skip


def without_a_governor(env: Env, harness: str, spell: Callable[[str, str], str]) -> None:
    """The project install's launcher on a machine with no governor, under on_error: closed: the
    session start tells the user, a memory call is refused, another tool's call is let through."""
    import subprocess

    (env.project / ".memory-governor").mkdir(exist_ok=True)
    (env.project / ".memory-governor" / "policy.yaml").write_text("version: 1\non_error: closed\n")
    assert env.cli("install", harness, "--project", str(env.project)).returncode == 0
    launcher = str(env.project / ".memory-governor" / "hook")
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(env.home), "LANG": "C.UTF-8"}

    def ask(payload: dict[str, Any]) -> dict[str, Any]:
        compact = json.dumps(payload, separators=(",", ":"))  # as JSON.stringify writes it
        run = subprocess.run(["sh", launcher, harness], input=compact, capture_output=True, text=True,
                             env=bare, cwd=env.project, timeout=60)  # fmt: skip
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout) if run.stdout.strip() else {}

    base = {"sessionId": "s1", "cwd": str(env.project)}
    told = ask({**base, "event": "session_start", "reason": "startup"})
    assert "memory-governor is not installed on this machine" in told["systemMessage"], told
    refused = ask({**base, "event": "tool_call", "toolName": spell("engram", "mem_search"), "toolCallId": "c1",
                   "input": {"query": "auth"}, "mcp": {"server": "engram", "tool": "mem_search"}})  # fmt: skip
    assert refused.get("deny", "").startswith("memory-governor is not installed"), refused
    ordinary = ask({**base, "event": "tool_call", "toolName": "edit", "toolCallId": "c2", "input": {"path": "a.py"},
                    "mcp": None})  # fmt: skip
    assert ordinary == {}, "ordinary work is never refused"
