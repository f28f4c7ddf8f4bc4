"""The MCP proxy through real clients: the pinned Claude Code with NO hooks (and once with its hooks as
well), and the official MCP Python SDK client; behind it, the Engram stand-in and the real
@modelcontextprotocol/server-memory. Assertions read what the model (or the client) received and
what the server received.

Claude Code's MCP config is written by the project's own installer (`install mcp-proxy --client
claude-code`), then handed to `claude -p --mcp-config`, so the entry under test is the installed one.

Run: .venv/bin/python -m pytest tests/e2e/test_mcp_proxy.py -m e2e -q
"""

from __future__ import annotations

import json
import os
from typing import Any

import npm
import pytest
from conftest import CLAUDE_CODE_RECENT, HERE, PYTHON, ROOT, Harness, Tools
from fake_model import call, engram, text, tool_uses
from test_claude_code import GRAPH_POLICY, NOTE, denied, hit_ids, o200k

from governor.engine.stores import open_ledger
from governor.harnesses.mcp_proxy.setup import PORTABLE

pytestmark = pytest.mark.e2e

PROXY = ROOT / "governor" / "runtime" / "proxy.py"
FOUR = ("jwt auth", "fts5 search", "repository errors", "sqlite storage")


def behind_proxy(cc: Harness, hooks: bool = False) -> None:
    """Every run's memory servers start behind the proxy, as `install mcp-proxy` writes them."""
    cc.hooks = hooks
    write = cc._write_mcp_config

    def installed() -> None:
        write()
        project_config = cc.project / ".mcp.json"
        project_config.write_text(cc.mcp_config.read_text())
        cc.governor("install", "mcp-proxy", "--client", "claude-code", "--scope", "project",
                    "--project", str(cc.project))  # fmt: skip
        cc.mcp_config.write_text(project_config.read_text())
        project_config.unlink()  # one copy of each server: the one --mcp-config names

    cc._write_mcp_config = installed  # type: ignore[method-assign]


def ledger_rows(cc: Harness, sql: str) -> list[Any]:
    ledger = open_ledger(str(cc.state))
    try:
        return ledger.q(sql)
    finally:
        ledger.close()


def four_searches() -> dict[str, Any]:
    return tool_uses(*[engram("mem_search", query=q, limit=10 if i == 0 else 3) for i, q in enumerate(FOUR)])


def test_claude_code_without_hooks_is_governed_by_the_proxy(cc: Harness) -> None:
    behind_proxy(cc)
    run = cc.run("What did we decide about auth, search, the repository layer and storage?",
                 main=[four_searches(), text("Summarised.")])  # fmt: skip
    assert not (cc.project / ".claude" / "settings.json").exists(), "no hooks in this project"
    entry = json.loads(cc.mcp_config.read_text())["mcpServers"]["engram"]
    assert entry["command"] == "sh" and entry["args"][:2] == ["-c", PORTABLE], entry  # committed: no machine's path
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    real = [r for r in results if not r.is_error]
    refused = [r for r in results if r.is_error]
    assert len(real) == 2 and len(refused) == 2, run.describe()
    assert all(hit_ids(r.text) for r in real)
    assert all(denied(r, "max_search_calls=2", "do not retry") for r in refused), run.describe()
    calls = cc.calls("mem_search")
    assert len(calls) == 2 and all(c["arguments"]["limit"] == 3 for c in calls), calls  # limit 10 clamped
    # Claude Code's own ids name the calls in its own session: the ledger shows which.
    rows = ledger_rows(cc, "SELECT session, call_id, state FROM calls WHERE role='search'")
    assert {r[0] for r in rows} == {f"s:{run.session_id}"}, rows
    assert sorted(r[2] for r in rows) == ["committed", "committed", "denied", "denied"], rows
    assert all(r[1].startswith("s:toolu_") for r in rows), rows


def test_each_claude_code_run_is_a_new_turn_behind_the_proxy(cc: Harness) -> None:
    behind_proxy(cc)
    two = [engram("mem_search", query=q, limit=3) for q in FOUR[:2]]
    first = cc.run("What did we decide about auth and search?", main=[tool_uses(*two), text("Done.")])
    assert not any(r.is_error for r in first.results_of("mem_search")), first.describe()
    again = cc.run("And the repository layer and storage?", resume=first.session_id,
                   main=[tool_uses(*[engram("mem_search", query=q, limit=3) for q in FOUR[2:]]), text("Done.")])  # fmt: skip
    assert not any(r.is_error for r in again.results_of("mem_search")), again.describe()
    assert len(cc.calls("mem_search")) == 4


def test_a_result_over_the_budget_reaches_the_model_trimmed(cc: Harness) -> None:
    # A search is expected at 40 tokens a hit (one snippet), so three are let through under the
    # budget; its hits are near their 300-character previews (~85 each) and the proxy trims them.
    cc.team_policy(
        "version: 1\nlimits:\n  max_memory_tokens_injected: {value: 150, enforce: block}\n"
        "ladder:\n  L1: {expected_tokens: 40}\n"
    )
    behind_proxy(cc)
    run = cc.run("What did we decide about auth?", main=[tool_uses(engram("mem_search", query="auth tokens session",
                                                                              limit=3)), text("Done.")])  # fmt: skip
    [search] = run.results_of("mem_search")
    assert not search.is_error and NOTE in search.text and "held back" in search.text, run.describe()
    assert o200k(search.text) <= 150
    assert [c["arguments"]["limit"] for c in cc.calls("mem_search")] == [3]


def test_with_hooks_as_well_each_call_is_decided_once(cc: Harness) -> None:
    behind_proxy(cc, hooks=True)
    run = cc.run("What did we decide about auth, search, the repository layer and storage?",
                 main=[four_searches(), text("Summarised.")])  # fmt: skip
    assert (cc.project / ".claude" / "settings.json").exists()
    results = run.results_of("mem_search")
    assert sum(not r.is_error for r in results) == 2 and sum(denied(r, "max_search_calls") for r in results) == 2
    assert len(cc.calls("mem_search")) == 2
    # The hooks reserved and committed each call; the proxy deferred to them and counted nothing:
    # one row per call, and every decision the proxy would have made is absent from the audit.
    rows = ledger_rows(cc, "SELECT call_id, state FROM calls WHERE role='search'")
    assert sorted(r[1] for r in rows) == ["committed", "committed", "denied", "denied"], rows
    turns = ledger_rows(cc, "SELECT turn FROM turns")
    assert not [t for (t,) in turns if "gap:" in t], f"the proxy started a turn of its own: {turns}"
    events = ledger_rows(cc, "SELECT event, COUNT(*) FROM decisions WHERE role='search' GROUP BY event")
    assert dict(events) == {"pre_tool": 4, "post_tool": 2}, events


def test_server_memory_behind_the_proxy_in_claude_code(cc: Harness) -> None:
    cc.team_policy(GRAPH_POLICY)
    cc.use_memory_server()
    behind_proxy(cc)
    # Claude Code 2.1.197 may send its first model request before a slower server (node, behind the
    # proxy) has connected ("still connecting"); MCP_CONNECTION_NONBLOCKING=0 makes it wait for them.
    cc.env["MCP_CONNECTION_NONBLOCKING"] = "0"
    run = cc.run("What did we decide about the auth components?", main=[
        tool_uses(call("mcp__memory__read_graph")),
        tool_uses(call("mcp__memory__search_nodes", {"query": "auth"})),
        text("Done."),
    ])  # fmt: skip
    [graph] = run.results_of("read_graph")
    [search] = run.results_of("search_nodes")
    assert denied(graph), graph.text
    body = search.text.split(NOTE)[0]
    entities = json.loads(body)["entities"]
    assert 1 <= len(entities) <= 3 and NOTE in search.text, search.text


# -- the official MCP Python SDK client ----------------------------------------------------------


def _sdk() -> Any:
    try:
        import mcp.client.session
        import mcp.client.stdio
    except ImportError as err:
        npm.unavailable(f"the MCP Python SDK is not installed ({err}): pip install -e '.[test]'")
    return mcp


# The SDK client's tests drive the proxy from the official MCP Python SDK, not Claude Code: the
# sandbox is the only part of `cc` they use, so they run once (on the recent pin), not once per pin.
SDK_CLIENT = pytest.mark.claude_code(CLAUDE_CODE_RECENT)


def _sdk_run(cc: Harness, server: list[str], script: Any, extra_env: dict[str, str] | None = None) -> Any:
    """Start the proxy (as the installed entry does) in front of `server` from the SDK client; run `script`."""
    import anyio

    mcp = _sdk()
    env = {**os.environ, **cc.env, **(extra_env or {})}
    env.pop("CLAUDE_CODE_SESSION_ID", None)
    params = mcp.client.stdio.StdioServerParameters(
        command=PYTHON, args=["-I", "-S", str(PROXY), "--name", server[0], "--", *server[1:]], env=env,
        cwd=str(cc.project),
    )  # fmt: skip

    async def main() -> Any:
        async with (
            mcp.client.stdio.stdio_client(params) as (read, write),
            mcp.client.session.ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await script(session)

    return anyio.run(main)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@SDK_CLIENT
def test_sdk_client_parallel_calls_keep_exact_counts(cc: Harness) -> None:
    import anyio

    async def script(session: Any) -> list[Any]:
        results: list[Any] = []

        async def one(query: str) -> None:
            results.append(await session.call_tool("mem_search", {"query": query, "limit": 10}))

        async with anyio.create_task_group() as group:
            for query in FOUR:
                group.start_soon(one, query)
        return results

    engram_env = {"ENGRAM_SEED": str(cc.seed), "ENGRAM_CALL_LOG": str(cc.call_log)}
    results = _sdk_run(cc, ["engram", PYTHON, str(HERE / "engram_mcp.py")], script, engram_env)
    assert sum(not r.is_error for r in results) == 2, [_text(r) for r in results]
    refused = [_text(r) for r in results if r.is_error]
    assert len(refused) == 2 and all("max_search_calls=2" in t for t in refused), refused
    assert [c["arguments"]["limit"] for c in cc.calls("mem_search")] == [3, 3]
    # The SDK client sends no id of its own (no `_meta`): the calls are named by their JSON-RPC ids.
    rows = ledger_rows(cc, "SELECT session, call_id FROM calls WHERE role='search'")
    assert len(rows) == 4 and all(s.startswith("s:mcp-proxy:") and c.startswith("s:rpc:") for s, c in rows), rows


@SDK_CLIENT
def test_sdk_client_with_server_memory_behind_the_proxy(cc: Harness, tools: Tools) -> None:
    cc.team_policy(GRAPH_POLICY)
    cc.use_memory_server()

    async def script(session: Any) -> dict[str, Any]:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        search = await session.call_tool("search_nodes", {"query": "auth"})
        names = [e["name"] for e in json.loads(_text(search).split(NOTE)[0])["entities"]]
        held = sorted({"AuthService", "AuthMiddleware", "TokenStore", "LoginRoute", "RefreshWorker", "AuditLog"}
                      - set(names))  # fmt: skip
        return {"listed": listed, "search": search, "names": names,
                "held": await session.call_tool("open_nodes", {"names": [held[0]]}),
                "shown": await session.call_tool("open_nodes", {"names": [names[0]]}),
                "graph": await session.call_tool("read_graph", {})}  # fmt: skip

    out = _sdk_run(cc, ["memory", tools.node, str(tools.server_memory)], script,
                   {"MEMORY_FILE_PATH": str(cc.graph_file)})  # fmt: skip
    assert out["listed"]["search_nodes"].output_schema is None  # hidden: the text is what was counted
    search = out["search"]
    assert not search.is_error and search.structured_content is None
    assert 1 <= len(out["names"]) <= 3 and NOTE in _text(search)
    assert o200k(_text(search)) <= 1200
    assert out["held"].is_error and "not surfaced" in _text(out["held"])
    assert not out["shown"].is_error and out["names"][0] in _text(out["shown"])
    assert out["graph"].is_error and _text(out["graph"]).startswith("memory-governor:")
