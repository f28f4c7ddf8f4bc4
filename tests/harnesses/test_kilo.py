"""Kilo Code CLI: `install kilo` writes OpenCode's plugin into Kilo's folders, naming this harness.

The plugin's messages and answers are OpenCode's (tests/harnesses/test_opencode.py holds their
logic); these tests hold what is Kilo's: where the install writes, that it is idempotent and
reversible at both scopes, that the hook it runs is Kilo's, and doctor. The real binary runs it
in tests/e2e/test_kilo.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from typing import Any

from governor.harnesses import adapter
from tests.conftest import ROOT, Env
from tests.harnesses.test_opencode import plugin_config


def _doctor(env: Env) -> dict[str, dict[str, str]]:
    out = env.cli("doctor", "--format", "json")
    return {row["check"]: row for row in json.loads(out.stdout) if row["check"].startswith(("kilo", "opencode"))}


def test_project_install_writes_opencodes_plugin_for_kilo_idempotent_and_reversible(env: Env) -> None:
    out = env.cli("install", "kilo", check=True)
    plugin = env.project / ".kilo" / "plugin" / "memory-governor.js"
    assert "installed the plugin for" in out.stdout and plugin.exists()
    text = plugin.read_text()
    config = plugin_config(plugin)
    assert config["harness"] == "kilo" and config["launcher"] == ".memory-governor/hook", config
    assert config["tools"]["engram_mem_search"] == ["engram", "mem_search"]
    assert not (env.project / ".opencode").exists(), "OpenCode's folders are left alone"
    if shutil.which("node"):
        check = subprocess.run(["node", "--check", str(plugin)], capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stderr
    again = env.cli("install", "kilo", check=True)
    assert "already installed, nothing changed" in again.stdout and plugin.read_text() == text
    rows = _doctor(env)
    assert rows["kilo (project)"]["status"] == "ok", rows
    assert rows["kilo plugin"]["status"] == "ok" and "clamped limit 10 -> 3" in rows["kilo plugin"]["detail"], rows
    assert not [name for name in rows if name.startswith("opencode")], rows
    out = env.cli("uninstall", "kilo", check=True)
    assert "plugin removed" in out.stdout and not plugin.exists()
    assert not (env.project / ".memory-governor" / "hook").exists(), "no other harness runs the launcher"
    assert _doctor(env) == {}


def test_user_install_goes_to_kilos_config_folder_and_runs_the_kilo_hook(env: Env) -> None:
    env.cli("install", "kilo", "--scope", "user", check=True)
    plugin = env.home / ".config" / "kilo" / "plugin" / "memory-governor.js"
    assert plugin_config(plugin)["command"] == [sys.executable, "-I", "-S",
                                                      str(ROOT / "governor" / "runtime" / "entry.py"), "kilo"]  # fmt: skip
    assert not (env.project / ".memory-governor" / "hook").exists(), "no launcher for a per-machine scope"
    assert _doctor(env)["kilo (user)"]["status"] == "ok"
    env.cli("uninstall", "kilo", "--scope", "user", check=True)
    assert not plugin.exists()


def test_doctor_names_a_memory_server_in_kilo_json_the_policy_does_not_map(env: Env) -> None:
    env.cli("install", "kilo", check=True)
    env.write("kilo.jsonc", '{\n  // the team\'s servers\n  "mcp": {"mem0": {"type": "local", "command": '
              '["uvx", "mem0-mcp"]},},\n}\n')  # fmt: skip
    out = env.cli("doctor", "--format", "json")
    [row] = [row for row in json.loads(out.stdout) if row["check"] == "memory server"]
    assert row["status"] == "warn" and "'mem0'" in row["detail"] and "kilo.jsonc" in row["detail"], row


def test_the_kilo_hook_process_clamps_and_refuses_as_the_plugin_expects(env: Env) -> None:
    """The hook the plugin runs (`entry.py kilo`), fed the plugin's messages: a clamp is the whole
    new `args`, the third search of a turn a refusal, and no objection no output."""
    hook = [sys.executable, "-I", "-S", str(ROOT / "governor" / "runtime" / "entry.py"), "kilo"]

    def send(message: dict[str, Any]) -> str:
        proc = subprocess.run(hook, input=json.dumps({"sessionID": "ses_1", "parentID": "", "agent": "code",
                              "directory": str(env.project), **message}), capture_output=True, text=True,
                              timeout=60, env=env.vars, cwd=str(env.project))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    send({"hook": "chat.message", "messageID": "msg_1", "parts": [{"type": "text", "text": "what did we decide?"}]})
    answers = [json.loads(send({"hook": "tool.execute.before", "tool": "engram_mem_search", "callID": f"call_{i}",
                                "args": {"query": "auth", "limit": 10},
                                "mcp": {"server": "engram", "tool": "mem_search"}})) for i in range(3)]  # fmt: skip
    assert [a.get("args", {}).get("limit") for a in answers[:2]] == [3, 3], answers
    assert "max_search_calls=2" in answers[2]["deny"], answers
    assert send({"hook": "tool.execute.before", "tool": "bash", "callID": "call_9",
                 "args": {"command": "ls", "description": "list"}}) == ""  # fmt: skip
    assert adapter("kilo").NAME == "kilo" and ".kilo/agent/{name}.md" in adapter("kilo").AGENT_DIRS
