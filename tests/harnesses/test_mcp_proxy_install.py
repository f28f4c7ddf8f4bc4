"""`install mcp-proxy --client CLIENT`: the proxy in front of the memory server, in each client's config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governor.harnesses.mcp_proxy.setup import CLIENTS, PORTABLE
from tests.conftest import ROOT, Env

ENGRAM = {"command": "uvx", "args": ["engram", "mcp", "--tools=agent"], "env": {"ENGRAM_DATA_DIR": "/data"}}
OTHER = {"command": "npx", "args": ["-y", "some-other-server"]}


@pytest.fixture(autouse=True)
def same_home(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """User-scope files are found from HOME: the same one here as in the command under test."""
    monkeypatch.setenv("HOME", env.vars["HOME"])
    monkeypatch.setenv("XDG_CONFIG_HOME", env.vars["XDG_CONFIG_HOME"])


def write(path: str, data: object) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2))


def read(path: str) -> Any:
    return json.loads(Path(path).read_text())


def cli(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return env.cli(*args, "--project", str(env.project))


def nest(keys: tuple[str, ...], servers: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {keys[-1]: servers, "theme": "dark"}
    for key in reversed(keys[:-1]):
        out = {key: out}
    return out


def servers_of(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    for key in keys:
        data = data[key]
    return data


@pytest.mark.parametrize(("client", "scope"), [(c, s) for c, target in CLIENTS.items() for s in target.scopes])
def test_install_puts_the_proxy_in_front_and_uninstall_restores_the_entry(env: Env, client: str, scope: str) -> None:
    keys = CLIENTS[client].keys(scope, str(env.project))
    path = CLIENTS[client].path(scope, str(env.project))
    original = nest(keys, {"engram": ENGRAM, "other": OTHER})
    write(path, original)
    out = cli(env, "install", "mcp-proxy", "--client", client, "--scope", scope)
    assert out.returncode == 0, out.stderr
    key = keys[-1]
    entry = servers_of(read(path), keys[:-1])[key]["engram"]
    assert entry["args"][-5:] == ["engram", "--", "uvx", "engram", "mcp", "--tools=agent"][-5:]
    if scope == "project":  # committed: no machine's path, the governor the launcher's rule finds
        assert entry["command"] == "sh" and entry["args"][:2] == ["-c", PORTABLE], entry
        assert str(ROOT) not in json.dumps(entry) and sys.executable not in json.dumps(entry)
    else:
        assert entry["args"][:3] == ["-I", "-S", str(ROOT / "governor" / "runtime" / "proxy.py")]
        assert entry["command"] == sys.executable
    assert entry["env"] == ENGRAM["env"]
    assert servers_of(read(path), keys)["other"] == OTHER and servers_of(read(path), keys[:-1])["theme"] == "dark"
    again = cli(env, "install", "mcp-proxy", "--client", client, "--scope", scope)
    assert "already in front of engram, nothing changed" in again.stdout
    assert cli(env, "uninstall", "mcp-proxy", "--client", client, "--scope", scope).returncode == 0
    assert read(path) == original
    assert json.dumps(read(path)) == json.dumps(original), "the keys keep their order"


def test_the_default_scope_is_the_clients_first(env: Env) -> None:
    path = CLIENTS["claude-desktop"].path("user", str(env.project))
    assert path.startswith(str(env.home)), path
    write(path, {"mcpServers": {"engram": ENGRAM}})
    out = cli(env, "install", "mcp-proxy", "--client", "claude-desktop")
    assert out.returncode == 0 and "Claude Desktop starts engram behind the governing proxy" in out.stdout
    assert "previous settings saved as" in out.stdout


def test_dry_run_changes_nothing(env: Env) -> None:
    path = CLIENTS["cursor"].path("project", str(env.project))
    write(path, {"mcpServers": {"engram": ENGRAM}})
    before = Path(path).read_text()
    out = cli(env, "install", "mcp-proxy", "--client", "cursor", "--dry-run")
    assert out.returncode == 0 and "would become" in out.stdout and "memory-governor" in out.stdout
    assert Path(path).read_text() == before


def test_install_refuses_invalid_json_and_says_where(env: Env) -> None:
    path = CLIENTS["cursor"].path("project", str(env.project))
    write(path, {})
    Path(path).write_text('{"mcpServers": {"engram": {"command": "x",}}}')
    out = cli(env, "install", "mcp-proxy", "--client", "cursor")
    assert out.returncode != 0 and ":1:" in out.stderr and "not valid JSON" in out.stderr
    assert Path(path).read_text() == '{"mcpServers": {"engram": {"command": "x",}}}'


def test_install_says_which_names_it_looked_for(env: Env) -> None:
    path = CLIENTS["cursor"].path("project", str(env.project))
    write(path, {"mcpServers": {"memory": OTHER}})
    out = cli(env, "install", "mcp-proxy", "--client", "cursor")
    assert out.returncode != 0 and "no MCP server named engram or plugin_engram_engram" in out.stderr
    # A team policy that maps the server's name makes it the one to govern.
    env.write(
        ".memory-governor/policy.yaml", "tools:\n  - servers: [memory]\n    map:\n      search_nodes: {role: search}\n"
    )
    out = cli(env, "install", "mcp-proxy", "--client", "cursor")
    assert out.returncode == 0, out.stderr
    assert read(path)["mcpServers"]["memory"]["args"][3:5] == ["--name", "memory"]


def test_a_remote_server_is_left_alone_with_a_reason(env: Env) -> None:
    path = CLIENTS["cursor"].path("project", str(env.project))
    write(path, {"mcpServers": {"engram": {"url": "https://example.invalid/mcp"}}})
    out = cli(env, "install", "mcp-proxy", "--client", "cursor")
    assert out.returncode != 0 and "cannot run behind the stdio proxy" in out.stderr


def test_the_installed_entry_runs_the_server_behind_the_proxy(env: Env) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import seed

    engram = {"command": sys.executable, "args": [str(ROOT / "tests" / "e2e" / "engram_mcp.py")],
              "env": {"ENGRAM_SEED": str(seed.write_engram_seed(env.tmp / "seed.json"))}}  # fmt: skip
    path = CLIENTS["cursor"].path("project", str(env.project))
    write(path, {"mcpServers": {"engram": engram}})
    assert cli(env, "install", "mcp-proxy", "--client", "cursor").returncode == 0
    entry = read(path)["mcpServers"]["engram"]
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "mem_search",
              "arguments": {"query": "jwt", "limit": 10}}}]  # fmt: skip
    proc = subprocess.run([entry["command"], *entry["args"]], input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, env={**env.vars, **entry["env"]}, timeout=60)  # fmt: skip
    answer = json.loads(proc.stdout)
    assert answer["result"]["content"][0]["text"].startswith("Found 3 memories"), proc.stderr


def test_doctor_reports_the_proxy_install(env: Env) -> None:
    path = CLIENTS["cursor"].path("project", str(env.project))
    write(path, {"mcpServers": {"engram": ENGRAM}})
    cli(env, "install", "mcp-proxy", "--client", "cursor")
    out = env.cli("doctor")
    assert "mcp-proxy cursor" in out.stdout and "engram behind the proxy" in out.stdout, out.stdout
    # A teammate's clone with no governor on PATH: the committed entry cannot start the server.
    bare = env.cli("doctor", env={"PATH": "/usr/bin:/bin"})
    assert "fail  mcp-proxy cursor" in bare.stdout.lower() and "no memory-governor on PATH" in bare.stdout


def test_client_and_scope_are_checked(env: Env) -> None:
    assert "needs --client" in cli(env, "install", "mcp-proxy").stderr
    assert "takes no --client" in cli(env, "install", "claude-code", "--client", "cursor").stderr
    assert (
        "has no 'project' scope"
        in cli(env, "install", "mcp-proxy", "--client", "windsurf", "--scope", "project").stderr
    )
