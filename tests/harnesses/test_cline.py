"""The Cline hook under the shipped policy, fed the messages its plugin sends, and its installer.

The plugin (governor/harnesses/cline/plugin.js) builds each message from what Cline 3.0.65 hands a
plugin's runtime hooks (docs/cline.md): `prompt` with the last user message of a root agent's run,
`tool_call` with the tool's name, Cline's toolCallId and the input, `tool_result` with the MCP
result's content blocks, and the agent ids of the snapshot (a subagent's `parentAgentId`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from governor.harnesses.cline import parse, tool_name
from tests.conftest import Env, fixture_text, snippets
from tests.harnesses.scripted import Scripted, without_a_governor

SEARCH = fixture_text("engram/search_v1.txt")


class Cline(Scripted):
    """A Cline session as the plugin reports it; `agentId`/`parentAgentId` of the agent at work."""

    harness, spell = "cline", staticmethod(tool_name)

    def prompt(self, text: str) -> dict[str, Any] | None:
        return self.send("prompt", prompt=text)

    def subagent(self, agent_id: str, role: str | None = None) -> Cline:
        return Cline(self.env, self.id, agentId=agent_id, parentAgentId=self.fields["agentId"], agentRole=role)


@pytest.fixture
def cline(env: Env) -> Cline:
    return Cline(env, "1796566428774_aaccw", agentId="agent_1796566432011_4m6obo", parentAgentId=None)


def test_tool_names_are_spelt_as_cline_spells_them() -> None:
    assert tool_name("engram", "mem_search") == "engram__mem_search"
    long = tool_name("my.engram", "mem_search")
    assert long.startswith("my_engram__mem_search_") and len(long) == len("my_engram__mem_search") + 9


def test_a_search_is_clamped_capped_and_an_unnamed_subagent_gets_the_default_tier(cline: Cline) -> None:
    answer = cline.prompt("what did we decide about caching?")
    assert answer is not None and "memory_need=" in answer["context"]
    first_id, first = cline.before("mem_search", query="cache", limit=10)
    assert first == {"input": {"query": "cache", "limit": 3}}
    delivered = cline.after("mem_search", first_id, SEARCH, query="cache", limit=3)
    assert delivered == {"content": [{"type": "text", "text": snippets(SEARCH)}]}, "every hit, as its snippet"
    # spawn_agent names no agent: a subagent gets the tier the policy gives an unnamed one (briefing-only).
    helper = cline.subagent("agent_1796566440000_abcdef")
    assert helper.prompt("search the history") is None, "a subagent's task is no user prompt"
    _, refused = helper.before("mem_search", query="auth", limit=3)
    assert refused is not None and "briefing-only" in refused["deny"], refused
    _, second = cline.before("mem_search", query="auth", limit=3)
    assert second == {"input": {"query": "auth", "limit": 6}}, "3 new, and the 3 it may find already shown"
    _, third = cline.before("mem_search", query="storage", limit=3)
    assert third is not None and "max_search_calls=2" in third["deny"]
    cline.prompt("and about storage?")
    _, fresh = cline.before("mem_search", query="storage", limit=3)
    assert fresh == {"input": {"query": "storage", "limit": 6}}, "a new turn: searching again (3 new ones)"


def test_a_guessed_fetch_is_refused_and_the_shell_routes_hold(cline: Cline) -> None:
    cline.prompt("show observation 62")
    _, guessed = cline.before("mem_get_observation", id=62)
    assert guessed is not None and "id=62 was not surfaced" in guessed["deny"]
    _, shell = cline.before("run_commands", commands=["ls", "engram search sqlite --limit 50"])
    assert shell is not None and "route 'engram-cli'" in shell["deny"]
    _, read = cline.before("read_files", files=[{"path": "/home/u/.engram/engram.db"}])
    assert read is not None and "route 'engram-database'" in read["deny"]
    _, settings = cline.before("run_commands", commands=["rm -rf .cline/plugins"])
    assert settings is not None and "route 'harness-settings'" in settings["deny"]
    _, ordinary = cline.before("run_commands", commands=["ls -la", "python -m pytest"])
    assert ordinary is None, "ordinary work is never refused"
    hook = "*** Begin Patch\n*** Add File: .clinerules/hooks/PreToolUse\n+exit 0\n*** End Patch\n"
    _, patched = cline.before("apply_patch", input=hook)
    assert patched is not None and "route 'harness-settings'" in patched["deny"]
    edit = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-x = 1\n+x = 2  # see .cline/ docs\n*** End Patch\n"
    _, work = cline.before("apply_patch", input=edit)
    _, reads = cline.before("read_files", files=[{"path": "src/app.py", "start_line": 1}, {"path": "README.md"}])
    assert work is None and reads is None, "a patch of the project's code, and reading it, are ordinary work"


def test_parse_reads_the_plugins_messages() -> None:
    base = {"sessionId": "s", "cwd": "/p", "agentId": "a", "parentAgentId": None}
    assert parse({**base, "event": "session_start", "reason": "resume"}).source == "resume"  # type: ignore[union-attr]
    sub = {**base, "parentAgentId": "a", "agentId": "b"}
    assert parse({**sub, "event": "prompt", "prompt": "x"}) is None
    call = parse({**sub, "event": "tool_call", "toolName": "engram__mem_search", "toolCallId": "c", "input": {},
                  "mcp": {"server": "engram", "tool": "mem_search"}})  # fmt: skip
    assert call is not None and (call.session_id, call.agent_id) == ("s", "b")


def install(env: Env, *args: str) -> Any:
    return env.cli("install", "cline", "--project", str(env.project), *args)


def test_install_is_idempotent_and_reversible_in_both_scopes(env: Env) -> None:
    project_file = env.project / ".cline" / "plugins" / "memory-governor.js"
    user_file = env.home / ".cline" / "plugins" / "memory-governor.js"
    assert install(env).returncode == 0 and project_file.exists()
    text = project_file.read_text()
    assert text.startswith("// memory-governor for Cline:") and '"launcher": ".memory-governor/hook"' in text
    assert json.dumps("engram__mem_search") in text and "function governorClient(" in text
    assert "already installed" in install(env).stdout
    assert install(env, "--scope", "user").returncode == 0 and user_file.exists()
    doctor = env.cli("doctor")
    assert "cline (project)" in doctor.stdout and "clamped limit 10 -> 3" in doctor.stdout, doctor.stdout
    assert env.cli("uninstall", "cline", "--project", str(env.project)).returncode == 0 and not project_file.exists()
    assert env.cli("uninstall", "cline", "--project", str(env.project), "--scope", "user").returncode == 0
    assert not user_file.exists()


def test_the_committed_launcher_without_a_governor_tells_the_user_and_refuses_memory_calls(env: Env) -> None:
    without_a_governor(env, "cline", tool_name)
