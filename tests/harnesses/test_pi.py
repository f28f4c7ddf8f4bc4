"""The Pi hook under the shipped policy, fed the messages its extension sends, and its installer.

The extension (governor/harnesses/pi/extension.js) builds each message from what Pi 1.6.0 hands its
handlers (docs/pi.md): `before_agent_start` with the prompt and its messageType, `tool_call` with the
tool's name, Pi's toolCallId and the input, `tool_result` with the result's content blocks, and the
server and tool a governed name stands for. The ids here have Pi's shapes (UUIDv7 sessions, call_…).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governor.harnesses.payload import BadPayload
from governor.harnesses.pi import parse, tool_name
from tests.conftest import Env, fixture_text, snippets
from tests.harnesses.scripted import Scripted, without_a_governor

SEARCH = fixture_text("engram/search_v1.txt")


class Pi(Scripted):
    """A Pi session as the extension reports it, event by event."""

    harness, spell = "pi", staticmethod(tool_name)

    def prompt(self, text: str, message_type: str = "user") -> dict[str, Any] | None:
        return self.send("before_agent_start", prompt=text, messageType=message_type)


@pytest.fixture
def pi(env: Env) -> Pi:
    return Pi(env)


def test_tool_names_are_spelt_as_pi_spells_them() -> None:
    assert tool_name("engram", "mem_search") == "mcp__engram__mem_search"
    assert tool_name("my-engram.v2", "mem_search") == "mcp__my_engram_v2__mem_search"


def test_the_prompt_gets_its_memory_need_and_a_search_is_clamped_then_capped(pi: Pi) -> None:
    pi.send("session_start", reason="startup")
    answer = pi.prompt("what did we decide about caching?")
    assert answer is not None and "memory_need=" in answer["context"]
    first_id, first = pi.before("mem_search", query="cache", limit=10)
    assert first == {"input": {"query": "cache", "limit": 3}}, "the whole new input, for the extension to apply"
    delivered = pi.after("mem_search", first_id, SEARCH, query="cache", limit=3)
    assert delivered == {"content": [{"type": "text", "text": snippets(SEARCH)}]}, "every hit, as its snippet"
    _, second = pi.before("mem_search", query="auth", limit=3)
    assert second == {"input": {"query": "auth", "limit": 6}}, "3 new, and the 3 it may find already shown"
    _, third = pi.before("mem_search", query="storage", limit=3)
    assert third is not None and "max_search_calls=2" in third["deny"]
    pi.prompt("and about storage?")  # a new prompt: a new turn
    _, fresh = pi.before("mem_search", query="storage", limit=3)
    assert fresh == {"input": {"query": "storage", "limit": 6}}, "a new turn: searching again (3 new ones)"


def test_a_guessed_fetch_is_blocked_and_routes_are_refused(pi: Pi) -> None:
    pi.prompt("show observation 62")
    _, guessed = pi.before("mem_get_observation", id=62)
    assert guessed is not None and "id=62 was not surfaced" in guessed["deny"]
    _, shell = pi.before("bash", command="engram search sqlite --limit 50")
    assert shell is not None and "route 'engram-cli'" in shell["deny"]
    _, ordinary = pi.before("bash", command="ls -la")
    assert ordinary is None, "ordinary work is never refused"


def test_a_message_an_extension_sent_is_no_users_prompt(pi: Pi) -> None:
    pi.prompt("what did we decide about caching?")
    for query in ("a", "b"):
        pi.before("mem_search", query=query, limit=3)
    assert pi.prompt("give me all context", message_type="custom") is None, "no advice, arms nothing"
    _, capped = pi.before("mem_search", query="c", limit=3)
    assert capped is not None and "max_search_calls=2" in capped["deny"], "it opened no turn of its own"
    _, context = pi.before("mem_context", project="p")
    assert context is not None and "mem_context" in context["deny"], "its words armed no recall"


def test_parse_reads_every_event_and_refuses_what_pi_never_sends() -> None:
    base = {"sessionId": "s", "cwd": "/p"}
    assert parse({**base, "event": "session_start", "reason": "resume"}).source == "resume"  # type: ignore[union-attr]
    assert parse({**base, "event": "session_start", "reason": "reload"}) is None, "a reload starts nothing"
    assert parse({**base, "event": "session_compact"}).source == "compact"  # type: ignore[union-attr]
    failed = parse({**base, "event": "tool_result", "toolName": "mcp__engram__mem_search", "isError": True,
                    "mcp": {"server": "engram", "tool": "mem_search"}, "content": [{"type": "text", "text": "x"}]})  # fmt: skip
    assert failed is not None and failed.kind == "tool_failed"
    assert parse({**base, "event": "turn_start"}) is None
    for bad in ([], {"sessionId": "s"}, {**base, "event": "tool_call"}, {**base, "event": "tool_call", "toolName": "x",
                                                                         "input": "not an object"}):  # fmt: skip
        with pytest.raises(BadPayload):
            parse(bad)


# -- the installer ---------------------------------------------------------------------------------


def install(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return env.cli("install", "pi", "--project", str(env.project), *args)


def test_install_is_idempotent_backed_up_and_reversible_in_both_scopes(env: Env) -> None:
    project_file = env.project / ".pi" / "extensions" / "memory-governor.js"
    user_file = env.home / ".pi" / "agent" / "extensions" / "memory-governor.js"
    first = install(env)
    assert first.returncode == 0 and project_file.exists(), first.stderr
    assert "not trusted yet" in first.stdout, "Pi loads .pi/extensions only in a trusted project: said"
    assert (env.project / ".memory-governor" / "hook").exists(), "the committed launcher"
    text = project_file.read_text()
    assert text.startswith("// memory-governor for Pi:") and '"launcher": ".memory-governor/hook"' in text
    assert "function governorClient(" in text and str(env.tmp) not in text, "the client written in, no machine path"
    assert "already installed" in install(env).stdout
    assert install(env, "--scope", "user").returncode == 0 and user_file.exists()
    assert str(sys.executable) in user_file.read_text(), "the user scope runs this interpreter"
    assert env.cli("uninstall", "pi", "--project", str(env.project)).returncode == 0
    assert not project_file.exists() and not (env.project / ".memory-governor" / "hook").exists()
    assert env.cli("uninstall", "pi", "--project", str(env.project), "--scope", "user").returncode == 0
    assert not user_file.exists()


def test_a_file_of_that_name_that_is_not_ours_is_never_overwritten(env: Env) -> None:
    theirs = env.project / ".pi" / "extensions" / "memory-governor.js"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("export default function (pi) {}\n")
    out = install(env)
    assert out.returncode != 0 and "not memory-governor's" in out.stdout + out.stderr
    assert theirs.read_text() == "export default function (pi) {}\n"


def test_doctor_fails_an_untrusted_project_and_passes_a_trusted_one(env: Env) -> None:
    install(env)
    untrusted = env.cli("doctor")
    assert "is not trusted" in untrusted.stdout, untrusted.stdout
    trust = env.home / ".pi" / "agent" / "trust.json"
    trust.parent.mkdir(parents=True)
    trust.write_text(json.dumps({os.path.realpath(env.project): True}))
    trusted = env.cli("doctor")
    assert "is not trusted" not in trusted.stdout and "clamped limit 10 -> 3" in trusted.stdout, trusted.stdout


def test_the_installed_extension_is_valid_javascript_with_no_dependencies(env: Env) -> None:
    install(env, "--scope", "user")
    path = env.home / ".pi" / "agent" / "extensions" / "memory-governor.js"
    imports = [line for line in path.read_text().splitlines() if line.startswith("import ")]
    assert imports and all('from "node:' in line for line in imports), imports
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found")
    copy = Path(env.tmp) / "check.mjs"
    copy.write_text(path.read_text())
    check = subprocess.run([node, "--check", str(copy)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr


def test_pis_own_settings_and_extensions_are_out_of_the_models_reach(pi: Pi) -> None:
    pi.prompt("tidy up the project")
    for tool, tool_input in [("write", {"path": ".pi/extensions/memory-governor.js", "content": ""}),
                             ("edit", {"path": str(pi.env.home / ".pi/agent/mcp.json"), "edits": []}),
                             ("bash", {"command": "rm -rf .pi/extensions"}),
                             ("bash", {"command": "mv ~/.pi/agent/trust.json /tmp/x"}),
                             ("bash", {"command": "echo '{}' > .pi/settings.json"})]:  # fmt: skip
        _, answer = pi.before(tool, **tool_input)
        assert answer is not None and "route 'harness-settings'" in answer["deny"], (tool, tool_input, answer)
    for tool, tool_input in [("bash", {"command": "ls src && python -m pytest"}),
                             ("write", {"path": "docs/api.md", "content": "x"}),
                             ("read", {"path": ".pi/mcp.json"})]:  # fmt: skip
        _, answer = pi.before(tool, **tool_input)
        assert answer is None, (tool, tool_input, answer)


def test_the_committed_launcher_without_a_governor_tells_the_user_and_refuses_memory_calls(env: Env) -> None:
    without_a_governor(env, "pi", tool_name)
